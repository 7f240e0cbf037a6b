"""NodeAffinity Filter and Score, ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodeaffinity/node_affinity_test.go (TestNodeAffinity,
TestNodeAffinityPriority). The filter tables check only the Filter status (PreFilter results are
node-name pre-selection, which rulesched does not do); the score tables check the list after
NormalizeScore.

Not ported (non-default NodeAffinityArgs.addedAffinity): "Matches added affinity and Pod's node
affinity", "Matches added affinity but not Pod's node affinity", "Doesn't match added affinity",
"added affinity", "added affinity and pod has default affinity". Also "PreScore returns error when
an incoming Pod has a broken affinity" (an Error status for an invalid label key; the API server
rejects such pods, and rulesched has no error status to compare).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import UNRESOLVABLE, filter_status, node, normalized_scores, pod, state

REASON = ("node(s) didn't match Pod's node affinity/selector",)
NAME = "metadata.name"


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


def term(*exprs: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    t: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        t["matchFields"] = list(fields)
    return t


def required(*terms: dict[str, Any], selector: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }
    if selector:
        spec["nodeSelector"] = selector
    return pod("p", spec=spec)


def selector(labels: dict[str, str]) -> Any:
    return pod("p", spec={"nodeSelector": labels})


FOO_BAR = {"foo": "bar"}
GPU = {"GPU": "NVIDIA-GRID-K1"}
INVALID = "Pod with an invalid value in Affinity term won't be scheduled onto the node"

FILTER = [
    ("missing labels", selector(FOO_BAR), {}, "node", REASON),
    ("same labels", selector(FOO_BAR), FOO_BAR, "node", None),
    ("node labels are superset", selector(FOO_BAR), {"foo": "bar", "baz": "blah"}, "node", None),
    ("node labels are subset", selector({"foo": "bar", "baz": "blah"}), FOO_BAR, "node", REASON),
    (
        "Pod with matchExpressions using In operator that matches the existing node",
        required(term(expr("foo", "In", "bar", "value2"))),
        FOO_BAR,
        "node",
        None,
    ),
    (
        "Pod with matchExpressions using Gt operator that matches the existing node",
        required(term(expr("kernel-version", "Gt", "0204"))),
        {"kernel-version": "0206"},
        "node",
        None,
    ),
    (
        "Pod with matchExpressions using NotIn operator that matches the existing node",
        required(term(expr("mem-type", "NotIn", "DDR", "DDR2"))),
        {"mem-type": "DDR3"},
        "node",
        None,
    ),
    (
        "Pod with matchExpressions using Exists operator that matches the existing node",
        required(term(expr("GPU", "Exists"))),
        GPU,
        "node",
        None,
    ),
    (
        "Pod with affinity that don't match node's labels won't schedule onto the node",
        required(term(expr("foo", "In", "value1", "value2"))),
        FOO_BAR,
        "node",
        REASON,
    ),
    (
        "Pod with empty MatchExpressions is not a valid value will match no objects and won't schedule onto the node",
        required(term()),
        FOO_BAR,
        "node",
        REASON,
    ),
    ("Pod with no Affinity will schedule onto a node", pod("p"), FOO_BAR, "node", None),
    (
        "Pod with Affinity but nil NodeSelector will schedule onto a node",
        pod("p", spec={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": None}}}),
        FOO_BAR,
        "node",
        None,
    ),
    (
        "Pod with multiple matchExpressions ANDed that matches the existing node",
        required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
        GPU,
        "node",
        None,
    ),
    (
        "Pod with multiple matchExpressions ANDed that doesn't match the existing node",
        required(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))),
        GPU,
        "node",
        REASON,
    ),
    (
        "Pod with multiple NodeSelectorTerms ORed in affinity, matches the node's labels and will schedule onto the node",
        required(term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2"))),
        FOO_BAR,
        "node",
        None,
    ),
    (
        "Pod with an Affinity and a PodSpec.NodeSelector(the old thing that we are deprecating) "
        "both are satisfied, will schedule onto the node",
        required(term(expr("foo", "Exists")), selector=FOO_BAR),
        FOO_BAR,
        "node",
        None,
    ),
    (
        "Pod with an Affinity matches node's labels but the PodSpec.NodeSelector(the old thing that we are deprecating) "
        "is not satisfied, won't schedule onto the node",
        required(term(expr("foo", "Exists")), selector=FOO_BAR),
        {"foo": "barrrrrr"},
        "node",
        REASON,
    ),
    pytest.param(
        required(term(expr("foo", "NotIn", "invalid value: ___@#$%^"))),
        FOO_BAR,
        "node",
        REASON,
        id=INVALID,  # the value is no label value: the term matches nothing (rulesched/model/parts.py)
    ),
    (
        "Pod with matchFields using In operator that matches the existing node",
        required(term(fields=(expr(NAME, "In", "node1"),))),
        {},
        "node1",
        None,
    ),
    (
        "Pod with matchFields using In operator that does not match the existing node",
        required(term(fields=(expr(NAME, "In", "node1"),))),
        {},
        "node2",
        REASON,
    ),
    (
        "Pod with two terms: matchFields does not match, but matchExpressions matches",
        required(term(fields=(expr(NAME, "In", "node1"), expr(NAME, "In", "node2"))), term(expr("foo", "In", "bar"))),
        FOO_BAR,
        "node2",
        None,
    ),
    (
        "Pod with one term: matchFields does not match, but matchExpressions matches",
        required(term(expr("foo", "In", "bar"), fields=(expr(NAME, "In", "node1"),))),
        FOO_BAR,
        "node2",
        REASON,
    ),
    (
        "Pod with one term: both matchFields and matchExpressions match",
        required(term(expr("foo", "In", "bar"), fields=(expr(NAME, "In", "node1"),))),
        FOO_BAR,
        "node1",
        None,
    ),
    (
        "Pod with two terms: both matchFields and matchExpressions do not match",
        required(term(fields=(expr(NAME, "In", "node1"),)), term(expr("foo", "In", "not-match-to-bar"))),
        FOO_BAR,
        "node2",
        REASON,
    ),
    (
        "Pod with two terms of node.Name affinity",
        required(term(fields=(expr(NAME, "In", "node1"),)), term(fields=(expr(NAME, "In", "node2"),))),
        {},
        "node2",
        None,
    ),
    (
        "Pod with two conflicting mach field requirements",
        required(term(fields=(expr(NAME, "In", "node1"), expr(NAME, "In", "node2")))),
        FOO_BAR,
        "node2",
        REASON,
    ),
    (
        "Matches node selector correctly even if PreFilter is not called",
        selector(FOO_BAR),
        {"foo": "bar", "baz": "blah"},
        "node",
        None,
    ),
    (
        "Matches node affinity correctly even if PreFilter is not called",
        required(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
        GPU,
        "node",
        None,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "labels", "node_name", "want"),
    [pytest.param(*c[1:], id=c[0]) if isinstance(c[0], str) else c for c in FILTER],
)
def test_node_affinity_filter(
    incoming: Any, labels: dict[str, str], node_name: str, want: tuple[str, ...] | None
) -> None:
    cluster = state([node(node_name, labels=labels)])
    # every failure of this plugin is UnschedulableAndUnresolvable upstream
    assert filter_status(incoming, cluster, node_name, rule="NodeAffinity") == (
        None if want is None else (UNRESOLVABLE, want)
    )


def preferred(*weighted: tuple[int, dict[str, Any]]) -> Any:
    return pod(
        "p",
        spec={
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": w, "preference": t} for w, t in weighted
                    ]
                }
            }
        },
    )


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}
AFFINITY1 = preferred((2, term(expr("foo", "In", "bar"))))
AFFINITY2 = preferred(
    (2, term(expr("foo", "In", "bar"))),
    (4, term(expr("key", "In", "value"))),
    (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
)
NO_AFFINITY = pod("p", annotations={})

SCORE = [
    (
        "all nodes are same priority as NodeAffinity is nil",
        NO_AFFINITY,
        [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
        {"node1": 0, "node2": 0, "node3": 0},
    ),
    # upstream checks that PreScore returns Skip; the outcome is that the plugin adds nothing
    ("Skip is returned in PreScore when NodeAffinity is nil", NO_AFFINITY, [("node1", LABEL1)], {"node1": 0}),
    (
        "no node matches preferred scheduling requirements in NodeAffinity of pod so all nodes' priority is zero",
        AFFINITY1,
        [("node1", LABEL4), ("node2", LABEL2), ("node3", LABEL3)],
        {"node1": 0, "node2": 0, "node3": 0},
    ),
    (
        "only node1 matches the preferred scheduling requirements of pod",
        AFFINITY1,
        [("node1", LABEL1), ("node2", LABEL2), ("node3", LABEL3)],
        {"node1": 100, "node2": 0, "node3": 0},
    ),
    (
        "all nodes matches the preferred scheduling requirements of pod but with different priorities ",
        AFFINITY2,
        [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
        {"node1": 18, "node5": 100, "node2": 36},
    ),
    (
        "calculate the priorities correctly even if PreScore is not called",
        AFFINITY2,
        [("node1", LABEL1), ("node5", LABEL5), ("node2", LABEL2)],
        {"node1": 18, "node5": 100, "node2": 36},
    ),
]


@pytest.mark.parametrize(("incoming", "nodes", "want"), [pytest.param(*c[1:], id=c[0]) for c in SCORE])
def test_node_affinity_score(incoming: Any, nodes: list[tuple[str, dict[str, str]]], want: dict[str, int]) -> None:
    cluster = state([node(n, labels=labels) for n, labels in nodes])
    assert normalized_scores(incoming, cluster, "NodeAffinity") == want
