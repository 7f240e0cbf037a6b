"""What a rule costs, bounded before it ever runs: the ``too-costly`` check.

Every evaluation terminates (no loops but aggregates over finite lists, no recursion), but
termination is not enough: five nested aggregates over ``node.pods`` end after 110^5 steps per
node, and thirty lets each adding the one before to itself expand to 2^30 operations. So the
checker estimates, for each rule, an upper bound on the **steps** one evaluation for one (pod,
node) pair takes, and refuses a rule above :data:`MAX_STEPS`:

* every operation, name, field read, call and literal is one step; a list literal one per item;
* an aggregate or quantifier costs its list, plus, for each element the list may hold, one step
  and its ``where`` and value: nested aggregates multiply;
* a let costs what its value costs **at every use** (it is inlined where used);
* an ``if`` counts both branches, ``and``/``or`` both operands (the compiler walks both);
* ``x in LIST`` counts the list's length, list equality the shorter list's, a built-in its own
  loops over the lists it is given (``tolerated`` the tolerations, ``ports_conflict`` the product
  of its lists' lengths, a selector match :data:`SMALL_LIST`) and a built-in that reads the cluster or the node as a whole (``spread_ok``, ``volume_limits``)
  :data:`NODE_PODS` steps, as if it looked at each of the node's pods.

How long a list may be is assumed from Kubernetes' own limits (:data:`NODE_PODS`, kubelet's
default ``maxPods``; :data:`NODE_IMAGES`, the images a kubelet reports) or a generous round
number for lists Kubernetes leaves unbounded. A value built by the rules (a string, a list made
with ``+`` or ``collect``) may hold at most :data:`MAX_SIZE` elements or characters.

The walk is iterative and each let is estimated once, so estimating is linear in the text however
the lets expand. docs/language.md ("Cost") gives the limit and what it means in time.
Next stage: :mod:`rulesched.lang.evaluation.compile`, which only sees rules within the bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.lets import LetGraph
from rulesched.lang.frontend.source import Diagnostic, error
from rulesched.lang.types import STRING, ListOf, MapOf, Record, Type

# Steps one evaluation of one rule for one (pod, node) may take. A single aggregate over the
# node's pods with a condition of up to ~80 steps fits; two nested ones over node.pods (110 x 110)
# do not. Measured (benchmarks/bench_cost.py; docs/language.md, "Cost"): the costliest accepted
# rule adds about 0.22 s per pod on 5,000 nodes running 50,000 pods, 2.2 s on 5,000 full nodes.
MAX_STEPS = 10_000
# Steps all the rules of a set may take together for one (pod, node): about four times the
# bundled default profile (12,000).
MAX_SET_STEPS = 50_000
# Elements (lists, maps) or characters (strings) a value the rules build may hold.
MAX_SIZE = 100_000
# Estimates stop growing here: a let chain doubling 2,000 times would otherwise make a number of
# 600 digits, and nothing this large is ever accepted.
_CAP = 10**18

NODE_PODS = 110  # kubelet's default maxPods
NODE_IMAGES = 50  # kubelet's default nodeStatusMaxImages
LABELS = 64  # labels, annotations, a node selector: entries of a string map
# The devices a node reaches (node.devices, devices_after(node)): a GPU server's 8 GPUs and as
# many NICs. (A node with more costs more than the bound says, as one with more taints does.)
NODE_DEVICES = 16
SMALL_LIST = 16  # any other list: tolerations, taints, containers' ports and images, terms, resources
STRING_CHARS = 253  # a string read from the cluster (a DNS subdomain name's length)
# A topology domain (or the cluster) may hold this many nodes (Kubernetes' tested limit) and
# pods: a loop over them is bounded by it. Aggregates kept as per-domain indexes cost a lookup
# instead (INDEXED_LOOKUP steps, plus their where and value once, for the pod-only values).
DOMAIN_NODES = 5_000
DOMAIN_PODS = 150_000
INDEXED_LOOKUP = 4
_FIELD_SIZES: dict[tuple[Record, str], int] = {
    (schema.DOMAIN, "nodes"): DOMAIN_NODES,
    (schema.CLUSTER, "nodes"): DOMAIN_NODES,
    (schema.DOMAIN, "pods"): DOMAIN_PODS,
    (schema.CLUSTER, "pods"): DOMAIN_PODS,
    (schema.NODE, "pods"): NODE_PODS,
    (schema.NODE, "used_ports"): NODE_PODS,
    (schema.NODE, "images"): NODE_IMAGES,
    (schema.NODE, "devices"): NODE_DEVICES,
}
# Built-ins returning a node's devices: they cost a walk over them, not over the node's pods.
_DEVICE_LISTS = frozenset({"devices_after"})
# The rule variables (the rest of the names that are not lets are aggregates' variables).
_NODE_ONLY = frozenset({schema.NODE_VARIABLE})
_POD_NODE = frozenset({schema.POD_VARIABLE, schema.NODE_VARIABLE})


@dataclass(frozen=True)
class CostLimits:
    """The bounds :func:`too_costly` enforces (tests of the compiler raise them to compile shapes
    no rule set may use)."""

    steps: int = MAX_STEPS
    size: int = MAX_SIZE
    set_steps: int = MAX_SET_STEPS


DEFAULT_LIMITS = CostLimits()


@dataclass(frozen=True)
class Estimate:
    """One expression's bound: ``steps`` per evaluation; ``size``, the elements or characters its
    value may hold (1 for a scalar); ``loops``, the nested loops on its costliest path, outermost
    first, and ``let``, the first let that path goes through ("" for none); ``anchor``, where that path starts in
    this expression's own text (an aggregate, or the use of a let), for the caret; ``largest``,
    the largest value built within, and where."""

    steps: int
    size: int = 1
    loops: tuple[str, ...] = ()
    let: str = ""
    anchor: ast.Expr | None = None
    largest: int = 0
    largest_at: ast.Expr | None = None
    # the variables it reads (rule variables, and aggregates' variables of enclosing loops), a
    # context built-in counting as reading the pod; "" when it calls one the compiler never
    # caches per node (domain(), a context built-in)
    reads: frozenset[str] = frozenset()
    # its costliest part kept per node (a node-only aggregate: see _Estimator._loop), its steps
    node_steps: int = 0
    node_part: Estimate | None = None  # the costliest such part, as estimated alone
    # the lets computed once per (pod, node) it uses (those reading the pod and the node, not
    # the cluster: rulesched.lang.evaluation.let_memo.once), by name: what each costs, once
    once: tuple[tuple[str, int], ...] = ()


def too_costly(
    rules: Iterable[ast.Rule],
    lets: Mapping[str, ast.Let],
    graph: LetGraph,
    types: Mapping[int, Type],
    let_names: Mapping[int, str],
    limits: CostLimits = DEFAULT_LIMITS,
    steps_out: dict[tuple[ast.RuleKind, str], int] | None = None,
    indexed: frozenset[int] = frozenset(),
) -> list[Diagnostic]:
    """A ``too-costly`` error for each rule whose bound exceeds :data:`MAX_STEPS` or that builds
    a value larger than :data:`MAX_SIZE`, and at the rule that takes the set's total over
    :data:`MAX_SET_STEPS`. ``types`` and ``let_names`` are the checker's: each expression's
    type, and the let each name standing for one stands for (by ``id``). Each rule's estimate
    goes into ``steps_out`` when given; ``indexed`` names (by ``id``) the aggregates kept as
    per-domain indexes."""
    estimator = _Estimator(lets, graph, types, let_names, indexed)
    problems = []
    totals: list[tuple[int, ast.Rule]] = []  # the rules within their own bound, and what they cost
    for rule in rules:
        parts = [e for e in (rule.guard, rule.body, rule.reason, rule.unresolvable, rule.order) if e is not None]
        estimates = [estimator.estimate(e) for e in parts]
        once = dict(kv for e in estimates for kv in e.once)
        steps = min(_CAP, sum(e.steps for e in estimates) + sum(once.values()))
        if steps_out is not None:
            steps_out[rule.kind, rule.name] = steps
        worst = max(estimates, key=lambda e: e.steps)
        what = f"{rule.kind.value} '{rule.name}'"
        node_steps = min(_CAP, sum(e.node_steps for e in estimates))
        if node_steps > limits.steps:  # (the parts kept per node, computed once per node change)
            part = max(estimates, key=lambda e: e.node_steps).node_part
            assert part is not None
            problems.append(
                error(
                    "too-costly",
                    f"{what} costs up to {_count(node_steps)} steps per node (limit {limits.steps:,}) in what it "
                    f"keeps per node: {_explain(part)}",
                    (part.anchor or rule.body).span,
                    _advice(part),
                )
            )
            continue
        if steps > limits.steps:
            if once and max(once.values()) > max(e.steps for e in estimates):  # a let is the costly part
                costliest = max(once, key=lambda k: once[k])
                worst = dataclasses.replace(estimator.let_estimates[costliest], let=costliest)
            problems.append(
                error(
                    "too-costly",
                    f"{what} costs up to {_count(steps)} steps per node (limit {limits.steps:,}): {_explain(worst)}",
                    (worst.anchor or rule.body).span,
                    _advice(worst),
                )
            )
            continue
        big = max(estimates, key=lambda e: e.largest)
        if big.largest > limits.size:
            problems.append(
                error(
                    "too-costly",
                    f"{what} builds a value of up to {_count(big.largest)} elements or characters "
                    f"(limit {limits.size:,})",
                    (big.largest_at or rule.body).span,
                )
            )
        totals.append((steps, rule))
    over = _over_set_limit(totals, limits.set_steps)
    if over is not None:
        problems.append(over)
    return problems


def _over_set_limit(totals: list[tuple[int, ast.Rule]], limit: int) -> Diagnostic | None:
    """Every applicable rule runs for each (pod, node): the set as a whole is bounded too,
    reported at the rule that takes the running total over, naming the costliest rules."""
    total = sum(steps for steps, _ in totals)
    if total <= limit:
        return None
    running, at = 0, totals[-1][1]
    for steps, rule in totals:
        running += steps
        if running > limit:
            at = rule
            break
    costliest = sorted(totals, key=lambda t: -t[0])[:3]
    named = ", ".join(f"{r.kind.value} '{r.name}' {steps:,}" for steps, r in costliest)
    return error(
        "too-costly",
        f"the rule set costs up to {total:,} steps per node with this rule (limit {limit:,}; the costliest: {named})",
        at.name_span,
        "make the costliest rules cheaper, or the set smaller (a `when` guard does not lower the bound)",
    )


def _once(kids: list[Estimate]) -> tuple[tuple[str, int], ...]:
    if not any(k.once for k in kids):
        return ()
    return tuple(sorted(dict(kv for k in kids for kv in k.once).items()))


def _node_part(kids: list[Estimate]) -> tuple[int, Estimate | None]:
    """The node-only parts within: what computing them costs together, and the costliest."""
    total = min(_CAP, sum(k.node_steps for k in kids))
    parts = [k.node_part for k in kids if k.node_part is not None]
    return total, max(parts, key=lambda p: p.steps) if parts else None


def _count(n: int) -> str:
    return f"{n:,}" if n < _CAP else "more than 10^18"


def _explain(e: Estimate) -> str:
    through = f" (through let '{e.let}')" if e.let else ""
    if len(e.loops) > 1:
        return f"{len(e.loops)} nested loops{through}: " + " x ".join(e.loops)
    if e.loops:
        return f"a loop{through}: {e.loops[0]}"
    if e.let:
        return f"let '{e.let}' expands to {_count(e.steps)} steps with the lets it uses"
    return f"{_count(e.steps)} operations"


def _advice(e: Estimate) -> str:
    if len(e.loops) > 1:
        return "nested loops multiply: loop over a long list such as node.pods once, not inside another loop"
    if e.let and not e.loops:
        return "a let is evaluated at every use: use each let once, or compute it from fewer lets"
    return ""


class _Estimator:
    def __init__(
        self,
        lets: Mapping[str, ast.Let],
        graph: LetGraph,
        types: Mapping[int, Type],
        let_names: Mapping[int, str],
        indexed: frozenset[int] = frozenset(),
    ) -> None:
        self.types = types
        self.indexed = indexed
        self.let_names = let_names
        self.let_estimates: dict[str, Estimate] = {}
        for name in graph.order:  # each let after the lets it uses; a let on a cycle is not inlined
            if name not in graph.in_cycle:
                self.let_estimates[name] = self.estimate(lets[name].value)

    def estimate(self, root: ast.Expr) -> Estimate:
        """The bound of ``root``, walked bottom-up with an explicit stack."""
        done: dict[int, Estimate] = {}
        stack: list[tuple[ast.Expr, bool]] = [(root, False)]
        while stack:
            expr, ready = stack.pop()
            if ready:
                done[id(expr)] = self._combine(expr, [done[id(c)] for c in ast.children(expr)])
                continue
            stack.append((expr, True))
            stack.extend((child, False) for child in ast.children(expr))
        return done[id(root)]

    def _combine(self, expr: ast.Expr, kids: list[Estimate]) -> Estimate:
        costliest = max(kids, key=lambda k: k.steps) if kids else None
        own, size = 1, self._default_size(expr)
        match expr:
            case ast.Literal(value=value) if isinstance(value, str):
                size = len(value)
            case ast.ListExpr(items=items):
                size = len(items)
            case ast.Name():
                return self._name(expr)
            case ast.Attr(obj=obj, name=name):
                owner = self.types.get(id(obj))
                if isinstance(owner, Record):
                    size = _FIELD_SIZES.get((owner, name), size)
            case ast.Call(func=func):
                own, size = self._call(func, kids, size)
            case ast.Binary(op=op):
                left, right = kids
                if op in ("in", "not in") and isinstance(self.types.get(id(expr.right)), ListOf):
                    own += right.size
                elif op in ("==", "!=") and isinstance(self.types.get(id(expr.left)), ListOf):
                    own += min(left.size, right.size)
                elif op == "+" and (self._type(expr) == STRING or isinstance(self._type(expr), ListOf)):
                    size = left.size + right.size
            case ast.If():
                size = max(kids[1].size, kids[2].size)
            case ast.Quantifier() | ast.Aggregate():
                return self._loop(expr, kids)
        return self._sum(expr, own, min(_CAP, size), kids, costliest)

    def _sum(self, expr: ast.Expr, own: int, size: int, kids: list[Estimate], costliest: Estimate | None) -> Estimate:
        steps = min(_CAP, own + sum(k.steps for k in kids))
        largest: int = size
        largest_at: ast.Expr | None = expr
        for k in kids:
            if k.largest > largest:
                largest, largest_at = k.largest, k.largest_at
        reads = frozenset().union(*(k.reads for k in kids))
        if isinstance(expr, ast.Call) and expr.func == "domain":
            reads |= {schema.CLUSTER_VARIABLE}  # (reads the cluster at each call)
        elif isinstance(expr, ast.Call) and getattr(BUILTINS.get(expr.func), "context", False):
            reads |= {schema.POD_VARIABLE, ""}  # (reads the pod's context: never cached per node)
        node_steps, node_part = _node_part(kids)
        once = _once(kids)
        path = Estimate(0) if costliest is None else costliest  # (no costliest child: no path)
        return Estimate(
            steps,
            size,
            path.loops,
            path.let,
            path.anchor,
            largest=largest,
            largest_at=largest_at,
            reads=reads,
            node_steps=node_steps,
            node_part=node_part,
            once=once,
        )

    def _loop(self, expr: ast.Quantifier | ast.Aggregate, kids: list[Estimate]) -> Estimate:
        by_child = dict(zip((id(c) for c in ast.children(expr)), kids, strict=True))
        iterable = by_child[id(expr.iterable)]
        body = [by_child[id(c)] for c in ast.children(expr) if c is not expr.iterable]
        if id(expr) in self.indexed:  # a lookup; the where and value run once (pod-only parts)
            steps = min(_CAP, iterable.steps + INDEXED_LOOKUP + sum(b.steps for b in body))
            return Estimate(steps, reads=frozenset({schema.POD_VARIABLE, ""}))
        reads = iterable.reads.union(*(b.reads for b in body)) - {expr.var}
        node_steps, node_at = _node_part(kids)
        once = _once(kids)
        per_element = 1 + sum(b.steps for b in body)
        looped = min(_CAP, iterable.size * per_element)
        steps = min(_CAP, iterable.steps + looped)
        size = iterable.size if expr.kind == "collect" else 1
        largest, largest_at = max((size, expr), *((k.largest, k.largest_at) for k in kids), key=lambda p: p[0])
        if iterable.steps > looped:  # the list itself is the costly part (a let, a big literal)
            full = Estimate(
                steps,
                size,
                iterable.loops,
                iterable.let,
                iterable.anchor,
                largest,
                largest_at,
                reads,
                node_steps,
                node_at,
                once,
            )
        else:
            inner = max(body, key=lambda b: b.steps) if body else Estimate(0)
            text = expr.iterable.span.source.text[expr.iterable.span.start : expr.iterable.span.end]
            text = text if len(text) <= 40 else text[:37] + "..."
            loop = f"{expr.kind} over {' '.join(text.split())} ({_count(iterable.size)})"
            full = Estimate(
                steps,
                size,
                (loop, *inner.loops),
                inner.let,
                expr,
                largest,
                largest_at,
                reads,
                node_steps,
                node_at,
                once,
            )
        if reads != _NODE_ONLY:
            return full
        # Reads the node alone (and constants): the compiler keeps its value per node until the
        # node changes (rulesched.lang.evaluation.stages.memoised), so each (pod, node) evaluation
        # looks it up; what computing it costs, once per node change, is bounded apart
        # (too_costly: node_steps).
        part = full if node_at is None or full.steps >= node_at.steps else node_at
        return Estimate(
            INDEXED_LOOKUP, size, (), "", expr, largest, largest_at, reads, min(_CAP, node_steps + steps), part, once
        )

    def _name(self, expr: ast.Name) -> Estimate:
        name = self.let_names.get(id(expr))
        let = self.let_estimates.get(name) if name is not None else None
        if name is None or let is None:  # a variable (or a let on a cycle, refused anyway)
            return Estimate(1, self._default_size(expr), reads=frozenset({expr.id}))
        # The let's bound, anchored here: the caret points at its use in the text being checked.
        largest_at = expr if let.largest > 1 else None
        if let.reads <= _POD_NODE | {""} and let.steps > 1:  # computed once per (pod, node)
            once = dict(let.once)
            once[name] = let.steps
            return Estimate(
                1,
                let.size,
                (),
                "",
                expr,
                let.largest,
                largest_at,
                let.reads,
                let.node_steps,
                let.node_part,
                tuple(sorted(once.items())),
            )
        return Estimate(
            let.steps,
            let.size,
            let.loops,
            name,
            expr,
            let.largest,
            largest_at,
            let.reads,
            let.node_steps,
            let.node_part,
            let.once,
        )

    def _call(self, func: str, kids: list[Estimate], size: int) -> tuple[int, int]:
        builtin = BUILTINS.get(func)
        if builtin is None:
            return 1, size
        if func == "domain":
            return INDEXED_LOOKUP, size
        if func in _DEVICE_LISTS:
            return NODE_DEVICES, NODE_DEVICES
        if builtin.context or func in ("term_matches", "matches"):
            return (NODE_PODS if builtin.context else SMALL_LIST), size
        sizes = [k.size for k in kids]
        if func == "tolerated":
            return 1 + sizes[1], size
        if func == "ports_conflict":
            return 1 + sizes[0] * sizes[1], size
        if func in ("subset", "keys"):
            return 1 + sizes[0], sizes[0] if func == "keys" else size
        if func in ("lower", "upper"):
            return 1, sizes[0]
        if func == "string":
            return 1, 32
        return 1, size

    def _type(self, expr: ast.Expr) -> Type | None:
        return self.types.get(id(expr))

    def _default_size(self, expr: ast.Expr) -> int:
        t = self._type(expr)
        if isinstance(t, ListOf):
            return SMALL_LIST
        if isinstance(t, MapOf):
            return LABELS if t.value == STRING else SMALL_LIST
        if t == STRING:
            return STRING_CHARS
        return 1
