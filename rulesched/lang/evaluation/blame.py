"""Why a filter fails on a node: the failing sub-expressions, their operands' values and places.

``rulesched explain`` asks this of the nodes it details. The reference interpreter
(:mod:`rulesched.lang.evaluation.interp`) evaluates the filter's body afresh for the pair, and
:func:`blame` walks down from the body to the parts that made it false:

- ``a and b``: the first conjunct that is false; ``a or b``: every disjunct (all are false),
  leaving out those that read no node (they are false on every node alike: the pod's side of
  the question, e.g. ``pod.requests[r] <= 0``), unless that leaves none;
- ``all(x in xs where c)``: ``c`` for each element it is false for, with ``x`` written as
  that element where it is a plain value (``pod.requests["nvidia.com/gpu"]``);
- ``if``: the branch taken; a ``let``: its definition;
- anything else is a leaf: a comparison shows both operands' values
  (``node.free["cpu"] (1500m) >= pod.requests["cpu"] (2)``), other expressions their own.

Each :class:`Blame` carries the leaf's ``file:line:col``. The interpreter is slow and exact, so
this runs for the few nodes a report details, never on the scheduling path.
Next stage: :mod:`rulesched.scheduler.why` puts the blames in a pod's explanation.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.prechecks import DRA_FILTER, dra_diagnosis
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRule, CheckedRules
from rulesched.lang.frontend.printer import expr_text
from rulesched.lang.frontend.through_lets import INTO, STOP, Visit, through_lets
from rulesched.lang.types import BOOL, DURATION, QUANTITY, STRING, Type

VALUE_WIDTH = 60  # a value's text beyond this is cut (a list of 500 taints is not a reason)
MAX_BLAMES = 4  # leaves reported per failing filter
_RESOURCE_FIELDS = frozenset({"free", "requested", "allocatable", "nonzero_requested"})
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "not in"})
_UNITS = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


@dataclass(frozen=True)
class Blame:
    """One failing sub-expression: its text with operand values, and where it is written."""

    text: str
    location: str


class Blamer:
    """Blames for one rule set (an interpreter over its checked rules); any thread may use it."""

    def __init__(self, checked: CheckedRules) -> None:
        self._checked = checked
        self._interp = Interpreter(checked.notes, checked.lets)
        self._filters = {r.name: r for r in checked.rules if r.kind is ast.RuleKind.FILTER}

    def blame(self, rule: str, ctx: EvalContext, node: Any) -> tuple[Blame, ...]:
        """Why filter ``rule`` fails on ``node`` for ``ctx.pod``; empty when the rule is not one
        of the set's written filters (a built-in precheck) or passes after all."""
        checked = self._filters.get(rule)
        if checked is None:
            if rule == DRA_FILTER:  # the built-in DynamicResources: which claim and request, and why
                return tuple(Blame(line, DRA_FILTER) for line in dra_diagnosis(ctx.pod, ctx.cluster, node))
            return ()
        walk = _Walk(self._interp, self._checked, ctx, node)
        try:
            if walk.value(checked.rule.body, {}):
                return ()
            walk.why_false(checked.rule.body, {})
        except _Enough:
            pass
        return tuple(walk.found)

    def rule(self, name: str) -> CheckedRule | None:
        return self._filters.get(name)

    def about_resources(self, name: str) -> bool:
        """Whether filter ``name`` compares the node's resources (reads ``node.free``,
        ``.requested`` or ``.allocatable``): a failure of it may be a shortfall."""
        checked = self._filters.get(name)
        if checked is None:
            return False
        stack: list[ast.Expr] = [checked.rule.body]
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Attr) and e.name in _RESOURCE_FIELDS:
                return True
            if isinstance(e, ast.Name) and e.id in self._checked.lets:
                stack.append(self._checked.lets[e.id].value)
            stack.extend(ast.children(e))
        return False


class _Enough(Exception):
    """Stops a walk once MAX_BLAMES leaves are found."""


class _Walk:
    def __init__(self, interp: Interpreter, checked: CheckedRules, ctx: EvalContext, node: Any) -> None:
        self.interp, self.notes, self.lets = interp, checked.notes, checked.lets
        self.ctx, self.node = ctx, node
        self.found: list[Blame] = []

    def value(self, expr: ast.Expr, scope: dict[str, Any]) -> Any:
        return self.interp.evaluate(expr, self.ctx, self.node, scope)

    def why_false(self, expr: ast.Expr, scope: dict[str, Any]) -> None:
        """Record the leaves that make ``expr`` (false in ``scope``) false."""
        match expr:
            case ast.Binary(op="and", left=left, right=right):
                self.why_false(left if not self.value(left, scope) else right, scope)
            case ast.Binary(op="or"):
                parts = _disjuncts(expr)
                reading = [p for p in parts if self._reads_node(p)]
                for part in reading or parts:
                    self.why_false(part, scope)
            case ast.Quantifier(kind="all", var=var, iterable=iterable, where=where) if where is not None:
                before = len(self.found)
                for element in self.value(iterable, scope):  # every element it is false for
                    inner = {**scope, var: element}
                    if not self.value(where, inner):
                        self.why_false(where, inner)
                if len(self.found) == before:
                    self.leaf(expr, scope)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                self.why_false(then if self.value(cond, scope) else otherwise, scope)
            case ast.Name() if self.notes.names[id(expr)].kind == "let":
                self.why_false(self.lets[expr.id].value, scope)
            case _:
                self.leaf(expr, scope)

    def leaf(self, expr: ast.Expr, scope: dict[str, Any]) -> None:
        if isinstance(expr, ast.Binary) and expr.op in _COMPARISONS:
            left = f"{_text(expr.left, scope)} ({self._shown(expr.left, scope)})"
            right = f"{_text(expr.right, scope)} ({self._shown(expr.right, scope)})"
            text = f"{left} {expr.op} {right}"
        elif isinstance(expr, ast.Unary) and expr.op == "not":
            text = f"{_text(expr.operand, scope)} is {self._shown(expr.operand, scope)}"
        else:
            text = f"{_text(expr, scope)} is {self._shown(expr, scope)}"
        self.found.append(Blame(text, expr.span.location()))
        if len(self.found) >= MAX_BLAMES:
            raise _Enough

    def _shown(self, expr: ast.Expr, scope: dict[str, Any]) -> str:
        return show(self.value(expr, scope), self.notes.types.get(id(expr)))

    def _reads_node(self, expr: ast.Expr) -> bool:
        """Whether ``expr`` reads the node (directly or through a let): else it is false on
        every node alike."""

        def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:  # (STOP: it does)
            return STOP if isinstance(e, ast.Name) and e.id == schema.NODE_VARIABLE else INTO

        return not through_lets(expr, self.notes, self.lets, visit)


def _disjuncts(expr: ast.Expr) -> list[ast.Expr]:
    if isinstance(expr, ast.Binary) and expr.op == "or":
        return [*_disjuncts(expr.left), *_disjuncts(expr.right)]
    return [expr]


def _text(expr: ast.Expr, scope: Mapping[str, Any]) -> str:
    """The expression as written, with bound variables holding plain values written as them."""
    plain = {k: v for k, v in scope.items() if isinstance(v, str | int | float | bool)}
    return expr_text(_substitute(expr, plain) if plain else expr)


def _substitute(expr: ast.Expr, values: Mapping[str, Any]) -> ast.Expr:
    if isinstance(expr, ast.Name) and expr.id in values:
        value = values[expr.id]
        kind = (
            ast.LiteralKind.STRING
            if isinstance(value, str)
            else ast.LiteralKind.BOOL
            if isinstance(value, bool)
            else ast.LiteralKind.NUMBER
        )
        return ast.Literal(kind, value, span=expr.span)
    if isinstance(expr, ast.Quantifier | ast.Aggregate) and expr.var in values:
        values = {k: v for k, v in values.items() if k != expr.var}  # shadowed inside
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(expr):
        if f.name == "span":
            continue
        current = getattr(expr, f.name)
        if isinstance(current, ast.Node):
            changes[f.name] = _substitute(current, values)  # type: ignore[arg-type]
        elif isinstance(current, tuple) and current and isinstance(current[0], ast.Node):
            changes[f.name] = tuple(_substitute(item, values) for item in current)
    return dataclasses.replace(expr, **changes) if changes else expr


def quantity_text(milli: int) -> str:
    """A quantity (int milli-units) as Kubernetes writes it: 1500m, 2, 512Mi."""
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    for suffix, size in _UNITS:
        if whole and whole % size == 0:
            return f"{whole // size}{suffix}"
    return str(whole)


def show(value: Any, t: Type | None) -> str:
    """A value as the report prints it, cut at :data:`VALUE_WIDTH` characters."""
    if t == QUANTITY and isinstance(value, int) and not isinstance(value, bool):
        text = quantity_text(value)
    elif t == DURATION and isinstance(value, int | float):
        text = f"{value:g}s"
    elif t == BOOL or isinstance(value, bool):
        text = "true" if value else "false"
    elif t == STRING or isinstance(value, str):
        text = json.dumps(value)
    elif isinstance(value, int | float):
        text = f"{value:g}" if isinstance(value, float) else str(value)
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{json.dumps(str(k))}: {_plain(v)}" for k, v in list(value.items())[:8]) + "}"
    elif isinstance(value, list | tuple):
        text = f"[{', '.join(_plain(v) for v in value[:8])}{', ...' if len(value) > 8 else ''}] ({len(value)} items)"
    else:
        text = str(t) if t is not None else type(value).__name__
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 3] + "..."


def _plain(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):  # a table's row (a let over a table)
        return "(" + ", ".join(_plain(v) for v in value[:4]) + (", ...)" if len(value) > 4 else ")")
    return type(value).__name__
