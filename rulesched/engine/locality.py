"""Which rules judge a node by that node alone: the queueing hints' question
(:mod:`rulesched.scheduler.hints`).

A filter reads only its node when its body (and the lets it uses) names nothing but the pod, the
node it judges (any field, its pods too), bound variables and constants: not ``cluster``, not
``domain(node, KEY)``, no other context built-in (pod affinity, spreading, volumes, devices read
other nodes or other objects) but those whose answer, for this pod, no running pod's going can
change (:data:`rulesched.engine.dryrun.UNAFFECTED`: affinity built-ins of a pod that asks for
none). For such filters a pod's going changes the answers on its own node only. This is wider
than :func:`rulesched.engine.node_local` in what it allows of the node (any of its fields, not
only the numbers a dry run's columns adjust) and stricter in what it allows beyond it
(node_local lets ``cluster`` through: its dry runs refuse such reads themselves).
Next stage: :func:`rulesched.scheduler.hints.deletion_may_help`.
"""

from __future__ import annotations

from typing import Any

from rulesched.engine.batch import columns_of
from rulesched.engine.dryrun import UNAFFECTED
from rulesched.lang import BUILTINS, BoundRules, RuleSet
from rulesched.lang.frontend import ast
from rulesched.lang.schema import CLUSTER_VARIABLE


def only_its_node(bound: BoundRules) -> bool:
    """Whether every filter of ``bound`` reads only the node it judges (see the module
    docstring), for this pod now."""
    bodies = columns_of(bound)
    if bodies is None or len(bodies.filter_bodies) != len(bound.filters) or not isinstance(bound.rule_set, RuleSet):
        return False
    notes, lets = bodies.evaluator.notes, bodies.evaluator.lets
    kept = bound.rule_set.memo(_Kept).calls
    for body in bodies.filter_bodies:
        hit = kept.get(id(body))
        if hit is None or hit[0] is not body:
            hit = kept[id(body)] = (body, _context_calls(body, notes, lets))
        calls = hit[1]
        if calls is None or not all(UNAFFECTED[name](bound.ctx) for name in calls):
            return False
    return True


class _Kept:
    """Kept by a rule set: :func:`_context_calls` of each filter body, worked out once."""

    def __init__(self, rules: RuleSet) -> None:
        self.calls: dict[int, tuple[ast.Expr, frozenset[str] | None]] = {}


def _context_calls(body: ast.Expr, notes: Any, lets: dict[str, ast.Let]) -> frozenset[str] | None:
    """The context built-ins ``body`` calls (all of them in :data:`UNAFFECTED`), or None when it
    reads ``cluster`` or calls another context built-in (``domain`` among them)."""
    calls: set[str] = set()
    seen: set[str] = set()

    def walk(e: ast.Expr) -> bool:
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            if e.func not in UNAFFECTED:
                return False
            calls.add(e.func)
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "let":
                if ref.name in seen:
                    return True
                seen.add(ref.name)
                return walk(lets[ref.name].value)
            if ref.kind != "bound" and ref.name == CLUSTER_VARIABLE:
                return False
        return all(walk(c) for c in ast.children(e))

    return frozenset(calls) if walk(body) else None
