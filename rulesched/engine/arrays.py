"""Exact arithmetic on numpy arrays: the operators of :mod:`rulesched.lang.values`, per row.

Column evaluation (:mod:`rulesched.engine.vectorise`) holds one value per node in an array. Its
answers must be the reference interpreter's to the last bit, so:

* integers stay int64 only while every intermediate provably fits: bounds (the operands' largest
  magnitudes) are checked before each operation, with headroom below 2**63;
* an integer meets floating point only while it is at most 2**53, where the conversion is exact
  and IEEE arithmetic gives what Python's does;
* division by zero is 0, quantities round up to whole milli-units, as in ``values``.

Where that cannot be promised an operation raises :class:`Unsupported`, and the caller evaluates
the rule node by node instead. Values are a :class:`Col` (an array per row) or a plain Python
value, the same for every row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.lang.types import BOOL, DURATION, NUMBER, QUANTITY, STRING, TO_MILLI, TO_NUMBER, Type
from rulesched.lang.values import COERCIONS

Array = npt.NDArray[Any]
INT_LIMIT = 2**62  # an int64 result must stay below this (headroom for one more + or -)
EXACT_LIMIT = 2**53  # integers up to this convert to float64 exactly
NUMERIC = (NUMBER, QUANTITY, DURATION)
SCALAR = (*NUMERIC, STRING, BOOL)


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
        """At least the largest magnitude in the column (0 when empty): exact when computed
        here, else a bound proved from the operands (checks against it are then conservative)."""
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


def typed(values: list[Any], kind: Type | None) -> Array:
    """Values as an array whose elements mean exactly what the Python values do: bool, int64
    (ints that fit), float64 (floats, and ints up to 2**53 beside them), else object."""
    if kind == BOOL and all(type(v) is bool for v in values):
        return np.array(values, dtype=bool)
    if kind in NUMERIC and values:  # the common case, checked after numpy inferred the dtype
        try:
            a = np.array(values)
        except OverflowError:
            a = None
        if a is not None and a.dtype == np.int64 and -INT_LIMIT < int(a.min()) and int(a.max()) < INT_LIMIT:
            return a
    dtype = dtype_of(values, kind)
    if dtype is object:
        return np.fromiter(values, dtype=object, count=len(values))
    return np.array(values, dtype=dtype)


def dtype_of(values: list[Any], kind: Type | None) -> Any:
    if kind is not None and kind not in SCALAR:
        return object
    if not values and kind in (STRING, BOOL):  # no rows: still the type's array
        return bool if kind == BOOL else object
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


Value = Any  # a Python value (the same for every row) or a Col


def column_of(values: list[Any], kind: Type) -> Col:
    """A built-in's or field's results per row as a column."""
    if kind == BOOL:
        return Col(np.array(values, dtype=bool))
    if kind in NUMERIC:
        try:
            a = np.array(values)
        except OverflowError:
            return Col(np.fromiter(values, dtype=object, count=len(values)))
        if a.dtype == np.float64 and all(type(v) is float for v in values):
            return Col(a)
    return Col(typed(values, kind))  # ints checked against INT_LIMIT there


def bools(v: Value) -> npt.NDArray[np.bool_]:
    if isinstance(v, Col):
        a = v.array
        return a if a.dtype == bool else a.astype(bool)
    raise AssertionError("a known value where a column was expected")  # pragma: no cover


def need_numeric(v: Value) -> None:
    if isinstance(v, Col) and (v.array.dtype == object or v.array.dtype == bool):
        raise Unsupported("not a numeric column")


def _num(v: Value) -> tuple[Any, int | float, bool]:
    """(operand for numpy, largest magnitude, is float)."""
    x, is_float = _operand(v)
    return x, _magnitude(v), is_float


def _operand(v: Value) -> tuple[Any, bool]:
    """(operand for numpy, is float), without the magnitude: a comparison of ints needs none,
    and finding it costs two reductions over the column."""
    if isinstance(v, Col):
        need_numeric(v)
        return v.array, v.is_float
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Unsupported("not a number")
    if isinstance(v, int) and not -INT_LIMIT < v < INT_LIMIT:
        raise Unsupported("integer beyond int64")
    return v, isinstance(v, float)


def _magnitude(v: Value) -> int | float:
    """The largest magnitude of an operand :func:`_operand` accepted."""
    return v.bound if isinstance(v, Col) else abs(v)


def _compares_objects(t: Type) -> bool:
    # identity first: the numeric types are the common case, and a dataclass == is a call
    if t is NUMBER or t is QUANTITY or t is DURATION:
        return False
    return t is STRING or t is BOOL or t == STRING or t == BOOL


def _int_result(a: Array, bound: int | float) -> Col:
    if bound >= INT_LIMIT:
        raise Unsupported("integer beyond int64")
    # The bound proved is kept: an upper bound serves every later check as well as the exact
    # magnitude (a column's bound is already the whole column's for a subset of its rows).
    return Col(a, bound)


def binary(op: str, kind: str, a: Value, b: Value, left: Type, right: Type, n: int) -> Value:
    if _compares_objects(left) or _compares_objects(right):
        return _compare_objects(op, a, b)
    x, xf = _operand(a)
    y, yf = _operand(b)
    floats = xf or yf
    # Magnitudes are asked for only where an answer depends on them (each can cost two
    # reductions over a column): the int side of an int meeting a float, an int result's bound.
    if xf != yf and _magnitude(b if xf else a) > EXACT_LIMIT:
        raise Unsupported("integer beyond 2**53 meets a float")
    if op in _COMPARE:  # ints compare exactly in int64 whatever their size: no bounds needed
        return Col(np.asarray(_COMPARE[op](x, y), dtype=bool))
    if op in ("+", "-"):
        out = np.add(x, y) if op == "+" else np.subtract(x, y)
        return _float_result(out) if floats else _int_result(out, _magnitude(a) + _magnitude(b))
    if op == "*":
        if kind == "q" and floats:
            product = np.multiply(x, y)
            return _ceil_int(product)
        out = np.multiply(x, y)
        return _float_result(out) if floats else _int_result(out, _magnitude(a) * _magnitude(b))
    zero = np.equal(y, 0)
    if op == "/":
        if kind == "q":  # values._q_div: ceil(a / b) for a float b, exact ceiling for ints
            if yf:
                return _ceil_int(_safe_div(x, y, zero, n))
            if xf:
                raise Unsupported("quantity division of a float by an int")
            return _int_result(
                _where_nonzero(zero, -np.floor_divide(np.negative(x), np.where(zero, 1, y)), n), _magnitude(a)
            )
        out = _safe_div(x, y, zero, n)
        if (not xf and _magnitude(a) > EXACT_LIMIT) or (not yf and _magnitude(b) > EXACT_LIMIT):
            _divide_big_rows(out, x, xf, y, yf, n)
        return _float_result(out)
    if op == "//":
        if floats:
            raise Unsupported("floor division of floats")
        return _int_result(_where_nonzero(zero, np.floor_divide(x, np.where(zero, 1, y)), n), _magnitude(a))
    raise Unsupported(f"operator {op}")


_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def _compare_objects(op: str, a: Value, b: Value) -> Value:
    x = a.array if isinstance(a, Col) else a
    y = b.array if isinstance(b, Col) else b
    if op not in _COMPARE:
        raise Unsupported(f"operator {op} on strings")
    # Elementwise Python comparisons (object arrays) or numpy's on bool arrays: same answers.
    return Col(np.asarray(_COMPARE[op](x, y), dtype=bool))


def _divide_big_rows(out: Array, x: Any, xf: bool, y: Any, yf: bool, n: int) -> None:
    """Python divides two ints exactly rounded, numpy converts each to float64 first: rows with
    an int beyond 2**53 are divided in Python (milli-byte memory times 100 gets there)."""
    xs, ys = np.broadcast_to(x, (n,)), np.broadcast_to(y, (n,))
    big = np.zeros(n, dtype=bool)
    for values, is_float in ((xs, xf), (ys, yf)):
        if not is_float:
            big |= np.abs(values) > EXACT_LIMIT
    rows = np.flatnonzero(big)
    if len(rows):
        out[rows] = [a / b if b else 0 for a, b in zip(xs[rows].tolist(), ys[rows].tolist(), strict=True)]


def _safe_div(x: Any, y: Any, zero: Any, n: int) -> Array:
    out = np.zeros(n, dtype=np.float64)
    np.divide(x, y, out=out, where=~zero)  # (a scalar ``where`` broadcasts like an array)
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


def extreme(func: str, values: list[Value], n: int) -> Value:
    parts = [_operand(v) for v in values]
    floats = any(is_float for _, is_float in parts)
    if floats and any(not f and _magnitude(v) > EXACT_LIMIT for v, (_, f) in zip(values, parts, strict=True)):
        raise Unsupported("integer beyond 2**53 meets a float")
    fn = np.minimum if func == "min" else np.maximum
    out = parts[0][0]
    for p in parts[1:]:
        out = fn(out, p[0])
    # Python's min/max return one of the arguments: an int and an equal float are the same number.
    out = np.broadcast_to(out, (n,)).copy()
    if floats:
        return Col(out.astype(np.float64))
    return Col(out.astype(np.int64), _known_bound(values))


def add(total: Value, v: Value, n: int) -> Value:
    if not isinstance(total, Col) and not isinstance(v, Col):
        return total + v
    return binary("+", "", total, v, NUMBER, NUMBER, n)


def take(v: Value, mask: npt.NDArray[np.bool_]) -> Value:
    return Col(v.array[mask]) if isinstance(v, Col) else v


def merge(mask: npt.NDArray[np.bool_], yes: Value, no: Value, n: int) -> Value:
    """Rows where ``mask`` from ``yes`` (computed on those rows only), the rest from ``no``."""
    parts = (yes, no)
    kinds = {p.array.dtype.kind if isinstance(p, Col) else _kind_of(p) for p in parts}
    dtype: Any
    if kinds == {"b"}:
        dtype = bool
    elif kinds <= {"i", "f"}:
        numbers = [_operand(p) for p in parts]  # raises for ints beyond int64
        dtype = np.int64
        if "f" in kinds:
            dtype = np.float64
            if any(
                not is_float and _magnitude(p) > EXACT_LIMIT for p, (_, is_float) in zip(parts, numbers, strict=True)
            ):
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
    return Col(out, _known_bound(parts) if dtype is np.int64 else None)


def _known_bound(values: Sequence[Value]) -> int | float | None:
    """The largest of the values' magnitudes where each is known without a reduction (a plain
    number, a column whose bound is kept): a bound for any row picked from them; else None."""
    found: int | float = 0
    for v in values:
        if isinstance(v, Col):
            if v._bound is None:
                return None
            found = max(found, v._bound)
        else:
            found = max(found, abs(v))
    return found


def _kind_of(v: Any) -> str:
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    return "O"


def coerce(coercion: str | None, v: Value) -> Value:
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


SMALL_CODES = 1 << 16  # the largest code unique_codes counts by a table (larger: numpy's sort)


def unique_codes(codes: npt.NDArray[np.integer[Any]]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``np.unique(codes, return_inverse=True)`` for non-negative integer codes (the distinct
    codes ascending, and each code's index among them), counted by a table of the codes below
    :data:`SMALL_CODES` rather than sorted (a few distinct codes over hundreds of rows: reasons
    per node, what every failed cycle counts)."""
    if not len(codes) or int(codes.min()) < 0 or int(codes.max()) >= SMALL_CODES:
        distinct, inverse = np.unique(codes, return_inverse=True)
        return distinct.astype(np.intp, copy=False), inverse.astype(np.intp, copy=False).reshape(-1)
    present = np.bincount(codes) > 0
    index = np.cumsum(present, dtype=np.intp) - 1
    return np.flatnonzero(present), index[codes]
