"""Generated rules against the reference interpreter: checking a generated text, comparing a
binding's closures with the interpreter on nodes, and the rule shapes the compiler and the column
engine specialise (tests/test_lang_properties.py, test_lang_shapes.py, test_lang_columns.py).
"""

from __future__ import annotations

import sys
from typing import Any

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import BoundRules
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.check import check
from rulesched.lang.frontend.checked import CheckedRule, CheckedRules
from rulesched.lang.frontend.cost import CostLimits
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.source import Severity, Source
from rulesched.lang.values import as_score
from tests.strategies import LETS

# The generator nests loops over node.pods on purpose (the compiler must get them right), which
# the checker refuses as too costly for a real rule set: here the bound is lifted.
UNBOUNDED = CostLimits(steps=10**15, size=10**15, set_steps=10**15)


def load(text: str) -> CheckedRules:
    tree, problems = parse_source(Source("gen.rules", text))
    assert problems == [], (text, [d.render() for d in problems])
    checked = check([tree], UNBOUNDED)
    errors = [d.render() for d in checked.diagnostics if d.severity is Severity.ERROR]
    assert errors == [], (text, errors)
    return checked


def expected_reasons(value: Any, name: str) -> tuple[str, ...]:
    default = (f"node(s) didn't satisfy rule {name}",)
    if value is None:
        return default
    if isinstance(value, str):
        return (value,) if value else default
    return tuple(value) or default


def agree(checked: CheckedRules, interp: Interpreter, bound: BoundRules, nodes: list[NodeInfo], text: str) -> None:
    ctx = EvalContext(bound.ctx.pod)
    applying: dict[ast.RuleKind, list[CheckedRule]] = {kind: [] for kind in ast.RuleKind}
    for rule in checked.rules:
        if interp.applies(rule, ctx):
            applying[rule.kind].append(rule)
    assert [f.name for f in bound.filters] == [r.name for r in applying[ast.RuleKind.FILTER]], text
    assert [s.name for s in bound.scores] == [r.name for r in applying[ast.RuleKind.SCORE]], text
    assert [p.name for p in bound.preempts] == [r.name for r in applying[ast.RuleKind.PREEMPT]], text
    for node in nodes:
        for f, rule in zip(bound.filters, applying[ast.RuleKind.FILTER], strict=True):
            assert bool(f.passes(node)) == bool(interp.body(rule, ctx, node)), (text, rule.name, node)
            assert f.reasons(node) == expected_reasons(interp.reason(rule, ctx, node), rule.name), text
            if not f.passes(node):  # asked of failing nodes only
                assert f.unresolvable(node) == interp.unresolvable(rule, ctx, node), (text, rule.name, node)
        for s, rule in zip(bound.scores, applying[ast.RuleKind.SCORE], strict=True):
            assert s.weight == rule.weight
            assert s.score(node) == as_score(interp.body(rule, ctx, node)), (text, rule.name, node)
        for p, rule in zip(bound.preempts, applying[ast.RuleKind.PREEMPT], strict=True):
            for victim in [*node.pods, bound.ctx.pod]:
                expected = bool(interp.body(rule, ctx, node, victim))
                assert p.allows(node, victim) == expected, (text, rule.name, node, victim)
            if rule.rule.order is not None:
                assert p.order is not None
                assert p.order(node) == interp.evaluate(rule.rule.order, ctx, node, {}), (text, rule.name)


BODIES = [
    "all(r in pod.requests where pod.requests[r] <= 0 or pod.requests[r] <= node.free[r])",
    "any(r in pod.requests where pod.requests[r] > node.free[r])",
    "count(r in pod.requests where pod.requests[r] > node.free[r]) == 1",
    "any(k in pod.labels where has(node.labels, k))",
    "all(k in pod.labels where node.labels[k] == pod.labels[k])",
    "count(k in pod.labels where node.labels[k] == pod.labels[k]) >= 1",
    'any(t in pod.tolerations where t.key == "gpu" and len(node.taints) > 0)',
    "all(t in pod.tolerations where any(x in node.taints where tolerates(t, x)))",
    'all(k in ["zone", "app"] where has(node.labels, k))',
    'any(k in ["", "web"] where k == node.name)',
    "any(k in [] where has(node.labels, k))",
    "all(i in [0, 1, 2] where i < len(node.pods))",
    "any(k in pod.labels where any(x in node.pods where x.labels[k] == pod.labels[k]))",
    "any(k in pod.labels where crowded)",
    'count(k in pod.labels where k == "tier" or has(node.labels, k)) >= 2',
    'all(k in pod.labels where k != "tier" or node.labels[k] == pod.labels[k])',
    'any(k in pod.labels where k == "app" and node.name == "web")',
    # if with known branches
    "(if node.unschedulable then 0 else len(node.pods)) < 2",
    "(if len(node.taints) > 0 then len(node.pods) else 3) >= 2",
    '(if has(node.labels, "zone") then pod.priority else len(node.pods)) > 1',
    '(if has(node.labels, "app") then len(node.taints) else pod.priority) == 0',
    "(if node.unschedulable then pod.priority else 2) > 1",
]


def rules_for(body: str) -> str:
    return (
        LETS + f"filter f:\n    {body}\nscore s weight 1:\n    if {body} then 7 else 1\n"
        f"preempt p:\n    {body} or any(k in pod.labels where victim.labels[k] == k)\n"
    )


# Score bodies beyond a float's range (exp's, then infinity and NaN) and their value, the same
# compiled, interpreted and as columns (tests/test_lang_tables.py, test_lang_columns.py).
OVERFLOWS = [
    ("exp(1000)", int(sys.float_info.max)),
    ("floor(exp(1000) * 2)", int(sys.float_info.max)),  # infinity as a whole number: the largest float
    ("ceil(0 - exp(1000) * 2)", -int(sys.float_info.max)),
    ("floor(exp(1000) * 2 - exp(1000) * 2)", 0),  # NaN
    ("exp(1000) * 2", 0),  # a score of infinity is 0 (as_score)
    ("if number(quantity(exp(1000) * 2)) > 1e300 then 1 else 2", 1),
    ("number(node.free.cpu) * 0 + floor(exp(1000 * number(node.free.cpu)) * 2)", int(sys.float_info.max)),
    ("if node.free.cpu < exp(1000 * number(node.free.cpu)) * 2 then 1 else 2", 1),
    ("if node.free.cpu > 0 - exp(1000 * number(node.free.cpu)) * 2 then 1 else 2", 1),
    ("number(node.free.cpu // (exp(1000 * number(node.free.cpu)) * 2 - exp(1000) * 2))", 0),
    ("number(node.free.cpu * (exp(1000 * number(node.free.cpu)) * 2 - exp(1000) * 2))", 0),
]
