"""An expensive rule set for the deadline tests, loaded with the cost checker's limits lifted.

Its rule reads the pod's name, so no node memo keeps its values between cycles: a pod retried
after its cycle was given up costs as much as the first time (a node-only rule's memoised values
would let each retry get further, and one of them finish inside the deadline)."""

from __future__ import annotations

from rulesched.lang import RuleSet, resolve_rules_path
from rulesched.lang.frontend.check import check
from rulesched.lang.frontend.files import read_source
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.source import Source
from tests.helpers.rules import UNBOUNDED

HEAVY = """filter heavy when pod.labels["cost"] == "high":
    sum(sum(sum(sum(len(a) + len(b) + len(c) + len(d) + len(pod.name) for d in keys(node.labels))
        for c in keys(node.labels)) for b in keys(node.labels)) for a in keys(node.labels)) >= 0
    else "never"
"""


def lifted(text: str) -> RuleSet:
    """The default profile and ``text``, checked without cost limits."""
    trees = []
    for source in (read_source(resolve_rules_path("default")), Source("extra.rules", text)):
        tree, problems = parse_source(source)
        assert problems == [], [d.render() for d in problems]
        trees.append(tree)
    checked = check(trees, UNBOUNDED)
    assert checked.ok, [d.render() for d in checked.diagnostics]
    return RuleSet(checked)
