"""Run-time meaning of the operators, shared by the compiler and the reference interpreter.

Every operation is total: division or remainder by zero is 0, a missing map key reads as the
value type's zero (see :func:`rulesched.lang.types.zero`), so no rule evaluation raises.
Quantities stay integers of milli-units; a result that is not a whole milli-unit rounds up, as
Kubernetes' ``MilliValue`` does. Where a whole number is needed (a quantity, ``floor``, ``ceil``),
a float infinity (``1e308 * 10``) is held at the largest float, as ``exp`` is, so it still
compares as larger than any quantity; NaN is 0.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Callable
from typing import Any

from rulesched.lang.types import TO_MILLI, TO_NUMBER

MILLI = 1000


LARGEST = int(sys.float_info.max)  # an infinity as a whole number (309 digits)


def whole(value: Any, rounding: Callable[[float], int] = math.ceil) -> int:
    """A number rounded to an integer (up, or as ``rounding`` says): an infinity held at
    ±LARGEST, NaN 0."""
    try:
        return int(rounding(value))
    except OverflowError:
        return LARGEST if value > 0 else -LARGEST
    except ValueError:
        return 0


def to_milli(value: Any) -> int:
    if isinstance(value, int):
        return value * MILLI
    return whole(value * MILLI)


def to_number(value: int) -> int | float:
    whole, rest = divmod(value, MILLI)
    return whole if rest == 0 else value / MILLI


COERCIONS: dict[str, Callable[[Any], Any]] = {TO_MILLI: to_milli, TO_NUMBER: to_number}


def _div(a: Any, b: Any) -> Any:
    return a / b if b else 0


def _floordiv(a: Any, b: Any) -> Any:
    return a // b if b else 0


def _mod(a: Any, b: Any) -> Any:
    return a % b if b else 0


def _q_mul(a: Any, b: Any) -> int:
    product = a * b
    return product if isinstance(product, int) else whole(product)


def _q_div(a: Any, b: Any) -> int:
    if not b:
        return 0
    if isinstance(b, int):
        return int(-(-a // b))  # exact ceiling in integers
    return whole(a / b)


def _q_floordiv(a: Any, b: Any) -> int:
    return whole(a // b, int) if b else 0


def _contains(item: Any, container: Any) -> bool:
    return item in container


def _not_contains(item: Any, container: Any) -> bool:
    return item not in container


ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": _div,
    "//": _floordiv,
    "%": _mod,
}
# Quantity arithmetic ("q" in BinaryInfo.kind) keeps whole milli-units.
QUANTITY_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    **ARITHMETIC,
    "*": _q_mul,
    "/": _q_div,
    "//": _q_floordiv,
}
COMPARISON: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": _contains,
    "not in": _not_contains,
}


# Lists from the cluster are Python lists, list literals are tuples: compare and join as tuples.
SEQUENCE: dict[str, Callable[[Any, Any], Any]] = {
    "==": lambda a, b: tuple(a) == tuple(b),
    "!=": lambda a, b: tuple(a) != tuple(b),
    "+": lambda a, b: (*a, *b),
}


def binary_function(op: str, kind: str) -> Callable[[Any, Any], Any]:
    if kind == "seq":
        return SEQUENCE[op]
    if op in COMPARISON:
        return COMPARISON[op]
    return (QUANTITY_ARITHMETIC if kind == "q" else ARITHMETIC)[op]


def as_score(value: Any) -> int:
    """A score rule's value as an integer score: truncated toward zero, as kube-scheduler's int64
    scores are. Beyond int64 the exact int is kept (the scheduler then ranks in Python ints), up to
    :data:`SCORE_LIMIT`: a constant of 9,000 digits would otherwise be a score no report can print
    (Python refuses to write ints of over 4,300 digits as text)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return 0
        value = int(value)
    return max(-SCORE_LIMIT, min(SCORE_LIMIT, int(value)))


SCORE_LIMIT = 10**4000 - 1
