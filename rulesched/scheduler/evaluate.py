"""Filter these nodes for this pod; score these nodes for this pod.

The node-by-node forms of what a cycle does, for every caller that wants answers per node: the
cycle's ``explain`` runs and its fallback for scores beyond int64, the extender's filter and
prioritize verbs, reports. Totals come from :func:`rulesched.scheduler.scoring.weighted_totals`,
as in a cycle's table walk, so every face of rulesched ranks nodes alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.lang import CHECK_EVERY, BoundFilter, BoundRules, Failure
from rulesched.scheduler.framework import Code
from rulesched.scheduler.scoring import Matrix, score_matrix, weighted_totals


@dataclass
class Filtered:
    feasible: list[Any]  # nodes that pass every filter, in walk order
    looked: int  # nodes looked at (the walk stops once enough fit)
    reasons: Counter[str] = field(default_factory=Counter)  # reason -> nodes failing with it
    failed: dict[str, tuple[str, ...]] | None = None  # with explain: node -> its reasons
    unresolvable: set[str] | None = None  # with explain: the failed nodes preemption cannot help
    rejected_by: set[str] = field(default_factory=set)  # filters that failed a node, when reasons were collected


def filter_nodes(
    bound: BoundRules, nodes: Sequence[Any], start: int = 0, wanted: int | None = None, explain: bool = False
) -> Filtered:
    """Walk ``nodes`` round-robin from ``start`` until ``wanted`` fit (default: every node).
    Why nodes failed is collected when explaining, or when no node fits (the FitError message);
    otherwise the walk skips that work."""
    out = Filtered([], 0, failed={} if explain else None, unresolvable=set() if explain else None)
    if not nodes:
        return out
    reasons, failed, unresolvable, rejected_by = out.reasons, out.failed, out.unresolvable, out.rejected_by

    def record(node: Any, failure: Failure) -> None:
        rule, why = failure
        reasons.update(set(why))
        rejected_by.add(rule.name)
        if failed is not None:
            failed[node.name] = why
        if unresolvable is not None and rule.unresolvable(node):
            unresolvable.add(node.name)

    out.feasible, out.looked = bound.feasible(
        nodes, start, len(nodes) if wanted is None else wanted, record if explain else None
    )
    if not out.feasible and not explain:  # redone for the reasons, from the caches just filled
        reasons.update(failure_reasons(bound, nodes, rejected_by))
    return out


def failure_reasons(bound: BoundRules, nodes: Sequence[Any], rejected_by: set[str] | None = None) -> Counter[str]:
    """Reason -> how many of ``nodes`` fail with it (their first failing filter's reasons);
    the failing filters' names go into ``rejected_by`` if given."""
    reasons: Counter[str] = Counter()
    watch, left = bound.watch, CHECK_EVERY
    for node in nodes:
        left -= 1
        if not left:
            left = watch.tick()
        failure = bound.first_failure(node)
        if failure is not None:
            rule, why = failure
            reasons.update(set(why))
            if rejected_by is not None:
                rejected_by.add(rule.name)
    return reasons


def node_statuses(bound: BoundRules, nodes: Sequence[Any]) -> dict[str, Code]:
    """Node name -> status for each of ``nodes`` that fails a filter: UNSCHEDULABLE, or
    UNSCHEDULABLE_AND_UNRESOLVABLE when the first filter it fails says so for it (the
    ``unresolvable`` clause is evaluated here, on failing nodes only). Nodes that fit are left out."""
    # The same walk as failure_reasons', written twice on purpose: folded into one generator of
    # (node, failure) it cost 17% more CPU for failure_reasons and 5% for this (fastest of 31
    # runs, 5,000 failing nodes, answers memoised: 4.28 -> 5.02 ms; the FitError path of every
    # unschedulable cycle whose table kept no failures).
    out: dict[str, Code] = {}
    watch, left = bound.watch, CHECK_EVERY
    for node in nodes:
        left -= 1
        if not left:
            left = watch.tick()
        failure = bound.first_failure(node)
        if failure is not None:
            rule = failure[0]
            watch.rule = rule.name  # (its unresolvable clause)
            out[node.name] = status_of(rule, node)
    return out


class NodeStatuses(Mapping[str, Code]):
    """:func:`node_statuses` as an array over a snapshot's nodes (``codes[row]``: 0 the node
    fits, 1 Unschedulable, 2 UnschedulableAndUnresolvable), for callers that read it per row
    (preemption); a Mapping of the failing nodes' names for the others. ``first``, when the
    cycle's walk knew it: per row the index of the first filter the node failed (-1: none),
    in the filters named ``filters`` (the cycle's binding's, in its order), which preemption's
    dry runs read instead of asking again (:class:`rulesched.engine.dryrun.Known`)."""

    _CODES = (None, Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def __init__(
        self,
        codes: npt.NDArray[np.int8],
        nodes: Sequence[Any],
        rows: Mapping[str, int],
        first: npt.NDArray[np.intp] | None = None,
        filters: tuple[str, ...] = (),
    ) -> None:
        self.codes, self.nodes, self.rows = codes, nodes, rows
        self.first, self.filters = first, filters

    def __getitem__(self, name: str) -> Code:
        row = self.rows.get(name)
        found = self._CODES[self.codes[row]] if row is not None else None
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        nodes = self.nodes
        return (nodes[r].name for r in np.flatnonzero(self.codes).tolist())

    def __len__(self) -> int:
        return int(np.count_nonzero(self.codes))


def status_of(failed: BoundFilter, node: Any) -> Code:
    """The status of a node that fails the filter ``failed`` (its first failing one)."""
    return Code.UNSCHEDULABLE_AND_UNRESOLVABLE if failed.unresolvable(node) else Code.UNSCHEDULABLE


@dataclass
class Scored:
    totals: Matrix  # one weighted total per node, in the order given
    per_node: dict[str, dict[str, int]] | None = None  # with explain: node -> rule -> score, "total"


def score_nodes(bound: BoundRules, nodes: Sequence[Any], explain: bool = False) -> Scored:
    """Score ``nodes`` (the feasible ones: score built-ins read them as the cycle's PreScore
    set). With ``explain``, every rule's normalised score per node as well."""
    bound.ctx.feasible = nodes
    matrix = score_matrix(bound.score_vectors(nodes))
    if not explain:
        return Scored(weighted_totals(bound.scores, matrix))
    per_rule: list[Matrix] = []
    totals = weighted_totals(bound.scores, matrix, per_rule)
    per_node = {}
    for i, node in enumerate(nodes):
        entry = {s.name: int(values[i]) for s, values in zip(bound.scores, per_rule, strict=True)}
        entry["total"] = int(totals[i])
        per_node[node.name] = entry
    return Scored(totals, per_node)
