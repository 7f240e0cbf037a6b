"""Column evaluation (rulesched.engine.columns, engine.filter_mask / score_matrix) against the
reference interpreter: generated rule sets, the specialised shapes, values at the edges of exact
int64 / float64 arithmetic, row subsets, and nodes that change after the columns were built."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched import engine
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.engine import NodeColumns, node_fields
from rulesched.engine.vectorisable import vectorisable
from rulesched.lang import load_rules
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import BoundRules, RuleSet
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.values import as_score
from rulesched.model import Node, Pod, Taint
from tests.helpers.profiles import examples
from tests.helpers.rules import BODIES, OVERFLOWS, load, rules_for
from tests.strategies import LETS, nodes, pods, typed_rule_sets


def _expected(checked: CheckedRules, bound: BoundRules, cluster: list[NodeInfo]) -> tuple[list[bool], list[list[int]]]:
    interp, ctx = Interpreter(checked.notes, checked.lets), EvalContext(bound.ctx.pod)
    filters = [r for r in checked.rules if r.kind is ast.RuleKind.FILTER and interp.applies(r, ctx)]
    scores = [r for r in checked.rules if r.kind is ast.RuleKind.SCORE and interp.applies(r, ctx)]
    fits = [all(bool(interp.body(r, ctx, n)) for r in filters) for n in cluster]
    vectors = []
    for n in cluster:
        values = [as_score(interp.body(r, ctx, n)) for r in scores]
        fixed = sum(r.weight * v for r, v in zip(scores, values, strict=True) if r.normalize == "none")
        vectors.append([*values, fixed])
    return fits, vectors


def _agree(checked: CheckedRules, bound: BoundRules, cols: NodeColumns, rows: list[int], text: str) -> None:
    cluster = [cols.nodes[r] for r in rows]
    fits, vectors = _expected(checked, bound, cluster)
    index = np.array(rows, dtype=np.intp)
    assert engine.columns_of(bound) is not None
    assert engine.filter_mask(bound, cols, index).tolist() == fits, text
    try:
        matrix = engine.score_matrix(bound, cols, index)
    except OverflowError:  # a score or the fixed sum beyond int64: the caller's Python-int path
        assert any(not -(2**63) <= v < 2**63 for vector in vectors for v in vector), text
        return
    finally:  # right answers, and not from the node-by-node safety net after a column bug
        assert engine.columns_of(bound).evaluator.fallbacks.count == 0, text
    assert matrix.tolist() == vectors, text


def _exercise(text: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod, data: st.DataObject) -> None:
    checked = load(text)
    rules = RuleSet(checked)
    cols = NodeColumns(cluster)
    everything = list(range(len(cluster)))
    for pod in incoming:
        bound = rules.bind(pod)
        _agree(checked, bound, cols, everything, text)
        subset = data.draw(st.lists(st.sampled_from(everything), max_size=len(cluster)))
        _agree(checked, bound, cols, subset, text)  # any rows, repeated, in any order
    changed = data.draw(st.lists(st.sampled_from(everything), unique=True))
    for r in changed:
        cluster[r].add_pod(arriving)
    cols.update(changed)
    for pod in incoming:
        _agree(checked, rules.bind(pod), cols, everything, text)
    for r in changed:
        cluster[r].remove_pod(arriving)
    cols.update(changed)
    _agree(checked, rules.bind(incoming[0]), cols, everything, text)


@settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    typed_rule_sets(),
    st.lists(pods(), min_size=1, max_size=2),
    st.lists(nodes(), min_size=1, max_size=6),
    pods(),
    st.data(),
)
def test_columns_agree_with_the_interpreter(
    text: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod, data: st.DataObject
) -> None:
    _exercise(text, incoming, cluster, arriving, data)


@pytest.mark.parametrize("body", BODIES)
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pods(), min_size=1, max_size=2), st.lists(nodes(), min_size=1, max_size=6), pods(), st.data())
def test_specialised_shapes_as_columns(
    body: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod, data: st.DataObject
) -> None:
    _exercise(rules_for(body), incoming, cluster, arriving, data)


# Node-reading expressions whose value turns out the same for every row (an if whose condition
# is known for the pod, a built-in decided by its pod-side argument) inside others.
DECIDED = [
    "abs(if pod.priority > 1 then -3 else len(node.pods)) > 1",
    "floor(number(if pod.priority > 1 then 2500m else node.free.cpu)) >= 1",
    "max(if pod.priority > 2 then 1 else len(node.pods), 2) == 2",
    "len(if pod.priority > 1 then pod.labels else node.labels) > 0",
    '(if pod.priority > 1 then pod.labels else node.labels)["app"] == "web"',
    "(if pod.priority > 1 then pod.requests else node.free).cpu > 0",
    "not subset(pod.node_selector, node.labels) or len(node.pods) > 1",
    'string(if pod.priority > 1 then 1 else len(node.pods)) == "1"',
]


@pytest.mark.parametrize("body", DECIDED)
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(pods(), min_size=1, max_size=2), st.lists(nodes(), min_size=1, max_size=4), pods(), st.data())
def test_values_decided_for_every_row(
    body: str, incoming: list[Pod], cluster: list[NodeInfo], arriving: Pod, data: st.DataObject
) -> None:
    checked = load(rules_for(body))
    assert all(
        vectorisable(r.rule.body, checked.notes, checked.lets)
        for r in checked.rules
        if r.kind is not ast.RuleKind.PREEMPT
    ), body
    _exercise(rules_for(body), incoming, cluster, arriving, data)


# --- the edges of exact arithmetic -----------------------------------------------------------

EDGES = [
    # int64: products and sums that overflow must not wrap
    "node.allocatable.memory * 1000000000 > 0",
    "number(node.allocatable.memory) * 100000000000 // 7",
    "node.allocatable.cpu * 3 + node.allocatable.memory",
    # ints beyond 2**53 meeting floats, true division, comparisons across int and float
    "node.allocatable.memory / node.allocatable.cpu",
    "number(node.allocatable.memory) * 0.5",
    "number(node.allocatable.memory) == 9007199254740993.0",
    "(if node.unschedulable then 0.5 else number(node.allocatable.memory))",
    "max(number(node.allocatable.cpu), 0.25)",
    "min(number(node.allocatable.memory), 1.5)",
    # division and remainder by zero are 0; floor division toward minus infinity
    "(0 - node.allocatable.cpu) // 7",
    "node.allocatable.memory // node.allocatable.cpu",
    "node.free.cpu / 0",
    "100 * node.free.cpu / node.allocatable.cpu",
    # quantities: rounding up to whole milli-units
    "number(node.allocatable.cpu / 3)",
    "number(node.allocatable.cpu * 0.3)",
    "number(node.allocatable.cpu / 0.7)",
    "floor(number(node.allocatable.cpu) / 3)",
    "ceil(number(node.allocatable.cpu) / 3)",
    "abs(number(node.requested.cpu) - 3)",
    "len(node.pods) - len(node.taints) * 2",
    "sqrt(number(node.allocatable.cpu))",
]
# Values int64 columns hold (below 2**62), around 2**53 and near int64's end; and beyond (the
# column is then not numeric and the rule goes node by node).
IN_RANGE = [0, 1, 3, 7, 1000, 2**53 - 1, 2**53 + 1, 2**61 + 3, 2**62 - 1]
BEYOND = [2**62, 2**63 + 5, 10**25]


@st.composite
def edge_nodes(draw: st.DrawFn, values: list[int]) -> NodeInfo:
    node = Node(
        draw(st.sampled_from(["a", "b"])),
        allocatable={"cpu": draw(st.sampled_from(values)), "memory": draw(st.sampled_from(values)), "pods": 110_000},
        unschedulable=draw(st.booleans()),
    )
    return NodeInfo(node, draw(st.lists(pods(), max_size=2)))


edge_clusters = st.sampled_from([IN_RANGE, IN_RANGE, IN_RANGE + BEYOND]).flatmap(
    lambda values: st.lists(edge_nodes(values), min_size=1, max_size=4)
)


def _edge_rules(body: str) -> str:
    if any(op in body for op in ("==", "<", ">")):
        return f"filter f:\n    {body}\n"
    return f"score s weight 2:\n    number({body})\n"


@pytest.mark.parametrize("body", EDGES)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edge_clusters, pods())
def test_values_at_the_edges_of_exact_arithmetic(body: str, cluster: list[NodeInfo], pod: Pod) -> None:
    checked = load(_edge_rules(body))
    rules = RuleSet(checked)
    assert all(
        b is not None for b in (*engine.columns_of(rules.bind(pod)).filters, *engine.columns_of(rules.bind(pod)).scores)
    ), body
    _agree(checked, rules.bind(pod), NodeColumns(cluster), list(range(len(cluster))), body)


@pytest.mark.parametrize(
    ("body", "cpu", "memory"),
    [
        ("node.allocatable.memory / node.allocatable.cpu", 3, 2**53 + 1),  # float64 would round the dividend
        ("node.allocatable.cpu * 3 + node.allocatable.memory", 2**62 - 1, 0),  # int64 would wrap
        ("node.allocatable.memory * 1000000000 > 0", 1, 2**62 - 1),
        ("node.allocatable.memory * 1000000000 > 0", 1, 2**61 + 3),
        ("number(node.allocatable.cpu) * 0.5 < number(node.allocatable.memory) * 0.5", 2**53 + 1, 2**53 + 2),
        ("(if node.unschedulable then 0.5 else node.allocatable.memory)", 1, 2**53 + 1),
        ("max(node.allocatable.memory, 0.5)", 1, 2**53 + 1),
        ("node.allocatable.memory == 9007199254740993.0", 1, 2**53 + 1),
    ],
)
def test_exact_where_numpy_would_not_be(body: str, cpu: int, memory: int) -> None:
    """Each case gives a wrong answer if the bounds checks are skipped (checked by hand)."""
    checked = load(_edge_rules(body))
    cluster = [
        NodeInfo(Node("odd", allocatable={"cpu": cpu, "memory": memory, "pods": 110_000})),
        NodeInfo(Node("plain", allocatable={"cpu": 4000, "memory": 2**30, "pods": 110_000})),
    ]
    _agree(checked, RuleSet(checked).bind(Pod("p")), NodeColumns(cluster), [0, 1], body)


# --- what is evaluated how --------------------------------------------------------------------


def test_default_rules_mostly_evaluate_as_columns() -> None:
    """Which of the bundled default rules evaluate as columns, which per group of equal nodes
    (the taint rules read nothing of the node but its taints, NodeDeclaredFeatures nothing but its
    declared features), and which node by node."""
    rules = load_rules([Path(__file__).resolve().parent.parent / "rules" / "default.rules"])
    notes, lets = rules.checked.notes, rules.checked.lets
    column = {r.name for r in (*rules.filters, *rules.scores) if vectorisable(r.checked.rule.body, notes, lets)}
    grouped = {
        (r.checked.kind.value, r.name): node_fields(r.checked.rule.body, notes, lets)
        for r in (*rules.filters, *rules.scores)
        if not vectorisable(r.checked.rule.body, notes, lets)
    }
    assert {
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "NodeUnschedulable",
        "NodePorts",
        "NodeAffinity",
        "InterPodAffinity",
        "ImageLocality",
    } <= column
    assert grouped == {
        ("filter", "TaintToleration"): ("taints",),
        ("score", "TaintToleration"): ("taints",),
        ("filter", "NodeDeclaredFeatures"): ("declared_features",),
    }


def test_rules_reading_only_taints_are_evaluated_once_per_taint_set() -> None:
    text = LETS + 'filter f:\n    all(t in node.taints where t.effect == "PreferNoSchedule")\n'
    checked = load(text)
    rules = RuleSet(checked)
    soft, hard = Taint("a", "", "PreferNoSchedule"), Taint("b", "", "NoSchedule")
    cluster = [NodeInfo(Node(f"n{i}", taints=(soft,) if i % 2 else (hard,))) for i in range(40)]
    cols = NodeColumns(cluster)
    bound = rules.bind(Pod("p"))
    calls = []
    original = bound.filters[0].passes

    def counting(node: NodeInfo) -> bool:
        calls.append(node.name)
        return bool(original(node))

    bound.filters = (type(bound.filters[0])(bound.filters[0].name, counting, bound.filters[0].reasons),)
    rows = np.arange(40, dtype=np.intp)
    assert engine.filter_mask(bound, cols, rows).tolist() == [i % 2 == 1 for i in range(40)]
    assert calls == ["n0", "n1"]  # one evaluation per distinct set of taints
    # A node whose taints change moves group: the columns' owner says which rows changed.
    cluster[0].set_node(Node("n0", taints=(soft,)))
    cols.update([0])
    assert engine.filter_mask(bound, cols, rows).tolist() == [i % 2 == 1 or i == 0 for i in range(40)]
    # Many distinct values: node by node (a group per node would save nothing).
    many = [NodeInfo(Node(f"m{i}", taints=(Taint(f"k{i}", "", "PreferNoSchedule"),))) for i in range(200)]
    assert NodeColumns(many).groups(("taints",)) is None


@pytest.mark.parametrize(("body", "expected"), OVERFLOWS)
def test_overflowing_floats_as_columns(body: str, expected: int) -> None:
    """exp beyond a float's range and the infinities after it: the columns' answers are the
    interpreter's (tests/test_lang_tables.py checks the values)."""
    checked = load(f"score s: {body}\n")
    cluster = [NodeInfo(Node(f"n{i}", allocatable={"cpu": c, "pods": 110_000})) for i, c in enumerate([1000, 4000, 0])]
    _agree(checked, RuleSet(checked).bind(Pod("p")), NodeColumns(cluster), [0, 1, 2], body)
