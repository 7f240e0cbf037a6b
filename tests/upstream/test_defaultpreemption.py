"""kube-scheduler's DefaultPreemption unit tests, run through rules/default.rules.

Ported from pkg/scheduler/framework/plugins/defaultpreemption/default_preemption_test.go:
TestPostFilter, TestDryRunPreemption (its DefaultPreemptionArgs cases with upstream's offsets 4, 1
and 3 handed in as the random source's draws), TestSelectBestCandidate, TestPodEligibleToPreemptOthers and
TestPreempt. In TestPodEligibleToPreemptOthers "Pod with nominated node", upstream also hands in an
UnschedulableAndUnresolvable status for the nominated node (which alone makes the pod eligible);
the case holds without it (its terminating pod was not preempted by a scheduler), and
``test_an_unresolvable_nominated_node_is_given_up_even_with_a_victim_terminating`` pins the
status's own effect. Filtering with nominated pods is ported in
test_nominated_pods.py. Test ids are the upstream test names. Upstream registers only the plugins a table
needs (NodeResourcesFit, InterPodAffinity, PodTopologySpread); here every default filter runs,
which changes nothing for these clusters. Dry-run candidates are observed where preemption hands
them to ``pick_candidate``; victims are compared by name, sorted, as upstream does.

TestPostFilter hands PostFilter the filter statuses of the nodes (``filteredNodesStatuses``, a node
missing from them counting as UnschedulableAndUnresolvable); so do these, through ``preempt``'s
``statuses``. Some of them are made up: "no candidate nodes found, no enough resource after removing
low priority pods" calls a request above the node's allocatable Unschedulable, which the filter
itself reports as UnschedulableAndUnresolvable (recent upstream, and default.rules): the last
table here runs those cases with the statuses the filters give.

Not ported (rulesched does not model what they need):
- TestPostFilter "preemption result filtered out by extenders" (extenders); "only one node but
  failed with TestPlugin", "one failed with TestPlugin and the other pass" (fake plugin errors); the
  four "pod with SchedulingGroup ..." cases (pod groups, topology-aware workload scheduling).
- TestDryRunPreemption "a pod that does not fit on any node", "a pod that fits with no preemption",
  "a pod that fits on one node with no preemption", "get Unschedulable in the preemption phase when
  the filter plugins filtering the nodes" (fake filter plugins).
- TestPreempt's four extender tables (extenders).

The last table is not upstream's: it pins util.GetPodStartTime's rule (a pod without a start time
counts as started now) that the tables above never reach.

Every test runs twice: node by node, and with the dry runs batched as columns from one node on
(rulesched.engine.dryrun; tests/helpers/preemption.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.model.decode import decode_pod
from rulesched.scheduler import preemption
from rulesched.scheduler.framework import Code
from tests.helpers.preemption import batch_every_preemption
from tests.upstream.harness import default_rules, node, pdb, pod, state

BATCHES: list[int] = []  # one entry per batch of dry runs (the batched runs below)


@pytest.fixture(autouse=True, params=["node-by-node", "batched"])
def dry_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.param == "batched":
        batch_every_preemption(monkeypatch, BATCHES)


NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL, MEDIUM = {"cpu": "100m", "memory": "100"}, {"cpu": "200m", "memory": "200"}
LARGE, VERY_LARGE = {"cpu": "300m", "memory": "300"}, {"cpu": "500m", "memory": "500"}
ONE_POD = {"pods": "1"}
NODE_RES = {"cpu": "200m", "memory": "400"}  # TestPostFilter's nodeRes
U, UU = Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def P(
    name: str,
    prio: int | None = None,
    on: str = "",
    req: dict | None = None,
    start: int | None = None,
    labels: dict | None = None,
    never: bool = False,
    **spec: Any,
) -> Any:
    """st.MakePod(): priority, node, requests, start time (epochTimeN is N seconds here: only the
    order matters), labels, preemptionPolicy Never."""
    body: dict[str, Any] = dict(spec)
    if prio is not None:
        body["priority"] = prio
    if never:
        body["preemptionPolicy"] = "Never"
    if req:
        body["containers"] = [{"name": "c", "image": "busybox", "resources": {"requests": req}}]
    p = pod(name, spec=body, labels=labels, node_name=on)
    return dataclasses.replace(p, start_time=float(start)) if start is not None else p


def nodes(*names: str, res: dict = VERY_LARGE, labelled: bool = True) -> list[Any]:
    """st.MakeNode().Capacity(res) (pods default to 32); "node-a/zone1" is node-a with labels
    {hostname: node-a, zone: zone1}, as the upstream tables split the name."""
    out = []
    for n in names:
        parts = n.split("/")
        labels = dict(zip(("hostname", "zone", "region"), parts, strict=False)) if labelled else {}
        out.append(node(parts[0], labels, allocatable={"pods": "32", **res}))
    return out


def candidates(monkeypatch: pytest.MonkeyPatch, cluster: Any, incoming: Any) -> dict[str, tuple]:
    """The dry run's candidates: node -> (sorted victim names, PDB violations)."""
    seen: list[preemption.Candidate] = []
    real = preemption.pick_candidate

    def spy(cands: Any, order: Any = None, displacing: frozenset[str] = frozenset()) -> Any:
        seen.extend(cands)
        return real(cands, order, displacing)

    monkeypatch.setattr(preemption, "pick_candidate", spy)
    preemption.preempt(cluster.snapshot(), default_rules().session(), incoming)
    return {c.node: (sorted(v.name for v in c.victims), c.pdb_violations) for c in seen}


def run(cluster: Any, incoming: Any, statuses: dict[str, Code] | None = None) -> tuple[str | None, list[str], str]:
    """Preemption with the given node statuses (None: the statuses the filters give)."""
    result = preemption.preempt(cluster.snapshot(), default_rules().session(), incoming, statuses)
    return result.nominated, sorted(v.name for v in result.victims), result.message


# --- TestPostFilter -------------------------------------------------------------------------------

# A nomination's status message since 1.37 (kubernetes PR #140180; the tables' wantStatus)
FOUND = "preemption: found a potential placement for pod on node {}, preempting 1 victims"

POST_FILTER = [
    (
        "pod with higher priority can be made schedulable",
        P("p", HIGH),
        [P("p1", on="node1")],
        nodes("node1", res=ONE_POD, labelled=False),
        {"node1": U},
        ("node1", ["p1"], FOUND.format("node1")),
    ),
    (
        "pod with tied priority is still unschedulable",
        P("p"),
        [P("p1", on="node1")],
        nodes("node1", res=ONE_POD, labelled=False),
        {"node1": U},
        (None, [], "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."),
    ),
    (
        "preemption should respect filteredNodesStatuses",
        P("p", HIGH),
        [P("p1", on="node1")],
        nodes("node1", res=ONE_POD, labelled=False),
        {"node1": UU},
        (None, [], "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    ),
    (
        "preemption should respect absent NodeToStatusReader entry meaning UnschedulableAndUnresolvable",
        P("p", HIGH),
        [P("p1", on="node1")],
        nodes("node1", res=ONE_POD, labelled=False),
        {},
        (None, [], "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
    ),
    (
        "pod can be made schedulable on one node",
        P("p", MID),
        [P("p1", HIGH, "node1"), P("p2", LOW, "node2")],
        nodes("node1", "node2", res=ONE_POD, labelled=False),
        {"node1": U, "node2": U},
        ("node2", ["p2"], FOUND.format("node2")),
    ),
    (
        "no candidate nodes found, no enough resource after removing low priority pods",
        P("p", HIGH, req=LARGE),
        [P("p1", on="node1"), P("p2", on="node2")],
        nodes("node1", "node2", res=NODE_RES, labelled=False),
        {"node1": U, "node2": U},
        (None, [], "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
    ),
    (
        "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU resource",
        P("p", HIGH, req=LARGE),
        [P("p1", HIGH, "node1"), P("p2", on="node2"), P("p3", HIGH, "node3")],
        nodes("node1", res=ONE_POD, labelled=False)
        + nodes("node2", res=NODE_RES, labelled=False)
        + nodes("node3", res=ONE_POD, labelled=False),
        {"node1": U, "node2": U, "node3": U},
        (
            None,
            [],
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
        ),
    ),
    (
        "no candidate nodes found with mixed reason, 2 UnschedulableAndUnresolvable nodes and 2 nodes don't have enough CPU resource",
        P("p", HIGH, req=LARGE),
        [P("p1", on="node1"), P("p2", on="node2")],
        nodes("node1", "node2", "node3", "node4", res=NODE_RES, labelled=False),
        {"node1": U, "node2": U, "node4": UU},  # node3: absent, so unresolvable
        (
            None,
            [],
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
        ),
    ),
]

# "pod can be made schedulable on minHighestPriority node": its budgets, by what they allow
PDB_PODS = [
    P("p1", HIGH, "node1", labels={"pdb": "non-violating"}),
    P("p2", LOW, "node1", labels={"pdb": "violating"}),
    P("p3", MID, "node2", labels={"pdb": "violating"}),
]
PDBS = [
    pdb("violating-pdb", "default", {"pdb": "violating"}, 0),
    pdb("non-violating", "default", {"pdb": "non-violating"}, 2**31 - 1),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "cluster_nodes", "statuses", "want"), [pytest.param(*c[1:], id=c[0]) for c in POST_FILTER]
)
def test_post_filter(incoming: Any, pods: list, cluster_nodes: list, statuses: dict, want: tuple) -> None:
    assert run(state(cluster_nodes, pods), incoming, statuses) == want


def test_post_filter_min_highest_priority_node() -> None:
    """TestPostFilter "pod can be made schedulable on minHighestPriority node": both nodes cost
    one PDB violation; node2's highest victim has the lower priority."""
    cluster = state(nodes("node1", "node2", res=ONE_POD, labelled=False), PDB_PODS, PDBS)
    assert run(cluster, P("p", VERY_HIGH), {"node1": U, "node2": U}) == ("node2", ["p3"], FOUND.format("node2"))


# The cases whose statuses upstream's table makes up, with those the filters give: a request above
# a node's allocatable is UnschedulableAndUnresolvable, and preemption does not try such a node.
FILTER_STATUSES = [
    (
        "no enough resource after removing low priority pods: every node is too small",
        P("p", HIGH, req=LARGE),
        [P("p1", on="node1"), P("p2", on="node2")],
        nodes("node1", "node2", res=NODE_RES, labelled=False),
        (None, [], "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."),
    ),
    (
        "mixed reasons: no lower priority pod, or too small",
        P("p", HIGH, req=LARGE),
        [P("p1", HIGH, "node1"), P("p2", on="node2"), P("p3", HIGH, "node3")],
        nodes("node1", res={**ONE_POD, **LARGE}, labelled=False)
        + nodes("node2", res=NODE_RES, labelled=False)
        + nodes("node3", res={**ONE_POD, **LARGE}, labelled=False),
        (
            None,
            [],
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
            "2 No preemption victims found for incoming pod.",
        ),
    ),
    (
        "cordoned, untolerated taint and other-node-only pods are never preempted for",
        P("p", HIGH, req=SMALL, nodeSelector={"hostname": "node3"}),
        [P("p1", on="node1"), P("p2", on="node2"), P("p3", on="node3", req=VERY_LARGE)],
        [
            node("node1", {"hostname": "node1"}, allocatable={"pods": "32", **VERY_LARGE}, unschedulable=True),
            node(
                "node2",
                {"hostname": "node2"},
                allocatable={"pods": "32", **VERY_LARGE},
                taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
            ),
            *nodes("node3", res=VERY_LARGE),
        ],
        ("node3", ["p3"], FOUND.format("node3")),
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "cluster_nodes", "want"), [pytest.param(*c[1:], id=c[0]) for c in FILTER_STATUSES]
)
def test_post_filter_with_the_filters_statuses(incoming: Any, pods: list, cluster_nodes: list, want: tuple) -> None:
    assert run(state(cluster_nodes, pods), incoming) == want


# --- TestDryRunPreemption -------------------------------------------------------------------------

APP_FOO = {"app": "foo"}
SAME_PDB_PODS = [P("p1.1", MID, "node1", MEDIUM, labels=APP_FOO), P("p1.2", MID, "node1", MEDIUM, labels=APP_FOO)]
ANTI_FOO = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                    "topologyKey": "hostname",
                }
            ]
        }
    }
}
FOO_EXISTS = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
SPREAD = {
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": FOO_EXISTS}
        for key in ("zone", "hostname")
    ]
}
FOO = {"foo": ""}
ZONES = ("node-a/zone1", "node-b/zone1", "node-x/zone2")

DRY_RUN = [
    (
        "a pod that fits on both nodes when lower priority pods are preempted",
        ("node1", "node2"),
        P("p", HIGH, req=LARGE),
        [P("p1", MID, "node1", LARGE), P("p2", MID, "node2", LARGE)],
        [],
        {"node1": (["p1"], 0), "node2": (["p2"], 0)},
    ),
    (
        "a pod that would fit on the nodes, but other pods running are higher priority, no preemption would happen",
        ("node1", "node2"),
        P("p", LOW, req=LARGE),
        [P("p1", MID, "node1", LARGE), P("p2", MID, "node2", LARGE)],
        [],
        {},
    ),
    (
        "medium priority pod is preempted, but lower priority one stays as it is small",
        ("node1", "node2"),
        P("p", HIGH, req=LARGE),
        [P("p1.1", LOW, "node1", SMALL), P("p1.2", MID, "node1", LARGE), P("p2", MID, "node2", LARGE)],
        [],
        {"node1": (["p1.2"], 0), "node2": (["p2"], 0)},
    ),
    (
        "mixed priority pods are preempted",
        ("node1", "node2"),
        P("p", HIGH, req=LARGE),
        [
            P("p1.1", MID, "node1", SMALL),
            P("p1.2", LOW, "node1", SMALL),
            P("p1.3", MID, "node1", MEDIUM),
            P("p1.4", HIGH, "node1", SMALL),
            P("p2", HIGH, "node2", LARGE),
        ],
        [],
        {"node1": (["p1.2", "p1.3"], 0)},
    ),
    (
        "mixed priority pods are preempted, pick later StartTime one when priorities are equal",
        ("node1", "node2"),
        P("p", HIGH, req=LARGE),
        [
            P("p1.1", LOW, "node1", SMALL, 5),
            P("p1.2", LOW, "node1", SMALL, 4),
            P("p1.3", MID, "node1", MEDIUM, 3),
            P("p1.4", HIGH, "node1", SMALL, 2),
            P("p2", HIGH, "node2", LARGE, 1),
        ],
        [],
        {"node1": (["p1.1", "p1.3"], 0)},
    ),
    (
        "pod with anti-affinity is preempted",
        ("node1", "node2"),
        P("p", HIGH, req=SMALL, labels=FOO),
        [
            P("p1.1", LOW, "node1", SMALL, labels=FOO, **ANTI_FOO),
            P("p1.2", MID, "node1", SMALL),
            P("p1.3", HIGH, "node1", SMALL),
            P("p2", HIGH, "node2", SMALL),
        ],
        [],
        {"node1": (["p1.1"], 0)},
    ),
    (
        "preemption to resolve pod topology spread filter failure",
        ZONES,
        P("p", HIGH, labels=FOO, **SPREAD),
        [
            P("pod-a1", MID, "node-a", labels=FOO),
            P("pod-a2", LOW, "node-a", labels=FOO),
            P("pod-b1", LOW, "node-b", labels=FOO),
            P("pod-x1", HIGH, "node-x", labels=FOO),
            P("pod-x2", HIGH, "node-x", labels=FOO),
        ],
        [],
        {"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)},
    ),
    (
        "preemption with violation of same pdb",
        ("node1",),
        P("p", HIGH, req=VERY_LARGE),
        SAME_PDB_PODS,
        [pdb("pdb", "default", APP_FOO, 1)],
        {"node1": (["p1.1", "p1.2"], 1)},
    ),
    # its PDB lists p2 in status.disruptedPods; p2 is not a victim, so the budget counts as usual
    (
        "preemption with violation of the pdb with pod whose eviction was processed, the victim doesn't belong to DisruptedPods",
        ("node1",),
        P("p", HIGH, req=VERY_LARGE),
        SAME_PDB_PODS,
        [pdb("pdb", "default", APP_FOO, 1)],
        {"node1": (["p1.1", "p1.2"], 1)},
    ),
    # the budget's status.disruptedPods names p1.2: its eviction went through, it is not counted
    # down again (FilterVictimsWithPDBViolation)
    (
        "preemption with violation of the pdb with pod whose eviction was processed, the victim belongs to DisruptedPods",
        ("node1",),
        P("p", HIGH, req=VERY_LARGE),
        SAME_PDB_PODS,
        [pdb("pdb", "default", APP_FOO, 1, disrupted=["p1.2"])],
        {"node1": (["p1.1", "p1.2"], 0)},
    ),
    (
        "preemption with violation of the pdb with pod whose eviction was processed, the victim which belongs to "
        "DisruptedPods is treated as 'nonViolating'",
        ("node1",),
        P("p", HIGH, req=VERY_LARGE),
        [*SAME_PDB_PODS, P("p1.3", MID, "node1", MEDIUM, labels=APP_FOO)],
        [pdb("pdb", "default", APP_FOO, 1, disrupted=["p1.3"])],
        {"node1": (["p1.1", "p1.2", "p1.3"], 1)},
    ),
]


@pytest.mark.parametrize(
    ("names", "incoming", "pods", "pdbs", "want"), [pytest.param(*c[1:], id=c[0]) for c in DRY_RUN]
)
def test_dry_run_preemption(
    monkeypatch: pytest.MonkeyPatch, names: tuple, incoming: Any, pods: list, pdbs: list, want: dict
) -> None:
    assert candidates(monkeypatch, state(nodes(*names), pods, pdbs), incoming) == want


# --- TestDryRunPreemption: the cases for DefaultPreemptionArgs' sample -----------------------------
# Upstream overrides its offset source (getOffsetRand) to draw 4, then 1, then 3, and dry-runs
# without parallelism; here the offsets come from a source that gives the same.


class Offsets:
    """A random source whose randrange gives the offsets upstream's test draws, in turn."""

    def __init__(self, *offsets: int) -> None:
        self.offsets = list(offsets)

    def randrange(self, n: int) -> int:
        offset = self.offsets.pop(0)
        assert 0 <= offset < n
        return offset


FIVE = ("node1", "node2", "node3", "node4", "node5")
FIVE_MID = [P(f"p{i}", MID, f"node{i}", LARGE) for i in range(1, 6)]

SAMPLED = [
    (
        "all nodes are possible candidates, but DefaultPreemptionArgs limits to 2",
        (40, 1),
        [P("p", HIGH, req=LARGE)],
        FIVE_MID,
        [],
        [{"node1": (["p1"], 0), "node5": (["p5"], 0)}],  # offset 4: node5 (yes), node1 (yes)
    ),
    (
        "some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
        (40, 1),
        [P("p", HIGH, req=LARGE)],
        [P(f"p{i}", VERY_HIGH if i in (2, 5) else MID, f"node{i}", LARGE) for i in range(1, 6)],
        [],
        [{"node1": (["p1"], 0), "node3": (["p3"], 0)}],  # offset 4: node5 (no), node1, node2 (no), node3
    ),
    (
        "preemption offset across multiple scheduling cycles and wrap around",
        (40, 1),
        [P(f"tp{k}", HIGH, req=LARGE) for k in (1, 2, 3)],
        FIVE_MID,
        [],
        [
            {"node1": (["p1"], 0), "node5": (["p5"], 0)},  # offset 4: node5, node1
            {"node2": (["p2"], 0), "node3": (["p3"], 0)},  # offset 1: node2, node3
            {"node4": (["p4"], 0), "node5": (["p5"], 0)},  # offset 3: node4, node5
        ],
    ),
    (
        "preemption looks past numCandidates until a non-PDB violating node is found",
        (40, 2),
        [P("p", HIGH, req=LARGE)],
        [P(f"p{i}", MID, f"node{i}", LARGE, labels=APP_FOO if i in (1, 2, 5) else None) for i in range(1, 6)],
        [pdb("pdb", "default", APP_FOO, 0)],
        # offset 4: node5 (yes, pdb), node1 (yes, pdb), node2 (a third violating one: the list
        # holds 2, dropped), node3 (yes): three candidates for a numCandidates of 2
        [{"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)}],
    ),
]


@pytest.mark.parametrize(
    ("args", "preemptors", "pods", "pdbs", "want"), [pytest.param(*c[1:], id=c[0]) for c in SAMPLED]
)
def test_dry_run_preemption_samples_the_nodes(
    monkeypatch: pytest.MonkeyPatch, args: tuple[int, int], preemptors: list, pods: list, pdbs: list, want: list
) -> None:
    seen: list[preemption.Candidate] = []
    real = preemption.pick_candidate

    def spy(cands: Any, order: Any = None, displacing: frozenset[str] = frozenset()) -> Any:
        seen.extend(cands)
        return real(cands, order, displacing)

    monkeypatch.setattr(preemption, "pick_candidate", spy)
    cluster = state(nodes(*FIVE), pods, pdbs)
    offsets = Offsets(4, 1, 3)
    sampling = preemption.Sampling(*args)
    found = []
    for incoming in preemptors:
        seen.clear()
        preemption.preempt(cluster.snapshot(), default_rules().session(), incoming, sampling=sampling, rng=offsets)
        found.append({c.node: (sorted(v.name for v in c.victims), c.pdb_violations) for c in seen})
    assert found == want


# --- TestSelectBestCandidate ----------------------------------------------------------------------


def at(node_name: str, *pods: tuple) -> list[Any]:
    """Pods "pN.i" on node N: (index, priority, requests[, start])."""
    return [P(f"p{node_name[-1]}.{p[0]}", p[1], node_name, p[2], p[3] if len(p) > 3 else 0) for p in pods]


SELECT_BEST = [
    (
        "a pod that fits on both nodes when lower priority pods are preempted",
        2,
        P("p", HIGH, req=LARGE),
        at("node1", (1, MID, LARGE)) + at("node2", (1, MID, LARGE)),
        {"node1", "node2"},
    ),
    (
        "node with min highest priority pod is picked",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, MEDIUM), (2, MID, LARGE))
        + at("node2", (1, MID, MEDIUM), (2, LOW, MEDIUM))
        + at("node3", (1, LOW, MEDIUM), (2, LOW, MEDIUM)),
        {"node3"},
    ),
    (
        "when highest priorities are the same, minimum sum of priorities is picked",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, MEDIUM), (2, MID, LARGE))
        + at("node2", (1, MID, LARGE), (2, LOW, MEDIUM))
        + at("node3", (1, MID, MEDIUM), (2, MID, MEDIUM)),
        {"node2"},
    ),
    (
        "when highest priority and sum are the same, minimum number of pods is picked",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, SMALL), (2, NEG, SMALL), (3, MID, SMALL), (4, NEG, SMALL))
        + at("node2", (1, MID, LARGE), (2, NEG, MEDIUM))
        + at("node3", (1, MID, MEDIUM), (2, NEG, SMALL), (3, LOW, SMALL)),
        {"node2"},
    ),
    (
        "sum of adjusted priorities is considered",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, SMALL), (2, NEG, SMALL), (3, NEG, SMALL))
        + at("node2", (1, MID, LARGE), (2, NEG, MEDIUM))
        + at("node3", (1, MID, MEDIUM), (2, NEG, SMALL), (3, LOW, SMALL)),
        {"node2"},
    ),
    (
        "non-overlapping lowest high priority, sum priorities, and number of pods",
        4,
        P("p", VERY_HIGH, req=VERY_LARGE),
        at("node1", (1, MID, SMALL), (2, LOW, SMALL), (3, LOW, SMALL))
        + at("node2", (1, HIGH, LARGE))
        + at("node3", (1, MID, MEDIUM), (2, LOW, SMALL), (3, LOW, SMALL), (4, LOW, MEDIUM))
        + at("node4", (1, MID, MEDIUM), (2, MID, SMALL), (3, MID, SMALL), (4, NEG, SMALL)),
        {"node1"},
    ),
    (
        "same priority, same number of victims, different start time for each node's pod",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, MEDIUM, 2), (2, MID, MEDIUM, 2))
        + at("node2", (1, MID, MEDIUM, 3), (2, MID, MEDIUM, 3))
        + at("node3", (1, MID, MEDIUM, 1), (2, MID, MEDIUM, 1)),
        {"node2"},
    ),
    (
        "same priority, same number of victims, different start time for all pods",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, MID, MEDIUM, 4), (2, MID, MEDIUM, 2))
        + at("node2", (1, MID, MEDIUM, 5), (2, MID, MEDIUM, 1))
        + at("node3", (1, MID, MEDIUM, 3), (2, MID, MEDIUM, 6)),
        {"node3"},
    ),
    (
        "different priority, same number of victims, different start time for all pods",
        3,
        P("p", HIGH, req=VERY_LARGE),
        at("node1", (1, LOW, MEDIUM, 4), (2, MID, MEDIUM, 2))
        + at("node2", (1, MID, MEDIUM, 6), (2, LOW, MEDIUM, 1))
        + at("node3", (1, LOW, MEDIUM, 3), (2, MID, MEDIUM, 5)),
        {"node2"},
    ),
]


@pytest.mark.parametrize(("count", "incoming", "pods", "want"), [pytest.param(*c[1:], id=c[0]) for c in SELECT_BEST])
def test_select_best_candidate(count: int, incoming: Any, pods: list, want: set[str]) -> None:
    cluster = state(nodes(*(f"node{i + 1}" for i in range(count)), labelled=False), pods)
    nominated, _, _ = run(cluster, incoming)
    assert nominated in want


# --- TestPreempt ----------------------------------------------------------------------------------

BASIC = [
    P("p1.1", LOW, "node1", SMALL),
    P("p1.2", LOW, "node1", SMALL),
    P("p2.1", HIGH, "node2", LARGE),
    P("p3.1", MID, "node3", MEDIUM),
]
NODES3 = ("node1", "node2", "node3")
PREEMPT = [
    ("basic preemption logic", NODES3, P("p", HIGH, req=VERY_LARGE), BASIC, ("node1", ["p1.1", "p1.2"])),
    (
        "preemption for topology spread constraints",
        ZONES,
        P("p", HIGH, labels=FOO, **SPREAD),
        [
            P("p-a1", HIGH, "node-a", labels=FOO),
            P("p-a2", HIGH, "node-a", labels=FOO),
            P("p-b1", LOW, "node-b", labels=FOO),
            P("p-x1", HIGH, "node-x", labels=FOO),
            P("p-x2", HIGH, "node-x", labels=FOO),
        ],
        ("node-b", ["p-b1"]),
    ),
    ("no preempting in pod", NODES3, P("p", HIGH, req=VERY_LARGE, never=True), BASIC, (None, [])),
    ("PreemptionPolicy is nil", NODES3, P("p", HIGH, req=VERY_LARGE), BASIC, ("node1", ["p1.1", "p1.2"])),
]


@pytest.mark.parametrize(("names", "incoming", "pods", "want"), [pytest.param(*c[1:], id=c[0]) for c in PREEMPT])
def test_preempt(names: tuple, incoming: Any, pods: list, want: tuple) -> None:
    nominated, victims, _ = run(state(nodes(*names), pods), incoming)
    assert (nominated, victims) == want


# --- TestPodEligibleToPreemptOthers: nominated node with terminating pods --------------------------


def terminating(name: str, prio: int, on: str, by_scheduler: bool) -> Any:
    """st.MakePod().Terminating() (a deletionTimestamp), with or without the DisruptionTarget
    condition a scheduler's preemption sets."""
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return decode_pod(
        {
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "deletionTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"nodeName": on, "priority": prio, "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running", "conditions": conditions if by_scheduler else []},
        },
        "test",
        names=False,  # (upstream's names, such as p_with_nominated_node)
    )


def nominated(p: Any, node_name: str) -> Any:
    return dataclasses.replace(p, nominated_node_name=node_name)


ELIGIBLE = [
    (
        "Pod with nominated node",
        nominated(P("p_with_nominated_node", HIGH), "node1"),
        [terminating("p1", LOW, "node1", by_scheduler=False)],
        ("node1",),
        True,
    ),
    ("Pod without nominated node", P("p_without_nominated_node", HIGH), [], (), True),
    ("Pod with 'PreemptNever' preemption policy", P("p_with_preempt_never_policy", HIGH, never=True), [], (), False),
    (
        "preemption victim pod terminating, as indicated by the dedicated DisruptionTarget condition",
        nominated(P("p_with_nominated_node", HIGH), "node1"),
        [terminating("p1", LOW, "node1", by_scheduler=True)],
        ("node1",),
        False,
    ),
    (
        "non-victim Pods terminating",
        nominated(P("p_with_nominated_node", HIGH), "node1"),
        [terminating("p1", LOW, "node1", by_scheduler=False)],
        ("node1",),
        True,
    ),
]


@pytest.mark.parametrize(("incoming", "pods", "names", "want"), [pytest.param(*c[1:], id=c[0]) for c in ELIGIBLE])
def test_pod_eligible_to_preempt_others(incoming: Any, pods: list, names: tuple, want: bool) -> None:
    result = preemption.preempt(state(nodes(*names), pods).snapshot(), default_rules().session(), incoming)
    assert result.eligible is want
    if not want and names:
        assert result.message == "preemption: not eligible due to a terminating pod on the nominated node."


def test_a_terminating_pod_of_higher_priority_does_not_hold_the_preemptor_back() -> None:
    """(isPreemptionAllowed: only a pod the preemptor could evict counts.)"""
    incoming = nominated(P("p", MID), "node1")
    result = preemption.preempt(
        state(nodes("node1"), [terminating("p1", HIGH, "node1", by_scheduler=True)]).snapshot(),
        default_rules().session(),
        incoming,
    )
    assert result.eligible


def test_an_unresolvable_nominated_node_is_given_up_even_with_a_victim_terminating() -> None:
    """("Pod with nominated node" with its nominatedNodeStatus: the nominated node is
    UnschedulableAndUnresolvable, here by an untolerated taint, so the pod may preempt again
    although a pod it preempted is still terminating there.)"""
    tainted = node("node1", taints=[{"key": "foo", "value": "bar", "effect": "NoSchedule"}])
    incoming = nominated(P("p", HIGH), "node1")
    cluster = state([tainted, *nodes("node2")], [terminating("p1", LOW, "node1", by_scheduler=True)])
    assert preemption.preempt(cluster.snapshot(), default_rules().session(), incoming).eligible
    untainted = state(nodes("node1", "node2"), [terminating("p1", LOW, "node1", by_scheduler=True)])
    assert not preemption.preempt(untainted.snapshot(), default_rules().session(), incoming).eligible


# --- not an upstream table: util.GetPodStartTime, which MoreImportantPod and GetEarliestPodStartTime
# use, takes a pod without status.startTime (assumed, or bound and not started) as started now ----

NO_START_TIME = [
    (
        "victims: the pod without a start time is the less important one",
        ("node1",),
        P("p", HIGH, req=LARGE),
        [P("started", MID, "node1", MEDIUM, 1), P("not-started", MID, "node1", MEDIUM)],
        ("node1", ["not-started"]),
    ),
    (
        "candidates: a victim without a start time started latest",
        ("node1", "node2"),
        P("p", HIGH, req=LARGE),
        [P("started", MID, "node1", LARGE, 5), P("not-started", MID, "node2", LARGE)],
        ("node2", ["not-started"]),
    ),
]


@pytest.mark.parametrize(("names", "incoming", "pods", "want"), [pytest.param(*c[1:], id=c[0]) for c in NO_START_TIME])
def test_pods_without_start_time_count_as_started_now(names: tuple, incoming: Any, pods: list, want: tuple) -> None:
    nominated, victims, _ = run(state(nodes(*names, labelled=False), pods), incoming)
    assert (nominated, victims) == want


def test_the_tables_above_went_through_the_batch() -> None:
    assert BATCHES  # (collected last: the tables ran first, batched in one of their two runs)
