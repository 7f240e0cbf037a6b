"""Node-stage closures for aggregates over topology domains, built by
:mod:`rulesched.lang.evaluation.compile` from the compiled parts of an aggregate the checker
found indexable (rulesched.lang.frontend.domain_check); the counts they read are kept by
:mod:`rulesched.lang.builtins.domains`. Next stage: the bound rules call them per node, or
:mod:`rulesched.engine.domain_columns` once per label value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import domains
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.stages import Factory, NodeFn, Staged
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.types import STRING

MANY = "domain many"  # scratch key (with the id of an aggregate's node function): its bulk form


_POD = frozenset({schema.POD_VARIABLE})


def keyed_terms(
    expr: ast.Quantifier | ast.Aggregate,
    notes: Annotations,
    code: Callable[[ast.Expr], Staged],
    slot: int,
    value: Staged | None,
) -> tuple[list[Any], list[Staged], Any] | None:
    """For count, any or sum whose where is equalities of strings, each between a value of
    the element and a pod-side one (``p.labels["app"] == pod.labels["app"] and ...``), and
    whose value reads the element alone: the element's keys, the pod-side codes, the value
    (for :func:`keyed`; ``code`` compiles a part of the where in the loop's scope, ``value`` is
    the value's code). One index then serves every pod, whatever its values (counted by the
    element's keys). None when the aggregate does not have that shape."""
    if expr.kind not in ("count", "any", "sum"):
        return None
    element = frozenset({expr.var})
    value_fn = None
    if value is not None:
        if value.static is None or value.free != element:
            return None
        static = value.static
        value_fn = lambda x: static(None, {slot: x})  # noqa: E731
    terms: list[ast.Expr] = []
    pending = [expr.where] if expr.where is not None else []
    while pending:
        e = pending.pop()
        if isinstance(e, ast.Binary) and e.op == "and":
            pending += [e.right, e.left]
        else:
            terms.append(e)
    keys, sides = [], []
    for term in terms:
        if not (isinstance(term, ast.Binary) and term.op == "=="):
            return None
        if any(notes.types.get(id(side)) != STRING for side in (term.left, term.right)):
            return None
        codes = [code(side) for side in (term.left, term.right)]
        of_element = [c for c in codes if c.static is not None and c.free == element]
        fixed = [c for c in codes if c.is_const or (c.pod is not None and c.free <= _POD)]
        if len(of_element) != 1 or len(fixed) != 1:
            return None
        get = of_element[0].static
        keys.append(lambda x, get=get: get(None, {slot: x}))
        sides.append(fixed[0])
    return keys, sides, value_fn


def keyed(
    kind: str, nodes: bool, source: Factory, token: object, keys: list[Any], sides: list[Any], value: Any
) -> Factory:
    """count, any or sum whose where is equalities between the element's values (``keys``) and
    pod-side ones (``sides``): one index per label key for every pod, read once per cluster
    state and label key, looked up by the pod's values."""
    made: dict[Any, Any] = {}  # per label key: the index's maker

    def make(ctx: EvalContext) -> NodeFn:
        of_node = source(ctx)
        values = tuple([f(ctx)(None, {}) for f in sides])
        # Per label key, the index's counts while the cluster is as stamped: kept in the
        # context's scratch, which a refresh or the binding's release empties, not in the
        # closure (a binding's closures live as long as its class; holding the last cycle's
        # snapshot there made the store copy the nodes it changed next, for every class).
        mine = object()

        def counts(ref: Any) -> domains.KeyedCounts:
            cluster = ctx.cluster
            now = None if cluster is None else (cluster, cluster.node_generation, cluster.pod_position)
            kept = ctx.scratch.get(mine)
            if kept is None or kept[0] != now:
                kept = ctx.scratch[mine] = (now, {})
            seen: dict[str | None, domains.KeyedCounts] = kept[1]
            found = seen.get(ref.key)
            if found is None:
                maker = made.get(ref.key)
                if maker is None:
                    maker = made[ref.key] = domains.keyed_index(kind, ref.key, nodes, keys, value)
                found = seen[ref.key] = domains.keyed_counts(ref, token, maker)
            return found

        def answer(n: Any, env: Any = None) -> Any:
            ref = of_node(n, env)
            return domains.keyed_answer(kind, counts(ref).per, ref.value, values)

        def many(reps: list[Any], labels: list[Any] | None = None) -> list[Any]:
            # One answer per node, all in the same kind of domain (domain_columns' representatives
            # of the label values, and those values when known): the index looked up once, not
            # once per node.
            if not reps:
                return []
            ref = of_node(reps[0], None)
            return domains.keyed_answers(kind, counts(ref), ref.key, reps, values, labels)

        ctx.scratch[MANY, id(answer)] = many
        return answer

    return make


def over_domains(
    kind: str, slot: int, inner: Factory, key: Factory, holes: list[Factory], where: Factory | None
) -> Factory:
    """min or max over the domains of a label (OverDomains): one representative node per label
    value among the nodes ``where`` holds for, ``inner`` (the aggregate over ``domain(n, KEY)``)
    once per representative; the same on every node, so kept until the cluster changes."""
    extreme, token = min if kind == "min" else max, object()

    def make(ctx: EvalContext) -> NodeFn:
        inner_fn, key_fn, hole_fns, pod = inner(ctx), key(ctx), [h(ctx) for h in holes], ctx.pod
        mine = object()  # the scratch key of (version and fixed values, answer): gone at a refresh

        def answer(n: Any, env: Any = None) -> Any:
            values = tuple([domains.freeze(h(n, env)) for h in hole_fns])
            stamp = (domains.version(ctx), values)
            kept = ctx.scratch.get(mine)
            if kept is not None and kept[0] == stamp:
                return kept[1]
            label = key_fn(n, env)
            fixed = dict(env or {})
            made: list[Any] = []  # the where's node function, made only if the index is built

            def passes(node: Any) -> bool:
                if where is None:
                    return True
                if not made:
                    made.append(where(EvalContext(pod)))
                return bool(made[0](None, {**fixed, slot: node}))

            reps = domains.representatives(ctx, (token, values), label, passes)
            found = [inner_fn(n, {**fixed, slot: rep}) for rep in reps]
            best = extreme(found) if found else 0
            ctx.scratch[mine] = (stamp, best)
            return best

        return answer

    return make
