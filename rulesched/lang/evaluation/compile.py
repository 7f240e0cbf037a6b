"""Compile checked rules into closures, staged per pod and per node.

The scheduler evaluates every rule for thousands of nodes per pod, so each expression is split
by what it reads:

* **constant** parts are folded at compile time;
* **pod-only** parts (``pod.requests.cpu``, a guard, ``any(t in pod.tolerations ...)``) are
  evaluated once per pod, when the pod is bound (:meth:`rulesched.lang.evaluation.ruleset.RuleSet.bind`), and enter the
  per-node closures as constants;
* **node-only** parts that cost something (aggregates over ``node.pods``, costly built-ins, and
  any node-only expression that takes more calls than a cache lookup, such as
  ``node.allocatable.cpu - node.requested.cpu``) are cached per node in the rule set's
  :class:`~rulesched.lang.evaluation.stages.NodeMemos`, until the node or its pods change;
* the rest runs per node.

No source text is generated or evaluated: every stage is a Python closure over closures. Bound
variables of aggregates live in a per-evaluation dict (``env``), one slot per nesting level,
made by the outermost loop; node functions take ``(node, env=None)``.
The closures are built from :mod:`rulesched.lang.evaluation.stages`; the aggregates with shapes of
their own (counted by key, over domains, unrolled) are compiled in
:mod:`rulesched.lang.evaluation.compile_aggregates`.
Next stage: the scheduler calls :meth:`RuleSet.bind` (see ``rulesched.scheduler``).
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS, domains, identity
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation import compile_aggregates
from rulesched.lang.evaluation.element_loops import element_loop, element_test
from rulesched.lang.evaluation.let_memo import kept_by_inputs, once
from rulesched.lang.evaluation.stages import (
    FREE_CLUSTER,
    FREE_NODE,
    FREE_POD,
    NO_CTX,
    NodeFn,
    NodeMemos,
    Staged,
    aggregate_loop,
    as_pod_node,
    coerce,
    combine,
    empty_result,
    get_key,
    lazy,
    list_index,
    map1,
    memoised,
)
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRule, CheckedRules
from rulesched.lang.frontend.domain_check import OverDomains
from rulesched.lang.frontend.through_lets import INTO, Visit, is_rule_variable, through_lets
from rulesched.lang.schema import zero_value
from rulesched.lang.types import (
    QUANTITY,
    TO_MILLI,
    BinaryInfo,
    ListOf,
    MapOf,
)
from rulesched.lang.values import _q_mul, binary_function

# A node-only expression costing this many calls or more is cached in the node memos: a cache hit
# costs about one call and a dict lookup.
_WORTH_CACHING = 3
_LOOP_COST = 20


class Compiler:
    """One rule set's compilation: the annotations and lets it reads, the node memos its stages
    cache in, and what its rules share (lets' codes, domain indexes' tokens, kept answers)."""

    def __init__(self, checked: CheckedRules, memos: NodeMemos) -> None:
        self.notes = checked.notes
        self.lets = checked.lets
        self.memos = memos  # this compilation's node memos (rulesched.lang.evaluation.stages.memoised)
        self.let_codes: dict[tuple[str, tuple[tuple[str, int], ...]], Staged] = {}
        # Slots whose bound variable is fixed to a value while an unrolled loop body is compiled.
        self.fixed: dict[int, Any] = {}
        self.lock = threading.RLock()  # held while compiling at bind time (unrolled conditions)
        self.domain_codes: dict[int, Any] = {}  # aggregates over domains: their node-stage factories
        self.tokens: dict[Any, object] = {}  # aggregates over domains written alike: one index
        # Lets' answers kept by their inputs' values, one table per body shape (let_memo).
        self.kept: dict[Any, dict[tuple[Any, ...], Any]] = {}

    # Slots: the env index of each bound variable in scope.
    def code(self, expr: ast.Expr, slots: dict[str, int]) -> Staged:
        code = coerce(self._compile(expr, slots), self.notes.coercions.get(id(expr)))
        if code.is_const or code.pod is not None:
            return code
        if code.static is None:
            # A loop in another loop's body that reads the pod and the node but no loop's variable
            # is the same for every element: computed once per (pod, node), as a let is (FGD's
            # `sum(f for f in free_after)`, in its loop over the mix's rows). Not while a loop is
            # unrolled: its body, compiled once per element, may read the element as a constant.
            hoistable = slots and not self.fixed and isinstance(expr, (ast.Quantifier, ast.Aggregate))
            if hoistable and code.free <= FREE_POD | FREE_NODE:
                return once(f"#{id(expr)}", code)
            return code
        if code.free <= FREE_NODE and (self._costly(expr) or code.cost >= _WORTH_CACHING):
            return memoised(code, self.memos)  # (a bound variable or victim varies per node: never cached)
        return code

    def _compile(self, expr: ast.Expr, slots: dict[str, int]) -> Staged:
        match expr:
            case ast.Literal(value=value):
                return Staged(frozenset(), const=value)
            case ast.ListExpr(items=items):
                parts = [self.code(i, slots) for i in items]
                return combine(parts, lambda *vals: tuple(vals))
            case ast.Name():
                return self._name(expr, slots)
            case ast.Attr():
                obj = self.code(expr.obj, slots)
                ref = self.notes.attrs[id(expr)]
                if ref.field is not None:
                    return map1(obj, ref.field.get)
                return get_key(obj, ref.resource, 0)
            case ast.Index(obj=obj_expr, key=key_expr):
                t = self.notes.types[id(obj_expr)]
                default = (
                    zero_value(t.value)
                    if isinstance(t, MapOf)
                    else zero_value(t.elem)
                    if isinstance(t, ListOf)
                    else None
                )
                if isinstance(t, ListOf):
                    return combine(
                        [self.code(obj_expr, slots), self.code(key_expr, slots)],
                        lambda seq, i: list_index(seq, i, default),
                    )
                obj_code, key_code = self.code(obj_expr, slots), self.code(key_expr, slots)
                if key_code.is_const:
                    return get_key(obj_code, key_code.const, default)
                return combine([obj_code, key_code], lambda m, k: m.get(k, default))
            case ast.Call(func=func, args=args):
                return self._call(expr, func, args, slots)
            case ast.Unary(op=op, operand=operand):
                inner = self.code(operand, slots)
                return map1(inner, operator.not_ if op == "not" else operator.neg)
            case ast.Binary(op="and" | "or"):
                return self._logic(expr, slots)
            case ast.Binary(op=op, left=left, right=right):
                info = self.notes.binary[id(expr)]
                fn = binary_function(op, info.kind)
                lcode = coerce(self.code(left, slots), info.left)
                rcode = coerce(self.code(right, slots), info.right)
                if fn is _q_mul and self._whole_product(left, right, lcode, rcode, info):
                    fn = operator.mul
                return combine([lcode, rcode], fn)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                return self._if(cond, then, otherwise, slots)
            case ast.Quantifier() | ast.Aggregate():
                return self._aggregate(expr, slots)
        raise AssertionError(f"cannot compile {expr!r}")  # pragma: no cover

    def _name(self, expr: ast.Name, slots: dict[str, int]) -> Staged:
        ref = self.notes.names[id(expr)]
        if ref.kind == "let":
            return self._let(ref.name, slots)
        if ref.kind == "bound" or ref.name in _SLOT_VARIABLES:
            slot = slots[ref.name]
            if slot in self.fixed:
                return Staged(frozenset(), const=self.fixed[slot])
            return Staged(frozenset({ref.name}), static=lambda n, env=None: env[slot], chain=(slot, ()))
        if ref.name == schema.POD_VARIABLE:
            return Staged(FREE_POD, pod=lambda ctx, env: ctx.pod)
        if ref.name == schema.CLUSTER_VARIABLE:

            def cluster(ctx: EvalContext) -> NodeFn:
                ref = domains.cluster_ref(ctx)
                return lambda n, env=None: ref

            return Staged(FREE_CLUSTER, node=cluster)
        return Staged(FREE_NODE, static=lambda n, env=None: n, chain=(None, ()))

    def _let(self, name: str, slots: dict[str, int]) -> Staged:
        key = (name, tuple(sorted(slots.items())))
        if key not in self.let_codes:
            value = self.lets[name].value
            computed = self.code(value, slots)
            code = computed
            # (node-only lets kept only where compiled outside loops: a loop over a bind-time list
            # compiles its body once per element, and each would compile its inputs again)
            if computed.node is not None or not (slots or self.fixed):
                code = kept_by_inputs(
                    computed, value, self.notes, self.lets, lambda used: self._input(used, slots), self.kept
                )
            if code is not computed and code.static is not None:  # (node-only: looked up once per node)
                code = memoised(code, self.memos)
            self.let_codes[key] = once(name, code)
        return self.let_codes[key]

    def _input(self, name: str, slots: dict[str, int]) -> Staged:
        """A let read as another's key: node-only ones looked up per node (as a use of it is:
        evaluated again for every key, a chain of lets each reading the one before twice would
        double at every link)."""
        code = self._let(name, slots)
        return memoised(code, self.memos) if code.static is not None and not code.is_const else code

    def _call(self, expr: ast.Call, func: str, args: tuple[ast.Expr, ...], slots: dict[str, int]) -> Staged:
        builtin = BUILTINS[func]
        coercions = self.notes.calls[id(expr)]
        parts = [coerce(self.code(a, slots), c) for a, c in zip(args, coercions, strict=True)]
        if not builtin.context:
            if builtin.impl is identity:  # (number(): a call less on every path through it)
                return parts[0]
            return combine(parts, builtin.impl)
        # A built-in that reads the cluster depends on the pod's evaluation context.
        impl = builtin.impl
        ctx_code = Staged(FREE_POD, pod=lambda ctx, env: ctx)
        code = combine([ctx_code, *parts], impl)
        if func == "domain":  # reads the cluster as it is at each call: a node-stage value
            made = code.factory()
            return Staged(code.free | FREE_CLUSTER, node=made)
        return code

    def _logic(self, expr: ast.Binary, slots: dict[str, int]) -> Staged:
        left, right = self.code(expr.left, slots), self.code(expr.right, slots)
        is_and = expr.op == "and"
        if left.is_const:
            if bool(left.const) is (not is_and):  # false and x / true or x
                return Staged(frozenset(), const=left.const)
            return right
        return lazy([left, right], expr.op)

    def _if(self, cond: ast.Expr, then: ast.Expr, otherwise: ast.Expr, slots: dict[str, int]) -> Staged:
        c, t, o = self.code(cond, slots), self.code(then, slots), self.code(otherwise, slots)
        if c.is_const:
            return t if c.const else o
        return lazy([c, t, o], "if")

    def _aggregate(self, expr: ast.Quantifier | ast.Aggregate, slots: dict[str, int]) -> Staged:
        slot = len(slots)
        inner_slots = {**slots, expr.var: slot}
        over_domain = self.notes.domain_aggregates.get(id(expr))
        if over_domain is not None:
            if isinstance(over_domain, OverDomains):
                code = compile_aggregates.over_domains(self, expr, over_domain, slots, slot, inner_slots)
            else:
                code = compile_aggregates.domain_aggregate(self, expr, over_domain, slots, slot, inner_slots)
            if not slots and not self.fixed:  # (in a preempt rule, nested, unrolled: node by node)
                self.domain_codes.setdefault(id(expr), code.factory())
            return code
        iterable = self.code(expr.iterable, slots)
        indexed = compile_aggregates.indexed(self, expr, iterable, slot, inner_slots)
        if indexed is not None:
            return indexed
        where = self.code(expr.where, inner_slots) if expr.where is not None else None
        value = self.code(expr.value, inner_slots) if isinstance(expr, ast.Aggregate) else None
        test = element_test(expr, self.notes, lambda e: self.code(e, inner_slots)) if where else None
        cond = where if test is None else test.other  # (the condition as the loop runs it)
        parts = [p for p in (where, value) if p is not None]
        free = iterable.free | frozenset().union(*(p.free for p in parts)) - {expr.var}
        kind = expr.kind
        empty = empty_result(kind)

        def build(it: NodeFn, wf: NodeFn | None, vf: NodeFn | None) -> NodeFn:
            if test is not None and wf is not None:
                return element_loop(kind, slot, it, test, wf, vf, empty)
            return aggregate_loop(kind, slot, it, wf, vf, empty)

        if free <= FREE_POD:  # the whole aggregate is pod-only: run it at bind time
            it_f, w_f, v_f = (as_pod_node(p) for p in (iterable, cond, value))

            def pod_fn(ctx: EvalContext, env: Any) -> Any:
                node_fn = build(it_f(ctx), w_f(ctx) if cond else None, v_f(ctx) if value else None)
                return node_fn(None, env if env is not None else {})

            return Staged(free, pod=pod_fn)
        if isinstance(expr, ast.Quantifier) and where is not None and not iterable.free - FREE_POD and not self.fixed:
            return compile_aggregates.unrolled_quantifier(self, expr, iterable, where, slot, inner_slots, free)
        if not (free & FREE_POD) and all(p.pod is None and p.node is None for p in (iterable, *parts)):
            static = build(
                iterable.factory()(NO_CTX),
                cond.factory()(NO_CTX) if cond else None,
                value.factory()(NO_CTX) if value else None,
            )
            return Staged(free, static=static, cost=_LOOP_COST)
        it_fac, w_fac, v_fac = (
            iterable.factory(),
            cond.factory() if cond else None,
            value.factory() if value else None,
        )

        def factory(ctx: EvalContext) -> NodeFn:
            return build(it_fac(ctx), w_fac(ctx) if w_fac else None, v_fac(ctx) if v_fac else None)

        return Staged(free, node=factory)

    def _whole_product(self, left: ast.Expr, right: ast.Expr, lcode: Staged, rcode: Staged, info: BinaryInfo) -> bool:
        """Whether quantity * x is sure to be whole, so that plain * does what _q_mul does: a
        quantity (always int milli-units) times a constant int."""

        def quantity(expr: ast.Expr, coercion: str | None) -> bool:
            return (
                self.notes.types[id(expr)] == QUANTITY
                or coercion == TO_MILLI
                or self.notes.coercions.get(id(expr)) == TO_MILLI
            )

        def whole(code: Staged) -> bool:
            return code.is_const and isinstance(code.const, int) and not isinstance(code.const, bool)

        return (quantity(left, info.left) and whole(rcode)) or (quantity(right, info.right) and whole(lcode))

    def _costly(self, expr: ast.Expr) -> bool:
        if isinstance(expr, (ast.Quantifier, ast.Aggregate)):
            return True
        if isinstance(expr, ast.Call) and BUILTINS[expr.func].costly:
            return True
        return False


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready to bind: its guard, body, and (filter) reason and unresolvable condition, each staged.

    ``context`` names the cluster-wide built-ins the body calls (lets included): their version
    tokens decide how long a cached per-node result stays valid (rulesched.lang.evaluation.ruleset)."""

    checked: CheckedRule
    guard: Staged | None
    body: Staged
    reason: Staged | None
    order: Staged | None
    context: frozenset[str] = frozenset()
    unresolvable: Staged | None = None  # filter: which failures preemption cannot fix

    @property
    def name(self) -> str:
        return self.checked.name


# Variables a rule's env holds (set per evaluation, like a bound variable): a preempt rule's victim,
# a device score's device and request.
_SLOT_VARIABLES = frozenset({schema.VICTIM_VARIABLE, schema.DEVICE_VARIABLE, schema.REQUEST_VARIABLE})


def rule_slots(rule: ast.Rule) -> dict[str, int]:
    """The env slots of a rule's own variables (see _SLOT_VARIABLES)."""
    if rule.kind is ast.RuleKind.PREEMPT:
        return {schema.VICTIM_VARIABLE: 0}
    if rule.target == "device":
        return {schema.DEVICE_VARIABLE: 0, schema.REQUEST_VARIABLE: 1}
    return {}


def compile_rules(
    checked: CheckedRules, memos: NodeMemos, domain_codes: dict[int, Any] | None = None
) -> list[CompiledRule]:
    """The rules compiled, their node-only values cached in ``memos``; ``domain_codes`` receives
    the compiled aggregates over domains (by id of the aggregate) for the column evaluator
    (rulesched.engine.domain_columns)."""
    compiler = Compiler(checked, memos)
    out = []
    for c in checked.rules:
        rule = c.rule
        slots = rule_slots(rule)
        guard = compiler.code(rule.guard, {}) if rule.guard is not None else None
        body = compiler.code(rule.body, slots)
        if not slots:  # (a body reading only lets, with a loop, is kept by their values as a let is)
            body = kept_by_inputs(
                body, rule.body, compiler.notes, compiler.lets, lambda used: compiler._input(used, {}), compiler.kept
            )
        reason = compiler.code(rule.reason, {}) if rule.reason is not None else None
        order = compiler.code(rule.order, {}) if rule.order is not None else None
        unresolvable = compiler.code(rule.unresolvable, {}) if rule.unresolvable is not None else None
        out.append(CompiledRule(c, guard, body, reason, order, _context_calls(rule.body, checked), unresolvable))
    if domain_codes is not None:
        domain_codes.update(compiler.domain_codes)
    return out


def _context_calls(expr: ast.Expr, checked: CheckedRules) -> frozenset[str]:
    found: set[str] = set()
    notes = checked.notes

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            found.add(e.func)
        elif is_rule_variable(notes, e, schema.CLUSTER_VARIABLE):
            found.add("domain")  # the cluster is the domain of every node (its version)
        return INTO

    through_lets(expr, notes, checked.lets, visit)
    return frozenset(found)
