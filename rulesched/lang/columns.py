"""Column evaluation: one rule over many nodes at once, as numpy arrays.

The closures of :mod:`rulesched.lang.compile` answer one (pod, node) at a time; arithmetic costs
a call per operator per node. For a pod unlike any before it the scheduler needs every rule on
hundreds or thousands of nodes, so a rule whose body is arithmetic, comparisons and logic over
node values (``node.allocatable.cpu``, ``node.free["nvidia.com/gpu"]``, ``len(node.pods)``)
and values known once the pod is (``pod.requests.cpu``, a constant) is evaluated here as array
operations over the nodes' columns instead. Built-ins and record fields that numpy cannot
express are called per node inside the column (the same implementations); only what cannot be
expressed at all (a loop over a node's own list, ``in`` over lists) leaves the rule to the
closures, decided once per rule when the rules load (:func:`vectorisable`).

Answers are those of the reference interpreter, exactly:

* the pod-only parts are evaluated by :class:`rulesched.lang.interp.Interpreter` itself;
* integers stay int64 only while every intermediate provably fits (bounds are checked before
  each operation from the operands' largest magnitudes); an integer meets floating point only
  while it is at most 2**53, where the conversion is exact and IEEE arithmetic gives what
  Python's does. Otherwise evaluation raises :class:`Unsupported` and the caller falls back to
  the closures for that rule;
* division by zero is 0, as in :mod:`rulesched.lang.values`; ``and``/``or``/``if`` evaluate their
  later operands only on the rows that need them.

:class:`NodeColumns` caches node values (one array per path) over a fixed node sequence; its
owner says which rows changed. Next stage: :class:`rulesched.lang.ruleset.BoundRules`
(``filter_mask`` and ``score_matrix``), called by ``rulesched.scheduler.table``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.lang import ast, schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.check import Annotations
from rulesched.lang.context import EvalContext
from rulesched.lang.interp import Interpreter
from rulesched.lang.schema import zero_value
from rulesched.lang.types import (
    BOOL,
    DURATION,
    NUMBER,
    QUANTITY,
    STRING,
    TO_MILLI,
    TO_NUMBER,
    MapOf,
    Type,
)
from rulesched.lang.values import COERCIONS, as_score, binary_function

Rows = npt.NDArray[np.intp]
Array = npt.NDArray[Any]
INT_LIMIT = 2**62  # an int64 result must stay below this (headroom for one more + or -)
EXACT_LIMIT = 2**53  # integers up to this convert to float64 exactly
MAX_ITEMS = 64  # elements of a pod-side list a quantifier is unrolled over
_NUMERIC = (NUMBER, QUANTITY, DURATION)
_SCALAR = (*_NUMERIC, STRING, BOOL)
_NUMPY_CALLS = frozenset({"abs", "floor", "ceil", "min", "max", "len", "number", "seconds"})


class Unsupported(Exception):
    """This rule cannot be evaluated as columns here (a value beyond the exact range, a list);
    the caller evaluates it node by node."""


class Col:
    """A value per row: a numpy array (bool, int64, float64, or object for anything else)."""

    __slots__ = ("array", "_bound")

    def __init__(self, array: Array, bound: int | float | None = None) -> None:
        self.array = array
        self._bound = bound

    @property
    def bound(self) -> int | float:
        """The largest magnitude in the column (0 when empty)."""
        if self._bound is None:
            a = self.array
            if a.dtype == object:
                raise Unsupported("not a numeric column")
            if not len(a):
                self._bound = 0
            elif a.dtype.kind == "f":
                self._bound = float(np.max(np.abs(a)))
            else:
                self._bound = int(max(int(a.max()), -int(a.min())))
        return self._bound

    @property
    def is_float(self) -> bool:
        return bool(self.array.dtype.kind == "f")


class NodeColumns:
    """Node values as arrays over a fixed sequence of nodes, each built on first use.

    Columns are node-only facts (a node's allocatable cpu, its pod count), so one store serves
    every pod; :meth:`update` re-reads the rows of nodes that changed, :meth:`clear` drops all."""

    def __init__(self, nodes: Sequence[Any]) -> None:
        self.nodes = nodes
        self._columns: dict[Any, tuple[Callable[[Any], Any], Array]] = {}
        self._objects: Array | None = None
        self._groups: dict[tuple[str, ...], Groups | None] = {}

    def objects(self) -> Array:
        """The nodes themselves, as an object array."""
        if self._objects is None:
            self._objects = np.fromiter(self.nodes, dtype=object, count=len(self.nodes))
        return self._objects

    def column(self, key: Any, read: Callable[[Any], Any], kind: Type) -> Array:
        hit = self._columns.get(key)
        if hit is None:
            hit = self._columns[key] = (read, typed([read(n) for n in self.nodes], kind))
        return hit[1]

    def groups(self, fields: tuple[str, ...]) -> Groups | None:
        """Nodes grouped by their values of these node fields: each row's group, and one row per
        group (its representative). None when the values are unhashable or nearly all distinct."""
        if fields not in self._groups:
            self._groups[fields] = Groups.of(self.nodes, fields)
        return self._groups[fields]

    def update(self, rows: Sequence[int]) -> None:
        """Re-read the given rows of every column (their nodes changed)."""
        if not rows:
            return
        for fields, groups in list(self._groups.items()):
            if groups is None or not groups.still(self.nodes, rows):
                del self._groups[fields]
        nodes, index = self.nodes, list(rows)
        for key, (read, array) in list(self._columns.items()):
            values = [read(nodes[i]) for i in index]
            if array.dtype == object:
                array[index] = np.fromiter(values, dtype=object, count=len(values))
            elif _dtype(values, None) == array.dtype:
                array[index] = values
            else:  # a value the column's dtype cannot hold exactly: build it again when asked
                del self._columns[key]

    def clear(self) -> None:
        self._columns.clear()
        self._groups.clear()
        self._objects = None

    def __len__(self) -> int:
        return len(self._columns)


class Groups:
    """Rows grouped by the values of some node fields (``codes[row]`` is the row's group;
    ``representatives[g]`` a row of group g). A rule that reads the node only through those
    fields has one answer per group, so it is evaluated on the representatives alone."""

    __slots__ = ("fields", "codes", "representatives", "_index", "_getters")

    def __init__(self, fields: tuple[str, ...], codes: npt.NDArray[np.intp], representatives: list[int],
                 index: dict[Any, int]) -> None:
        self.fields, self.codes, self.representatives, self._index = fields, codes, representatives, index
        self._getters = _getters(fields)

    @staticmethod
    def of(nodes: Sequence[Any], fields: tuple[str, ...]) -> Groups | None:
        getters = _getters(fields)
        index: dict[Any, int] = {}
        representatives: list[int] = []
        codes = np.empty(len(nodes), dtype=np.intp)
        limit = max(MAX_GROUPS, len(nodes) // 8)
        try:
            for row, node in enumerate(nodes):
                key = tuple(_frozen(get(node)) for get in getters)
                code = index.get(key)
                if code is None:
                    if len(representatives) >= limit:
                        return None
                    code = index[key] = len(representatives)
                    representatives.append(row)
                codes[row] = code
        except TypeError:  # unhashable values (pods, records holding dicts)
            return None
        return Groups(fields, codes, representatives, index)

    def still(self, nodes: Sequence[Any], rows: Sequence[int]) -> bool:
        """Whether the changed rows kept their group (a pod bound to a node leaves its taints)."""
        getters, index, codes = self._getters, self._index, self.codes
        try:
            return all(index.get(tuple(_frozen(get(nodes[r])) for get in getters)) == codes[r] for r in rows)
        except TypeError:
            return False


MAX_GROUPS = 64


def _getters(fields: tuple[str, ...]) -> list[Callable[[Any], Any]]:
    node_fields = schema.RECORDS[schema.NODE]
    return [node_fields[f].get for f in fields]


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return frozenset(value.items())
    if isinstance(value, list):
        return tuple(value)
    hash(value)
    return value


def node_fields(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> tuple[str, ...] | None:
    """The node fields ``expr`` reads, when it reads the node only as ``node.FIELD`` (sorted);
    None when it passes the node as a whole (to a built-in) or reads none."""
    found: set[str] = set()
    seen: set[str] = set()

    def walk(e: ast.Expr, parent: ast.Expr | None) -> bool:
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "let":
                if ref.name not in seen:
                    seen.add(ref.name)
                    return walk(lets[ref.name].value, None)
                return True
            if ref.kind == "bound" or ref.name != schema.NODE_VARIABLE:
                return True
            attr = notes.attrs.get(id(parent)) if isinstance(parent, ast.Attr) else None
            if attr is None or attr.field is None:
                return False
            assert isinstance(parent, ast.Attr)
            found.add(parent.name)
            return True
        return all(walk(c, e) for c in ast.children(e))

    if not walk(expr, None) or not found:
        return None
    return tuple(sorted(found))


def typed(values: list[Any], kind: Type | None) -> Array:
    """Values as an array whose elements mean exactly what the Python values do: bool, int64
    (ints that fit), float64 (floats, and ints up to 2**53 beside them), else object."""
    if kind == BOOL and all(type(v) is bool for v in values):
        return np.array(values, dtype=bool)
    if kind in _NUMERIC and values:  # the common case, checked after numpy inferred the dtype
        try:
            a = np.array(values)
        except OverflowError:
            a = None
        if a is not None and a.dtype == np.int64 and -INT_LIMIT < int(a.min()) and int(a.max()) < INT_LIMIT:
            return a
    dtype = _dtype(values, kind)
    if dtype is object:
        return np.fromiter(values, dtype=object, count=len(values))
    return np.array(values, dtype=dtype)


def _dtype(values: list[Any], kind: Type | None) -> Any:
    if kind is not None and kind not in _SCALAR:
        return object
    ints = floats = bools = 0
    for v in values:
        t = type(v)
        if t is int:
            if not -INT_LIMIT < v < INT_LIMIT:
                return object
            ints += 1
        elif t is float:
            floats += 1
        elif t is bool:
            bools += 1
        else:
            return object
    if bools:
        return bool if bools == len(values) else object
    if floats:
        if ints and any(type(v) is int and not -EXACT_LIMIT <= v <= EXACT_LIMIT for v in values):
            return object
        return np.float64
    return np.int64


# --- which rules can be evaluated as columns ---------------------------------------------------


def vectorisable(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> bool:
    """Whether :class:`ColumnEvaluator` can evaluate ``expr`` (values may still make it raise
    :class:`Unsupported`)."""
    return _Analysis(notes, lets).supported(expr)


class _Analysis:
    def __init__(self, notes: Annotations, lets: dict[str, ast.Let]) -> None:
        self.notes, self.lets = notes, lets
        self._node: dict[int, bool] = {}

    def reads_node(self, expr: ast.Expr) -> bool:
        key = id(expr)
        hit = self._node.get(key)
        if hit is None:
            if isinstance(expr, ast.Name):
                ref = self.notes.names[key]
                if ref.kind == "let":
                    hit = self.reads_node(self.lets[ref.name].value)
                else:
                    hit = ref.kind != "bound" and ref.name == schema.NODE_VARIABLE
            else:
                hit = any(self.reads_node(c) for c in ast.children(expr))
            self._node[key] = hit
        return hit

    def supported(self, expr: ast.Expr) -> bool:
        if not self.reads_node(expr):
            return True
        notes = self.notes
        match expr:
            case ast.Name():
                ref = notes.names[id(expr)]
                return ref.kind != "let" or self.supported(self.lets[ref.name].value)
            case ast.Attr(obj=obj):
                return self.supported(obj)
            case ast.Index(obj=obj, key=key):
                return (isinstance(notes.types[id(obj)], MapOf) and not self.reads_node(key)
                        and self.supported(obj))
            case ast.Call(args=args):
                return all(self.supported(a) for a in args)
            case ast.Unary(operand=operand):
                return self.supported(operand)
            case ast.Binary(op=op, left=left, right=right):
                if op not in ("and", "or"):
                    info = notes.binary[id(expr)]
                    if info.kind == "seq" or op in ("in", "not in", "%"):
                        return False
                    if notes.types[id(left)] not in _SCALAR or notes.types[id(right)] not in _SCALAR:
                        return False
                return self.supported(left) and self.supported(right)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                return all(self.supported(e) for e in (cond, then, otherwise))
            case ast.Quantifier(iterable=iterable, where=where):
                return not self.reads_node(iterable) and (where is None or self.supported(where))
            case ast.Aggregate(kind=kind, iterable=iterable, value=value, where=where):
                return (kind == "sum" and not self.reads_node(iterable) and self.supported(value)
                        and (where is None or self.supported(where)))
        return False


# --- evaluation -------------------------------------------------------------------------------

Value = Any  # a Python value (the same for every row) or a Col


class ColumnEvaluator:
    """Evaluates checked expressions over the rows of a :class:`NodeColumns` for one pod."""

    def __init__(self, notes: Annotations, lets: dict[str, ast.Let]) -> None:
        self.notes, self.lets = notes, lets
        self.interp = Interpreter(notes, lets)
        self._analysis = _Analysis(notes, lets)
        self._paths: dict[int, tuple[Any, Callable[[Any], Any]] | None] = {}

    def evaluate(self, expr: ast.Expr, ctx: EvalContext, cols: NodeColumns, rows: Rows,
                 scope: dict[str, Any] | None = None) -> Value:
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
            return np.full(len(rows), as_score(value), dtype=np.int64)
        a = value.array
        if a.dtype == object:
            raise Unsupported("score values are not numbers numpy holds exactly")
        if a.dtype.kind == "f":
            a = np.where(np.isfinite(a), a, 0.0)  # as_score: NaN and the infinities score 0
            if len(a) and float(np.max(np.abs(a))) >= 2**63:
                raise Unsupported("score beyond int64")
            return np.trunc(a).astype(np.int64)
        return a.astype(np.int64, copy=False)

    def path(self, expr: ast.Expr) -> tuple[Any, Callable[[Any], Any]] | None:
        """For a read of the node through fields, resource keys and constant map keys (and
        ``len`` of one): a cache key and the reader; else None."""
        key = id(expr)
        if key not in self._paths:
            self._paths[key] = self._path(expr)
        return self._paths[key]

    def _path(self, expr: ast.Expr) -> tuple[Any, Callable[[Any], Any]] | None:
        notes = self.notes
        match expr:
            case ast.Name():
                ref = notes.names[id(expr)]
                if ref.kind == "let":
                    return self.path(self.lets[ref.name].value)
                if ref.kind != "bound" and ref.name == schema.NODE_VARIABLE:
                    return (), lambda n: n
                return None
            case ast.Attr(obj=obj):
                inner = self.path(obj)
                if inner is None:
                    return None
                base_key, base = inner
                attr = notes.attrs[id(expr)]
                if attr.field is not None:
                    get = attr.field.get
                    return (*base_key, ("f", id(attr.field))), (get if not base_key else lambda n: get(base(n)))
                resource = attr.resource
                return (*base_key, ("r", resource)), lambda n: base(n).get(resource, 0)
            case ast.Index(obj=obj, key=ast.Literal(value=k)) if isinstance(k, str) and not notes.coercions.get(id(expr.key)):
                inner = self.path(obj)
                t = notes.types[id(obj)]
                if inner is None or not isinstance(t, MapOf):
                    return None
                base_key, base = inner
                default = zero_value(t.value)
                return (*base_key, ("k", k)), lambda n: base(n).get(k, default)
            case ast.Call(func="len", args=(arg,)):
                inner = self.path(arg)
                if inner is None:
                    return None
                base_key, base = inner
                return (*base_key, ("len",)), lambda n: len(base(n))
        return None


class _Run:
    """One evaluation: the pod's context, the columns, and a memo of pod-only values."""

    def __init__(self, ev: ColumnEvaluator, ctx: EvalContext, cols: NodeColumns) -> None:
        self.ev, self.ctx, self.cols = ev, ctx, cols
        self.notes = ev.notes

    def value(self, expr: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value:
        ev = self.ev
        if not ev._analysis.reads_node(expr):
            return ev.interp.evaluate(expr, self.ctx, None, scope)
        path = ev.path(expr)
        if path is not None:
            key, read = path
            kind = self.notes.types[id(expr)]
            if key == ():
                out: Value = Col(self.cols.objects()[rows])
            else:
                out = Col(self.cols.column(key, read, kind)[rows])
        else:
            out = self._compute(expr, rows, scope)
        coercion = self.notes.coercions.get(id(expr))
        return out if coercion is None else _coerce(coercion, out)

    def _compute(self, expr: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value:
        notes = self.notes
        match expr:
            case ast.Name():  # a let that reads the node
                ref = notes.names[id(expr)]
                return self.value(self.ev.lets[ref.name].value, rows, scope)
            case ast.Attr(obj=obj):
                base = self._objects(self.value(obj, rows, scope))
                attr = notes.attrs[id(expr)]
                if attr.field is not None:
                    get = attr.field.get
                    return _col([get(x) for x in base], notes.types[id(expr)])
                resource = attr.resource
                return _col([x.get(resource, 0) for x in base], QUANTITY)
            case ast.Index(obj=obj, key=key):
                k = self.value(key, rows, scope)  # known: the analysis allows no node-read keys
                t = notes.types[id(obj)]
                assert isinstance(t, MapOf)
                default = zero_value(t.value)
                inner = self.ev.path(obj)
                if inner is not None and isinstance(k, str):  # node.free[r], r fixed by an unrolled loop
                    base_key, get = inner
                    read = _reader(get, k, default)
                    return Col(self.cols.column((*base_key, ("k", k)), read, t.value)[rows])
                maps = self._objects(self.value(obj, rows, scope))
                return _col([x[k] if k in x else default for x in maps], t.value)
            case ast.Call(func=func, args=args):
                return self._call(expr, func, args, rows, scope)
            case ast.Unary(op=op, operand=operand):
                v = self.value(operand, rows, scope)
                if not isinstance(v, Col):  # a shortcut decided it for every row
                    return (not v) if op == "not" else -v
                if op == "not":
                    return Col(~_bools(v))
                _need_numeric(v)
                return Col(-v.array, v.bound)
            case ast.Binary(op="and" | "or", left=left, right=right):
                return self._logic(expr.op, left, right, rows, scope)
            case ast.Binary(op=op, left=left, right=right):
                info = notes.binary[id(expr)]
                a = _coerce(info.left, self.value(left, rows, scope))
                b = _coerce(info.right, self.value(right, rows, scope))
                if not isinstance(a, Col) and not isinstance(b, Col):
                    return binary_function(op, info.kind)(a, b)
                return _binary(op, info.kind, a, b, notes.types[id(left)], notes.types[id(right)], len(rows))
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                c = self.value(cond, rows, scope)
                if not isinstance(c, Col):
                    return self.value(then if c else otherwise, rows, scope)
                mask = _bools(c)
                return _merge(mask, self.value(then, rows[mask], scope), self.value(otherwise, rows[~mask], scope),
                              len(rows))
            case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
                items = self._items(iterable, scope)
                if where is None:
                    return len(items) if kind == "count" else bool(items) if kind == "any" else True
                return self._quantify(kind, var, items, where, rows, scope)
            case ast.Aggregate(var=var, iterable=iterable, value=value, where=where):
                total: Value = 0
                for item in self._items(iterable, scope):
                    item_scope = {**scope, var: item}
                    v = self.value(value, rows, item_scope)
                    if where is not None:
                        keep = self.value(where, rows, item_scope)
                        if not isinstance(keep, Col):
                            if not keep:
                                continue
                        else:
                            v = _merge(_bools(keep), _take(v, _bools(keep)), 0, len(rows))
                    total = _add(total, v, len(rows))
                return total
        raise Unsupported(f"cannot evaluate {type(expr).__name__} as columns")

    def _items(self, iterable: ast.Expr, scope: dict[str, Any]) -> list[Any]:
        items = list(self.ev.interp.evaluate(iterable, self.ctx, None, scope))
        if len(items) > MAX_ITEMS:
            raise Unsupported("list too long to unroll")
        return items

    def _quantify(self, kind: str, var: str, items: list[Any], where: ast.Expr, rows: Rows,
                  scope: dict[str, Any]) -> Value:
        n = len(rows)
        if kind == "count":
            total: Value = 0
            for item in items:
                hit = self.value(where, rows, {**scope, var: item})
                total = _add(total, Col(_bools(hit).astype(np.int64), None) if isinstance(hit, Col) else int(bool(hit)), n)
            return total
        # any / all: each element is evaluated only on the rows still undecided
        decided_as = kind == "any"
        result = np.full(n, not decided_as)
        open_ = np.arange(n)
        for item in items:
            if not len(open_):
                break
            hit = self.value(where, rows[open_], {**scope, var: item})
            hits = _bools(hit) if isinstance(hit, Col) else np.full(len(open_), bool(hit))
            done = hits if decided_as else ~hits
            result[open_[done]] = decided_as
            open_ = open_[~done]
        return Col(result)

    def _logic(self, op: str, left: ast.Expr, right: ast.Expr, rows: Rows, scope: dict[str, Any]) -> Value:
        a = self.value(left, rows, scope)
        is_and = op == "and"
        if not isinstance(a, Col):
            if bool(a) is not is_and:  # false and x / true or x
                return a
            return self.value(right, rows, scope)
        mask = _bools(a)
        need = mask if is_and else ~mask
        out = mask.copy()
        if need.any():
            b = self.value(right, rows[need], scope)
            out[need] = _bools(b) if isinstance(b, Col) else bool(b)
        return Col(out)

    def _call(self, expr: ast.Call, func: str, args: tuple[ast.Expr, ...], rows: Rows, scope: dict[str, Any]) -> Value:
        builtin = BUILTINS[func]
        coercions = self.notes.calls[id(expr)]
        values = [_coerce(c, self.value(a, rows, scope)) for a, c in zip(args, coercions, strict=True)]
        n = len(rows)
        if func in _NUMPY_CALLS and all(not isinstance(v, Col) or v.array.dtype != object for v in values):
            if func in ("number", "seconds"):
                return values[0]
            if func == "abs":
                v = values[0]
                return Col(np.abs(v.array), v._bound)
            if func in ("floor", "ceil"):
                v = values[0]
                if not v.is_float:
                    return v
                if v.bound > EXACT_LIMIT:
                    raise Unsupported("floor of a float beyond 2**53")
                return Col((np.floor if func == "floor" else np.ceil)(v.array).astype(np.int64))
            if func in ("min", "max"):
                return _extreme(func, values, n)
        shortcut = self._shortcut(func, args, values, rows)
        if shortcut is not None:
            return shortcut
        # Anything else: the built-in itself, called per row.
        impl = builtin.impl
        known = [v for v in values if not isinstance(v, Col)]
        if builtin.context:
            known.insert(0, self.ctx)
        last = values[-1]
        if isinstance(last, Col) and len(known) == len(values) - 1 + builtin.context:
            # the usual shape (f(pod-side value, node value), f(ctx, node)): one map, no tuples
            results = list(map(partial(impl, *known), last.array.tolist()))
        else:
            columns = [v.array.tolist() if isinstance(v, Col) else [v] * n for v in values]
            if builtin.context:
                columns.insert(0, [self.ctx] * n)
            results = [impl(*a) for a in zip(*columns, strict=True)]
        return _col(results, self.notes.types[id(expr)])

    def _shortcut(self, func: str, args: tuple[ast.Expr, ...], values: list[Value], rows: Rows) -> Value | None:
        """Built-ins whose pod-side argument decides much: nodeSelector matching as a few label
        columns (``subset``), no host ports wanted (``ports_conflict``)."""
        first = values[0]
        if isinstance(first, Col) or len(values) != 2 or not isinstance(values[1], Col):
            return None
        if func == "ports_conflict" and not first:
            return False
        if func == "subset":
            if not first:
                return True
            inner = self.ev.path(args[1])
            if inner is None or len(first) > MAX_ITEMS:
                return None
            base_key, get = inner
            out = np.ones(len(rows), dtype=bool)
            for k, v in first.items():  # big.get(k) == v for every key: a missing label is None
                labels = self.cols.column((*base_key, ("get", k)), _reader(get, k, None), STRING)[rows]
                hit = np.asarray(labels == v, dtype=bool)
                out &= hit
            return Col(out)
        return None

    @staticmethod
    def _objects(v: Value) -> list[Any]:
        assert isinstance(v, Col)
        objects: list[Any] = v.array.tolist()
        return objects


# --- operations on columns --------------------------------------------------------------------


def _reader(base: Callable[[Any], Any], key: str, default: Any) -> Callable[[Any], Any]:
    return lambda n: base(n).get(key, default)


def _col(values: list[Any], kind: Type) -> Col:
    """A built-in's or field's results per row as a column."""
    if kind == BOOL:
        return Col(np.array(values, dtype=bool))
    if kind in _NUMERIC:
        try:
            a = np.array(values)
        except OverflowError:
            return Col(np.fromiter(values, dtype=object, count=len(values)))
        if a.dtype == np.int64:
            return Col(a)
        if a.dtype == np.float64 and all(type(v) is float for v in values):
            return Col(a)
    return Col(typed(values, kind))


def _bools(v: Value) -> npt.NDArray[np.bool_]:
    if isinstance(v, Col):
        a = v.array
        return a if a.dtype == bool else a.astype(bool)
    raise AssertionError("a known value where a column was expected")  # pragma: no cover


def _need_numeric(v: Value) -> None:
    if isinstance(v, Col) and (v.array.dtype == object or v.array.dtype == bool):
        raise Unsupported("not a numeric column")


def _num(v: Value) -> tuple[Any, int | float, bool]:
    """(operand for numpy, largest magnitude, is float)."""
    if isinstance(v, Col):
        _need_numeric(v)
        return v.array, v.bound, v.is_float
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Unsupported("not a number")
    if isinstance(v, int) and not -INT_LIMIT < v < INT_LIMIT:
        raise Unsupported("integer beyond int64")
    return v, abs(v), isinstance(v, float)


def _exact_mix(a_bound: int | float, a_float: bool, b_bound: int | float, b_float: bool) -> None:
    """An int meeting a float is converted: it must be exactly representable."""
    if a_float != b_float and (b_bound if a_float else a_bound) > EXACT_LIMIT:
        raise Unsupported("integer beyond 2**53 meets a float")


def _int_result(a: Array, bound: int | float) -> Col:
    if bound >= INT_LIMIT:
        raise Unsupported("integer beyond int64")
    return Col(a)


def _binary(op: str, kind: str, a: Value, b: Value, left: Type, right: Type, n: int) -> Value:
    if left == STRING or right == STRING or left == BOOL or right == BOOL:
        return _compare_objects(op, a, b)
    x, xb, xf = _num(a)
    y, yb, yf = _num(b)
    floats = xf or yf
    if floats:
        _exact_mix(xb, xf, yb, yf)
    if op in ("==", "!=", "<", "<=", ">", ">="):
        return Col(np.asarray(_COMPARE[op](x, y), dtype=bool))
    if op in ("+", "-"):
        out = np.add(x, y) if op == "+" else np.subtract(x, y)
        return _float_result(out) if floats else _int_result(out, xb + yb)
    if op == "*":
        if kind == "q" and floats:
            product = np.multiply(x, y)
            return _ceil_int(product)
        out = np.multiply(x, y)
        return _float_result(out) if floats else _int_result(out, xb * yb)
    zero = np.equal(y, 0)
    if op == "/":
        if kind == "q":  # values._q_div: ceil(a / b) for a float b, exact ceiling for ints
            if yf:
                return _ceil_int(_safe_div(x, y, zero, n))
            if xf:
                raise Unsupported("quantity division of a float by an int")
            return _int_result(_where_nonzero(zero, -np.floor_divide(np.negative(x), np.where(zero, 1, y)), n), xb)
        if (not xf and xb > EXACT_LIMIT) or (not yf and yb > EXACT_LIMIT):
            raise Unsupported("true division of integers beyond 2**53")
        return _float_result(_safe_div(x, y, zero, n))
    if op == "//":
        if floats:
            raise Unsupported("floor division of floats")
        return _int_result(_where_nonzero(zero, np.floor_divide(x, np.where(zero, 1, y)), n), xb)
    raise Unsupported(f"operator {op}")


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
}


def _compare_objects(op: str, a: Value, b: Value) -> Value:
    x = a.array if isinstance(a, Col) else a
    y = b.array if isinstance(b, Col) else b
    if op not in _COMPARE:
        raise Unsupported(f"operator {op} on strings")
    # Elementwise Python comparisons (object arrays) or numpy's on bool arrays: same answers.
    return Col(np.asarray(_COMPARE[op](x, y), dtype=bool))


def _safe_div(x: Any, y: Any, zero: Any, n: int) -> Array:
    out = np.zeros(n, dtype=np.float64)
    np.divide(x, y, out=out, where=np.broadcast_to(~zero, (n,)))
    return out


def _where_nonzero(zero: Any, values: Any, n: int) -> Array:
    return np.where(zero, 0, values) if np.ndim(zero) else (np.zeros(n, dtype=np.int64) if zero else values)


def _float_result(a: Array) -> Col:
    col = Col(np.asarray(a, dtype=np.float64))
    if not np.isfinite(col.array).all():
        raise Unsupported("float overflow")
    return col


def _ceil_int(a: Array) -> Col:
    col = Col(np.asarray(a, dtype=np.float64))
    if col.bound > EXACT_LIMIT or not np.isfinite(col.array).all():
        raise Unsupported("quantity beyond 2**53")
    return Col(np.ceil(col.array).astype(np.int64))


def _extreme(func: str, values: list[Value], n: int) -> Value:
    parts = [_num(v) for v in values]
    floats = [p for p in parts if p[2]]
    ints = [p for p in parts if not p[2]]
    if floats and ints and max(p[1] for p in ints) > EXACT_LIMIT:
        raise Unsupported("integer beyond 2**53 meets a float")
    fn = np.minimum if func == "min" else np.maximum
    out = parts[0][0]
    for p in parts[1:]:
        out = fn(out, p[0])
    # Python's min/max return one of the arguments: an int and an equal float are the same number.
    out = np.broadcast_to(out, (n,)).copy()
    return Col(out.astype(np.float64) if floats else out.astype(np.int64))


def _add(total: Value, v: Value, n: int) -> Value:
    if not isinstance(total, Col) and not isinstance(v, Col):
        return total + v
    return _binary("+", "", total, v, NUMBER, NUMBER, n)


def _take(v: Value, mask: npt.NDArray[np.bool_]) -> Value:
    return Col(v.array[mask]) if isinstance(v, Col) else v


def _merge(mask: npt.NDArray[np.bool_], yes: Value, no: Value, n: int) -> Value:
    """Rows where ``mask`` from ``yes`` (computed on those rows only), the rest from ``no``."""
    parts = (yes, no)
    kinds = {p.array.dtype.kind if isinstance(p, Col) else _kind_of(p) for p in parts}
    dtype: Any
    if kinds == {"b"}:
        dtype = bool
    elif kinds <= {"i", "f"}:
        numbers = [_num(p) for p in parts]  # raises for ints beyond int64
        dtype = np.int64
        if "f" in kinds:
            dtype = np.float64
            if any(not is_float and bound > EXACT_LIMIT for _, bound, is_float in numbers):
                raise Unsupported("integer beyond 2**53 meets a float")
    else:
        dtype = object
    out = np.empty(n, dtype=dtype)
    for where, part in ((mask, yes), (~mask, no)):
        if isinstance(part, Col):
            out[where] = part.array
        elif dtype is object:
            count = int(where.sum())
            out[np.flatnonzero(where)] = np.fromiter([part] * count, dtype=object, count=count)
        else:
            out[where] = part
    return Col(out)


def _kind_of(v: Any) -> str:
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    return "O"


def _coerce(coercion: str | None, v: Value) -> Value:
    if coercion is None:
        return v
    if not isinstance(v, Col):
        return COERCIONS[coercion](v)
    x, bound, is_float = _num(v)
    if coercion == TO_MILLI:
        if is_float:
            return _ceil_int(np.multiply(x, 1000.0))
        return _int_result(np.multiply(x, 1000), bound * 1000)
    if coercion == TO_NUMBER:
        if bound > EXACT_LIMIT:
            raise Unsupported("quantity beyond 2**53 as a number")
        return Col(np.divide(x, 1000.0), None)
    raise AssertionError(coercion)  # pragma: no cover


__all__ = ["Col", "ColumnEvaluator", "Groups", "NodeColumns", "Unsupported", "node_fields", "typed", "vectorisable"]
