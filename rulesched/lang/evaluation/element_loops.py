"""Loops whose condition compares the element itself with a value the element does not change::

    count(f in free_after where f >= m.milli)
    sum(f for f in free_after where f < m.milli)

(FGD's ``frag_after``, rules/gpu-fragmentation.rules: two such loops over the node's GPUs for
each of its mix's 35 rows, on every answer not kept.) The plain loop
(:func:`rulesched.lang.evaluation.stages.aggregate_loop`) sets the element in the env and calls
the condition's closure for each element, which calls one closure per side; here the other side
is computed once per loop and the elements are tested in one comprehension with the comparison
itself. Same answers in the same order: the sides are pure, and both apply the checker's
comparison function (``binary_function``) to the same values. Only when nothing is coerced (the
element, the condition, the comparison's operands): a coerced side would need its coercion per
element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rulesched.lang.evaluation.stages import NodeFn, Staged, of_values
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.values import COMPARISON, binary_function


@dataclass(frozen=True)
class ElementTest:
    """``element OP other`` (``element_left``) or ``other OP element``, as a loop's condition."""

    compare: Callable[[Any, Any], Any]
    other: Staged  # the side that does not read the element (compiled in the loop's scope)
    element_left: bool
    value_is_element: bool  # an aggregate of the elements themselves (``sum(f for f in ...)``)


def element_test(
    expr: ast.Quantifier | ast.Aggregate, notes: Annotations, compile_side: Callable[[ast.Expr], Staged]
) -> ElementTest | None:
    """The loop's condition as an :class:`ElementTest`, when it has that shape; else None.
    ``compile_side(e)``: ``e`` compiled in the loop's scope (with its own coercion)."""
    where = expr.where
    if not isinstance(where, ast.Binary) or where.op not in COMPARISON or notes.coercions.get(id(where)):
        return None
    info = notes.binary[id(where)]
    if info.left is not None or info.right is not None:
        return None

    def is_element(e: ast.Expr) -> bool:
        ref = notes.names.get(id(e))
        return (
            isinstance(e, ast.Name)
            and e.id == expr.var
            and ref is not None
            and ref.kind == "bound"
            and notes.coercions.get(id(e)) is None
        )

    if is_element(where.left):
        other, left = where.right, True
    elif is_element(where.right):
        other, left = where.left, False
    else:
        return None
    code = compile_side(other)
    if expr.var in code.free:
        return None
    itself = isinstance(expr, ast.Aggregate) and is_element(expr.value)
    return ElementTest(binary_function(where.op, info.kind), code, left, itself)


def element_loop(
    kind: str, slot: int, it: NodeFn, test: ElementTest, other: NodeFn, vf: NodeFn | None, empty: Any
) -> NodeFn:
    """``aggregate_loop(kind, slot, it, where, vf, empty)`` for a condition ``where`` that is
    ``test`` (``other``: its other side's node function)."""
    compare, left = test.compare, test.element_left

    def matching(n: Any, env: Any) -> list[Any]:
        if env is None:
            env = {}
        items = _sized(it(n, env))
        if not items:
            return []  # (the other side not computed: the plain loop would not have)
        k = other(n, env)
        return [x for x in items if compare(x, k)] if left else [x for x in items if compare(k, x)]

    if kind == "count":
        return lambda n, env=None: len(matching(n, env))
    if kind in ("any", "all"):
        want = kind == "any"

        def quantify(n: Any, env: Any = None) -> bool:
            if env is None:
                env = {}
            items = _sized(it(n, env))
            if not items:
                return not want
            k = other(n, env)
            for x in items:
                if bool(compare(x, k) if left else compare(k, x)) is want:
                    return want
            return not want

        return quantify
    if test.value_is_element or vf is None:
        values: Callable[[Any, Any], list[Any]] = matching
    else:
        each = vf

        def values(n: Any, env: Any) -> list[Any]:
            if env is None:
                env = {}
            out = []
            for x in matching(n, env):
                env[slot] = x
                out.append(each(n, env))
            return out

    return of_values(kind, values, empty)


def _sized(items: Any) -> Any:
    return items if type(items) is tuple or type(items) is list else list(items)
