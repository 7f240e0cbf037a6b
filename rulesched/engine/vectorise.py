"""Column evaluation: one rule over many nodes at once, as numpy arrays.

The closures of :mod:`rulesched.lang.evaluation.compile` answer one (pod, node) at a time; arithmetic costs
a call per operator per node. For a pod unlike any before it the scheduler needs every rule on
hundreds or thousands of nodes, so a rule whose body is arithmetic, comparisons and logic over
node values (``node.allocatable.cpu``, ``node.free["nvidia.com/gpu"]``, ``len(node.pods)``)
and values known once the pod is (``pod.requests.cpu``, a constant) is evaluated here as array
operations over the nodes' columns (:mod:`rulesched.engine.columns`) instead. Built-ins and record
fields that numpy cannot express are called per node inside the column (the same
implementations); what cannot be expressed at all (a loop over a node's own list, ``in`` over
lists) leaves the rule to the closures, decided once per rule when the rules load
(:mod:`rulesched.engine.vectorisable`). Built-in calls are :mod:`rulesched.engine.column_calls`'.

Answers are the reference interpreter's, exactly: the pod-only parts are evaluated by
:class:`rulesched.lang.evaluation.interp.Interpreter` itself, the rest by :mod:`rulesched.engine.arrays`,
which raises :class:`Unsupported` where numpy could not be exact (the caller then evaluates the
rule node by node). ``and``/``or``/``if`` evaluate their later operands only on the rows that
need them; quantifiers over a pod-side list are unrolled per element.
Next stage: :class:`rulesched.lang.evaluation.ruleset.BoundRules` (``filter_mask`` and ``score_matrix``),
called by ``rulesched.engine.table``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine import column_calls
from rulesched.engine.arrays import (
    Col,
    Unsupported,
    Value,
    add,
    binary,
    bools,
    coerce,
    column_of,
    merge,
    need_numeric,
    take,
)
from rulesched.engine.columns import NodeColumns, Path, Rows
from rulesched.engine.domain_columns import DomainCodes, domain_column
from rulesched.engine.fallback import ColumnFallbacks
from rulesched.engine.settings import EngineSettings
from rulesched.engine.vectorisable import Analysis
from rulesched.lang import schema
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.schema import zero_value
from rulesched.lang.types import QUANTITY, MapOf
from rulesched.lang.values import as_score, binary_function

Step = Callable[["_Run", Rows, dict[str, Any]], Value]  # one expression over rows, see ColumnEvaluator.step


class ColumnEvaluator:
    """Evaluates checked expressions over the rows of a :class:`NodeColumns` for one pod."""

    def __init__(
        self,
        notes: Annotations,
        lets: dict[str, ast.Let],
        domain_codes: DomainCodes | None = None,
        unroll: int = EngineSettings.column_unroll,
    ) -> None:
        self.notes, self.lets = notes, lets
        # Elements of a pod-side list a quantifier or collect is unrolled over (EngineSettings).
        self.unroll = unroll
        self.domain_codes = domain_codes or {}  # the compiled aggregates over domains (compile_rules)
        self.interp = Interpreter(notes, lets)
        self._analysis = Analysis(notes, lets)
        self._paths: dict[int, Path | None] = {}
        # Per expression, what every evaluation asks first: (reads the node, its path, its
        # type, its coercion), decided once (an evaluation visits each node of a rule's tree).
        self.plans: dict[int, tuple[bool, Path | None, Any, str | None]] = {}
        # Per expression, the function evaluating it over rows (_Run.value), made on first use
        # with those answers and its children's functions inside, so an evaluation no longer
        # looks them up (nor dispatches on the node's kind) at every node of the tree.
        self.steps: dict[int, Step] = {}
        # Evaluations that raised something other than Unsupported (a bug: the caller went node
        # by node and reported it here). Tests demand none.
        self.fallbacks = ColumnFallbacks()

    def supports(self, expr: ast.Expr) -> bool:
        """:func:`vectorisable`, with this evaluator's analysis (kept per expression)."""
        return self._analysis.supported(expr)

    def evaluate(
        self, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows, scope: dict[str, Any] | None = None
    ) -> Value:
        return _Run(self, ctx, cols).value(expr, rows, scope or {})

    def filter(self, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows) -> npt.NDArray[np.bool_]:
        """A filter body's outcome per row."""
        value = self.evaluate(expr, ctx, cols, rows)
        if isinstance(value, Col):
            return value.array.astype(bool, copy=False)
        return np.full(len(rows), bool(value))

    def score(self, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows) -> npt.NDArray[np.int64]:
        """A score body's value per row, truncated as :func:`rulesched.lang.values.as_score`."""
        value = self.evaluate(expr, ctx, cols, rows)
        if not isinstance(value, Col):
            whole = as_score(value)
            if not -(2**63) <= whole < 2**63:  # (exp(1000): the largest float's 309 digits)
                raise Unsupported("score beyond int64")
            return np.full(len(rows), whole, dtype=np.int64)
        a = value.array
        if a.dtype == object:
            raise Unsupported("score values are not numbers numpy holds exactly")
        if a.dtype.kind == "f":
            a = np.where(np.isfinite(a), a, 0.0)  # as_score: NaN and the infinities score 0
            if len(a) and float(np.max(np.abs(a))) >= 2**63:
                raise Unsupported("score beyond int64")
            return np.trunc(a).astype(np.int64)
        return a.astype(np.int64, copy=False)

    def plan(self, expr: ast.Expr) -> tuple[bool, Path | None, Any, str | None]:
        key = id(expr)
        reads = self._analysis.reads_node(expr)
        found = self.plans[key] = (
            reads,
            self.path(expr) if reads else None,
            self.notes.types.get(key),
            self.notes.coercions.get(key),
        )
        return found

    def step(self, expr: ast.Expr) -> Step:
        found = self.steps.get(id(expr))
        if found is None:
            found = self.steps[id(expr)] = self._step(expr)
        return found

    def _step(self, expr: ast.Expr) -> Step:
        reads_node, path, kind, coercion = self.plans.get(id(expr)) or self.plan(expr)
        if id(expr) in self.notes.domain_aggregates:  # (compiled where it stands alone: domain_columns)
            return partial(_over_domain, self, expr, coercion)
        if not reads_node:  # a pod-side value, the same for every row: the interpreter's
            if isinstance(expr, ast.Literal):  # (known now, as the interpreter would give it)
                return partial(_constant, coerce(coercion, expr.value))
            if isinstance(expr, ast.Name) and self.notes.names[id(expr)].kind == "bound":
                return partial(_variable, expr.id, coercion)  # (a quantifier's: in the scope)
            return partial(_pod_value, self.interp, expr, ("column pod value", id(expr)))
        base: Step
        if path is not None and not path.steps:
            base = _whole_nodes
        elif path is not None:
            base = partial(_path_column, path, kind)
        else:
            base = self._compute_step(expr)
        if coercion is None:
            return base
        return lambda run, rows, scope: coerce(coercion, base(run, rows, scope))

    def _compute_step(self, expr: ast.Expr) -> Step:
        """The operators rules are mostly made of, as closures over their operands' steps;
        the rest through :meth:`_Run._compute`."""
        notes, step = self.notes, self.step
        match expr:
            case ast.Name():  # a let that reads the node
                return step(self.lets[notes.names[id(expr)].name].value)
            case ast.Unary(op=op, operand=operand):
                return partial(_unary, op == "not", step(operand))
            case ast.Binary(op="and" | "or", left=left, right=right):
                return partial(_logic, expr.op == "and", step(left), step(right))
            case ast.Binary(op=op, left=left, right=right):
                info = notes.binary[id(expr)]
                types = (notes.types[id(left)], notes.types[id(right)])
                return partial(_binary, op, info, types, step(left), step(right))
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                return partial(_if, step(cond), step(then), step(otherwise))
        return lambda run, rows, scope: run._compute(expr, rows, scope)

    def path(self, expr: ast.Expr) -> Path | None:
        """For a read of the node through fields, resource keys and constant map keys (and
        ``len`` of one): the path; else None."""
        key = id(expr)
        if key not in self._paths:
            self._paths[key] = self._path(expr)
        return self._paths[key]

    def _path(self, expr: ast.Expr) -> Path | None:
        notes = self.notes
        match expr:
            case ast.Name():
                ref = notes.names[id(expr)]
                if ref.kind == "let":
                    value = self.lets[ref.name].value
                    return None if id(value) in notes.coercions else self.path(value)
                if ref.kind != "bound" and ref.name == schema.NODE_VARIABLE:
                    return Path()
                return None
            case ast.Attr(obj=obj):
                inner = self.path(obj)
                if inner is None:
                    return None
                attr = notes.attrs[id(expr)]
                if attr.field is not None:
                    return inner.then("field", attr.field.get)
                return inner.then("key", attr.resource, 0)
            case ast.Index(obj=obj, key=ast.Literal(value=k)) if isinstance(k, str) and not notes.coercions.get(
                id(expr.key)
            ):
                inner = self.path(obj)
                t = notes.types[id(obj)]
                if inner is None or not isinstance(t, MapOf):
                    return None
                return inner.then("key", k, zero_value(t.value))
            case ast.Call(func="len", args=(arg,)):
                inner = self.path(arg)
                return None if inner is None else inner.then("len")
        return None


class _Run:
    """One evaluation: the pod's context and the columns; pod-only parts go to the interpreter."""

    def __init__(self, ev: ColumnEvaluator, ctx: EvalContext, cols: NodeColumns) -> None:
        self.ev, self.ctx, self.cols = ev, ctx, cols
        self.notes = ev.notes

    def value(self, expr: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value:
        found = self.ev.steps.get(id(expr))
        if found is None:
            found = self.ev.step(expr)
        return found(self, rows, scope)

    def _compute(self, expr: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value:
        notes = self.notes
        match expr:
            case ast.Attr(obj=obj):
                record = self.value(obj, rows, scope)
                attr = notes.attrs[id(expr)]
                get = attr.field.get if attr.field is not None else _resource(attr.resource)
                if not isinstance(record, Col):  # decided for every row (an if with a known branch)
                    return get(record)
                return column_of(
                    [get(x) for x in record.array.tolist()],
                    notes.types[id(expr)] if attr.field is not None else QUANTITY,
                )
            case ast.Index(obj=obj, key=key):
                k = self.value(key, rows, scope)  # known: the analysis allows no node-read keys
                t = notes.types[id(obj)]
                assert isinstance(t, MapOf)
                default = zero_value(t.value)
                inner = self.ev.path(obj)
                if inner is not None and isinstance(k, str):  # node.free[r], r fixed by an unrolled loop
                    return Col(self.cols.column(inner.then("key", k, default), t.value)[rows])
                maps = self.value(obj, rows, scope)
                if not isinstance(maps, Col):
                    return maps[k] if k in maps else default
                return column_of([x[k] if k in x else default for x in maps.array.tolist()], t.value)
            case ast.Call(func=func, args=args):
                return column_calls.call(self, expr, func, args, rows, scope)
            case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
                items = self._items(iterable, rows, scope)
                if where is None:
                    return len(items) if kind == "count" else bool(items) if kind == "any" else True
                return self._quantify(kind, var, items, where, rows, scope)
            case ast.Aggregate(var=var, iterable=iterable, value=value, where=where):
                total: Value = 0
                for item in self._items(iterable, rows, scope):
                    item_scope = {**scope, var: item}
                    v = self.value(value, rows, item_scope)
                    if where is not None:
                        keep = self.value(where, rows, item_scope)
                        if not isinstance(keep, Col):
                            if not keep:
                                continue
                        else:
                            v = merge(bools(keep), take(v, bools(keep)), 0, len(rows))
                    total = add(total, v, len(rows))
                return total
        raise Unsupported(f"cannot evaluate {type(expr).__name__} as columns")

    def _items(self, iterable: ast.Expr, rows: Rows, scope: dict[str, Any]) -> list[Any]:
        # (pod-side, as the analysis demands: kept in the scratch as other pod-side values)
        items = list(self.value(iterable, rows, scope))
        if len(items) > self.ev.unroll:
            raise Unsupported("list too long to unroll")
        return items

    def _quantify(
        self, kind: str, var: str, items: list[Any], where: ast.Expr, rows: Rows, scope: dict[str, Any]
    ) -> Value:
        n = len(rows)
        if kind == "count":
            total: Value = 0
            for item in items:
                hit = self.value(where, rows, {**scope, var: item})
                total = add(
                    total, Col(bools(hit).astype(np.int64), None) if isinstance(hit, Col) else int(bool(hit)), n
                )
            return total
        # any / all: each element is evaluated only on the rows still undecided
        decided_as = kind == "any"
        result = np.full(n, not decided_as)
        open_ = np.arange(n)
        for item in items:
            if not len(open_):
                break
            hit = self.value(where, rows[open_], {**scope, var: item})
            hits = bools(hit) if isinstance(hit, Col) else np.full(len(open_), bool(hit))
            done = hits if decided_as else ~hits
            result[open_[done]] = decided_as
            open_ = open_[~done]
        return Col(result)


# --- steps: (run, rows, scope) -> value, see ColumnEvaluator.step -------------------------------


def _over_domain(
    ev: ColumnEvaluator, expr: ast.Expr, coercion: str | None, run: _Run, rows: Rows, scope: dict[str, Any]
) -> Value:
    if scope or id(expr) not in ev.domain_codes:  # nested in a loop: the closures, node by node
        raise Unsupported("an aggregate over a domain inside another loop")
    return coerce(coercion, domain_column(expr, ev.domain_codes, ev.notes, ev.interp, run.ctx, run.cols, rows))


# Types of a quantifier variable's value that key a kept pod-side value (a resource name of
# ``pod.requests``, say): equal values of one of these types are interchangeable. Not float
# (0.0 == -0.0, yet 1 / x tells them apart) nor records and lists (compared by value or not
# hashable at all).
_KEYED = frozenset({str, int, bool})


def _constant(value: Any, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    return value


def _variable(name: str, coercion: str | None, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    return coerce(coercion, scope[name])


def _pod_value(
    interp: Interpreter, expr: ast.Expr, key: tuple[str, int], run: _Run, rows: Rows, scope: dict[str, Any]
) -> Value:
    return pod_value(interp, expr, key, run.ctx, scope)


def pod_value(
    interp: Interpreter, expr: ast.Expr, key: tuple[str, int], ctx: EvalContext, scope: dict[str, Any]
) -> Any:
    """A pod-side value, kept in the context's scratch (cleared whenever the pod or the cluster
    view changes): a rule evaluated as columns several times in a cycle (per window, per shared
    fill, each step of preemption's dry runs; a reason encoded, :mod:`rulesched.engine.encoded`)
    asks for the same ones. One that depends on quantifiers' variables is kept under their
    values too, when all of them are of a :data:`_KEYED` type (``pod.requests[r]`` for each
    ``r in pod.requests``); else asked anew. ``key``: ``("column pod value", id(expr))``."""
    scratch = ctx.scratch
    if scope:
        for v in scope.values():
            if type(v) not in _KEYED:
                return interp.evaluate(expr, ctx, None, scope)
        # (the type beside each value: 1 and True are equal keys, yet str() tells them apart)
        key = (*key, *((name, type(v), v) for name, v in scope.items()))  # type: ignore[assignment]
    if key in scratch:
        return scratch[key]
    value = scratch[key] = interp.evaluate(expr, ctx, None, scope)
    return value


def _whole_nodes(run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    return Col(run.cols.objects()[rows])


def _path_column(path: Path, kind: Any, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    cols = run.cols  # (the whole column's bound holds for any rows: no reduction per evaluation)
    return Col(cols.column(path, kind)[rows], cols.bound(path, kind))


def _unary(is_not: bool, operand: Step, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    v = operand(run, rows, scope)
    if not isinstance(v, Col):  # a shortcut decided it for every row
        return (not v) if is_not else -v
    if is_not:
        return Col(~bools(v))
    need_numeric(v)
    return Col(-v.array, v.bound)


def _logic(is_and: bool, left: Step, right: Step, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    """``and``/``or``: the right operand only on the rows the left one leaves undecided."""
    a = left(run, rows, scope)
    if not isinstance(a, Col):
        if bool(a) is not is_and:  # false and x / true or x
            return a
        return right(run, rows, scope)
    mask = bools(a)
    need = mask if is_and else ~mask
    out = mask.copy()
    if need.any():
        b = right(run, rows[need], scope)
        out[need] = bools(b) if isinstance(b, Col) else bool(b)
    return Col(out)


def _binary(
    op: str,
    info: Any,
    types: tuple[Any, Any],
    left: Step,
    right: Step,
    run: _Run,
    rows: Rows,
    scope: dict[str, Any],
) -> Value:
    a = coerce(info.left, left(run, rows, scope))
    b = coerce(info.right, right(run, rows, scope))
    if not isinstance(a, Col) and not isinstance(b, Col):
        return binary_function(op, info.kind)(a, b)
    return binary(op, info.kind, a, b, types[0], types[1], len(rows))


def _if(cond: Step, then: Step, otherwise: Step, run: _Run, rows: Rows, scope: dict[str, Any]) -> Value:
    c = cond(run, rows, scope)
    if not isinstance(c, Col):
        return (then if c else otherwise)(run, rows, scope)
    mask = bools(c)
    return merge(mask, then(run, rows[mask], scope), otherwise(run, rows[~mask], scope), len(rows))


def _resource(name: str | None) -> Callable[[Any], Any]:
    return lambda resources: resources.get(name, 0)
