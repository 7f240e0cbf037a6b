"""Which PodDisruptionBudgets a preemption's victims would violate (filterPodsWithPDBViolation):
each budget found by a pod's labels through an index, instead of every budget tried on every pod
of every node a preemption dry-runs; the index, and what it found for each pod, kept for as long
as the store hands out the same tuple of budgets (it does until a budget changes), so attempt
after attempt reuses it.

Used by :mod:`rulesched.scheduler.preemption`: the victims' order, violating ones first
(:func:`put_back_orders`), and, where evictions keep budgets, which candidates the Eviction API
would refuse (:func:`eviction_refused`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang import NodeMemos
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.semantics.disruption import EvictionLedger
from rulesched.semantics.matching import label_selector_matches


class Budgets:
    """Which budgets may select a pod, found by its labels instead of trying every budget on
    every pod (a preemption tries thousands of pods against every budget of the cluster): each
    budget filed under its namespace and one of its matchLabels pairs (a pod has one value per
    key, so it meets each budget at most once), those with only expressions under their
    namespace alone. Budgets with no selector, or an empty one, select nothing here (as
    filterPodsWithPDBViolation skips them)."""

    __slots__ = ("_by_label", "_by_namespace", "_everything", "_selected", "pdbs")

    def __init__(self, pdbs: Sequence[PodDisruptionBudget]) -> None:
        self.pdbs = pdbs
        # pod key -> (its labels, the budgets selecting it): a pod's answer kept while its labels
        # are the same object (a pod is tried on many attempts; the index lives as long as the
        # cluster's budgets tuple does: see budgets_of)
        self._selected: dict[str, tuple[Mapping[str, str], list[int]]] = {}
        self._by_label: dict[tuple[str, str, str], list[int]] = {}
        self._by_namespace: dict[str, list[int]] = {}
        self._everything: dict[str, list[int]] = {}  # empty selectors, per namespace (see evicting)
        for i, pdb in enumerate(pdbs):
            selector = pdb.selector
            if selector is None:
                continue
            if selector.match_labels:
                key, value = selector.match_labels[0]
                self._by_label.setdefault((pdb.namespace, key, value), []).append(i)
            elif selector.match_expressions:
                self._by_namespace.setdefault(pdb.namespace, []).append(i)
            else:
                self._everything.setdefault(pdb.namespace, []).append(i)

    def selecting(self, pod: Pod) -> list[int]:
        """The indices of the budgets whose selector matches the pod."""
        labels = pod.labels
        known = self._selected.get(pod.key)
        if known is not None and known[0] is labels:
            return known[1]
        ns = pod.namespace
        found = [
            i for key, value in labels.items() for i in self._by_label.get((ns, key, value), ())
        ] + self._by_namespace.get(ns, [])
        chosen = [i for i in found if label_selector_matches(self.pdbs[i].selector, labels)]
        self._selected[pod.key] = (labels, chosen)
        return chosen

    def evicting(self, pod: Pod) -> list[PodDisruptionBudget]:
        """The budgets the Eviction API finds for the pod (eviction.go getPodDisruptionBudgets):
        those :meth:`selecting` it, and in policy/v1 those with an empty selector, which cover
        every pod of their namespace there (the scheduler's victim choice skips them)."""
        return [self.pdbs[i] for i in self.selecting(pod) + self._everything.get(pod.namespace, [])]


@dataclass
class _LastBudgets:
    """The index of the budgets tuple last seen: the store hands out the same tuple until a
    budget changes, so attempt after attempt reuses the index and what it found for each pod
    (a memo: the answers are the same as a new index's)."""

    entry: tuple[Sequence[PodDisruptionBudget], Budgets] | None = None


_LAST = _LastBudgets()


def budgets_of(pdbs: Sequence[PodDisruptionBudget]) -> Budgets:
    """The index of ``pdbs``: the last one built, while they are the same tuple."""
    entry = _LAST.entry
    if entry is None or entry[0] is not pdbs:
        # (one attribute, set whole: a reader on another thread sees one entry or the other)
        entry = _LAST.entry = (pdbs, Budgets(pdbs))
    return entry[1]


def split_by_pdb(
    pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget], budgets: Budgets | None = None
) -> tuple[list[Pod], list[Pod]]:
    """filterPodsWithPDBViolation: budgets count down as pods are considered, in order.
    ``budgets``: ``budgets_of(pdbs)``, when the caller splits many nodes' pods."""
    if not pdbs:
        return [], list(pods)
    budgets = budgets or Budgets(pdbs)
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    violating: list[Pod] = []
    safe: list[Pod] = []
    for pod in pods:
        violated = False
        if pod.labels:
            for i in budgets.selecting(pod):
                if pod.name in pdbs[i].disrupted_pods:
                    continue  # (its eviction went through already: not counted down twice)
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else safe).append(pod)
    return violating, safe


_PUT_BACK = ("preemption", "put back")  # a node memo key: a victims list's id -> its order
_PUT_BACK_KEPT = 8  # orders kept per node (one per set of priorities preemptors may evict there)


def put_back_orders(
    victims: Sequence[list[Pod]], nodes: Sequence[Any], pdbs: Sequence[PodDisruptionBudget], memos: NodeMemos | None
) -> tuple[list[list[Pod]], list[int]]:
    """Each node's potential ``victims`` in the order a dry run puts them back: those whose
    eviction would violate a budget first (the first ``violating[i]``), then the rest. Kept in
    the node's memo (``memos``, the rule set's) while its potential victims are the same list and
    the budgets the same tuple: the same order attempt after attempt (and the dry runs' per-pod
    values, kept beside the list they were read from, are found again)."""
    if not pdbs:
        return list(victims), [0] * len(victims)
    orders: list[list[Pod]] = []
    violating: list[int] = []
    budgets = budgets_of(pdbs)
    for node, potential in zip(nodes, victims, strict=True):
        memo = None if memos is None else (memos.values(node) or memos.start(node))
        kept = memo.setdefault(_PUT_BACK, {}) if memo is not None else {}
        hit = kept.get(id(potential))
        if hit is None or hit[0] is not potential or hit[1] is not pdbs:
            first, rest = split_by_pdb(potential, pdbs, budgets)
            hit = (potential, pdbs, first + rest, len(first))
            if len(kept) >= _PUT_BACK_KEPT:  # (lists made afresh each time, for pod groups: bounded)
                kept.clear()
            kept[id(potential)] = hit
        orders.append(hit[2])
        violating.append(hit[3])
    return orders, violating


def eviction_refused(victims: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]) -> bool:
    """Whether the Eviction API would refuse one of ``victims``, evicted one after another, as
    the store has the budgets (:class:`rulesched.semantics.disruption.EvictionLedger`: a victim
    it deletes without asking its budget, one not Ready its budget's policy lets go, a budget
    counted down by the victims before; a pod two budgets cover is refused, as are budgets the
    controller has not caught up with)."""
    if not pdbs:
        return False
    budgets = budgets_of(pdbs)
    ledger = EvictionLedger()
    return not all(ledger.allows(victim, budgets.evicting(victim)) for victim in victims)
