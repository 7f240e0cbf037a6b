"""The ``unguarded-load`` warning: a rule reading measured node load without checking it is there.

``node.usage`` and ``node.metrics`` come from load sources (``run --config``'s ``load_sources``,
``--node-metrics`` files). A value that is missing, or that its source dropped as older than its
``max_age``, reads 0 like any missing value: to a rule preferring cool nodes, a node nobody
measured then looks idle, the best of all. So a rule (its guard, body, reasons and order, through
the lets it uses) that reads either should also test ``has(node.usage, ...)``,
``has(node.metrics, ...)`` or ``node.metrics_age``; lint warns, once per rule, at its first read.
By reading, not running: a test anywhere in the rule counts, whatever it guards.
Used by :mod:`rulesched.lang.frontend.lint`.
"""

from __future__ import annotations

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.frontend.source import Diagnostic, Severity

CODE = "unguarded-load"
_MEASURED = ("usage", "metrics")
_AGE = "metrics_age"


def unguarded_load_warnings(checked: CheckedRules) -> list[Diagnostic]:
    """One warning per rule that reads node.usage or node.metrics with no test of presence or age."""
    found = []
    for rule in checked.rules:
        parts = [p for p in (rule.rule.guard, rule.rule.body, rule.rule.reason, rule.rule.order) if p is not None]
        reads, guarded = _scan(parts, checked.lets)
        if reads and not guarded:
            first = reads[0]
            found.append(
                Diagnostic(
                    Severity.WARNING,
                    CODE,
                    f"{rule.kind.value} '{rule.name}' reads node.{first.name} without testing that the value is "
                    f"there: a node without one (not measured, or dropped as too old) reads 0, as if idle",
                    first.span,
                    suggestion=f'guard it: `if has(node.{first.name}, "...") then ... else 0`, or compare '
                    f"node.metrics_age with the staleness you accept",
                )
            )
    return found


def _node_field(expr: ast.Expr) -> str | None:
    if isinstance(expr, ast.Attr) and isinstance(expr.obj, ast.Name) and expr.obj.id == "node":
        return expr.name
    return None


def _scan(roots: list[ast.Expr], lets: dict[str, ast.Let]) -> tuple[list[ast.Attr], bool]:
    """The node.usage / node.metrics reads under ``roots`` (through lets, in source order of
    discovery), and whether a presence or age test is there too."""
    reads: list[ast.Attr] = []
    guarded = False
    seen: set[str] = set()
    stack = list(reversed(roots))
    while stack:
        expr = stack.pop()
        field = _node_field(expr)
        if field == _AGE:
            guarded = True
        elif isinstance(expr, ast.Call) and expr.func == "has" and expr.args and _node_field(expr.args[0]) in _MEASURED:
            guarded = True
            continue  # (the map it tests is not a read of a value)
        elif field in _MEASURED:
            assert isinstance(expr, ast.Attr)
            reads.append(expr)
        elif isinstance(expr, ast.Name) and expr.id in lets and expr.id not in seen:
            seen.add(expr.id)
            stack.append(lets[expr.id].value)
        stack.extend(reversed(list(ast.children(expr))))
    return reads, guarded
