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
