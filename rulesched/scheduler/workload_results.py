"""Step 4 of a pod group's attempt (:mod:`rulesched.scheduler.workloads`): what its result
does, as kube-scheduler's submitPodGroupAlgorithmResult does it.

A root that fits with at least one member newly placed binds its placed members (those of
children that fit); the others wait as single pods (:func:`placed`). A root that does not fit
runs workload-aware preemption (:mod:`rulesched.scheduler.workload_preemption`); the members are
reported with kube-scheduler's messages, and one member stands for the group in the
unschedulable pool while the rest wait (:func:`unplaced`). Each PodGroup of the tree gets its
scheduled :class:`Condition` from its own result (completePodGroupAlgorithmResult).
Next stage: the scheduler binds (:mod:`rulesched.scheduler.scheduler`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.framework import Code, CycleResult, GroupDetail, Preemption
from rulesched.scheduler.gang import GangHost, Gangs, GroupOutcome, _record, _wait
from rulesched.scheduler.workload_placement import UNSCHEDULABLE, Attempt, GroupResult
from rulesched.scheduler.workload_preemption import ONGOING, PREFIX, GroupPreemption, preempt_for_group

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Condition:
    """A PodGroup's scheduled condition as kube-scheduler sets it."""

    group: PodGroup
    status: bool
    reason: str  # Scheduled, Unschedulable, SchedulerError
    message: str


def placed(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    root: PodGroup,
    members: Mapping[str, list[Pod]],
    run: Attempt,
    result: GroupResult,
    began: float,
) -> CycleResult:
    """The root fits: bind the members still assumed; the others go to the unschedulable pool
    as single pods. Each PodGroup's condition follows its own result."""
    originals = {m.key: m for ms in members.values() for m in ms}
    assumed = {p.key: (p, node) for p, node in run.assumed}
    results = run.results
    fit_leaves = {leaf.group.key for leaf in _fitting_leaves(result)}
    for key, (placed, _) in assumed.items():
        gangs.state(gangs.member_of.get(key, group_key(placed) or "")).pending.discard(key)
        bound = host.bind_member(originals[key], placed, results[key])
        results[key] = bound
        host.report(bound)
    statuses = _complete(gangs, root, result)
    conditions = []
    for leaf in gangs.leaves(root):
        ok = leaf.key in fit_leaves
        message = "" if ok else statuses[leaf.key].message
        conditions.append(Condition(leaf, ok, "Scheduled" if ok else "Unschedulable", message))
    for key, member in originals.items():
        if key in assumed:
            continue
        found = results.get(key)
        why = _member_message(found, statuses[group_key(member) or ""].message, "", waiting=False)
        outcome = found or CycleResult(member, Code.UNSCHEDULABLE)
        outcome.group, outcome.status_message = root.key, why
        results[key] = outcome
        host.queue.unschedulable(member, rejected_by=outcome.rejected_by)
        host.report(outcome)
    detail = _detail(root, run, result, len(assumed), True, "")
    for key in originals:
        results[key].group_detail = detail
    outcome_record = GroupOutcome(
        root,
        tuple(assumed),
        "",
        members=tuple(originals.values()),
        conditions=tuple(conditions),
        trials=tuple(run.trials),
    )
    _record(host, gangs, outcome_record, began)
    log.info("pod group placed", extra={"group": root.ref, "members": len(assumed)})
    return results[pod.key]


def unplaced(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    root: PodGroup,
    members: Mapping[str, list[Pod]],
    run: Attempt,
    result: GroupResult,
    began: float,
    now: float,
) -> CycleResult:
    """The root does not fit: workload-aware preemption, then every member is reported (its
    own failure, or the group's status when it fit alone), one waits in the queue for the rest."""
    originals = {m.key: m for ms in members.values() for m in ms}
    status = result.message
    statuses = _complete(gangs, root, result)
    state = gangs.state(root.key)
    state.victims = host.victims_leaving(state.victims, state.preempted_at)
    if result.error:
        preemption = None
    elif state.victims:  # its last preemption's victims are still leaving: wait for them
        preemption = GroupPreemption(PREFIX + ONGOING, code="Success")
    else:
        preemption = preempt_for_group(host, gangs, root, members, run)  # type: ignore[arg-type]
        if preemption.futile:
            host.hold_for_budgets(pod.key)
    # the post filter's status is appended to every group's (applyPodGroupPostFilterResult)
    suffix = preemption.message if preemption is not None else ""
    status = _joined(status, suffix)
    waiting = preemption is not None and preemption.code == "Success"
    results: dict[str, CycleResult] = {}
    fit = sum(1 for r in run.results.values() if r.code is Code.SCHEDULED)
    detail = _detail(root, run, result, fit, False, status)
    for key, member in originals.items():
        found = run.results.get(key)
        tried = found is not None
        if found is None:  # never tried: the group stopped first
            found = CycleResult(member, Code.UNSCHEDULABLE)
        elif found.code is Code.SCHEDULED:  # fit alone, given back with its group
            found.fitted, found.node, found.code = found.node, None, Code.UNSCHEDULABLE
        found.group, found.group_detail = root.key, detail
        leaf_key = group_key(member) or ""
        found.status_message = _member_message(
            found if tried else None, statuses[leaf_key].message, _appended(statuses, leaf_key, suffix), waiting
        )
        results[key] = found
    reason = "SchedulerError" if result.error else "Unschedulable"
    conditions = tuple(
        Condition(leaf, False, reason, _joined(statuses[leaf.key].message, _appended(statuses, leaf.key, suffix)))
        for leaf in gangs.leaves(root)
    )
    if preemption is not None and preemption.victims:
        nominated = [(originals[k], node) for k, node in preemption.nominated.items() if k in originals]
        host.evict_for_group(preemption.victims, pod, nominated, root)
        state.victims, state.preempted_at = [v.key for v in preemption.victims], now
        for member, node in nominated:
            results[member.key].preemption = Preemption(node, preemption.victims if member.key == pod.key else ())
        host.queue.requeue(pod, backoff=False)
    else:
        rejected = frozenset().union(*(r.rejected_by for r in results.values()))
        host.queue.unschedulable(pod, rejected_by=rejected)
    for leaf_key, pods in members.items():
        state = gangs.state(leaf_key)
        _wait(host, gangs, leaf_key, state, [m for m in pods if m.key != pod.key], status, now)
        state.last.update({m.key: results[m.key] for m in pods})
    for found in results.values():
        host.report(found)
    flat = tuple(originals.values())
    outcome = GroupOutcome(
        root, (), status, members=flat, conditions=conditions, trials=tuple(run.trials), preemption=preemption
    )
    _record(host, gangs, outcome, began)
    log.info("pod group not placed: %s", status, extra={"group": root.ref, "pod": pod.key})
    return results[pod.key]


def _joined(message: str, suffix: str) -> str:
    """A status's message with the post filter's appended (Status.AppendReason)."""
    return f"{message}, {suffix}" if message and suffix else message or suffix


def _appended(statuses: Mapping[str, GroupResult], key: str, suffix: str) -> str:
    """What the post filter's status adds to the group's: applyPodGroupPostFilterResult appends it
    to each group's status of the tree, and a group given its parent's status shares the parent's
    object, so it is appended once per group sharing it (kube-scheduler 1.37 writes a child
    never evaluated with it twice)."""
    if not suffix:
        return ""
    shared = sum(1 for r in statuses.values() if r is statuses[key])
    return ", ".join([suffix] * shared)


def _member_message(found: CycleResult | None, group: str, suffix: str, waiting: bool) -> str:
    """What a member not placed is told (submitPodGroupAlgorithmResult): its own failure; when it
    was never tried, its group's status as it was before the post filter (the copy
    completePodGroupAlgorithmResult gave it); when it fit but its group did not, its group's
    status, wrapped again in errPodGroupUnschedulable unless the group waits on preemption."""
    if found is None:
        return group
    if found.fitted is None and found.code is not Code.SCHEDULED:
        return found.member
    message = _joined(group, suffix)
    return message if waiting else f"{UNSCHEDULABLE}, {message}"


def _complete(gangs: Gangs, root: PodGroup, result: GroupResult) -> dict[str, GroupResult]:
    """Every group of the tree with its result (completeCompositePodGroupAlgorithmResultMap): one
    not evaluated, or one that fit under a parent that did not, takes its parent's."""
    out: dict[str, GroupResult] = {}

    def walk(group: PodGroup, parent: GroupResult | None) -> None:
        found = _find(result, group.key)
        if parent is not None and (found is None or (found.ok and not parent.ok)):
            found = parent
        assert found is not None
        out[group.key] = found
        if group.composite:
            for child in gangs.children(group.key):
                walk(child, found)

    walk(root, None)
    return out


def _detail(root: PodGroup, run: Attempt, result: GroupResult, fit: int, placed: bool, outcome: str) -> GroupDetail:
    count = "minGroupCount" if root.composite else "minCount"
    policy = f"gang {count} {root.min_member}" if root.gang else "basic"
    members = sum(len(ms) for ms in run.members.values())
    before = sum(run.before.values())
    domain = dict(result.domain) if placed else {}
    return GroupDetail(root.ref, root.kind, policy, members, fit, before, placed, outcome, domain, tuple(run.trials))


def _fitting_leaves(result: GroupResult) -> list[GroupResult]:
    """successfulLeafResults: the leaves that fit, all their ancestors having fit."""
    if not result.ok:
        return []
    if not result.group.composite:
        return [result]
    return [leaf for child in result.children for leaf in _fitting_leaves(child)]


def _find(result: GroupResult, key: str) -> GroupResult | None:
    if result.group.key == key:
        return result
    for child in result.children:
        found = _find(child, key)
        if found is not None:
            return found
    return None
