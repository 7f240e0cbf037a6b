"""Which rules differ between two checked sets, and in what: for ``rulesched diff``, which lists
them before the pods they moved and attributes each move to them.

Rules are matched by kind and name (a filter and a score may share a name). A rule differs when
its checked form differs (its body, ``when`` guard, ``else`` reason, ``unresolvable``, ``order``,
weight, normalisation or audit mode: spans and formatting are not compared, so re-indenting or
moving a rule changes nothing) or when a let it reads, directly or through other lets, is defined
differently. Only such rules can give a different verdict for the same pod on the same cluster
state: a rule that is the same in both sets answers the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRule, CheckedRules

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
_ASPECTS = (
    ("body", "body"),
    ("guard", "when"),
    ("reason", "else"),
    ("unresolvable", "unresolvable"),
    ("order", "order"),
)


@dataclass(frozen=True)
class RuleDifference:
    """A rule added, removed or changed; ``aspects`` say what changed (``body``, ``when``,
    ``weight 1 → 2``, ``let free_ips``, ...)."""

    kind: str  # filter | score | preempt
    name: str
    change: str  # ADDED | REMOVED | CHANGED
    aspects: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        what = f" ({', '.join(self.aspects)})" if self.aspects else ""
        return f"{self.kind} {self.name}: {self.change}{what}"


def rule_differences(old: CheckedRules, new: CheckedRules) -> tuple[RuleDifference, ...]:
    """The new set's rules that are new or differ, in its order, then the old set's that are gone."""
    before = {(c.kind, c.name): c for c in old.rules}
    after = {(c.kind, c.name): c for c in new.rules}
    found = []
    for key, rule in after.items():
        was = before.get(key)
        if was is None:
            found.append(RuleDifference(rule.kind.value, rule.name, ADDED))
            continue
        aspects = _aspects(was, rule, old.lets, new.lets)
        if aspects:
            found.append(RuleDifference(rule.kind.value, rule.name, CHANGED, aspects))
    found += [RuleDifference(c.kind.value, c.name, REMOVED) for key, c in before.items() if key not in after]
    return tuple(found)


def _aspects(
    old: CheckedRule, new: CheckedRule, old_lets: Mapping[str, ast.Let], new_lets: Mapping[str, ast.Let]
) -> tuple[str, ...]:
    aspects = [label for field, label in _ASPECTS if getattr(old.rule, field) != getattr(new.rule, field)]
    if old.weight != new.weight:
        aspects.append(f"weight {old.weight} → {new.weight}")
    if old.normalize != new.normalize:
        aspects.append(f"normalize {old.normalize} → {new.normalize}")
    if old.rule.audit != new.rule.audit:
        aspects.append("audit mode" if new.rule.audit else "no longer audit mode")
    read = _lets_read(old.rule, old_lets) | _lets_read(new.rule, new_lets)
    aspects += [f"let {name}" for name in sorted(read) if old_lets.get(name) != new_lets.get(name)]
    return tuple(aspects)


def _lets_read(rule: ast.Rule, lets: Mapping[str, ast.Let]) -> set[str]:
    """The lets a rule's expressions read, directly or through other lets."""
    stack: list[ast.Expr] = [e for e in (rule.body, rule.guard, rule.reason, rule.unresolvable, rule.order) if e]
    seen: set[str] = set()
    while stack:
        expr = stack.pop()
        if isinstance(expr, ast.Name) and expr.id in lets and expr.id not in seen:
            seen.add(expr.id)
            stack.append(lets[expr.id].value)
        stack.extend(ast.children(expr))
    return seen
