"""A cycle's explanation for reports (``rulesched simulate --explain``), from the cycle's own walk.

The cycle picks its node exactly as it does unexplained (the same table walk, the same tie
draw), then, with ``SchedulerSettings.explanation``, :func:`explain_walk` reads what that walk
left, before the table lets go of its snapshot:

- the nodes filtered out are the walk's window (the nodes it looked at, in walk order) less the
  feasible rows; which filter each failed first comes from the table
  (:meth:`rulesched.engine.table.NodeTable.first_failing`: shared and column answers read,
  not recomputed), then that filter's reasons and ``unresolvable`` clause node by node, as
  ``--explain`` always gave them; a node that fits alone but not with its nominated pods has
  the reasons it fails for with them;
- scores are the walk's own score matrix, normalised and totalled by the one function
  (:func:`rulesched.scheduler.scoring.weighted_totals`), each rule's column kept.

What is kept is compact (:class:`rulesched.scheduler.framework.Explanation`): reasons grouped,
with a node count and the first :data:`NAMED` names, and the :data:`BEST` best scored nodes;
every node's reasons and scores only with ``EXPLAIN_FULL``. The cycle times this apart
(``CycleResult.explain_seconds``), so a run's scheduling time leaves it out.
Next stage: :mod:`rulesched.simulate.report` renders it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine import KnownFailures, NodeTable, Rows, TableOverflow, unique_codes
from rulesched.lang import BoundRules, RuleSet
from rulesched.scheduler.framework import Explanation, ReasonGroup, ScoredNode
from rulesched.scheduler.nominator import ReservedCheck
from rulesched.scheduler.reasons import ReasonCode, Tally, classify
from rulesched.scheduler.scoring import Matrix, weighted_totals

NAMED = 30  # filtered nodes named per reason (and unresolvable ones), in walk order
BEST = 10  # scored nodes kept, best first (every one with EXPLAIN_FULL)
TERM_NODES = 3  # of them, those with their scores' terms (the lets they read; EXPLAIN_FULL): the table's columns


class _Groups:
    """Filtered nodes, counted by reason as they come (in walk order). ``codes_only``: only the
    reasons as codes are wanted (a diagnosis: ``SchedulerSettings.diagnose`` without
    ``explanation``), so rows counted together (:func:`_add_alike`) leave the reason groups and
    the nodes' names out."""

    def __init__(self, full: bool, pod: Any = None, codes_only: bool = False) -> None:
        self.groups: dict[str, list[Any]] = {}  # reason -> [nodes, unresolvable, names, values seen]
        # the reasons as codes (rulesched.scheduler.reasons), with each one's nearest shortfall
        self.pod = pod
        self.tally = Tally()
        self.filtered = 0
        self.unresolvable = 0
        self.unresolvable_names: list[str] = []
        self.failed: dict[str, tuple[str, ...]] | None = {} if full else None
        self.unresolvable_nodes: set[str] | None = set() if full else None
        self.codes_only = codes_only and not full

    def add(
        self,
        name: str,
        reasons: tuple[str, ...],
        unresolvable: bool,
        values: tuple[str, ...] = (),
        rule: str = "",
        node: Any = None,
    ) -> None:
        self.filtered += 1
        if node is not None and self.pod is not None:
            self.tally.add_node(rule, reasons, self.pod, node, unresolvable)
        groups = self.groups
        shown = ", ".join(values)
        for reason in reasons if len(reasons) == 1 else dict.fromkeys(reasons):
            group = groups.get(reason)
            if group is None:
                group = groups[reason] = [0, 0, [], {}]
            group[0] += 1
            if shown and len(group[3]) < NAMED:
                group[3][shown] = None
            if unresolvable:
                group[1] += 1
            if len(group[2]) < NAMED:
                group[2].append(name)
        if unresolvable:
            self.unresolvable += 1
            if len(self.unresolvable_names) < NAMED:
                self.unresolvable_names.append(name)
            if self.unresolvable_nodes is not None:
                self.unresolvable_nodes.add(name)
        if self.failed is not None:
            self.failed[name] = reasons

    def explanation(
        self, evaluated: int, rules: tuple[str, ...], scored: int, best: tuple[ScoredNode, ...]
    ) -> Explanation:
        groups = tuple(
            ReasonGroup(reason, count, unresolvable, tuple(names), tuple(values))
            for reason, (count, unresolvable, names, values) in sorted(
                self.groups.items(), key=lambda item: (-item[1][0], item[0])
            )
        )
        return Explanation(
            evaluated,
            self.filtered,
            groups,
            self.unresolvable,
            tuple(self.unresolvable_names),
            scored,
            rules,
            best,
            self.failed,
            None if self.unresolvable_nodes is None else frozenset(self.unresolvable_nodes),
            self.tally.reasons(),
        )


def explain_walk(
    table: NodeTable,
    window: Rows,
    feasible: Rows,
    matrix: Matrix | None,
    chosen: str | None,
    check: ReservedCheck | None,
    full: bool,
    known: KnownFailures | None = None,
    codes_only: bool = False,
) -> Explanation:
    """The explanation of a table walk that looked at ``window`` (rows in walk order) and found
    ``feasible`` (scored as ``matrix`` when the cycle scored them; else scored here), choosing
    ``chosen``. ``check``: the nominations the pod had to leave room for. ``known``: what the
    walk learned of its failing rows when it found none (their filters, reasons, unresolvable).
    ``codes_only``: the reasons as codes are what is read (a diagnosis, for the FailedScheduling
    event's annotation and the metrics): with ``known``, no reason groups nor names."""
    bound = table.bound
    failed = window[~np.isin(window, feasible)] if len(feasible) else window
    groups = _Groups(full, bound.ctx.pod, codes_only)
    if known is not None and not len(feasible):
        _add_known(groups, table, known, failed, check)
        return groups.explanation(len(window), tuple(s.name for s in bound.scores), 0, ())
    filters = bound.filters
    add = groups.add
    for row, index in zip(failed.tolist(), table.first_failing(failed).tolist(), strict=True):
        node = table.node(row)
        if index >= 0:
            f = filters[index]
            add(node.name, f.reasons(node), bool(f.unresolvable(node)), bound.domain_values(f.name, node), f.name, node)
        elif check is not None:  # fits on its own, not with the pods nominated to it
            status = check.failure(node.name)
            if status is not None:  # (reported resolvable, as the cycle's message counts it)
                add(node.name, status.reasons, False, (), status.rule, node)
    rules = tuple(s.name for s in bound.scores)
    if not len(feasible):
        return groups.explanation(len(window), rules, 0, ())
    if matrix is None:
        try:
            matrix = table.vectors(feasible)
        except TableOverflow:  # (a score beyond int64: the cycle took the per-node path instead)
            return groups.explanation(len(window), rules, 0, ())
    rows = feasible.tolist()
    best = _best(bound, matrix, lambda i: table.node(rows[i]), chosen, full)
    return groups.explanation(len(window), rules, len(rows), best)


def _add_known(
    groups: _Groups, table: NodeTable, known: KnownFailures, failed: Rows, check: ReservedCheck | None
) -> None:
    """Add the ``failed`` rows (walk order) from what the walk learned: each one's first failing
    filter, reasons and unresolvable answer as the walk's groups hold them, as the loop of
    :func:`explain_walk` would ask them node by node. Rows alike (the same filter, reasons and
    unresolvable answer) are added together (:func:`_add_alike`) unless every row's reasons are
    kept (``EXPLAIN_FULL``) or a failing filter reads domain aggregates (their values are each
    node's own)."""
    bound = table.bound
    group_of, position = known.where(failed)
    if (
        groups.failed is None
        and groups.pod is not None
        and not any(bound.reads_domains(g.filter.name) for g in known.failed)
    ):
        _add_alike(groups, table, known, failed, group_of, position, check)
        return
    reasons = [(r.codes.tolist(), r.reasons) for r in known.reasons]
    unresolvable = [known.unresolvable(i).tolist() for i in range(len(known.failed))]
    names = [g.filter.name for g in known.failed]
    add = groups.add
    for row, i, at in zip(failed.tolist(), group_of.tolist(), position.tolist(), strict=True):
        node = table.node(row)
        if i >= 0:
            codes, distinct = reasons[i]
            name = names[i]
            add(node.name, distinct[codes[at]], unresolvable[i][at], bound.domain_values(name, node), name, node)
        elif check is not None:  # fits on its own, not with the pods nominated to it
            status = check.failure(node.name)
            if status is not None:  # (reported resolvable, as the cycle's message counts it)
                add(node.name, status.reasons, False, (), status.rule, node)


def _add_alike(
    groups: _Groups,
    table: NodeTable,
    known: KnownFailures,
    failed: Rows,
    group_of: npt.NDArray[np.intp],
    position: npt.NDArray[np.intp],
    check: ReservedCheck | None,
) -> None:
    """:func:`_add_known` for rows sorted into kinds (filter, reasons, unresolvable), each kind
    counted at once: what :meth:`_Groups.add` would make of its rows one by one, the names
    still the first :data:`NAMED` in walk order and each reason's nearest node the first in
    walk order with the smallest shortfall."""
    kinds = np.full(len(failed), -1, dtype=np.intp)
    about: list[tuple[str, tuple[str, ...], bool]] = []  # kind -> (rule, reasons, unresolvable)
    for i, g in enumerate(known.failed):
        mine = group_of == i
        if not mine.any():
            continue
        at = position[mine]
        key = known.reasons[i].codes[at] * 2 + known.unresolvable(i)[at]
        distinct, inverse = unique_codes(key)
        kinds[mine] = len(about) + inverse
        about.extend((g.filter.name, known.reasons[i].reasons[k // 2], bool(k % 2)) for k in distinct.tolist())
    if check is not None:  # rows that fit on their own, not with the pods nominated to them
        loose: dict[tuple[str, tuple[str, ...]], int] = {}
        for j in np.flatnonzero(group_of < 0).tolist():
            status = check.failure(table.node(int(failed[j])).name)
            if status is not None:  # (reported resolvable, as the cycle's message counts it)
                key2 = (status.rule, tuple(status.reasons))
                if key2 not in loose:
                    loose[key2] = len(about)
                    about.append((status.rule, key2[1], False))
                kinds[j] = loose[key2]
    counted = kinds >= 0
    groups.filtered += int(counted.sum())
    order = np.argsort(kinds, kind="stable")  # each kind's rows together, in walk order
    bounds = np.searchsorted(kinds[order], np.arange(len(about) + 1))
    rows_of = [order[bounds[k] : bounds[k + 1]] for k in range(len(about))]  # positions in walk order
    codes_only = groups.codes_only  # (no reason groups nor names then: the codes alone are read)

    def name(at: int) -> str:
        return str(table.node(int(failed[at])).name)

    def first(positions: list[npt.NDArray[np.intp]]) -> list[str]:
        joined = np.sort(np.concatenate(positions)) if len(positions) > 1 else positions[0]
        return [name(at) for at in joined[:NAMED].tolist()]

    by_reason: dict[str, list[Any]] = {}  # reason -> [nodes, unresolvable nodes, [positions]]
    by_message: dict[tuple[str, str], list[Any]] = {}  # (rule, message) -> [nodes, unresolvable, [positions]]
    unresolvable_at: list[npt.NDArray[np.intp]] = []
    for k, (rule, reasons, unresolvable) in enumerate(about):
        at, count = rows_of[k], len(rows_of[k])
        for reason in dict.fromkeys(reasons):
            for entry in (by_message.setdefault((rule, reason), [0, 0, []]),) + (
                () if codes_only else (by_reason.setdefault(reason, [0, 0, []]),)
            ):
                entry[0] += count
                entry[1] += count if unresolvable else 0
                entry[2].append(at)
        if unresolvable:
            unresolvable_at.append(at)
    for reason, (count, unresolvable, positions) in by_reason.items():
        group = groups.groups.get(reason)
        if group is None:
            group = groups.groups[reason] = [0, 0, [], {}]
        group[0] += count
        group[1] += unresolvable
        group[2] = (group[2] + first(positions))[:NAMED]
    if unresolvable_at:
        groups.unresolvable += sum(len(a) for a in unresolvable_at)
        if not codes_only:
            groups.unresolvable_names = (groups.unresolvable_names + first(unresolvable_at))[:NAMED]
    _add_counted(groups, table, known, failed, by_message)


def _add_counted(
    groups: _Groups,
    table: NodeTable,
    known: KnownFailures,
    failed: Rows,
    by_message: dict[tuple[str, str], list[Any]],
) -> None:
    """Each (rule, message)'s rows (positions into ``failed``, walk order) into the tally: its
    code, node counts, and the first node in walk order with the smallest shortfall."""
    pod = groups.pod
    for (rule, message), (count, unresolvable, positions) in by_message.items():
        why = classify(rule, message)
        short = why.resource if why.code in (ReasonCode.INSUFFICIENT_RESOURCE, ReasonCode.TOO_MANY_PODS) else ""
        joined = np.sort(np.concatenate(positions)) if len(positions) > 1 else positions[0]
        if not short or short == "pods":  # (pods: 1 short everywhere) the first node in walk order
            lack, at = (1000 if short else None), int(joined[0])
        else:
            lacks = pod.requests.get(short, 0) - known.free(short, failed[joined])
            best = int(np.argmin(lacks))  # (the first of the smallest)
            lack, at = int(lacks[best]), int(joined[best])
        groups.tally.add_counted(why, count, unresolvable, lack, str(table.node(int(failed[at])).name))


def _best(
    bound: BoundRules, matrix: Matrix, node_of: Callable[[int], Any], chosen: str | None, full: bool
) -> tuple[ScoredNode, ...]:
    """The best :data:`BEST` scored nodes (every one when ``full``), best first; ``node_of``
    gives the node of each of the matrix's rows (asked only of the candidates)."""
    per_rule: list[Matrix] = []
    totals = weighted_totals(bound.scores, matrix, per_rule)
    count = len(totals)
    if full or count <= BEST or totals.dtype == object:
        candidates = list(range(count))
    else:  # every node tied with the BEST-th best total, then the order below picks among them
        threshold = np.partition(totals, count - BEST)[count - BEST]
        candidates = np.flatnonzero(totals >= threshold).tolist()
    values = totals.tolist()  # (Python ints: a numpy scalar per comparison costs more)
    nodes = {i: node_of(i) for i in candidates}
    names = {i: node.name for i, node in nodes.items()}
    candidates.sort(key=lambda i: (-values[i], names[i] != chosen, names[i]))
    kept = candidates[: count if full else BEST]
    # the lets the scores read, on the first nodes: with EXPLAIN_FULL only (about a third more
    # explaining time with the default set's BalancedAllocation lets)
    terms = bound.rule_set.score_terms if full and isinstance(bound.rule_set, RuleSet) else None
    shown = [s.name for s in bound.scores if terms is not None and terms.names(s.name)]
    return tuple(
        ScoredNode(
            names[i],
            tuple(int(column[i]) for column in per_rule),
            values[i],
            shown_load(nodes[i]),
            {r: terms.terms(r, bound.ctx, nodes[i]) for r in shown}
            if terms is not None and shown and k < TERM_NODES
            else None,
        )
        for k, i in enumerate(kept)
    )


def shown_load(node: Any) -> Mapping[str, float] | None:
    """What a report shows of a node's load (see :attr:`ScoredNode.load`); None without any."""
    usage, metrics = node.usage, node.metrics
    if not usage and not metrics:
        return None
    shown: dict[str, float] = {}
    if "cpu" in usage:
        shown["cpu"] = usage["cpu"]  # (milli-units of a core: millicores)
    if "memory" in usage:
        shown["memory"] = usage["memory"] // 1000  # (milli-units: bytes)
    shown.update(metrics)
    shown["age"] = round(node.metrics_age, 3)
    return shown


def explain_nodes(
    filtered: Mapping[str, tuple[str, ...]],
    unresolvable: set[str],
    scores: Mapping[str, Mapping[str, int]],
    evaluated: int,
    rules: tuple[str, ...],
    chosen: str | None,
    full: bool,
    pod: Any = None,
    node_of: Callable[[str], Any] | None = None,
) -> Explanation:
    """The same explanation from a node-by-node walk's maps (the cycle's path for scores beyond
    int64): every filtered node's reasons, the unresolvable ones, every scored node's scores.
    (The maps do not say which filter gave a reason: the codes are read from the reasons alone.)"""
    groups = _Groups(full, pod)
    for name, reasons in filtered.items():
        groups.add(name, reasons, name in unresolvable, (), "", None if node_of is None else node_of(name))
    ranked = sorted(scores, key=lambda n: (-scores[n]["total"], n != chosen, n))
    best = tuple(
        ScoredNode(n, tuple(scores[n][r] for r in rules), scores[n]["total"])
        for n in (ranked if full else ranked[:BEST])
    )
    return groups.explanation(evaluated, rules, len(scores), best)


def load_text(key: str, value: float) -> str:
    """One :func:`shown_load` value as reports print it: ``1500m``, ``2048Mi``, ``30s``, ``41.5``."""
    if key == "cpu":
        return f"{value:g}m"
    if key == "memory":
        return f"{value / 2**20:.0f}Mi"
    if key == "age":
        return f"{value:g}s"
    return f"{value:g}"
