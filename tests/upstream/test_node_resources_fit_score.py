"""NodeResourcesFit Score with the default LeastAllocated strategy (cpu and memory, weight 1 each),
ported from kube-scheduler's pkg/scheduler/framework/plugins/noderesources/least_allocated_test.go
(TestLeastAllocatedScoringStrategy) and fit_test.go (TestFitScore, LeastAllocated cases).

Upstream builds pods with st.MakePod().Req(...) (one container per Req, no container at all
without one) and nodes with st.MakeNode().Capacity(...) (capacity = allocatable, pods 32). Fit has
no NormalizeScore, so the raw scores upstream checks are the normalised ones.

Not ported (non-default scoring args, which default.rules does not express): "Resources not set,
pods scheduled with error", "nothing scheduled, resources requested with different weight on CPU
and memory, differently sized nodes", "resource with negative weight", "resource with zero weight",
"resource weight larger than MaxNodeScore", "bypass extended resource if the pod does not request",
"honor extended resource if the pod requests", "if the node doesn't have a resource"; from
TestFitScore the RequestedToCapacityRatio and MostAllocated cases and the two "LeastAllocated with
Extended resources" cases (DRA).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import node, normalized_scores, pod, state


def mkpod(*reqs: dict[str, str], name: str = "p", node_name: str = "", sidecar: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": {"requests": q}} for i, q in enumerate(reqs)]}
    if sidecar:
        spec["initContainers"] = [{"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": sidecar}}]
    return pod(name, spec=spec, node_name=node_name)


def mknode(name: str, cpu: str | None = None, memory: str | None = None) -> Any:
    if cpu is None or memory is None:  # st.MakeNode() without Capacity: nothing allocatable
        return node(name, allocatable={"pods": "0"})  # (an empty map would get harness defaults)
    return node(name, allocatable={"cpu": cpu, "memory": memory, "pods": "32"})


def req(cpu: str, memory: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": memory}


def on(node_name: str, *reqs: dict[str, str], sidecar: dict[str, str] | None = None) -> tuple[str, tuple, Any]:
    return (node_name, reqs, sidecar)


CASES = [
    (
        "nothing scheduled, nothing requested",
        mkpod(),
        [mknode("node1", "4000", "10000"), mknode("node2", "4000", "10000")],
        [],
        {"node1": 100, "node2": 100},
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        mkpod(req("1000", "2000"), req("2000", "3000")),
        [mknode("node1", "4000", "10000"), mknode("node2", "6000", "10000")],
        [],
        {"node1": 37, "node2": 50},
    ),
    (
        "no resources requested, pods scheduled",
        mkpod(),
        [mknode("node1", "4000", "10000"), mknode("node2", "4000", "10000")],
        [on("node1"), on("node1"), on("node2"), on("node2")],
        {"node1": 100, "node2": 100},
    ),
    (
        "no resources requested, pods scheduled with resources",
        mkpod(),
        [mknode("node1", "10000", "20000"), mknode("node2", "10000", "20000")],
        [
            on("node1", req("3000", "0")),
            on("node1", req("3000", "0")),
            on("node2", req("3000", "0")),
            on("node2", req("3000", "5000")),
        ],
        {"node1": 70, "node2": 57},
    ),
    (
        "resources requested, pods scheduled with resources",
        mkpod(req("1000", "2000"), req("2000", "3000")),
        [mknode("node1", "10000", "20000"), mknode("node2", "10000", "20000")],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        {"node1": 57, "node2": 45},
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        mkpod(req("1000", "2000"), req("2000", "3000")),
        [mknode("node1", "10000", "20000"), mknode("node2", "10000", "50000")],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        {"node1": 57, "node2": 60},
    ),
    (
        "requested resources exceed node capacity",
        mkpod(req("3000", "0")),
        [mknode("node1", "4000", "10000"), mknode("node2", "4000", "10000")],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        {"node1": 50, "node2": 25},
    ),
    (
        "zero node resources, pods scheduled with resources",
        mkpod(),
        [mknode("node1"), mknode("node2")],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        {"node1": 0, "node2": 0},
    ),
    # fit_test.go TestFitScore
    (
        "test case for ScoringStrategy LeastAllocated",
        mkpod(req("1000", "2000")),
        [mknode("node1", "4000", "10000"), mknode("node2", "6000", "10000")],
        [on("node1", req("2000", "4000")), on("node2", req("1000", "2000"))],
        {"node1": 32, "node2": 63},
    ),
    (
        "test case for ScoringStrategy LeastAllocated if PreScore is not called",
        mkpod(req("1000", "2000")),
        [mknode("node1", "4000", "10000"), mknode("node2", "6000", "10000")],
        [on("node1", req("2000", "4000")), on("node2", req("1000", "2000"))],
        {"node1": 32, "node2": 63},
    ),
    (
        "test case for ScoringStrategy LeastAllocated with sidecar container",
        mkpod(req("1000", "2000")),
        [mknode("node1", "4000", "10000"), mknode("node2", "4000", "10000")],
        [on("node1", req("1000", "2000"), sidecar=req("1000", "2000")), on("node2", req("1000", "2000"))],
        {"node1": 32, "node2": 55},
    ),
]


@pytest.mark.parametrize(("incoming", "nodes", "existing", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_least_allocated(
    incoming: Any, nodes: list[Any], existing: list[tuple[str, tuple, Any]], want: dict[str, int]
) -> None:
    pods = [mkpod(*reqs, name=f"existing{i}", node_name=n, sidecar=sc) for i, (n, reqs, sc) in enumerate(existing)]
    cluster = state(nodes, pods)
    assert normalized_scores(incoming, cluster, "NodeResourcesFit") == want


def test_resource_the_node_lacks_is_left_out() -> None:
    """Not an upstream case: leastResourceScorer skips a resource whose allocatable is 0
    (``if allocable[i] == 0 { continue }``), so the weights of the rest alone divide the sum."""
    incoming = mkpod(req("1", "2000"))
    cluster = state(
        [
            node("cpu-less", allocatable={"memory": "10000", "pods": "32"}),
            node("memory-less", allocatable={"cpu": "4", "pods": "32"}),
        ]
    )
    assert normalized_scores(incoming, cluster, "NodeResourcesFit") == {"cpu-less": 80, "memory-less": 75}
