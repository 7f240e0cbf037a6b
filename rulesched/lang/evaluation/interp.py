"""The reference interpreter: a plain tree walk over checked rules, the compiler's test oracle.

It evaluates each expression afresh for each (pod, node) with no staging, hoisting or caching
(but a let once per evaluation, as the checker's cost bound counts it), so it is slow and obviously right; tests run it and :mod:`rulesched.lang.evaluation.compile` on the same
cases and demand equal answers. Operator meanings come from :mod:`rulesched.lang.values`, the
checker's decisions from :class:`rulesched.lang.frontend.checked.Annotations`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS, domains
from rulesched.lang.context import EvalContext
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations, CheckedRule
from rulesched.lang.schema import zero_value
from rulesched.lang.types import ListOf, MapOf
from rulesched.lang.values import COERCIONS, binary_function

# The variables a let may read besides the pod and the node (a preempt rule's victim, a device
# score's device and request): a let's value is kept per their values.
_LET_SCOPE = (schema.VICTIM_VARIABLE, schema.DEVICE_VARIABLE, schema.REQUEST_VARIABLE)


class Interpreter:
    def __init__(self, notes: Annotations, lets: dict[str, ast.Let]) -> None:
        self.notes = notes
        self.lets = lets
        # A let's value within one outermost evaluation, by name and what it may read beside the
        # pod and the node: the checker counts a let once per (pod, node) (as the compiler keeps
        # it), so evaluating it again at each use could exceed the static bound (a chain of lets
        # each using the one before twice). Per thread: explain and the scheduler share rules.
        self._local = threading.local()

    def evaluate(self, expr: ast.Expr, ctx: EvalContext, node: Any, scope: dict[str, Any]) -> Any:
        local = self._local
        outermost = getattr(local, "lets", None) is None
        if outermost:
            local.lets = {}
        try:
            value = self._evaluate(expr, ctx, node, scope)
        finally:
            if outermost:
                local.lets = None
        coercion = self.notes.coercions.get(id(expr))
        return value if coercion is None else COERCIONS[coercion](value)

    def let_values(self, names: Sequence[str], ctx: EvalContext, node: Any) -> list[Any]:
        """Node-scope lets' values on ``node``, in one evaluation: a let several of them read is
        computed once (what a score's terms cost: rulesched.lang.evaluation.terms)."""
        local = self._local
        outermost = getattr(local, "lets", None) is None
        if outermost:
            local.lets = {}
        try:
            return [self._let(name, ctx, node, {}) for name in names]
        finally:
            if outermost:
                local.lets = None

    def _let(self, name: str, ctx: EvalContext, node: Any, scope: dict[str, Any]) -> Any:
        key = (name, *(id(scope.get(v)) for v in _LET_SCOPE))
        kept: dict[Any, Any] = self._local.lets
        if key not in kept:
            kept[key] = self.evaluate(self.lets[name].value, ctx, node, scope)
        return kept[key]

    def _evaluate(self, expr: ast.Expr, ctx: EvalContext, node: Any, scope: dict[str, Any]) -> Any:
        notes = self.notes
        match expr:
            case ast.Literal(value=value):
                return value
            case ast.ListExpr(items=items):
                return tuple(self.evaluate(i, ctx, node, scope) for i in items)
            case ast.Name(id=name):
                ref = notes.names[id(expr)]
                if ref.kind == "let":
                    return self._let(name, ctx, node, scope)
                if ref.kind == "bound" or name in (
                    schema.VICTIM_VARIABLE,
                    schema.DEVICE_VARIABLE,
                    schema.REQUEST_VARIABLE,
                ):
                    return scope[name]
                if name == schema.CLUSTER_VARIABLE:
                    return domains.cluster_ref(ctx)
                return ctx.pod if name == schema.POD_VARIABLE else node
            case ast.Attr(obj=obj):
                value = self.evaluate(obj, ctx, node, scope)
                attr = notes.attrs[id(expr)]
                if isinstance(value, domains.DomainRef):  # recounted from scratch: the reference
                    return domains.brute_field(value, expr.name)
                if attr.field is not None:
                    return attr.field.get(value)
                return value.get(attr.resource, 0)
            case ast.Index(obj=obj, key=key):
                container, k = self.evaluate(obj, ctx, node, scope), self.evaluate(key, ctx, node, scope)
                t = notes.types[id(obj)]
                if isinstance(t, ListOf):
                    ok = isinstance(k, int) and -len(container) <= k < len(container)
                    return container[k] if ok else zero_value(t.elem)
                assert isinstance(t, MapOf)
                return container[k] if k in container else zero_value(t.value)
            case ast.Call(func=func, args=args):
                builtin = BUILTINS[func]
                values = [
                    self._coerce(c, self.evaluate(a, ctx, node, scope))
                    for a, c in zip(args, notes.calls[id(expr)], strict=True)
                ]
                return builtin.impl(ctx, *values) if builtin.context else builtin.impl(*values)
            case ast.Unary(op="not", operand=operand):
                return not self.evaluate(operand, ctx, node, scope)
            case ast.Unary(operand=operand):
                return -self.evaluate(operand, ctx, node, scope)
            case ast.Binary(op="and", left=left, right=right):
                return self.evaluate(left, ctx, node, scope) and self.evaluate(right, ctx, node, scope)
            case ast.Binary(op="or", left=left, right=right):
                return self.evaluate(left, ctx, node, scope) or self.evaluate(right, ctx, node, scope)
            case ast.Binary(op=op, left=left, right=right):
                info = notes.binary[id(expr)]
                a = self._coerce(info.left, self.evaluate(left, ctx, node, scope))
                b = self._coerce(info.right, self.evaluate(right, ctx, node, scope))
                return binary_function(op, info.kind)(a, b)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                branch = then if self.evaluate(cond, ctx, node, scope) else otherwise
                return self.evaluate(branch, ctx, node, scope)
            case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
                hits = [
                    x
                    for x in self.evaluate(iterable, ctx, node, scope)
                    if where is None or self.evaluate(where, ctx, node, {**scope, var: x})
                ]
                if kind == "count":
                    return len(hits)
                if kind == "any":
                    return bool(hits)
                elements = list(self.evaluate(iterable, ctx, node, scope))
                return len(hits) == len(elements)
            case ast.Aggregate(kind=kind, value=value, var=var, iterable=iterable, where=where):
                found = [
                    self.evaluate(value, ctx, node, {**scope, var: x})
                    for x in self.evaluate(iterable, ctx, node, scope)
                    if where is None or self.evaluate(where, ctx, node, {**scope, var: x})
                ]
                if kind == "collect":
                    return tuple(found)
                if kind == "sum":  # over a domain: exact, whatever the order of its pods
                    return domains.exact_sum(found) if id(expr) in notes.domain_aggregates else sum(found)
                if not found:
                    return 0
                return min(found) if kind == "min" else max(found)
        raise AssertionError(f"cannot evaluate {expr!r}")  # pragma: no cover

    @staticmethod
    def _coerce(coercion: str | None, value: Any) -> Any:
        return value if coercion is None else COERCIONS[coercion](value)

    # --- whole rules --------------------------------------------------------------------------
    def applies(self, rule: CheckedRule, ctx: EvalContext) -> bool:
        guard = rule.rule.guard
        return guard is None or bool(self.evaluate(guard, ctx, None, {}))

    def body(
        self,
        rule: CheckedRule,
        ctx: EvalContext,
        node: Any,
        victim: Any = None,
        device: Any = None,
        request: Any = None,
    ) -> Any:
        """The rule's body on ``node`` (a preempt rule's for ``victim``; a device score's for
        ``device`` serving ``request``)."""
        scope = {schema.VICTIM_VARIABLE: victim} if rule.kind is ast.RuleKind.PREEMPT else {}
        if rule.rule.target == "device":
            scope = {schema.DEVICE_VARIABLE: device, schema.REQUEST_VARIABLE: request}
        return self.evaluate(rule.rule.body, ctx, node, scope)

    def reason(self, rule: CheckedRule, ctx: EvalContext, node: Any) -> Any:
        reason = rule.rule.reason
        return None if reason is None else self.evaluate(reason, ctx, node, {})

    def unresolvable(self, rule: CheckedRule, ctx: EvalContext, node: Any) -> bool:
        condition = rule.rule.unresolvable
        return condition is not None and bool(self.evaluate(condition, ctx, node, {}))
