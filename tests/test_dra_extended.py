"""DRA-backed extended resources (KEP-5004, kube-scheduler 1.37's DRAExtendedResource): plain
``resources.requests`` of an extended resource served by a DeviceClass's devices on nodes that
do not offer it in their allocatable.

Upstream's tables: pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources_test.go
at v1.37.2, Test_createRequestsAndMappings_requests and Test_createRequestsAndMappings_mappings
(every case; their mock class resolver is DeviceClasses naming the resources here). The rest:
`simulate` end to end (the claim made, its devices, device-plugin nodes beside DRA ones).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.model.decode import decode_pod
from rulesched.model.dra import DeviceClass
from rulesched.semantics.dra_extended import EXTENDED_CLAIM_ANNOTATION, claim_requests, class_for
from rulesched.simulate.load import load_cluster
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess, extender_args, preemption_args

GPU = "example.com/gpu"
IMPLICIT = "deviceclass.resource.kubernetes.io/classInit"


def make_pod(*containers: tuple[str, dict[str, str]]) -> Any:
    """st.MakePod's Res (kind "res": con<i>), InitReq ("init": init-con<i>) and SidecarReq
    ("sidecar": sidecar-con<i>), in call order."""
    regular: list[dict[str, Any]] = []
    init: list[dict[str, Any]] = []
    for kind, res in containers:
        resources = {"requests": res, "limits": res}
        if kind == "res":
            regular.append({"name": f"con{len(regular)}", "image": "x", "resources": resources})
        else:
            c = {
                "name": f"{'init' if kind == 'init' else 'sidecar'}-con{len(init)}",
                "image": "x",
                "resources": resources,
            }
            if kind == "sidecar":
                c["restartPolicy"] = "Always"
            init.append(c)
    spec: dict[str, Any] = {"containers": regular}
    if init:
        spec["initContainers"] = init
    return decode_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "my-pod", "uid": "1234"}, "spec": spec})


CLASSES = {
    "class": DeviceClass("class", extended_resource_name=GPU),
    "class1": DeviceClass("class1", extended_resource_name=GPU + "1"),
    "classInit": DeviceClass("classInit", extended_resource_name=GPU + "init"),
}
DEV_MAP = {"class": CLASSES["class"]}
DEV_MAP2 = {k: CLASSES[k] for k in ("class", "class1")}
DEV_MAP_INIT = {k: CLASSES[k] for k in ("class", "classInit")}

POD1 = make_pod(("res", {GPU: "1", GPU + "1": "2"}))
POD2 = make_pod(("res", {GPU: "1"}), ("res", {GPU + "1": "2"}))
POD_INIT = make_pod(("res", {GPU: "1"}), ("init", {GPU + "init": "2"}))
POD_INIT2 = make_pod(("res", {GPU: "1"}), ("init", {GPU + "init": "1"}), ("init", {GPU + "init": "2"}))
POD_INIT3 = make_pod(
    ("res", {GPU: "1"}), ("init", {GPU + "init": "1"}), ("sidecar", {GPU + "init": "1"}), ("init", {GPU + "init": "2"})
)
POD1_INIT_IMPLICIT = make_pod(("init", {GPU + "init": "1", IMPLICIT: "2"}))
POD_INIT_IMPLICIT = make_pod(("res", {GPU: "1"}), ("init", {GPU + "init": "1"}), ("init", {IMPLICIT: "2"}))

# Test_createRequestsAndMappings_requests: (pod, extended resources, classes, [(name, class, count)])
REQUESTS = {
    "nil": (POD1, [], {}, []),
    "one resource match": (POD1, [GPU], DEV_MAP, [("container-0-request-0", "class", 1)]),
    "one resource match, one resource not match": (
        POD1,
        [GPU, GPU + "1"],
        DEV_MAP,
        [("container-0-request-0", "class", 1)],
    ),
    "two resources match": (
        POD1,
        [GPU, GPU + "1"],
        DEV_MAP2,
        [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
    ),
    "two containers match": (
        POD2,
        [GPU, GPU + "1"],
        DEV_MAP2,
        [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
    ),
    "one init container, one regular container": (
        POD_INIT,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
    ),
    "two init containers, one regular container": (
        POD_INIT2,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
    ),
    "three init containers, one sidecar, one regular container": (
        POD_INIT3,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [
            ("container-1-request-0", "classInit", 1),
            ("container-2-request-0", "classInit", 2),
            ("container-3-request-0", "class", 1),
        ],
    ),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_upstream_create_requests(case: str) -> None:
    pod, resources, classes, want = REQUESTS[case]
    requests, _ = claim_requests(pod, resources, classes)
    got = [(r.name, r.exactly.device_class_name, r.exactly.count) for r in requests]
    assert got == want


# Test_createRequestsAndMappings_mappings: (pod, resources, classes, [(request, container, resource)]),
# compared sorted by request then container, as upstream's test sorts them
MAPPINGS = {
    "one container, two requests": (
        POD1,
        [GPU, GPU + "1"],
        DEV_MAP2,
        [("container-0-request-0", "con0", GPU), ("container-0-request-1", "con0", GPU + "1")],
    ),
    "one container, one explicit and one implicit request": (
        POD1_INIT_IMPLICIT,
        [GPU, GPU + "init", IMPLICIT],
        DEV_MAP_INIT,
        [("container-0-request-0", "init-con0", IMPLICIT), ("container-0-request-1", "init-con0", GPU + "init")],
    ),
    "two containers, two requests": (
        POD2,
        [GPU, GPU + "1"],
        DEV_MAP2,
        [("container-0-request-0", "con0", GPU), ("container-1-request-0", "con1", GPU + "1")],
    ),
    "one init container, one regular container, one request": (
        POD_INIT,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [("container-0-request-0", "init-con0", GPU + "init"), ("container-1-request-0", "con0", GPU)],
    ),
    "three containers (two are init container), two requests": (
        POD_INIT2,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [
            ("container-1-request-0", "init-con0", GPU + "init"),
            ("container-1-request-0", "init-con1", GPU + "init"),
            ("container-2-request-0", "con0", GPU),
        ],
    ),
    "three containers (two are init container), both explicit and implicit resources": (
        POD_INIT_IMPLICIT,
        [GPU, GPU + "init", IMPLICIT],
        DEV_MAP_INIT,
        [
            ("container-0-request-0", "init-con0", GPU + "init"),
            ("container-1-request-0", "init-con1", IMPLICIT),
            ("container-2-request-0", "con0", GPU),
        ],
    ),
    "four containers (two are init container, one sidecar), three requests": (
        POD_INIT3,
        [GPU, GPU + "init"],
        DEV_MAP_INIT,
        [
            ("container-1-request-0", "init-con0", GPU + "init"),
            ("container-1-request-0", "sidecar-con1", GPU + "init"),
            ("container-2-request-0", "init-con2", GPU + "init"),
            ("container-3-request-0", "con0", GPU),
        ],
    ),
}


@pytest.mark.parametrize("case", list(MAPPINGS))
def test_upstream_create_mappings(case: str) -> None:
    pod, resources, classes, want = MAPPINGS[case]
    _, mappings = claim_requests(pod, resources, classes)
    got = sorted((m.request, m.container, m.resource) for m in mappings)
    assert got == want


def test_the_newer_class_serves_a_shared_name() -> None:
    """extendedresourcecache.go: of two classes naming one resource, the newer; equal
    creation times, the lower name; the implicit name is always the class's own."""
    older = DeviceClass("b-old", extended_resource_name=GPU, created=1.0)
    newer = DeviceClass("z-new", extended_resource_name=GPU, created=2.0)
    assert class_for(GPU, {c.name: c for c in (older, newer)}) is newer
    tie = DeviceClass("a-tie", extended_resource_name=GPU, created=2.0)
    assert class_for(GPU, {c.name: c for c in (older, newer, tie)}) is tie
    assert class_for("deviceclass.resource.kubernetes.io/b-old", {"b-old": older}) is older
    assert class_for("other.com/x", {"b-old": older}) is None


# --- simulate ---------------------------------------------------------------------------------


def _node(name: str, **extra: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", **extra}},
    }


def _pod(name: str, gpus: str = "1", priority: int = 0, node: str = "", claim: str = "") -> dict[str, Any]:
    res = {"cpu": "1", GPU: gpus}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "priority": priority,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": res, "limits": {GPU: gpus}}}],
        },
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if claim:
        pod["status"]["extendedResourceClaimStatus"] = {
            "resourceClaimName": claim,
            "requestMappings": [{"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-1"}],
        }
    return pod


GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"extendedResourceName": GPU, "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def _slice(node: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(count)],
        },
    }


def _run(tmp_path: Path, items: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    assert main(["simulate", str(path), "--output", "json", "--explain-full"]) == 0
    return {row["pod"]: row for row in json.loads(capsys.readouterr().out)["pods"]}


def test_extended_requests_are_served_by_dra_and_by_device_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """n1 publishes two GPUs as a ResourceSlice (DRA), n2 offers one in its allocatable (a
    device plugin), n3 neither: four pods asking one `example.com/gpu` each. Two go to n1 (a
    claim made for each), one to n2 (counted against its allocatable), the fourth fits nowhere:
    n2 "Insufficient" (resolvable, as NodeResourcesFit says), n1 and n3 devices short."""
    items = [GPU_CLASS, _node("n1"), _node("n2", **{GPU: "1"}), _node("n3"), _slice("n1", 2)]
    items += [_pod(f"p{i}") for i in range(4)]
    rows = _run(tmp_path, items, capsys)
    placed = sorted(rows[f"default/p{i}"]["node"] or "-" for i in range(4))
    assert placed == ["-", "n1", "n1", "n2"]
    last = next(r for r in rows.values() if r["node"] is None)
    assert last["filtered"]["n2"] == [f"Insufficient {GPU}"]
    assert last["filtered"]["n1"] == last["filtered"]["n3"] == ["cannot allocate all claims"]
    assert "n2" not in last["unresolvable"] and "n3" in last["unresolvable"]


def test_the_claim_made_for_extended_resources(tmp_path: Path) -> None:
    """The claim made at Reserve: owned by the pod, annotated, one request per container
    (container-0-request-1: `example.com/gpu` is the container's second request name after
    cpu), allocated to the node's device, reserved for the pod; the placed pod names it."""
    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.simulate.driver import Simulation

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([GPU_CLASS, _node("n1"), _slice("n1", 2), _pod("p", gpus="2")]))
    cluster = load_cluster([path])
    store = cluster.store()
    sim = Simulation(load_rules([resolve_rules_path("default")]), store, SchedulerSettings())
    for p in cluster.pending_pods:
        sim.add(p)
    sim.run()
    (claim,) = store.dra.state.claims.values()
    assert claim.name.startswith("p-extended-resources-") and len(claim.name) == len("p-extended-resources-") + 5
    assert claim.owner == ("Pod", "p", "uid-p") and claim.annotations[EXTENDED_CLAIM_ANNOTATION] == "true"
    (request,) = claim.spec.requests
    assert request.name == "container-0-request-1" and request.exactly.count == 2
    assert request.exactly.device_class_name == "gpu.example.com"
    assert claim.allocation is not None and sorted(r.device for r in claim.allocation.devices) == ["gpu-0", "gpu-1"]
    assert [c.uid for c in claim.reserved_for] == ["uid-p"]
    placed = next(p for p in store.pods() if p.name == "p")
    assert placed.node_name == "n1" and placed.extended_claim == claim.name
    assert placed.requests[GPU] == 2000  # (the stored pod keeps its requests: only rules' view drops them)


def test_a_pod_preempts_for_devices_an_extended_claim_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A running pod's extended-resource claim holds n1's only GPU; a pod of higher priority
    asking `example.com/gpu` evicts it (its claim released: tests/test_dra_preemption.py's
    semantics) and gets the device."""
    held = _extended_claim("low-extended-resources-abcde", "low", "uid-low", owned=False)
    items = [GPU_CLASS, _node("n1"), _slice("n1", 1), held]
    items += [_pod("low", node="n1", claim="low-extended-resources-abcde"), _pod("high", priority=100)]
    rows = _run(tmp_path, items, capsys)
    assert rows["default/high"]["victims"] == ["default/low"] and rows["default/high"]["node"] == "n1"
    # KEP-5690's "freed devices held for the preemptor", for extended resources: a second pod of
    # the same priority does not take the GPU the first one freed
    items.append(_pod("same", priority=100))
    rows = _run(tmp_path, items, capsys)
    placed = {k: r["node"] for k, r in rows.items() if k != "default/low"}
    assert sorted(n or "-" for n in placed.values()) == ["-", "n1"]
    preemptor = next(k for k, r in rows.items() if r["victims"])
    assert rows[preemptor]["node"] == "n1"


def test_without_a_class_extended_resources_stay_the_device_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No DeviceClass names the resource: NodeResourcesFit alone judges it, as before."""
    rows = _run(tmp_path, [_node("n1"), _node("n2", **{GPU: "1"}), _slice("n1", 2), _pod("p")], capsys)
    assert rows["default/p"]["node"] == "n2"
    assert rows["default/p"]["filtered"]["n1"] == [f"Insufficient {GPU}"]


def test_a_placement_without_the_cycles_allocations_makes_the_claim_too(tmp_path: Path) -> None:
    """The store's own Reserve (a gang's or pod group's members are assumed without a cycle's
    allocations): the claim for the pod's DRA-served extended resources is made and allocated
    there as well, and the placed pod names it."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([GPU_CLASS, _node("n1"), _slice("n1", 2), _pod("p", gpus="2")]))
    cluster = load_cluster([path])
    store = cluster.store()
    (pending,) = cluster.pending_pods
    placed = store.assume(pending, "n1")
    (claim,) = store.dra.state.claims.values()
    assert placed.extended_claim == claim.name and claim.allocation is not None
    assert sorted(r.device for r in claim.allocation.devices) == ["gpu-0", "gpu-1"]
    store.forget(placed.key)  # a failed binding: the claim made is gone again
    assert not store.dra.state.claims


# --- the extender -----------------------------------------------------------------------------
# kube-scheduler's DynamicResources plugin allocates the devices and filters the nodes before
# asking an extender; what the extender must not do is count a DRA-served request against a
# node's allocatable (NodeResourcesFit's part: fit.go's shouldDelegateResourceToDRA, at v1.37.2).
# It watches DeviceClasses for that, and checks only what a device plugin serves.


def _extender_cluster(tmp_path: Path) -> tuple[TestApiServer, ExtenderProcess]:
    server = TestApiServer()
    server.add("deviceclasses", GPU_CLASS)
    # n1: DRA only; n2: a device plugin's 2 GPUs, free; n3: 2, one held; n4: 1 in all
    for item in (_node("n1"), _node("n2", **{GPU: "2"}), _node("n3", **{GPU: "2"}), _node("n4", **{GPU: "1"})):
        server.add("nodes", item)
    server.add("pods", _pod("holder", node="n3"))
    process = ExtenderProcess("--kubeconfig", server.kubeconfig(str(tmp_path / "kubeconfig")), "--rules", "default")
    return server, process


def _until(post: Any, check: Any, seconds: float = 20.0) -> Any:
    """The informer cache catches up asynchronously: ask until the answer passes ``check``."""
    end = time.monotonic() + seconds
    while True:
        status, answer = post()
        if status == 200 and check(answer) or time.monotonic() > end:
            return answer
        time.sleep(0.1)


def test_the_extender_leaves_dra_served_extended_resources_to_kube_scheduler(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod asking 2 `example.com/gpu`, as kube-scheduler sends it (node names; the extender's
    informer cache on the test API server): n1, whose allocatable lacks the resource, passes (a
    DeviceClass serves it there: kube-scheduler allocated the devices before asking); the
    device-plugin nodes are judged as NodeResourcesFit judges them: n2 fits, n3 (one of its two
    held) "Insufficient" and resolvable, n4 (one in all) unresolvable. `simulate` on the same
    cluster (with n1's devices published) says the same of each node. Without the class (deleted)
    the resource is the device plugins' alone and n1 is refused as before."""
    server, process = _extender_cluster(tmp_path)
    try:
        process.wait_ready()
        names = ["n1", "n2", "n3", "n4"]
        message = extender_args(_pod("p", gpus="2"), names=names)
        answer = _until(lambda: process.post("/filter", message), lambda a: a["NodeNames"] == ["n1", "n2"])
        assert answer["NodeNames"] == ["n1", "n2"]
        assert answer["FailedNodes"] == {"n3": f"Insufficient {GPU}"}
        assert answer["FailedAndUnresolvableNodes"] == {"n4": f"Insufficient {GPU}"}
        # preempt: kube-scheduler's victim on n3 stands (with it gone the pod fits there)
        status, kept = process.post(
            "/preempt", preemption_args(_pod("p", gpus="2", priority=100), meta={"n3": ["uid-holder"]})
        )
        assert status == 200 and list(kept["NodeNameToMetaVictims"]) == ["n3"]
        # the class deleted: the resource is the device plugins' again, n1 lacks it
        server.delete("deviceclasses", "gpu.example.com")
        answer = _until(lambda: process.post("/filter", message), lambda a: a["NodeNames"] == ["n2"])
        assert answer["NodeNames"] == ["n2"]
        assert answer["FailedAndUnresolvableNodes"] == {"n1": f"Insufficient {GPU}", "n4": f"Insufficient {GPU}"}
    finally:
        process.stop()
        server.stop()
    # simulate, the same cluster with n1's two GPUs published: the same verdict on every node
    items = [GPU_CLASS, _node("n1"), _node("n2", **{GPU: "2"}), _node("n3", **{GPU: "2"}), _node("n4", **{GPU: "1"})]
    items += [_slice("n1", 2), _pod("holder", node="n3"), _pod("p", gpus="2")]
    row = _run(tmp_path, items, capsys)["default/p"]
    assert row["node"] in ("n1", "n2")
    assert {n: r for n, r in row["filtered"].items()} == {"n3": [f"Insufficient {GPU}"], "n4": [f"Insufficient {GPU}"]}
    assert sorted(row["unresolvable"]) == ["n4"]


# --- a claim an earlier attempt left ---------------------------------------------------------


def _extended_claim(name: str, pod: str, uid: str, owned: bool = True) -> dict[str, Any]:
    """An extended-resource claim as the scheduler makes one: annotated, allocated n1's gpu-0,
    reserved for POD; with ``owned``, controlled by POD and protected by the finalizer (as one an
    earlier attempt left)."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
    }
    if owned:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid, "controller": True}]
        metadata["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {
            "devices": {
                "requests": [{"name": "container-0-request-1", "exactly": {"deviceClassName": "gpu.example.com"}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "container-0-request-1",
                            "driver": "gpu.example.com",
                            "pool": "n1",
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
        },
    }


def _earlier(name: str) -> dict[str, Any]:
    """The claim an earlier attempt made for pod p's `example.com/gpu` (a scheduler that died
    between making it and binding the pod): annotated, owned by p, allocated n1's gpu-0,
    reserved for p."""
    return _extended_claim(name, "p", "uid-p")


@pytest.mark.parametrize("named_in_status", [False, True], ids=["by-its-name", "named-in-status"])
def test_postfilter_deletes_the_claim_an_earlier_attempt_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], named_in_status: bool
) -> None:
    """Upstream's deallocateOrDeletePodClaims: the earlier claim (holding n1's only GPU) makes
    Filter fail everywhere ("cannot schedule extended resource claim"); PostFilter deletes it and
    the pod, tried again, gets the GPU in a claim made afresh. The claim is found under the name
    the pod's status gives (any name, as kube-scheduler's generated ones) or, without one, under
    the name rulesched makes such claims under."""
    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.semantics.dra_extended import claim_name
    from rulesched.simulate.driver import Simulation

    pending = _pod("p")
    if named_in_status:
        name = "p-extended-resources-x7k2q"
        pending["status"]["extendedResourceClaimStatus"] = {
            "resourceClaimName": name,
            "requestMappings": [{"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-1"}],
        }
    else:
        name = claim_name(decode_pod(pending, "test", {}))
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([GPU_CLASS, _node("n1"), _slice("n1", 1), _earlier(name), pending]))
    cluster = load_cluster([path])
    store = cluster.store()
    sim = Simulation(load_rules([resolve_rules_path("default")]), store, SchedulerSettings())
    for p in cluster.pending_pods:
        sim.add(p)
    sim.run()
    placed = next(p for p in store.pods() if p.name == "p")
    assert placed.node_name == "n1"
    (claim,) = store.dra.state.claims.values()
    assert claim.allocation is not None and [r.device for r in claim.allocation.devices] == ["gpu-0"]
    assert [c.uid for c in claim.reserved_for] == ["uid-p"] and placed.extended_claim == claim.name
    if named_in_status:
        assert claim.name != name  # the earlier one is gone; the new one has rulesched's name


def test_postfilter_deletes_a_claim_once_while_its_deletion_is_under_way(tmp_path: Path) -> None:
    """The live scheduler hands the earlier claim's deletion to a worker and waits for the
    informer to report it gone; a retry in between (the finalizer's removal is a claim event
    that moves the pod) found the same claim and sent a second DELETE (tests/test_run_dra.py's
    earlier-attempt case failed about one run in seven). Upstream deletes within PostFilter, so no
    attempt sees the claim in between: one delete per claim. A claim made afresh under the same
    name (another uid) that is stale again is deleted again."""
    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.model.decode_dra import decode_resource_claim
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.semantics.dra_extended import claim_name
    from rulesched.simulate.driver import InMemoryBinder, Simulation

    class Deleting(InMemoryBinder):
        def __init__(self) -> None:
            self.deleted: list[tuple[str, str]] = []

        def delete_claim(self, claim: Any) -> None:  # handed to a worker: the claim stays for now
            self.deleted.append((claim.key, claim.uid))

    pending = _pod("p")
    name = claim_name(decode_pod(pending, "test", {}))
    earlier = _earlier(name)
    earlier["metadata"]["uid"] = "claim-1"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump_all([GPU_CLASS, _node("n1"), _slice("n1", 1), earlier, pending]))
    cluster = load_cluster([path])
    store = cluster.store()
    binder = Deleting()
    sim = Simulation(load_rules([resolve_rules_path("default")]), store, SchedulerSettings(), binder)
    for p in cluster.pending_pods:
        sim.add(p)
    key = f"default/{name}"
    for _ in range(3):
        sim.scheduler.schedule_one()
        assert sim.queue.activate("default/p")
    assert binder.deleted == [(key, "claim-1")]
    earlier["metadata"]["uid"] = "claim-2"  # gone, and made again by another scheduler's attempt
    store.dra.put("claims", key, decode_resource_claim(earlier, "test"))
    sim.scheduler.schedule_one()
    assert binder.deleted == [(key, "claim-1"), (key, "claim-2")]
