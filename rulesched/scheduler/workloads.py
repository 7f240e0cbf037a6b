"""The workload API's pod groups (KEP-4671 / KEP-5710 / KEP-5732, Kubernetes 1.36-1.37): a
group placed as kube-scheduler's pod group cycle places it (schedule_one_podgroup.go).

A pod naming a PodGroup (``spec.schedulingGroup``) is never placed alone. When the queue pops
it (:func:`attempt`):

1. Its group's tree is found: the PodGroup, or the root CompositePodGroup above it. A pod whose
   PodGroup (or a parent of it) the scheduler has not seen waits, untried, as upstream's
   GangScheduling PreEnqueue holds it (``waiting for pods's pod group "x" to appear in
   scheduling queue``); so do the members of a tree short of its quorum (each gang's
   ``minCount`` of pods existing, and each composite's ``minGroupCount`` of ready children).
   Waiting is no attempt: no event, no condition, no metric.
2. The members are checked as upstream's validatePodGroup checks them: one scheduler name, each
   pod's priority the root group's, one preemption policy. A failure is a SchedulerError.
3. The root is placed (:mod:`rulesched.scheduler.workload_placement`): a PodGroup's pending members one after another
   (priority first, then creation, then name), each running the ordinary cycle with the members
   placed before it assumed, until its ``minCount`` is met with every member tried, or cannot be
   met any more (GangScheduling's PlacementFeasible: ``minCount (3) cannot be satisfied: 1
   scheduled, 1 remaining``); a composite's children one after another (oldest first), each
   placed whole or given back, until ``minGroupCount`` children fit or cannot. A group with a
   topology constraint is tried in each domain of its key in turn (:mod:`rulesched.scheduler.placement`;
   the members see the domain as ``group.domain``, which the default rules' PodGroupTopology
   filter holds them to), every trial given back, and the best domain that fits is assumed again.
4. A root that fits with at least one member newly placed binds its placed members (those of
   children that fit); the others wait as single pods. A root that does not fit gives every
   assumption back and runs workload-aware preemption (:mod:`rulesched.scheduler.workload_preemption`);
   the members are reported with kube-scheduler's messages, and one member stands for the
   group in the unschedulable pool while the rest wait here
   (:mod:`rulesched.scheduler.workload_results`).

Here: steps 1 and 2, and :func:`attempt`, which runs the rest. Each PodGroup of the tree gets
its scheduled condition as kube-scheduler writes it (``PodGroupInitiallyScheduled``, 1.36's
``PodGroupScheduled`` for v1alpha2 objects; never set back from True): the observer's
:meth:`group_attempted` writes them in ``rulesched run``.
Next stage: the scheduler binds (:mod:`rulesched.scheduler.scheduler`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.framework import Code, CycleResult
from rulesched.scheduler.gang import GangHost, Gangs, GroupOutcome, _order, _record, _wait
from rulesched.scheduler.workload_placement import Attempt
from rulesched.scheduler.workload_results import Condition, placed, unplaced

WAITING_FOR_GROUP = 'waiting for pods\'s pod group "{}" to appear in scheduling queue'  # (upstream's wording)
WAITING_FOR_MEMBERS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_TREE = 'waiting for composite pod group "{}" tree to meet quorum'
WAITING_FOR_PARENT = "failed to build hierarchy snapshot: composite pod group {} not found"


def attempt(host: GangHost, gangs: Gangs, pod: Pod, group: PodGroup | None) -> CycleResult:
    """Attempt ``pod``'s group (``pod`` just popped from the queue; ``group``: its PodGroup, None
    when the scheduler has not seen it); returns ``pod``'s result."""
    began = time.perf_counter()
    now = gangs.clock()
    key = group_key(pod)
    assert key is not None
    if group is None:
        return _hold(host, gangs, pod, {key: [pod]}, WAITING_FOR_GROUP.format(pod.scheduling_group), None, began, now)
    root, missing = gangs.root_of(group)
    leaves = gangs.leaves(root) if not missing else [group]
    members = _gather(host, gangs, pod, leaves)
    if missing:
        message = WAITING_FOR_PARENT.format(missing.split(":", 1)[1])
        return _hold(host, gangs, pod, members, message, root, began, now)
    waiting = _quorum(host, gangs, root, members)
    if waiting:
        return _hold(host, gangs, pod, members, waiting, root, began, now)
    for leaf_key in members:
        gangs.state(leaf_key).attempts += 1
    pods = [m for ms in members.values() for m in ms]
    problem = validate(root, pods, [p for p in host.store.pods() if group_key(p) in members])
    if problem:
        return _error(host, gangs, pod, root, members, problem, began, now)
    run = Attempt(host, gangs, members)
    result = run.place(root, {})
    if result.ok and not result.any_scheduled:
        # (the framework needs one new member placed)
        result = dataclasses.replace(result, ok=False, reasons=[], wrapped=True)
    if result.ok:
        return placed(host, gangs, pod, root, members, run, result, began)
    run.give_back()
    return unplaced(host, gangs, pod, root, members, run, result, began, now)


def _gather(host: GangHost, gangs: Gangs, pod: Pod, leaves: Sequence[PodGroup]) -> dict[str, list[Pod]]:
    """Each leaf's pending members (the one popped, those held, those still queued), in the
    order they are placed."""
    out: dict[str, list[Pod]] = {}
    own = group_key(pod)
    for leaf in leaves:
        state = gangs.state(leaf.key)
        found: dict[str, Pod] = {}
        if leaf.key == own:
            state.pending.add(pod.key)
            gangs.member_of[pod.key] = leaf.key
            found[pod.key] = pod
        found.update({k: v for k, v in state.waiting.items() if k not in found})
        state.waiting.clear()
        for taken in host.queue.take(k for k in sorted(state.pending) if k not in found):
            found[taken.key] = taken
        out[leaf.key] = _order(found.values())
    return out


def _quorum(host: GangHost, gangs: Gangs, root: PodGroup, members: Mapping[str, list[Pod]]) -> str:
    """Why the tree waits for more pods ("" when it may be attempted): upstream's PreEnqueue,
    counting every pod of a gang (pending and placed) against its minCount."""

    def ready(group: PodGroup) -> bool:
        if not group.composite:
            count = len(members.get(group.key, ())) + gangs.placed_members(host.store, group.key)
            return count >= (group.min_member if group.gang else 1)
        fit = sum(ready(child) for child in gangs.children(group.key))
        return fit >= (group.min_member if group.gang else 1)

    if ready(root):
        return ""
    return WAITING_FOR_TREE.format(root.name) if root.composite else WAITING_FOR_MEMBERS


def validate(root: PodGroup, pending: Sequence[Pod], placed: Sequence[Pod]) -> str:
    """validatePodGroup: one scheduler name, each pod's priority the root's, one preemption
    policy (the root's when it sets one, as with the PodGroupPreemptionPolicy gate on; else the
    first pod's, as with it off)."""
    name = pending[0].scheduler_name if pending else ""
    policy = root.preemption_policy
    for pod in (*pending, *placed):
        if pod.scheduler_name != name:
            return (
                "all pods in a single pod group should have the same .spec.schedulerName set, "
                f"got: {pod.scheduler_name!r} and {name!r}"
            )
        if pod.priority != root.priority:
            return (
                "all pods in a single pod group should have the same priority as the pod group's priority, "
                f"got {pod.priority} and {root.priority}"
            )
        if root.preemption_policy:
            if pod.preemption_policy != policy:
                return (
                    "all pods in a single pod group should have the same preemption policy as the pod group's "
                    f"preemption policy, got {pod.preemption_policy} and {policy}"
                )
        elif not policy:
            policy = pod.preemption_policy
        elif pod.preemption_policy != policy:
            return (
                "all pods in a single pod group should have the same preemption policy, "
                f"got {pod.preemption_policy} and {policy}"
            )
    return ""


def _hold(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    members: Mapping[str, list[Pod]],
    message: str,
    root: PodGroup | None,
    began: float,
    now: float,
) -> CycleResult:
    """The members wait here, untried (PreEnqueue): no attempt, nothing reported to the API."""
    result = CycleResult(pod, Code.UNSCHEDULABLE, group=group_key(pod) or "", status_message=message, waiting=True)
    for leaf_key, pods in members.items():
        state = gangs.state(leaf_key)
        _wait(host, gangs, leaf_key, state, pods, message, now)
        for member in pods:
            held = result if member.key == pod.key else CycleResult(member, Code.UNSCHEDULABLE, group=leaf_key)
            held.status_message, held.waiting = message, True
            state.last[member.key] = held
    host.report(result)
    if root is not None:
        flat = tuple(m for ms in members.values() for m in ms)
        _record(host, gangs, GroupOutcome(root, (), message, waiting=True, members=flat), began)
    return result


def _error(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    root: PodGroup,
    members: Mapping[str, list[Pod]],
    problem: str,
    began: float,
    now: float,
) -> CycleResult:
    """A group that fails validation: a SchedulerError for its pods and its PodGroups; the one
    popped waits in the unschedulable pool for a change (upstream retries it after its backoff:
    here a simulation would never settle), the rest wait with it."""
    flat = [m for ms in members.values() for m in ms]
    results = {}
    for member in flat:
        results[member.key] = CycleResult(member, Code.UNSCHEDULABLE, group=root.key, status_message=problem)
    for leaf_key, pods in members.items():
        _wait(host, gangs, leaf_key, gangs.state(leaf_key), [m for m in pods if m.key != pod.key], problem, now)
    host.queue.unschedulable(pod)
    for result in results.values():
        host.report(result)
    conditions = tuple(Condition(leaf, False, "SchedulerError", problem) for leaf in gangs.leaves(root))
    _record(host, gangs, GroupOutcome(root, (), problem, members=tuple(flat), conditions=conditions), began)
    return results[pod.key]
