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
3. The root is placed (:class:`_Attempt`): a PodGroup's pending members one after another
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
   group in the unschedulable pool while the rest wait here.

Each PodGroup of the tree gets its scheduled condition as kube-scheduler writes it
(``PodGroupInitiallyScheduled``, 1.36's ``PodGroupScheduled`` for v1alpha2 objects; never set
back from True): the observer's :meth:`group_attempted` writes them in ``rulesched run``.
Next stage: the scheduler binds (:mod:`rulesched.scheduler.scheduler`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler import placement
from rulesched.scheduler.framework import Code, CycleResult, GroupDetail, Preemption, Trial
from rulesched.scheduler.gang import GangHost, Gangs, GroupOutcome, GroupState, _order, _record, _wait
from rulesched.scheduler.reasons import ReasonCode

log = logging.getLogger(__name__)

UNSCHEDULABLE = "pod group is unschedulable"  # errPodGroupUnschedulable
OUTSIDE_DOMAIN = "node(s) didn't match the pod group's topology domain"  # (rules/default.rules)
WAITING_FOR_GROUP = 'waiting for pods\'s pod group "{}" to appear in scheduling queue'  # (upstream's wording)
WAITING_FOR_MEMBERS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_FOR_TREE = 'waiting for composite pod group "{}" tree to meet quorum'
WAITING_FOR_PARENT = "failed to build hierarchy snapshot: composite pod group {} not found"


@dataclass(frozen=True)
class Condition:
    """A PodGroup's scheduled condition as kube-scheduler sets it."""

    group: PodGroup
    status: bool
    reason: str  # Scheduled, Unschedulable, SchedulerError
    message: str


@dataclass
class _Result:
    """One group's outcome in one evaluation (upstream's podGroupAlgorithmResult)."""

    group: PodGroup
    ok: bool
    reasons: list[str] = field(default_factory=list)
    wrapped: bool = False  # the status carries errPodGroupUnschedulable (fwk.Status.WithError)
    error: str = ""  # a SchedulerError's message
    any_scheduled: bool = False
    placed: list[tuple[Pod, str]] = field(default_factory=list)  # still assumed (leaf, when ok)
    fit: int = 0  # members that fit before the leaf was given up (explanations: how close it came)
    children: list[_Result] = field(default_factory=list)
    domain: Mapping[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """Status.Message(): the error (when wrapped) then the reasons."""
        return self.error or ", ".join([UNSCHEDULABLE, *self.reasons] if self.wrapped else self.reasons)

    @property
    def as_error(self) -> str:
        """Status.AsError(): the wrapped error alone, else the reasons."""
        return self.error or (UNSCHEDULABLE if self.wrapped else ", ".join(self.reasons))

    def leaves(self) -> list[_Result]:
        if not self.group.composite:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]


def feasibility(minimum: int, scheduled: int, remaining: int) -> tuple[str, str]:
    """GangScheduling's PlacementFeasible: ("ok" | "wait" | "no", message)."""
    if remaining + scheduled < minimum:
        return "no", f"minCount ({minimum}) cannot be satisfied: {scheduled} scheduled, {remaining} remaining"
    if scheduled < minimum:
        return "wait", f"minCount ({minimum}) is not yet satisfied: {scheduled} scheduled, {remaining} remaining"
    return "ok", ""


class _Attempt:
    """One evaluation of a tree on the store: members assumed as they fit, given back as
    upstream's revert functions give them back (a stack of assumed members)."""

    def __init__(self, host: GangHost, gangs: Gangs, members: Mapping[str, list[Pod]]) -> None:
        self.host, self.gangs = host, gangs
        self.members = members  # leaf key -> its pending members, in placement order
        self.assumed: list[tuple[Pod, str]] = []  # (member as assumed, node), in order
        self.results: dict[str, CycleResult] = {}  # member key -> its last evaluation
        self.trials: list[Trial] = []
        self.before: dict[str, int] = {k: gangs.placed_members(host.store, k) for k in members}

    # --- giving back ---------------------------------------------------------------------------
    def _back_to(self, mark: int) -> list[tuple[Pod, str]]:
        """Forget the assumptions made since ``mark`` (last first); returns them, in order."""
        undone = self.assumed[mark:]
        for pod, _ in reversed(undone):
            self.host.store.forget(pod.key)
        del self.assumed[mark:]
        return undone

    def give_back(self) -> None:
        self._back_to(0)

    def _assume(self, pod: Pod, node: str) -> None:
        self.host.store.assume(pod, node)
        self.assumed.append((pod, node))

    # --- the algorithm --------------------------------------------------------------------------
    def place(self, group: PodGroup, domain: Mapping[str, str]) -> _Result:
        """podGroupSchedulingPlacementAlgorithm: a group without a topology constraint is placed
        in its parent's placement; one with a constraint is tried in each domain, every trial
        given back, and the best that fits is assumed again."""
        if not group.topology:
            return self._default(group, domain)
        key = group.topology[0]
        nodes = self.host.store.node_views()
        required, problem = placement.placed_domain(self._placed_nodes(group), key)
        if problem:
            return _Result(group, False, error=problem)
        tried = placement.placements(nodes, key, domain, required)
        if not tried:
            return _Result(
                group, False, [f"0/0 placements are available: no node within {dict(domain)} has label {key}"]
            )
        first: _Result | None = None
        first_seen: dict[str, CycleResult] = {}
        fits: list[tuple[placement.Placement, _Result, list[tuple[Pod, str]], dict[str, CycleResult]]] = []
        keys = [m.key for leaf in self._leaf_keys(group) for m in self.members.get(leaf, ())]
        for option in tried:
            mark = len(self.assumed)
            began = time.perf_counter()
            result = self._default(group, option.domain)
            kept = self._back_to(mark)
            seen = {k: self.results[k] for k in keys if k in self.results}
            if result.error:
                return result
            if first is None:
                first, first_seen = result, seen
            # (members that fit there: those kept when it fits, those given back with it when not)
            placed = (
                (len(kept) if result.ok else result.fit)
                if not group.composite
                else sum(1 for c in result.children if c.ok)
            )
            trial = Trial(group.ref, option.domain, result.ok, placed, "" if result.ok else result.message)
            self.trials.append(dataclasses.replace(trial, seconds=time.perf_counter() - began))
            if result.ok:
                fits.append((option, result, kept, seen))
        assert first is not None
        if not fits:
            for k in keys:  # upstream reports the first placement's results (a member it did not
                self.results.pop(k, None)  # try there was not tried, whatever later ones found)
            self.results.update(first_seen)
            message = f"0/{len(tried)} placements are available, first placement status: {first.as_error}"
            return dataclasses.replace(first, reasons=[message], wrapped=True, placed=[])
        if len(fits) == 1:
            chosen = 0
        else:
            scored = [
                (
                    option,
                    placement.fit_score(nodes, option.domain, [p for p, _ in kept]),
                    self._count(group) + len(kept),
                )
                for option, _, kept, _ in fits
            ]
            chosen = placement.best(scored)
        _, result, kept, seen = fits[chosen]
        self.results.update(seen)  # (each member's result in the placement chosen)
        for pod, node in kept:
            self._assume(pod, node)
        return result

    def _default(self, group: PodGroup, domain: Mapping[str, str]) -> _Result:
        if group.composite:
            return self._composite(group, domain)
        return self._leaf(group, domain)

    def _leaf(self, group: PodGroup, domain: Mapping[str, str]) -> _Result:
        """podGroupSchedulingDefaultAlgorithm for one PodGroup."""
        members = self.members.get(group.key, [])
        scheduled, remaining = self.before.get(group.key, 0), len(members)
        state, message = feasibility(group.min_member, scheduled, remaining)
        if state == "no":  # (before any member: the status wrapped)
            return _Result(group, False, [message], wrapped=True, domain=domain)
        mark = len(self.assumed)
        frozen = MappingProxyType(dict(domain))
        size = (group.min_member, scheduled + remaining)  # what rules read as group.min_count, group.members
        any_scheduled = False
        placed: list[tuple[Pod, str]] = []
        for member in members:
            trying = dataclasses.replace(member, gang=size, domain=frozen)
            result = self.host.place_member(trying)
            if frozen:
                _within(result)
            result.group = group.key
            self.results[member.key] = result
            remaining -= 1
            if result.code is Code.SCHEDULED and result.node is not None:
                self._assume(trying, result.node)
                placed.append((trying, result.node))
                scheduled += 1
            state, message = feasibility(group.min_member, scheduled, remaining)
            if state == "no":
                break
            any_scheduled = any_scheduled or result.code is Code.SCHEDULED
        if state != "ok":  # stopped by PlacementFeasible: its status as is; still waiting: wrapped
            self._back_to(mark)
            return _Result(group, False, [message], wrapped=state == "wait", domain=domain, fit=len(placed))
        return _Result(group, True, any_scheduled=any_scheduled, placed=placed, domain=domain, fit=len(placed))

    def _composite(self, group: PodGroup, domain: Mapping[str, str]) -> _Result:
        """compositePodGroupSchedulingDefaultAlgorithm: the children one after another, each
        placed whole or given back, until minGroupCount of them fit or cannot."""
        children = self.gangs.children(group.key)
        scheduled, remaining = 0, len(children)
        state, message = feasibility(group.min_member, scheduled, remaining)
        if state == "no":
            return _Result(group, False, [message], domain=domain)
        mark = len(self.assumed)
        results: list[_Result] = []
        any_scheduled = False
        for child in children:
            result = self.place(child, domain)
            results.append(result)
            if result.error:
                self._back_to(mark)
                message = f"composite pod group evaluation failed due to child error: {result.error}"
                return _Result(group, False, error=message, children=results, domain=domain)
            any_scheduled = any_scheduled or result.any_scheduled
            remaining -= 1
            scheduled += result.ok
            state, message = feasibility(group.min_member, scheduled, remaining)
            if state == "no":
                break
        if state != "ok":  # (a composite's status is wrapped only when still waiting)
            self._back_to(mark)
            return _Result(group, False, [message], wrapped=state == "wait", children=results, domain=domain)
        return _Result(group, True, any_scheduled=any_scheduled, children=results, domain=domain)

    # --- counts ------------------------------------------------------------------------------
    def _leaf_keys(self, group: PodGroup) -> list[str]:
        return [leaf.key for leaf in self.gangs.leaves(group)]

    def _count(self, group: PodGroup) -> int:
        """The group's pods placed before the attempt (PodGroupPodsCount's scheduled pods)."""
        return sum(self.before.get(k, 0) for k in self._leaf_keys(group))

    def _placed_nodes(self, group: PodGroup) -> list[object]:
        """The nodes of the group's members on nodes now, assumptions of other groups' trials
        aside (upstream reads its scheduled pods from the cycle's snapshot)."""
        keys = set(self._leaf_keys(group))
        store = self.host.store
        names = {store.pod_node(p.key) for p in store.pods() if group_key(p) in keys}
        views = (store.node_view(n) for n in names if n)
        return [v for v in views if v is not None]


# --- the attempt -------------------------------------------------------------------------------------


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
    run = _Attempt(host, gangs, members)
    result = run.place(root, {})
    if result.ok and not result.any_scheduled:
        # (the framework needs one new member placed)
        result = dataclasses.replace(result, ok=False, reasons=[], wrapped=True)
    if result.ok:
        return _placed(host, gangs, pod, root, members, run, result, began)
    run.give_back()
    return _unplaced(host, gangs, pod, root, members, run, result, began, now)


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


def _placed(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    root: PodGroup,
    members: Mapping[str, list[Pod]],
    run: _Attempt,
    result: _Result,
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


def _unplaced(
    host: GangHost,
    gangs: Gangs,
    pod: Pod,
    root: PodGroup,
    members: Mapping[str, list[Pod]],
    run: _Attempt,
    result: _Result,
    began: float,
    now: float,
) -> CycleResult:
    """The root does not fit: workload-aware preemption, then every member is reported (its
    own failure, or the group's status when it fit alone), one waits in the queue for the rest."""
    from rulesched.scheduler.workload_preemption import ONGOING, PREFIX, GroupPreemption, preempt_for_group

    originals = {m.key: m for ms in members.values() for m in ms}
    status = result.message
    statuses = _complete(gangs, root, result)
    state = gangs.state(root.key)
    state.victims = [k for k in state.victims if host.store.pod_node(k) is not None]
    if result.error:
        preemption = None
    elif state.victims:  # its last preemption's victims are still leaving: wait for them
        preemption = GroupPreemption(PREFIX + ONGOING, code="Success")
    else:
        preemption = preempt_for_group(host, gangs, root, members, run)  # type: ignore[arg-type]
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
        state.victims = [v.key for v in preemption.victims]
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


def _within(result: CycleResult) -> None:
    """A member's cycle in a domain as upstream's in a placement: the nodes outside it (those the
    default rules' PodGroupTopology filter, first of the filters, rejected) are not among the
    nodes counted (``0/2 nodes are available`` in a rack of two)."""
    outside = result.reasons.pop(OUTSIDE_DOMAIN, 0)
    if not outside:
        return
    result.num_nodes -= outside
    result.evaluated = max(result.evaluated - outside, result.feasible)
    result.rejected_by = result.rejected_by - {"PodGroupTopology"}
    if result.filtered is not None:
        for node in [n for n, why in result.filtered.items() if OUTSIDE_DOMAIN in why]:
            del result.filtered[node]
            if result.unresolvable is not None:
                result.unresolvable.discard(node)
    explained = result.explanation
    if explained is not None:  # (explain's "lacking" and fixes read these: what the domain's nodes lack)
        gone = sum(g.nodes for g in explained.groups if g.reason == OUTSIDE_DOMAIN)
        failed = explained.failed
        result.explanation = dataclasses.replace(
            explained,
            evaluated=max(explained.evaluated - gone, 0),
            filtered=max(explained.filtered - gone, 0),
            groups=tuple(g for g in explained.groups if g.reason != OUTSIDE_DOMAIN),
            codes=tuple(c for c in explained.codes if c.code is not ReasonCode.GROUP_DOMAIN_MISMATCH),
            failed=None if failed is None else {n: w for n, w in failed.items() if OUTSIDE_DOMAIN not in w},
        )


def _joined(message: str, suffix: str) -> str:
    """A status's message with the post filter's appended (Status.AppendReason)."""
    return f"{message}, {suffix}" if message and suffix else message or suffix


def _appended(statuses: Mapping[str, _Result], key: str, suffix: str) -> str:
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


def _complete(gangs: Gangs, root: PodGroup, result: _Result) -> dict[str, _Result]:
    """Every group of the tree with its result (completeCompositePodGroupAlgorithmResultMap): one
    not evaluated, or one that fit under a parent that did not, takes its parent's."""
    out: dict[str, _Result] = {}

    def walk(group: PodGroup, parent: _Result | None) -> None:
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


def _detail(root: PodGroup, run: _Attempt, result: _Result, fit: int, placed: bool, outcome: str) -> GroupDetail:
    count = "minGroupCount" if root.composite else "minCount"
    policy = f"gang {count} {root.min_member}" if root.gang else "basic"
    members = sum(len(ms) for ms in run.members.values())
    before = sum(run.before.values())
    domain = dict(result.domain) if placed else {}
    return GroupDetail(root.ref, root.kind, policy, members, fit, before, placed, outcome, domain, tuple(run.trials))


def _fitting_leaves(result: _Result) -> list[_Result]:
    """successfulLeafResults: the leaves that fit, all their ancestors having fit."""
    if not result.ok:
        return []
    if not result.group.composite:
        return [result]
    return [leaf for child in result.children for leaf in _fitting_leaves(child)]


def _find(result: _Result, key: str) -> _Result | None:
    if result.group.key == key:
        return result
    for child in result.children:
        found = _find(child, key)
        if found is not None:
            return found
    return None


def waiting_state(gangs: Gangs, key: str) -> GroupState:
    return gangs.state(key)
