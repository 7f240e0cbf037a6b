"""Gang scheduling: a pod group's members placed together, all or nothing.

A pod naming a group (:mod:`rulesched.model.groups`) that the scheduler knows is never placed
alone while its group is short of its minimum. When the queue pops a member, its group is
attempted as a whole (:func:`attempt`):

- its pending members are gathered: the one popped, those held here, and those still in the
  queue (taken out of it). With fewer than the minimum (less the members already bound), they
  all wait here, out of the queue, untried (kube-scheduler's PreEnqueue gate of KEP-4671;
  Coscheduling's PreFilter rejection), until a new member arrives or the group changes;
- otherwise each member runs the same cycle as a single pod (the same rules, the same tables),
  one after another, priority first then arrival, and each member that fits is assumed at once,
  so the next member's snapshot holds it (rules see it: ``group.nodes``, spreading, affinity,
  resources). These assumptions are the attempt's overlay: no other cycle runs in between
  (one thread owns the scheduler), and they are bound only once the group's outcome is known;
- if at least the minimum are placed (counting members bound before), every placed member is
  bound; members that fit nowhere then are scheduled alone later (the group is satisfied, as
  Coscheduling's Permit allows them). Otherwise every assumption is forgotten (nothing of the
  attempt stays assumed), each member is reported with the group's message and its own
  reasons, and the group backs off as a unit: one member (the one popped) goes to the
  unschedulable pool and stands for the rest, which wait here; the cluster's next change moves
  it, and its next pop attempts the whole group again.

A group whose members wait for the rest longer than its timeout (``scheduleTimeoutSeconds``;
Coscheduling's 60 s default) is released (:meth:`Gangs.expire`): every waiting member is
reported with the timeout and parked in the unschedulable pool. A pod naming a group the
scheduler does not know is scheduled as a single pod (as Coscheduling does without its PodGroup).

What cannot be rolled back: a binding is final once the API server accepted it. Members are bound
one by one after the group's decision; a member whose binding fails after others were bound is
reported (``bind_failed``) and retried first (at once, without backoff), alone, since its
group is satisfied only with it. Upstream documents the same limit for its Permit stage.
Next stage: the scheduler binds (:meth:`rulesched.scheduler.scheduler.Scheduler`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.framework import Code, CycleResult, Preemption
from rulesched.scheduler.gang_preemption import GroupPreemption, preempt_for_group
from rulesched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)


@dataclass
class GroupState:
    """What the scheduler holds for one group: its pending members and their waiting."""

    pending: set[str] = field(default_factory=set)  # keys of its pending members (queued or held)
    waiting: dict[str, Pod] = field(default_factory=dict)  # members held here, out of the queue
    since: float | None = None  # when its members began to wait (its timeout counts from there)
    attempts: int = 0
    last_message: str = ""
    last: dict[str, CycleResult] = field(default_factory=dict)  # each member's last result
    victims: list[str] = field(default_factory=list)  # its preemption's victims, until they leave
    preempted_at: float = 0.0  # when (the clock) it last preempted


@dataclass(frozen=True)
class GroupOutcome:
    """One group attempt: which members were bound, and the message when none was."""

    group: PodGroup
    placed: tuple[str, ...]  # members bound by this attempt
    message: str  # "" when the group was placed
    waiting: bool = False  # too few members: nothing was tried
    members: tuple[Pod, ...] = ()  # the members attempted
    # the workload API's (rulesched.scheduler.workloads): each PodGroup's scheduled condition, and
    # the placements tried (topology-aware scheduling)
    conditions: tuple[Any, ...] = ()
    trials: tuple[Any, ...] = ()
    preemption: Any = None  # workload-aware preemption's outcome (workload_preemption.GroupPreemption)


class GangHost(Protocol):
    """What an attempt needs of the scheduler."""

    store: ClusterStore
    queue: SchedulingQueue
    gangs: Gangs

    def place_member(self, pod: Pod) -> CycleResult:
        """The pod's cycle on the store as it is now (no preemption, nothing assumed)."""
        ...

    def bind_member(self, pod: Pod, placed: Pod, result: CycleResult) -> CycleResult:
        """Bind a member already assumed on ``result.node`` (``placed``: as assumed); returns its
        result as the binder left it (BIND_FAILED when the binder refused at once)."""
        ...

    def report(self, result: CycleResult) -> None:
        """A member's cycle ended (events, history, metrics)."""
        ...

    def preempt_member(self, pod: Pod) -> Preemption:
        """The scheduler's preemption for ``pod`` on the store as it is now (changes nothing)."""
        ...

    def group_of(self, pod: Pod) -> PodGroup | None: ...

    def refuses_evictions(self, pod: Pod) -> bool:
        """Whether ``pod``'s victims go through the Eviction API (its profile's ``budgets_refuse``)."""
        ...

    def hold_for_budgets(self, key: str) -> None:
        """Try pod ``key`` again when a PodDisruptionBudget changes (its preemption was futile)."""
        ...

    def victims_leaving(self, victims: Sequence[str], since: float) -> list[str]:
        """Of a preemption's ``victims`` (at ``since``), those still leaving
        (rulesched.scheduler.removals.leaving)."""
        ...

    def group_done(self, outcome: GroupOutcome, seconds: float) -> None:
        """A group attempt ended (metrics, the PodGroup's status)."""
        ...

    def evict_for_group(
        self,
        victims: Sequence[Pod],
        preemptor: Pod,
        nominated: Sequence[tuple[Pod, str]],
        group: PodGroup | None = None,
    ) -> None:
        """Evict the victims (for ``group``: a workload API group preempting) and nominate the
        members to their nodes."""
        ...


class Gangs:
    """The groups the scheduler knows and the members it holds back. One thread (the
    scheduler's) uses it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.groups: dict[str, PodGroup] = {}
        self.states: dict[str, GroupState] = {}
        self.outcomes: list[GroupOutcome] = []  # every attempt's, in order (reports, metrics, tests)
        self.keep_outcomes = True
        self.member_of: dict[str, str] = {}  # pending member's key -> its group's key
        self.timed: set[str] = set()  # groups whose members wait (their timeout runs)
        # members on nodes per group, kept from the store's pod journal (placed_members)
        self._placed: Counter[str] = Counter()
        self._position: int | None = None

    # --- groups ----------------------------------------------------------------------------------
    def set_group(self, group: PodGroup) -> list[Pod]:
        """A group appeared or changed; returns the members waiting here, to be queued again
        (their group may be attemptable now). A change of its status alone (the scheduled
        condition, a phase) releases nobody: it cannot make the group fit."""
        changed = self.changes(group)
        self.groups[group.key] = group
        return self._release(group.key) if changed else []

    def changes(self, group: PodGroup) -> bool:
        """Whether ``group`` is new, or differs from the one known in more than its status."""
        old = self.groups.get(group.key)
        return old is None or dataclasses.replace(group, scheduled=old.scheduled, phase=old.phase) != old

    def release(self, key: str) -> list[Pod]:
        """The members of ``key`` waiting here, handed back to be queued again."""
        return self._release(key)

    def remove_group(self, key: str) -> list[Pod]:
        """A group was deleted: its members are single pods from now on (returned, to queue)."""
        self.groups.pop(key, None)
        return self._release(key)

    def _release(self, key: str) -> list[Pod]:
        state = self.states.get(key)
        if state is None or not state.waiting:
            return []
        pods = list(state.waiting.values())
        state.waiting.clear()
        state.since = None
        return pods

    def group_of(self, pod: Pod) -> PodGroup | None:
        """The known group the pod belongs to."""
        key = group_key(pod)
        return None if key is None else self.groups.get(key)

    # --- the workload API's trees (CompositePodGroups over PodGroups) ----------------------------
    def children(self, key: str) -> list[PodGroup]:
        """A composite group's children, oldest first, then by name (upstream's GetChildGroups)."""
        found = [g for g in self.groups.values() if g.parent == key]
        return sorted(found, key=lambda g: (g.created, g.name))

    def root_of(self, group: PodGroup) -> tuple[PodGroup, str]:
        """The root of the group's tree, and the key of a parent that is missing ("" when none:
        the tree is whole). The walk stops at the API's maximum depth (4)."""
        current = group
        for _ in range(4):
            if not current.parent:
                return current, ""
            parent = self.groups.get(current.parent)
            if parent is None:
                return current, current.parent
            current = parent
        return current, ""

    def leaves(self, root: PodGroup) -> list[PodGroup]:
        """The PodGroups under ``root`` (itself, for a PodGroup), in child order."""
        if not root.composite:
            return [root]
        out: list[PodGroup] = []
        for child in self.children(root.key):
            out.extend(self.leaves(child))
        return out

    def state(self, key: str) -> GroupState:
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = GroupState()
        return state

    # --- pending members ---------------------------------------------------------------------------
    def added(self, pod: Pod) -> None:
        key = group_key(pod)
        if key is not None:
            self.state(key).pending.add(pod.key)
            self.member_of[pod.key] = key

    def holds(self, key: str) -> Pod | None:
        group = self.member_of.get(key)
        state = self.states.get(group) if group is not None else None
        return state.waiting.get(key) if state is not None else None

    def updated(self, pod: Pod) -> bool:
        """A pending pod changed: True when it is held here (its copy is replaced)."""
        key = group_key(pod)
        state = self.states.get(key) if key is not None else None
        if state is None or pod.key not in state.waiting:
            return False
        state.waiting[pod.key] = pod
        return True

    def gone(self, pod_key: str) -> None:
        """A member was deleted, or bound: it is no longer pending."""
        key = self.member_of.pop(pod_key, None)
        state = self.states.get(key) if key is not None else None
        if state is None:
            return
        state.pending.discard(pod_key)
        state.waiting.pop(pod_key, None)
        if not state.pending and not state.waiting:
            del self.states[key]  # type: ignore[arg-type]

    def placed_members(self, store: ClusterStore, key: str) -> int:
        """The group's members on nodes now (bound, or assumed), kept from the store's journal
        of pod changes (a full count when the journal no longer reaches back)."""
        changes = store.pod_changes(self._position) if self._position is not None else None
        if changes is None:
            self._placed = Counter(k for pod in store.pods() if (k := group_key(pod)) is not None)
        else:
            for sign, pod, _ in changes:
                k = group_key(pod)
                if k is not None:
                    self._placed[k] += sign
        self._position = store.pod_position
        return self._placed[key]

    def waiting_count(self) -> int:
        return sum(len(s.waiting) for s in self.states.values())

    # --- timeouts ------------------------------------------------------------------------------------
    def next_due(self) -> float | None:
        """When the next group's wait times out."""
        due = []
        for key in list(self.timed):
            state, group = self.states.get(key), self.groups.get(key)
            if state is None or group is None or not state.waiting or state.since is None or group.wait_forever:
                self.timed.discard(key)  # (the workload API's groups wait without end, as upstream's)
                continue
            due.append(state.since + group.timeout_seconds)
        return min(due) if due else None

    def expire(self, now: float) -> list[tuple[PodGroup, list[CycleResult], str]]:
        """Groups whose members waited past their timeout: their members are released (returned
        as results to report, the group's message the timeout's; the caller parks them)."""
        expired: list[tuple[PodGroup, list[CycleResult], str]] = []
        due = self.next_due()  # (prunes self.timed)
        if due is None or due > now:
            return expired
        for key in sorted(self.timed):
            state, group = self.states[key], self.groups[key]
            assert state.since is not None
            if now - state.since < group.timeout_seconds:
                continue
            message = (
                f"pod group {group.key} timed out after {group.timeout_seconds:g}s "
                f"(scheduleTimeoutSeconds): {state.last_message}"
            )
            results = []
            for pod in state.waiting.values():
                last = state.last.get(pod.key)
                result = CycleResult(pod, Code.UNSCHEDULABLE, group=key)
                if last is not None:
                    result = dataclasses.replace(last, pod=pod, code=Code.UNSCHEDULABLE, node=None, timing=None)
                result.group_message = message
                results.append(result)
            state.waiting.clear()
            state.since = None
            expired.append((group, results, message))
        return expired


def _order(pods: Iterable[Pod]) -> list[Pod]:
    """Members in the order they are placed: priority first, then arrival, then name."""
    return sorted(pods, key=lambda p: (-p.priority, p.creation_timestamp, p.key))


def attempt(host: GangHost, gangs: Gangs, pod: Pod, group: PodGroup) -> CycleResult:
    """Attempt ``pod``'s group (``pod`` just popped from the queue); returns ``pod``'s result."""
    began = time.perf_counter()
    state = gangs.state(group.key)
    state.pending.add(pod.key)
    gangs.member_of[pod.key] = group.key
    members = {pod.key: pod}
    members.update(state.waiting)
    state.waiting.clear()
    for taken in host.queue.take(k for k in sorted(state.pending) if k not in members):
        members[taken.key] = taken
    before = gangs.placed_members(host.store, group.key)
    needed = group.min_member - before
    now = gangs.clock()
    if len(members) < needed:
        message = (
            f"pod group {group.key}: {len(members) + before} of its minimum {group.min_member} "
            f"members exist ({before} bound); waiting for the rest."
        )
        _wait(host, gangs, group.key, state, members.values(), message, now)
        result = CycleResult(pod, Code.UNSCHEDULABLE, group=group.key, group_message=message)
        host.report(result)
        _record(host, gangs, GroupOutcome(group, (), message, waiting=True, members=tuple(members.values())), began)
        return result
    state.attempts += 1
    size = (group.min_member, len(members) + before)  # what rules read as group.min_count, group.members
    members = {k: dataclasses.replace(m, gang=size) for k, m in members.items()}
    results: dict[str, CycleResult] = {}
    placed: list[tuple[Pod, CycleResult, Pod]] = []
    try:
        for member in _order(members.values()):
            result = host.place_member(member)
            result.group = group.key
            results[member.key] = result
            if result.code is Code.SCHEDULED and result.node is not None:
                placed.append((member, result, host.store.assume(member, result.node)))
    except BaseException:
        for member, _, _ in placed:  # (a cycle given up: nothing of the attempt stays assumed)
            host.store.forget(member.key)
        _wait(host, gangs, group.key, state, [m for k, m in members.items() if k != pod.key], state.last_message, now)
        raise
    if before + len(placed) >= group.min_member:
        for member, _, _ in placed:
            state.pending.discard(member.key)
        for member, result, assumed in placed:
            results[member.key] = bound = host.bind_member(member, assumed, result)
            host.report(bound)
        for key, result in results.items():
            if result.code is not Code.SCHEDULED:  # beyond the minimum: alone, later
                host.queue.unschedulable(members[key], rejected_by=result.rejected_by)
                host.report(result)
        _record(
            host,
            gangs,
            GroupOutcome(group, tuple(m.key for m, _, _ in placed), "", members=tuple(members.values())),
            began,
        )
        log.info("pod group placed", extra={"group": group.key, "members": len(placed)})
        return results[pod.key]
    failed = [(members[k], r) for k, r in results.items() if r.code is not Code.SCHEDULED]
    preemption = None
    if not _victims_remain(host, state):
        preemption = preempt_for_group(host, group, before, [m for m, _, _ in placed], failed)
    for member, result, _ in placed:
        host.store.forget(member.key)
        result.fitted, result.node, result.code = result.node, None, Code.UNSCHEDULABLE
    if preemption is not None:
        return _preempted(host, gangs, state, group, pod, members, results, placed, preemption, now, began)
    message = (
        f"pod group {group.key}: {len(placed)} of {len(members)} members could be placed; "
        f"{needed} are needed (minimum {group.min_member}, {before} bound); none was bound."
    )
    rejected = frozenset().union(*(r.rejected_by for r in results.values()))
    host.queue.unschedulable(pod, rejected_by=rejected)  # the group's one member in the queue
    log.info("pod group not placed: %s", message, extra={"group": group.key, "pod": pod.key})
    return _unplaced(host, gangs, group, state, pod, members, results, message, now, began)


def _unplaced(
    host: GangHost,
    gangs: Gangs,
    group: PodGroup,
    state: GroupState,
    pod: Pod,
    members: Mapping[str, Pod],
    results: dict[str, CycleResult],
    message: str,
    now: float,
    began: float,
) -> CycleResult:
    """The group bound nothing this attempt (it did not fit, or it waits for its victims): the
    members other than ``pod`` (back in the queue already) wait outside it, every member's result
    carries the group's ``message``, and the attempt is recorded."""
    _wait(host, gangs, group.key, state, [m for k, m in members.items() if k != pod.key], message, now)
    for result in results.values():
        result.group_message = message
        host.report(result)
    state.last = results
    _record(host, gangs, GroupOutcome(group, (), message, members=tuple(members.values())), began)
    return results[pod.key]


def _wait(
    host: GangHost, gangs: Gangs, key: str, state: GroupState, pods: Iterable[Pod], message: str, now: float
) -> None:
    """Hold these members (in flight or already held) here, out of the queue."""
    for pod in pods:
        newest = host.queue.hold(pod) if pod.key in host.queue else pod
        if newest is not None:
            state.waiting[pod.key] = newest
    if state.since is None:
        state.since = now
    gangs.timed.add(key)
    state.last_message = message


def _record(host: GangHost, gangs: Gangs, outcome: GroupOutcome, began: float) -> None:
    if gangs.keep_outcomes:
        gangs.outcomes.append(outcome)
    host.group_done(outcome, time.perf_counter() - began)


def _victims_remain(host: GangHost, state: GroupState) -> bool:
    """Whether the group's last preemption's victims are still leaving: wait for them rather
    than preempt again (upstream's PodEligibleToPreemptOthers, for the group); for a few seconds,
    then only for those seen terminating (rulesched.scheduler.removals.leaving)."""
    state.victims = host.victims_leaving(state.victims, state.preempted_at)
    return bool(state.victims)


def _preempted(
    host: GangHost,
    gangs: Gangs,
    state: GroupState,
    group: PodGroup,
    pod: Pod,
    members: dict[str, Pod],
    results: dict[str, CycleResult],
    placed: list[tuple[Pod, CycleResult, Pod]],
    preemption: GroupPreemption,
    now: float,
    began: float,
) -> CycleResult:
    """Evict the victims, nominate the members and try the group again at once."""
    nominated = [*((m, r.fitted or "") for m, r, _ in placed), *preemption.nominated]
    host.evict_for_group(preemption.victims, pod, nominated)
    state.victims, state.preempted_at = [v.key for v in preemption.victims], now
    message = (
        f"pod group {group.key}: {len(nominated)} members fit once {len(preemption.victims)} pod(s) are "
        "preempted; nominated, waiting for them to leave."
    )
    node_of = {m.key: node for m, node in nominated}
    for member, node in preemption.nominated:
        results[member.key].preemption = Preemption(node, ())
    # (the victims are the group's: reported with the member popped, on its node or the first one)
    node = node_of.get(pod.key) or nominated[0][1]
    results[pod.key].preemption = Preemption(node, preemption.victims)
    host.queue.requeue(pod, backoff=False)
    log.info("pod group preempting: %s", message, extra={"group": group.key, "pod": pod.key})
    return _unplaced(host, gangs, group, state, pod, members, results, message, now, began)
