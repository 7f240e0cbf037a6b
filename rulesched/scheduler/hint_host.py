"""The scheduler's side of the queueing hints (:mod:`rulesched.scheduler.hints`): which parked
pods move when pods leave their nodes, nominations end, or nodes are added or changed.

A mixin of :class:`rulesched.scheduler.scheduler.Scheduler`, apart so that the scheduler's own
module keeps to pending pods, the cycle and binding. Both kinds of room freed on a node go
through one hint: a pod gone from a node (:meth:`HintHostMixin.pods_gone`: deleted, finished,
its assumption dropped after a failed binding) and a nomination ended without its pod placed
there (:meth:`HintHostMixin._end_nomination`: kube-scheduler moves the parked pods of its
priority or lower then, eventhandlers.go getLEPriorityPreCheck; a higher one never had to leave
it room). Judged by the hint, only those the freed node may help move; and a preemptor parked
while its victims leave moves when the last of them goes, whatever the hint says of that node
(its nomination may have been taken meanwhile: :meth:`HintHostMixin._awaited`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet
from rulesched.model import Node, Pod
from rulesched.scheduler import gang
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.hints import EMPTY_BEFORE, DeletionHint, NodeChangeHint
from rulesched.scheduler.nominator import Nominator
from rulesched.scheduler.queue import SchedulingQueue

if TYPE_CHECKING:
    from rulesched.scheduler.scheduler import Profile


class HintHostMixin:
    """Parked pods moved by the room pods and nominations free. The attributes below are the
    scheduler's."""

    store: ClusterStore
    queue: SchedulingQueue
    nominator: Nominator
    gangs: gang.Gangs
    _victims: dict[str, list[str]]
    _preempted_at: dict[str, float]
    left_to_wait: Callable[[str], tuple[list[str], list[str]]]
    profile_of: Callable[[Pod], Profile]

    def pods_gone(self, gone: Sequence[Pod]) -> int:
        """Assigned pods left their nodes: the parked pods they may help move to the queue, and
        the preemptors whose last victims they were, whatever the hint says (:meth:`_awaited`).
        Returns how many moved."""
        return self._move_if_helped(gone, None, self._awaited(gone))

    def nodes_changed(self, event: Event, names: Sequence[str], before: Mapping[str, Node] = EMPTY_BEFORE) -> int:
        """Nodes ``names`` were added or changed (``event``; ``before``: the changed ones' Nodes
        as they were): the parked pods one of whose rejecting filters passes on one of them now,
        and failed there before, move (rulesched.scheduler.hints: node_change_may_help). Returns
        how many moved."""
        hint = NodeChangeHint(names, self.store.snapshot(), self._hint_rules, before)
        try:
            return self.queue.move(event, hint)
        finally:
            hint.close()

    def _awaited(self, gone: Sequence[Pod]) -> frozenset[str]:
        """The preemptors the last of whose victims is among ``gone`` (their waiting ends now).
        Upstream moves them by their victims' deletion (NodeResourcesFit's hint answers Queue
        for every assigned pod's deletion, noderesources/fit.go
        isSchedulableAfterAssignedPodDelete). The hint narrows a deletion to the node it freed,
        which holds for a pod whose last attempt found no node; a preemptor's found one, its
        nomination, and a higher-priority preemptor may have ended that since, taking the node
        (the executor's getLowerPriorityNominatedPods and clearNominatedNodeName): its next
        attempt may then preempt on any node, so the node its victim freed says nothing of it."""
        if not self._victims or not gone:
            return frozenset()
        keys = {g.key for g in gone}
        return frozenset(
            key for key, victims in self._victims.items() if not keys.isdisjoint(victims) and self._done_waiting(key)
        )

    def _end_nomination(self, key: str) -> str | None:
        """End a nomination whose pod is not placed there (returns the node it had, if any): the
        parked pods of its priority or lower that the room it held may help move."""
        held = self.nominator.pod_of(key)
        node = self.nominator.remove(key)
        if held is not None:  # (nominated pods are kept placed on their node: the room freed there)
            self._move_if_helped([held], held.priority)
        return node

    def _move_if_helped(self, gone: Sequence[Pod], up_to: int | None, always: frozenset[str] = frozenset()) -> int:
        """Move the parked pods (of priority ``up_to`` or lower, if given) whose rules say the
        room ``gone`` freed on their nodes may help them (and those of ``always``)."""
        hint = DeletionHint(
            gone, self.store.snapshot(), self._hint_rules, self.nominator.reserved_for, self._may_preempt
        )
        try:
            if up_to is None:
                return self.queue.move(Event.POD_DELETED, lambda pod, _: pod.key in always or hint(pod))
            return self.queue.move(Event.POD_DELETED, lambda pod, _: pod.priority <= up_to and hint(pod))
        finally:
            hint.close()

    def _hint_rules(self, pod: Pod) -> RuleSet | None:
        """A parked pod's rule set for the hint (None: no hint: rules not loaded, a group's member)."""
        profile = self.profile_of(pod)
        if not profile.rules.loaded or (self.gangs.groups and self.gangs.group_of(pod) is not None):
            return None
        return profile.rules.rules

    def _may_preempt(self, pod: Pod) -> bool:
        """Whether the pod's next cycle may preempt: not while victims of its earlier preemption
        are still leaving (the cycle then waits for them: RemovalsMixin._victims_remain, as
        upstream's PodEligibleToPreemptOthers), a state their own going ends, itself an event (or
        time, for victims not seen terminating: rulesched.scheduler.removals.leaving)."""
        return self._done_waiting(pod.key)

    def _done_waiting(self, key: str) -> bool:
        """Whether the pod's earlier preemption leaves it nothing to wait for."""
        remaining, claims = self.left_to_wait(key)
        return not (remaining or claims)
