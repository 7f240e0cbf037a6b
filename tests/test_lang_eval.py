"""Evaluation through the front door: load_rules + RuleSet.bind(pod) on NodeInfo nodes."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.errors import RulesError
from rulesched.lang import RuleSet, load_rules
from rulesched.lang.frontend.check import check
from rulesched.lang.frontend.cost import CostLimits
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.source import Source
from rulesched.model import (
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
)

GI = 2**30 * 1000
Load = Callable[[str], RuleSet]


@pytest.fixture
def load(tmp_path: Path) -> Load:
    counter = itertools.count()

    def load(text: str) -> RuleSet:
        path = tmp_path / f"r{next(counter)}.rules"
        path.write_text(text, encoding="utf-8")
        return load_rules([path])

    return load


def make_pod(name: str = "web", **kw: object) -> Pod:
    return Pod(name, **kw)  # type: ignore[arg-type]


POD = make_pod(
    labels={"app": "web", "tier": "front"},
    annotations={"size": "2Gi", "junk": "abc"},
    priority=10,
    requests={"cpu": 500, "memory": GI},
    node_selector={"zone": "z1"},
)


def make_node(name: str = "n1", pods: tuple[Pod, ...] | None = None, **kw: object) -> NodeInfo:
    kw.setdefault("labels", {"zone": "z1", "disk": "ssd", "rank": "5"})
    kw.setdefault("allocatable", {"cpu": 4000, "memory": 8 * GI, "pods": 110_000})
    kw.setdefault("taints", (Taint("gpu", "true", "NoSchedule"),))
    if pods is None:
        pods = (
            make_pod("web-1", labels={"app": "web"}, priority=1, requests={"cpu": 1000}),
            make_pod("db-1", labels={"app": "db"}, priority=3, requests={"cpu": 1500, "memory": GI}),
        )
    return NodeInfo(Node(name, **kw), pods)  # type: ignore[arg-type]


def holds(load: Load, body: str, pod: Pod = POD, node: NodeInfo | None = None) -> bool:
    (f,) = load(f"filter f: {body}").bind(pod).filters
    return bool(f.passes(make_node() if node is None else node))


# --- values, operators, coercions -------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # quantities: a bare number is read in whole units; the node has 1.5 CPUs free
        ("node.free.cpu >= 1", True),
        ("node.free.cpu >= 2", False),
        ("node.free.cpu == 1500m", True),
        ("node.free.cpu == 1.5", True),
        ("pod.requests.cpu == 500m", True),
        ("500m + 500m == 1", True),
        ("2Gi / 2 == 1Gi", True),
        ("2Gi / 2Gi == 1", True),
        ("1Gi * 2 == 2Gi", True),
        ("1m / 3 == 1m", True),
        ("number(500m) == 0.5", True),
        ("number(node.free.memory) == 7 * 1024 * 1024 * 1024", True),
        ("100 / node.allocatable.pods == 100 / 110", True),
        ("node.requested.cpu == 2500m", True),
        ("1.5k == 1500", True),
        ("pod.requests.cpu + 1 == 1500m", True),
        # numbers and durations
        ("3 / 2 == 1.5", True),
        ("7 // 2 == 3", True),
        ("7 % 3 == 1", True),
        ("1 + 2 * 3 == 7", True),
        ("30s + 1min == 90s", True),
        ("2h > 100min", True),
        ("seconds(1min) == 60", True),
        ("100ms * 10 == 1s", True),
        # division or remainder by zero is 0
        ("1 / 0 == 0", True),
        ("1 // 0 == 0", True),
        ("5 % 0 == 0", True),
        ("1Gi / 0 == 0", True),
        ("node.free.cpu / (len(node.pods) - 2) == 0", True),
        ("node.free.cpu // 0 == 0", True),
        # missing keys read as the zero value
        ('pod.labels["nope"] == ""', True),
        ('node.labels["nope"] == ""', True),
        ('pod.requests["nvidia.com/gpu"] == 0', True),
        ('node.images["busybox"] == 0', True),
        ('len(pod.annotations["nope"]) == 0', True),
        ("node.free.ephemeral_storage == 0", True),
        ("[1, 2][5] == 0", True),
        ('["a"][-1] == "a"', True),
        ('not has(pod.labels, "nope")', True),
        # quantity() parses strings; anything else is 0
        ('quantity("2Gi") == 2Gi', True),
        ('quantity("junk") == 0', True),
        ('quantity(pod.annotations["size"]) == 2Gi', True),
        ('quantity(pod.annotations["missing"]) == 0', True),
        ("quantity(2) == 2", True),
        # if, in, not in
        ("(if pod.priority > 5 then 1 else 2) == 1", True),
        ('(if pod.priority > 50 then "a" else "b") == "b"', True),
        ('"web" in ["web", "db"]', True),
        ('"x" not in ["web"]', True),
        ("2 in [1, 2]", True),
        ('"app" in pod.labels', True),
        ('"z1" in node.labels', False),
        ('"nope" not in pod.labels', True),
        ('"eb" in "web"', True),
        ('"x" in pod.name', False),
        # strings
        ('pod.name + "-" + node.name == "web-n1"', True),
        ('upper(pod.labels["app"]) == "WEB"', True),
        ('startswith(node.name, "n")', True),
        ('string(1.5) + string(2.0) + string(true) == "1.52true"', True),
        ('"abc" < "abd"', True),
    ],
)
def test_expression_values(load: Load, body: str, expected: bool) -> None:
    assert holds(load, body) is expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("count(p in node.pods) == 2", True),
        ('count(p in node.pods where p.labels["app"] == pod.labels["app"]) == 1', True),
        ("any(p in node.pods where p.priority > 2)", True),
        ("all(p in node.pods where p.priority > 2)", False),
        ("all(p in node.pods where p.priority < pod.priority)", True),
        ("sum(p.priority for p in node.pods) == 4", True),
        ("sum(p.requests.cpu for p in node.pods) == 2500m", True),
        ("sum(p.priority for p in node.pods where p.priority > 100) == 0", True),
        ("min(p.priority for p in node.pods) == 1", True),
        ("max(p.priority for p in node.pods where p.priority < 3) == 1", True),
        ("max(p.priority for p in node.pods where p.priority > 100) == 0", True),
        ('collect(p.name for p in node.pods where p.priority > 1) == ["db-1"]', True),
        ("collect(p.priority * 2 for p in node.pods) == [2, 6]", True),
        ('count(k in pod.labels where k != "tier") == 1', True),
        ("min(1, 2, 3) == 1 and max(1Gi, 2) == 1Gi", True),
        ("any(x in [false]) and all(x in [false]) and not any(x in [])", True),
        ("all(x in [] where false)", True),
        ("count(t in node.taints where not tolerated(t, pod.tolerations)) == 1", True),
    ],
)
def test_aggregates(load: Load, body: str, expected: bool) -> None:
    assert holds(load, body) is expected


def test_nested_loops_over_the_nodes_pods_read_the_outer_variable(load: Load) -> None:
    """Two nested loops over node.pods are refused as too costly for a rule set, but the compiler
    still gets them right where the bound is lifted."""
    text = "filter f: count(p in node.pods where count(q in node.pods where q.priority > p.priority) == 0) == 1"
    with pytest.raises(RulesError, match=r"costs up to .* steps per node \(limit 10,000\)"):
        load(text)
    tree, problems = parse_source(Source("t.rules", text))
    checked = check([tree], CostLimits(steps=10**9, set_steps=10**9))
    assert problems == [] and checked.ok
    (f,) = RuleSet(checked).bind(POD).filters
    assert f.passes(make_node())


# --- rules: guards, reasons, scores, preemption -----------------------------------------------


def test_guards_decide_which_rules_bind(load: Load) -> None:
    rules = load(
        "filter low when pod.priority < 5: false\n"
        "filter high when pod.priority >= 5: true\n"
        "filter always: true\n"
        'score team when has(pod.labels, "team"): 1\n'
        "score any_pod: 2\n"
        "preempt never when false: true\n"
        "preempt mine when pod.priority > 0: true\n"
    )
    bound = rules.bind(POD)
    assert [f.name for f in bound.filters] == ["high", "always"]
    assert [s.name for s in bound.scores] == ["any_pod"]
    assert [p.name for p in bound.preempts] == ["mine"]
    low = rules.bind(make_pod("low", labels={"team": "x"}))
    assert [f.name for f in low.filters] == ["low", "always"]
    assert [s.name for s in low.scores] == ["team", "any_pod"]
    assert low.preempts == ()


def test_filter_reasons(load: Load) -> None:
    bound = load(
        'filter one: false else "no room"\n'
        'filter two: false else ["a", "b"]\n'
        "filter plain: false\n"
        'filter blank: false else ""\n'
        "filter empty_list: false else collect(p.name for p in node.pods where false)\n"
        'filter computed: false else "free " + string(number(node.free.cpu)) + " on " + node.name\n'
        "filter pass: true\n"
    ).bind(POD)
    node = make_node()
    assert {f.name: f.reasons(node) for f in bound.filters} == {
        "one": ("no room",),
        "two": ("a", "b"),
        "plain": ("node(s) didn't satisfy rule plain",),
        "blank": ("node(s) didn't satisfy rule blank",),
        "empty_list": ("node(s) didn't satisfy rule empty_list",),
        "computed": ("free 1.5 on n1",),
        "pass": ("node(s) didn't satisfy rule pass",),
    }
    assert [f.passes(node) for f in bound.filters] == [False] * 6 + [True]
    failed, reasons = bound.first_failure(node)
    assert (failed.name, reasons) == ("one", ("no room",))


@pytest.mark.parametrize(
    ("body", "score"),
    [
        ("2.7", 2),
        ("0 - 2.7", -2),
        ("-2.7", -2),
        ("7 / 2", 3),
        ("-7 / 2", -3),
        ("1 / 0", 0),
        ("99.999", 99),
        ("100 - 100 * len(node.pods) / node.allocatable.pods", 98),
        ("number(node.free.cpu) * 10", 15),
        ("if node.unschedulable then 0 else 5", 5),
    ],
)
def test_scores_truncate_toward_zero(load: Load, body: str, score: int) -> None:
    (s,) = load(f"score s weight 3 normalize reverse: {body}").bind(POD).scores
    assert (s.weight, s.normalize, s.score(make_node())) == (3, "reverse", score)
    assert type(s.score(make_node())) is int


def test_preempt_sees_the_victim(load: Load) -> None:
    lowest, middle = make_pod("a", priority=1), make_pod("b", priority=3)
    node = make_node(pods=(lowest, middle, make_pod("c", priority=3)))
    bound = load(
        "preempt lower: victim.priority < pod.priority\n"
        "preempt lowest_here: count(q in node.pods where q.priority < victim.priority) == 0\n"
        'preempt same_app when pod.priority > 0: victim.labels["app"] == pod.labels["app"] order len(node.pods)\n'
        "let junior = victim.priority < 2\n"
        "preempt junior_only: junior\n"
    ).bind(POD)
    allows = {
        p.name: [p.allows(node, v) for v in (lowest, middle, make_pod("top", priority=50))] for p in bound.preempts
    }
    assert allows == {
        "lower": [True, True, False],
        "lowest_here": [True, False, False],
        "same_app": [False, False, False],
        "junior_only": [True, False, False],
    }
    assert [p.order(node) if p.order else None for p in bound.preempts] == [None, None, 3, None]


# --- built-ins --------------------------------------------------------------------------------


def req(op: str, *values: str, key: str = "app") -> LabelSelectorRequirement:
    return LabelSelectorRequirement(key, op, values)


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, False),
        (None, {"app": "web"}, False),
        (LabelSelector(), {}, True),
        (LabelSelector(), {"app": "web"}, True),
        (LabelSelector((("app", "web"),)), {"app": "web", "x": "y"}, True),
        (LabelSelector((("app", "web"),)), {"app": "db"}, False),
        (LabelSelector(match_expressions=(req("In", "web", "db"),)), {"app": "db"}, True),
        (LabelSelector(match_expressions=(req("In", "web"),)), {}, False),
        (LabelSelector(match_expressions=(req("NotIn", "web"),)), {"app": "web"}, False),
        (LabelSelector(match_expressions=(req("NotIn", "web"),)), {}, True),
        (LabelSelector(match_expressions=(req("Exists"),)), {"app": ""}, True),
        (LabelSelector(match_expressions=(req("Exists"),)), {}, False),
        (LabelSelector(match_expressions=(req("DoesNotExist"),)), {}, True),
        (LabelSelector(match_expressions=(req("DoesNotExist"),)), {"app": "x"}, False),
        (LabelSelector((("app", "web"),), (req("Exists", key="tier"),)), {"app": "web"}, False),
        (LabelSelector(match_expressions=(req("Bogus", "web"),)), {"app": "web"}, False),
    ],
)
def test_matches(load: Load, selector: LabelSelector | None, labels: dict[str, str], expected: bool) -> None:
    pod = make_pod(pod_affinity=(PodAffinityTerm("zone", selector),))
    body = "all(t in pod.pod_affinity where matches(t.label_selector, node.labels))"
    assert holds(load, body, pod, make_node(labels=labels)) is expected


def term(*exprs: NodeSelectorRequirement, fields: tuple[NodeSelectorRequirement, ...] = ()) -> NodeSelectorTerm:
    return NodeSelectorTerm(exprs, fields)


NSR = NodeSelectorRequirement


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ((term(NSR("rank", "Gt", ("4",))),), True),
        ((term(NSR("rank", "Gt", ("5",))),), False),
        ((term(NSR("rank", "Lt", ("6",))),), True),
        ((term(NSR("rank", "Lt", ("5",))),), False),
        ((term(NSR("rank", "Gt", ("1.5",))),), False),
        ((term(NSR("disk", "Gt", ("1",))),), False),
        ((term(NSR("rank", "Gt", ("1", "2"))),), False),
        ((term(NSR("missing", "Lt", ("9",))),), False),
        ((term(NSR("zone", "In", ("z1", "z2"))),), True),
        ((term(NSR("zone", "NotIn", ("z1",))),), False),
        ((term(NSR("gpu", "DoesNotExist")),), True),
        ((term(NSR("disk", "Exists")),), True),
        ((term(fields=(NSR("metadata.name", "In", ("n1",)),)),), True),
        ((term(fields=(NSR("metadata.name", "NotIn", ("n1",)),)),), False),
        ((term(fields=(NSR("metadata.uid", "In", ("n1",)),)),), False),
        ((term(),), False),
        ((term(), term(NSR("disk", "Exists"))), True),  # terms are ORed
        ((term(NSR("disk", "Exists"), NSR("zone", "In", ("z9",))),), False),  # requirements ANDed
    ],
)
def test_term_matches(load: Load, terms: tuple[NodeSelectorTerm, ...], expected: bool) -> None:
    pod = make_pod(required_node_affinity=terms)
    assert holds(load, "any(t in pod.required_node_affinity where term_matches(t, node))", pod) is expected


TAINT = Taint("gpu", "true", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("", "Exists"), TAINT, True),
        (Toleration("", "Exists"), Taint("other", "", "NoExecute"), True),
        (Toleration("gpu", "Exists"), TAINT, True),
        (Toleration("cpu", "Exists"), TAINT, False),
        (Toleration("gpu", "Equal", "true"), Taint("gpu", "true", "NoExecute"), True),  # empty effect: all
        (Toleration("gpu", "Equal", "false"), TAINT, False),
        (Toleration("gpu", "Exists", effect="NoExecute"), TAINT, False),
        (Toleration("gpu", "Equal", "true", "NoSchedule"), TAINT, True),
        (Toleration("gpu", "", "true"), TAINT, True),  # an empty operator means Equal
        (Toleration("gpu", "Unknown", "true"), TAINT, False),
    ],
)
def test_tolerates_and_tolerated(load: Load, toleration: Toleration, taint: Taint, expected: bool) -> None:
    pod, node = make_pod(tolerations=(toleration,)), make_node(taints=(taint,))
    rules = load(
        "filter one: all(t in node.taints where any(u in pod.tolerations where tolerates(u, t)))\n"
        "filter any_of: all(t in node.taints where tolerated(t, pod.tolerations))\n"
    )
    assert [f.passes(node) for f in rules.bind(pod).filters] == [expected, expected]
    assert holds(load, "all(t in node.taints where tolerated(t, pod.tolerations))", make_pod(), node) is False


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),
        ({"zone": "z1"}, True),
        ({"zone": "z1", "disk": "ssd"}, True),
        ({"zone": "z2"}, False),
        ({"gpu": ""}, False),
    ],
)
def test_subset(load: Load, selector: dict[str, str], expected: bool) -> None:
    assert holds(load, "subset(pod.node_selector, node.labels)", make_pod(node_selector=selector)) is expected


@pytest.mark.parametrize(
    ("wanted", "used", "expected"),
    [
        (ContainerPort(80, "TCP", "10.0.0.1"), ContainerPort(80, "TCP", "0.0.0.0"), True),
        (ContainerPort(80, "TCP", "0.0.0.0"), ContainerPort(80, "TCP", "10.0.0.2"), True),
        (ContainerPort(80, "TCP", "10.0.0.1"), ContainerPort(80, "TCP", "10.0.0.1"), True),
        (ContainerPort(80, "TCP", "10.0.0.1"), ContainerPort(80, "TCP", "10.0.0.2"), False),
        (ContainerPort(80, "UDP"), ContainerPort(80, "TCP"), False),
        (ContainerPort(81), ContainerPort(80), False),
    ],
)
def test_ports_conflict(load: Load, wanted: ContainerPort, used: ContainerPort, expected: bool) -> None:
    node = make_node(pods=(make_pod("other", host_ports=(used,)),))
    pod = make_pod(host_ports=(wanted,))
    assert holds(load, "ports_conflict(pod.host_ports, node.used_ports)", pod, node) is expected
    assert holds(load, "ports_conflict(pod.host_ports, node.used_ports)", make_pod(), node) is False


# --- the per-node cache -----------------------------------------------------------------------


def test_node_only_aggregates_are_cached_until_the_node_changes(load: Load) -> None:
    bound = load("score busy: count(p in node.pods)\nfilter room: sum(p.requests.cpu for p in node.pods) < 3\n").bind(
        POD
    )
    (score,), (room,) = bound.scores, bound.filters
    node = make_node()
    assert (score.score(node), room.passes(node)) == (2, True)
    assert len(node.memo) == 2
    sneaked = make_pod("sneaked", requests={"cpu": 2000})
    node.pods.append(sneaked)  # behind NodeInfo's back: the cached answers stay
    assert (score.score(node), room.passes(node)) == (2, True)
    node.pods.remove(sneaked)
    node.add_pod(sneaked)  # the proper way clears the memo
    assert node.memo == {}
    assert (score.score(node), room.passes(node)) == (3, False)
    node.remove_pod(sneaked)
    assert (score.score(node), room.passes(node)) == (2, True)


def test_cache_is_per_node_and_shared_by_pods(load: Load) -> None:
    rules = load("score busy: count(p in node.pods where p.priority > 0)\n")
    empty, full = make_node("empty", pods=()), make_node("full")
    for pod in (POD, make_pod("other", priority=99)):
        (score,) = rules.bind(pod).scores
        assert (score.score(empty), score.score(full)) == (0, 2)


def test_aggregates_reading_bound_variables_are_not_cached(load: Load) -> None:
    a, b = make_pod("a", priority=1), make_pod("b", priority=2)
    node = make_node(pods=(a, b))
    (p,) = load("preempt p: count(q in node.pods where q.priority < victim.priority) == 0").bind(POD).preempts
    assert [p.allows(node, a), p.allows(node, b), p.allows(node, a)] == [True, False, True]


def test_pod_only_aggregate_with_a_bound_variable_binds(load: Load) -> None:
    pod = make_pod(tolerations=(Toleration("k", "Exists", toleration_seconds=1),))
    rules = load(
        "filter g when any(t in pod.tolerations where count(x in [1, 2] where x > t.toleration_seconds) > 0): true"
    )
    assert [f.name for f in rules.bind(pod).filters] == ["g"]
    assert rules.bind(make_pod()).filters == ()


# --- once known issues (docs/language.md), fixed in 2669933 -----------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "[1, 2Gi][0] == 1000m",
        "(if true then 1 else 500m) == 1000m",
        "(if false then 500m else 1) == 1",
        "pod.requests.cpu in [0.5]",
        "0.5 in [500m]",
        "pod.requests.cpu not in [1, 2]",
    ],
)
def test_numbers_read_as_quantities_in_lists_ifs_and_in(load: Load, body: str) -> None:
    assert holds(load, body)


@pytest.mark.parametrize(
    "body",
    [
        'pod.tolerations[0].key == ""',
        'node.pods[7].name == ""',
        "node.pods[-9].priority == 0",
        "len(node.taints[3].effect) == 0",
    ],
)
def test_record_index_past_the_end_reads_zero_values(load: Load, body: str) -> None:
    assert holds(load, body, make_pod(), make_node(pods=(), taints=()))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("node.pods == []", True),
        ("node.used_ports == []", True),
        ("node.pods != []", False),
        ("len(node.pods + [pod]) == 1", True),
        ('collect(p.name for p in node.pods) + ["x"] == ["x"]', True),
    ],
)
def test_lists_compare_by_elements(load: Load, body: str, expected: bool) -> None:
    assert holds(load, body, POD, make_node(pods=())) is expected
