"""What the store and the sessions keep from pod to pod for DRA pods (issue 38's per-pod costs)
equals what is worked out afresh, through a GPU replay (FGD, the openb converter's objects):

- the allocator's view of what claims hold (rulesched.cluster.dra._Held: its tables lent to the
  views made and copied only before they change) equals ``allocated_state`` of the claims, and a
  view taken earlier stays what it was when taken;
- ``node.devices`` (each device's view kept while claims hold the same of it, each node's pools
  kept while its slices and Node stay) equals ``node_devices`` worked out from scratch;
- a session's claims key (kept by the specs' identity: ClaimsKeys) equals ``dra_claims_key``.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import openb_to_k8s  # noqa: E402
from openb import MILLI, GpuNode, TracePod  # noqa: E402

from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.lang.evaluation import claims_key  # noqa: E402
from rulesched.lang.evaluation.claims_key import ClaimsKeys, dra_claims_key  # noqa: E402
from rulesched.model.dra import ClaimSpec, DeviceRequest, ExactRequest  # noqa: E402
from rulesched.model.objects import Pod, PodClaim  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.semantics.dra_devices import allocated_state  # noqa: E402
from rulesched.semantics.dra_pod import with_claims  # noqa: E402
from rulesched.semantics.dra_views import device_use, node_devices  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402
from tests.helpers.gpu_replay import gpu_nodes, gpu_pods  # noqa: E402


def _fresh_devices(store: Any, name: str) -> tuple[Any, ...]:
    """node.devices of node ``name`` worked out from scratch (nothing kept)."""
    state = store.dra.state
    slices = list(state.slices.values())
    reached = [s for s in slices if s.node_name == name] + [s for s in slices if not s.node_name]
    node = store.node_view(name).node
    return node_devices(node, reached, slices, device_use(list(state.claims.values()))) if slices else ()


def _check_replay(nodes: list[GpuNode], pods: list[TracePod], seed: int) -> int:
    """Replays ``pods`` on ``nodes``, checking the kept state against the fresh one after every
    pod; returns how many pods were placed."""
    rank = list(range(len(nodes)))
    random.Random(seed).shuffle(rank)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": list(openb_to_k8s.objects(nodes, pods, rank))}, f)
        f.flush()
        cluster = load_cluster([f.name])
    store = cluster.store(provision=True)
    sim = Simulation(load_rules([resolve_rules_path("gpu-fragmentation")]), store, SchedulerSettings(seed=seed))
    keys = ClaimsKeys()
    for pod in cluster.pending_pods:
        sim.add(pod)
        bound = with_claims(pod, store.dra.state)
        assert keys.key(bound) == dra_claims_key(bound)
    taken: list[tuple[Any, Any]] = []  # (a view the store lent, what the claims held when it was taken)
    placed = 0
    while (result := sim.schedule_one()) is not None:
        placed += result.node is not None
        snapshot = store.snapshot()
        claims = list(store.dra.state.claims.values())
        taken.append((snapshot.dra_allocated, allocated_state(claims)))
        for view, then in taken:
            assert view == then
        for info in snapshot.nodes:
            assert info.devices == _fresh_devices(store, info.name)
    return placed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(gpu_nodes(), gpu_pods(), st.integers(0, 2**16))
def test_what_the_store_keeps_for_dra_pods_equals_it_worked_out_afresh(
    nodes: list[GpuNode], pods: list[TracePod], seed: int
) -> None:
    _check_replay(nodes, pods, seed)


def test_the_checks_see_shared_and_whole_gpus_placed() -> None:
    """The replay the property runs places shared and whole GPUs on the same nodes (views kept
    and remade, tables lent and copied), until pods fail."""
    nodes = [GpuNode("a", 32_000, 262_144, 2, "T4"), GpuNode("b", 64_000, 262_144, 4, "A100")]
    pods = [TracePod(f"p{i}", 2000, 1024, 1, [250, 500, 810][i % 3], ()) for i in range(12)]
    pods += [TracePod(f"q{i}", 4000, 1024, 2, MILLI, ()) for i in range(3)]
    assert 0 < _check_replay(nodes, pods, 7) < len(pods)


SPECS = [ClaimSpec(), ClaimSpec((DeviceRequest("gpu", ExactRequest("gpu.example.com")),))]


@st.composite
def claim_pods(draw: st.DrawFn) -> Pod:
    """A pod of one or two claim entries: specs shared objects, equal copies, missing; some allocated."""
    entries = []
    for name in draw(st.lists(st.sampled_from(["gpu", "nic"]), min_size=1, max_size=2, unique=True)):
        which = draw(st.integers(0, len(SPECS)))
        spec = None if which == len(SPECS) else SPECS[which]
        if spec is not None and draw(st.booleans()):
            spec = ClaimSpec(spec.requests)  # (equal, another object)
        entries.append(PodClaim(name, generated=f"{name}-c", spec=spec, allocated=draw(st.integers(0, 5)) == 0))
    return Pod(name="p", namespace="ns", resource_claims=tuple(entries))


@given(st.lists(claim_pods(), min_size=1, max_size=30), st.integers(1, 4))
def test_a_sessions_claims_key_is_the_claims_key(pods: list[Pod], kept: int) -> None:
    """Kept by the specs' identity (and forgotten past ``kept`` entries), the key is the one
    worked out afresh: equal specs give equal keys, another spec another key."""
    before = claims_key._KEPT
    claims_key._KEPT = kept
    try:
        keys = ClaimsKeys()
        for pod in pods + pods:
            assert keys.key(pod) == dra_claims_key(pod)
    finally:
        claims_key._KEPT = before
