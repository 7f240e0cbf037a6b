"""Queueing hints for a running pod's deletion (rulesched.scheduler.hints): a parked pod stays
parked only when the node the deletion changed can neither fit it nor hold a pod it may evict;
whatever cannot be proven so is requeued. The cases kube-scheduler's own table has are marked
with their source (pkg/scheduler/framework/plugins/noderesources/fit_test.go,
Test_isSchedulableAfterAssignedPodDelete); the others are what rules, nominations and
preemption add."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.lang import load_rules_text
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.framework import Binding, Code, SchedulerSettings
from rulesched.scheduler.hints import DeletionHint
from rulesched.scheduler.nominator import Nominator
from rulesched.scheduler.queue import SchedulingQueue
from rulesched.scheduler.scheduler import Scheduler
from tests.upstream.harness import default_rules, node, pod

SMALL = {"cpu": "1", "memory": "1Gi", "pods": "10"}


def P(name: str, prio: int = 0, cpu: str = "1", on: str = "", **spec: Any) -> Pod:
    body = {"priority": prio, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    return pod(name, spec={**body, **spec}, node_name=on)


def store_with(*pods: Pod, tainted: bool = False) -> ClusterStore:
    store = ClusterStore()
    taints = [{"key": "team", "value": "batch", "effect": "NoSchedule"}] if tainted else []
    store.add_node(node("fake", allocatable=SMALL, taints=taints))
    store.add_node(node("other", allocatable=SMALL))
    store.add_pod(P("filler", 1000, on="other"))
    for p in pods:
        store.add_pod(p)
    return store


def helps(parked: Pod, gone: Pod, store: ClusterStore, nominator: Nominator | None = None, rules: Any = None) -> bool:
    """Remove ``gone`` from the store (as the informer does), then ask the hint."""
    store.remove_pod(gone.key)
    hint = DeletionHint(
        [gone], store.snapshot(), lambda p: rules or default_rules(), (nominator or Nominator()).reserved_for
    )
    try:
        return hint(parked)
    finally:
        hint.close()


# --- kube-scheduler's table (fit_test.go, Test_isSchedulableAfterAssignedPodDelete) -------------


def test_upstream_queue_on_other_pod_deleted() -> None:
    """ "queue-on-other-pod-deleted": pod1 asks 1 cpu, pod2 (1 cpu) leaves node "fake": Queue
    (here because pod1 now fits "fake")."""
    pod2 = P("pod2", 0, on="fake")
    assert helps(P("pod1", 0), pod2, store_with(pod2)) is True


def test_upstream_skip_queue_on_unscheduled_pod_deleted() -> None:
    """ "skip-queue-on-unscheduled-pod-deleted": a pod on no node held nothing: QueueSkip."""
    store = store_with()
    hint = DeletionHint([P("gone", 0)], store.snapshot(), lambda p: default_rules(), Nominator().reserved_for)
    assert hint(P("pod1", 0)) is False
    hint.close()


def test_upstream_queue_on_nominated_pod_deleted() -> None:
    """ "queue-on-nominated-pod-deleted": a deleted pod nominated to a node frees what it held:
    the parked pods of its priority or lower move (eventhandlers.go: getLEPriorityPreCheck);
    a higher one stays parked."""
    s = Scheduler(default_rules(), store_with(), SchedulerSettings(), _Binder(), _Evictor())
    s.add(P("holder", 50))
    s.nominator.nominate(P("holder", 50), "fake")
    s.queue.delete("default/holder")  # (only its nomination holds, as a dump's status gives it)
    for name, prio in (("lower", 10), ("equal", 50), ("higher", 90)):
        s.queue.add(P(name, prio))
        assert s.queue.pop() is not None
        s.queue.unschedulable(P(name, prio))
    s.delete("default/holder")
    assert s.nominator.node_of("default/holder") is None
    parked = set(s.queue._unschedulable)
    assert parked == {"default/higher"}


# --- what rules, nominations and preemption add --------------------------------------------------


def test_no_requeue_when_the_node_still_has_no_room_and_nothing_to_evict() -> None:
    # "fake" holds two high-priority pods; one leaves; the 2-cpu pod still does not fit and may
    # evict neither of the others (priority 1000 > 0)
    a, b = P("a", 1000, cpu="400m", on="fake"), P("b", 1000, cpu="400m", on="fake")
    assert helps(P("big", 0, cpu="900m"), a, store_with(a, b)) is False


def test_requeue_when_a_pod_it_may_evict_remains_on_the_node() -> None:
    a, low = P("a", 1000, cpu="400m", on="fake"), P("low", 0, cpu="400m", on="fake")
    assert helps(P("big", 10, cpu="900m"), a, store_with(a, low)) is True  # its preemption may now find room


def test_room_held_for_a_nominated_pod_of_its_priority_or_higher_is_not_its_room() -> None:
    victim = P("victim", 0, on="fake")
    for preemptor_priority, expected in ((100, False), (50, False), (10, True)):
        nominator = Nominator()
        nominator.nominate(P("preemptor", preemptor_priority), "fake")
        assert helps(P("parked", 50), victim, store_with(victim), nominator) is expected, preemptor_priority


def test_a_node_failing_another_filter_does_not_requeue() -> None:
    victim = P("victim", 0, on="fake")
    assert helps(P("parked", 50), victim, store_with(victim, tainted=True)) is False
    # nor when pods it may evict remain there: the taint is unresolvable, preemption passes it over
    victim, low = P("victim", 0, cpu="400m", on="fake"), P("low", 0, cpu="400m", on="fake")
    assert helps(P("parked", 50), victim, store_with(victim, low, tainted=True)) is False


@pytest.mark.parametrize(
    "extra",
    [
        {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "x"}}}]},
        {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}}]}}},
    ],
)  # fmt: skip
def test_a_pod_whose_filters_read_other_nodes_is_always_requeued(extra: dict[str, Any]) -> None:
    a, b = P("a", 1000, cpu="400m", on="fake"), P("b", 1000, cpu="400m", on="fake")
    assert helps(P("big", 0, cpu="900m", **extra), a, store_with(a, b)) is True


def test_rules_reading_the_cluster_are_always_requeued() -> None:
    rules = load_rules_text(
        {
            "quota.rules": 'extends "default"\n'
            'filter quota:\n    count(p in cluster.pods where p.priority == 1000) < 1\n    else "quota"\n'
        }
    )
    a, b = P("a", 1000, cpu="400m", on="fake"), P("b", 1000, cpu="400m", on="fake")
    # the quota counts pods of every node: a deletion anywhere may lift it
    assert helps(P("big", 0, cpu="900m"), a, store_with(a, b), rules=rules) is True


def test_the_queue_keeps_parked_what_the_hint_rules_out() -> None:
    queue = SchedulingQueue(lambda: 0.0)
    for name in ("keep", "move"):
        queue.add(Pod(name))
        assert queue.pop() is not None
        queue.unschedulable(Pod(name))
    assert queue.move(Event.POD_DELETED, lambda p, _: p.name == "move") == 1
    assert set(queue._unschedulable) == {"default/keep"}
    assert queue.move(Event.OTHER) == 1  # any other event moves it


def test_a_deletion_moves_only_the_pods_the_freed_node_may_help() -> None:
    """The scheduler end to end: "low" (priority 0, nothing it may evict) stays parked when a
    pod of the full node leaves and the room is still too small; "mid" may evict a remaining
    pod there and moves."""
    a, b = P("a", 1000, cpu="400m", on="fake"), P("b", 0, cpu="400m", on="fake")
    store = store_with(a, b)
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), _Evictor())
    for parked in (P("low", 0, cpu="900m"), P("mid", 10, cpu="900m", preemptionPolicy="Never")):
        s.add(parked)
    for _ in range(2):
        result = s.schedule_one()
        assert result is not None and result.code is Code.UNSCHEDULABLE
    assert set(s.queue._unschedulable) == {"default/low", "default/mid"}
    store.remove_pod(a.key)
    # "low": no room, nothing of lower priority; "mid" never preempts (Never) and has no room either
    assert s.pods_gone([a]) == 0
    store.remove_pod(b.key)
    assert s.pods_gone([b]) == 2  # now both fit


def test_a_failed_binding_frees_its_room_for_the_parked_pods() -> None:
    """handleBindingCycleError: the forgotten pod counts as an assigned pod's deletion."""
    store = store_with()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Later(), _Evictor())
    s.add(P("first", 10, cpu="900m"))
    assumed = s.schedule_one()  # assumed on "fake", its binding under way
    assert assumed is not None and assumed.node == "fake"
    s.add(P("second", 0, cpu="900m"))
    parked = s.schedule_one()
    assert parked is not None and parked.code is Code.UNSCHEDULABLE
    assert set(s.queue._unschedulable) == {"default/second"}
    s.binding_finished("default/first", False, "refused")
    assert store.pod_node("default/first") is None
    assert "default/second" not in s.queue._unschedulable  # moved: "fake" has room again


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


class _Later:
    def bind(self, binding: Binding) -> None:
        return None  # (under way: Scheduler.binding_finished tells)


class _Evictor:
    at_once = False

    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.evicted.append(pod.key)


def test_a_terminating_victim_is_not_evicted_again() -> None:
    """kube-scheduler's executor sends nothing for a victim with a deletionTimestamp."""
    old = dataclasses.replace(P("old", 0, on="fake"), deleting=True, preempted_by_scheduler=True)
    fresh = P("fresh", 0, cpu="500m", on="other")
    store = ClusterStore()
    store.add_node(node("fake", allocatable=SMALL))
    store.add_node(node("other", allocatable=SMALL))
    store.add_pod(fresh)
    store.add_pod(P("filler", 1000, cpu="500m", on="other"))
    store.add_pod(old)
    evictor = _Evictor()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor)
    s.add(P("high", 100))
    result = s.schedule_one()
    assert result is not None and result.preemption is not None
    victims = {v.key for v in result.preemption.victims}
    assert evictor.evicted == sorted(victims - {"default/old"})


def test_deletions_reported_together_are_judged_each_on_its_node() -> None:
    """One drain's deletions: the pod moves if any node one of them left may take it."""
    a, b = P("a", 1000, cpu="400m", on="fake"), P("b", 1000, cpu="400m", on="fake")
    store = store_with(a, b)
    store.remove_pod(a.key)
    store.remove_pod("default/filler")  # "other" empties: the 900m pod fits there
    filler = P("filler", 1000, on="other")
    hint = DeletionHint([a, filler], store.snapshot(), lambda p: default_rules(), Nominator().reserved_for)
    assert hint(P("big", 0, cpu="900m")) is True
    hint.close()
    alone = DeletionHint([a], store.snapshot(), lambda p: default_rules(), Nominator().reserved_for)
    assert alone(P("big", 0, cpu="900m")) is False  # ("other" was not reported: not looked at)
    alone.close()


def test_a_preemptor_waiting_for_its_victims_moves_only_where_it_fits() -> None:
    """Its next cycle will not preempt while its victims are still leaving (it waits for them,
    PodEligibleToPreemptOthers): a pod it could evict elsewhere does not move it; room does."""
    a, low = P("a", 1000, cpu="400m", on="fake"), P("low", 0, cpu="400m", on="fake")
    store = store_with(a, low)
    store.remove_pod(a.key)
    for waiting, expected in ((True, False), (False, True)):
        hint = DeletionHint(
            [a], store.snapshot(), lambda p: default_rules(), Nominator().reserved_for, lambda p, w=waiting: not w
        )
        assert hint(P("big", 10, cpu="900m")) is expected, waiting
        hint.close()
