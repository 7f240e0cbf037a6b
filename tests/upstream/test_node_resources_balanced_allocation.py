"""NodeResourcesBalancedAllocation Score, ported from kube-scheduler's
pkg/scheduler/framework/plugins/noderesources/balanced_allocation_test.go
(TestNodeResourcesBalancedAllocation) at v1.37.2 with the default args (cpu and memory, weight 1
each): the score of 1.36's kubernetes PR #135573, which weighs the balance with the pod against the
balance without it (75: unchanged).

Nodes are upstream's makeNode(name, milliCPU, memory, nil) (capacity = allocatable). The plugin has
no NormalizeScore, so the raw scores upstream checks are the normalised ones.

Not ported: "include scalar resource on a node for balanced resource allocation" and "node without
the scalar resource should skip the scalar resource" (non-default resources args with
nvidia.com/gpu), "include DRA resource on a node for balanced resource allocation" and its "if
PreScore not called" variant (DRA); TestBalancedAllocationSignPod (pod signatures are not
modelled).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import bind, node, normalized_scores, pod, state

RULE = "NodeResourcesBalancedAllocation"


def spec(*reqs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"name": f"c{i}", "resources": {"requests": {"cpu": c, "memory": m}}} for i, (c, m) in enumerate(reqs)]


CPU_ONLY = spec(("1000m", "0"), ("2000m", "0"))
CPU_AND_MEMORY = spec(("1000m", "2000"), ("2000m", "3000"))


def mkpod(containers: list[dict[str, Any]], name: str = "p", node_name: str = "") -> Any:
    return pod(name, spec={"containers": containers}, node_name=node_name)


def make_node(name: str, milli_cpu: int, memory: int) -> Any:
    return node(name, allocatable={"cpu": f"{milli_cpu}m", "memory": str(memory), "pods": "110"})


# upstream's {Spec: cpuOnly} (NodeName node1) and {Spec: cpuAndMemory} (NodeName node2)
SCHEDULED = [("node1", CPU_ONLY), ("node2", CPU_AND_MEMORY)]

CASES = [
    (
        "nothing scheduled, resources requested, differently sized nodes",
        CPU_AND_MEMORY,
        [("node1", 4000, 10000), ("node2", 6000, 10000)],
        [],
        {"node1": 68, "node2": 75},
    ),
    (
        "resources requested, pods scheduled with resources",
        CPU_AND_MEMORY,
        [("node1", 10000, 20000), ("node2", 10000, 20000)],
        SCHEDULED,
        {"node1": 73, "node2": 74},
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        CPU_AND_MEMORY,
        [("node1", 10000, 20000), ("node2", 10000, 50000)],
        SCHEDULED,
        {"node1": 73, "node2": 70},
    ),
    (
        "resources requested, pods scheduled with resources, nodes to reach min/max score",
        [
            {"name": "c0", "resources": {"requests": {"memory": "2000"}}},
            {"name": "c1", "resources": {"requests": {"memory": "3000"}}},
        ],
        [("node1", 3000, 5000), ("node2", 3000, 5000)],
        [("node1", CPU_ONLY)],
        {"node1": 100, "node2": 50},
    ),
    (
        "requested resources at node capacity",
        CPU_ONLY,
        [("node1", 6000, 10000), ("node2", 6000, 10000)],
        SCHEDULED,
        {"node1": 62, "node2": 62},
    ),
    (
        "resources requested, pods scheduled with resources if PreScore not called",
        CPU_AND_MEMORY,
        [("node1", 10000, 20000), ("node2", 10000, 20000)],
        SCHEDULED,
        {"node1": 73, "node2": 74},
    ),
]


@pytest.mark.parametrize(("containers", "nodes", "scheduled", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_balanced_allocation(
    containers: list[dict[str, Any]],
    nodes: list[tuple[str, int, int]],
    scheduled: list[tuple[str, list[dict[str, Any]]]],
    want: dict[str, int],
) -> None:
    pods = [mkpod(c, name=f"existing{i}", node_name=n) for i, (n, c) in enumerate(scheduled)]
    cluster = state([make_node(*n) for n in nodes], pods)
    assert normalized_scores(mkpod(containers), cluster, RULE) == want


@pytest.mark.parametrize("name", ["nothing scheduled, nothing requested, skip in PreScore"])
def test_best_effort_pod_is_skipped(name: str) -> None:
    # upstream: PreScore returns Skip for a pod requesting neither cpu nor memory (st.MakePod().Obj())
    cluster = state([make_node("node1", 4000, 10000), make_node("node2", 4000, 10000)])
    assert RULE not in {s.name for s in bind(mkpod([]), cluster).scores}
