"""What a score read: the named lets its body uses, with their values on one node.

A score built from lets (``rules/gpu-fragmentation.rules``: fragmentation now, after the pod,
their difference through a sigmoid) shows only its final 0..100 in a score table; a reader
asking why a node was preferred needs the terms. :class:`ScoreTerms` finds, for each node-score
rule, the lets its body reads, directly first and then those they read (in the order written),
keeping those whose value depends on the node (a constant table or a pod-only let is the same
on every node, so it says nothing about the choice), at most :data:`MAX_TERMS` of them; and
evaluates them with the reference interpreter, all in one evaluation so that a let used by
several is computed once. Each rule's cost bound covers its lets, so one node's terms cost at most
about one evaluation of the rule; ``rulesched explain`` asks it of its few best nodes only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.blame import show
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules

MAX_TERMS = 8  # lets shown per score rule


@dataclass(frozen=True)
class Term:
    """One let a score read, its value on a node as reports print it, and where it is written."""

    name: str
    value: str
    location: str


class ScoreTerms:
    """The terms of one rule set's node scores; any thread may use it."""

    def __init__(self, checked: CheckedRules) -> None:
        self._checked = checked
        self._interp = Interpreter(checked.notes, checked.lets)
        self._names: dict[str, tuple[str, ...]] = {}
        for r in checked.rules:
            if r.kind is ast.RuleKind.SCORE and r.rule.target == "node":
                self._names[r.name] = self._node_lets(r.rule.body)

    def names(self, rule: str) -> tuple[str, ...]:
        """The lets shown for score ``rule`` (none: not a node score, or it reads no let that
        depends on the node)."""
        return self._names.get(rule, ())

    def terms(self, rule: str, ctx: EvalContext, node: Any) -> tuple[Term, ...]:
        names = self.names(rule)
        if not names:
            return ()
        lets = self._checked.lets
        values = self._interp.let_values(names, ctx, node)
        types = self._checked.notes.types
        return tuple(
            Term(name, show(value, types.get(id(lets[name].value))), lets[name].name_span.location())
            for name, value in zip(names, values, strict=True)
        )

    def _node_lets(self, body: ast.Expr) -> tuple[str, ...]:
        order: list[str] = []
        queue = self._lets_in(body)
        while queue and len(order) < MAX_TERMS:
            name = queue.pop(0)
            if name in order:
                continue
            if self._reads_node(name, set()):
                order.append(name)
            queue.extend(n for n in self._lets_in(self._checked.lets[name].value) if n not in order)
        return tuple(order)

    def _lets_in(self, expr: ast.Expr) -> list[str]:
        """The lets ``expr`` names, in the order written (each once)."""
        found: list[str] = []
        stack = [expr]
        names = self._checked.notes.names
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Name):
                ref = names.get(id(e))
                if ref is not None and ref.kind == "let" and e.id not in found:
                    found.append(e.id)
            stack.extend(reversed(ast.children(e)))
        return found

    def _reads_node(self, name: str, seen: set[str]) -> bool:
        if name in seen:
            return False
        seen.add(name)
        stack = [self._checked.lets[name].value]
        names = self._checked.notes.names
        while stack:
            e = stack.pop()
            if isinstance(e, ast.Name):
                ref = names.get(id(e))
                if ref is not None and ref.kind == "let":
                    if self._reads_node(e.id, seen):
                        return True
                elif e.id == schema.NODE_VARIABLE:
                    return True
            stack.extend(ast.children(e))
        return False
