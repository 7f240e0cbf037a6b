"""Values numpy cannot hold per row (strings, lists of strings), over many nodes at once, encoded.

A filter's reason (``"Insufficient " + r`` for each resource the node lacks) is what a pod that
fits nowhere reports for every node it failed on: thousands of evaluations node by node, though
nodes mostly fail for the same few reasons. Here such an expression is evaluated over the rows
of a :class:`rulesched.engine.columns.NodeColumns` as an :class:`Encoded`: a code per row
and the value of each code. Conditions (``if``, a ``collect``'s ``where``) are columns from
:class:`rulesched.engine.vectorise.ColumnEvaluator`; strings and lists are built once per
distinct combination of the parts that differ between rows, with the language's own operators,
so each row's value is exactly what the closures give node by node. Anything else raises
:class:`rulesched.engine.arrays.Unsupported` (the caller groups nodes or goes node by node).
Next stage: :mod:`rulesched.engine.failures`, which counts a failed walk's reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import SCALAR, Col, Unsupported, bools
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.engine.vectorise import ColumnEvaluator, pod_value
from rulesched.lang.context import EvalContext
from rulesched.lang.frontend import ast
from rulesched.lang.schema import zero_value
from rulesched.lang.types import ListOf, MapOf
from rulesched.lang.values import COERCIONS, binary_function


class Encoded:
    """One value per row: ``values[codes[row]]`` (values need not be distinct)."""

    __slots__ = ("codes", "values")

    def __init__(self, codes: npt.NDArray[np.intp], values: list[Any]) -> None:
        self.codes, self.values = codes, values

    @staticmethod
    def constant(value: Any, n: int) -> Encoded:
        return Encoded(np.zeros(n, dtype=np.intp), [value])

    def counts(self) -> list[tuple[Any, int]]:
        """Each value present, with its number of rows."""
        if not len(self.codes):
            return []
        used = np.bincount(self.codes, minlength=len(self.values)).tolist()
        return [(self.values[c], k) for c, k in enumerate(used) if k]


def encode(
    ev: ColumnEvaluator, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows, scope: dict[str, Any]
) -> Encoded:
    """``expr``'s value on each row (see the module docstring); raises Unsupported."""
    if not len(rows):
        return Encoded(np.zeros(0, dtype=np.intp), [])
    value = _encode(ev, expr, ctx, cols, rows, scope)
    coercion = ev.notes.coercions.get(id(expr))
    if coercion is not None:
        convert = COERCIONS[coercion]
        value = Encoded(value.codes, [convert(v) for v in value.values])
    return value


def _encode(
    ev: ColumnEvaluator, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows, scope: dict[str, Any]
) -> Encoded:
    n = len(rows)
    analysis = ev._analysis
    if not analysis.reads_node(expr):  # the same on every row
        return Encoded.constant(_pod_side(ev, expr, ctx, scope), n)
    notes = ev.notes
    if notes.types.get(id(expr)) in SCALAR and ev.supports(expr):  # a string over the node, say: a column
        try:
            found = ev.evaluate(expr, ctx, cols, rows, scope)
        except Unsupported:  # (string concatenation, say: built below, per distinct operand)
            pass
        else:
            return Encoded.constant(found, n) if not isinstance(found, Col) else _from_array(found.array)
    match expr:
        case ast.If(cond=cond, then=then, otherwise=otherwise):
            mask = _condition(ev, cond, ctx, cols, rows, scope)
            if mask is None:  # (decided for every row by a pod-side condition)
                taken = _pod_side(ev, cond, ctx, scope)
                return encode(ev, then if taken else otherwise, ctx, cols, rows, scope)
            if mask.all() or not mask.any():
                return encode(ev, then if mask.all() else otherwise, ctx, cols, rows, scope)
            yes = encode(ev, then, ctx, cols, rows[mask], scope)
            no = encode(ev, otherwise, ctx, cols, rows[~mask], scope)
            codes = np.empty(n, dtype=np.intp)
            codes[mask] = yes.codes
            codes[~mask] = no.codes + len(yes.values)
            return Encoded(codes, yes.values + no.values)
        case ast.Binary(op=op, left=left, right=right) if op not in ("and", "or"):
            info = notes.binary[id(expr)]
            a = encode(ev, left, ctx, cols, rows, scope)
            b = encode(ev, right, ctx, cols, rows, scope)
            fn = binary_function(op, info.kind)
            cl = COERCIONS[info.left] if info.left is not None else _same
            cr = COERCIONS[info.right] if info.right is not None else _same
            return _combine(a, b, lambda x, y: fn(cl(x), cr(y)))
        case ast.ListExpr(items=items):
            out = Encoded.constant((), n)
            for item in items:
                out = _combine(out, encode(ev, item, ctx, cols, rows, scope), _append)
            return out
        case ast.Index(obj=obj, key=key) if not analysis.reads_node(key):
            k = _pod_side(ev, key, ctx, scope)
            container = encode(ev, obj, ctx, cols, rows, scope)
            t = notes.types[id(obj)]
            return Encoded(container.codes, [_index(t, v, k) for v in container.values])
        case ast.Aggregate(kind="collect", value=value, var=var, iterable=iterable, where=where) if (
            not analysis.reads_node(iterable)
        ):
            elements = list(_pod_side(ev, iterable, ctx, scope))
            if len(elements) > ev.unroll:
                raise Unsupported("list too long to unroll")
            out = Encoded.constant((), n)
            for item in elements:
                inner = {**scope, var: item}
                mask = None if where is None else _condition(ev, where, ctx, cols, rows, inner)
                if mask is None and where is not None and not _pod_side(ev, where, ctx, inner):
                    continue  # (left out on every row by a pod-side condition)
                if mask is None:
                    got = encode(ev, value, ctx, cols, rows, inner)
                    got = Encoded(got.codes, [(v,) for v in got.values])
                else:  # the value only where the element is kept; elsewhere an empty part
                    kept = encode(ev, value, ctx, cols, rows[mask], inner)
                    codes = np.zeros(n, dtype=np.intp)
                    codes[mask] = kept.codes + 1
                    got = Encoded(codes, [(), *[(v,) for v in kept.values]])
                out = _combine(out, got, _concat)
            return out
    raise Unsupported(f"cannot encode {type(expr).__name__}")


def _pod_side(ev: ColumnEvaluator, expr: ast.Expr, ctx: EvalContext, scope: dict[str, Any]) -> Any:
    """A pod-side part's value, kept in the context's scratch as the column evaluator keeps its
    own (the same key: one value whichever asks first; a reason is encoded every cycle that
    finds no node, its parts the pod's)."""
    return pod_value(ev.interp, expr, ("column pod value", id(expr)), ctx, scope)


def _condition(
    ev: ColumnEvaluator, cond: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows, scope: dict[str, Any]
) -> npt.NDArray[np.bool_] | None:
    """A condition per row, or None when the same for every row (pod-side)."""
    if not ev._analysis.reads_node(cond):
        return None
    if not ev.supports(cond):
        raise Unsupported("condition not evaluable as columns")
    found = ev.evaluate(cond, ctx, cols, rows, scope)
    if not isinstance(found, Col):
        return np.full(len(rows), bool(found))
    return bools(found)


def _from_array(array: npt.NDArray[Any]) -> Encoded:
    values: dict[Any, int] = {}
    try:
        codes = [values.setdefault(v, len(values)) for v in array.tolist()]
    except TypeError:
        raise Unsupported("unhashable values") from None
    return Encoded(np.array(codes, dtype=np.intp), list(values))


def _combine(a: Encoded, b: Encoded, fn: Callable[[Any, Any], Any]) -> Encoded:
    """fn(a's value, b's value) per row, computed once per pair present."""
    if len(a.values) == 1:
        x = a.values[0]
        return Encoded(b.codes, [fn(x, y) for y in b.values])
    if len(b.values) == 1:
        y = b.values[0]
        return Encoded(a.codes, [fn(x, y) for x in a.values])
    width = len(b.values)
    pairs, codes = np.unique(a.codes * width + b.codes, return_inverse=True)
    values = [fn(a.values[p // width], b.values[p % width]) for p in pairs.tolist()]
    return Encoded(codes.astype(np.intp, copy=False).reshape(-1), values)


def _same(v: Any) -> Any:
    return v


def _append(items: tuple[Any, ...], v: Any) -> tuple[Any, ...]:
    return (*items, v)


def _concat(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    return a + b


def _index(t: Any, container: Any, k: Any) -> Any:
    """The interpreter's indexing: a list by position (its element type's zero beyond the
    ends), a map by key (its value type's zero when absent)."""
    if isinstance(t, ListOf):
        ok = isinstance(k, int) and -len(container) <= k < len(container)
        return container[k] if ok else zero_value(t.elem)
    assert isinstance(t, MapOf)
    return container[k] if k in container else zero_value(t.value)
