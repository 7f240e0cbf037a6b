"""The scheduling queue: pending pods are updated and deleted wherever they wait (active,
backoff, the unschedulable pool, or in flight in a cycle), parked pods move on cluster events
or after five minutes, and a blocking pop waits on the real clock and can be woken."""

from __future__ import annotations

import threading
import time

import pytest

from rulesched.model import Pod
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.queue import SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def p(name: str, priority: int = 0, **kw: object) -> Pod:
    return Pod(name, priority=priority, **kw)  # type: ignore[arg-type]


def where(queue: SchedulingQueue, key: str) -> str:
    """Which sub-queue holds the pod."""
    if any(e.pod.key == key for e in queue._active):
        return "active"
    if any(e.pod.key == key and not e.dead for e in (*queue._backoff, *queue._error_backoff)):
        return "backoff"
    if key in queue._unschedulable:
        return "unschedulable"
    return "in flight" if key in queue._in_flight else "nowhere"


def test_pops_by_priority_then_arrival() -> None:
    queue = SchedulingQueue(Clock())
    for pod in (p("a"), p("b", 10), p("c"), p("d", 10)):
        queue.add(pod)
    assert [queue.pop().name for _ in range(4)] == ["b", "d", "a", "c"]  # type: ignore[union-attr]
    assert queue.pop() is None


@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable"])
def test_a_deleted_pod_leaves_every_sub_queue(place: str) -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(p("x"))
    queue.add(p("other"))
    if place != "active":
        pod = queue.pop()
        assert pod is not None and pod.name == "x"
        if place == "backoff":
            queue.requeue(pod, backoff=True)
        else:
            queue.unschedulable(pod)
    assert where(queue, "default/x") == place
    assert queue.delete("default/x")
    assert where(queue, "default/x") == "nowhere" and "default/x" not in queue
    clock.now += 100
    assert [queue.pop().name, queue.pop()] == ["other", None]  # type: ignore[union-attr]
    assert not queue.delete("default/x")  # deleting what is not there does nothing


@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable"])
def test_an_updated_pod_is_tried_with_its_new_spec(place: str) -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(p("x"))
    if place != "active":
        pod = queue.pop()
        assert pod is not None
        (queue.requeue(pod) if place == "backoff" else queue.unschedulable(pod))
    queue.update(p("x", labels={"v": "2"}))
    # an unschedulable pod's update may be what it needed: it leaves the pool for backoff
    assert where(queue, "default/x") == ("backoff" if place == "unschedulable" else place)
    clock.now += 100
    got = queue.pop()
    assert got is not None and got.labels == {"v": "2"}


def test_a_priority_change_reorders_the_active_queue() -> None:
    queue = SchedulingQueue(Clock())
    queue.add(p("a"))
    queue.add(p("b"))
    queue.update(p("b", 5))
    assert queue.pop().name == "b"  # type: ignore[union-attr]


def test_pods_in_flight_take_updates_and_deletes_with_them() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(p("u"))
    queue.add(p("d"))
    u, d = queue.pop(), queue.pop()
    assert u is not None and d is not None
    queue.update(p("u", labels={"v": "2"}))  # updated during its cycle
    queue.delete("default/d")  # deleted during its cycle
    queue.unschedulable(u)  # the cycle found no node for the old version ...
    queue.requeue(d, backoff=True)  # ... and a failed binding would retry the deleted one
    assert where(queue, "default/d") == "nowhere"
    assert where(queue, "default/u") == "backoff"  # the new version is tried, not parked
    clock.now += 100
    got = queue.pop()
    assert got is not None and got.labels == {"v": "2"}


def test_a_placed_pod_is_forgotten() -> None:
    queue = SchedulingQueue(Clock())
    queue.add(p("x"))
    queue.pop()
    queue.done("default/x")
    assert "default/x" not in queue and len(queue) == 0


def test_parked_pods_move_on_events_and_after_five_minutes() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock)
    for name in ("plain", "spread"):
        queue.add(p(name))
    plain, spread = queue.pop(), queue.pop()
    assert plain is not None and spread is not None
    queue.unschedulable(plain)
    queue.unschedulable(spread, waits_on_pods=True)
    assert queue.any_waiting_on_pods
    assert queue.move(Event.NODE_ADDED) == 2
    assert not queue.any_waiting_on_pods
    # their backoff (from their failed attempts, at 0) has not passed, but nothing is active:
    # popped from the backoff queue at once (SchedulerPopFromBackoffQ)
    a, b = queue.pop(), queue.pop()
    assert a is not None and b is not None
    queue.unschedulable(a)
    assert queue.move(Event.POD_ADDED) == 0  # nobody waits on pods: a new pod helps no one
    clock.now += 299
    assert queue.pop() is None
    clock.now += 1  # five minutes in the pool: tried again anyway (its backoff long over: at once)
    again = queue.pop()
    assert again is not None and again.key == a.key


def test_a_preemptor_awaiting_its_victims_is_not_moved_by_another_pods_deletion() -> None:
    """Parked while victims of its preemption are still leaving: a pod's deletion moves the
    others, not it; once its victims are gone (the deletion of the last), it moves; any other
    event moves it as any parked pod."""
    queue = SchedulingQueue(Clock())
    awaiting = {"default/preemptor"}
    queue.awaiting_victims = lambda: awaiting
    for name in ("preemptor", "other"):
        queue.add(p(name))
    preemptor, other = queue.pop(), queue.pop()
    assert preemptor is not None and other is not None
    queue.unschedulable(preemptor)
    queue.unschedulable(other)
    assert queue.move(Event.POD_DELETED) == 1
    assert (where(queue, "default/preemptor"), where(queue, "default/other")) == ("unschedulable", "backoff")
    assert queue.move(Event.NODE_ADDED) == 1  # (not a deletion: it may fit elsewhere now)
    assert where(queue, "default/preemptor") == "backoff"
    queue.delete("default/preemptor")
    queue.add(p("preemptor"))
    again = queue.pop()
    assert again is not None and again.key == "default/preemptor"
    queue.unschedulable(again)
    assert queue.move(Event.POD_DELETED) == 0
    awaiting.clear()  # its last victim gone
    assert queue.move(Event.POD_DELETED) == 1
    assert where(queue, "default/preemptor") == "backoff"


def test_backoff_doubles_up_to_the_maximum() -> None:
    clock = Clock()
    queue = SchedulingQueue(clock, initial_backoff=1.0, max_backoff=10.0)
    queue.add(p("x"))
    waits = []
    for _ in range(6):
        pod = queue.pop()
        while pod is None:
            clock.now += 0.5
            pod = queue.pop()
        start = clock.now
        queue.requeue(pod, backoff=True)
        ready = queue.next_ready_time()
        assert ready is not None
        waits.append(ready - start)
        clock.now = ready
    # the expiry is truncated to its one-second window, and the pod goes active at the next
    # window (failing on whole seconds here, each wait is the backoff plus that second)
    assert waits == [2.0, 3.0, 5.0, 9.0, 11.0, 11.0]


def test_a_blocking_pop_waits_for_a_pod_and_can_be_woken() -> None:
    queue = SchedulingQueue(time.monotonic)
    got: list[Pod | None] = []
    waiter = threading.Thread(target=lambda: got.append(queue.pop(timeout=5)))
    waiter.start()
    time.sleep(0.05)
    queue.add(p("late"))
    waiter.join(timeout=5)
    assert got and got[0] is not None and got[0].name == "late"
    woken: list[Pod | None] = []
    waiter = threading.Thread(target=lambda: woken.append(queue.pop(timeout=60)))
    started = time.monotonic()
    waiter.start()
    time.sleep(0.05)
    queue.wake()  # an event for the owner thread to apply: pop returns at once, empty-handed
    waiter.join(timeout=60)
    assert woken == [None] and time.monotonic() - started < 30  # woken, long before its 60 s timeout
    assert queue.pop(timeout=0.05) is None  # a timeout with nothing to pop


def test_a_blocking_pop_wakes_when_a_backoff_expires() -> None:
    queue = SchedulingQueue(time.monotonic, initial_backoff=0.1)
    queue.add(p("x"))
    pod = queue.pop()
    assert pod is not None
    queue.requeue(pod, backoff=True)
    started = time.monotonic()
    again = queue.pop(timeout=60)
    # woken when its 0.1 s backoff ran out, long before the 60 s timeout
    assert again is not None and 0.05 < time.monotonic() - started < 30


def test_pods_entering_sub_queues_are_reported_with_upstreams_labels() -> None:
    """What feeds scheduler_queue_incoming_pods_total{queue,event}, and the parked pods' failing
    rules (scheduler_unschedulable_pods), attempts and first-active time."""
    clock = Clock()
    queue = SchedulingQueue(clock)
    seen: list[tuple[str, str]] = []
    queue.incoming = lambda sub, event: seen.append((sub, event))
    queue.add(p("a"))
    clock.now = 5.0
    queue.add(p("b"))
    a = queue.pop()
    assert a is not None and queue.attempts(a.key) == 1 and queue.entered(a.key) == 0.0
    queue.unschedulable(a, rejected_by=frozenset({"NodeResourcesFit", "TaintToleration"}))
    b = queue.pop()
    assert b is not None
    queue.unschedulable(b, rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.unschedulable_rules() == {"NodeResourcesFit": 2, "TaintToleration": 1}
    queue.move(Event.NODE_ADDED)
    assert queue.unschedulable_rules() == {}
    clock.now += 10
    again = queue.pop()  # a's backoff is over
    assert again is not None and queue.attempts(again.key) == 2 and queue.entered(again.key) == 0.0
    queue.requeue(again, backoff=True)  # (a failed binding)
    assert seen == [
        ("active", "UnscheduledPodAdd"),
        ("active", "UnscheduledPodAdd"),
        ("unschedulable", "ScheduleAttemptFailure"),
        ("unschedulable", "ScheduleAttemptFailure"),
        ("backoff", "NodeAdd"),
        ("backoff", "NodeAdd"),
        ("active", "BackoffComplete"),
        ("active", "BackoffComplete"),
        ("backoff", "ScheduleAttemptFailure"),
    ]
    queue.done(again.key)
    assert queue.attempts(again.key) == 0 and queue.entered(again.key) is None


def test_pending_lists_queued_then_parked_pods_up_to_a_limit() -> None:
    """What a rule fix's diff asks about on the live endpoint: pods waiting to be tried, then
    the parked ones, never more than asked for (and never the one being tried)."""
    queue = SchedulingQueue(Clock())
    for name in ("a", "b", "c", "d"):
        queue.add(p(name))
    parked = queue.pop()
    assert parked is not None
    queue.unschedulable(parked)
    flying = queue.pop()
    assert flying is not None
    names = [pod.name for pod in queue.pending(10)]
    assert sorted(names[:2]) == ["c", "d"] and names[2:] == [parked.name]
    assert flying.name not in names
    assert len(queue.pending(1)) == 1 and queue.pending(0) == []


def test_a_status_only_update_leaves_a_parked_pod_parked() -> None:
    """The PodScheduled condition (no field of Pod) or the nominated node written after a failed
    attempt comes back through the watch: kube-scheduler's queue leaves the pod parked (issue
    35: requeued, every attempt's own status patch brought the pod back for another one, 2.5x
    kube-scheduler's attempts in the preemption benchmark). A change of what it asks for moves it."""
    clock = Clock()
    queue = SchedulingQueue(clock)
    queue.add(p("x", labels={"a": "1"}))
    pod = queue.pop()
    assert pod is not None
    queue.unschedulable(pod)
    queue.update(p("x", labels={"a": "1"}))  # the condition patched: an equal pod
    queue.update(p("x", labels={"a": "1"}, nominated_node_name="n1"))
    assert where(queue, "default/x") == "unschedulable"
    assert queue._unschedulable["default/x"].pod.nominated_node_name == "n1"  # (the newest version kept)
    queue.update(p("x", labels={"a": "2"}))
    assert where(queue, "default/x") == "backoff"


def test_a_status_only_update_during_the_cycle_parks_the_newer_version() -> None:
    queue = SchedulingQueue(Clock())
    queue.add(p("x"))
    pod = queue.pop()
    assert pod is not None
    queue.update(p("x", nominated_node_name="n1"))  # (the last attempt's patch, arriving now)
    queue.unschedulable(pod)
    assert where(queue, "default/x") == "unschedulable"
    assert queue._unschedulable["default/x"].pod.nominated_node_name == "n1"
    queue.add(p("y"))
    other = queue.pop()
    assert other is not None
    queue.update(p("y", priority=5))  # a real change during the cycle: tried again soon
    queue.unschedulable(other)
    assert where(queue, "default/y") == "backoff"
