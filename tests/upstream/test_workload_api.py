"""The workload API's groups (Kubernetes 1.37), ported from kube-scheduler's own tests at v1.37.2.

Each case names its source: file (under pkg/scheduler/) and test. Plugin-level outcomes (Wait,
Success, Unschedulable, an Error) are asserted on the function that plays the plugin's part
(:func:`rulesched.scheduler.workload_placement.feasibility`, :mod:`rulesched.scheduler.placement`,
:mod:`rulesched.scheduler.workload_preemption`) or on what a whole simulation does with the pods.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.errors import ObjectError
from rulesched.model import Pod
from rulesched.model.decode import decode_pdb
from rulesched.model.groups import PodGroup, decode_pod_group, decode_workload
from rulesched.scheduler import placement
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.gang import Gangs
from rulesched.scheduler.victims import Unit, highest_all, more_important, split_by_pdb
from rulesched.scheduler.workload_placement import feasibility
from rulesched.scheduler.workload_preemption import policy_of
from rulesched.scheduler.workloads import validate
from rulesched.simulate.driver import Simulation
from tests.upstream.harness import cpg, default_rules, node, pg, pod

# --- builders (st.MakePod().PodGroupName; st.MakePodGroup, st.MakeCompositePodGroup: harness) ----


def member(
    name: str,
    group: str | None,
    cpu: str = "1",
    priority: int = 0,
    bound: str = "",
    scheduler: str = "default-scheduler",
    policy: str = "",
    labels: dict[str, str] | None = None,
    start: str = "",
) -> Pod:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        "priority": priority,
        "schedulerName": scheduler,
    }
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    if policy:
        spec["preemptionPolicy"] = policy
    extra: dict[str, Any] = {}
    p = pod(name, spec=spec, node_name=bound, labels=labels, **extra)
    if start:
        from dataclasses import replace

        from rulesched.model.fields import Where, get_time

        p = replace(p, start_time=get_time({"t": start}, "t", Where("test", "Pod"), ""))
    return p


def _node(name: str, cpu: str = "4", **labels: str) -> Any:
    return node(name, labels=labels, allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110"})


def _run(nodes: list[Any], pending: list[Pod], groups: list[PodGroup], running: list[Pod] = ()) -> Simulation:  # type: ignore[assignment]
    sim = Simulation(default_rules(), ClusterStore.build(nodes, running), SchedulerSettings())
    for group in groups:
        sim.add_group(group)
    for p in pending:
        sim.add(p)
    sim.run()
    return sim


def _bound(sim: Simulation) -> dict[str, str]:
    return {k.split("/", 1)[1]: h.node for k, h in sim.history.items() if h.node}


def _gangs(*groups: PodGroup) -> Gangs:
    gangs = Gangs(lambda: 0.0)
    for g in groups:
        gangs.set_group(g)
    return gangs


# --- framework/plugins/gangscheduling/gangscheduling_test.go: TestPlacementFeasible --------------
# (each case's pods' outcomes in order, and PlacementFeasible's answer after each; the isCPG and
# cpgFeatureGate variants of a case share its expectations: one row here)
FEASIBLE = [
    ("All pods succeed, minCount met at end", 2, 2, 0, ["ok", "ok"], ["wait", "ok"]),
    ("First pod fails, minCount not satisfiable", 3, 3, 0, ["no"], ["no"]),
    ("Second pod fails, minCount not satisfiable", 2, 2, 0, ["ok", "no"], ["wait", "no"]),
    ("Non-gang pod group with 0 scheduled pods fails", 1, 1, 0, ["no"], ["no"]),
    ("Non-gang pod group with succeeds once 1 pod is scheduled", 1, 1, 0, ["ok"], ["ok"]),
    ("Non-gang pod group with 1 initially scheduled pod succeeds", 1, 1, 1, ["no"], ["ok"]),
]


@pytest.mark.parametrize(
    ("name", "minimum", "pods", "scheduled", "outcomes", "want"), FEASIBLE, ids=[c[0] for c in FEASIBLE]
)
def test_placement_feasible(
    name: str, minimum: int, pods: int, scheduled: int, outcomes: list[str], want: list[str]
) -> None:
    remaining = pods
    got = []
    for outcome in outcomes:
        remaining -= 1
        scheduled += outcome == "ok"
        got.append(feasibility(minimum, scheduled, remaining)[0])
    assert got == want


def test_placement_feasible_messages() -> None:
    # gangscheduling.go PlacementFeasible's wording (the PodGroup condition and pods' messages)
    assert feasibility(3, 1, 1) == ("no", "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
    assert feasibility(3, 1, 2) == ("wait", "minCount (3) is not yet satisfied: 1 scheduled, 2 remaining")
    assert feasibility(3, 3, 0) == ("ok", "")


# --- framework/plugins/topologyaware/topology_placement_test.go: TestGeneratePlacements ----------
# The parent placement is the nodes labelled in=yes; "otherNodes" have no such label.


def _placement_nodes(placement_nodes: dict[str, dict[str, str]], other: dict[str, dict[str, str]]) -> list[Any]:
    return [node(n, labels={**lbl, "in": "yes"}) for n, lbl in placement_nodes.items()] + [
        node(n, labels=lbl) for n, lbl in other.items()
    ]


def _names(nodes: list[Any], p: placement.Placement) -> list[str]:
    return [n.name for n in nodes if placement.within(n, p.domain)]


GENERATE = [
    (
        "with topology key constraint, returns placement for each topology domain",
        "topology1",
        {
            "node0": {"topology2": "d1"},
            "node1": {"topology2": "d4"},
            "node2": {"topology1": "d1"},
            "node3": {"topology1": "d2"},
            "node4": {"topology1": "d1"},
            "node5": {"topology1": "d3"},
        },
        {},
        [],
        {"d1": ["node2", "node4"], "d2": ["node3"], "d3": ["node5"]},
    ),
    (
        "without matching topology label, returns empty",
        "topology3",
        {"node0": {"topology2": "d1"}, "node2": {"topology1": "d1"}},
        {},
        [],
        {},
    ),
    (
        "with pods already scheduled in a single domain, returns that domain",
        "topology",
        {"node0": {"topology": "d2"}, "node1": {"topology": "d1"}},
        {"node2": {"topology": "d1"}, "node3": {"topology": "d1"}},
        ["node2", "node3"],
        {"d1": ["node1"]},
    ),
    (
        "with pods already scheduled in a single domain not present in current placement, returns empty",
        "topology",
        {"node0": {"topology": "d2"}},
        {"node2": {"topology": "d1"}, "node3": {"topology": "d1"}},
        ["node2", "node3"],
        {},
    ),
    (
        "with pods already scheduled in conflicting domains, returns error",
        "topology",
        {"node0": {"topology": "d2"}, "node1": {"topology": "d1"}},
        {"node2": {"topology": "d0"}, "node3": {"topology": "d1"}},
        ["node2", "node3"],
        None,
    ),
    (
        "with already scheduled pod on node without topology label, returns error",
        "topology",
        {"node1": {"topology": "d2"}},
        {"node2": {"foo": "bar"}},
        ["node2"],
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "key", "inside", "outside", "scheduled_on", "want"), GENERATE, ids=[c[0] for c in GENERATE]
)
def test_generate_placements(
    name: str,
    key: str,
    inside: dict[str, dict[str, str]],
    outside: dict[str, dict[str, str]],
    scheduled_on: list[str],
    want: dict[str, list[str]] | None,
) -> None:
    nodes = _placement_nodes(inside, outside)
    by_name = {n.name: n for n in nodes}
    required, problem = placement.placed_domain([by_name[n] for n in scheduled_on], key)
    if want is None:
        assert problem
        return
    assert not problem
    found = placement.placements(nodes, key, {"in": "yes"}, required)
    assert {p.name: _names(nodes, p) for p in found} == want


def test_generate_placements_without_constraint_keeps_the_parent() -> None:
    # TestGeneratePlacements "without constraint returns placement matching all nodes": a group
    # without a topology key is placed in its parent's placement (workload_placement.Attempt.place)
    nodes = _placement_nodes({"node1": {}, "node2": {"foo": "bar"}}, {"node3": {}})
    assert [n.name for n in nodes if placement.within(n, {"in": "yes"})] == ["node1", "node2"]


# --- framework/plugins/podgrouppodscount/podgroup_pods_count_test.go: TestNormalizePlacementScore -
NORMALIZE = [
    ("distinct scores", [10, 50, 110], [9, 45, 100]),
    ("equal scores", [50, 50], [100, 100]),
    ("single score", [50], [100]),
    ("some minimal score that is far from a group of scores located closely", [11, 100, 101, 102], [10, 98, 99, 100]),
]


@pytest.mark.parametrize(("name", "scores", "want"), NORMALIZE, ids=[c[0] for c in NORMALIZE])
def test_normalize_placement_score(name: str, scores: list[int], want: list[int]) -> None:
    assert placement.normalized_counts(scores) == want


def test_normalize_placement_score_zero_scores() -> None:
    with pytest.raises(ValueError, match="no pods from pod group are assigned to any of the candidate placements"):
        placement.normalized_counts([0, 0])


# --- framework/plugins/noderesources/fit_test.go: TestScorePlacement_Resources --------------------


def _cap(cpu: str, memory: str, gpu: str | None = None) -> dict[str, str]:
    out = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu is not None:
        out["nvidia.com/gpu"] = gpu
    return out


def _req(name: str, cpu: str, memory: str, gpu: str | None = None, on: str = "") -> Pod:
    requests = {"cpu": cpu, "memory": memory}
    if gpu is not None:
        requests["nvidia.com/gpu"] = gpu
    return pod(
        name, spec={"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}, node_name=on
    )


SCORE_PLACEMENT = [
    ("Computes score based on total requests", 2, [], (("cpu", 1), ("memory", 1)), None, 25),
    ("Computes score using weights", 2, [], (("cpu", 4), ("memory", 1)), None, 28),
    ("Does not include nodes from outside of placement", 3, [], (("cpu", 1), ("memory", 1)), None, 25),
    (
        "Includes pre-existing pods from outside of pod group",
        2,
        [("1000m", "0", None)],
        (("cpu", 1), ("memory", 1)),
        None,
        30,
    ),
    (
        "Includes scalar resources if any pod in pod group has nonzero requests",
        2,
        [("1000m", "0", "0")],
        (("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1)),
        ("0", "1"),
        20,
    ),
    (
        "Does not include scalar resources if all pods in pod group have zero requests",
        2,
        [("1000m", "0", "1")],
        (("cpu", 1), ("memory", 1), ("nvidia.com/gpu", 1)),
        ("0", "0"),
        25,
    ),
]


@pytest.mark.parametrize(
    ("name", "node_count", "existing", "resources", "gpus", "want"),
    SCORE_PLACEMENT,
    ids=[c[0] for c in SCORE_PLACEMENT],
)
def test_score_placement_resources(
    name: str,
    node_count: int,
    existing: list[tuple[str, str, str | None]],
    resources: tuple[tuple[str, int], ...],
    gpus: tuple[str, str] | None,
    want: int,
) -> None:
    gpu = "5" if gpus is not None else None
    nodes = [
        node(f"node{i + 1}", labels={"in": "yes" if i < 2 else "no"}, allocatable=_cap("5000m", "5000", gpu))
        for i in range(node_count)
    ]
    running = [_req(f"baz{i}", *e, on="node1") for i, e in enumerate(existing)]
    store = ClusterStore.build(nodes, running)
    if gpus is None:
        members = [_req("foo", "1000m", "0"), _req("bar", "2000m", "2000")]
    else:
        members = [_req("foo", "1000m", "0", gpus[0]), _req("bar", "1000m", "2000", gpus[1])]
    assert placement.fit_score(store.node_views(), {"in": "yes"}, members, resources) == want


# --- framework/preemption/util_test.go: TestMoreImportantVictim ------------------------------------
NOW, BEFORE = "1970-01-01T00:16:40Z", "1970-01-01T00:08:20Z"  # time.Unix(1000, 0) and (500, 0)


def _unit(priority: int, kind: str, size: int = 1, start: str = "") -> Unit:
    pods = tuple(member(f"p{i}", "pg" if kind != "Pod" else None, start=start) for i in range(size))
    return Unit(pods, priority, kind)


MORE_IMPORTANT = [
    ("vi1 has higher priority", _unit(20, "Pod"), _unit(10, "Pod"), True),
    ("vi2 has higher priority", _unit(10, "Pod"), _unit(20, "Pod"), False),
    ("vi1 is PG, vi2 is Pod, same priority", _unit(10, "PodGroup"), _unit(10, "Pod"), True),
    ("vi1 is Pod, vi2 is PG, same priority", _unit(10, "Pod"), _unit(10, "PodGroup"), False),
    ("both Pods, vi1 older", _unit(10, "Pod", start=BEFORE), _unit(10, "Pod", start=NOW), True),
    ("both Pods, vi2 older", _unit(10, "Pod", start=NOW), _unit(10, "Pod", start=BEFORE), False),
    ("both PGs, vi1 larger", _unit(10, "PodGroup", 2), _unit(10, "PodGroup", 1), True),
    ("both PGs, vi2 larger", _unit(10, "PodGroup", 1), _unit(10, "PodGroup", 2), False),
    ("both PGs, same size, vi1 older", _unit(10, "PodGroup", 2, BEFORE), _unit(10, "PodGroup", 2, NOW), True),
    ("both PGs, same size, vi2 older", _unit(10, "PodGroup", 2, NOW), _unit(10, "PodGroup", 2, BEFORE), False),
    ("CPG vs Pod, same priority (CPG wins)", _unit(10, "CompositePodGroup"), _unit(10, "Pod"), True),
    ("Pod vs CPG, same priority (CPG wins)", _unit(10, "Pod"), _unit(10, "CompositePodGroup"), False),
]


@pytest.mark.parametrize(("name", "vi1", "vi2", "want"), MORE_IMPORTANT, ids=[c[0] for c in MORE_IMPORTANT])
def test_more_important_victim(name: str, vi1: Unit, vi2: Unit, want: bool) -> None:
    assert (more_important(vi1) < more_important(vi2)) is want


# --- framework/preemption/util_test.go: TestFilterVictimsWithPDBViolation (units) -------------------


def _pdb(name: str, app: str, allowed: int) -> Any:
    obj = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }
    return decode_pdb(obj, "test")


def test_filter_victims_with_pdb_violation_group_is_atomic() -> None:
    # "A Victim is atomic: if any single pod inside it would violate a PDB on eviction, the entire
    # Victim is classified as violating" (util.go FilterVictimsWithPDBViolation)
    a = member("a", "pg", labels={"app": "x"})
    b = member("b", "pg", labels={"app": "y"})
    c = member("c", None, labels={"app": "y"})
    group = Unit((a, b), 0, "PodGroup")
    single = Unit((c,), 0, "Pod")
    violating, safe = split_by_pdb([group, single], [_pdb("pdb-x", "x", 1), _pdb("pdb-y", "y", 1)])
    assert violating == [single] and safe == [group]  # b uses y's one disruption; c then violates it
    violating, safe = split_by_pdb([group], [_pdb("pdb-x", "x", 0)])
    assert violating == [group] and safe == []


# --- framework/preemption/types_test.go: TestGetHighestAllAncestor ---------------------------------
HIGHEST_ALL = [
    ("pod without group", [], None, None),
    ("pod group missing from the lister", [], "pg1", None),
    ("pod group disruption mode single", [pg("pg1", 2, disruption="single")], "pg1", None),
    ("pod group disruption mode All", [pg("pg1", 2, disruption="all")], "pg1", "pg:default/pg1"),
    (
        "parent CPG disruption mode All, child PG disruption mode single",
        [pg("pg1", 2, disruption="single", parent="cpg1"), cpg("cpg1", 1, disruption="all")],
        "pg1",
        "cpg:default/cpg1",
    ),
    (
        "grandparent CPG disruption mode All, parent CPG disruption mode single, child PG disruption mode single",
        [
            pg("pg1", 2, disruption="single", parent="cpg1"),
            cpg("cpg1", 1, disruption="single", parent="cpg2"),
            cpg("cpg2", 1, disruption="all"),
        ],
        "pg1",
        "cpg:default/cpg2",
    ),
    (
        "highest All parent wins (both have disruption mode All)",
        [pg("pg1", 2, disruption="all", parent="cpg1"), cpg("cpg1", 1, disruption="all")],
        "pg1",
        "cpg:default/cpg1",
    ),
    (
        "parent CPG missing from cache lister, child PG All returned",
        [pg("pg1", 2, disruption="all", parent="cpg1")],
        "pg1",
        "pg:default/pg1",
    ),
]


@pytest.mark.parametrize(("name", "groups", "pod_group", "want"), HIGHEST_ALL, ids=[c[0] for c in HIGHEST_ALL])
def test_get_highest_all_ancestor(name: str, groups: list[PodGroup], pod_group: str | None, want: str | None) -> None:
    found = highest_all(member("p", pod_group), _gangs(*groups))
    assert (found.key if found is not None else None) == want


def test_disruption_mode_1_36_strings() -> None:
    # v1alpha2 (1.36) spelled the modes Pod and PodGroup: PodGroup is 1.37's all
    assert pg("a", 2, version="v1alpha2").disruption_all is False
    obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "b"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": "PodGroup"},
    }
    assert decode_pod_group(obj, "t").disruption_all is True


# --- framework/preemption/types_test.go: TestNewPodGroupPreemptorResolvesPreemptionPolicy ----------
# (the PodGroupPreemptionPolicy gate: a PodGroup whose preemptionPolicy is set was accepted with the
# gate on, which then decides; unset, the pods decide, as with the gate off)
POLICY = [
    (
        "PreemptionPolicy PreemptNever is resolved from PodGroup, ignoring policy in pod",
        "Never",
        ["PreemptLowerPriority"],
        "Never",
    ),
    (
        "PreemptionPolicy PreemptLowerPriority is resolved from PodGroup, ignoring different policies in pods",
        "PreemptLowerPriority",
        ["Never", "PreemptLowerPriority"],
        "PreemptLowerPriority",
    ),
    (
        "PreemptionPolicy is resolved from pods with PodGroupPreemptionPolicy disabled",
        "",
        ["PreemptLowerPriority"],
        "PreemptLowerPriority",
    ),
    (
        "PreemptionPolicy is resolved from pods when multiple pods have different policies",
        "",
        ["PreemptLowerPriority", "Never"],
        "Never",
    ),
]


@pytest.mark.parametrize(("name", "group_policy", "pod_policies", "want"), POLICY, ids=[c[0] for c in POLICY])
def test_preemptor_resolves_preemption_policy(name: str, group_policy: str, pod_policies: list[str], want: str) -> None:
    members = [member(f"p{i}", "pg", policy=p) for i, p in enumerate(pod_policies)]
    assert policy_of(pg("pg", 1, policy=group_policy), members) == want


# --- schedule_one_podgroup_test.go: TestValidatePodGroup -------------------------------------------
VALIDATE = [
    ("success for same scheduler name", pg("pg", 1), [("p1", "sched1", 0, ""), ("p2", "sched1", 0, "")], [], False),
    (
        "failure for different scheduler names",
        pg("pg", 1),
        [("p1", "sched1", 0, ""), ("p2", "sched2", 0, "")],
        [],
        True,
    ),
    ("success when priorities match", pg("pg", 1, priority=10), [("p1", "s", 10, ""), ("p2", "s", 10, "")], [], False),
    (
        "failure when different priorities across pods",
        pg("pg", 1, priority=10),
        [("p1", "s", 9, ""), ("p2", "s", 10, "")],
        [],
        True,
    ),
    (
        "failure when different priorities across pods and pod group",
        pg("pg", 1, priority=9),
        [("p1", "s", 10, ""), ("p2", "s", 10, "")],
        [],
        True,
    ),
    (
        "success when new pods match scheduled pods scheduler name and priority",
        pg("pg", 1, priority=10),
        [("p1", "sched1", 10, "")],
        [("p2", "sched1", 10, "")],
        False,
    ),
    (
        "failure when new pod has different scheduler name than scheduled pod",
        pg("pg", 1, priority=10),
        [("p1", "sched1", 10, "")],
        [("p2", "sched2", 10, "")],
        True,
    ),
    (
        "failure when new pod has different priority than scheduled pod",
        pg("pg", 1, priority=10),
        [("p1", "sched1", 10, "")],
        [("p2", "sched1", 9, "")],
        True,
    ),
    (
        "success when preemption policies match",
        pg("pg", 1, policy="Never"),
        [("p1", "s", 0, "Never"), ("p2", "s", 0, "Never")],
        [],
        False,
    ),
    (
        "failure when different preemption policies across pods",
        pg("pg", 1, policy="Never"),
        [("p1", "s", 0, "PreemptLowerPriority"), ("p2", "s", 0, "Never")],
        [],
        True,
    ),
    (
        "failure when different preemption policies across pods and pod group",
        pg("pg", 1, policy="Never"),
        [("p1", "s", 0, "PreemptLowerPriority"), ("p2", "s", 0, "PreemptLowerPriority")],
        [],
        True,
    ),
    (
        "failure when preemption policies do not match across pods and PodGroupPreemptionPolicy is disabled",
        pg("pg", 1),
        [("p1", "s", 0, "PreemptLowerPriority"), ("p2", "s", 0, "Never")],
        [],
        True,
    ),
    (
        "CPG success when all leaf groups and pods have PreemptNever with PodGroupPreemptionPolicy enabled",
        cpg("cpg-root", 1, priority=10, policy="Never"),
        [("p1", "s", 10, "Never"), ("p2", "s", 10, "Never")],
        [],
        False,
    ),
    (
        "CPG failure when different preemption policies are used across pods in the CPG with PodGroupPreemptionPolicy enabled",
        cpg("cpg-root", 1, priority=10, policy="Never"),
        [("p1", "s", 10, "Never"), ("p2", "s", 10, "PreemptLowerPriority")],
        [],
        True,
    ),
]


@pytest.mark.parametrize(("name", "root", "pending", "placed", "error"), VALIDATE, ids=[c[0] for c in VALIDATE])
def test_validate_pod_group(
    name: str,
    root: PodGroup,
    pending: list[tuple[str, str, int, str]],
    placed: list[tuple[str, str, int, str]],
    error: bool,
) -> None:
    def make(spec: tuple[str, str, int, str], bound: str = "") -> Pod:
        n, scheduler, priority, policy = spec
        return member(
            n, "pg", priority=priority, scheduler=scheduler, policy=policy or "PreemptLowerPriority", bound=bound
        )

    problem = validate(root, [make(p) for p in pending], [make(p, "node1") for p in placed])
    assert bool(problem) is error, problem


# --- schedule_one_podgroup_test.go: TestPodGroupSchedulingAlgorithm (as cluster outcomes) --------
# The fake filter's per-pod answers become pods too big for the node (2 cpu of 4; "p1" asks 8).


def test_pod_group_scheduling_algorithm_all_pods_feasible() -> None:
    # "All pods feasible": Success, every pod on node1
    sim = _run([_node("node1", "8")], [member(f"p{i}", "pg", "2") for i in (1, 2, 3)], [pg("pg", 3)])
    assert _bound(sim) == {"p1": "node1", "p2": "node1", "p3": "node1"}


def test_pod_group_scheduling_algorithm_schedulable_with_two_of_three() -> None:
    # "PodGroup schedulable with 2 schedulable pods": p1 is unschedulable, the group (minCount 2) is
    # placed with p2 and p3; p1 waits alone with its own reasons
    pending = [member("p1", "pg", "16", priority=0), member("p2", "pg", "2"), member("p3", "pg", "2")]
    sim = _run([_node("node1", "8")], pending, [pg("pg", 2)])
    assert _bound(sim) == {"p2": "node1", "p3": "node1"}
    last = sim.history["default/p1"].last
    assert last is not None and last.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_pod_group_scheduling_algorithm_stops_once_min_count_cannot_be_met() -> None:
    # "All pods feasible, podGroup unschedulable with 2 pods" / "First placementFeasible call
    # returned Unschedulable": evaluation stops early; nothing is bound or held
    pending = [member(f"p{i}", "pg", "3") for i in (1, 2, 3)]
    sim = _run([_node("node1", "4"), _node("node2", "4")], pending, [pg("pg", 3)])
    assert _bound(sim) == {} and not list(sim.store.pods())
    outcome = [o for o in sim.scheduler.gangs.outcomes if not o.waiting][0]
    assert outcome.message.startswith("minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")
    assert outcome.conditions[0].reason == "Unschedulable" and outcome.conditions[0].status is False


def test_pod_group_scheduling_algorithm_all_pods_unschedulable() -> None:
    # "All pods unschedulable": Unschedulable, each pod with its own failure
    pending = [member(f"p{i}", "pg", "16") for i in (1, 2, 3)]
    sim = _run([_node("node1", "8")], pending, [pg("pg", 1)])
    assert _bound(sim) == {}
    for name in ("p1", "p2", "p3"):
        last = sim.history[f"default/{name}"].last
        assert last is not None and last.message == "0/1 nodes are available: 1 Insufficient cpu."


# --- schedule_one_podgroup_test.go: TestScheduleOnePodGroup_PodGroupNotFound ----------------------


def test_schedule_one_pod_group_pod_group_not_found() -> None:
    # a pod whose PodGroup does not exist is not scheduled (and no condition is written)
    sim = _run([_node("node1")], [member("p1", "pg")], [])
    assert _bound(sim) == {}
    last = sim.history["default/p1"].last
    assert last is not None and last.waiting
    assert last.message == 'waiting for pods\'s pod group "pg" to appear in scheduling queue'
    sim.add_group(pg("pg", 1))  # the PodGroup appears: its pod is tried at once
    sim.run()
    assert _bound(sim) == {"p1": "node1"}


def test_gang_waits_for_min_count_pods() -> None:
    # gangscheduling.go PreEnqueue: "waiting for minCount pods from a gang to appear in scheduling queue"
    sim = _run([_node("node1")], [member("p1", "pg")], [pg("pg", 2)])
    last = sim.history["default/p1"].last
    assert _bound(sim) == {} and last is not None and last.waiting
    assert last.message == "waiting for minCount pods from a gang to appear in scheduling queue"
    assert sim.scheduler.gangs.waiting_count() == 1 and math.isinf(
        sim.scheduler.gangs.groups["pg:default/pg"].timeout_seconds
    )
    sim.add(member("p2", "pg"))
    sim.run()
    assert set(_bound(sim)) == {"p1", "p2"}


def test_schedule_one_pod_group_scheduler_name_mismatch_updates_status() -> None:
    # TestScheduleOnePodGroup_SchedulerNameMismatchUpdatesStatus: SchedulerError condition
    pending = [member("p1", "pg"), member("p2", "pg", scheduler="other")]
    sim = Simulation(default_rules(), ClusterStore.build([_node("node1")], []), SchedulerSettings())
    sim.scheduler.add_profile("other", default_rules())
    sim.add_group(pg("pg", 2))
    for p in pending:
        sim.add(p)
    sim.run()
    assert _bound(sim) == {}
    errors = [c for o in sim.scheduler.gangs.outcomes for c in o.conditions if c.reason == "SchedulerError"]
    assert errors and "same .spec.schedulerName" in errors[0].message


# --- framework/plugins/gangscheduling/gangscheduling_test.go: Test_isSchedulableAfterPodGroupUpdated -
# 1.37 lets a gang's minCount change. Upstream's queueing hint queues a waiting member when its
# own PodGroup's minCount decreased, and skips it otherwise; here the outcome: the member waiting
# for its gang is placed once the lowered minCount is met, and keeps waiting (untried, no
# condition) for the rest. (rulesched re-checks a held member on any change of its group's spec:
# a check, not an attempt, so the skipped cases end the same.)
UPDATED = [
    # (upstream's case name, the target's namespace/group, the members of default/pg beside it,
    #  default/pg's minCount before and after, whether the target is placed)
    ("minCount decreased matches target pod", "default/pg", ("p2", "p3"), 4, 3, True),
    ("minCount increased matches target pod", "default/pg", ("p2",), 3, 4, False),
    ("minCount unchanged matches target pod", "default/pg", ("p2",), 3, 3, False),
    (
        "minCount decreased but pod group name doesn't match target pod",
        "default/pg-other",
        ("p2", "p3", "p4"),
        4,
        3,
        False,
    ),
    (
        "minCount decreased but pod group namespace doesn't match target pod",
        "ns-other/pg",
        ("p2", "p3", "p4"),
        4,
        3,
        False,
    ),
]


@pytest.mark.parametrize(("case", "target", "others", "old", "new", "placed"), UPDATED, ids=[u[0] for u in UPDATED])
def test_is_schedulable_after_pod_group_updated(
    case: str, target: str, others: tuple[str, ...], old: int, new: int, placed: bool
) -> None:
    namespace, group = target.split("/")

    def waiting(name: str, ns: str, grp: str) -> Pod:
        spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
        return pod(name, namespace=ns, spec={**spec, "schedulingGroup": {"podGroupName": grp}})

    groups = [pg("pg", old), pg("pg-other", 4), pg("pg", 4, namespace="ns-other")]
    members = [waiting("target", namespace, group), *(waiting(n, "default", "pg") for n in others)]
    sim = _run([_node("node1", "8")], members, groups)
    assert _bound(sim) == {}  # every member waits for its gang
    sim.add_group(pg("pg", new))
    sim.run()
    history = sim.history[f"{namespace}/target"]
    assert (history.node is not None) == placed, case
    if not placed:  # still waiting: untried, no condition written
        assert history.last is not None and history.last.waiting
    if group != "pg" or namespace != "default":  # default/pg itself was placed once its minimum was met
        assert set(_bound(sim)) == set(others)


# --- schedule_one_podgroup_test.go: TestUpdatePodGroupCondition, TestSubmitPodGroupAlgorithmResult -


def test_conditions_follow_each_pod_group() -> None:
    sim = _run([_node("node1", "8")], [member(f"p{i}", "pg", "2") for i in (1, 2)], [pg("pg", 2)])
    conditions = [c for o in sim.scheduler.gangs.outcomes for c in o.conditions]
    assert [(c.status, c.reason, c.message) for c in conditions] == [(True, "Scheduled", "")]
    assert conditions[0].group.condition_type == "PodGroupInitiallyScheduled"
    assert pg("old", 1, version="v1alpha2").condition_type == "PodGroupScheduled"  # 1.36's name


# --- schedule_one_podgroup_test.go: TestCPGMinGroupCount_Internal, TestCPGBasicWithGangChildren ---


def test_composite_min_group_count_places_enough_children() -> None:
    # a composite of three gangs, minGroupCount 2: two fit (4 cpu each), the third (9 cpu) fits
    # nowhere; the composite is placed with the two; the third's pods wait with their own reasons
    groups = [cpg("job", 2), pg("a", 2, parent="job"), pg("b", 2, parent="job"), pg("c", 1, parent="job")]
    pending = [member(f"a{i}", "a", "2") for i in (0, 1)] + [member(f"b{i}", "b", "2") for i in (0, 1)]
    pending.append(member("c0", "c", "9"))
    sim = _run([_node("n0", "4"), _node("n1", "4")], pending, groups)
    assert set(_bound(sim)) == {"a0", "a1", "b0", "b1"}
    conditions = {c.group.name: c.status for o in sim.scheduler.gangs.outcomes for c in o.conditions}
    assert conditions == {"a": True, "b": True, "c": False}


def test_composite_short_of_children_places_none() -> None:
    # minGroupCount 3 of three children, one of which cannot fit: nothing is bound
    groups = [cpg("job", 3), pg("a", 2, parent="job"), pg("b", 2, parent="job"), pg("c", 1, parent="job")]
    pending = [member(f"a{i}", "a", "2") for i in (0, 1)] + [member(f"b{i}", "b", "2") for i in (0, 1)]
    pending.append(member("c0", "c", "9"))
    sim = _run([_node("n0", "4"), _node("n1", "4")], pending, groups)
    assert _bound(sim) == {} and not list(sim.store.pods())
    outcome = [o for o in sim.scheduler.gangs.outcomes if not o.waiting][0]
    assert outcome.message.startswith("minCount (3) cannot be satisfied: 2 scheduled, 0 remaining")


def test_composite_children_statuses_as_kube_scheduler_writes_them() -> None:
    # completeCompositePodGroupAlgorithmResultMap and applyPodGroupPostFilterResult, as the real
    # kube-scheduler 1.37 wrote them (tests/test_real_workloads.py): "c" stopped its composite
    # (minGroupCount 2, 0 fit, 1 left), "d" was never evaluated and shares its parent's status,
    # to which the post filter's is appended once for the parent and once for "d"
    groups = [cpg("cd", 2), pg("c", 2, parent="cd"), pg("d", 2, parent="cd")]
    pending = [member(f"{g}{i}", g, "3") for g in "cd" for i in (0, 1)]
    sim = _run([_node("n0", "2"), _node("n1", "2")], pending, groups)
    outcome = [o for o in sim.scheduler.gangs.outcomes if not o.waiting][0]
    conditions = {c.group.name: c.message for c in outcome.conditions}
    no_victims = "pod group preemption: No preemption victims found for incoming preemptor"
    c_status = "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    parent = "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    assert conditions == {"c": f"{c_status}, {no_victims}", "d": f"{parent}, {no_victims}, {no_victims}"}
    told = {
        k.split("/")[1]: r.status_message
        for g in ("pg:default/c", "pg:default/d")
        for k, r in sim.scheduler.gangs.state(g).last.items()
    }
    # c0 failed on its own; c1 and d's members were never tried: their group's status as it was
    # before the post filter
    assert told["c0"] == "0/2 nodes are available: 2 Insufficient cpu."
    assert told["c1"] == c_status and told["d0"] == told["d1"] == parent


def test_composite_waits_for_its_tree_quorum() -> None:
    # gangscheduling.go preEnqueueWithHierarchies: "waiting for composite pod group "job" tree to meet quorum"
    groups = [cpg("job", 2), pg("a", 2, parent="job"), pg("b", 2, parent="job")]
    sim = _run([_node("n0", "8")], [member("a0", "a"), member("a1", "a"), member("b0", "b")], groups)
    last = sim.history["default/a0"].last
    assert _bound(sim) == {} and last is not None and last.waiting
    assert last.message == 'waiting for composite pod group "job" tree to meet quorum'
    sim.add(member("b1", "b"))
    sim.run()
    assert set(_bound(sim)) == {"a0", "a1", "b0", "b1"}


# --- KEP-5732: topology-aware placement (TestPodGroupSchedulingPlacementAlgorithm, cluster outcomes)


def test_group_is_placed_in_one_domain_and_the_fullest_wins() -> None:
    # rack r1 already holds work: both racks fit the gang, NodeResourcesFit's placement score
    # (MostAllocated over the rack) prefers the fuller one
    nodes = [_node(f"n{i}", "4", rack=f"r{i // 2}") for i in range(4)]
    running = [member("busy", None, "2", bound="n2")]
    sim = _run(nodes, [member(f"g{i}", "g", "2") for i in range(3)], [pg("g", 3, topology="rack")], running)
    assert sorted(set(_bound(sim).values()) - {""}) == ["n2", "n3"]
    trials = [t for o in sim.scheduler.gangs.outcomes for t in o.trials]
    assert [(dict(t.domain), t.fit) for t in trials] == [({"rack": "r0"}, True), ({"rack": "r1"}, True)]


def test_group_that_fits_no_single_domain_is_not_placed() -> None:
    # two 4-cpu racks of 2 nodes; three 3-cpu members fit the cluster but no rack
    nodes = [_node(f"n{i}", "4", rack=f"r{i // 2}") for i in range(4)]
    sim = _run(nodes, [member(f"g{i}", "g", "3") for i in range(3)], [pg("g", 3, topology="rack")])
    assert _bound(sim) == {}
    outcome = [o for o in sim.scheduler.gangs.outcomes if not o.waiting][0]
    # TestPodGroupSchedulingPlacementAlgorithm's "0/2 placements are available, first placement
    # status: ..." wrapped in errPodGroupUnschedulable; the first placement stopped by
    # PlacementFeasible (its status as is), then the post filter's status appended
    status = (
        "pod group is unschedulable, 0/2 placements are available, first placement status: "
        "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    )
    assert outcome.message == f"{status}, pod group preemption: No preemption victims found for incoming preemptor"
    told = {k.split("/")[1]: r.status_message for k, r in sim.scheduler.gangs.state("pg:default/g").last.items()}
    # the two that fit in r0 are told their group's status wrapped again; g2 its own failure,
    # counting the nodes of the placement alone (the real kube-scheduler 1.37's message)
    assert told["g0"] == told["g1"] == f"pod group is unschedulable, {outcome.message}"
    assert told["g2"] == "0/2 nodes are available: 2 Insufficient cpu."


def test_composite_block_of_racks() -> None:
    # two levels (KEP-5732 "at several levels"): the job in one block, each gang in one rack of it
    nodes = [
        _node(f"n{b}{r}{i}", "4", block=f"b{b}", rack=f"b{b}r{r}") for b in range(2) for r in range(2) for i in range(2)
    ]
    running = [member(f"busy{i}", None, "4", bound=f"n00{i}") for i in range(2)]  # rack b0r0 is full
    groups = [
        cpg("job", 2, topology="block"),
        pg("a", 2, parent="job", topology="rack"),
        pg("b", 2, parent="job", topology="rack"),
    ]
    pending = [member(f"a{i}", "a", "4") for i in (0, 1)] + [member(f"b{i}", "b", "4") for i in (0, 1)]
    sim = _run(nodes, pending, groups, running)
    placed = _bound(sim)
    assert set(placed) == {"a0", "a1", "b0", "b1"}
    racks = {name: placed[name][:3] for name in placed}  # n + block + rack digits
    assert racks["a0"] == racks["a1"] and racks["b0"] == racks["b1"] and racks["a0"] != racks["b0"]
    assert len({placed[n][1] for n in placed}) == 1  # one block


# --- pkg/apis/scheduling/validation/validation_test.go: TestValidateWorkload ------------------------
# (ValidateWorkloadSpec as kube-apiserver runs it; a Workload in simulate's files is checked the same.
# The tables' templates without a schedulingPolicy are given one: the declarative validation would
# refuse those first, rulesched too.)


def _composite(name: str, groups: list[dict[str, Any]] = (), composites: list[dict[str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "name": name,
        "schedulingPolicy": {"basic": {}},
        "podGroupTemplates": list(groups),
        "compositePodGroupTemplates": list(composites),
    }


def _group(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedulingPolicy": {"basic": {}}, **extra}


def mk_workload(
    groups: list[dict[str, Any]] | None = None, composites: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """mkWorkload(): two pod group templates (basic, gang of 2) and two composite ones, each
    with one child, every one constrained to topology key "foo"."""
    foo = {"schedulingConstraints": {"topology": [{"key": "foo"}]}}
    if groups is None:
        groups = [_group("group1", **foo), {"name": "group2", "schedulingPolicy": {"gang": {"minCount": 2}}, **foo}]
    if composites is None:
        composites = [
            {**_composite("compositegroup1", [_group("childgroup1", **foo)]), **foo},
            {
                **_composite("compositegroup2", [_group("childgroup2", **foo)]),
                "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                **foo,
            },
        ]
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "workload", "namespace": "ns"},
        "spec": {
            "controllerRef": {"apiGroup": "group", "kind": "foo", "name": "baz"},
            "podGroupTemplates": groups,
            "compositePodGroupTemplates": composites,
        },
    }


def test_validate_workload_success_cases() -> None:
    """TestValidateWorkload successCases."""
    basic = mk_workload()
    assert decode_workload(basic, "t") == (
        "group1",
        "group2",
        "compositegroup1",
        "childgroup1",
        "compositegroup2",
        "childgroup2",
    )
    no_ref = mk_workload()
    del no_ref["spec"]["controllerRef"]  # "no controllerRef"
    assert decode_workload(no_ref, "t")
    loose = mk_workload()
    del loose["spec"]["podGroupTemplates"][1]["schedulingConstraints"]  # "no pod group scheduling constraints"
    del loose["spec"]["compositePodGroupTemplates"][1]["schedulingConstraints"]  # "... composite ..."
    assert decode_workload(loose, "t")


def _deep(levels: int) -> dict[str, Any]:
    node = _composite(f"cpg{levels}", [_group("leaf")])
    for level in range(levels - 1, 0, -1):
        node = _composite(f"cpg{level}", composites=[node])
    return node


VALIDATE_WORKLOAD_FAILURES = [
    (
        "composite pod group template has no children",
        mk_workload(composites=[_composite("main")]),
        "must have at least one child PodGroupTemplate or CompositePodGroupTemplate",
    ),
    (
        "composite pod group template nested child has no children",
        mk_workload(composites=[_composite("main", composites=[_composite("sub")])]),
        "must have at least one child PodGroupTemplate or CompositePodGroupTemplate",
    ),
    ("no name", {**mk_workload(), "metadata": {"namespace": "ns"}}, "name"),
    ("invalid name", {**mk_workload(), "metadata": {"name": ".workload", "namespace": "ns"}}, "RFC 1123|DNS"),
    (
        "duplicate names deep in tree",
        mk_workload(groups=[], composites=[_composite("main", composites=[_composite("main", [_group("leaf")])])]),
        "duplicate template name 'main'",
    ),
    (
        "duplicate names in tree",
        mk_workload(
            groups=[], composites=[_composite("cpg1", [_group("group1")], [_composite("cpg2", [_group("group1")])])]
        ),
        "duplicate template name 'group1'",
    ),
    (
        "exceeds max tree height",
        mk_workload(groups=[], composites=[_deep(4)]),
        "maximum template hierarchy depth is 4",
    ),
    (
        "(validateWorkloadPriority) templates of different priorities",
        mk_workload(groups=[_group("a", priorityClassName="high"), _group("b")], composites=[]),
        "all priority and priorityClassName values must be identical",
    ),
]


@pytest.mark.parametrize(("workload", "message"), [pytest.param(w, m, id=n) for n, w, m in VALIDATE_WORKLOAD_FAILURES])
def test_validate_workload_failure_cases(workload: dict[str, Any], message: str) -> None:
    """TestValidateWorkload failureCases (those of the spec and the name; a missing namespace is
    one a file may leave out: simulate puts it in "default")."""
    with pytest.raises(ObjectError, match=message):
        decode_workload(workload, "t")


def test_validate_workload_three_levels_of_composites_are_allowed() -> None:
    """(validateWorkloadTemplatesDepth: WorkloadMaxTemplateDepth 4 refuses a fourth level only.)"""
    assert decode_workload(mk_workload(groups=[], composites=[_deep(3)]), "t") == ("cpg1", "cpg2", "cpg3", "leaf")
