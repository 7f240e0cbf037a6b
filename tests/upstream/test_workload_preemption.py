"""Workload-aware preemption (rulesched.scheduler.workload_preemption), ported from
pkg/scheduler/framework/preemption/podgrouppreemption_test.go at v1.37.2
(TestPodGroupEvaluator_SelectVictimsOnDomain, TestPodGroupEvaluator_Preempt).

Upstream's cases drive the evaluator with a mock scheduling function and nodes whose capacity
counts pods; here each case is a cluster whose nodes hold that many pods (``pods`` allocatable),
the preemptor a PodGroup whose pods fit nowhere until victims go, and the outcome what a whole
simulation evicts. Cases whose mock assignment no real scheduler would make (the group fits
without preempting) are left out. The last case is rulesched's own.
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.decode import decode_pdb, decode_pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.preemption import VIOLATES_BUDGET
from rulesched.simulate.driver import Simulation
from tests.upstream.harness import default_rules, node, pg

LOW, MID, HIGH = 0, 100, 1000


def _node(name: str, capacity: int) -> Any:
    return node(name, allocatable={"cpu": "32", "memory": "64Gi", "pods": str(capacity)})


def _pod(
    name: str,
    priority: int,
    on: str = "",
    group: str = "",
    labels: dict[str, str] | None = None,
    start: int | None = None,
    terminating: bool = False,
    nominated: str = "",
    policy: str = "",
) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}], "priority": priority}
    if policy:
        spec["preemptionPolicy"] = policy
    if on:
        spec["nodeName"] = on
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    status: dict[str, Any] = {"phase": "Running" if on else "Pending"}
    if start is not None:
        status["startTime"] = f"1970-01-01T00:00:{start:02d}Z"
    if nominated:
        status["nominatedNodeName"] = nominated
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels or {}}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
        status["conditions"] = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return decode_pod({"metadata": meta, "spec": spec, "status": status}, "test")


def _pdb(app: str, allowed: int) -> Any:
    obj = {
        "metadata": {"name": f"pdb-{app}", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": {"disruptionsAllowed": allowed},
    }
    return decode_pdb(obj, "test")


def _preempt(
    nodes: list[Any],
    running: list[Pod],
    groups: list[PodGroup],
    preemptors: list[Pod],
    preemptor_group: PodGroup,
    pdbs: list[Any] = (),  # type: ignore[assignment]
    budgets_refuse: bool = False,
) -> Simulation:
    store = ClusterStore.build(nodes, running, list(pdbs))
    sim = Simulation(default_rules(), store, SchedulerSettings(budgets_refuse=budgets_refuse))
    for group in (*groups, preemptor_group):
        sim.add_group(group)
    for p in preemptors:
        sim.add(p)
    sim.run()
    return sim


def _evicted(sim: Simulation) -> list[str]:
    return sorted(p.name for p in sim.evicted)


def _message(sim: Simulation) -> str:
    return next(o.message for o in sim.scheduler.gangs.outcomes if not o.waiting)


def test_priority_mix_of_no_groups_and_pod_groups() -> None:
    # "Priority: mix of no groups and pod groups": p1 is less important than p2 (not in a group)
    running = [_pod("p1", LOW, "node1"), _pod("p2", LOW, "node1", "pg1")]
    sim = _preempt(
        [_node("node1", 2)],
        running,
        [pg("pg1", 1, disruption="single", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["p1"]
    assert sim.history["default/p"].node == "node1"


def test_priority_start_time_of_pods_from_same_group_with_disruption_mode_single() -> None:
    # "Priority: StartTime of pods from same group with disruption mode single": p1 started later
    # (upstream's Unix(1) and Unix(0) a second later: a start time of 0 means none here)
    running = [_pod("p1", LOW, "node1", "pg1", start=2), _pod("p2", LOW, "node1", "pg1", start=1)]
    sim = _preempt(
        [_node("node1", 2)],
        running,
        [pg("pg1", 1, disruption="single", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["p1"]


def test_pod_group_with_disruption_mode_group_not_reprieved() -> None:
    # "Pod group with disruption mode group not reprieved": both of pg1 go, though one would do
    running = [_pod("p1", LOW, "node1", "pg1"), _pod("p2", LOW, "node2", "pg1")]
    sim = _preempt(
        [_node("node1", 1), _node("node2", 1)],
        running,
        [pg("pg1", 2, disruption="all", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["p1", "p2"]
    assert "preempting 2 victims" in _message(sim)


def test_pdb_mixed_groups() -> None:
    # "PDB: Mixed groups": the budget-protected pod is reprieved first
    running = [
        _pod("victim-pdb", LOW, "node1", "pg1", labels={"app": "foo"}),
        _pod("victim-no-pdb", LOW, "node1", "pg1"),
    ]
    sim = _preempt(
        [_node("node1", 2)],
        running,
        [pg("pg1", 1, disruption="single", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
        [_pdb("foo", 0)],
    )
    assert _evicted(sim) == ["victim-no-pdb"]


def test_prefer_single_pod_over_pod_group_for_preemption_candidate() -> None:
    # "PodGroup: Prefer single pod over podGroup for preemption candidate"
    running = [_pod("p1", LOW, "node1"), _pod("g1-1", LOW, "node1", "pg1"), _pod("g1-2", LOW, "node1", "pg1")]
    sim = _preempt(
        [_node("node1", 3)],
        running,
        [pg("pg1", 2, disruption="all", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["p1"]


def test_preempt_group_as_a_whole_on_single_node() -> None:
    # "PodGroup: Preempt group as a whole on single node": the mid-priority pod is reprieved first
    running = [_pod("g1-1", LOW, "node1", "pg1"), _pod("g1-2", LOW, "node1", "pg1"), _pod("p1", MID, "node1")]
    sim = _preempt(
        [_node("node1", 3)],
        running,
        [pg("pg1", 2, disruption="all", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["g1-1", "g1-2"]


def test_pdb_unit_violation_if_any_member_violates() -> None:
    # "PDB: Unit violation if any member violates": the whole group is reprieved, p1 goes
    running = [
        _pod("g1-1", LOW, "node1", "pg1", labels={"app": "foo"}),
        _pod("g1-2", LOW, "node1", "pg1"),
        _pod("p1", LOW, "node1"),
    ]
    sim = _preempt(
        [_node("node1", 3)],
        running,
        [pg("pg1", 2, disruption="all", priority=LOW)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
        [_pdb("foo", 0)],
    )
    assert _evicted(sim) == ["p1"]


def test_cannot_preempt_the_victim_with_higher_or_equal_priority() -> None:
    # "Failure: Cannot preempt the victim with higher priority" / "... with equal priority"
    for victim_priority in (HIGH, MID):
        sim = _preempt(
            [_node("node1", 1)],
            [_pod("p1", victim_priority, "node1")],
            [],
            [_pod("p", MID, group="preemptor-pg")],
            pg("preemptor-pg", 1, priority=MID),
        )
        assert _evicted(sim) == []
        assert _message(sim).endswith("pod group preemption: No preemption victims found for incoming preemptor")


def test_priority_divergence_victim_group_priority_counts() -> None:
    # "Priority divergence: candidate victim PodGroup has lower priority than the Pods from that
    # group": the group's priority decides (GetPodPriority), so its pods are victims
    running = [_pod("p1", HIGH, "node1", "pg1"), _pod("p2", HIGH, "node2", "pg1")]
    sim = _preempt(
        [_node("node1", 1), _node("node2", 1)],
        running,
        [pg("pg1", 2, disruption="all", priority=MID)],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
    )
    assert _evicted(sim) == ["p1", "p2"]


def test_priority_divergence_victim_group_priority_protects() -> None:
    # "Priority divergence: candidate victim PodGroup has higher priority than the Pods from that group"
    running = [_pod("p1", LOW, "node1", "pg1"), _pod("p2", LOW, "node2", "pg1")]
    sim = _preempt(
        [_node("node1", 1), _node("node2", 1)],
        running,
        [pg("pg1", 2, disruption="all", priority=HIGH)],
        [_pod("p", MID, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=MID),
    )
    assert _evicted(sim) == []


def test_preemptor_with_never_policy_is_not_eligible() -> None:
    # podgrouppreemption.go preemptorEligibleToPreemptOthers
    sim = _preempt(
        [_node("node1", 1)],
        [_pod("p1", LOW, "node1")],
        [],
        [_pod("p", HIGH, group="preemptor-pg", policy="Never")],
        pg("preemptor-pg", 1, priority=HIGH, policy="Never"),
    )
    assert _evicted(sim) == []
    assert _message(sim).endswith("pod group preemption: not eligible due to preemptionPolicy=Never.")


def test_gang_preempts_enough_for_min_count() -> None:
    # a gang of 3 (minCount 3) on 3 one-pod nodes held by low pods: all three go, the gang is bound,
    # its members nominated first (#138967: nominatedNodeName set after PodGroup preemption)
    running = [_pod(f"low{i}", LOW, f"node{i}") for i in range(3)]
    sim = _preempt(
        [_node(f"node{i}", 1) for i in range(3)],
        running,
        [],
        [_pod(f"g{i}", HIGH, group="gang") for i in range(3)],
        pg("gang", 3, priority=HIGH),
    )
    assert _evicted(sim) == ["low0", "low1", "low2"]
    assert {sim.history[f"default/g{i}"].node for i in range(3)} == {"node0", "node1", "node2"}
    assert all(sim.history[f"default/g{i}"].nominated for i in range(3))


def test_ongoing_preemption_on_nominated_nodes() -> None:
    # TestPodGroupEvaluator_Preempt "Preemptor group returns success with current nominating infos
    # if member has nominated node with terminating pods": nobody else is evicted meanwhile
    running = [_pod("victim", LOW, "node1", terminating=True), _pod("other", LOW, "node2")]
    sim = _preempt(
        [_node("node1", 1), _node("node2", 1)],
        running,
        [],
        [_pod("p1", HIGH, group="preemptor-pg", nominated="node1"), _pod("p2", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 2, priority=HIGH),
    )
    assert _evicted(sim) == []
    assert _message(sim).endswith("pod group preemption: ongoing preemption on nominated nodes")


# --- framework/plugins/defaultpreemption/default_preemption_test.go: TestSelectVictimsOnNode, the
# "Workload Aware" cases (#137981: pod-by-pod preemption with PodGroups as victims). The
# preemptor is a single pod of no group; capacities are cpu (small 1, medium 2, large 3, of 4).


def _cpu_pod(name: str, priority: int, cpu: str, on: str = "", group: str = "") -> Pod:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        "priority": priority,
    }
    if on:
        spec["nodeName"] = on
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return decode_pod({"metadata": {"name": name, "namespace": "default"}, "spec": spec}, "test")


def _single(running: list[Pod], groups: list[PodGroup], preemptor: Pod) -> Simulation:
    node1 = node("node1", allocatable={"cpu": "4", "memory": "64Gi", "pods": "110"})
    sim = Simulation(default_rules(), ClusterStore.build([node1], running), SchedulerSettings())
    for group in groups:
        sim.add_group(group)
    sim.add(preemptor)
    sim.run()
    return sim


def test_workload_aware_atomic_preemption_of_pod_group() -> None:
    # "Workload Aware: Atomic preemption of PodGroup"
    running = [_cpu_pod("g1-1", LOW, "1", "node1", "pg1"), _cpu_pod("g1-2", LOW, "2", "node1", "pg1")]
    sim = _single(running, [pg("pg1", 2, disruption="all", priority=LOW)], _cpu_pod("p", HIGH, "3"))
    assert _evicted(sim) == ["g1-1", "g1-2"]


def test_workload_aware_prefer_single_pod_over_pod_group() -> None:
    # "Workload Aware: prefer single pod over podGroup for preemption candidate"
    running = [
        _cpu_pod("p1", LOW, "1", "node1"),
        _cpu_pod("g1-1", LOW, "1", "node1", "pg1"),
        _cpu_pod("g1-2", LOW, "1", "node1", "pg1"),
    ]
    sim = _single(running, [pg("pg1", 2, disruption="all", priority=LOW)], _cpu_pod("p", HIGH, "2"))
    assert _evicted(sim) == ["p1"]


def test_workload_aware_preempt_lower_priority_pod_group_instead_of_higher_priority_single_pod() -> None:
    # "Workload Aware: preempt lower priority pod group instead of higher priority single pod"
    running = [_cpu_pod("p1", HIGH, "2", "node1"), _cpu_pod("g1-1", LOW, "2", "node1", "pg1")]
    sim = _single(running, [pg("pg1", 1, disruption="all", priority=LOW)], _cpu_pod("p", HIGH + 1, "2"))
    assert _evicted(sim) == ["g1-1"]


def test_workload_aware_preempt_lower_priority_single_pod_instead_of_higher_priority_pod_group() -> None:
    # "Workload Aware: preempt lower priority single pod instead of higher priority pod group"
    running = [_cpu_pod("p1", LOW, "2", "node1"), _cpu_pod("g1-1", HIGH, "2", "node1", "pg1")]
    sim = _single(running, [pg("pg1", 1, disruption="all", priority=HIGH)], _cpu_pod("p", HIGH + 1, "2"))
    assert _evicted(sim) == ["p1"]


def test_single_mode_group_pod_goes_alone() -> None:
    # disruption mode single (the default): a group's pod is a victim of its own
    running = [_cpu_pod("g1-1", LOW, "2", "node1", "pg1"), _cpu_pod("g1-2", LOW, "2", "node1", "pg1")]
    sim = _single(running, [pg("pg1", 2, priority=LOW)], _cpu_pod("p", HIGH, "2"))
    assert len(_evicted(sim)) == 1


@pytest.mark.parametrize("budgets_refuse", [False, True])
def test_a_group_whose_only_victims_a_budget_protects(budgets_refuse: bool) -> None:
    """rulesched's own: the group fits only if victim-pdb goes, whose budget allows no
    disruption. kube-scheduler deletes it all the same; where evictions keep budgets
    (``budgets_refuse``, rulesched run's default) its eviction would be refused, so the
    preemption evicts nobody and says why."""
    sim = _preempt(
        [_node("node1", 1)],
        [_pod("victim-pdb", LOW, "node1", labels={"app": "foo"})],
        [],
        [_pod("p", HIGH, group="preemptor-pg")],
        pg("preemptor-pg", 1, priority=HIGH),
        [_pdb("foo", 0)],
        budgets_refuse=budgets_refuse,
    )
    if not budgets_refuse:
        assert _evicted(sim) == ["victim-pdb"]
        return
    assert _evicted(sim) == []
    assert VIOLATES_BUDGET in _message(sim), _message(sim)
