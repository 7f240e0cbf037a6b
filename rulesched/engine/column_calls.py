"""Built-in calls in column evaluation (:mod:`rulesched.engine.vectorise`): a call whose arguments
are all known is made once; ``abs``, ``floor``, ``ceil``, ``min``, ``max`` and the conversions
are numpy operations; ``f(node)`` the same on every node, or alike on nodes alike in a few labels,
or with a columns hook of its own, is answered without the node objects; nodeSelector matching,
host ports and node selector terms take shortcuts their pod-side argument allows; anything else
is the built-in itself, called per row (the same implementations the closures call).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

import numpy as np

from rulesched.engine.arrays import EXACT_LIMIT, Col, Unsupported, Value, coerce, column_of, extreme
from rulesched.engine.columns import NodeColumns, Path, Rows
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.context import EvalContext
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.types import STRING
from rulesched.model import NodeSelectorTerm


class Evaluator(Protocol):
    """What a call takes from the column evaluator (:class:`rulesched.engine.vectorise.ColumnEvaluator`)."""

    @property
    def unroll(self) -> int: ...

    def path(self, expr: ast.Expr) -> Path | None: ...


class Evaluation(Protocol):
    """What a call takes from the evaluation it is part of (:class:`rulesched.engine.vectorise._Run`,
    which calls it): the pod's context, the columns, the annotations, its operands' values."""

    @property
    def ev(self) -> Evaluator: ...

    @property
    def ctx(self) -> EvalContext: ...

    @property
    def cols(self) -> NodeColumns: ...

    @property
    def notes(self) -> Annotations: ...

    def value(self, expr: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value: ...


_NUMPY_CALLS = frozenset({"abs", "floor", "ceil", "min", "max", "number", "seconds"})


def grouped(name: str, ctx: EvalContext, cols: NodeColumns) -> bool:
    """Whether, for this pod now, the built-in ``f(node)`` costs a few calls over ``cols`` rather
    than one per node: its answer is the same everywhere, one per group of nodes alike in a few
    labels, or computed for all rows at once."""
    if name == "domain":  # aggregates over domains: one answer per label value (domain_columns)
        return True
    builtin = BUILTINS[name]
    if builtin.uniform is not None and builtin.uniform(ctx) is not None:
        return True
    if builtin.domain is not None:
        keys = builtin.domain(ctx)
        if keys is not None and cols.label_groups(keys) is not None:
            return True
    return builtin.columns is not None


def call(
    run: Evaluation, expr: ast.Call, func: str, args: tuple[ast.Expr, ...], rows: Rows, scope: dict[str, Any]
) -> Value:
    builtin = BUILTINS[func]
    whole_node = len(args) == 1 and run.ev.path(args[0]) == Path()
    if whole_node:  # f(node): answered, where it can be, before the rows' node objects are gathered
        found = _node_call(run, expr, builtin, rows)
        if found is not None:
            return found
    coercions = run.notes.calls[id(expr)]
    values = [coerce(c, run.value(a, rows, scope)) for a, c in zip(args, coercions, strict=True)]
    n = len(rows)
    if not any(isinstance(v, Col) for v in values):  # decided for every row
        return builtin.impl(run.ctx, *values) if builtin.context else builtin.impl(*values)
    if func in _NUMPY_CALLS and all(not isinstance(v, Col) or v.array.dtype != object for v in values):
        if func in ("number", "seconds"):
            return values[0]
        if func == "abs":
            v = values[0]
            return Col(np.abs(v.array), v.bound)
        if func in ("floor", "ceil"):
            v = values[0]
            if not v.is_float:
                return v
            if not v.bound <= EXACT_LIMIT:  # (NaN too: rows whole by values.whole)
                raise Unsupported("floor of a float beyond 2**53")
            return Col((np.floor if func == "floor" else np.ceil)(v.array).astype(np.int64))
        if func in ("min", "max"):
            return extreme(func, values, n)
    shortcut = _shortcut(run, func, args, values, rows)
    if shortcut is not None:
        return shortcut
    if builtin.uniform is not None:  # the same answer on every node, for this pod: one value
        same = builtin.uniform(run.ctx)
        if same is not None:
            return same
    # Anything else: the built-in itself, called per row.
    impl = builtin.impl
    known = [v for v in values if not isinstance(v, Col)]
    if builtin.context:
        known.insert(0, run.ctx)
    last = values[-1]
    if isinstance(last, Col) and len(known) == len(values) - 1 + builtin.context:
        # the usual shape (f(pod-side value, node value), f(ctx, node)): one map, no tuples
        results = list(map(partial(impl, *known), last.array.tolist()))
    else:
        columns = [v.array.tolist() if isinstance(v, Col) else [v] * n for v in values]
        if builtin.context:
            columns.insert(0, [run.ctx] * n)
        results = [impl(*a) for a in zip(*columns, strict=True)]
    return column_of(results, run.notes.types[id(expr)])


def _node_call(run: Evaluation, expr: ast.Call, builtin: Any, rows: Rows) -> Value | None:
    """``f(node)`` the same on every node (one value), once per group of nodes alike in a few
    labels, or from the built-in's own columns hook; None: per row, from the node objects."""
    if builtin.uniform is not None:  # the same answer on every node, for this pod: one value
        same: Value | None = builtin.uniform(run.ctx)
        if same is not None:
            return same
    if builtin.domain is not None:
        # f(node) whose answer depends on a few of the node's labels: once per distinct value
        keys = builtin.domain(run.ctx)
        groups = run.cols.label_groups(keys) if keys is not None else None
        if groups is not None:
            nodes, ctx = run.cols.nodes, run.ctx
            answers = [builtin.impl(ctx, nodes[r]) for r in groups.representatives]
            return Col(column_of(answers, run.notes.types[id(expr)]).array[groups.codes[rows]])
    if builtin.columns is not None:
        found: Value = column_of(list(builtin.columns(run.ctx, run.cols, rows)), run.notes.types[id(expr)])
        return found
    return None


def _shortcut(run: Evaluation, func: str, args: tuple[ast.Expr, ...], values: list[Value], rows: Rows) -> Value | None:
    """Built-ins whose pod-side argument decides much: nodeSelector matching as a few label
    columns (``subset``), no host ports wanted (``ports_conflict``), a node selector term on
    labels once per group of nodes alike in them (``term_matches``)."""
    first = values[0]
    if isinstance(first, Col) or len(values) != 2 or not isinstance(values[1], Col):
        return None
    if func == "ports_conflict" and not first:
        return False
    if func == "term_matches" and run.ev.path(args[1]) == Path():
        # a term on labels alone: once per group of nodes alike in the labels it names
        if not isinstance(first, NodeSelectorTerm) or not first.match_expressions or first.match_fields:
            return None
        groups = run.cols.label_groups(tuple(sorted({r.key for r in first.match_expressions})))
        if groups is None:
            return None
        nodes, impl = run.cols.nodes, BUILTINS[func].impl
        answers = np.array([bool(impl(first, nodes[r])) for r in groups.representatives], dtype=bool)
        return Col(answers[groups.codes[rows]])
    if func == "subset":
        if not first:
            return True
        inner = run.ev.path(args[1])
        if inner is None or len(first) > run.ev.unroll:
            return None
        out = np.ones(len(rows), dtype=bool)
        for k, v in first.items():  # big.get(k) == v for every key: a missing label is None
            labels = run.cols.column(inner.then("key", k, None), STRING)[rows]
            hit = np.asarray(labels == v, dtype=bool)
            out &= hit
        return Col(out)
    return None
