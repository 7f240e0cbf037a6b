"""The simulator's driver: the core scheduler on virtual time, with a report of every pod.

Bindings and evictions happen in the store itself (there is no API server to ask), and time
jumps to the next backoff expiry instead of passing (the clock and loop of
:mod:`rulesched.scheduler.trial`, which explain's fixes run on a few pods), so :meth:`Simulation.run` schedules until
the queue settles: nothing ready and nothing backing off. A pending pod being deleted
(``metadata.deletionTimestamp``) is recorded but never queued: kube-scheduler skips it
(skipPodSchedule), as ``rulesched run`` does, so it holds no node's room.
Next stage: :mod:`rulesched.simulate.report` renders what the :class:`Recorder` saw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, RulesHandle
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.framework import Binding, CycleResult, SchedulerSettings
from rulesched.scheduler.interfaces import Binder, Observer
from rulesched.scheduler.queue import SchedulingQueue
from rulesched.scheduler.scheduler import Scheduler
from rulesched.scheduler.trial import VirtualClock, next_result

__all__ = ["InMemoryBinder", "InMemoryEvictor", "PodHistory", "Recorder", "Simulation", "VirtualClock"]


@dataclass
class PodHistory:
    """What happened to one pending pod, for reports: its last cycle and what it preempted."""

    pod: Pod
    last: CycleResult | None = None
    node: str | None = None
    nominated: str | None = None
    victims: list[Pod] = field(default_factory=list)
    attempts: int = 0


class Recorder(Observer):
    """Keeps each pod's history and the pods evicted, in order."""

    def __init__(self) -> None:
        self.history: dict[str, PodHistory] = {}
        self.evicted: list[Pod] = []
        self.explain_seconds = 0.0  # the cycles' explanation work (SchedulerSettings.explanation)

    def _of(self, pod: Pod) -> PodHistory:
        key = pod.key
        history = self.history.get(key)
        if history is None:
            history = self.history[key] = PodHistory(pod)
        return history

    def attempted(self, result: CycleResult) -> None:
        history = self._of(result.pod)
        history.attempts += 1
        history.last = result
        self.explain_seconds += result.explain_seconds
        preemption = result.preemption
        if preemption is not None and preemption.nominated is not None:
            history.nominated = preemption.nominated
            history.victims.extend(preemption.victims)

    def bound(self, pod: Pod, node: str) -> None:
        self._of(pod).node = node


class InMemoryBinder:
    """The simulator's binder: the assumed placement simply stands."""

    def bind(self, binding: Binding) -> bool:
        return True


class InMemoryEvictor:
    """Evicts straight out of the store, and remembers whom. The pod's DRA claims are released
    at once, as the resourceclaim controller releases a deleted pod's (its ``reservedFor``; a
    claim nobody else uses deallocated), so a pod that preempted for devices gets them."""

    def __init__(self, store: ClusterStore, recorder: Recorder) -> None:
        self.store, self.recorder = store, recorder

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.store.remove_pod(pod.key)
        if pod.resource_claims or pod.extended_claim:
            self.store.dra.pod_gone(pod)
        self.recorder.evicted.append(pod)


class Simulation:
    """A :class:`Scheduler` on a :class:`VirtualClock`, recording every pod's history."""

    def __init__(
        self,
        rules: RulesHandle | RuleSet,
        store: ClusterStore,
        settings: SchedulerSettings,
        binder: Binder | None = None,
    ) -> None:
        self.clock = VirtualClock()
        self.recorder = Recorder()
        self.store = store
        self.scheduler = Scheduler(
            rules,
            store,
            settings,
            binder or InMemoryBinder(),
            InMemoryEvictor(store, self.recorder),
            clock=self.clock,
            observer=self.recorder,
        )

    @property
    def queue(self) -> SchedulingQueue:
        return self.scheduler.queue

    @property
    def history(self) -> dict[str, PodHistory]:
        return self.recorder.history

    @property
    def evicted(self) -> list[Pod]:
        return self.recorder.evicted

    def add_group(self, group: PodGroup) -> None:
        """A pod group (gang) its members are placed with, all or nothing."""
        self.scheduler.set_group(group)

    def add(self, pod: Pod) -> None:
        """Queue a pending pod, unless it is being deleted: then it is only recorded (its history
        never gets a cycle; reports say why, :func:`rulesched.scheduler.framework.skip_deleting`)."""
        self.recorder.history.setdefault(pod.key, PodHistory(pod))
        if pod.deleting:
            return
        self.scheduler.add(pod)

    def schedule_one(self) -> CycleResult | None:
        return self.scheduler.schedule_one()

    def next_result(self) -> CycleResult | None:
        """The next cycle's result, moving the clock to when something next happens (a backoff
        ends, a pod group's wait times out) while nothing is ready; None once the queue settles."""
        return next_result(self.scheduler, self.clock)

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """Schedule until the queue settles: nothing ready and nothing backing off.

        ``progress``, if given, is called with the number of pods attempted so far each time a
        pod has its first cycle (a progress bar's total is the pods added without scheduling
        gates). Without it the loop is the bare one: no per-cycle cost."""
        if progress is not None:
            self._run_reporting(progress)
            return
        while self.next_result() is not None:
            pass

    def _run_reporting(self, progress: Callable[[int], None]) -> None:
        history = self.recorder.history
        attempted = 0
        while (result := self.next_result()) is not None:
            pod_history = history.get(result.pod.key)
            if pod_history is not None and pod_history.attempts == 1:
                attempted += 1
                progress(attempted)
