"""Schedule a few pending pods on a store and see what happens, then put the store back.

``explain``'s fixes (:mod:`rulesched.scheduler.fixes`) are each checked by scheduling the changed
cluster with the same rules before they are shown: a :class:`Trial` runs the one
:class:`rulesched.scheduler.scheduler.Scheduler` every face shares, on virtual time (a backoff
is jumped over, not waited for), with just the pods asked about pending (and their pod groups),
until its queue settles: cycles, preemption with its evictions, groups all or nothing. Then it
undoes what it did to the store (pods it placed taken off, pods it evicted put back), so the
next trial starts from the same cluster. Trials on one store share a
:class:`rulesched.scheduler.runtime.Framework` (its node columns follow the store's changes
instead of being built again for each trial) and the rule set's session.

The simulator's driver (:mod:`rulesched.simulate.driver`) runs the same loop over a whole
cluster's pending pods and records each one's history for reports; its clock is this one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.framework import Binding, CycleResult, SchedulerSettings
from rulesched.scheduler.gang import GroupOutcome
from rulesched.scheduler.interfaces import Observer
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.scheduler import Scheduler

MAX_CYCLES = 400  # a trial's cycles at most (a few pods and their retries settle far sooner)


class VirtualClock:
    """Simulated time: the driver jumps it to the next backoff expiry instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def next_time(scheduler: Scheduler) -> float | None:
    """When something next happens: a backoff ends, or a pod group's wait times out."""
    times = [t for t in (scheduler.queue.next_ready_time(), scheduler.gangs.next_due()) if t is not None]
    return min(times) if times else None


def next_result(scheduler: Scheduler, clock: VirtualClock) -> CycleResult | None:
    """The next cycle's result, moving the clock to when something next happens while nothing
    is ready; None once the queue settles."""
    while True:
        result = scheduler.schedule_one()
        if result is not None:
            return result
        ready = next_time(scheduler)
        if ready is None:
            return None
        clock.now = max(clock.now, ready)


@dataclass
class TrialOutcome:
    """What a trial did: where each pod asked about was bound, each one's last cycle, the pods
    evicted for them, and each group attempt's outcome (the last per group)."""

    placed: dict[str, str] = field(default_factory=dict)  # pod key -> node
    last: dict[str, CycleResult] = field(default_factory=dict)
    evicted: list[Pod] = field(default_factory=list)
    groups: dict[str, GroupOutcome] = field(default_factory=dict)
    placed_groups: set[str] = field(default_factory=set)  # groups an attempt placed
    cycles: int = 0

    def all_placed(self, keys: Iterable[str]) -> bool:
        return all(k in self.placed for k in keys)

    def fitting(self, keys: Iterable[str]) -> int:
        """How many of ``keys`` were bound or, in their last cycle, fit a node (a gang's members
        that fit but were given back with their group)."""
        return sum(1 for k in keys if k in self.placed or ((r := self.last.get(k)) is not None and r.fitted))


class _Watch(Observer):
    def __init__(self, outcome: TrialOutcome) -> None:
        self.outcome = outcome

    def attempted(self, result: CycleResult) -> None:
        self.outcome.last[result.pod.key] = result
        self.outcome.cycles += 1

    def bound(self, pod: Pod, node: str) -> None:
        self.outcome.placed[pod.key] = node

    def group_attempted(self, outcome: GroupOutcome, seconds: float) -> None:
        self.outcome.groups[outcome.group.key] = outcome
        if not outcome.message and not outcome.waiting:
            self.outcome.placed_groups.add(outcome.group.key)


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


class _Evictor:
    def __init__(self, store: ClusterStore, outcome: TrialOutcome) -> None:
        self.store, self.outcome = store, outcome

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        removed = self.store.remove_pod(pod.key)
        self.outcome.evicted.append(removed if removed is not None else pod)


class Trials:
    """Trials on one store with one rule set (and others for rule changes)."""

    def __init__(self, store: ClusterStore, rules: RuleSet, settings: SchedulerSettings | None = None) -> None:
        self.store = store
        self.rules = rules
        # (diagnose: a cycle finding no node keeps its reasons as codes, for what members lack)
        self.settings = (
            settings if settings is not None else SchedulerSettings(percentage_of_nodes_to_score=100, diagnose=True)
        )
        self._frameworks: dict[int, tuple[RuleSet, Framework]] = {}  # id -> the set (kept) and its framework
        self.count = 0  # trials run

    def run(
        self, pods: Sequence[Pod], groups: Sequence[PodGroup] = (), rules: RuleSet | None = None, undo: bool = True
    ) -> TrialOutcome:
        """Schedule ``pods`` (pending, with ``groups``) until settled; with ``undo`` the store is
        put back as it was."""
        rules = rules if rules is not None else self.rules
        self.count += 1
        outcome = TrialOutcome()
        clock = VirtualClock()
        store = self.store
        scheduler = Scheduler(
            rules,
            store,
            self.settings,
            _Binder(),
            _Evictor(store, outcome),
            clock=clock,
            observer=_Watch(outcome),
            framework=self._frameworks.setdefault(id(rules), (rules, Framework(self.settings.engine)))[1],
        )
        for group in groups:
            scheduler.set_group(group)
        for pod in pods:
            if not pod.deleting:
                scheduler.add(pod)
        try:
            while outcome.cycles < MAX_CYCLES and next_result(scheduler, clock) is not None:
                pass
        finally:
            if undo:
                for key in list(outcome.placed):
                    store.remove_pod(key)
                for pod in outcome.evicted:
                    store.add_pod(pod)
        return outcome
