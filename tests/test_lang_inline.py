"""Table-driven: every operator shape of rulesched.lang.evaluation.inline returns what the operator
function itself returns — same value and same type — for a grid of operands (zeros, negatives,
floats, NaN, -0.0, big ints), node paths with the key present and absent included."""

from __future__ import annotations

import itertools
import math
import operator
from types import SimpleNamespace
from typing import Any

import pytest

from rulesched.lang.evaluation import inline
from rulesched.lang.evaluation.stages import chain_steps

VALUES = [0, 1, -3, 7, 2.5, -0.0, float("nan"), 10**20, True]


def same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return type(x) is type(y) and x == y and (not isinstance(x, float) or math.copysign(1, x) == math.copysign(1, y))


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except (ZeroDivisionError, ValueError, OverflowError) as e:  # must fail the same way too
        return type(e)


def const(v: Any) -> Any:
    return lambda n, env=None: v


@pytest.mark.parametrize("fn", list(inline.BOTH), ids=lambda f: f.__name__)
def test_two_node_values(fn: Any) -> None:
    for a, b in itertools.product(VALUES, repeat=2):
        got, want = outcome(inline.BOTH[fn](const(a), const(b)), None), outcome(fn, a, b)
        assert same(got, want), (fn, a, b, got, want)


@pytest.mark.parametrize(
    ("table", "fn"),
    [(t, f) for t in ("LEFT", "RIGHT") for f in getattr(inline, t)],
    ids=lambda x: x if isinstance(x, str) else x.__name__,
)
def test_a_node_value_and_a_constant(table: str, fn: Any) -> None:
    for a, b in itertools.product(VALUES, repeat=2):
        closure = inline.LEFT[fn](a, const(b)) if table == "LEFT" else inline.RIGHT[fn](const(a), b)
        got, want = outcome(closure, None), outcome(fn, a, b)
        assert same(got, want), (table, fn, a, b, got, want)


def nodes_with(value: Any) -> list[Any]:
    return [SimpleNamespace(m={"k": value}), SimpleNamespace(m={})]  # the key there, and absent


@pytest.mark.parametrize(
    ("table", "fn"),
    [(t, f) for t in ("BOTH_PATH", "PATH_LEFT", "PATH_RIGHT") for f in getattr(inline, t)],
    ids=lambda x: x if isinstance(x, str) else x.__name__,
)
def test_node_paths(table: str, fn: Any) -> None:
    chain = (None, (("fn", operator.attrgetter("m")), ("get", "k", 4)))
    path = inline.node_path(chain)
    assert path is not None
    read = chain_steps(*chain)  # the path's own closure, as compiled without the shapes
    for a, b in itertools.product(VALUES, repeat=2):
        for node in nodes_with(b):
            if table == "BOTH_PATH":
                closure, want = inline.BOTH_PATH[fn](const(a), path), outcome(fn, a, read(node))
            elif table == "PATH_LEFT":
                closure, want = inline.PATH_LEFT[fn](a, path), outcome(fn, a, read(node))
            else:
                closure, want = inline.PATH_RIGHT[fn](a, path), outcome(fn, read(node), a)
            got = outcome(closure, node)
            assert same(got, want), (table, fn, a, node, got, want)


def test_only_two_step_node_paths_are_inlined() -> None:
    get = operator.attrgetter("m")
    assert inline.node_path((None, (("fn", get), ("get", "k", 0)))) == (get, "k", 0)
    assert inline.node_path((0, (("fn", get), ("get", "k", 0)))) is None  # a bound variable's path
    assert inline.node_path((None, (("fn", get),))) is None
    assert inline.node_path((None, (("get", "k", 0), ("fn", get)))) is None
    assert inline.node_path(None) is None
