"""Gang scheduling (rulesched.scheduler.gang): pod groups placed all or nothing.

Cases ported from scheduler-plugins' Coscheduling tests name their source
(pkg/coscheduling/coscheduling_test.go: TestLess, TestPermit, TestPostFilter;
pkg/coscheduling/core/core_test.go: TestPreFilter); their plugin-level outcomes (Wait, Allow,
reject) are asserted here as what a whole simulation does with the pods.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.decode import decode_pdb
from rulesched.model.groups import POD_GROUP_LABEL, PodGroup, decode_pod_group
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.gang_preemption import GANG_VIOLATES_BUDGET
from rulesched.simulate.driver import Simulation
from tests.upstream.harness import default_rules, node, pod


def _node(name: str, cpu: str = "4", **labels: str) -> Any:
    return node(name, labels=labels, allocatable={"cpu": cpu, "memory": "16Gi", "pods": "110"})


def _member(
    name: str, group: str | None, cpu: str = "1", ns: str = "default", priority: int = 0, bound: str = ""
) -> Pod:
    labels = {POD_GROUP_LABEL: group} if group else {}
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}], "priority": priority}
    return pod(name, namespace=ns, labels=labels, spec=spec, node_name=bound)


def _group(name: str, minimum: int, ns: str = "default", timeout: int | None = None) -> PodGroup:
    spec: dict[str, Any] = {"minMember": minimum}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    obj = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }
    return decode_pod_group(obj, "test")


def _run(nodes: list[Any], pending: list[Pod], groups: list[PodGroup], running: list[Pod] = ()) -> Simulation:  # type: ignore[assignment]
    sim = Simulation(default_rules(), ClusterStore.build(nodes, running), SchedulerSettings())
    for group in groups:
        sim.add_group(group)
    for p in pending:
        sim.add(p)
    sim.run()
    return sim


def _bound(sim: Simulation) -> dict[str, str]:
    return {k: h.node for k, h in sim.history.items() if h.node}


def test_group_fits_all_bound() -> None:
    sim = _run([_node(f"n{i}") for i in range(2)], [_member(f"g-{i}", "g", "3") for i in range(2)], [_group("g", 2)])
    assert set(_bound(sim)) == {"default/g-0", "default/g-1"}


def test_group_short_of_room_binds_none_and_holds_nothing() -> None:
    nodes = [_node(f"n{i}") for i in range(2)]
    sim = _run(nodes, [_member(f"g-{i}", "g", "3") for i in range(3)], [_group("g", 3)])
    assert _bound(sim) == {}
    assert not list(sim.store.pods())  # nothing assumed stays
    last = sim.history["default/g-0"].last
    assert last is not None and "pod group default/g: 2 of 3 members could be placed" in last.message
    assert "fit on node" in last.message  # and the member's own outcome
    failed = sim.history["default/g-2"].last
    assert failed is not None and "0/2 nodes are available" in failed.message


def test_members_see_the_members_placed_before_them() -> None:
    # two 3-cpu members on one 4-cpu node cannot both go there: the second sees the first
    sim = _run([_node("n0"), _node("n1")], [_member(f"g-{i}", "g", "3") for i in range(2)], [_group("g", 2)])
    assert sorted(_bound(sim).values()) == ["n0", "n1"]


def test_other_pods_use_the_room_a_failed_group_left() -> None:
    pending = [*(_member(f"g-{i}", "g", "3") for i in range(3)), _member("single", None, "3", priority=-1)]
    sim = _run([_node("n0"), _node("n1")], pending, [_group("g", 3)])
    assert list(_bound(sim)) == ["default/single"]


def test_prefilter_pod_count_less_than_min_member_waits() -> None:
    # core_test.go TestPreFilter "pod count less than minMember": rejected, not attempted
    sim = _run([_node("n0")], [_member("p1", "pg1")], [_group("pg1", 2)])
    assert _bound(sim) == {}
    assert sim.scheduler.gangs.waiting_count() == 0  # released at the timeout: parked, reported
    last = sim.history["default/p1"].last
    assert last is not None and "1 of its minimum 2 members exist" in last.message
    assert "timed out after 60s" in last.message
    assert sim.clock.now >= 60


def test_prefilter_pod_count_equal_min_member() -> None:
    # core_test.go TestPreFilter "pod count equal minMember": success
    sim = _run([_node("n0")], [_member("p1", "pg1"), _member("p2", "pg1")], [_group("pg1", 2)])
    assert len(_bound(sim)) == 2


def test_prefilter_group_not_found_schedules_alone() -> None:
    # core_test.go TestPreFilter "pod belongs to a non-existent podGroup": no gang applies
    sim = _run([_node("n0")], [_member("p1", "pg-missing")], [])
    assert _bound(sim) == {"default/p1": "n0"}


def test_permit_no_group_success() -> None:
    # coscheduling_test.go TestPermit "pods do not belong to any podGroup": Success
    sim = _run([_node("n0")], [_member("pod1", None)], [_group("pg1", 2, ns="ns1")])
    assert _bound(sim) == {"default/pod1": "n0"}


def test_permit_group_of_two_one_member_waits() -> None:
    # coscheduling_test.go TestPermit "pods belong to a podGroup, Wait" (pg1 minMember 2)
    sim = _run([_node("n0")], [_member("pod1", "pg1", ns="ns1")], [_group("pg1", 2, ns="ns1", timeout=10)])
    assert _bound(sim) == {}
    assert "timed out after 10s" in (sim.history["ns1/pod1"].last or pytest.fail()).message


def test_permit_group_of_one_allows() -> None:
    # coscheduling_test.go TestPermit "pods belong to a podGroup, Allow" (pg2 minMember 1)
    sim = _run([_node("n0")], [_member("pod1", "pg2", ns="ns1")], [_group("pg2", 1, ns="ns1")])
    assert _bound(sim) == {"ns1/pod1": "n0"}


def test_postfilter_enough_assigned_does_not_reject_all() -> None:
    # coscheduling_test.go TestPostFilter "enough pods assigned, do not reject all": members
    # already bound satisfy the group; a new member that fits nowhere fails alone
    running = [_member(f"old-{i}", "pg", "1", ns="ns1", bound="n0") for i in range(2)]
    pending = [_member("pod1", "pg", "8", ns="ns1"), _member("pod2", "pg", "1", ns="ns1")]
    sim = _run([_node("n0")], pending, [_group("pg", 2, ns="ns1")], running)
    assert _bound(sim) == {"ns1/pod2": "n0"}


def test_less_higher_priority_group_first() -> None:
    # coscheduling_test.go TestLess "p1.priority greater than p2.priority, p1 belongs to
    # podGroup1 and p2 belongs to podGroup2": p1's group is attempted first and takes the room
    pending = [
        *(_member(f"low-{i}", "pg2", "3", ns="namespace2", priority=10) for i in range(2)),
        *(_member(f"high-{i}", "pg1", "3", ns="namespace1", priority=100) for i in range(2)),
    ]
    groups = [_group("pg1", 2, ns="namespace1"), _group("pg2", 2, ns="namespace2")]
    sim = _run([_node("n0"), _node("n1")], pending, groups)
    assert set(_bound(sim)) == {"namespace1/high-0", "namespace1/high-1"}


def test_late_member_completes_a_waiting_group() -> None:
    store = ClusterStore.build([_node("n0")], [])
    sim = Simulation(default_rules(), store, SchedulerSettings())
    sim.add_group(_group("g", 2))
    sim.add(_member("a", "g"))
    assert sim.schedule_one() is not None
    assert sim.scheduler.gangs.waiting_count() == 1 and len(sim.queue) == 0  # held, not looping
    sim.add(_member("b", "g"))
    sim.run()
    assert set(_bound(sim)) == {"default/a", "default/b"}


def test_group_preempts_so_the_whole_group_fits() -> None:
    running = [_member(f"low-{i}", None, "3", priority=0, bound=f"n{i}") for i in range(2)]
    pending = [_member(f"g-{i}", "g", "3", priority=100) for i in range(2)]
    sim = _run([_node("n0"), _node("n1")], pending, [_group("g", 2)], running)
    assert set(_bound(sim)) == {"default/g-0", "default/g-1"}
    assert sorted(p.key for p in sim.evicted) == ["default/low-0", "default/low-1"]


def test_group_preemption_evicts_nothing_when_the_group_cannot_fit() -> None:
    # one node's pod outranks the gang: a victim there would not help, so nobody is evicted
    running = [_member("low", None, "3", priority=0, bound="n0"), _member("high", None, "3", priority=1000, bound="n1")]
    pending = [_member(f"g-{i}", "g", "3", priority=100) for i in range(2)]
    sim = _run([_node("n0"), _node("n1")], pending, [_group("g", 2)], running)
    assert _bound(sim) == {} and sim.evicted == []
    assert {p.key for p in sim.store.pods()} == {"default/low", "default/high"}


def test_a_gang_is_preempted_whole_or_not_at_all() -> None:
    running = [_member(f"g-{i}", "g", "3", priority=0, bound=f"n{i}") for i in range(2)]
    sim = _run([_node("n0"), _node("n1")], [_member("urgent", None, "3", priority=100)], [_group("g", 2)], running)
    assert list(_bound(sim)) == ["default/urgent"]
    assert sorted(p.key for p in sim.evicted) == ["default/g-0", "default/g-1"]  # both, not one


@pytest.mark.parametrize("budgets_refuse", [False, True])
def test_a_gang_member_taken_along_whose_eviction_a_budget_refuses(budgets_refuse: bool) -> None:
    """The preemption chooses g-0 on n0 (no budget covers it; n1's g-1 is under a budget
    allowing no disruption); the gang takes g-1 along. Deleting its victims, as kube-scheduler
    does, both go; where evictions keep budgets (``budgets_refuse``), g-1's eviction would be
    refused, so the preemption evicts nobody and says why (the preemption had checked g-0 alone)."""
    running = [
        dataclasses.replace(_member(f"g-{i}", "g", "3", priority=0, bound=f"n{i}"), phase="Running", ready=True)
        for i in range(2)
    ]
    guard = decode_pdb(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"guarded": "yes"}}},
            "status": {"disruptionsAllowed": 0},
        },
        "test",
    )
    running[1] = dataclasses.replace(running[1], labels={**running[1].labels, "guarded": "yes"})
    store = ClusterStore.build([_node("n0"), _node("n1")], running, [guard])
    sim = Simulation(default_rules(), store, SchedulerSettings(budgets_refuse=budgets_refuse))
    sim.add_group(_group("g", 2))
    sim.add(_member("urgent", None, "3", priority=100))
    sim.run()
    if not budgets_refuse:
        assert sorted(p.key for p in sim.evicted) == ["default/g-0", "default/g-1"]
        return
    assert sim.evicted == [] and _bound(sim) == {}
    assert GANG_VIOLATES_BUDGET in (sim.history["default/urgent"].last or pytest.fail()).message


def test_mirror_hands_pod_groups_of_both_apis_to_the_scheduler() -> None:
    # (what `run --pod-groups --workloads` applies from its informers: rulesched.mirror)
    import threading

    from rulesched.kube.informer import Delta
    from rulesched.mirror import Mirror

    mirror = Mirror(None, ClusterStore(), lambda delta: None, threading.Event(), resources=())  # type: ignore[arg-type]
    group = {"metadata": {"name": "pg", "namespace": "ns"}, "spec": {"minMember": 3}, "status": {"phase": "Pending"}}
    applied = mirror.apply(Delta("PodGroup", "ADDED", group))
    assert [(g.key, g.min_member, g.phase) for g in applied.groups] == [("ns/pg", 3, "Pending")]
    native = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "metadata": {"name": "pg", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "parentCompositePodGroupName": "job"},
    }
    applied = mirror.apply(Delta("PodGroup", "ADDED", native))
    assert [(g.key, g.min_member, g.parent) for g in applied.groups] == [("pg:ns/pg", 2, "cpg:ns/job")]
    composite = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "metadata": {"name": "job", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 1}}},
    }
    applied = mirror.apply(Delta("CompositePodGroup", "ADDED", composite))
    assert [(g.key, g.composite) for g in applied.groups] == [("cpg:ns/job", True)]
    gone = {"apiVersion": "scheduling.k8s.io/v1beta1", "metadata": {"name": "pg", "namespace": "ns"}}
    assert mirror.apply(Delta("PodGroup", "DELETED", gone)).removed_groups == ("pg:ns/pg",)
    assert mirror.apply(Delta("PodGroup", "DELETED", group)).removed_groups == ("ns/pg",)
