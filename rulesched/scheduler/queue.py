"""The scheduling queue: active pods by priority then arrival or last failure, backoff, and the unschedulable pool.

As in kube-scheduler 1.37.2, a pod that fits nowhere waits in the unschedulable pool until the
cluster changes in a way that could help (:meth:`SchedulingQueue.move`), it is activated
(:meth:`SchedulingQueue.activate`), or for five minutes (upstream looks every 30 s: 5:00-5:30);
it then goes to the active queue, or to the backoff queue while its backoff (1 s doubling per
failed attempt, up to 10 s by default) counted from its last failed attempt has not run out
(:mod:`rulesched.scheduler.backoff`). A pod whose attempt failed by an error (a failed binding)
backs off in the error backoff queue. With nothing active, :meth:`SchedulingQueue.pop` takes the
head of the backoff queue at once, its backoff not yet over (SchedulerPopFromBackoffQ, on by
default since 1.33); never the error backoff queue's. Unlike an idle kube-scheduler's Pop (woken by
active-queue adds only), a pop after one that found nothing takes it too (measured no worse:
benchmarks/README.md, speed Run 30). Pending pods can be updated (a changed spec is tried again
at once) or deleted in every sub-queue, and while a cycle holds them (in flight). Time comes from
a clock function so the simulator can run on virtual time; :meth:`pop` can wait for a pod on a
real one.

The queue is safe to call from several threads (the scheduler pops on one, events may arrive on
another); nothing here is on the per-node hot path. Every pod entering a sub-queue is reported
to :attr:`SchedulingQueue.incoming` with the event that moved it, labelled as kube-scheduler's
``scheduler_queue_incoming_pods_total{queue,event}`` labels it.
Next stage: :mod:`rulesched.scheduler.cycle` schedules what :meth:`pop` returns.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from rulesched.model import Pod
from rulesched.scheduler import backoff
from rulesched.scheduler.backoff import Attempts
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.pod_versions import keep_nomination, same_for_scheduling

UNSCHEDULABLE_MAX_SECONDS = 300.0  # kube-scheduler's podMaxInUnschedulablePodsDuration
# a queueing hint: may the event help this parked pod (told the filters that failed it)?
Worth = Callable[[Pod, frozenset[str]], bool]

# Sub-queues and the events that move pods into them, as kube-scheduler's metrics name them.
ACTIVE, BACKOFF, UNSCHEDULABLE = "active", "backoff", "unschedulable"
ERROR_BACKOFF = "error-backoff"  # (a heap of its own; reported as backoff, as upstream's metrics do)
# (1.37's framework.UnscheduledPod labels, as kube-scheduler 1.37.2's own metric shows them)
POD_ADD, POD_UPDATE = "UnscheduledPodAdd", "UnscheduledPodUpdate"
ATTEMPT_FAILURE, BACKOFF_COMPLETE, UNSCHEDULABLE_TIMEOUT, POP_FROM_BACKOFF, FORCE_ACTIVATE = (
    "ScheduleAttemptFailure",
    "BackoffComplete",
    "UnschedulableTimeout",
    "PopFromBackoffQ",
    "ForceActivate",
)


@dataclass(order=True)
class _Entry:
    # active: (-priority, timestamp, seq), PrioritySort's order; backoff: (expiry, -priority,
    # timestamp, seq), lessBackoffCompletedWithPriority's; error backoff: (expiry, seq)
    sort_key: tuple[float, ...]
    pod: Pod = field(compare=False)
    heap: str = field(default=ACTIVE, compare=False)  # ACTIVE, BACKOFF or ERROR_BACKOFF
    dead: bool = field(default=False, compare=False)  # taken out (take): skipped when it comes up


@dataclass
class _Parked:
    pod: Pod
    since: float
    waits_on_pods: bool  # a newly placed pod could help it (pod affinity, spreading)
    rejected_by: frozenset[str] = frozenset()  # the filters that failed it (its unschedulable plugins)


class SchedulingQueue:
    def __init__(
        self,
        clock: Callable[[], float],
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        unschedulable_max: float = UNSCHEDULABLE_MAX_SECONDS,
    ) -> None:
        self._clock = clock
        self._initial = initial_backoff
        self._max = max_backoff
        self._unschedulable_max = unschedulable_max
        self._seq = itertools.count()
        self._heaps: dict[str, list[_Entry]] = {ACTIVE: [], BACKOFF: [], ERROR_BACKOFF: []}
        self._active, self._backoff, self._error_backoff = (self._heaps[h] for h in (ACTIVE, BACKOFF, ERROR_BACKOFF))
        self._dead = dict.fromkeys(self._heaps, 0)  # entries taken out of the heaps but still in them (take)
        self._unschedulable: dict[str, _Parked] = {}
        self._waiting = 0  # parked pods that wait on pods
        self._attempts: dict[str, int] = {}
        # pod key -> its queueing parameters (the backoff's input), from its arrival until it
        # leaves the queue (bound or deleted)
        self._params: dict[str, Attempts] = {}
        self._queued: dict[str, _Entry | None] = {}  # pod key -> its heap entry (None: parked)
        self._in_flight: dict[str, Pod | None] = {}  # popped, not yet settled -> newer version (None: none)
        self._deleted_in_flight: set[str] = set()
        # Pods with scheduling gates: never attempted until an update removes the last gate
        # (kube-scheduler's SchedulingGates PreEnqueue plugin keeps them out of the active queue).
        self._gated: dict[str, Pod] = {}
        self._lock = threading.RLock()
        self._ready = threading.Condition(self._lock)
        self._closed = False
        self._woken = False
        # pod key -> when it first went active (kube-scheduler's InitialAttemptTimestamp)
        self._entered: dict[str, float] = {}
        # Told (sub-queue, event) of every pod entering a sub-queue (the scheduler's metrics); it
        # runs under the queue's lock, so it must be quick and must not call back into the queue.
        self.incoming: Callable[[str, str], None] | None = None
        # The same with the entity's type ("pod", or "podgroup" for a group's member: see
        # :attr:`group_of`): scheduler_queue_incoming_entities_total.
        self.incoming_entities: Callable[[str, str, str], None] | None = None
        self.group_of: Callable[[Pod], str | None] = lambda pod: None  # a pod's group key, if any
        self._flushed: set[str] = set()  # pods moved out of the unschedulable pool by its timeout
        # Parked preemptors whose victims are still leaving (the scheduler's): a pod's deletion
        # does not move them (see :meth:`move`). Called under the queue's lock: quick, no calls back.
        self.awaiting_victims: Callable[[], Collection[str]] = tuple

    def __len__(self) -> int:
        with self._lock:
            return self._live(*self._heaps) + len(self._unschedulable)

    def _live(self, *heaps: str) -> int:
        return sum(len(self._heaps[h]) - self._dead[h] for h in heaps)

    def counts(self) -> dict[str, int]:
        """Pending pods per sub-queue (kube-scheduler's scheduler_pending_pods{queue})."""
        with self._lock:
            return {
                "active": self._live(ACTIVE),
                "backoff": self._live(BACKOFF, ERROR_BACKOFF),
                "unschedulable": len(self._unschedulable),
                "in_flight": len(self._in_flight),
                "gated": len(self._gated),
            }

    def unschedulable_rules(self) -> Counter[str]:
        """Rule name -> parked pods it failed (kube-scheduler's scheduler_unschedulable_pods: a
        pod counts under every filter that rejected it)."""
        found: Counter[str] = Counter()
        for (_, rule), count in self.unschedulable_by_profile().items():
            found[rule] += count
        return found

    def unschedulable_by_profile(self) -> Counter[tuple[str, str]]:
        """(scheduler name, rule name) -> parked pods of that profile the rule failed
        (scheduler_unschedulable_pods{profile, plugin}: profiles share one queue, as upstream's)."""
        with self._lock:
            found: Counter[tuple[str, str]] = Counter()
            for parked in self._unschedulable.values():
                profile = parked.pod.scheduler_name
                found.update((profile, rule) for rule in parked.rejected_by)
            return found

    def attempts(self, key: str) -> int:
        """How many times the pod was popped since it arrived (or last bound)."""
        with self._lock:
            return self._attempts.get(key, 0)

    def entered(self, key: str) -> float | None:
        """When the pod first went to the active queue (the queue's clock), if it is known."""
        with self._lock:
            return self._entered.get(key)

    def _report(self, queue: str, event: str, pod: Pod | None = None) -> None:
        if self.incoming is not None:
            self.incoming(queue, event)
        if self.incoming_entities is not None and pod is not None:
            self.incoming_entities(queue, event, "pod" if self.group_of(pod) is None else "podgroup")

    def flushed(self, key: str) -> bool:
        """Whether the pod left the unschedulable pool by its timeout since it was last bound
        (scheduler_pod_scheduled_after_flush_total); forgets it."""
        with self._lock:
            if key in self._flushed:
                self._flushed.discard(key)
                return True
            return False

    def entity_counts(self) -> dict[tuple[str, str], int]:
        """(sub-queue, type) -> scheduling entities there (scheduler_queued_entities): pods of no
        group one each, a group's members there one together."""
        with self._lock:
            found: dict[tuple[str, str], int] = {}
            groups: dict[str, set[str]] = {}
            pods = [(_label(e.heap), e.pod) for heap in self._heaps.values() for e in heap if not e.dead]
            pods += [(UNSCHEDULABLE, parked.pod) for parked in self._unschedulable.values()]
            pods += [("gated", pod) for pod in self._gated.values()]
            for queue, pod in pods:
                group = self.group_of(pod)
                if group is None:
                    found[queue, "pod"] = found.get((queue, "pod"), 0) + 1
                else:
                    groups.setdefault(queue, set()).add(group)
            for queue, keys in groups.items():
                found[queue, "podgroup"] = len(keys)
            return found

    def __contains__(self, key: str) -> bool:
        with self._lock:
            return key in self._queued or key in self._in_flight or key in self._gated

    def find(self, key: str) -> Pod | None:
        """The pending pod of that key, whichever sub-queue holds it (any thread: explain)."""
        with self._lock:
            entry = self._queued.get(key)
            if entry is not None:
                return entry.pod
            parked = self._unschedulable.get(key)
            if parked is not None:
                return parked.pod
            return self._in_flight.get(key) or self._gated.get(key)

    def pending(self, limit: int) -> list[Pod]:
        """Up to ``limit`` pending pods, queued ones first, then parked (any thread: the pods a
        rule fix's diff asks about)."""
        with self._lock:
            queued = (e.pod for e in self._queued.values() if e is not None)  # (None: parked, below)
            out = list(itertools.islice(queued, limit))
            out += [e.pod for e in itertools.islice(self._unschedulable.values(), max(0, limit - len(out)))]
            return out

    def gated(self) -> list[Pod]:
        """The pods held back by scheduling gates, in arrival order."""
        with self._lock:
            return list(self._gated.values())

    # --- arrivals, updates, deletions ------------------------------------------------------------
    def add(self, pod: Pod) -> None:
        """A new pending pod: straight to the active queue (an update if it is known); held
        back while it has scheduling gates."""
        with self._lock:
            if self._gates(pod):
                self.update(pod)
                return
            if pod.key in self._queued or pod.key in self._in_flight:
                self.update(pod)
                return
            self._push_active(pod, POD_ADD)

    def update(self, pod: Pod) -> None:
        """A pending pod changed: its queue entry holds the new version; a parked pod is tried
        again (after its backoff), since the change may be what it needed; a pod in flight is
        requeued with the new version if its cycle does not place it."""
        with self._lock:
            key = pod.key
            if self._gates(pod):
                if pod.scheduling_gates:  # (gates are only ever removed, never added, by the API)
                    self._gated[key] = pod
                    return
                del self._gated[key]  # the last gate went: schedule it now
                self._push_active(pod, POD_UPDATE)
                return
            if key in self._in_flight:
                self._in_flight[key] = pod
                return
            if key not in self._queued:
                self._push_active(pod, POD_UPDATE)
                return
            if key in self._unschedulable:
                parked = self._unschedulable[key]
                if same_for_scheduling(parked.pod, pod):  # (its status only: stays parked, as the newer version)
                    parked.pod = pod
                    return
                self._unpark(key, POD_UPDATE, pod)
                return
            entry = self._queued[key]
            assert entry is not None
            if entry.pod.priority != pod.priority:  # (reordered in its heap, not new: nothing to report)
                self._remove(self._heaps[entry.heap], entry)
                self._push(pod, entry.heap, None)
            else:
                entry.pod = pod

    def delete(self, key: str) -> bool:
        """A pending pod was deleted (or bound by someone else): it leaves every sub-queue.
        Returns whether the queue held it."""
        with self._lock:
            self._attempts.pop(key, None)
            self._entered.pop(key, None)
            self._flushed.discard(key)
            self._params.pop(key, None)
            if self._gated.pop(key, None) is not None:
                return True
            if key in self._in_flight:
                self._deleted_in_flight.add(key)
                return True
            if key not in self._queued:
                return False
            entry = self._queued[key]
            if entry is None:
                self._waiting -= self._unschedulable.pop(key).waits_on_pods
                del self._queued[key]
            else:
                del self._queued[key]
                self._remove(self._heaps[entry.heap], entry)
            return True

    def _gates(self, pod: Pod) -> bool:
        """Whether the pod is or becomes gated (a pod queued or in flight has no gates: the API
        only ever removes them)."""
        key = pod.key
        return key in self._gated or bool(
            pod.scheduling_gates and key not in self._in_flight and key not in self._queued
        )

    def _remove(self, heap: list[_Entry], entry: _Entry) -> None:
        for i, e in enumerate(heap):
            if e is entry:
                heap[i] = heap[-1]
                heap.pop()
                if i < len(heap):
                    heapq.heapify(heap)
                return

    # --- the scheduler's side ----------------------------------------------------------------------
    def pop(self, timeout: float | None = 0.0) -> Pod | None:
        """The next pod to schedule: highest priority, then the earliest to arrive or last fail;
        with none active, the backoff queue's head (see the module's docstring). With ``timeout``
        0 (the default) None at once when none is ready; otherwise wait up to ``timeout`` seconds
        (None: no limit) for one, returning None early when :meth:`wake` or :meth:`close` is called."""
        with self._lock:
            end = None if timeout is None else self._clock() + timeout
            while True:
                self._flush()
                self._prune()
                entry = None
                if self._active:
                    entry = heapq.heappop(self._active)
                elif self._backoff:  # (SchedulerPopFromBackoffQ)
                    entry = heapq.heappop(self._backoff)
                    self._report(ACTIVE, POP_FROM_BACKOFF, entry.pod)
                if entry is not None:
                    pod = entry.pod
                    del self._queued[pod.key]
                    self._in_flight[pod.key] = None
                    self._attempts[pod.key] = self._attempts.get(pod.key, 0) + 1
                    return pod
                now = self._clock()
                if self._closed or self._woken or (end is not None and now >= end):
                    self._woken = False
                    return None
                wait = None if end is None else end - now
                for due in self._due_times():
                    wait = max(0.0, due - now) if wait is None else min(wait, max(0.0, due - now))
                self._ready.wait(wait)

    def _due_times(self) -> list[float]:
        """When the next backed-off pod is ready, and when the longest-parked pod must move."""
        self._prune()
        due = self._backoff_due()
        if self._unschedulable:
            due.append(next(iter(self._unschedulable.values())).since + self._unschedulable_max)
        return due

    def _backoff_due(self) -> list[float]:
        return [backoff.ready_at(h[0].sort_key[0]) for h in (self._backoff, self._error_backoff) if h]

    def wake(self) -> None:
        """Make a waiting :meth:`pop` return None (an event arrived for the scheduler's thread
        to apply)."""
        with self._lock:
            self._woken = True
            self._ready.notify_all()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._ready.notify_all()

    def done(self, key: str) -> None:
        """The pod's cycle placed it (its binding finished): forget it."""
        with self._lock:
            self._in_flight.pop(key, None)
            self._deleted_in_flight.discard(key)
            self._attempts.pop(key, None)
            self._entered.pop(key, None)
            self._params.pop(key, None)

    def _settle(self, pod: Pod) -> Pod | None:
        """The version of an in-flight pod to requeue, or None if it was deleted meanwhile."""
        key = pod.key
        newer = self._in_flight.pop(key, None)
        if key in self._deleted_in_flight:
            self._deleted_in_flight.discard(key)
            return None
        return newer or pod

    def next_ready_time(self) -> float | None:
        """When the earliest backing-off pod becomes ready (the simulator jumps its clock there)."""
        with self._lock:
            self._prune()
            due = self._backoff_due()
            return min(due) if due else None

    def _failed(self, key: str, error: bool = False) -> None:
        """An attempt of the pod failed now: its counts and timestamp move on."""
        now = self._clock()
        self._params[key] = self._params.get(key, Attempts(now)).failed(now, error)

    def unschedulable(self, pod: Pod, waits_on_pods: bool = False, rejected_by: frozenset[str] = frozenset()) -> None:
        """The pod fit nowhere: park it until the cluster changes. ``waits_on_pods``: a newly
        placed pod could help it (pod affinity, spreading), not only a pod leaving;
        ``rejected_by``: the filters that failed it."""
        with self._lock:
            settled = self._settle(pod)
            if settled is None:
                return
            self._failed(pod.key)
            if settled is not pod:
                if not same_for_scheduling(pod, settled):  # updated during its cycle: try the new version soon
                    self._after_backoff(settled, ATTEMPT_FAILURE)
                    return
                pod = keep_nomination(settled, pod)  # (its status only changed: parked as the newer version)
            self._queued[pod.key] = None
            self._unschedulable[pod.key] = _Parked(pod, self._clock(), waits_on_pods, rejected_by)
            self._waiting += waits_on_pods
            self._report(UNSCHEDULABLE, ATTEMPT_FAILURE, pod)

    # --- gangs (rulesched.scheduler.gang) ----------------------------------------------------------
    def take(self, keys: Iterable[str]) -> list[Pod]:
        """Take these pods out of whichever sub-queue holds them (not gated ones, nor those in
        flight) and hold them in flight, as :meth:`pop` does: a group's members are attempted
        together with the one popped."""
        with self._lock:
            taken = []
            for key in (k for k in keys if k in self._queued):
                taken.append(self._take_out(key, self._queued[key]))
                self._in_flight[key] = None
                self._attempts[key] = self._attempts.get(key, 0) + 1
            return taken

    def _take_out(self, key: str, entry: _Entry | None) -> Pod:
        """Out of the unschedulable pool (``entry`` None) or its heap, where it is left dead."""
        if entry is None:
            parked = self._unschedulable.pop(key)
            self._waiting -= parked.waits_on_pods
            pod = parked.pod
        else:
            pod = entry.pod
            entry.dead = True  # (left in its heap, skipped there: no re-heapify per member)
            self._dead[entry.heap] += 1
        del self._queued[key]
        return pod

    def hold(self, pod: Pod) -> Pod | None:
        """A pod in flight leaves the queue without being placed: its group holds it (waiting
        for members, or for its group's next attempt). Returns its newest version, or None when
        it was deleted meanwhile."""
        with self._lock:
            return self._settle(pod)

    def park(self, pod: Pod, rejected_by: frozenset[str] = frozenset()) -> None:
        """A pod no cycle holds goes to the unschedulable pool (a group's members released at
        their timeout): tried again when the cluster changes."""
        with self._lock:
            if pod.key in self._queued or pod.key in self._in_flight:
                return
            self._queued[pod.key] = None
            self._unschedulable[pod.key] = _Parked(pod, self._clock(), False, rejected_by)
            self._entered.setdefault(pod.key, self._clock())
            self._report(UNSCHEDULABLE, ATTEMPT_FAILURE, pod)

    @property
    def any_waiting_on_pods(self) -> bool:
        return self._waiting > 0

    def requeue(self, pod: Pod, backoff: bool = True) -> None:
        """Try the pod again: after its backoff (an error: a failed bind, a cycle given up; the
        error backoff queue), or at once (after preemption, new rules)."""
        with self._lock:
            settled = self._settle(pod)
            if settled is None or settled.key in self._queued:
                return
            if settled is not pod:
                settled = keep_nomination(settled, pod)
            if backoff:
                self._failed(pod.key, error=True)
                self._after_backoff(settled, ATTEMPT_FAILURE)
            else:
                self._push_active(settled, ATTEMPT_FAILURE)

    def activate(self, key: str) -> bool:
        """kube-scheduler's Activate: a parked or backing-off pod goes to the active queue now,
        its backoff skipped (a preemptor whose victims' removal failed). False: not there."""
        with self._lock:
            if key not in self._queued:
                return False
            entry = self._queued[key]
            if entry is not None and entry.heap == ACTIVE:
                return False
            self._push_active(self._take_out(key, entry), FORCE_ACTIVATE)
            return True

    def move(self, event: Event = Event.OTHER, worth: Worth | None = None) -> int:
        """Something that could help happened: move the parked pods to backoff, those the
        event's queueing hint allows (``worth``, told the pod and the filters that failed it:
        kube-scheduler's QueueingHintFn, :mod:`rulesched.scheduler.hints`; without one, all).
        A pod placed moves them only while one of them waits on pods (affinity, spreading); a
        pod's deletion leaves a preemptor parked while its victims are still leaving
        (:attr:`awaiting_victims`: tried then, it would only wait again, its backoff grown;
        upstream's PreEnqueue and QueueSkip on AssignedPodDelete keep it out while the deletions
        are sent, here until they are gone, a terminating victim holding its room in both). The
        deletion of its last victim moves it. Returns how many moved."""
        with self._lock:
            if event is Event.POD_ADDED and not self._waiting:
                return 0
            moved = list(self._unschedulable)
            if event is Event.POD_DELETED and moved:
                held = self.awaiting_victims()
                if held:
                    moved = [key for key in moved if key not in held]
            if worth is not None:
                parked = self._unschedulable
                moved = [key for key in moved if worth(parked[key].pod, parked[key].rejected_by)]
            for key in moved:
                self._unpark(key, event.value)
            return len(moved)

    def cluster_changed(self) -> int:
        """:meth:`move` for any change."""
        return self.move(Event.OTHER)

    # --- heaps --------------------------------------------------------------------------------------
    def _unpark(self, key: str, event: str, pod: Pod | None = None) -> None:
        """From the unschedulable pool to backoff, or active if its backoff is over (as ``pod``,
        its newer version, if given)."""
        parked = self._unschedulable.pop(key)
        self._waiting -= parked.waits_on_pods
        del self._queued[key]
        self._after_backoff(pod or parked.pod, event)

    def _after_backoff(self, pod: Pod, event: str) -> None:
        """requeueEntityWithQueueingStrategy's queueAfterBackoff: to the backoff queue (the error
        one after an error) while the pod's backoff runs, else straight to the active queue."""
        params = self._params.get(pod.key)
        ends = None if params is None else backoff.expiry(params, self._initial, self._max)
        if ends is None or not backoff.backing_off(ends, self._clock()):
            self._push_active(pod, event)
            return
        assert params is not None
        heap = ERROR_BACKOFF if params.last_was_error else BACKOFF
        self._push(pod, heap, event)

    def _prune(self) -> None:
        """Drop the taken-out entries at the heads of the heaps."""
        for name, heap in self._heaps.items():
            while heap and heap[0].dead:
                heapq.heappop(heap)
                self._dead[name] -= 1

    def _push_active(self, pod: Pod, event: str | None) -> None:
        self._push(pod, ACTIVE, event)
        self._entered.setdefault(pod.key, self._clock())

    def _push(self, pod: Pod, heap: str, event: str | None) -> None:
        params = self._params.setdefault(pod.key, Attempts(self._clock()))  # (a new pod: Timestamp now)
        order: tuple[float, ...] = (-pod.priority, params.timestamp, next(self._seq))
        if heap != ACTIVE:
            ends = backoff.expiry(params, self._initial, self._max)
            assert ends is not None  # (only a pod backing off goes to a backoff heap)
            order = (ends, *order) if heap == BACKOFF else (ends, order[-1])
        entry = _Entry(order, pod, heap)
        heapq.heappush(self._heaps[heap], entry)
        self._queued[pod.key] = entry
        self._ready.notify_all()
        if event is not None:
            self._report(_label(heap), event, pod)

    def _flush(self) -> None:
        """Backed-off pods whose time came go active; pods parked too long go to backoff (or
        active, their backoff over)."""
        now = self._clock()
        for name in (BACKOFF, ERROR_BACKOFF):  # (popAllBackoffCompleted: both queues)
            heap = self._heaps[name]
            while heap and not backoff.backing_off(heap[0].sort_key[0], now):
                entry = heapq.heappop(heap)
                if entry.dead:
                    self._dead[name] -= 1
                    continue
                self._push_active(entry.pod, BACKOFF_COMPLETE)
        if self._unschedulable:
            # Parked in order of arrival (a clock never goes back): the stale ones come first.
            limit = now - self._unschedulable_max
            stale = []
            for key, parked in self._unschedulable.items():
                if parked.since > limit:
                    break
                stale.append(key)
            for key in stale:
                self._flushed.add(key)
                self._unpark(key, UNSCHEDULABLE_TIMEOUT)


def _label(heap: str) -> str:
    """The sub-queue a heap is in kube-scheduler's metrics (its error backoff queue is backoff)."""
    return BACKOFF if heap == ERROR_BACKOFF else heap
