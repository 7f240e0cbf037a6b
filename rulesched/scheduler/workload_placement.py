"""Step 3 of a pod group's attempt (:mod:`rulesched.scheduler.workloads`): the placement
algorithm, as kube-scheduler's pod group cycle runs it (podGroupSchedulingPlacementAlgorithm and
its default algorithms, schedule_one_podgroup.go).

:class:`Attempt` places a tree on the store: a PodGroup's pending members one after another, each
running the ordinary cycle with the members placed before it assumed, until its ``minCount`` is
met with every member tried, or cannot be met any more (:func:`feasibility`, GangScheduling's
PlacementFeasible); a composite's children one after another, each placed whole or given back,
until ``minGroupCount`` children fit or cannot. A group with a topology constraint is tried in
each domain of its key in turn (:mod:`rulesched.scheduler.placement`), every trial given back,
and the best domain that fits is assumed again. What it finds is a :class:`GroupResult` tree,
its members still assumed when the root fits.
Next stage: :mod:`rulesched.scheduler.workload_results` binds, or preempts and reports.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler import placement
from rulesched.scheduler.framework import Code, CycleResult, Trial
from rulesched.scheduler.gang import GangHost, Gangs
from rulesched.scheduler.reasons import ReasonCode

UNSCHEDULABLE = "pod group is unschedulable"  # errPodGroupUnschedulable
OUTSIDE_DOMAIN = "node(s) didn't match the pod group's topology domain"  # (rules/default.rules)


@dataclass
class GroupResult:
    """One group's outcome in one evaluation (upstream's podGroupAlgorithmResult)."""

    group: PodGroup
    ok: bool
    reasons: list[str] = field(default_factory=list)
    wrapped: bool = False  # the status carries errPodGroupUnschedulable (fwk.Status.WithError)
    error: str = ""  # a SchedulerError's message
    any_scheduled: bool = False
    placed: list[tuple[Pod, str]] = field(default_factory=list)  # still assumed (leaf, when ok)
    fit: int = 0  # members that fit before the leaf was given up (explanations: how close it came)
    children: list[GroupResult] = field(default_factory=list)
    domain: Mapping[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """Status.Message(): the error (when wrapped) then the reasons."""
        return self.error or ", ".join([UNSCHEDULABLE, *self.reasons] if self.wrapped else self.reasons)

    @property
    def as_error(self) -> str:
        """Status.AsError(): the wrapped error alone, else the reasons."""
        return self.error or (UNSCHEDULABLE if self.wrapped else ", ".join(self.reasons))

    def leaves(self) -> list[GroupResult]:
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


class Attempt:
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
    def place(self, group: PodGroup, domain: Mapping[str, str]) -> GroupResult:
        """podGroupSchedulingPlacementAlgorithm: a group without a topology constraint is placed
        in its parent's placement; one with a constraint is tried in each domain, every trial
        given back, and the best that fits is assumed again."""
        if not group.topology:
            return self._default(group, domain)
        key = group.topology[0]
        nodes = self.host.store.node_views()
        required, problem = placement.placed_domain(self._placed_nodes(group), key)
        if problem:
            return GroupResult(group, False, error=problem)
        tried = placement.placements(nodes, key, domain, required)
        if not tried:
            return GroupResult(
                group, False, [f"0/0 placements are available: no node within {dict(domain)} has label {key}"]
            )
        first: GroupResult | None = None
        first_seen: dict[str, CycleResult] = {}
        fits: list[tuple[placement.Placement, GroupResult, list[tuple[Pod, str]], dict[str, CycleResult]]] = []
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

    def _default(self, group: PodGroup, domain: Mapping[str, str]) -> GroupResult:
        if group.composite:
            return self._composite(group, domain)
        return self._leaf(group, domain)

    def _leaf(self, group: PodGroup, domain: Mapping[str, str]) -> GroupResult:
        """podGroupSchedulingDefaultAlgorithm for one PodGroup."""
        members = self.members.get(group.key, [])
        scheduled, remaining = self.before.get(group.key, 0), len(members)
        state, message = feasibility(group.min_member, scheduled, remaining)
        if state == "no":  # (before any member: the status wrapped)
            return GroupResult(group, False, [message], wrapped=True, domain=domain)
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
            return GroupResult(group, False, [message], wrapped=state == "wait", domain=domain, fit=len(placed))
        return GroupResult(group, True, any_scheduled=any_scheduled, placed=placed, domain=domain, fit=len(placed))

    def _composite(self, group: PodGroup, domain: Mapping[str, str]) -> GroupResult:
        """compositePodGroupSchedulingDefaultAlgorithm: the children one after another, each
        placed whole or given back, until minGroupCount of them fit or cannot."""
        children = self.gangs.children(group.key)
        scheduled, remaining = 0, len(children)
        state, message = feasibility(group.min_member, scheduled, remaining)
        if state == "no":
            return GroupResult(group, False, [message], domain=domain)
        mark = len(self.assumed)
        results: list[GroupResult] = []
        any_scheduled = False
        for child in children:
            result = self.place(child, domain)
            results.append(result)
            if result.error:
                self._back_to(mark)
                message = f"composite pod group evaluation failed due to child error: {result.error}"
                return GroupResult(group, False, error=message, children=results, domain=domain)
            any_scheduled = any_scheduled or result.any_scheduled
            remaining -= 1
            scheduled += result.ok
            state, message = feasibility(group.min_member, scheduled, remaining)
            if state == "no":
                break
        if state != "ok":  # (a composite's status is wrapped only when still waiting)
            self._back_to(mark)
            return GroupResult(group, False, [message], wrapped=state == "wait", children=results, domain=domain)
        return GroupResult(group, True, any_scheduled=any_scheduled, children=results, domain=domain)

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
