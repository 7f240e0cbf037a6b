"""Closure shapes the compiler specialises, each checked against the reference interpreter on
generated pods and nodes (also as a score, ``if body then 7 else 1``, and in a preemption rule
beside the victim), and again after the node changed:

* quantifiers over a list known at bind time whose condition reads the node, unrolled per
  element (rulesched.lang.evaluation.compile._Compiler._unrolled): maps' keys, records, constant string
  lists, empty lists, numbers (left to the loop), nesting;
* ``if`` with a branch known for every node — a constant or a pod-only value
  (rulesched.lang.evaluation.stages.if_known)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.model import Pod
from tests.strategies import LETS, nodes, pods
from tests.test_lang_properties import _agree, _load

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


@pytest.mark.parametrize("body", BODIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pods(), min_size=1, max_size=3), st.lists(nodes(), min_size=1, max_size=3), pods())
def test_specialised_shapes_agree_with_the_interpreter(
    body: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod
) -> None:
    text = rules_for(body)
    checked = _load(text)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    bindings = [rules.bind(p) for p in incoming]
    for bound in bindings:
        _agree(checked, interp, bound, cluster, text)
    for node in cluster:
        node.add_pod(arriving)
    for bound in bindings:
        _agree(checked, interp, bound, cluster, text)
