"""Why nodes fail a pod, for many nodes at once: each node's first failing filter, its reasons
and whether preemption could help there.

When no node fits, kube-scheduler reports every node's first failing filter (``0/5000 nodes are
available: 4712 Insufficient cpu, ...``) and preemption tries only the nodes whose failure is
not UnschedulableAndUnresolvable. Asking :meth:`BoundRules.first_failure` node by node costs
every filter's closures again on every node; here each filter is evaluated once over the rows
still undecided (as columns where it can be, from the shared columns a walk just filled), in
rule order, so each row gets the same first failing filter as node by node. Reasons are counted
per distinct value (:mod:`rulesched.engine.encoded`, else once per group of nodes alike in
the fields the reason reads, else node by node), and the ``unresolvable`` condition is evaluated
likewise, only when preemption asks.
Next stage: the scheduler's cycle (rulesched.scheduler.cycle) turns these into its FitError
message and the node statuses preemption reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Unsupported
from rulesched.engine.batch import SharedColumns, columns_of, filter_rows
from rulesched.engine.columns import NodeColumns, Path, Rows, node_fields
from rulesched.engine.encoded import Encoded, encode
from rulesched.lang import BoundFilter, BoundRules
from rulesched.lang.types import QUANTITY


@dataclass(frozen=True)
class FailedRows:
    """The rows whose first failing filter is ``index`` (``filter``)."""

    index: int
    filter: BoundFilter
    rows: Rows


def first_failures(
    bound: BoundRules, cols: NodeColumns, rows: Rows, shared: SharedColumns | None = None
) -> list[FailedRows]:
    """Each failing row's first failing filter, in rule order, grouped by filter; rows that pass
    every filter are in none."""
    out = []
    alive = rows
    for i, f in enumerate(bound.filters):
        if not len(alive):
            break
        ok = filter_rows(bound, cols, alive, i, shared)
        if not ok.all():
            out.append(FailedRows(i, f, alive[~ok]))
            alive = alive[ok]
    return out


def reason_counts(
    bound: BoundRules,
    cols: NodeColumns,
    failed: list[FailedRows],
    kept: list[GroupReasons] | None = None,
    reasons_of: Callable[[FailedRows], GroupReasons] | None = None,
) -> tuple[Counter[str], set[str]]:
    """kube-scheduler's FitError histogram (reason -> nodes failing with it; a node counts once
    per distinct reason of its first failing filter) and the names of the failing filters.
    ``kept``: each group's :class:`GroupReasons` is appended to it (for the diagnosis);
    ``reasons_of``: a group's reasons (default :func:`group_reasons`; a node table's keeps some)."""
    counts: Counter[str] = Counter()
    names: set[str] = set()
    for group in failed:
        names.add(group.filter.name)
        reasons = reasons_of(group) if reasons_of is not None else group_reasons(bound, cols, group)
        if kept is not None:
            kept.append(reasons)
        for why, k in reasons.counts():
            for reason in set(why):
                counts[reason] += k
    return counts, names


def unresolvable_rows(bound: BoundRules, cols: NodeColumns, group: FailedRows) -> npt.NDArray[np.bool_]:
    """Whether each of the group's rows fails UnschedulableAndUnresolvable (its filter's
    ``unresolvable`` condition holds there)."""
    f, rows = group.filter, group.rows
    bodies = columns_of(bound)
    condition = bodies.filter_unresolvable[group.index] if bodies is not None and bodies.filter_unresolvable else None
    if condition is None:
        if bodies is not None and bodies.filter_unresolvable:  # the rule has no unresolvable clause
            return np.zeros(len(rows), dtype=bool)
    else:
        assert bodies is not None
        ev = bodies.evaluator
        if ev.supports(condition):
            try:
                return ev.filter(condition, bound.ctx, cols, rows)
            except Unsupported:
                pass
            except Exception as error:  # noqa: BLE001 - a column bug must not stop scheduling; node by node is right
                _failed(bound, f, error)
        found = _per_group(bound, cols, rows, condition, f.unresolvable)
        if found is not None:
            return np.array([bool(v) for v in found], dtype=bool)
    nodes = cols.nodes
    bound.watch.rule = f.name
    return np.array(bound.watch.each(f.unresolvable, rows.tolist(), nodes), dtype=bool)


@dataclass(frozen=True)
class GroupReasons:
    """The reasons of a :class:`FailedRows` group's rows: row ``i``'s (as BoundFilter.reasons gives
    it) is ``reasons[codes[i]]``; distinct tuples in the order their first row has them."""

    codes: npt.NDArray[np.intp]
    reasons: list[tuple[str, ...]]

    def counts(self) -> list[tuple[tuple[str, ...], int]]:
        """Each reasons tuple with its number of rows."""
        used = np.bincount(self.codes, minlength=len(self.reasons)).tolist()
        return [(self.reasons[c], k) for c, k in enumerate(used) if k]


def group_reasons(bound: BoundRules, cols: NodeColumns, group: FailedRows) -> GroupReasons:
    """Each of the group's rows' reasons (the FitError counts them; the FailedScheduling
    diagnosis reads them row by row): evaluated per distinct value, per group of alike nodes,
    else node by node, never twice."""
    f, rows = group.filter, group.rows
    bodies = columns_of(bound)
    expr = bodies.filter_reasons[group.index] if bodies is not None and bodies.filter_reasons else None
    if bodies is not None and bodies.filter_reasons and expr is None:  # no reason given: the default
        return GroupReasons(np.zeros(len(rows), dtype=np.intp), [f.reasons(cols.nodes[int(rows[0])])])
    if expr is not None and bodies is not None:
        encoded: Encoded | None = None
        try:
            encoded = encode(bodies.evaluator, expr, bound.ctx, cols, rows, {})
        except Unsupported:
            pass
        except Exception as error:  # noqa: BLE001 - as above
            _failed(bound, f, error)
        if encoded is not None:
            default = (f"node(s) didn't satisfy rule {f.name}",)
            return GroupReasons(encoded.codes, [as_reasons(value, default) for value in encoded.values])
        found = _per_group(bound, cols, rows, expr, f.reasons)
        if found is not None:
            return coded(found)
    nodes = cols.nodes
    bound.watch.rule = f.name
    return coded(bound.watch.each(f.reasons, rows.tolist(), nodes))


def coded(found: list[tuple[str, ...]]) -> GroupReasons:
    """Per-row reasons as codes over their distinct tuples (first seen first)."""
    index: dict[tuple[str, ...], int] = {}
    codes = [index.setdefault(why, len(index)) for why in found]
    return GroupReasons(np.array(codes, dtype=np.intp), list(index))


class KnownFailures:
    """What a walk that found no node learned of its failing rows, for the cycle's later
    questions (the FailedScheduling diagnosis, preemption's node statuses) to read instead of
    asking each node again: each row's first failing filter (``failed``), its reasons
    (``reasons``, one :class:`GroupReasons` per group) and, asked once per group, whether it is
    unresolvable there. ``memo``: given a filter's index, the answers its class keeps per row
    across walks (-1: not known; :meth:`rulesched.engine.NodeTable.unresolvable_memo`), or None;
    rows known there are read, the others asked and written back."""

    __slots__ = ("bound", "cols", "failed", "reasons", "_unresolvable", "_where", "_memo")

    def __init__(
        self,
        bound: BoundRules,
        cols: NodeColumns,
        failed: list[FailedRows],
        reasons: list[GroupReasons],
        memo: Callable[[int], npt.NDArray[np.int8] | None] | None = None,
    ) -> None:
        self.bound, self.cols, self.failed, self.reasons = bound, cols, failed, reasons
        self._unresolvable: list[npt.NDArray[np.bool_] | None] = [None] * len(failed)
        self._where: tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]] | None = None
        self._memo = memo

    def unresolvable(self, i: int) -> npt.NDArray[np.bool_]:
        """:func:`unresolvable_rows` of group ``i`` (evaluated the first time only)."""
        found = self._unresolvable[i]
        if found is None:
            group = self.failed[i]
            kept = self._memo(group.index) if self._memo is not None else None
            if kept is None:
                found = unresolvable_rows(self.bound, self.cols, group)
            else:
                known = kept[group.rows]  # (a copy: fancy indexing)
                todo = known < 0
                if todo.any():
                    asked = FailedRows(group.index, group.filter, group.rows[todo])
                    answers = unresolvable_rows(self.bound, self.cols, asked)
                    known[todo] = answers
                    kept[asked.rows] = answers
                found = known.astype(bool)
            self._unresolvable[i] = found
        return found

    def free(self, resource: str, rows: Rows) -> npt.NDArray[Any]:
        """``node.free[resource]`` of each of ``rows`` (milli-units), read as a column (the
        diagnosis's nearest node: the smallest shortfall)."""
        return self.cols.column(Path((("field", _free), ("key", resource, 0))), QUANTITY)[rows]

    def where(self, rows: Rows) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """For each of ``rows``: its group (-1: it fails no filter) and its position there."""
        if self._where is None:
            size = len(self.cols.nodes)
            group = np.full(size, -1, dtype=np.intp)
            position = np.zeros(size, dtype=np.intp)
            for i, g in enumerate(self.failed):
                group[g.rows] = i
                position[g.rows] = np.arange(len(g.rows), dtype=np.intp)
            self._where = (group, position)
        group, position = self._where
        return group[rows], position[rows]


def _free(node: Any) -> Any:
    return node.free


def _per_group(bound: BoundRules, cols: NodeColumns, rows: Rows, expr: Any, per_node: Any) -> list[Any] | None:
    """``per_node`` of each row, evaluated once per group of nodes equal in the node fields
    ``expr`` reads (None: it reads the node otherwise, or the fields hardly repeat)."""
    bodies = columns_of(bound)
    assert bodies is not None
    fields = node_fields(expr, bodies.evaluator.notes, bodies.evaluator.lets)
    groups = cols.groups(fields) if fields is not None else None
    if groups is None:
        return None
    nodes = cols.nodes
    answers = bound.watch.each(per_node, groups.representatives, nodes)
    return [answers[c] for c in groups.codes[rows].tolist()]


def _failed(bound: BoundRules, f: BoundFilter, error: Exception) -> None:
    """A column evaluation of ``f``'s reasons or unresolvable clause raised (a bug): recorded as
    the evaluator's other unplanned fallbacks are (logged once per rule and error type)."""
    bodies = columns_of(bound)
    assert bodies is not None
    bodies.evaluator.fallbacks.record(f.name, bound.ctx.pod.key, error)


def as_reasons(value: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """A reason expression's value as BoundFilter.reasons gives it (rulesched.lang.evaluation.ruleset);
    ``default``: what a rule without a reason says."""
    if isinstance(value, str):
        return (value,) if value else default
    return tuple(value) or default
