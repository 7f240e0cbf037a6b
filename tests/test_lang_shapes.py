"""Closure shapes the compiler specialises, each checked against the reference interpreter on
generated pods and nodes (also as a score, ``if body then 7 else 1``, and in a preemption rule
beside the victim), and again after the node changed:

* quantifiers over a list known at bind time whose condition reads the node, unrolled per
  element (rulesched.lang.evaluation.compile_aggregates.unrolled_quantifier): maps' keys, records, constant string
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
from tests.helpers.profiles import examples
from tests.helpers.rules import BODIES, agree, load, rules_for
from tests.strategies import nodes, pods


@pytest.mark.parametrize("body", BODIES)
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pods(), min_size=1, max_size=3), st.lists(nodes(), min_size=1, max_size=3), pods())
def test_specialised_shapes_agree_with_the_interpreter(
    body: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod
) -> None:
    text = rules_for(body)
    checked = load(text)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    bindings = [rules.bind(p) for p in incoming]
    for bound in bindings:
        agree(checked, interp, bound, cluster, text)
    for node in cluster:
        node.add_pod(arriving)
    for bound in bindings:
        agree(checked, interp, bound, cluster, text)
