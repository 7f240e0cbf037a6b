"""Backoff and the backoff queue as kube-scheduler 1.37.2's (pkg/scheduler/backend/queue): the
cases of its own tables, each named after its source (backoff_queue_test.go, scheduling_queue_test.go),
ported to rulesched's queue. Times are seconds; upstream's nanosecond cases keep their numbers.

Not ported: the cached BackoffExpiration ("backoff is returned from the cache": nothing is cached
here, the expiry is computed from the counts, which change only with a failed attempt), entity
sizes above one (rulesched backs a pod group's members off one by one), and the cases with the
feature gate off (rulesched has 1.37's default, SchedulerPopFromBackoffQ on)."""

from __future__ import annotations

import heapq
import math

import pytest

from rulesched.model import Pod
from rulesched.scheduler import backoff
from rulesched.scheduler.backoff import Attempts
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.queue import SchedulingQueue


class Clock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def p(name: str, priority: int = 0) -> Pod:
    return Pod(name, priority=priority)


# --- backoff_queue_test.go TestBackoffQueue_getBackoffTime -------------------------------------
@pytest.mark.parametrize(
    ("name", "initial", "maximum", "attempts", "want"),
    [
        ("no backoff", 1, 32, Attempts(0.0, unschedulable=0), None),
        ("backoff by UnschedulableCount", 1, 32, Attempts(0.0, unschedulable=16), 32.0),
        ("backoff is calculated with ConsecutiveErrorsCount", 1, 32, Attempts(0.0, 5, errors=16), 32.0),
        ("zero maxBackoffDuration means no backoff", 0, 0, Attempts(0.0, unschedulable=16), None),
    ],
)
def test_get_backoff_time(name: str, initial: float, maximum: float, attempts: Attempts, want: float | None) -> None:
    assert backoff.expiry(attempts, initial, maximum) == want, name


# --- backoff_queue_test.go TestBackoffQueue_calculateBackoffDuration (entity size 1) --------------
@pytest.mark.parametrize(
    ("name", "initial", "maximum", "count", "want"),
    [
        ("no backoff", 1, 32, 0, 0),
        ("normal", 3, 1000, 5, 48),  # 3 * 2^4
        ("hitting max backoff duration", 1, 32, 16, 32),
        ("overflow_32bit", 1, 2**31 - 1, 32, 2**31 - 1),
        ("overflow_64bit", 1, 2**63 - 1, 64, 2**63 - 1),
    ],
)
def test_calculate_backoff_duration(name: str, initial: float, maximum: float, count: int, want: float) -> None:
    assert backoff.backoff_duration(count, initial, maximum) == want, name


def queue_with_failures(clock: Clock, failures: list[tuple[str, int, float, bool]]) -> SchedulingQueue:
    """A queue holding in backoff each (name, priority, time of its failed attempt, an error?)."""
    queue = SchedulingQueue(clock)
    start = clock.now
    clock.now = min((at for _, _, at, _ in failures), default=start) - 5
    for name, priority, _, _ in failures:
        queue.add(p(name, priority))
    popped = {pod.name: pod for pod in (queue.pop() for _ in failures) if pod is not None}
    for name, _, at, error in failures:
        clock.now = at
        pod = popped[name]
        if error:
            queue.requeue(pod, backoff=True)  # (the error backoff queue at once)
        else:
            queue.unschedulable(pod, rejected_by=frozenset({"plugin"}))
            queue.move(Event.OTHER)  # (just failed, backing off: to the backoff queue)
    clock.now = start
    return queue


# --- backoff_queue_test.go TestBackoffQueue_popAllBackoffCompleted --------------------------------
NOW = 1000.3  # (upstream's fake clock starts at time.Now(), in no particular place in its window)
POD_INFOS = {
    "pod0": ("pod0", 0, NOW - 2, False),
    "pod1": ("pod1", 0, NOW + 1, False),
    "pod2": ("pod2", 0, NOW - 2, True),
    "pod3": ("pod3", 0, NOW + 1, True),
}


@pytest.mark.parametrize(
    ("name", "in_backoff", "moved"),
    [
        ("Both queues empty, no pods moved to activeQ", [], []),
        ("Pods only in backoffQ, some pods moved to activeQ", ["pod0", "pod1"], ["pod0"]),
        ("Pods only in errorBackoffQ, some pods moved to activeQ", ["pod2", "pod3"], ["pod2"]),
        ("Pods in both queues, some pods moved to activeQ", ["pod0", "pod1", "pod2", "pod3"], ["pod0", "pod2"]),
        ("Pods in both queues, all pods moved to activeQ", ["pod0", "pod2"], ["pod0", "pod2"]),
        ("Pods in both queues, no pods moved to activeQ", ["pod1", "pod3"], []),
    ],
)
def test_pop_all_backoff_completed(name: str, in_backoff: list[str], moved: list[str]) -> None:
    clock = Clock(NOW)
    queue = queue_with_failures(clock, sorted((POD_INFOS[n] for n in in_backoff), key=lambda f: f[2]))
    with queue._lock:
        queue._flush()  # (flushBackoffQCompleted, as a pop runs it first)
    assert sorted(e.pod.name for e in queue._active) == moved, name
    assert queue.counts()["backoff"] == len(in_backoff) - len(moved), name


# --- backoff_queue_test.go TestBackoffQueueOrdering ("... ordered by priority if PopFromBackoffQ is enabled")
def test_pods_of_one_window_are_ordered_by_priority() -> None:
    now = 100.0  # (aligned with the ordering window)
    failures = [
        ("pod0", 1, now, False),
        ("pod1", 1, now - 1, False),
        ("pod2", 2, now - 2 + 0.001, False),
        ("pod3", 1, now - 2, False),
        ("pod4", 2, now - 2, False),
        ("pod5", 1, now - 3, False),
    ]
    clock = Clock(now)
    queue = queue_with_failures(clock, sorted(failures, key=lambda f: f[2]))
    completed = []
    while queue._backoff and not backoff.backing_off(queue._backoff[0].sort_key[0], now):
        completed.append(heapq.heappop(queue._backoff).pod.name)
    assert completed == ["pod5", "pod4", "pod2", "pod3"]


# --- scheduling_queue_test.go TestHighPriorityBackoff ----------------------------------------------
def test_a_high_priority_pod_backing_off_does_not_block_others() -> None:
    clock = Clock(50.0)
    queue = SchedulingQueue(clock)
    queue.add(p("test-midpod", 1))
    queue.add(p("test-highpod", 2))
    high = queue.pop()
    assert high is not None and high.name == "test-highpod"
    queue.unschedulable(high, rejected_by=frozenset({"fooPlugin"}))
    queue.move(Event.OTHER)  # (UnschedulableTimeout: to the backoff queue, still backing off)
    mid = queue.pop()
    assert mid is not None and mid.name == "test-midpod"


# --- scheduling_queue_test.go TestRecentlyTriedPodsGoBack ------------------------------------------
def test_recently_tried_pods_go_back() -> None:
    clock = Clock(7.25)
    queue = SchedulingQueue(clock)
    for i in range(5):
        queue.add(p(f"test-pod-{i}", 1000))
    clock.now += 1e-6
    tried = queue.pop()
    assert tried is not None
    queue.unschedulable(tried, rejected_by=frozenset({"plugin"}))
    clock.now += 10  # podMaxBackoffDuration
    queue.move(Event.OTHER)
    popped = [queue.pop() for _ in range(5)]
    assert [pod is not None and pod.key == tried.key for pod in popped] == [False] * 4 + [True]


# --- scheduling_queue_test.go TestPodFailedSchedulingMultipleTimesDoesNotBlockNewerPod -------------
def test_a_pod_failing_again_does_not_block_a_newer_pod() -> None:
    clock = Clock(3.5)
    queue = SchedulingQueue(clock)
    queue.add(p("test-pod-unscheduled", 1000))
    first = queue.pop()
    assert first is not None
    queue.unschedulable(first, rejected_by=frozenset({"plugin"}))
    clock.now += 1 + 1  # DefaultPodInitialBackoffDuration + 1 s: its backoff completed
    queue.move(Event.OTHER)
    again = queue.pop()
    assert again is not None and again.key == first.key
    queue.add(p("test-newer-pod", 1000))  # added while it was being tried
    queue.unschedulable(again, rejected_by=frozenset({"plugin"}))
    clock.now += 1 + 1
    queue.move(Event.OTHER)
    newer = queue.pop()
    assert newer is not None and newer.name == "test-newer-pod"  # the one tried longest ago


# --- scheduling_queue.go requeueEntityWithQueueingStrategy and the issue this fixes -----------------
def test_a_moved_pod_whose_backoff_ran_out_while_parked_goes_active_at_once() -> None:
    """The backoff runs from the failed attempt, not from the move: a pod parked longer than its
    backoff goes straight to the active queue (before: a full backoff from the move)."""
    clock = Clock(10.2)
    queue = SchedulingQueue(clock)
    queue.add(p("a"))
    queue.add(p("b"))
    a = queue.pop()
    assert a is not None
    queue.unschedulable(a, rejected_by=frozenset({"plugin"}))  # backoff 1 s: until window 11, active at 12
    clock.now = 12.0
    queue.move(Event.POD_DELETED)
    assert [e.pod.name for e in queue._active] == ["b", "a"] and not queue._backoff


def test_with_nothing_active_a_backing_off_pod_is_popped_at_once_but_not_an_erring_one() -> None:
    """activeQueue.unlockedPop with SchedulerPopFromBackoffQ: the backoff queue's head when the
    active queue is empty; the error backoff queue waits its backoff out."""
    clock = Clock(20.5)
    queue = SchedulingQueue(clock)
    seen: list[tuple[str, str]] = []
    queue.incoming = lambda sub, event: seen.append((sub, event))
    for name in ("moved", "erred"):
        queue.add(p(name))
    moved, erred = queue.pop(), queue.pop()
    assert moved is not None and erred is not None
    queue.unschedulable(moved, rejected_by=frozenset({"plugin"}))
    queue.requeue(erred, backoff=True)  # (a failed binding)
    queue.move(Event.POD_DELETED)
    again = queue.pop()
    assert again is not None and again.name == "moved"
    assert seen[-1] == ("active", "PopFromBackoffQ")
    assert queue.pop() is None  # the error backoff queue's pod: ready at 22 (expiry 21.5 -> window 21)
    assert queue.next_ready_time() == 22.0
    clock.now = 22.0
    last = queue.pop()
    assert last is not None and last.name == "erred" and seen[-1] == ("active", "BackoffComplete")


def test_the_backoff_counts_only_failed_attempts_and_an_unschedulable_one_clears_the_errors() -> None:
    """AddUnschedulablePodIfNotPresent: an error counts ConsecutiveErrorsCount, an unschedulable
    result UnschedulableCount and resets the errors; the backoff reads the errors while any."""
    attempts = Attempts(0.0)
    attempts = attempts.failed(1.0, error=True).failed(2.0, error=True)
    assert (attempts.unschedulable, attempts.errors, attempts.timestamp) == (0, 2, 2.0)
    assert backoff.expiry(attempts, 1, 10) == 4.0  # 2 + 2 s
    attempts = attempts.failed(3.0, error=False)
    assert (attempts.unschedulable, attempts.errors) == (1, 0)
    assert backoff.expiry(attempts, 1, 10) == 4.0  # 3 + 1 s
    assert not attempts.last_was_error
    assert math.isclose(backoff.backoff_duration(4, 1, 10), 8)
