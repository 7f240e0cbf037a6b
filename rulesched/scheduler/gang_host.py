"""The scheduler's side of pod groups: what an attempt of :mod:`rulesched.scheduler.gang` asks
of it (:class:`rulesched.scheduler.gang.GangHost`), on the store as it is now.

A mixin of :class:`rulesched.scheduler.scheduler.Scheduler`, apart so that the scheduler's own
module keeps to pending pods, the cycle and binding. Each query binds the pod's rules to a fresh
snapshot and releases them; nothing here assumes a pod or evicts one except
:meth:`GangHostMixin.evict_for_group`, which the attempt calls once it has decided.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rulesched.cluster.store import ClusterStore
from rulesched.logs import VERBOSE
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler import gang
from rulesched.scheduler.cancel import Cancellation, CycleCancelled
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.framework import Code, CycleResult, Preemption
from rulesched.scheduler.interfaces import Evictor, Observer, decision
from rulesched.scheduler.nominator import Nominator
from rulesched.scheduler.preemption import preempt
from rulesched.scheduler.queue import SchedulingQueue

if TYPE_CHECKING:
    from rulesched.scheduler.removals import Refusals
    from rulesched.scheduler.scheduler import Profile

log = logging.getLogger("rulesched.scheduler.scheduler")  # (one logger for the scheduler's lines)


class GangHostMixin:
    """Pod groups' members placed, preempted for and bound through the scheduler. The attributes
    below are the scheduler's."""

    store: ClusterStore
    queue: SchedulingQueue
    gangs: gang.Gangs
    nominator: Nominator
    cancel: Cancellation
    evictor: Evictor
    observer: Observer
    clock: Callable[[], float]
    refusals: Refusals
    _cycle_rules: str

    def profile_of(self, pod: Pod) -> Profile:
        raise NotImplementedError

    def _bind(self, pod: Pod, result: CycleResult, rules: str, placed: Pod | None = None) -> CycleResult:
        raise NotImplementedError

    def spared_victims(self) -> Mapping[str, frozenset[str]]:
        raise NotImplementedError  # (rulesched.scheduler.removals)

    def set_group(self, group: PodGroup) -> None:
        """A pod group appeared or changed: its members held back are tried again (for the
        workload API's, the members of every group of its tree: its quorum may be met now)."""
        changed = self.gangs.changes(group)
        for pod in self.gangs.set_group(group):
            self.queue.add(pod)
        if group.native and changed:
            root, _ = self.gangs.root_of(group)
            for leaf in self.gangs.leaves(root):
                for pod in self.gangs.release(leaf.key):
                    self.queue.add(pod)

    def remove_group(self, key: str) -> None:
        for pod in self.gangs.remove_group(key):
            self.queue.add(pod)

    def expire_groups(self) -> int:
        """Release the members of groups that waited past their timeout (parked, reported)."""
        released = 0
        for group, results, message in self.gangs.expire(self.clock()):
            log.info("%s", message, extra={"group": group.key})
            for result in results:
                self.queue.park(result.pod)
                self.observer.attempted(result)
                released += 1
        return released

    def place_member(self, pod: Pod) -> CycleResult:
        """A gang member's cycle on the store as it is now: no preemption, nothing assumed."""
        nominated = self.nominator.node_of(pod.key) or ""
        if pod.nominated_node_name != nominated:
            pod = dataclasses.replace(pod, nominated_node_name=nominated)
        profile = self.profile_of(pod)
        if not profile.rules.loaded:
            return CycleResult(pod, Code.UNSCHEDULABLE)
        session = profile.rules.rules.session()
        watch = session.watch
        watch.arm(self.cancel.check)
        try:
            result, bound = profile.cycle.run(pod, self.store.snapshot(), session, self.nominator.reserved_for(pod))
            bound.release()
        except CycleCancelled as cancelled:
            cancelled.rule = watch.rule
            raise
        finally:
            watch.disarm()
        return result

    def preempt_member(self, pod: Pod) -> Preemption:
        """Preemption for a gang member on the store as it is now (nothing evicted here)."""
        profile = self.profile_of(pod)
        if not profile.rules.loaded:
            return Preemption(None)
        nominated = self.nominator.node_of(pod.key) or ""
        if pod.nominated_node_name != nominated:
            pod = dataclasses.replace(pod, nominated_node_name=nominated)
        session = profile.rules.rules.session()
        watch = session.watch
        watch.arm(self.cancel.check)
        try:
            snapshot = self.store.snapshot()
            reserved, spared = self.nominator.reserved_for(pod), self.spared_victims()
            refuse = self.refuses_evictions(pod)
            return preempt(
                snapshot, session, pod, None, reserved, None, self.cancel.check, spared=spared, budgets_refuse=refuse
            )
        except CycleCancelled as cancelled:
            cancelled.rule = watch.rule
            raise
        finally:
            watch.disarm()

    def group_of(self, pod: Pod) -> PodGroup | None:
        return self.gangs.group_of(pod) if self.gangs.groups else None

    def refuses_evictions(self, pod: Pod) -> bool:
        return self.profile_of(pod).cycle.settings.budgets_refuse

    def hold_for_budgets(self, key: str) -> None:
        self.refusals.held.add(key)

    def fits_on(self, pod: Pod, node: str) -> bool:
        """Whether ``pod`` passes every filter on ``node`` as the store has it now (workload-aware
        preemption's reprieve check, upstream's RunFilterPluginsWithNominatedPods on one node)."""
        profile = self.profile_of(pod)
        if not profile.rules.loaded:
            return False
        session = profile.rules.rules.session()
        snapshot = self.store.snapshot()
        view = snapshot.node_view(node)
        if view is None:
            return False
        bound = session.bind(pod, snapshot)
        try:
            return bound.first_failure(view) is None
        finally:
            bound.release()

    def victims_allowed(self, preemptor: Pod, candidates: Sequence[Pod]) -> set[str] | None:
        """The keys of the ``candidates`` (pods on nodes) the preempt rules let ``preemptor``
        evict (every rule that applies to it must allow each); None when no preempt rule
        applies to it (it may preempt nobody)."""
        profile = self.profile_of(preemptor)
        if not profile.rules.loaded:
            return None
        session = profile.rules.rules.session()
        snapshot = self.store.snapshot()
        bound = session.bind(preemptor, snapshot)
        try:
            rules = bound.preempts
            if not rules:
                return None
            allowed = set()
            for victim in candidates:
                node = snapshot.node_view(self.store.pod_node(victim.key) or "")
                if node is not None and all(rule.allows(node, victim) for rule in rules):
                    allowed.add(victim.key)
            return allowed
        finally:
            bound.release()

    def evict_for_group(
        self,
        victims: Sequence[Pod],
        preemptor: Pod,
        nominated: Sequence[tuple[Pod, str]],
        group: PodGroup | None = None,
    ) -> None:
        for member, node in nominated:
            self.nominator.nominate(dataclasses.replace(member, nominated_node_name=node), node)
        for victim in victims:
            self.evictor.evict(victim, preemptor, group)
        log.log(VERBOSE, "pod group nominated; evicting %d pod(s)", len(victims), extra={"pod": preemptor.key})
        self.queue.move(Event.POD_DELETED)

    def bind_member(self, pod: Pod, placed: Pod, result: CycleResult) -> CycleResult:
        return self._bind(pod, result, self._cycle_rules, placed)  # (the group's attempt reads one set)

    def group_done(self, outcome: gang.GroupOutcome, seconds: float) -> None:
        self.observer.group_attempted(outcome, seconds)

    def report(self, result: CycleResult) -> None:
        decision(log, result)
        self.observer.attempted(result)
