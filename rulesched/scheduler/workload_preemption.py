"""Workload-aware preemption (Kubernetes 1.36-1.37, DefaultPreemption's PodGroupPostFilter): a
pod group that does not fit preempts as a unit, across the cluster.

Upstream's PodGroupEvaluator (framework/preemption/podgrouppreemption.go), step by step:

1. The preemptor is the root group; its priority is the group's, its preemption policy the
   group's (when unset: Never if any member says Never, as with the PodGroupPreemptionPolicy
   gate off). ``Never``: ``not eligible due to preemptionPolicy=Never.``
2. A member nominated to a node where a lower-priority pod is terminating because a scheduler
   preempted it means a preemption is under way: the group waits for it (``ongoing preemption
   on nominated nodes``) and keeps its nominations.
3. The victims are units (:func:`victim_units`): a pod of a group whose disruption mode is
   ``all`` (1.36: ``PodGroup``) goes with every placed pod of its group (of the highest such
   ancestor of a composite tree); any other pod alone. A unit's priority is its root group's
   (a pod of no group: its own). Units of lower priority than the preemptor, whose every pod the
   ``preempt`` rules let the preemptor evict, are the potential victims. Beyond upstream, as
   for single-pod preemption: a unit holding a pod whose eviction a PodDisruptionBudget
   refused, while the refusal holds (``spared_victims``: rulesched.scheduler.removals), is none.
4. All of them are taken off the cluster and the group placed once more (the whole algorithm,
   placements included). If it still does not fit, nothing is evicted.
5. Otherwise the units are put back one by one — those whose eviction would violate a
   PodDisruptionBudget first, then the rest, most important first (MoreImportantVictim:
   priority, then composite over group over pod, then larger, then older) — and a unit stays
   when every member still fits its proposed node with it there; the rest are the victims.
   The members are nominated to their proposed nodes. Beyond upstream, where evictions keep
   budgets (the preemptor's ``budgets_refuse``): victims the Eviction API would refuse one of
   make the preemption futile, so nothing is evicted (``No preemption victims found without
   violating a PodDisruptionBudget``; the group is tried again when a budget changes), as a
   single pod's candidate with such victims is none.

The cluster is left as it was given. Beyond upstream: scheduler-plugins' gangs (minimum above
one) are units too, as for single-pod preemption (:func:`rulesched.scheduler.gang_preemption.whole_gangs`).
Next stage: :mod:`rulesched.scheduler.workload_results` evicts and nominates.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.budgets import eviction_refused
from rulesched.scheduler.gang import GangHost, Gangs
from rulesched.scheduler.preemption import VIOLATES_BUDGET
from rulesched.scheduler.victims import Unit, effective_priority, more_important, split_by_pdb, victim_units
from rulesched.scheduler.workload_placement import Attempt

PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
ONGOING = "ongoing preemption on nominated nodes"
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."
SUCCESS, UNSCHEDULABLE, UNRESOLVABLE = "Success", "Unschedulable", "UnschedulableAndUnresolvable"


class PreemptingHost(GangHost, Protocol):
    def fits_on(self, pod: Pod, node: str) -> bool: ...

    def victims_allowed(self, preemptor: Pod, candidates: Sequence[Pod]) -> set[str] | None: ...

    def spared_victims(self) -> Mapping[str, frozenset[str]]: ...


@dataclass(frozen=True)
class GroupPreemption:
    """What preemption found: its message (``pod group preemption: ...``), the victims, and
    each member's nominated node (none when nothing will be evicted)."""

    message: str
    victims: tuple[Pod, ...] = ()
    nominated: Mapping[str, str] = field(default_factory=dict)
    # for the metrics: the status code (Success, Unschedulable, UnschedulableAndUnresolvable; ""
    # when no evaluation ran), units preempted, budgets violated, the evaluation's seconds
    code: str = ""
    disruptions: int = 0
    violations: int = 0
    seconds: float = 0.0
    futile: bool = False  # the victims' evictions would be refused: tried again when a budget changes


def policy_of(root: PodGroup, members: Sequence[Pod]) -> str:
    """resolvePreemptionPolicy."""
    if root.preemption_policy:
        return root.preemption_policy
    return "Never" if any(m.preemption_policy == "Never" for m in members) else "PreemptLowerPriority"


def preempt_for_group(
    host: PreemptingHost, gangs: Gangs, root: PodGroup, members: Mapping[str, list[Pod]], run: Attempt
) -> GroupPreemption:
    """PodGroupEvaluator.Preempt for ``root`` (its attempt ``run`` given back): the victims and
    nominations, or why there are none. The store is left as it was given."""
    began = time.perf_counter()
    found = _preempt(host, gangs, root, members)
    return dataclasses.replace(found, seconds=time.perf_counter() - began)


def _preempt(host: PreemptingHost, gangs: Gangs, root: PodGroup, members: Mapping[str, list[Pod]]) -> GroupPreemption:
    flat = [m for ms in members.values() for m in ms]
    if not flat:
        return GroupPreemption(PREFIX + NO_VICTIMS, code=UNRESOLVABLE)
    if policy_of(root, flat) == "Never":
        return GroupPreemption(PREFIX + NOT_ELIGIBLE, code=UNSCHEDULABLE)
    store = host.store
    if _ongoing(host, gangs, root, flat):
        nominated = {m.key: m.nominated_node_name for m in flat if m.nominated_node_name}
        return GroupPreemption(PREFIX + ONGOING, (), nominated, code=SUCCESS)
    preemptor = min(flat, key=lambda p: p.key)
    if preemptor.preemption_policy != "PreemptLowerPriority":
        preemptor = dataclasses.replace(preemptor, preemption_policy="PreemptLowerPriority")
    running = [p for p in store.pods() if group_key(p) not in members]
    # (the rules see a group's pod at its group's priority, as upstream's victims carry it)
    shown = [
        dataclasses.replace(p, priority=effective_priority(p, gangs)) if p.scheduling_group else p for p in running
    ]
    allowed = host.victims_allowed(preemptor, shown)
    if allowed is None:
        return GroupPreemption(PREFIX + NOT_ELIGIBLE, code=UNSCHEDULABLE)
    # (a unit holding a pod whose eviction a budget refused is spared whole, as the per-pod
    # preemption spares such a pod: rulesched.scheduler.removals)
    spared = {key for keys in host.spared_victims().values() for key in keys}
    potential = [
        u
        for u in victim_units(running, gangs)
        if u.priority < root.priority and all(p.key in allowed and p.key not in spared for p in u.pods)
    ]
    if not potential:
        return GroupPreemption(PREFIX + NO_VICTIMS, code=UNRESOLVABLE)
    removed: dict[str, Pod] = {}
    for unit in potential:
        for pod in unit.pods:
            gone = store.remove_pod(pod.key, forget=False)
            if gone is not None:
                removed[pod.key] = gone
    try:
        trial = Attempt(host, gangs, members)
        result = trial.place(root, {})
        if not (result.ok and result.any_scheduled):
            trial.give_back()
            message = result.message or "pod group is unschedulable"
            return GroupPreemption(PREFIX + message, code="Error" if result.error else UNSCHEDULABLE)
        assignments = list(trial.assumed)
        trial.give_back()
        potential.sort(key=more_important)
        violating, safe = split_by_pdb(potential, store.pdbs)
        chosen: list[Unit] = []
        violations = 0
        breaking = {id(u) for u in violating}
        for unit in (*violating, *safe):
            for pod in unit.pods:
                if pod.key in removed:
                    store.add_pod(removed.pop(pod.key))
            if _all_fit(host, assignments):
                continue  # reprieved
            for pod in unit.pods:
                gone = store.remove_pod(pod.key, forget=False)
                if gone is not None:
                    removed[pod.key] = gone
            chosen.append(unit)
            violations += id(unit) in breaking
    finally:
        for pod in removed.values():
            store.add_pod(pod)
    chosen.sort(key=more_important)
    victims = tuple(p for unit in chosen for p in unit.pods)
    if host.refuses_evictions(preemptor) and eviction_refused(victims, store.pdbs):
        return GroupPreemption(PREFIX + VIOLATES_BUDGET, code=UNSCHEDULABLE, futile=True)
    message = f"{PREFIX}found a placement for podgroup, preempting {len(victims)} victims"
    disruptions = sum(1 for unit in chosen if unit.kind != "Pod")
    nominated = {p.key: node for p, node in assignments}
    return GroupPreemption(message, victims, nominated, SUCCESS, disruptions, violations)


def _all_fit(host: PreemptingHost, assignments: Sequence[tuple[Pod, str]]) -> bool:
    """Whether every member still fits its proposed node, each assumed for the next (upstream's
    reprieveVictim); nothing stays assumed."""
    store = host.store
    assumed: list[str] = []
    try:
        for pod, node in assignments:
            if not host.fits_on(pod, node):
                return False
            store.assume(pod, node)
            assumed.append(pod.key)
        return True
    finally:
        for key in reversed(assumed):
            store.forget(key)


def _ongoing(host: PreemptingHost, gangs: Gangs, root: PodGroup, members: Sequence[Pod]) -> bool:
    """isOngoingPreemption: a member's nominated node holds a lower-priority pod leaving because
    a scheduler preempted it."""
    store = host.store
    for node in {m.nominated_node_name for m in members if m.nominated_node_name}:
        view = store.node_view(node)
        if view is None:
            continue
        for pod in view.pods:
            if pod.deleting and pod.preempted_by_scheduler and effective_priority(pod, gangs) < root.priority:
                return True
    return False
