"""What a class's node table and the store keep of why nodes fail a pod, and when they let go
(issue 38's speed work): each row's first failing filter and its reasons
(rulesched.engine.NodeTable.failures, group_reasons), kept until the row's node changes; and
whether a node's pods hold claims evicting them frees (the store's memo, shared by every class
asking the same: rulesched.semantics.dra_pod.PodClaims.unresolvable), kept until the node or
the claims on it change. Each case compares a replay through `simulate` with the node-by-node
walk (`--explain`, which keeps none of them) and fails when the invalidation is removed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import openb_to_k8s  # noqa: E402
from openb import MILLI, GpuNode, TracePod  # noqa: E402

from rulesched.engine.kept_failures import first_seen  # noqa: E402
from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.semantics.dra_pod import RELEASABLE  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402
from tests.helpers.gpu_replay import replay  # noqa: E402


def test_a_row_whose_node_changed_is_asked_again_which_filter_it_fails_first() -> None:
    """A pod too big for the node's cpus fails there on cpu (its GPU is to be had); a pod taking
    both GPUs goes there; the next pod of the first one's class fails there on its claim now,
    which comes first: the class's kept first failure (cpu) must not be reused."""
    nodes = [GpuNode("a", 8000, 262_144, 2, "T4")]
    big = [TracePod(f"c{i}", 16_000, 4096, 1, MILLI, ()) for i in range(2)]
    pods = [big[0], TracePod("g", 1000, 4096, 2, MILLI, ()), big[1]]
    rows = replay(nodes, pods, 1, explain=False)
    assert "Insufficient cpu" in str(rows[0][2])
    assert "cannot allocate all claims" in str(rows[2][2]) and "Insufficient cpu" not in str(rows[2][2])
    assert rows == replay(nodes, pods, 1, explain=True)


def test_a_rows_reasons_are_asked_again_once_its_node_changed() -> None:
    """A class fails everywhere on cpu alone; pods of another class then take memory on every
    node (more than a walk checks node by node, so the rows are asked as columns, which keep no
    reasons); the class's next pod fails on cpu and memory: the reasons kept per row (codes in
    rulesched.engine.kept_failures) must not be reused for the changed rows."""
    nodes = [GpuNode(f"n{i:02}", 8000, 65_536, 1, "T4") for i in range(40)]
    big = [TracePod(f"c{i}", 16_000, 30_000, 0, 0, ()) for i in range(2)]
    fillers = [TracePod(f"m{i:02}", 100, 40_000, 0, 0, ()) for i in range(40)]
    pods = [big[0], *fillers, big[1]]
    rows = replay(nodes, pods, 1, explain=False)
    assert "Insufficient cpu" in str(rows[0][2]) and "Insufficient memory" not in str(rows[0][2])
    assert "40 Insufficient memory" in str(rows[-1][2])
    assert rows == replay(nodes, pods, 1, explain=True)


def test_whether_preemption_helps_is_asked_again_across_classes_once_the_node_changed() -> None:
    """As tests/test_gpu_replay_property.py's case, with the two big pods classes apart (their
    memory): the second asks the store's memo, which the first filled for the empty nodes (the
    claims placed on them drop those answers; the node's generation would too)."""
    nodes = [GpuNode("a", 32_000, 262_144, 1, "T4"), GpuNode("b", 64_000, 262_144, 2, "T4")]
    big = [TracePod("q0", 8000, 4096, 4, MILLI, ()), TracePod("q1", 8000, 8192, 4, MILLI, ())]
    shared = [TracePod(f"p{i}", 4000, 4096, 1, 500, ()) for i in range(4)]
    pods = [big[0], *shared, big[1]]
    rows = replay(nodes, pods, 1, explain=False)
    assert "Preemption is not helpful" in str(rows[0][2])
    assert "No preemption victims found" in str(rows[-1][2])
    assert rows == replay(nodes, pods, 1, explain=True)


def test_the_store_forgets_what_a_nodes_claims_free_when_they_change(tmp_path: Path) -> None:
    """A claim allocated on a node's devices changes (its reservedFor, say): the node's kept
    answer goes, though the node and its devices may look the same."""
    nodes = [GpuNode("a", 32_000, 262_144, 2, "T4")]
    pods = [TracePod("p", 4000, 4096, 1, 500, ())]
    path = tmp_path / "cluster.json"
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": list(openb_to_k8s.objects(nodes, pods, [0]))})
    )
    cluster = load_cluster([str(path)])
    store = cluster.store(provision=True)
    sim = Simulation(load_rules([resolve_rules_path("gpu-fragmentation")]), store, SchedulerSettings(seed=1))
    sim.add(cluster.pending_pods[0])
    while sim.schedule_one() is not None:
        pass
    (key,) = [k for k, c in store.dra.state.claims.items() if c.allocation is not None]
    store.dra.memo[(RELEASABLE, "a")] = (object(), 0, True)
    store.dra.memo[(RELEASABLE, "b")] = (object(), 0, True)
    claim = store.dra.state.claims[key]
    store.dra.put("claims", key, dataclasses.replace(claim, reserved_for=()))
    assert (RELEASABLE, "a") not in store.dra.memo
    assert (RELEASABLE, "b") in store.dra.memo


@given(
    st.one_of(
        st.lists(st.integers(0, 40), max_size=300),
        st.builds(lambda code, rows: [code] * rows, st.integers(0, 40), st.integers(0, 300)),  # (one reason)
    )
)
def test_first_seen_numbers_reasons_in_the_order_their_first_row_has_them(codes: list[int]) -> None:
    """first_seen (one reason told by the bounds, else dict.fromkeys and a table) equals the
    sort it replaced (np.unique with its first indices and inverse, re-ranked by first row)."""
    values = [(f"reason {i}",) for i in range(41)]
    array = np.array(codes, dtype=np.int32)
    found = first_seen(array, values)
    distinct, first, inverse = np.unique(array, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(order), dtype=np.intp)
    rank[order] = np.arange(len(order), dtype=np.intp)
    assert found.codes.tolist() == rank[inverse].reshape(-1).tolist()
    assert found.reasons == [values[int(distinct[o])] for o in order.tolist()]
    assert [found.reasons[c] for c in found.codes.tolist()] == [values[c] for c in codes]
