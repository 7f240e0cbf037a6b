"""NodeResourcesFit Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/noderesources/fit_test.go (TestEnoughRequests,
TestNotEnoughRequests, TestStorageRequests, TestRestartableInitContainers).

Pods are built as upstream's newResourcePod builds them: one container per usage, each requesting
cpu (milli), memory (bytes), pods 0, ephemeral-storage (bytes) and the given scalar resources.
Reasons are compared as written in the tables; the status code by upstream's rule, which its
tables follow (UnschedulableAndUnresolvable when an insufficient resource is requested beyond the
node's allocatable, e.g. "extended resource capacity enforced", "kubernetes.io resource capacity
enforced"; Unschedulable otherwise, "Too many pods" included).

Not ported: "skip checking ignored extended resource" and "skip checking ignored extended resource
via resource groups" (non-default ignoredResources / ignoredResourceGroups args); the six cases with
the DRAExtendedResource gate on ("extended resource backed by device plugin", "extended resource
backed by DRA", "extended resource backed by DRA, nil draManager", "extended resource NOT backed by
DRA", "extended resource was backed by Device Plugin (Allocatable: 0)" and its "global cache"
variant: no DRA in rulesched); "not allow pod with restartable init containers if sidecar containers
is disabled" (SidecarContainers gate off).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import UNRESOLVABLE, UNSCHEDULABLE, filter_status, node, pod, state

A = "example.com/aaa"
B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
K8S_B = "subdomain.kubernetes.io/something"
HP = "hugepages-2Mi"
DRA = "extended.resource.dra.io/something"


def r(cpu: int = 0, mem: int = 0, eph: int = 0, **scalars: int) -> dict[str, str]:
    """framework.Resource{MilliCPU, Memory, EphemeralStorage, ScalarResources} as newResourcePod
    turns it into a container's requests. Scalar names are passed as r(**{A: 1})."""
    requests = {"cpu": f"{cpu}m", "memory": str(mem), "pods": "0", "ephemeral-storage": str(eph)}
    requests.update({k: str(v) for k, v in scalars.items()})
    return requests


def rpod(
    *usage: dict[str, str],
    init: tuple[dict[str, str], ...] = (),
    overhead: dict[str, str] | None = None,
    pod_level: dict[str, str] | None = None,
    name: str = "p",
    node_name: str = "",
) -> Any:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "resources": {"requests": u}} for i, u in enumerate(usage)],
        "initContainers": [{"name": f"i{i}", "resources": {"requests": u}} for i, u in enumerate(init)],
    }
    if overhead:
        spec["overhead"] = overhead
    if pod_level:
        spec["resources"] = {"requests": pod_level}
    return pod(name, spec=spec, node_name=node_name)


# makeAllocatableResources(10, 20, 32, 5, 20, 5)
ALLOCATABLE = {"cpu": "10m", "memory": "20", "pods": "32", A: "5", "ephemeral-storage": "20", HP: "5"}


def check(
    incoming: Any,
    existing: tuple[dict[str, str], ...] | None,
    allocatable: dict[str, str],
    want: tuple[str, ...] | None,
) -> None:
    pods = [] if existing is None else [rpod(*existing, name="existing", node_name="node")]
    cluster = state([node("node", allocatable=allocatable)], pods)
    got = filter_status(incoming, cluster, "node", rule="NodeResourcesFit")
    assert (got and got[1]) == want
    if got is not None:
        # upstream's code: UnschedulableAndUnresolvable when an insufficient resource is requested
        # beyond the node's allocatable (even an empty node would not do), as its tables say
        short = [reason.removeprefix("Insufficient ") for reason in want or () if reason.startswith("Insufficient ")]
        beyond = any(incoming.requests.get(r, 0) > cluster.node_view("node").allocatable.get(r, 0) for r in short)
        assert got[0] == (UNRESOLVABLE if beyond else UNSCHEDULABLE)


def cpu() -> tuple[str, ...]:
    return ("Insufficient cpu",)


def mem() -> tuple[str, ...]:
    return ("Insufficient memory",)


def ins(name: str) -> tuple[str, ...]:
    return (f"Insufficient {name}",)


ENOUGH = [
    ("no resources requested always fits", rpod(), (r(10, 20),), None),
    # written memory-first: upstream's ResourceList is a Go map and reasons still come cpu-first
    (
        "too many resources fails",
        rpod({"memory": "1", "ephemeral-storage": "0", "pods": "0", "cpu": "1m"}),
        (r(10, 20),),
        ("Insufficient cpu", "Insufficient memory"),
    ),
    ("too many resources fails due to init container cpu", rpod(r(1, 1), init=(r(3, 1),)), (r(8, 19),), cpu()),
    (
        "too many resources fails due to highest init container cpu",
        rpod(r(1, 1), init=(r(3, 1), r(2, 1))),
        (r(8, 19),),
        cpu(),
    ),
    ("too many resources fails due to init container memory", rpod(r(1, 1), init=(r(1, 3),)), (r(9, 19),), mem()),
    (
        "too many resources fails due to highest init container memory",
        rpod(r(1, 1), init=(r(1, 3), r(1, 2))),
        (r(9, 19),),
        mem(),
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        rpod(r(1, 1), init=(r(1, 1),)),
        (r(9, 19),),
        None,
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init containers",
        rpod(r(1, 1), init=(r(1, 1), r(1, 1))),
        (r(9, 19),),
        None,
    ),
    ("both resources fit", rpod(r(1, 1)), (r(5, 5),), None),
    ("one resource memory fits", rpod(r(2, 1)), (r(9, 5),), cpu()),
    ("one resource cpu fits", rpod(r(1, 2)), (r(5, 19),), mem()),
    ("equal edge case", rpod(r(5, 1)), (r(5, 19),), None),
    ("equal edge case for init container", rpod(r(4, 1), init=(r(5, 1),)), (r(5, 19),), None),
    ("extended resource fits", rpod(r(**{A: 1})), (r(),), None),
    ("extended resource fits for init container", rpod(r(), init=(r(**{A: 1}),)), (r(),), None),
    ("extended resource capacity enforced", rpod(r(1, 1, **{A: 10})), (r(0, 0, **{A: 0}),), ins(A)),
    (
        "extended resource capacity enforced for init container",
        rpod(r(), init=(r(1, 1, **{A: 10}),)),
        (r(0, 0, **{A: 0}),),
        ins(A),
    ),
    ("extended resource allocatable enforced", rpod(r(1, 1, **{A: 1})), (r(0, 0, **{A: 5}),), ins(A)),
    (
        "extended resource allocatable enforced for init container",
        rpod(r(), init=(r(1, 1, **{A: 1}),)),
        (r(0, 0, **{A: 5}),),
        ins(A),
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        rpod(r(1, 1, **{A: 3}), r(1, 1, **{A: 3})),
        (r(0, 0, **{A: 2}),),
        ins(A),
    ),
    (
        "extended resource allocatable admits multiple init containers",
        rpod(r(), init=(r(1, 1, **{A: 3}), r(1, 1, **{A: 3}))),
        (r(0, 0, **{A: 2}),),
        None,
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        rpod(r(), init=(r(1, 1, **{A: 6}), r(1, 1, **{A: 3}))),
        (r(0, 0, **{A: 2}),),
        ins(A),
    ),
    ("extended resource allocatable enforced for unknown resource", rpod(r(1, 1, **{B: 1})), (r(),), ins(B)),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        rpod(r(), init=(r(1, 1, **{B: 1}),)),
        (r(),),
        ins(B),
    ),
    ("kubernetes.io resource capacity enforced", rpod(r(1, 1, **{K8S_A: 10})), (r(),), ins(K8S_A)),
    (
        "kubernetes.io resource capacity enforced for init container",
        rpod(r(), init=(r(1, 1, **{K8S_B: 10}),)),
        (r(),),
        ins(K8S_B),
    ),
    ("hugepages resource capacity enforced", rpod(r(1, 1, **{HP: 10})), (r(0, 0, **{HP: 0}),), ins(HP)),
    (
        "hugepages resource capacity enforced for init container",
        rpod(r(), init=(r(1, 1, **{HP: 10}),)),
        (r(0, 0, **{HP: 0}),),
        ins(HP),
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        rpod(r(1, 1, **{HP: 3}), r(1, 1, **{HP: 3})),
        (r(0, 0, **{HP: 2}),),
        ins(HP),
    ),
    ("resources + pod overhead fits", rpod(r(1, 1), overhead={"cpu": "3m", "memory": "13"}), (r(5, 5),), None),
    (
        "requests + overhead does not fit for memory",
        rpod(r(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        (r(5, 5),),
        mem(),
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        rpod(r(1, 1, **{A: 0})),
        (r(0, 0, **{A: 6}),),
        None,
    ),
    # podLevelResourcesEnabled: true from here on (PodLevelResources is on by default)
    ("skip checking resource request with quantity zero", rpod(r(**{A: 1})), (r(20, 30, **{A: 1}),), None),
    (
        "both pod-level and container-level resources fit",
        rpod(r(1, 1), pod_level={"cpu": "1m", "memory": "2"}),
        (r(5, 5),),
        None,
    ),
    ("pod-level cpu resource not fit", rpod(r(1, 1), pod_level={"cpu": "7m", "memory": "2"}), (r(5, 5),), cpu()),
    ("pod-level memory resource not fit", rpod(r(1, 1), pod_level={"cpu": "3m", "memory": "2"}), (r(5, 19),), mem()),
    ("pod-level hugepages resource fit", rpod(pod_level={"cpu": "3m", "memory": "2", HP: "5"}), None, None),
    (
        "both pod-level and container-level hugepages resource fit",
        rpod(r(1, 1, **{HP: 3}), pod_level={"cpu": "3m", "memory": "2", HP: "5"}),
        None,
        None,
    ),
    ("pod-level hugepages resource not fit", rpod(pod_level={"cpu": "3m", "memory": "2", HP: "10"}), None, ins(HP)),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        rpod(r(1, 1), init=(r(1, 1),), pod_level={"cpu": "3m", "memory": "2"}),
        (r(5, 19),),
        mem(),
    ),
    # draExtendedResourceEnabled: false
    ("extended resource backed by DRA not enabled", rpod(r(1, 1, **{DRA: 1})), (r(),), ins(DRA)),
]


@pytest.mark.parametrize(("incoming", "existing", "want"), [pytest.param(*c[1:], id=c[0]) for c in ENOUGH])
def test_enough_requests(incoming: Any, existing: Any, want: tuple[str, ...] | None) -> None:
    check(incoming, existing, ALLOCATABLE, want)


# makeAllocatableResources(10, 20, 1, 0, 0, 0): room for one pod, which is already there
NOT_ENOUGH = [
    (
        "even without specified resources, predicate fails when there's no space for additional pod",
        rpod(),
        (r(10, 20),),
    ),
    ("even if both resources fit, predicate fails when there's no space for additional pod", rpod(r(1, 1)), (r(5, 5),)),
    ("even for equal edge case, predicate fails when there's no space for additional pod", rpod(r(5, 1)), (r(5, 19),)),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod due to init container",
        rpod(r(5, 1), init=(r(5, 1),)),
        (r(5, 19),),
    ),
]


@pytest.mark.parametrize(("incoming", "existing"), [pytest.param(*c[1:], id=c[0]) for c in NOT_ENOUGH])
def test_not_enough_requests(incoming: Any, existing: Any) -> None:
    allocatable = {"cpu": "10m", "memory": "20", "pods": "1", A: "0", "ephemeral-storage": "0", HP: "0"}
    check(incoming, existing, allocatable, ("Too many pods",))


STORAGE = [
    ("empty storage requested, and pod fits", rpod(r(1, 1)), (r(2, 10),), None),
    (
        "storage ephemeral local storage request exceeds allocatable",
        rpod(r(eph=25)),
        (r(2, 2),),
        ins("ephemeral-storage"),
    ),
    ("ephemeral local storage is sufficient", rpod(r(eph=5)), (r(2, 2, eph=10),), None),
    ("pod fits", rpod(r(eph=10)), (r(2, 2),), None),
]


@pytest.mark.parametrize(("incoming", "existing", "want"), [pytest.param(*c[1:], id=c[0]) for c in STORAGE])
def test_storage_requests(incoming: Any, existing: Any, want: tuple[str, ...] | None) -> None:
    check(incoming, existing, ALLOCATABLE, want)


def sidecar_pod(request: str | None = None, sidecar: str | None = None, with_sidecar: bool = True) -> Any:
    regular: dict[str, Any] = {"name": "regular"}
    if request:
        regular["resources"] = {"requests": {"cpu": request}}
    spec: dict[str, Any] = {"containers": [regular]}
    if with_sidecar:
        init: dict[str, Any] = {"name": "restartable-init", "restartPolicy": "Always"}
        if sidecar:
            init["resources"] = {"requests": {"cpu": sidecar}}
        spec["initContainers"] = [init]
    return pod("p", spec=spec)


RESTARTABLE = [
    (
        "allow pod without restartable init containers if sidecar containers is disabled",
        sidecar_pod(with_sidecar=False),
        None,
    ),
    (
        "allow pod without restartable init containers if sidecar containers is enabled",
        sidecar_pod(with_sidecar=False),
        None,
    ),
    ("allow pod with restartable init containers if sidecar containers is enabled", sidecar_pod(), None),
    (
        "allow pod if the total requested resources do not exceed the node's allocatable resources",
        sidecar_pod("1m", "1m"),
        None,
    ),
    (
        "not allow pod if the total requested resources do exceed the node's allocatable resources",
        sidecar_pod("1m", "2m"),
        cpu(),
    ),
]


@pytest.mark.parametrize(("incoming", "want"), [pytest.param(*c[1:], id=c[0]) for c in RESTARTABLE])
def test_restartable_init_containers(incoming: Any, want: tuple[str, ...] | None) -> None:
    # makeAllocatableResources(2, 0, 1, 0, 0, 0), no pods on the node
    allocatable = {"cpu": "2m", "memory": "0", "pods": "1", A: "0", "ephemeral-storage": "0", HP: "0"}
    check(incoming, None, allocatable, want)
