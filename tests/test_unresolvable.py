"""Unresolvable filter failures: the ``unresolvable [when COND]`` clause from text to preemption.

Parsing, printing, checking and composing the clause; what a bound filter answers for failing
nodes; and what the scheduler does with it: preemption leaves unresolvable nodes alone and says
so in upstream's words. (The upstream tables of tests/upstream/ pin default.rules' marks.)
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, check_texts, load_rules_text
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.printer import print_file
from rulesched.lang.frontend.source import Severity, Source
from rulesched.scheduler.evaluate import node_statuses
from rulesched.scheduler.framework import Code
from rulesched.scheduler.preemption import preempt
from tests.upstream.harness import node, pod


def items(text: str) -> tuple[ast.Item, ...]:
    tree, problems = parse_source(Source("t.rules", text))
    assert problems == [], [d.render() for d in problems]
    return tree.items


def errors(text: str) -> list[str]:
    return [
        f"{d.code}: {d.message}" for d in check_texts({"t.rules": text}).diagnostics if d.severity is Severity.ERROR
    ]


def on_default(text: str) -> RuleSet:
    return load_rules_text({"site.rules": 'extends "default"\n' + text})


# --- syntax -----------------------------------------------------------------------------------------


def test_bare_clause_is_every_failure_and_prints_back_bare() -> None:
    (rule,) = items('filter f: node.unschedulable else "cordoned" unresolvable')
    assert isinstance(rule, ast.Rule)
    assert rule.unresolvable == ast.Literal(ast.LiteralKind.BOOL, True, span=rule.span)
    assert rule.reason is not None
    assert print_file(parse_source(Source("t.rules", "filter f: true unresolvable when true"))[0]) == (
        "filter f:\n    true\n    unresolvable\n"
    )


def test_condition_after_the_reason_or_without_one() -> None:
    with_reason, without = items(
        'filter f: len(node.pods) < 3 else "full" unresolvable when node.allocatable.pods < 3\n'
        'filter g: true unresolvable when node.name == "x"'
    )
    assert isinstance(with_reason, ast.Rule) and isinstance(without, ast.Rule)
    assert isinstance(with_reason.unresolvable, ast.Binary) and with_reason.reason is not None
    assert isinstance(without.unresolvable, ast.Binary) and without.reason is None
    text = print_file(parse_source(Source("t.rules", 'filter g: true unresolvable when node.name == "x"'))[0])
    assert text == 'filter g:\n    true\n    unresolvable when node.name == "x"\n'


def test_only_filters_have_the_clause() -> None:
    for text in ("score s: 1 unresolvable", "preempt p: true unresolvable", "override score s unresolvable"):
        tree, problems = parse_source(Source("t.rules", text))
        assert [d.code for d in problems] == ["syntax"], text
        assert "unresolvable" in problems[0].message


def test_unresolvable_is_reserved() -> None:
    _, problems = parse_source(Source("t.rules", "let unresolvable = 1"))
    assert [d.message for d in problems] == ["'unresolvable' is a reserved word and cannot be used as a name"]


# --- checking ---------------------------------------------------------------------------------------


def test_condition_must_be_bool_and_may_read_pod_and_node_only() -> None:
    assert errors("filter f: true unresolvable when len(node.pods)") == [
        "type: an unresolvable condition must be bool, not number"
    ]
    assert errors("filter f: true unresolvable when victim.priority > 0") == [
        "scope: 'victim' cannot be used in an unresolvable condition"
    ]
    assert errors("filter f: true unresolvable when node.pods[0].priority > pod.priority") == []


# --- composition ------------------------------------------------------------------------------------


def test_partial_override_changes_only_the_clause_and_says_so() -> None:
    checked = check_texts({"site.rules": 'extends "default"\noverride filter NodeName unresolvable when false\n'})
    notes = [d.message for d in checked.diagnostics if d.severity is Severity.NOTE]
    assert len(notes) == 1 and notes[0].endswith(": unresolvable -> unresolvable when false"), notes
    (rule,) = [c.rule for c in checked.checked.rules if c.kind is ast.RuleKind.FILTER and c.name == "NodeName"]
    assert rule.reason is not None  # the body and reason are kept
    assert rule.unresolvable == ast.Literal(ast.LiteralKind.BOOL, False, span=rule.span)

    marked = check_texts({"site.rules": 'extends "default"\noverride filter NodePorts unresolvable\n'})
    notes = [d.message for d in marked.diagnostics if d.severity is Severity.NOTE]
    assert notes[0].endswith(": resolvable -> unresolvable"), notes


# --- evaluation -------------------------------------------------------------------------------------

ZONE = "topology.kubernetes.io/zone"


def failing(rules: RuleSet, incoming: Any, cluster: ClusterStore) -> dict[str, Code]:
    return node_statuses(rules.bind(incoming, cluster), list(cluster.nodes))


def test_condition_decides_per_failing_node() -> None:
    rules = load_rules_text(
        {
            "t.rules": 'filter zoned: has(node.labels, "zone") and node.labels["zone"] == "a"\n'
            '    else "wrong zone" unresolvable when not has(node.labels, "zone")\n'
        }
    )
    cluster = ClusterStore.build([node("a", {"zone": "a"}), node("b", {"zone": "b"}), node("bare")], [])
    assert failing(rules, pod("p"), cluster) == {"b": Code.UNSCHEDULABLE, "bare": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_the_first_failing_filter_decides() -> None:
    """A node failing a resolvable filter before an unresolvable one is resolvable, as upstream
    stops at the first failing plugin."""
    rules = load_rules_text({"t.rules": 'filter first: node.name != "x"\nfilter second: false unresolvable\n'})
    cluster = ClusterStore.build([node("x"), node("y")], [])
    assert failing(rules, pod("p"), cluster) == {"x": Code.UNSCHEDULABLE, "y": Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


# --- preemption -------------------------------------------------------------------------------------


def big(name: str, cpu: str, priority: int = 1000, node_name: str = "") -> Any:
    spec = {"priority": priority, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    return pod(name, spec=spec, node_name=node_name)


def test_preemption_skips_unresolvable_nodes_even_with_victims_on_them() -> None:
    """small (2 cpus) runs a low-priority pod but could never hold the 3-cpu pod; large (4 cpus)
    could, once its low-priority pod leaves."""
    cluster = ClusterStore.build(
        [node("small", allocatable={"cpu": "2", "pods": "10"}), node("large", allocatable={"cpu": "4", "pods": "10"})],
        [big("s", "2", 0, "small"), big("l", "2", 0, "large")],
    )
    rules = on_default("")
    result = preempt(cluster.snapshot(), rules.session(), big("p", "3"))
    assert (result.nominated, [v.name for v in result.victims]) == ("large", ["l"])


@pytest.mark.parametrize(
    ("site", "message"),
    [
        ("", "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
        # a site that says preemption might help here tries: evicting does not make the pod fit
        (
            "override filter NodeResourcesFit unresolvable when false",
            "preemption: 0/1 nodes are available: 1 Insufficient cpu.",
        ),
    ],
)
def test_message_for_a_pod_bigger_than_every_node(site: str, message: str) -> None:
    cluster = ClusterStore.build([node("small", allocatable={"cpu": "2", "pods": "10"})], [big("s", "1", 0, "small")])
    result = preempt(cluster.snapshot(), on_default(site).session(), big("p", "3"))
    assert (result.nominated, result.message) == (None, message)


GPU_RESERVED = (
    'filter gpu_reserved when pod.requests["nvidia.com/gpu"] == 0:\n'
    '    node.allocatable["nvidia.com/gpu"] == 0 else "node(s) are reserved for GPU pods" unresolvable\n'
)


@pytest.mark.parametrize(
    ("site", "used", "nominated", "message"),
    [
        ("", "4", "gpu", "preemption: found a potential placement for pod on node gpu, preempting 1 victims"),
        # room enough: the node fails only the reserving filter, so preemption does not try it
        (GPU_RESERVED, "2", None, "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."),
        # full: it fails NodeResourcesFit first (resolvable), and the dry run finds the pod still
        # fails there, for the reserving filter's reason
        (GPU_RESERVED, "4", None, "preemption: 0/1 nodes are available: 1 node(s) are reserved for GPU pods."),
    ],
)
def test_a_custom_unresolvable_filter_keeps_preemption_away(
    site: str, used: str, nominated: str | None, message: str
) -> None:
    """A site filter reserving GPU nodes: a pod without GPUs must not evict pods there."""
    cluster = ClusterStore.build(
        [node("gpu", allocatable={"cpu": "4", "pods": "10", "nvidia.com/gpu": "1"})], [big("low", used, 0, "gpu")]
    )
    result = preempt(cluster.snapshot(), on_default(site).session(), big("p", "1"))
    assert (result.nominated, result.message) == (nominated, message)
