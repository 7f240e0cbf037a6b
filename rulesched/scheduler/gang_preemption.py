"""Preemption for pod groups: victims so that the whole group fits, or nothing is evicted; and
gangs as victims, whole or not at all.

For a group: after an attempt placed fewer than its minimum (:func:`rulesched.scheduler.gang.attempt`;
the members placed are still assumed), each member that fit nowhere runs the scheduler's
preemption (:func:`rulesched.scheduler.preemption.preempt`: the ``preempt`` rules, PDBs,
upstream's choice of node) against the store as the attempt left it, one after another; the
victims each one chose are taken off the store for the next one's dry run and the member is
assumed on its node. If the minimum is then reached, the store is put back as it was (nothing
of the dry run stays), the victims are evicted and every member placed is nominated to its node
(upstream's preemptor waits for its victims to leave; the group's next attempt, at once, tries
those nodes first). If not, the store is put back and nothing is evicted.

For victims: a victim that is a member of a known scheduler-plugins group with a minimum above
one, or of a workload API group in disruption mode ``all``, takes its unit's other placed
members with it (:func:`whole_gangs`); if any of them may not be preempted by the preemptor (its
priority is not lower), the preemption evicts nobody; nor, where evictions keep budgets, if the
Eviction API would refuse one of the members taken along (:func:`widened_refused`: the
preemption checked the victims it chose, not those the gang adds).
Next stage: the scheduler evicts and nominates (:mod:`rulesched.scheduler.scheduler`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.groups import PodGroup, group_key
from rulesched.scheduler.budgets import eviction_refused
from rulesched.scheduler.framework import CycleResult, Preemption
from rulesched.scheduler.victims import effective_priority, highest_all

if TYPE_CHECKING:
    from rulesched.scheduler.gang import Gangs

GANG_NOT_PREEMPTIBLE = "preemption: a victim's gang has members this pod may not preempt."
GANG_VIOLATES_BUDGET = "preemption: a victim's gang has members whose eviction a PodDisruptionBudget refuses."


class GroupPreemptor(Protocol):
    store: ClusterStore
    gangs: Gangs

    def preempt_member(self, pod: Pod) -> Preemption:
        """The scheduler's preemption for ``pod`` on the store as it is now (changes nothing)."""
        ...

    def group_of(self, pod: Pod) -> PodGroup | None: ...

    def refuses_evictions(self, pod: Pod) -> bool:
        """Whether ``pod``'s victims go through the Eviction API, which refuses what a budget
        forbids (its profile's ``budgets_refuse``)."""
        ...


@dataclass(frozen=True)
class GroupPreemption:
    """Members and their nominated nodes, and the pods to evict (whole gangs)."""

    nominated: tuple[tuple[Pod, str], ...]
    victims: tuple[Pod, ...]


def whole_gangs(host: GroupPreemptor, victims: Sequence[Pod], preemptor: Pod) -> list[Pod] | None:
    """The victims with the rest of their units' placed pods (a scheduler-plugins gang with a
    minimum above one; the workload API's groups in disruption mode ``all``:
    :func:`rulesched.scheduler.victims.highest_all`); None when one of those may not be preempted
    by ``preemptor`` (priority, a workload API pod's its group's, not lower): then nothing may be
    evicted."""
    gangs = host.gangs
    out = {v.key: v for v in victims}
    if not gangs.groups:
        return list(out.values())
    units = {u.key: u for v in victims if (u := highest_all(v, gangs)) is not None}
    if units:
        keys = {leaf.key for u in units.values() for leaf in gangs.leaves(u)}
        for pod in host.store.pods():
            if group_key(pod) in keys and pod.key not in out:
                if effective_priority(pod, gangs) >= preemptor.priority:
                    return None
                out[pod.key] = pod
    return list(out.values())


def widened_refused(host: GroupPreemptor, chosen: Sequence[Pod], whole: Sequence[Pod], preemptor: Pod) -> bool:
    """Whether the victims ``whole_gangs`` widened ``chosen`` to would have an eviction refused
    (where ``preemptor``'s evictions keep budgets): the gangs' members taken along were not
    among the candidates the preemption checked against the budgets."""
    return len(whole) > len(chosen) and host.refuses_evictions(preemptor) and eviction_refused(whole, host.store.pdbs)


def preempt_for_group(
    host: GroupPreemptor,
    group: PodGroup,
    before: int,
    placed: Sequence[Pod],
    failed: Sequence[tuple[Pod, CycleResult]],
) -> GroupPreemption | None:
    """Victims so that at least ``group.min_member`` members fit (``before`` bound already,
    ``placed`` assumed by the attempt, ``failed`` fit nowhere), or None. The store is left as
    it was given."""
    removed: list[Pod] = []
    assumed: list[Pod] = []
    nominated: list[tuple[Pod, str]] = []
    victims: dict[str, Pod] = {}
    count = before + len(placed)
    try:
        for member, _ in failed:
            if count >= group.min_member:
                break
            outcome = host.preempt_member(member)
            if outcome.nominated is None:
                continue
            whole = whole_gangs(host, outcome.victims, member)
            if whole is None or widened_refused(host, outcome.victims, whole, member):
                continue
            for victim in whole:
                gone = host.store.remove_pod(victim.key, forget=False)
                if gone is not None:
                    removed.append(gone)
                victims[victim.key] = victim
            host.store.assume(member, outcome.nominated)
            assumed.append(member)
            nominated.append((member, outcome.nominated))
            count += 1
    finally:
        for member in assumed:
            host.store.forget(member.key)
        for pod in removed:
            host.store.add_pod(pod)
    if count < group.min_member or not victims:
        return None
    return GroupPreemption(tuple(nominated), tuple(victims.values()))
