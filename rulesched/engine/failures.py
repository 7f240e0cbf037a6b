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
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Unsupported
from rulesched.engine.batch import SharedColumns, columns_of, filter_rows
from rulesched.engine.columns import NodeColumns, Rows, node_fields
from rulesched.engine.encoded import Encoded, encode
from rulesched.lang import BoundFilter, BoundRules


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


def reason_counts(bound: BoundRules, cols: NodeColumns, failed: list[FailedRows]) -> tuple[Counter[str], set[str]]:
    """kube-scheduler's FitError histogram (reason -> nodes failing with it; a node counts once
    per distinct reason of its first failing filter) and the names of the failing filters."""
    counts: Counter[str] = Counter()
    names: set[str] = set()
    for group in failed:
        names.add(group.filter.name)
        for why, k in _reasons(bound, cols, group):
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


def _reasons(bound: BoundRules, cols: NodeColumns, group: FailedRows) -> list[tuple[tuple[str, ...], int]]:
    """Each distinct reasons tuple of the group's rows (as BoundFilter.reasons gives it), with
    its number of rows."""
    f, rows = group.filter, group.rows
    bodies = columns_of(bound)
    expr = bodies.filter_reasons[group.index] if bodies is not None and bodies.filter_reasons else None
    if bodies is not None and bodies.filter_reasons and expr is None:  # no reason given: the default
        return [(f.reasons(cols.nodes[int(rows[0])]), len(rows))]
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
            return [(as_reasons(value, default), k) for value, k in encoded.counts()]
        found = _per_group(bound, cols, rows, expr, f.reasons)
        if found is not None:
            return list(Counter(found).items())
    nodes = cols.nodes
    bound.watch.rule = f.name
    return list(Counter(bound.watch.each(f.reasons, rows.tolist(), nodes)).items())


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
