"""The walk with lets followed (rulesched.lang.frontend.through_lets) that the analyses of what a
rule reads share: source order, a let's value in place of its name (once per let, as a root),
what the visitor's answers do, and the rule variables told from names that only look like them."""

from __future__ import annotations

from rulesched.lang import schema
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.printer import expr_text
from rulesched.lang.frontend.through_lets import DONE, INTO, STOP, Visit, is_rule_variable, through_lets
from tests.helpers.rules import load

TEXT = """let big = node.free.cpu > 1000
let both = big and big
filter f:
    both or all(t in node.taints where t.key == "a")
"""


def _walk(stop_at: str = "", done_at: str = "") -> tuple[bool, list[tuple[str, str | None]]]:
    checked = load(TEXT)
    seen: list[tuple[str, str | None]] = []

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        text = expr_text(e)
        seen.append((text, None if parent is None else expr_text(parent)))
        return STOP if text == stop_at else DONE if text == done_at else INTO

    body = next(r.rule.body for r in checked.rules if r.name == "f")
    return through_lets(body, checked.notes, checked.lets, visit), seen


def test_lets_followed_once_in_source_order() -> None:
    answer, seen = _walk()
    assert answer is True
    texts = [t for t, _ in seen]
    # (the names of lets are never shown: their values are, the first time, as roots)
    assert "both" not in texts and "big" not in texts
    assert texts.count("node.free.cpu > 1000") == 1
    assert texts[:4] == [
        'both or all(t in node.taints where t.key == "a")',
        "big and big",
        "node.free.cpu > 1000",
        "node.free.cpu",
    ]
    assert dict(seen)["big and big"] is None and dict(seen)["node.free.cpu > 1000"] is None
    assert dict(seen)["node.free.cpu"] == "node.free.cpu > 1000"
    assert texts.index("node.free.cpu > 1000") < texts.index("node.taints")  # depth first, left first


def test_done_skips_the_sub_expressions_and_stop_ends_the_walk() -> None:
    _, seen = _walk(done_at="big and big")
    texts = [t for t, _ in seen]
    assert "node.free.cpu > 1000" not in texts and "node.taints" in texts
    answer, seen = _walk(stop_at="node.free.cpu")
    assert answer is False
    assert [t for t, _ in seen][-1] == "node.free.cpu" and "node.taints" not in [t for t, _ in seen]


def test_rule_variables_only() -> None:
    checked = load(
        "let node_ish = 1\nfilter f:\n    any(t in pod.tolerations where t.key == node.name) or node_ish > 0\n"
    )
    names = [e for r in checked.rules for e in _all(r.rule.body) if isinstance(e, ast.Name)]
    assert {e.id for e in names if is_rule_variable(checked.notes, e, schema.POD_VARIABLE)} == {"pod"}
    assert [e.id for e in names if is_rule_variable(checked.notes, e, schema.NODE_VARIABLE)] == ["node"]
    assert not any(is_rule_variable(checked.notes, e, e.id) for e in names if e.id in ("t", "node_ish"))
    reads = [e for e in _all(checked.rules[0].rule.body) if not isinstance(e, ast.Name)]
    assert not any(is_rule_variable(checked.notes, e, schema.NODE_VARIABLE) for e in reads)  # (node.name: a read)


def _all(e: ast.Expr) -> list[ast.Expr]:
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        out.append(x)
        stack.extend(ast.children(x))
    return out
