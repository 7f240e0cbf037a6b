"""Property: a GPU replay through `simulate` places every pod, and says the same of every pod that
fails, whether the engine's caches answer or each node is asked afresh (issue 38's speed work).

The replay's fast path keeps answers across pods: a class's filter outcomes, score vectors and
the unresolvable answers preemption reads per node (rulesched.engine.NodeTable), the allocator's
state kept per pool and node.devices refreshed in place (rulesched.cluster.dra). The plain path
is `simulate --explain`: the node-by-node walk (rulesched.scheduler.evaluate), every node's
filters, reasons and scores asked again for every pod. Generated here: small clusters of the
trace's GPU nodes and pod sequences of its kinds (CPU pods, shared GPUs, whole GPUs, some tied to
a GPU model) with several memory sizes per shape (pods alike but for memory are classes apart
for the filters), long enough that the cluster fills and pods fail: a stale row, a class key
missing a field, an answer shared where it must not be, shows as a different node or message.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from openb import MILLI, GpuNode, TracePod  # noqa: E402

from tests.helpers.gpu_replay import gpu_nodes, gpu_pods, replay  # noqa: E402


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(gpu_nodes(), gpu_pods(), st.integers(0, 2**16))
def test_a_gpu_replay_is_the_same_with_and_without_the_engines_caches(
    nodes: list[GpuNode], pods: list[TracePod], seed: int
) -> None:
    fast = replay(nodes, pods, seed, explain=False)
    plain = replay(nodes, pods, seed, explain=True)
    assert fast == plain


def test_the_property_fills_the_cluster() -> None:
    """The generated runs reach the interesting part: a cluster full enough that pods fail."""
    nodes = [GpuNode("a", 32_000, 262_144, 2, "T4"), GpuNode("b", 64_000, 65_536, 4, "A100")]
    pods = [TracePod(f"p{i}", 4000, [1024, 4096][i % 2], 1, [250, 470, MILLI][i % 3], ()) for i in range(24)] + [
        dataclasses.replace(TracePod("q", 8000, 4096, 2, MILLI, ()), name=f"q{i}") for i in range(4)
    ]
    rows = replay(nodes, pods, 5, explain=False)
    assert any(node is None for _, node, *_ in rows)
    assert rows == replay(nodes, pods, 5, explain=True)


def test_a_node_that_gained_device_holders_is_asked_again_whether_preemption_helps() -> None:
    """A pod of four GPUs fails on empty nodes (no claim there a preemption could free:
    unresolvable); once shared pods hold GPUs there, the next pod of its class fails too, but
    preemption could help now: the class's kept answers for those nodes must not be reused."""
    nodes = [GpuNode("a", 32_000, 262_144, 1, "T4"), GpuNode("b", 64_000, 262_144, 2, "T4")]
    big = [TracePod(f"q{i}", 8000, 4096, 4, MILLI, ()) for i in range(2)]
    shared = [TracePod(f"p{i}", 4000, 4096, 1, 500, ()) for i in range(4)]
    rows = replay(nodes, [big[0], *shared, big[1]], 1, explain=False)
    assert "Preemption is not helpful" in str(rows[0][2])
    assert "No preemption victims found" in str(rows[-1][2])
    assert rows == replay(nodes, [big[0], *shared, big[1]], 1, explain=True)
