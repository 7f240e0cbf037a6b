"""Giving up a scheduling cycle under way (rulesched.scheduler.cancel): the cycle checks its
Cancellation once per step of its node walk, once per preemption dry run and, while evaluating,
once per rule over a batch of nodes and every few nodes evaluated one by one (see
tests/test_cycle_deadline.py), never once per node; a cycle given up, wherever it stops, leaves
nothing behind: nothing assumed, bound, evicted, nominated or reported, and its pod back in the
queue to be scheduled by a later cycle.

The clock here moves one tick per read, so a deadline N ticks away passes at the Nth check and
a test decides where the cycle stops."""

from __future__ import annotations

import threading

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.scheduler.cancel import Cancellation
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.helpers.scheduling import Clock, Later, Recording, Seen, Ticks, cluster, cpu, requeued
from tests.upstream.harness import default_rules, pod


def scheduler_for(
    store: ClusterStore, cancel: Cancellation, clock: Clock, chunk: int = 50
) -> tuple[Scheduler, Later, Recording, Seen]:
    binder, evictor, seen = Later(), Recording(), Seen()
    settings = SchedulerSettings(percentage_of_nodes_to_score=100, engine=EngineSettings(walk_chunk=chunk))
    scheduler = Scheduler(
        default_rules(), store, settings, binder, evictor=evictor, clock=clock, observer=seen, cancel=cancel
    )
    return scheduler, binder, evictor, seen


def test_the_walk_checks_once_per_step_and_stops_between_steps() -> None:
    store, ticks, clock = cluster(400), Ticks(), Clock()
    cancel = Cancellation(clock=ticks)
    scheduler, binder, _, seen = scheduler_for(store, cancel, clock)
    scheduler.add(pod("a", spec=cpu("1")))
    cancel.limit(3.5)  # read 1: the deadline is tick 4.5, passed at the 4th check
    assert scheduler.schedule_one() is None
    assert ticks.reads == 5  # (in the first step: its rules evaluated over 50 nodes, one by one)
    assert binder.calls == [] and seen.events == []
    assert not store.is_assumed("default/a") and store.pod_node("default/a") is None
    assert requeued(scheduler, "default/a")
    # Without the deadline the same pod is scheduled by a later cycle, at one check per step
    # (400 nodes in steps of 50) and one per rule evaluated over a step's nodes at once, never
    # one per node.
    cancel.limit(None)
    clock.now += 60  # past its backoff
    result = scheduler.schedule_one()
    assert result is not None and result.code is Code.SCHEDULED
    assert binder.calls == [("default/a", result.node)] and store.is_assumed("default/a")
    # Once its answers are known, a pod of the same class checks once per step, and a few more
    # (the scores of the nodes it may go to).
    scheduler.add(pod("b", spec=cpu("1")))
    ticks.reads = 0
    cancel.limit(10**6)
    again = scheduler.schedule_one()
    assert again is not None and again.code is Code.SCHEDULED
    assert ticks.reads <= 400 // 50 + 8


def test_preemption_given_up_evicts_and_nominates_nothing() -> None:
    store, ticks, clock = cluster(10, cpus="2"), Ticks(), Clock()
    for i in range(10):
        store.add_pod(pod(f"low{i}", spec=cpu("2", priority=0), node_name=f"n{i:03}"))
    cancel = Cancellation(clock=ticks)
    scheduler, binder, evictor, seen = scheduler_for(store, cancel, clock)
    scheduler.add(pod("high", spec=cpu("2", priority=100)))
    cancel.limit(5.5)  # one walk step and four dry runs; the deadline passes before the fifth
    assert scheduler.schedule_one() is None
    assert ticks.reads == 7
    assert evictor.evicted == [] and binder.calls == [] and seen.events == []
    assert scheduler.nominator.node_of("default/high") is None
    assert requeued(scheduler, "default/high")
    cancel.limit(None)
    clock.now += 60
    result = scheduler.schedule_one()
    assert result is not None and result.preemption is not None and result.preemption.nominated is not None
    assert len(evictor.evicted) == 1


def test_a_stop_set_from_another_thread_gives_up_the_cycle_under_way() -> None:
    stop = threading.Event()
    store, clock = cluster(200), Clock()
    scheduler, binder, evictor, seen = scheduler_for(store, Cancellation(stop), clock, chunk=20)
    scheduler.add(pod("a", spec=cpu("1")))
    stop.set()  # (as SIGTERM's handler does, on the main thread, between two steps)
    assert scheduler.cancel.cancelled
    assert scheduler.schedule_one() is None
    assert binder.calls == [] and seen.events == [] and not store.is_assumed("default/a")
    assert requeued(scheduler, "default/a")
