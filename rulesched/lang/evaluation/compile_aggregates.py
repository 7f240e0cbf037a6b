"""The aggregates the compiler (:mod:`rulesched.lang.evaluation.compile`) gives a shape of their
own, each cheaper per node than a loop over the elements:

* :func:`indexed`: count / any / all over a node's list comparing an element's value with one
  known at bind time, answered from the node's elements counted by that value;
* :func:`domain_aggregate` and :func:`over_domains`: aggregates over a topology domain's pods or
  nodes, answered from the per-domain counts of :mod:`rulesched.lang.builtins.domains`;
* :func:`unrolled_quantifier`: any / all / count over a list known at bind time, compiled once per
  element with the element as a constant.

Each takes the compiler for its ``code`` (the parts compiled), its node memos and its shared
state; the plain loop (:func:`rulesched.lang.evaluation.stages.aggregate_loop`) stays in
:meth:`Compiler._aggregate`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from rulesched.lang.builtins import domains
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation import domain_stages
from rulesched.lang.evaluation.stages import (
    FREE_CLUSTER,
    FREE_NODE,
    FREE_POD,
    NodeFn,
    NodeMemos,
    Staged,
    aggregate_loop,
    as_pod_node,
    chain1,
    coerce,
    from_counts,
    memoised,
    unrolled,
)
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.frontend.domain_check import DomainAggregate, OverDomains
from rulesched.lang.types import BOOL, DURATION, NUMBER, QUANTITY, STRING


class Compiling(Protocol):
    """What these take from the compiler (:class:`rulesched.lang.evaluation.compile.Compiler`,
    which calls them): its ``code`` for the parts, its annotations and node memos, the tokens
    aggregates written alike share, and the slots an unrolled body fixes (under its lock)."""

    fixed: dict[int, Any]

    @property
    def notes(self) -> Annotations: ...

    @property
    def memos(self) -> NodeMemos: ...

    @property
    def tokens(self) -> dict[Any, object]: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    def code(self, expr: ast.Expr, slots: dict[str, int]) -> Staged: ...


_UNROLL_MAX = 16  # elements of a bind-time list a quantifier is unrolled over
# types whose == agrees with dict lookup (hash equality), for indexed
_HASHABLE = (STRING, NUMBER, QUANTITY, DURATION, BOOL)


def indexed(
    compiler: Compiling, expr: ast.Quantifier | ast.Aggregate, iterable: Staged, slot: int, inner_slots: dict[str, int]
) -> Staged | None:
    """count / any / all over a node-only list, where the condition compares a value of the
    element with a value known at bind time::

        count(p in node.pods where p.labels["app"] == pod.labels["app"])

    The node's elements are counted by that value once, in the node's memo (like any
    node-only aggregate); each pod then costs a dict lookup per node, not a pass over the
    list. None when the aggregate does not have that shape."""
    where = expr.where
    if not isinstance(expr, ast.Quantifier) or not isinstance(where, ast.Binary) or where.op not in ("==", "!="):
        return None
    if iterable.static is None or not iterable.free <= FREE_NODE:
        return None
    types = compiler.notes.types
    if types.get(id(where.left)) not in _HASHABLE or types.get(id(where.right)) not in _HASHABLE:
        return None  # maps, lists, records: equality is not what a dict lookup does
    info = compiler.notes.binary[id(where)]
    sides = (
        coerce(compiler.code(where.left, inner_slots), info.left),
        coerce(compiler.code(where.right, inner_slots), info.right),
    )
    element = frozenset({expr.var})
    keyed = [c for c in sides if c.static is not None and c.free == element]
    known = [c for c in sides if c.pod is not None]  # a constant: the aggregate is node-only
    if len(keyed) != 1 or len(known) != 1:
        return None
    key_of, elements, value = keyed[0].static, iterable.static, known[0].pod
    assert key_of is not None and elements is not None and value is not None
    key_chain = keyed[0].chain
    if key_chain is not None and key_chain[0] == slot:  # a path from the element: no env needed
        key1 = chain1(key_chain[1])

        def group(n: Any, env: Any = None) -> tuple[dict[Any, int], int]:
            items = elements(n, env)
            counts: dict[Any, int] = {}
            get = counts.get
            for k in map(key1, items):
                counts[k] = get(k, 0) + 1
            return counts, len(items)
    else:

        def group(n: Any, env: Any = None) -> tuple[dict[Any, int], int]:
            if env is None:
                env = {}
            counts: dict[Any, int] = {}
            total = 0
            for x in elements(n, env):
                env[slot] = x
                k = key_of(n, env)
                counts[k] = counts.get(k, 0) + 1
                total += 1
            return counts, total

    grouped = memoised(Staged(iterable.free, static=group), compiler.memos).static
    assert grouped is not None
    kind, negate = expr.kind, where.op == "!="

    def make(ctx: EvalContext) -> NodeFn:
        v = value(ctx, {})
        if v != v:  # NaN equals nothing, and a dict lookup could still find the same object
            return from_counts(kind, negate, lambda n, env=None: (0, grouped(n, env)[1]))
        return from_counts(kind, negate, lambda n, env=None: ((g := grouped(n, env))[0].get(v, 0), g[1]))

    return Staged(iterable.free | known[0].free, node=make)


def domain_aggregate(
    compiler: Compiling,
    expr: ast.Quantifier | ast.Aggregate,
    info: DomainAggregate,
    slots: dict[str, int],
    slot: int,
    inner_slots: dict[str, int],
) -> Staged:
    """An aggregate over a domain's pods or nodes, answered from per-domain counts kept by
    rulesched.lang.builtins.domains. The index is keyed by this aggregate, the domain's
    label key and the values of its pod-only parts (``info.holes``), computed once per pod;
    its where and value are made once per index, for a context of the pod that built it
    (pods with equal pod-only parts give them equal answers)."""
    source = compiler.code(info.source, slots)
    holes = [compiler.code(h, slots).factory() for h in info.holes]
    where = compiler.code(expr.where, inner_slots) if expr.where is not None else None
    value = compiler.code(expr.value, inner_slots) if isinstance(expr, ast.Aggregate) else None
    w_fac, v_fac = (None if c is None else c.factory() for c in (where, value))
    source_fac = source.factory()
    kind, nodes = expr.kind, info.elements == "nodes"
    # Aggregates written alike (a let used by two rules, the same count in a filter and a
    # score) share their indexes: the key is the aggregate's text as a tree (names resolve
    # alike within one rule set, whose session owns the store), spans left out.
    shape = ("aggregate", kind, info.elements, expr.var, expr.where, value and expr.value)  # type: ignore[union-attr]
    token = compiler.tokens.setdefault(shape, object())  # (hashing a tree once, not at every lookup)
    keyed = domain_stages.keyed_terms(expr, compiler.notes, lambda e: compiler.code(e, inner_slots), slot, value)
    if keyed is not None:
        return _keyed_aggregate(kind, nodes, source, token, *keyed)

    def element(fac: Any, private: EvalContext, fixed: dict[int, Any]) -> Any:
        if fac is None:
            return None
        fn = fac(private)
        return lambda x: fn(None, {**fixed, slot: x})

    def make(ctx: EvalContext) -> NodeFn:
        of_node, hole_fns, pod = source_fac(ctx), [h(ctx) for h in holes], ctx.pod
        makers: dict[Any, Any] = {}

        def answer(n: Any, env: Any = None) -> Any:
            ref = of_node(n, env)
            values = tuple([domains.freeze(h(n, env)) for h in hole_fns])
            made = makers.get((ref.key, values))
            if made is None:  # (env: the victim of a preempt rule, fixed like the pod)
                private, fixed = EvalContext(pod), dict(env or {})
                made = makers[ref.key, values] = domains.aggregate_index(
                    kind, ref.key, nodes, element(w_fac, private, fixed), element(v_fac, private, fixed)
                )
            return domains.aggregate(ref, (token, values), kind, made)

        return answer

    return Staged(source.free | FREE_POD | FREE_CLUSTER, node=make)


def _keyed_aggregate(
    kind: str, nodes: bool, source: Staged, token: object, keys: list[Any], sides: list[Staged], value: Any
) -> Staged:
    make = domain_stages.keyed(kind, nodes, source.factory(), token, keys, [as_pod_node(c) for c in sides], value)
    return Staged(source.free | FREE_POD | FREE_CLUSTER, node=make)


def over_domains(
    compiler: Compiling,
    expr: ast.Quantifier | ast.Aggregate,
    info: OverDomains,
    slots: dict[str, int],
    slot: int,
    inner_slots: dict[str, int],
) -> Staged:
    """min/max of an indexed domain aggregate over the domains of KEY (see OverDomains): one
    representative node per domain value among the nodes the where holds for (kept per node
    generation), the inner aggregate looked up once per representative; the answer is the
    same on every node, so it is kept until the cluster changes."""
    inner = compiler.code(info.inner, inner_slots).factory()
    key_fac = compiler.code(info.key, slots).factory()
    holes = [compiler.code(h, slots).factory() for h in info.holes]
    where = compiler.code(expr.where, inner_slots).factory() if expr.where is not None else None
    make = domain_stages.over_domains(expr.kind, slot, inner, key_fac, holes, where)
    return Staged(FREE_POD | FREE_NODE | FREE_CLUSTER, node=make)


def unrolled_quantifier(
    compiler: Compiling,
    expr: ast.Quantifier,
    iterable: Staged,
    where: Staged,
    slot: int,
    inner_slots: dict[str, int],
    free: frozenset[str],
) -> Staged:
    """any / all / count over a list known at bind time (``pod.requests``, ``pod.tolerations``)
    whose condition reads the node: at bind time the condition is compiled once per element
    with the element as a constant, so what depends on the pod and the element folds away
    (``pod.requests[r] <= node.free[r]`` becomes ``500 <= node.free.cpu``) and each node
    costs one closure per element instead of a loop. Compiled conditions are kept per element
    value; a list of unhashable or too many elements is looped over as usual, with ``where``
    (the condition compiled for the loop)."""
    assert expr.where is not None
    where_expr, kind = expr.where, expr.kind
    items_of, where_of = iterable.factory(), where.factory()
    compiled: dict[Any, Staged] = {}

    def condition(item: Any) -> Staged:
        code = compiled.get(item)
        if code is None:
            # Compiling at bind time, possibly on several threads at once: the compiler's
            # state (fixed slots, let codes) is shared, so one compilation at a time.
            with compiler.lock:
                code = compiled.get(item)
                if code is None:
                    compiler.fixed = {slot: item}
                    try:
                        code = compiled[item] = compiler.code(where_expr, inner_slots)
                    finally:
                        compiler.fixed = {}
        return code

    def make(ctx: EvalContext) -> NodeFn:
        try:
            items = list(items_of(ctx)(None, {}))
            # Numbers are left to the loop: 1, 1.0 and True (or 0.0 and -0.0) are one key.
            if len(items) > _UNROLL_MAX or any(isinstance(i, (int, float)) for i in items):
                raise TypeError("not unrolled")
            codes = [condition(item) for item in items]
        except TypeError:  # unhashable elements, numbers, too many
            return aggregate_loop(kind, slot, items_of(ctx), where_of(ctx), None, None)
        return unrolled(
            kind,
            [c.const if c.is_const else c.factory()(ctx) for c in codes],
            [c.is_const or c.pod is not None for c in codes],
        )

    return Staged(free, node=make)
