"""Staged closures: the building blocks :mod:`rulesched.lang.evaluation.compile` assembles.

A :class:`Staged` is one compiled expression in the earliest stage its inputs allow: a constant,
a pod-stage function ``(ctx, env)`` run once per pod, or a node-stage function ``(node, env)``
(``static`` when it does not depend on the pod, built once; else a factory called per pod).
The combinators here fold constants, hoist pod-stage values into node closures, fuse attribute
paths into one closure, memoise node-only values in the rule set's :class:`NodeMemos` and evaluate
and/or/if lazily.
No source text is generated: closures over closures only.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation import inline
from rulesched.lang.values import COERCIONS, _div
from rulesched.semantics.matching import subset

PodFn = Callable[[EvalContext, Any], Any]  # (ctx, env) -> value
# (node, env) -> value. ``env`` holds the bound variables of the aggregates being evaluated and
# defaults to None: a loop makes one when it is the outermost, so a top-level node function can
# be called with the node alone.
NodeFn = Callable[..., Any]
Factory = Callable[[EvalContext], NodeFn]

Step = tuple[Any, ...]  # ("fn", f): f(value); ("get", key, default): value.get(key, default)

# The sets of free variables (Staged.free) the compiler tells stages apart by.
FREE_POD = frozenset({schema.POD_VARIABLE})
FREE_NODE = frozenset({schema.NODE_VARIABLE})
FREE_CLUSTER = frozenset({schema.CLUSTER_VARIABLE})  # never memoised per node, never pod-only


@dataclass(frozen=True)
class Staged:
    """One compiled expression: a constant, a pod-stage function, or a node-stage factory."""

    free: frozenset[str]  # variables it reads: "pod", "node", bound variable names
    const: Any = None
    pod: PodFn | None = None
    node: Factory | None = None
    static: NodeFn | None = None  # node stage that does not depend on the pod: built once
    # When ``static`` only reads a path from the node or a bound variable (``node.free.cpu``,
    # ``p.labels["app"]``): the root (None for the node, else the env slot) and the steps, so
    # that one closure walks the whole path (see chain).
    chain: tuple[int | None, tuple[Step, ...]] | None = None
    cost: int = 1  # of ``static``: about how many Python calls one evaluation makes (compile caches costly ones)

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
                return lambda n, env=None: value

            return hoisted
        const = self.const
        return lambda ctx: lambda n, env=None: const


class NoContext:
    """Stands in for the context when building node-only closures, which never read it."""


NO_CTX: Any = NoContext()


def as_pod_node(code: Staged | None) -> Callable[[EvalContext], NodeFn]:
    """A pod-only code as a per-ctx node function (node ignored), for pod-stage aggregates."""
    if code is None:
        return lambda ctx: lambda n, env=None: None
    if code.pod is not None:
        pod = code.pod
        return lambda ctx: lambda n, env=None: pod(ctx, env)
    return code.factory()


def aggregate_loop(kind: str, slot: int, it: NodeFn, wf: NodeFn | None, vf: NodeFn | None, empty: Any) -> NodeFn:
    if kind == "count":
        if wf is None:
            return lambda n, env=None: len(it(n, env))

        def count(n: Any, env: Any = None) -> int:
            if env is None:
                env = {}
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
            return (lambda n, env=None: len(it(n, env)) > 0) if want else (lambda n, env=None: True)

        def quantify(n: Any, env: Any = None) -> bool:
            if env is None:
                env = {}
            for x in it(n, env):
                env[slot] = x
                if bool(wf(n, env)) is want:
                    return want
            return not want

        return quantify
    assert vf is not None

    def values(n: Any, env: Any = None) -> list[Any]:
        if env is None:
            env = {}
        out = []
        for x in it(n, env):
            env[slot] = x
            if wf is None or wf(n, env):
                out.append(vf(n, env))
        return out

    return of_values(kind, values, empty)


def of_values(kind: str, values: Callable[[Any, Any], list[Any]], empty: Any) -> NodeFn:
    """sum / collect / min / max of the values a loop gives (``values(node, env)``)."""
    if kind == "sum":
        return lambda n, env=None: sum(values(n, env))
    if kind == "collect":
        return lambda n, env=None: tuple(values(n, env))
    pick = min if kind == "min" else max

    def extreme(n: Any, env: Any = None) -> Any:
        found = values(n, env)
        return pick(found) if found else empty

    return extreme


def unrolled(kind: str, conditions: list[Any], known: list[bool]) -> NodeFn:
    """any / all / count of conditions, one per element of a list known at bind time; a known
    condition is a value (``known``), the others node functions. (compile_aggregates.unrolled_quantifier.)"""
    values = [c for c, k in zip(conditions, known, strict=True) if k]
    fns = [c for c, k in zip(conditions, known, strict=True) if not k]
    if kind == "count":
        base = sum(1 for v in values if v)
        return lambda n, env=None: base + sum(1 for f in fns if f(n, env))
    want = kind == "any"
    if any(bool(v) is want for v in values):
        return lambda n, env=None: want
    if not fns:
        return lambda n, env=None: not want
    if len(fns) == 1:
        f0 = fns[0]
        return lambda n, env=None: bool(f0(n, env))  # any and all of one condition alike
    if len(fns) == 2:
        f0, f1 = fns
        if want:
            return lambda n, env=None: bool(f0(n, env) or f1(n, env))
        return lambda n, env=None: bool(f0(n, env) and f1(n, env))

    def quantify(n: Any, env: Any = None) -> bool:
        for f in fns:
            if bool(f(n, env)) is want:
                return want
        return not want

    return quantify


def from_counts(kind: str, negate: bool, counts: Callable[..., tuple[int, int]]) -> NodeFn:
    """count / any / all from (elements equal to the value, all elements)."""
    if kind == "count":
        if negate:
            return lambda n, env=None: (c := counts(n, env))[1] - c[0]
        return lambda n, env=None: counts(n, env)[0]
    if kind == "any":
        if negate:
            return lambda n, env=None: (c := counts(n, env))[0] < c[1]
        return lambda n, env=None: counts(n, env)[0] > 0
    if negate:  # all(x where x != v): none equal
        return lambda n, env=None: counts(n, env)[0] == 0
    return lambda n, env=None: (c := counts(n, env))[0] == c[1]


def empty_result(kind: str) -> Any:
    return 0 if kind in ("count", "sum", "min", "max") else ()


def list_index(seq: Any, i: Any, default: Any) -> Any:
    if isinstance(i, int) and -len(seq) <= i < len(seq):
        return seq[i]
    return default


def coerce(code: Staged, coercion: str | None) -> Staged:
    if coercion is None:
        return code
    return map1(code, COERCIONS[coercion])


_MISSING: Any = object()


class NodeMemos:
    """The node-only values one compiled rule set caches, per node (:func:`memoised`): node name
    -> (the node view, its generation, values by compiled expression).

    The engine's, not the node's: an entry holds while the view is the same object at the same
    generation (a node info bumps it on every change, and a snapshot's never change), so a changed
    node, or another version of it (a clone, a dry run's), starts afresh, and rule sets (profiles,
    a reload) never share or evict each other's values. Shared by the threads evaluating the set:
    an entry is one tuple, replaced whole. Bounded: one entry per node name, and when names of
    nodes long gone make the table outgrow twice the cluster the sessions last saw
    (:meth:`fit`), it starts afresh.
    """

    __slots__ = ("entries", "limit")

    def __init__(self) -> None:
        self.entries: dict[str, tuple[Any, int, dict[Any, Any]]] = {}
        self.limit = 65536  # (until a session says how big the cluster is)

    def fit(self, nodes: int) -> None:
        """The cluster being evaluated has ``nodes`` nodes."""
        self.limit = 2 * nodes + 64

    def start(self, n: Any) -> dict[Any, Any]:
        """A fresh, empty set of values for the node as it is now."""
        entries = self.entries
        if len(entries) >= self.limit and n.name not in entries:
            entries.clear()
        memo: dict[Any, Any] = {}
        entries[n.name] = (n, n.generation, memo)
        return memo

    def values(self, n: Any) -> dict[Any, Any]:
        """The values cached for the node as it is now (empty: none)."""
        entry = self.entries.get(n.name)
        return entry[2] if entry is not None and entry[0] is n and entry[1] == n.generation else {}


def memoised(code: Staged, memos: NodeMemos) -> Staged:
    """Cache a node-only value in the rule set's node memos; the key is unique to this compiled
    expression."""
    assert code.static is not None
    inner, key = code.static, object()
    entries, start = memos.entries, memos.start

    def cached(n: Any, env: Any = None) -> Any:
        entry = entries.get(n.name)
        if entry is not None and entry[0] is n and entry[1] == n.generation:
            memo = entry[2]
            # get() rather than try/except KeyError: a miss happens for every cached expression
            # of every changed node, and a raised KeyError costs more than the lookup itself
            value = memo.get(key, _MISSING)
            if value is not _MISSING:
                return value
        else:
            memo = start(n)
        value = memo[key] = inner(n, env)
        return value

    return Staged(code.free, static=cached, cost=1)


def map1(code: Staged, fn: Callable[[Any], Any]) -> Staged:
    if code.is_const:
        return Staged(code.free, const=fn(code.const))
    if code.pod is not None:
        pod = code.pod
        return Staged(code.free, pod=lambda ctx, env: fn(pod(ctx, env)))
    if code.chain is not None:
        return chained(code, ("fn", fn))
    if code.static is not None:
        static = code.static
        return Staged(code.free, static=lambda n, env=None: fn(static(n, env)), cost=code.cost + 1 + call_count(fn))
    factory = code.factory()

    def make(ctx: EvalContext) -> NodeFn:
        f = factory(ctx)
        return lambda n, env=None: fn(f(n, env))

    return Staged(code.free, node=make)


def call_count(fn: Any) -> int:
    """1 if calling ``fn`` runs Python code (a frame), 0 for C functions like len or attrgetter."""
    return 1 if isinstance(fn, (types.FunctionType, types.MethodType)) else 0


def get_key(code: Staged, key: Any, default: Any) -> Staged:
    """``code[key]`` on a map, ``default`` when the key is missing."""
    if code.chain is not None:
        return chained(code, ("get", key, default))
    return map1(code, lambda m: m.get(key, default))


def chained(code: Staged, step: Step) -> Staged:
    assert code.chain is not None
    root, steps = code.chain
    chain = (root, (*steps, step))
    return Staged(
        code.free,
        static=chain_steps(*chain),
        chain=chain,
        cost=code.cost + (call_count(step[1]) if step[0] == "fn" else 0),
    )


def chain_steps(root: int | None, steps: tuple[Step, ...]) -> NodeFn:
    """One closure for a whole path: ``node.free.cpu`` costs one call, not one per dot.
    Specialised for the shapes rules use most; longer paths loop."""
    shape = tuple(s[0] for s in steps)
    if root is None:
        if shape == ("fn",):
            f0 = steps[0][1]
            return lambda n, env=None: f0(n)
        if shape == ("fn", "get"):
            (_, f0), (_, k1, d1) = steps
            return lambda n, env=None: f0(n).get(k1, d1)
        if shape == ("fn", "fn"):
            (_, f0), (_, f1) = steps
            return lambda n, env=None: f1(f0(n))
        if shape == ("fn", "get", "fn"):
            (_, f0), (_, k1, d1), (_, f2) = steps
            return lambda n, env=None: f2(f0(n).get(k1, d1))
        if shape == ("fn", "fn", "fn"):
            (_, f0), (_, f1), (_, f2) = steps
            return lambda n, env=None: f2(f1(f0(n)))
    else:
        slot = root
        if shape == ("fn",):
            f0 = steps[0][1]
            return lambda n, env=None: f0(env[slot])
        if shape == ("fn", "get"):
            (_, f0), (_, k1, d1) = steps
            return lambda n, env=None: f0(env[slot]).get(k1, d1)
        if shape == ("fn", "fn"):
            (_, f0), (_, f1) = steps
            return lambda n, env=None: f1(f0(env[slot]))
        if shape == ("fn", "get", "fn"):
            (_, f0), (_, k1, d1), (_, f2) = steps
            return lambda n, env=None: f2(f0(env[slot]).get(k1, d1))
    if not steps:
        return (lambda n, env=None: n) if root is None else (lambda n, env=None: env[root])

    def walk(n: Any, env: Any = None) -> Any:
        value = n if root is None else env[root]
        for step in steps:
            value = step[1](value) if step[0] == "fn" else value.get(step[1], step[2])
        return value

    return walk


def chain1(steps: tuple[Step, ...]) -> Callable[[Any], Any]:
    """A path as a function of its root value (for map() over elements)."""
    shape = tuple(s[0] for s in steps)
    if shape == ("fn",):
        return steps[0][1]  # type: ignore[no-any-return]
    if shape == ("fn", "get"):
        (_, f0), (_, k1, d1) = steps
        return lambda x: f0(x).get(k1, d1)
    walk = chain_steps(0, steps)
    return lambda x: walk(None, (x,))


def combine(parts: list[Staged], fn: Callable[..., Any]) -> Staged:
    """Apply ``fn`` to the parts' values, at the earliest stage all of them are known."""
    free = frozenset().union(*(p.free for p in parts)) if parts else frozenset()
    if all(p.is_const for p in parts):
        return Staged(free, const=fn(*(p.const for p in parts)))
    if len(parts) == 1 and parts[0].chain is not None:
        return chained(parts[0], ("fn", fn))
    if all(p.is_const or p.pod is not None for p in parts):
        getters = [pod_getter(p) for p in parts]
        if len(getters) == 2:
            g0, g1 = getters
            return Staged(free, pod=lambda ctx, env: fn(g0(ctx, env), g1(ctx, env)))
        return Staged(free, pod=lambda ctx, env: fn(*(g(ctx, env) for g in getters)))
    if all(p.is_const or p.static is not None for p in parts):
        return Staged(
            free,
            static=node_apply(
                fn,
                [static_getter(p) for p in parts],
                [p.is_const for p in parts],
                [p.const for p in parts],
                [p.chain for p in parts],
            ),
            cost=1 + call_count(fn) + sum(p.cost for p in parts if not p.is_const),
        )
    factories = [p.factory() if not p.is_const and p.pod is None else None for p in parts]
    chains = [p.chain for p in parts]

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
        return node_apply(fn, getters, is_const, consts, chains)

    return Staged(free, node=make)


def node_apply(
    fn: Callable[..., Any], getters: list[Any], is_const: list[bool], consts: list[Any], chains: list[Any] | None = None
) -> NodeFn:
    """The per-node closure, specialised for the one- and two-operand shapes that dominate
    (see :mod:`rulesched.lang.evaluation.inline`; ``chains`` tell which operands are node paths)."""
    if len(getters) == 1:
        g = getters[0]
        return lambda n, env=None: fn(g(n, env))
    if len(getters) == 2:
        (g0, g1), (c0, c1) = getters, consts
        p0, p1 = (inline.node_path(c) for c in chains) if chains else (None, None)
        if is_const[0]:
            if fn is subset:  # the pod's nodeSelector is known at bind time
                return subset_of(c0, g1)
            if p1 is not None and fn in inline.PATH_LEFT:
                return inline.PATH_LEFT[fn](c0, p1)
            if chains and chains[1] == (None, ()):  # f(constant, node): a cluster-wide built-in
                return lambda n, env=None: fn(c0, n)
            if fn in inline.LEFT:
                return inline.LEFT[fn](c0, g1)
            return lambda n, env=None: fn(c0, g1(n, env))
        if is_const[1]:
            if fn is _div and c1:  # x / constant: no zero check per node
                return lambda n, env=None: g0(n, env) / c1
            if p0 is not None and fn in inline.PATH_RIGHT:
                return inline.PATH_RIGHT[fn](c1, p0)
            if fn in inline.RIGHT:
                return inline.RIGHT[fn](g0, c1)
            return lambda n, env=None: fn(g0(n, env), c1)
        if p1 is not None and fn in inline.BOTH_PATH:
            return inline.BOTH_PATH[fn](g0, p1)
        if fn in inline.BOTH:
            return inline.BOTH[fn](g0, g1)
        return lambda n, env=None: fn(g0(n, env), g1(n, env))
    items = list(zip(getters, is_const, consts, strict=True))
    return lambda n, env=None: fn(*(c if k else g(n, env) for g, k, c in items))


def subset_of(small: Any, big: NodeFn) -> NodeFn:
    """subset(small, big) with ``small`` known: no call per node for the empty nodeSelector most
    pods have, one lookup for a one-label selector."""
    items = tuple(small.items())
    if not items:
        return lambda n, env=None: True
    if len(items) == 1:
        ((k, v),) = items
        return lambda n, env=None: big(n, env).get(k) == v

    def contains(n: Any, env: Any = None) -> bool:
        labels = big(n, env)
        return all(labels.get(k) == v for k, v in items)

    return contains


def pod_getter(code: Staged) -> PodFn:
    if code.is_const:
        value = code.const
        return lambda ctx, env: value
    assert code.pod is not None
    return code.pod


def static_getter(code: Staged) -> NodeFn | None:
    return None if code.is_const else code.static


def lazy(parts: list[Staged], kind: str) -> Staged:
    """and / or / if: like combine, but evaluating only the operands the outcome needs."""
    free = frozenset().union(*(p.free for p in parts))
    if all(p.is_const or p.pod is not None for p in parts):
        return Staged(free, pod=lazy_fn(kind, [pod_getter(p) for p in parts]))
    if all(p.is_const or p.static is not None for p in parts):
        static = (
            if_known([p.factory()(NO_CTX) for p in parts], [p.is_const for p in parts], [p.const for p in parts])
            if kind == "if"
            else None
        )
        return Staged(
            free,
            static=static or lazy_fn(kind, [p.factory()(NO_CTX) for p in parts]),
            cost=1 + sum(p.cost for p in parts if not p.is_const),
        )
    first_known = parts[0].is_const or parts[0].pod is not None
    first, factories = pod_getter(parts[0]) if first_known else None, [p.factory() for p in parts]
    branches_known = [p.is_const or p.pod is not None for p in parts]
    branch_values = [pod_getter(p) if known else None for p, known in zip(parts, branches_known, strict=True)]

    def make(ctx: EvalContext) -> NodeFn:
        if first is not None:  # decided per pod: fold the branch away for every node
            value = first(ctx, {})
            if kind == "and":
                return factories[1](ctx) if value else (lambda n, env=None: value)
            if kind == "or":
                return (lambda n, env=None: value) if value else factories[1](ctx)
            return factories[1](ctx) if value else factories[2](ctx)
        fns = [f(ctx) for f in factories]
        if kind == "if" and (branches_known[1] or branches_known[2]):
            values = [g(ctx, {}) if g is not None else None for g in branch_values]
            shaped = if_known(fns, branches_known, values)
            if shaped is not None:
                return shaped
        return lazy_fn(kind, fns)

    return Staged(free, node=make)


def if_known(fns: list[NodeFn], known: list[bool], values: list[Any]) -> NodeFn | None:
    """``if c then a else b`` with a branch known for every node (``then 0``): the value sits in
    the closure instead of behind a call. None when neither branch is known."""
    f0, f1, f2 = fns
    if known[1] and known[2]:
        a, b = values[1], values[2]
        return lambda n, env=None: a if f0(n, env) else b
    if known[1]:
        a = values[1]
        return lambda n, env=None: a if f0(n, env) else f2(n, env)
    if known[2]:
        b = values[2]
        return lambda n, env=None: f1(n, env) if f0(n, env) else b
    return None


def lazy_fn(kind: str, fns: list[Callable[..., Any]]) -> Callable[..., Any]:
    """Works for both stages: pod functions take (ctx, env), node functions (node, env)."""
    if kind == "and":
        f0, f1 = fns
        return lambda x, env=None: f0(x, env) and f1(x, env)
    if kind == "or":
        f0, f1 = fns
        return lambda x, env=None: f0(x, env) or f1(x, env)
    f0, f1, f2 = fns
    return lambda x, env=None: f1(x, env) if f0(x, env) else f2(x, env)
