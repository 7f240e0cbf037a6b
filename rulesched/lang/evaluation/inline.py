"""Two-operand closures with the operator written out, for the operators rules use most.

A compiled binary operation is a closure calling its operands' closures; calling the operator
as a function on top costs a third call. These shapes write the operator into the closure
instead (``g0(n, env) - g1(n, env)``), for an operand pair that is two node values, or a node
value and a constant known at bind time. :func:`rulesched.lang.evaluation.stages.node_apply` uses them;
anything else goes through the generic shapes there.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from rulesched.lang.values import _div, _floordiv, _q_floordiv, whole

NodeFn = Callable[..., Any]
Shape = Callable[[Any, Any], NodeFn]


def _div_vv(g0: NodeFn, g1: NodeFn) -> NodeFn:
    def div(n: Any, env: Any = None) -> Any:
        b = g1(n, env)
        return g0(n, env) / b if b else 0  # x / 0 is 0 (operands are pure: order is free)

    return div


def _floordiv_vv(g0: NodeFn, g1: NodeFn) -> NodeFn:
    def floordiv(n: Any, env: Any = None) -> Any:
        b = g1(n, env)
        return g0(n, env) // b if b else 0

    return floordiv


def _q_floordiv_vv(g0: NodeFn, g1: NodeFn) -> NodeFn:
    def floordiv(n: Any, env: Any = None) -> Any:
        b = g1(n, env)
        return whole(g0(n, env) // b, int) if b else 0  # quantities stay whole (values._q_floordiv)

    return floordiv


BOTH: dict[Any, Shape] = {  # (node value, node value)
    operator.add: lambda g0, g1: lambda n, env=None: g0(n, env) + g1(n, env),
    operator.sub: lambda g0, g1: lambda n, env=None: g0(n, env) - g1(n, env),
    operator.mul: lambda g0, g1: lambda n, env=None: g0(n, env) * g1(n, env),
    operator.lt: lambda g0, g1: lambda n, env=None: g0(n, env) < g1(n, env),
    operator.le: lambda g0, g1: lambda n, env=None: g0(n, env) <= g1(n, env),
    operator.gt: lambda g0, g1: lambda n, env=None: g0(n, env) > g1(n, env),
    operator.ge: lambda g0, g1: lambda n, env=None: g0(n, env) >= g1(n, env),
    operator.eq: lambda g0, g1: lambda n, env=None: g0(n, env) == g1(n, env),
    operator.ne: lambda g0, g1: lambda n, env=None: g0(n, env) != g1(n, env),
    _div: _div_vv,
    _floordiv: _floordiv_vv,
    _q_floordiv: _q_floordiv_vv,
}


def _max_left(c: Any, g1: NodeFn) -> NodeFn:
    def largest(n: Any, env: Any = None) -> Any:
        v = g1(n, env)
        return v if v > c else c  # max(a, b) keeps a unless b > a

    return largest


def _min_left(c: Any, g1: NodeFn) -> NodeFn:
    def smallest(n: Any, env: Any = None) -> Any:
        v = g1(n, env)
        return v if v < c else c

    return smallest


def _max_right(g0: NodeFn, c: Any) -> NodeFn:
    def largest(n: Any, env: Any = None) -> Any:
        v = g0(n, env)
        return c if c > v else v

    return largest


def _min_right(g0: NodeFn, c: Any) -> NodeFn:
    def smallest(n: Any, env: Any = None) -> Any:
        v = g0(n, env)
        return c if c < v else v

    return smallest


RIGHT: dict[Any, Shape] = {  # (node value, constant)
    operator.add: lambda g0, c: lambda n, env=None: g0(n, env) + c,
    operator.sub: lambda g0, c: lambda n, env=None: g0(n, env) - c,
    operator.mul: lambda g0, c: lambda n, env=None: g0(n, env) * c,
    operator.lt: lambda g0, c: lambda n, env=None: g0(n, env) < c,
    operator.le: lambda g0, c: lambda n, env=None: g0(n, env) <= c,
    operator.gt: lambda g0, c: lambda n, env=None: g0(n, env) > c,
    operator.ge: lambda g0, c: lambda n, env=None: g0(n, env) >= c,
    operator.eq: lambda g0, c: lambda n, env=None: g0(n, env) == c,
    operator.ne: lambda g0, c: lambda n, env=None: g0(n, env) != c,
    max: _max_right,
    min: _min_right,
}

LEFT: dict[Any, Shape] = {  # (constant, node value)
    operator.add: lambda c, g1: lambda n, env=None: c + g1(n, env),
    operator.sub: lambda c, g1: lambda n, env=None: c - g1(n, env),
    operator.mul: lambda c, g1: lambda n, env=None: c * g1(n, env),
    operator.lt: lambda c, g1: lambda n, env=None: c < g1(n, env),
    operator.le: lambda c, g1: lambda n, env=None: c <= g1(n, env),
    operator.gt: lambda c, g1: lambda n, env=None: c > g1(n, env),
    operator.ge: lambda c, g1: lambda n, env=None: c >= g1(n, env),
    operator.eq: lambda c, g1: lambda n, env=None: c == g1(n, env),
    operator.ne: lambda c, g1: lambda n, env=None: c != g1(n, env),
    max: _max_left,
    min: _min_left,
}


# --- an operand that is a two-step node path (``node.allocatable.cpu``: an attribute, then a key)
# is read inside the operator's closure too, saving the path's own closure call.

Path = tuple[Callable[[Any], Any], Any, Any]  # (attribute getter, key, default)


def node_path(chain: Any) -> Path | None:
    """``(f0, key, default)`` when ``chain`` (rulesched.lang.evaluation.stages.Staged.chain) reads
    ``f0(node).get(key, default)``; else None."""
    if chain is None or chain[0] is not None or len(chain[1]) != 2:
        return None
    (kind0, *rest0), (kind1, *rest1) = chain[1]
    if kind0 != "fn" or kind1 != "get":
        return None
    return rest0[0], rest1[0], rest1[1]


def _path_floordiv(g0: NodeFn, p: Path) -> NodeFn:
    f0, k, d = p

    def floordiv(n: Any, env: Any = None) -> Any:
        b = f0(n).get(k, d)
        return g0(n, env) // b if b else 0

    return floordiv


def _path_q_floordiv(g0: NodeFn, p: Path) -> NodeFn:
    f0, k, d = p

    def floordiv(n: Any, env: Any = None) -> Any:
        b = f0(n).get(k, d)
        return whole(g0(n, env) // b, int) if b else 0

    return floordiv


def _path_div(g0: NodeFn, p: Path) -> NodeFn:
    f0, k, d = p

    def div(n: Any, env: Any = None) -> Any:
        b = f0(n).get(k, d)
        return g0(n, env) / b if b else 0

    return div


PathShape = Callable[[Any, Path], NodeFn]


def _path(make: Callable[[Any, Any, Any, Any], NodeFn]) -> PathShape:
    return lambda x, p: make(x, *p)


# (node value, path)
BOTH_PATH: dict[Any, PathShape] = {
    _div: _path_div,
    _floordiv: _path_floordiv,
    _q_floordiv: _path_q_floordiv,
    operator.add: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) + f0(n).get(k, d)),
    operator.sub: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) - f0(n).get(k, d)),
    operator.mul: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) * f0(n).get(k, d)),
    operator.lt: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) < f0(n).get(k, d)),
    operator.le: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) <= f0(n).get(k, d)),
    operator.gt: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) > f0(n).get(k, d)),
    operator.ge: _path(lambda g0, f0, k, d: lambda n, env=None: g0(n, env) >= f0(n).get(k, d)),
}

# (path, constant)
PATH_RIGHT: dict[Any, PathShape] = {
    operator.add: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) + c),
    operator.sub: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) - c),
    operator.mul: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) * c),
    operator.lt: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) < c),
    operator.le: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) <= c),
    operator.gt: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) > c),
    operator.ge: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) >= c),
    operator.eq: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) == c),
    operator.ne: _path(lambda c, f0, k, d: lambda n, env=None: f0(n).get(k, d) != c),
}

# (constant, path)
PATH_LEFT: dict[Any, PathShape] = {
    operator.add: _path(lambda c, f0, k, d: lambda n, env=None: c + f0(n).get(k, d)),
    operator.sub: _path(lambda c, f0, k, d: lambda n, env=None: c - f0(n).get(k, d)),
    operator.mul: _path(lambda c, f0, k, d: lambda n, env=None: c * f0(n).get(k, d)),
    operator.lt: _path(lambda c, f0, k, d: lambda n, env=None: c < f0(n).get(k, d)),
    operator.le: _path(lambda c, f0, k, d: lambda n, env=None: c <= f0(n).get(k, d)),
    operator.gt: _path(lambda c, f0, k, d: lambda n, env=None: c > f0(n).get(k, d)),
    operator.ge: _path(lambda c, f0, k, d: lambda n, env=None: c >= f0(n).get(k, d)),
}
