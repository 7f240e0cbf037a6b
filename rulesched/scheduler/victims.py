"""Victims of preemption as units (upstream's Victim, framework/preemption/types.go and util.go):
the pods evicted together, the priority they count at, and which unit is more important.

A pod of a workload API group whose disruption mode is ``all`` (the highest such group of a
composite tree) is evicted with every placed pod of that group; so is a member of a
scheduler-plugins gang with a minimum above one (beyond upstream, which does not know those);
any other pod alone. A workload API pod counts at its root group's priority (GetPodPriority).
Next stage: :mod:`rulesched.scheduler.workload_preemption` and
:func:`rulesched.scheduler.gang_preemption.whole_gangs` choose among them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rulesched.model import Pod, PodDisruptionBudget
from rulesched.model.groups import PodGroup, group_key
from rulesched.semantics.matching import label_selector_matches

if TYPE_CHECKING:
    from rulesched.scheduler.gang import Gangs

_RANK = {"CompositePodGroup": 3, "PodGroup": 2, "Pod": 1}


@dataclass(frozen=True)
class Unit:
    """A victim: pods evicted together (upstream's Victim)."""

    pods: tuple[Pod, ...]
    priority: int
    kind: str  # Pod, PodGroup, CompositePodGroup (the unit's type, for importance)

    @property
    def started(self) -> float:
        return min((p.start_time or math.inf) for p in self.pods)


def effective_priority(pod: Pod, gangs: Gangs) -> int:
    """GetPodPriority: a pod of a workload API group counts at its root group's priority."""
    group = gangs.groups.get(group_key(pod) or "") if pod.scheduling_group else None
    if group is None:
        return pod.priority
    root, _ = gangs.root_of(group)
    return root.priority


def highest_all(pod: Pod, gangs: Gangs) -> PodGroup | None:
    """getHighestAllAncestor: the highest group above the pod whose disruption mode is all."""
    if not pod.scheduling_group:
        group = gangs.groups.get(group_key(pod) or "")
        return group if group is not None and group.min_member > 1 else None  # (scheduler-plugins' gangs)
    group = gangs.groups.get(group_key(pod) or "")
    found = None
    for _ in range(4):
        if group is None:
            break
        if group.disruption_all:
            found = group
        group = gangs.groups.get(group.parent) if group.parent else None
    return found


def victim_units(pods: Sequence[Pod], gangs: Gangs) -> list[Unit]:
    """The cluster's pods as victims (getCrossNodesVictims), each pod once."""
    units: list[Unit] = []
    seen: set[str] = set()
    by_group: dict[str, list[Pod]] = {}
    for pod in pods:
        key = group_key(pod)
        if key is not None:
            by_group.setdefault(key, []).append(pod)
    for pod in pods:
        whole = highest_all(pod, gangs)
        if whole is None:
            kind = "PodGroup" if pod.scheduling_group else "Pod"
            units.append(Unit((pod,), effective_priority(pod, gangs), kind))
            continue
        if whole.key in seen:
            continue
        seen.add(whole.key)
        members = [p for leaf in gangs.leaves(whole) for p in by_group.get(leaf.key, ())]
        units.append(Unit(tuple(members) or (pod,), effective_priority(pod, gangs), whole.kind))
    return units


def more_important(unit: Unit) -> tuple[int, int, int, float]:
    """A sort key, most important first (MoreImportantVictim)."""
    return (-unit.priority, -_RANK[unit.kind], -len(unit.pods), unit.started)


def split_by_pdb(units: Sequence[Unit], pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[Unit], list[Unit]]:
    """FilterVictimsWithPDBViolation: a unit violates when any of its pods does, budgets counted
    down pod by pod in order."""
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[Unit] = []
    safe: list[Unit] = []
    for unit in units:
        violates = False
        for pod in unit.pods:
            if not pod.labels:
                continue
            for i, pdb in enumerate(pdbs):
                selector = pdb.selector
                if pdb.namespace != pod.namespace or selector is None:
                    continue
                if not (selector.match_labels or selector.match_expressions):
                    continue
                if not label_selector_matches(selector, pod.labels):
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violates = True
        (violating if violates else safe).append(unit)
    return violating, safe


def order_key(pods: Sequence[Pod], gangs: Gangs) -> Callable[[Pod], tuple[int, int, int, float]]:
    """Single-pod preemption's victim order when pod groups are about: each pod ranked as its
    unit (MoreImportantVictim), most important first, for the pods on nodes ``pods``."""
    units = {p.key: u for u in victim_units(pods, gangs) for p in u.pods}

    def key(pod: Pod) -> tuple[int, int, int, float]:
        unit = units.get(pod.key)
        return more_important(unit) if unit is not None else (-pod.priority, -1, -1, pod.start_time or math.inf)

    return key
