"""Preemption frees the victims' devices (issue 36), in `simulate` and as units.

kube-scheduler 1.37 does not: its DynamicResources plugin has no PreFilter extensions and every
Filter failure is UnschedulableAndUnresolvable, so a DRA pod never preempts for devices. The
semantics here are KEP-5690's ("DRA: preemption", kubernetes/enhancements#5690, deferred to
1.38): a victim's claims are released in the dry run when every pod they are reserved for is a
victim (or terminating) and every device is local to the node; a claim shared with a surviving
pod, or with devices published for several nodes, stays. Cases named "KEP-5690: ..." are the
scenarios its design section describes, as far as they go without its nominations (which hold
the freed devices for the preemptor: not done, see docs/dra.md).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.lang import RuleSet, load_rules, resolve_rules_path
from rulesched.model import Pod
from rulesched.model.dra import Allocation, Consumer, DeviceResult, ResourceClaim
from rulesched.model.objects import PodClaim
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.queue import Event
from rulesched.semantics.dra_devices import AllocatedState, allocated_state, released
from rulesched.semantics.dra_pod import CANNOT_ALLOCATE
from rulesched.semantics.dra_preemption import freed_by, releasable, unsettled
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import load_cluster
from tests.helpers.dra_files import DRIVER, GPU_CLASS, gpus, node, pod, simulate, write


@functools.cache
def default_rules() -> RuleSet:
    return load_rules([resolve_rules_path("default")])


def held_claim(name: str, device: str, users: list[str], pool: str = "n1") -> dict[str, Any]:
    """A claim allocated to ``device`` of pool ``pool``, reserved for the pods ``users``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pool]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in users],
        },
    }


def gpu_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }


def uses(claim: str) -> list[dict[str, str]]:
    return [{"name": "gpu", "resourceClaimName": claim}]


def two_gpus_held(priorities: tuple[int, int] = (0, 0)) -> list[dict[str, Any]]:
    """n1 with two GPUs, each held by a running pod's claim; a pending pod of priority 100
    wanting one."""
    return [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 2),
        held_claim("claim-a", "gpu-0", ["a"]),
        held_claim("claim-b", "gpu-1", ["b"]),
        pod("a", "n1", priority=priorities[0], resourceClaims=uses("claim-a")),
        pod("b", "n1", priority=priorities[1], resourceClaims=uses("claim-b")),
        gpu_claim("claim-p"),
        pod("p", priority=100, resourceClaims=uses("claim-p")),
    ]


def test_a_pod_preempts_for_a_device_and_gets_the_victims(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The device is all the pod lacks: one victim (the less important) is evicted, its claim
    released by the controller, and the pod gets its device."""
    rows = simulate(write(tmp_path, two_gpus_held((5, 1))), capsys)
    p = rows["default/p"]
    assert p["victims"] == ["default/b"]
    assert p["node"] == "n1"
    cluster = load_cluster([write(tmp_path, two_gpus_held((5, 1)))])
    assert cluster.dra.claims["default/claim-b"].allocation is not None  # (the file's, before the run)


def test_after_the_preemption_the_freed_device_is_the_preemptors(tmp_path: Path) -> None:
    """The store after the simulation: the victim's claim deallocated and unreserved, the
    preemptor's claim holding the very device it freed, the survivor's untouched."""
    cluster = load_cluster([write(tmp_path, two_gpus_held((5, 1)))])
    store = cluster.store()
    sim = Simulation(default_rules(), store, SchedulerSettings())
    for p in cluster.pending_pods:
        sim.add(p)
    sim.run()
    claims = store.dra.state.claims
    assert claims["default/claim-b"].allocation is None and claims["default/claim-b"].reserved_for == ()
    assert "resource.kubernetes.io/delete-protection" not in claims["default/claim-b"].finalizers
    got = claims["default/claim-p"].allocation
    assert got is not None and [r.device for r in got.devices] == ["gpu-1"]
    assert [r.device for r in claims["default/claim-a"].allocation.devices] == ["gpu-0"]  # type: ignore[union-attr]
    assert [c.uid for c in claims["default/claim-p"].reserved_for] == ["uid-p"]


def test_a_node_short_of_devices_is_unschedulable_where_evicting_frees_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node whose devices are held by its own pods' claims is Unschedulable (preemption may
    help: it was UnschedulableAndUnresolvable in 1.37); one with no such pods stays
    unresolvable. With equal priorities nothing is evicted."""
    items = [*two_gpus_held((100, 100)), node("n2"), gpus("n2", 0)]
    rows = simulate(write(tmp_path, items), capsys)
    p = rows["default/p"]
    assert p["node"] is None and p["victims"] == []
    assert p["filtered"]["n1"] == [CANNOT_ALLOCATE]
    assert "n1" not in p["unresolvable"] and "n2" in p["unresolvable"]


def test_kep5690_a_claim_shared_with_a_surviving_pod_is_not_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """KEP-5690 (RemovePod: "not shared claims still held by a non-preempted pod"): n1's only
    GPU is in a claim reserved for a low-priority pod and a high-priority one; evicting the
    low one frees nothing, so nothing is evicted."""
    items = [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 1),
        held_claim("shared", "gpu-0", ["low", "high"]),
        pod("low", "n1", priority=0, resourceClaims=uses("shared")),
        pod("high", "n1", priority=1000, resourceClaims=uses("shared")),
        gpu_claim("claim-p"),
        pod("p", priority=100, resourceClaims=uses("claim-p")),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    p = rows["default/p"]
    assert p["node"] is None and p["victims"] == []
    assert "n1" not in p["unresolvable"]  # (its pods hold the claim: preemption is tried, and finds nothing)


def test_kep5690_a_claim_reserved_for_two_victims_is_freed_when_both_go(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """KEP-5690 ("every reserving pod is in victims"): the GPU's claim is shared by two
    low-priority pods; both must go for it to be freed, and both are evicted."""
    items = [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 1),
        held_claim("shared", "gpu-0", ["x", "y"]),
        pod("x", "n1", priority=0, resourceClaims=uses("shared")),
        pod("y", "n1", priority=0, resourceClaims=uses("shared")),
        gpu_claim("claim-p"),
        pod("p", priority=100, resourceClaims=uses("claim-p")),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    p = rows["default/p"]
    assert sorted(p["victims"]) == ["default/x", "default/y"] and p["node"] == "n1"


def test_kep5690_devices_not_published_for_the_node_by_name_are_not_freed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """KEP-5690: only claims whose devices all use the slice's (or device's) nodeName are
    released; a device published with a node selector (network-attached, several nodes) is
    not, so nothing is evicted for it."""
    slice_ = gpus("n1", 1)
    del slice_["spec"]["nodeName"]
    slice_["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}
        ]
    }
    items = [
        node("n1"),
        GPU_CLASS,
        slice_,
        held_claim("claim-a", "gpu-0", ["a"]),
        pod("a", "n1", priority=0, resourceClaims=uses("claim-a")),
        gpu_claim("claim-p"),
        pod("p", priority=100, resourceClaims=uses("claim-p")),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p"]["victims"] == [] and rows["default/p"]["node"] is None


def test_victims_that_free_nothing_the_pod_needs_are_reprieved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SelectVictimsOnNode's reprieve sees the devices too: of two low-priority pods, only the
    one whose claim holds the GPU goes; the one holding only CPU stays."""
    items = [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 1),
        held_claim("claim-a", "gpu-0", ["a"]),
        pod("a", "n1", priority=0, cpu="1", resourceClaims=uses("claim-a")),
        pod("c", "n1", priority=0, cpu="1"),
        gpu_claim("claim-p"),
        pod("p", priority=100, cpu="1", resourceClaims=uses("claim-p")),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p"]["victims"] == ["default/a"] and rows["default/p"]["node"] == "n1"


def test_the_preemptor_waits_for_its_victims_claims_to_be_deallocated(tmp_path: Path) -> None:
    """KEP-5690's settling window (t1 to t3): the victim is gone but the controller has not
    deallocated its claim yet. The preemptor does not preempt again meanwhile (it would evict
    the other pod for nothing); once the claim is deallocated it gets the device."""
    cluster = load_cluster([write(tmp_path, two_gpus_held((5, 1)))])
    store = cluster.store()
    sim = Simulation(default_rules(), store, SchedulerSettings())
    evicted: list[str] = []

    class SlowController:  # evicts, but leaves the claims to be released later
        def evict(self, victim: Any, preemptor: Any) -> None:
            store.remove_pod(victim.key)
            evicted.append(victim.key)

    sim.scheduler.evictor = SlowController()
    for p in cluster.pending_pods:
        sim.add(p)
    sim.run()
    assert evicted == ["default/b"]
    assert sim.history["default/p"].node is None
    assert "waiting for the preempted pods" in (sim.history["default/p"].last.preemption.message or "")  # type: ignore[union-attr]
    b = next(p for p in cluster.pods if p.name == "b")
    assert store.dra.pod_gone(b) == ["default/claim-b"]  # the controller catches up
    sim.scheduler.queue.move(Event.OTHER)  # (the claim's informer event, in run)
    sim.run()
    assert evicted == ["default/b"]
    assert sim.history["default/p"].node == "n1"


# --- units ------------------------------------------------------------------------------------


def _result(device: str, share: str = "", consumed: dict[str, int] | None = None) -> DeviceResult:
    return DeviceResult(
        request="r", driver=DRIVER, pool="n1", device=device, share_id=share, consumed_capacity=consumed
    )


def test_released_gives_back_devices_shares_and_capacity() -> None:
    a = Allocation((_result("gpu-0"), _result("gpu-1", "s1", {"memory": 10})))
    b = Allocation((_result("gpu-1", "s2", {"memory": 30}),))
    state = allocated_state([a, b])
    left = released(state, [a])
    assert left == allocated_state([b])
    assert released(state, [a, b]) == AllocatedState()
    assert released(state, []) is state


def _claim(name: str, users: list[str], device: str = "gpu-0") -> ResourceClaim:
    return ResourceClaim(
        name=name,
        namespace="default",
        allocation=Allocation((_result(device),)),
        reserved_for=tuple(Consumer("pods", u, f"uid-{u}") for u in users),
    )


def test_releasable_and_unsettled() -> None:
    claims = {
        "default/solo": _claim("solo", ["a"]),
        "default/shared": _claim("shared", ["a", "b"], "gpu-1"),
        "default/mine": _claim("mine", ["a"], "gpu-2"),
    }
    a = Pod("a", uid="uid-a", resource_claims=(PodClaim("x", "solo"), PodClaim("y", "shared"), PodClaim("z", "mine")))
    every = lambda _d: True  # noqa: E731
    assert [c.name for c in releasable(claims, [a], {"uid-a"}, every, keep={"default/mine"})] == ["solo"]
    assert [c.name for c in releasable(claims, [a], {"uid-a", "uid-b"}, every)] == ["solo", "shared", "mine"]
    assert releasable(claims, [a], {"uid-a"}, lambda d: d[2] != "gpu-0") == [claims["default/mine"]]
    preemptor = Pod("p", uid="uid-p", resource_claims=(PodClaim("g", "mine"),))
    keys, gone = freed_by(claims, [a], preemptor)
    assert keys == ["default/solo"] and gone == frozenset({"uid-a"})
    assert unsettled(claims, keys, gone) == ["default/solo"]
    claims["default/solo"] = dataclasses.replace(claims["default/solo"], allocation=None, reserved_for=())
    assert unsettled(claims, keys, gone) == []


# --- the property -----------------------------------------------------------------------------


@st.composite
def preemption_clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes with 0-3 GPUs, some held by running pods of random priorities (a claim of one or
    two devices, sometimes reserved for two pods of the node), and pending pods of random
    priorities asking one or two GPUs (and some CPU, which may also be short)."""
    items: list[dict[str, Any]] = [GPU_CLASS]
    for n in range(draw(st.integers(1, 3))):
        name = f"n{n + 1}"
        count = draw(st.integers(0, 3))
        small = node(name)
        small["status"]["allocatable"]["cpu"] = str(draw(st.integers(1, 4)))
        items += [small, gpus(name, count)]
        free = [f"gpu-{i}" for i in range(count)]
        for h in range(draw(st.integers(0, 3))):
            if not free:
                break
            take = free[: draw(st.integers(1, min(2, len(free))))]
            free = free[len(take) :]
            users = [f"{name}-r{h}"] + ([f"{name}-r{h}b"] if draw(st.booleans()) else [])
            claim = held_claim(f"{name}-c{h}", take[0], users, pool=name)
            claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = len(take)
            claim["status"]["allocation"]["devices"]["results"] = [
                {"request": "gpu", "driver": DRIVER, "pool": name, "device": d} for d in take
            ]
            items.append(claim)
            for u in users:
                items.append(
                    pod(
                        u,
                        name,
                        priority=draw(st.sampled_from([0, 10, 100])),
                        cpu="0",
                        resourceClaims=uses(claim["metadata"]["name"]),
                    )
                )
    for i in range(draw(st.integers(1, 4))):
        claim = gpu_claim(f"want-{i}")
        claim["spec"]["devices"]["requests"][0]["exactly"]["count"] = draw(st.integers(1, 2))
        cpu = draw(st.sampled_from(["0", "1"]))
        items += [
            claim,
            pod(f"p{i}", priority=draw(st.sampled_from([0, 50, 200])), cpu=cpu, resourceClaims=uses(f"want-{i}")),
        ]
    return items


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(preemption_clusters())
def test_no_device_is_over_allocated_after_preemption(tmp_path: Path, items: list[dict[str, Any]]) -> None:
    """After a simulation with preemption: no device is held by two claims; every allocated
    claim is reserved only for pods the store holds on the claim's node (the evicted pods'
    claims released), every placed pod's claims are allocated on its node, and a pod that
    evicted others was placed (its dry run freed no more than the evictions did)."""
    cluster = load_cluster([write(tmp_path, items)])
    store = cluster.store()
    sim = Simulation(default_rules(), store, SchedulerSettings())
    for p in cluster.pending_pods:
        sim.add(p)
    sim.run()
    placed = {p.uid: (p, store.pod_node(p.key)) for p in store.pods()}
    holders: dict[tuple[str, str, str], str] = {}
    for claim in store.dra.state.claims.values():
        if claim.allocation is None:
            assert claim.reserved_for == (), claim.key
            continue
        pinned = claim.allocation.node_selector[0].match_fields[0].values[0]  # type: ignore[index]
        for r in claim.allocation.devices:
            assert r.pool == pinned, (claim.key, r)
            assert holders.setdefault(r.device_id, claim.key) == claim.key, f"{r.device_id} given twice"
        assert claim.reserved_for, claim.key  # (an allocated claim nobody uses would be deallocated)
        for consumer in claim.reserved_for:
            assert consumer.uid in placed, f"{claim.key} reserved for {consumer.name}, who is gone"
            assert placed[consumer.uid][1] == pinned
    for p, where in placed.values():
        for key in (f"{p.namespace}/{e.claim}" for e in p.resource_claims):
            claim = store.dra.state.claims[key]
            assert claim.allocation is not None and any(c.uid == p.uid for c in claim.reserved_for), (p.key, key)
            assert claim.allocation.node_selector[0].match_fields[0].values[0] == where  # type: ignore[index]
    for victim in sim.evicted:  # (gone, and its claims with it: checked above through reservedFor)
        assert store.pod_node(victim.key) is None
    # the dry runs freed what evicting really frees: a pod that evicted was placed after all
    for history in sim.history.values():
        if history.victims:
            assert history.node is not None, f"{history.pod.key} evicted {[v.key for v in history.victims]} in vain"


def test_kep5690_freed_devices_are_held_for_the_preemptor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """KEP-5690's integration case "devices freed by a preemption are not allocated to another
    pod of equal or lower priority before the preemptor has been scheduled": two pods of
    priority 50 want n1's only GPU, held by a pod of priority 0. The first evicts it; the
    second, of equal priority, does not take the freed GPU while the first is nominated there
    (the nominated pod's claims are allocated first in the filter's check with nominated pods)."""
    items = [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 1),
        held_claim("claim-r", "gpu-0", ["r"]),
        pod("r", "n1", priority=0, cpu="0", resourceClaims=uses("claim-r")),
        gpu_claim("want-0"),
        pod("p0", priority=50, cpu="0", resourceClaims=uses("want-0")),
        gpu_claim("want-1"),
        pod("p1", priority=50, cpu="0", resourceClaims=uses("want-1")),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p0"]["victims"] == ["default/r"] and rows["default/p0"]["node"] == "n1"
    assert rows["default/p1"]["node"] is None and rows["default/p1"]["victims"] == []
