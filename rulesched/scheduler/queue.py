"""The scheduling queue: active pods by priority then arrival, backoff, and the unschedulable pool.

As in kube-scheduler, a pod that fits nowhere waits in the unschedulable pool until the cluster
changes in a way that could help (:meth:`SchedulingQueue.cluster_changed`); it then waits out its
backoff — 1 s doubling per failed attempt up to 10 s by default — before it is tried again.
Time comes from a clock function so the simulator can run on virtual time.
Next stage: :mod:`rulesched.scheduler.cycle` schedules what :meth:`pop` returns.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from rulesched.model import Pod


@dataclass(order=True)
class _Entry:
    sort_key: tuple[float, int]
    pod: Pod = field(compare=False)


class SchedulingQueue:
    def __init__(self, clock: Callable[[], float], initial_backoff: float = 1.0, max_backoff: float = 10.0) -> None:
        self._clock = clock
        self._initial = initial_backoff
        self._max = max_backoff
        self._seq = itertools.count()
        self._active: list[_Entry] = []
        self._backoff: list[_Entry] = []  # sort key: (ready time, seq)
        self._unschedulable: dict[str, Pod] = {}
        self._waiting_on_pods: set[str] = set()  # parked pods another pod's arrival could help
        self._attempts: dict[str, int] = {}
        self._queued: set[str] = set()

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    def add(self, pod: Pod) -> None:
        """A new pending pod: straight to the active queue."""
        if pod.key in self._queued:
            return
        self._queued.add(pod.key)
        heapq.heappush(self._active, _Entry((-pod.priority, next(self._seq)), pod))

    def pop(self) -> Pod | None:
        """The next pod to schedule: highest priority, earliest arrival; None when none is ready."""
        self._flush_backoff()
        if not self._active:
            return None
        pod = heapq.heappop(self._active).pod
        self._queued.discard(pod.key)
        self._attempts[pod.key] = self._attempts.get(pod.key, 0) + 1
        return pod

    def next_ready_time(self) -> float | None:
        """When the earliest backing-off pod becomes ready (the simulator jumps its clock there)."""
        return self._backoff[0].sort_key[0] if self._backoff else None

    def backoff_seconds(self, key: str) -> float:
        attempts = max(1, self._attempts.get(key, 1))
        return float(min(self._max, self._initial * 2 ** (attempts - 1)))

    def unschedulable(self, pod: Pod, waits_on_pods: bool = False) -> None:
        """The pod fit nowhere: park it until the cluster changes. ``waits_on_pods``: a newly
        placed pod could help it (pod affinity, spreading), not only a pod leaving."""
        self._queued.add(pod.key)
        self._unschedulable[pod.key] = pod
        if waits_on_pods:
            self._waiting_on_pods.add(pod.key)

    @property
    def any_waiting_on_pods(self) -> bool:
        return bool(self._waiting_on_pods)

    def requeue(self, pod: Pod, backoff: bool = True) -> None:
        """Try the pod again: after its backoff (a failed bind), or at once (after preemption)."""
        if pod.key in self._queued:
            return
        self._queued.add(pod.key)
        if backoff:
            ready = self._clock() + self.backoff_seconds(pod.key)
            heapq.heappush(self._backoff, _Entry((ready, next(self._seq)), pod))
        else:
            heapq.heappush(self._active, _Entry((-pod.priority, next(self._seq)), pod))

    def cluster_changed(self) -> int:
        """Something that could help happened (a pod left, a node came): move every parked pod
        to backoff. Returns how many moved."""
        parked = list(self._unschedulable.values())
        self._unschedulable.clear()
        self._waiting_on_pods.clear()
        for pod in parked:
            self._queued.discard(pod.key)
            self.requeue(pod, backoff=True)
        return len(parked)

    def forget(self, key: str) -> None:
        """The pod was deleted or scheduled elsewhere: drop it from the pool."""
        self._unschedulable.pop(key, None)
        self._waiting_on_pods.discard(key)
        self._attempts.pop(key, None)

    def _flush_backoff(self) -> None:
        now = self._clock()
        while self._backoff and self._backoff[0].sort_key[0] <= now:
            pod = heapq.heappop(self._backoff).pod
            heapq.heappush(self._active, _Entry((-pod.priority, next(self._seq)), pod))
