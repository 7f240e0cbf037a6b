"""Why a preemptor may preempt twice, as kube-scheduler 1.37's may (issue 35, speed Run 18).

A victim whose removal is under way, or terminating, is still a pod of its node: kube-scheduler's
GetVictimsOnNode takes every pod of the node (preemption.go) and SelectVictimsOnNode every one of
lower priority (default_preemption.go), so a higher-priority preemptor may choose the same node and
the same victim; pickOneNodeForPreemption prefers it where it is the cheapest (lowest priority).
The executor then sends nothing for a victim already terminating (prepareCandidateAsync:
``victim.DeletionTimestamp != nil``); it ends the lower-priority nominations on that node
(getLowerPriorityNominatedPods, clearNominatedNodeName) only in the goroutine that sends
removals, which it does not start when there is none to send, so here the lower preemptor keeps
its nomination (reserving nothing against the higher one). The preemptor displaced preempts
again once its own victims are gone, elsewhere (PodEligibleToPreemptOthers holds it back only
while a victim terminates on the node it is nominated to). rulesched does the same, step by step:
how often it happens on a busy cluster is a matter of how long victims take to leave.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.framework import Binding, Code, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.upstream.harness import default_rules, node, pod

SMALL = {"cpu": "1", "memory": "1Gi", "pods": "10"}


def P(name: str, prio: int, on: str = "", **spec: Any) -> Pod:
    body = {"priority": prio, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    return pod(name, spec={**body, **spec}, node_name=on)


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


class _Evictor:
    at_once = False  # (victims leave when the store says so, as the API server's events do)

    def __init__(self) -> None:
        self.evicted: list[tuple[str, str]] = []

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.evicted.append((pod.name, preemptor.name))


def test_a_higher_preemptor_takes_the_node_and_the_leaving_victim_of_a_lower_one() -> None:
    store = ClusterStore()
    store.add_node(node("a", allocatable=SMALL))
    store.add_node(node("b", allocatable=SMALL))
    victim, other = P("victim", 0, on="a"), P("other", 1, on="b")
    store.add_pod(victim)
    store.add_pod(other)
    now = [0.0]
    evictor = _Evictor()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock=lambda: now[0])

    s.add(P("lower", 3))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None
    assert first.preemption.nominated == "a"  # (its victim's priority 0 is the lowest)
    assert evictor.evicted == [("victim", "lower")]
    assert s.nominator.node_of("default/lower") == "a"

    # The victim is terminating (its DELETE answered, the kubelet not done yet) when a
    # higher-priority pod comes: node "a" and that same victim are still its cheapest choice.
    store.upsert_pod(dataclasses.replace(victim, deleting=True, preempted_by_scheduler=True))
    s.add(P("higher", 4))
    second = s.schedule_one()
    assert second is not None and second.preemption is not None
    assert second.preemption.nominated == "a"
    assert [v.name for v in second.preemption.victims] == ["victim"]
    assert evictor.evicted == [("victim", "lower")]  # (nothing sent again for a terminating victim)
    # kube-scheduler 1.37.2's asynchronous executor, with no victim to send, returns before it
    # clears the lower-priority nominations on the node (prepareCandidateAsync): "lower" keeps
    # "a", which reserves nothing against "higher"
    assert s.nominator.node_of("default/lower") == "a"

    # The victim goes; both preemptors move (the deletion's queueing hint) and, backoffs over,
    # the higher one takes "a" and the lower one, its own victims gone, preempts on "b".
    store.remove_pod(victim.key)
    s.pods_gone([victim])
    now[0] += 60.0
    results = [s.schedule_one(), s.schedule_one()]
    assert [r.pod.name for r in results if r is not None] == ["higher", "lower"]
    placed, again = results
    assert placed is not None and placed.code is Code.SCHEDULED and placed.node == "a"
    assert again is not None and again.preemption is not None and again.preemption.nominated == "b"
    assert [v.name for v in again.preemption.victims] == ["other"]
    assert evictor.evicted == [("victim", "lower"), ("other", "lower")]


# Beyond upstream, within its choices: among candidates equal by every criterion of
# pickOneNodeForPreemption upstream takes whichever a Go map yields first; rulesched takes one
# whose node holds no lower-priority pod's nomination, so that the lower preemptor keeps the node
# its victims are leaving (speed Run 30).


def _equal_nodes(count: int) -> tuple[ClusterStore, list[Pod]]:
    store = ClusterStore()
    victims = []
    for i in range(count):
        store.add_node(node(f"n{i:02d}", allocatable=SMALL))
        victims.append(P(f"v{i:02d}", 0, on=f"n{i:02d}"))
        store.add_pod(victims[-1])
    return store, victims


@pytest.mark.parametrize("count", [2, 20], ids=["node-by-node", "together"])
@pytest.mark.parametrize("terminating", [False, True], ids=["removal-sent", "terminating"])
def test_of_equal_candidates_a_higher_preemptor_leaves_a_lower_ones_node(count: int, terminating: bool) -> None:
    store, victims = _equal_nodes(count)
    now = [0.0]
    evictor = _Evictor()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock=lambda: now[0])

    s.add(P("lower", 3))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None and first.preemption.nominated is not None
    taken = first.preemption.nominated
    (victim,) = first.preemption.victims
    if terminating:
        store.upsert_pod(dataclasses.replace(victim, deleting=True, preempted_by_scheduler=True))

    s.add(P("higher", 4))
    second = s.schedule_one()
    assert second is not None and second.preemption is not None
    # every node is as good (one victim of priority 0 each): not the one "lower" waits on
    assert second.preemption.nominated not in (None, taken)
    assert s.nominator.node_of("default/lower") == taken
    assert s.nominator.node_of("default/higher") == second.preemption.nominated
    assert len(evictor.evicted) == 2 and evictor.evicted[0] == (victim.name, "lower")


def test_a_cheaper_node_is_still_taken_though_a_lower_preemptor_waits_on_it() -> None:
    # Not a tie: the node "lower" took holds the cheapest victim (priority 0 against 1), and
    # upstream's order takes it whoever waits there (as the first test above).
    store, _ = _equal_nodes(2)
    store.upsert_pod(P("v01", 1, on="n01"))
    evictor = _Evictor()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock=lambda: 0.0)
    s.add(P("lower", 3))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None and first.preemption.nominated == "n00"
    s.add(P("higher", 4))
    second = s.schedule_one()
    assert second is not None and second.preemption is not None and second.preemption.nominated == "n00"


def test_pick_candidate_prefers_among_equals_a_node_no_lower_pod_is_nominated_to() -> None:
    from rulesched.scheduler.candidates import Candidate, pick_candidate

    cheap, dear = P("cheap", 0, on="x"), P("dear", 2, on="x")
    equal = [Candidate("a", (cheap,), 0), Candidate("b", (cheap,), 0), Candidate("c", (cheap,), 0)]
    assert pick_candidate(equal).node == "a"
    assert pick_candidate(equal, displacing=frozenset({"a"})).node == "b"
    assert pick_candidate(equal, displacing=frozenset({"a", "b", "c"})).node == "a"  # (all alike: the first)
    unequal = [Candidate("a", (cheap,), 0), Candidate("b", (dear,), 0)]
    assert pick_candidate(unequal, displacing=frozenset({"a"})).node == "a"  # (the criteria first)
