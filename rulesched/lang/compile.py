"""Compile checked rules into closures, staged per pod and per node.

The scheduler evaluates every rule for thousands of nodes per pod, so each expression is split
by what it reads:

* **constant** parts are folded at compile time;
* **pod-only** parts (``pod.requests.cpu``, a guard, ``any(t in pod.tolerations ...)``) are
  evaluated once per pod, when the pod is bound (:meth:`CompiledRules.bind`), and enter the
  per-node closures as constants;
* **node-only** parts that cost something (aggregates over ``node.pods``, costly built-ins) are
  cached in the node's ``memo`` dict, which the snapshot clears when the node or its pods change;
* the rest runs per node.

No source text is generated or evaluated: every stage is a Python closure over closures. Bound
variables of aggregates live in a per-evaluation list (``env``), one slot per nesting level.
Next stage: the scheduler calls :meth:`CompiledRules.bind` (see ``rulesched.scheduler``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rulesched.lang import ast, schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.check import CheckedRule, CheckedRules
from rulesched.lang.context import EvalContext
from rulesched.lang.schema import zero_value
from rulesched.lang.types import ListOf, MapOf
from rulesched.lang.values import COERCIONS, binary_function

PodFn = Callable[[EvalContext, Any], Any]  # (ctx, env) -> value
NodeFn = Callable[[Any, Any], Any]  # (node, env) -> value
Factory = Callable[[EvalContext], NodeFn]

_POD = frozenset({schema.POD_VARIABLE})
_NODE = frozenset({schema.NODE_VARIABLE})


@dataclass(frozen=True)
class Code:
    """One compiled expression: a constant, a pod-stage function, or a node-stage factory."""

    free: frozenset[str]  # variables it reads: "pod", "node", bound variable names
    const: Any = None
    pod: PodFn | None = None
    node: Factory | None = None
    static: NodeFn | None = None  # node stage that does not depend on the pod: built once

    @property
    def is_const(self) -> bool:
        return self.pod is None and self.node is None and self.static is None

    def factory(self) -> Factory:
        if self.static is not None:
            static = self.static
            return lambda ctx: static
        if self.node is not None:
            return self.node
        pod = self.pod
        if pod is not None:
            def hoisted(ctx: EvalContext) -> NodeFn:
                value = pod(ctx, {})
                return lambda n, env: value
            return hoisted
        const = self.const
        return lambda ctx: (lambda n, env: const)


class _Compiler:
    def __init__(self, checked: CheckedRules) -> None:
        self.notes = checked.notes
        self.lets = checked.lets
        self.let_codes: dict[tuple[str, tuple[tuple[str, int], ...]], Code] = {}

    # Slots: the env index of each bound variable in scope.
    def code(self, expr: ast.Expr, slots: dict[str, int]) -> Code:
        code = _coerce(self._compile(expr, slots), self.notes.coercions.get(id(expr)))
        if code.is_const or code.pod is not None or code.static is None:
            return code
        if self._costly(expr) and code.free <= _NODE:  # a bound variable or victim varies per node
            return _memoised(code)
        return code

    def _compile(self, expr: ast.Expr, slots: dict[str, int]) -> Code:
        match expr:
            case ast.Literal(value=value):
                return Code(frozenset(), const=value)
            case ast.ListExpr(items=items):
                parts = [self.code(i, slots) for i in items]
                return _combine(parts, lambda *vals: tuple(vals))
            case ast.Name():
                return self._name(expr, slots)
            case ast.Attr():
                obj = self.code(expr.obj, slots)
                ref = self.notes.attrs[id(expr)]
                if ref.field is not None:
                    return _map1(obj, ref.field.get)
                key = ref.resource
                return _map1(obj, lambda m: m.get(key, 0))
            case ast.Index(obj=obj_expr, key=key_expr):
                t = self.notes.types[id(obj_expr)]
                default = zero_value(t.value) if isinstance(t, MapOf) else zero_value(t.elem) if isinstance(t, ListOf) else None
                if isinstance(t, ListOf):
                    return _combine([self.code(obj_expr, slots), self.code(key_expr, slots)],
                                    lambda seq, i: _list_index(seq, i, default))
                return _combine([self.code(obj_expr, slots), self.code(key_expr, slots)],
                                lambda m, k: m.get(k, default))
            case ast.Call(func=func, args=args):
                return self._call(expr, func, args, slots)
            case ast.Unary(op=op, operand=operand):
                inner = self.code(operand, slots)
                return _map1(inner, (lambda v: not v) if op == "not" else (lambda v: -v))
            case ast.Binary(op="and" | "or"):
                return self._logic(expr, slots)
            case ast.Binary(op=op, left=left, right=right):
                info = self.notes.binary[id(expr)]
                fn = binary_function(op, info.kind)
                lcode = _coerce(self.code(left, slots), info.left)
                rcode = _coerce(self.code(right, slots), info.right)
                return _combine([lcode, rcode], fn)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                return self._if(cond, then, otherwise, slots)
            case ast.Quantifier() | ast.Aggregate():
                return self._aggregate(expr, slots)
        raise AssertionError(f"cannot compile {expr!r}")  # pragma: no cover

    def _name(self, expr: ast.Name, slots: dict[str, int]) -> Code:
        ref = self.notes.names[id(expr)]
        if ref.kind == "let":
            key = (ref.name, tuple(sorted(slots.items())))
            if key not in self.let_codes:
                self.let_codes[key] = self.code(self.lets[ref.name].value, slots)
            return self.let_codes[key]
        if ref.kind == "bound" or ref.name == schema.VICTIM_VARIABLE:
            slot = slots[ref.name]
            return Code(frozenset({ref.name}), static=lambda n, env: env[slot])
        if ref.name == schema.POD_VARIABLE:
            return Code(_POD, pod=lambda ctx, env: ctx.pod)
        return Code(frozenset({schema.NODE_VARIABLE}), static=lambda n, env: n)

    def _call(self, expr: ast.Call, func: str, args: tuple[ast.Expr, ...], slots: dict[str, int]) -> Code:
        builtin = BUILTINS[func]
        coercions = self.notes.calls[id(expr)]
        parts = [_coerce(self.code(a, slots), c) for a, c in zip(args, coercions, strict=True)]
        if not builtin.context:
            return _combine(parts, builtin.impl)
        # A built-in that reads the cluster depends on the pod's evaluation context.
        impl = builtin.impl
        ctx_code = Code(_POD, pod=lambda ctx, env: ctx)
        return _combine([ctx_code, *parts], impl)

    def _logic(self, expr: ast.Binary, slots: dict[str, int]) -> Code:
        left, right = self.code(expr.left, slots), self.code(expr.right, slots)
        is_and = expr.op == "and"
        if left.is_const:
            if bool(left.const) is (not is_and):  # false and x / true or x
                return Code(frozenset(), const=left.const)
            return right
        return _lazy([left, right], expr.op)

    def _if(self, cond: ast.Expr, then: ast.Expr, otherwise: ast.Expr, slots: dict[str, int]) -> Code:
        c, t, o = self.code(cond, slots), self.code(then, slots), self.code(otherwise, slots)
        if c.is_const:
            return t if c.const else o
        return _lazy([c, t, o], "if")

    def _aggregate(self, expr: ast.Quantifier | ast.Aggregate, slots: dict[str, int]) -> Code:
        slot = len(slots)
        inner_slots = {**slots, expr.var: slot}
        iterable = self.code(expr.iterable, slots)
        where = self.code(expr.where, inner_slots) if expr.where is not None else None
        value = self.code(expr.value, inner_slots) if isinstance(expr, ast.Aggregate) else None
        parts = [p for p in (where, value) if p is not None]
        free = iterable.free | frozenset().union(*(p.free for p in parts)) - {expr.var}
        kind = expr.kind
        empty = _empty_result(kind, self.notes.types[id(expr)])

        def build(it: NodeFn, wf: NodeFn | None, vf: NodeFn | None) -> NodeFn:
            return _loop(kind, slot, it, wf, vf, empty)

        if free <= _POD:  # the whole aggregate is pod-only: run it at bind time
            it_f, w_f, v_f = (_as_pod_node(p) for p in (iterable, where, value))

            def pod_fn(ctx: EvalContext, env: Any) -> Any:
                node_fn = build(it_f(ctx), w_f(ctx) if where else None, v_f(ctx) if value else None)
                return node_fn(None, env if env is not None else {})

            return Code(free, pod=pod_fn)
        if not (free & _POD) and all(p.pod is None and p.node is None for p in (iterable, *parts)):
            static = build(iterable.factory()(_NO_CTX), where.factory()(_NO_CTX) if where else None,
                           value.factory()(_NO_CTX) if value else None)
            return Code(free, static=static)
        it_fac, w_fac, v_fac = iterable.factory(), where.factory() if where else None, value.factory() if value else None

        def factory(ctx: EvalContext) -> NodeFn:
            return build(it_fac(ctx), w_fac(ctx) if w_fac else None, v_fac(ctx) if v_fac else None)

        return Code(free, node=factory)

    def _costly(self, expr: ast.Expr) -> bool:
        if isinstance(expr, (ast.Quantifier, ast.Aggregate)):
            return True
        if isinstance(expr, ast.Call) and BUILTINS[expr.func].costly:
            return True
        return False


class _NoContext:
    """Stands in for the context when building node-only closures, which never read it."""


_NO_CTX: Any = _NoContext()


def _as_pod_node(code: Code | None) -> Callable[[EvalContext], NodeFn]:
    """A pod-only code as a per-ctx node function (node ignored), for pod-stage aggregates."""
    if code is None:
        return lambda ctx: (lambda n, env: None)
    if code.pod is not None:
        pod = code.pod
        return lambda ctx: (lambda n, env: pod(ctx, env))
    return code.factory()


def _loop(kind: str, slot: int, it: NodeFn, wf: NodeFn | None, vf: NodeFn | None, empty: Any) -> NodeFn:
    if kind == "count":
        if wf is None:
            return lambda n, env: len(it(n, env))

        def count(n: Any, env: Any) -> int:
            total = 0
            for x in it(n, env):
                env[slot] = x
                if wf(n, env):
                    total += 1
            return total

        return count
    if kind in ("any", "all"):
        want = kind == "any"
        if wf is None:  # no condition: every element counts, whatever its value
            return (lambda n, env: len(it(n, env)) > 0) if want else (lambda n, env: True)

        def quantify(n: Any, env: Any) -> bool:
            for x in it(n, env):
                env[slot] = x
                if bool(wf(n, env)) is want:
                    return want
            return not want

        return quantify
    assert vf is not None

    def values(n: Any, env: Any) -> list[Any]:
        out = []
        for x in it(n, env):
            env[slot] = x
            if wf is None or wf(n, env):
                out.append(vf(n, env))
        return out

    if kind == "sum":
        return lambda n, env: sum(values(n, env))
    if kind == "collect":
        return lambda n, env: tuple(values(n, env))
    pick = min if kind == "min" else max

    def extreme(n: Any, env: Any) -> Any:
        found = values(n, env)
        return pick(found) if found else empty

    return extreme


def _empty_result(kind: str, t: Any) -> Any:
    return 0 if kind in ("count", "sum", "min", "max") else ()


def _list_index(seq: Any, i: Any, default: Any) -> Any:
    if isinstance(i, int) and -len(seq) <= i < len(seq):
        return seq[i]
    return default


def _coerce(code: Code, coercion: str | None) -> Code:
    if coercion is None:
        return code
    return _map1(code, COERCIONS[coercion])


def _memoised(code: Code) -> Code:
    """Cache a node-only value in the node's memo; the key is unique to this compiled expression."""
    assert code.static is not None
    inner, key = code.static, object()

    def cached(n: Any, env: Any) -> Any:
        memo = n.memo
        try:
            return memo[key]
        except KeyError:
            value = memo[key] = inner(n, env)
            return value

    return Code(code.free, static=cached)


def _map1(code: Code, fn: Callable[[Any], Any]) -> Code:
    if code.is_const:
        return Code(code.free, const=fn(code.const))
    if code.pod is not None:
        pod = code.pod
        return Code(code.free, pod=lambda ctx, env: fn(pod(ctx, env)))
    if code.static is not None:
        static = code.static
        return Code(code.free, static=lambda n, env: fn(static(n, env)))
    factory = code.factory()

    def make(ctx: EvalContext) -> NodeFn:
        f = factory(ctx)
        return lambda n, env: fn(f(n, env))

    return Code(code.free, node=make)


def _combine(parts: list[Code], fn: Callable[..., Any]) -> Code:
    """Apply ``fn`` to the parts' values, at the earliest stage all of them are known."""
    free = frozenset().union(*(p.free for p in parts)) if parts else frozenset()
    if all(p.is_const for p in parts):
        return Code(free, const=fn(*(p.const for p in parts)))
    if all(p.is_const or p.pod is not None for p in parts):
        getters = [_pod_getter(p) for p in parts]
        if len(getters) == 2:
            g0, g1 = getters
            return Code(free, pod=lambda ctx, env: fn(g0(ctx, env), g1(ctx, env)))
        return Code(free, pod=lambda ctx, env: fn(*(g(ctx, env) for g in getters)))
    if all(p.is_const or p.static is not None for p in parts):
        return Code(free, static=_node_apply(fn, [_static_getter(p) for p in parts], [p.is_const for p in parts],
                                             [p.const for p in parts]))
    factories = [p.factory() if not p.is_const and p.pod is None else None for p in parts]

    def make(ctx: EvalContext) -> NodeFn:
        consts: list[Any] = []
        getters: list[NodeFn | None] = []
        is_const: list[bool] = []
        for p, fac in zip(parts, factories, strict=True):
            if fac is None:  # known at bind time: fold it in as a constant
                value = p.const if p.is_const else p.pod(ctx, {})  # type: ignore[misc]
                consts.append(value)
                getters.append(None)
                is_const.append(True)
            else:
                consts.append(None)
                getters.append(fac(ctx))
                is_const.append(False)
        return _node_apply(fn, getters, is_const, consts)

    return Code(free, node=make)


def _node_apply(fn: Callable[..., Any], getters: list[Any], is_const: list[bool], consts: list[Any]) -> NodeFn:
    """The per-node closure, specialised for the one- and two-operand shapes that dominate."""
    if len(getters) == 1:
        g = getters[0]
        return lambda n, env: fn(g(n, env))
    if len(getters) == 2:
        (g0, g1), (c0, c1) = getters, consts
        if is_const[0]:
            return lambda n, env: fn(c0, g1(n, env))
        if is_const[1]:
            return lambda n, env: fn(g0(n, env), c1)
        return lambda n, env: fn(g0(n, env), g1(n, env))
    items = list(zip(getters, is_const, consts, strict=True))
    return lambda n, env: fn(*(c if k else g(n, env) for g, k, c in items))


def _pod_getter(code: Code) -> PodFn:
    if code.is_const:
        value = code.const
        return lambda ctx, env: value
    assert code.pod is not None
    return code.pod


def _static_getter(code: Code) -> NodeFn | None:
    return None if code.is_const else code.static


def _lazy(parts: list[Code], kind: str) -> Code:
    """and / or / if: like _combine, but evaluating only the operands the outcome needs."""
    free = frozenset().union(*(p.free for p in parts))
    if all(p.is_const or p.pod is not None for p in parts):
        return Code(free, pod=_lazy_fn(kind, [_pod_getter(p) for p in parts]))
    if all(p.is_const or p.static is not None for p in parts):
        return Code(free, static=_lazy_fn(kind, [p.factory()(_NO_CTX) for p in parts]))
    first_known = parts[0].is_const or parts[0].pod is not None
    first, factories = _pod_getter(parts[0]) if first_known else None, [p.factory() for p in parts]

    def make(ctx: EvalContext) -> NodeFn:
        if first is not None:  # decided per pod: fold the branch away for every node
            value = first(ctx, {})
            if kind == "and":
                return factories[1](ctx) if value else (lambda n, env: value)
            if kind == "or":
                return (lambda n, env: value) if value else factories[1](ctx)
            return factories[1](ctx) if value else factories[2](ctx)
        return _lazy_fn(kind, [f(ctx) for f in factories])

    return Code(free, node=make)


def _lazy_fn(kind: str, fns: list[Callable[[Any, Any], Any]]) -> Callable[[Any, Any], Any]:
    """Works for both stages: pod functions take (ctx, env), node functions (node, env)."""
    if kind == "and":
        f0, f1 = fns
        return lambda x, env: f0(x, env) and f1(x, env)
    if kind == "or":
        f0, f1 = fns
        return lambda x, env: f0(x, env) or f1(x, env)
    f0, f1, f2 = fns
    return lambda x, env: f1(x, env) if f0(x, env) else f2(x, env)


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready to bind: its guard, body, and (filter) reason, each staged.

    ``context`` names the cluster-wide built-ins the body calls (lets included): their version
    tokens decide how long a cached per-node result stays valid (rulesched.lang.ruleset)."""

    checked: CheckedRule
    guard: Code | None
    body: Code
    reason: Code | None
    order: Code | None
    context: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.checked.name


def compile_rules(checked: CheckedRules) -> list[CompiledRule]:
    compiler = _Compiler(checked)
    out = []
    for c in checked.rules:
        rule = c.rule
        slots = {schema.VICTIM_VARIABLE: 0} if rule.kind is ast.RuleKind.PREEMPT else {}
        guard = compiler.code(rule.guard, {}) if rule.guard is not None else None
        body = compiler.code(rule.body, slots)
        reason = compiler.code(rule.reason, {}) if rule.reason is not None else None
        order = compiler.code(rule.order, {}) if rule.order is not None else None
        out.append(CompiledRule(c, guard, body, reason, order, _context_calls(rule.body, checked)))
    return out


def _context_calls(expr: ast.Expr, checked: CheckedRules) -> frozenset[str]:
    found: set[str] = set()
    seen_lets: set[str] = set()
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            found.add(e.func)
        elif isinstance(e, ast.Name):
            ref = checked.notes.names.get(id(e))
            if ref is not None and ref.kind == "let" and ref.name not in seen_lets:
                seen_lets.add(ref.name)
                stack.append(checked.lets[ref.name].value)
        stack.extend(ast.children(e))
    return frozenset(found)
