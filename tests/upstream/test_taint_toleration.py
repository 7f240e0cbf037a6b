"""TaintToleration Filter and Score, ported from kube-scheduler's
pkg/scheduler/framework/plugins/tainttoleration/taint_toleration_test.go
(TestTaintTolerationScore, TestTaintTolerationFilter). Every case of both tables is ported; the
score table checks the list after NormalizeScore.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import UNRESOLVABLE, filter_status, node, normalized_scores, pod, state

PREFER = "PreferNoSchedule"
NO_SCHEDULE = "NoSchedule"


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str, value: str = "", effect: str = "", operator: str = "") -> dict[str, str]:
    t = {"key": key, "effect": effect}
    if value:
        t["value"] = value
    if operator:
        t["operator"] = operator
    return t


def pod_with(*tolerations: dict[str, str]) -> Any:
    return pod("pod1", spec={"tolerations": list(tolerations)})


ARM = taint("cpu-type", "arm64", PREFER)
SSD = taint("disk-type", "ssd", PREFER)

SCORE = [
    (
        "node with taints tolerated by the pod, gets a higher score than those node with intolerable taints",
        pod_with(tol("foo", "bar", PREFER, "Equal")),
        [("nodeA", [taint("foo", "bar", PREFER)]), ("nodeB", [taint("foo", "blah", PREFER)])],
        {"nodeA": 100, "nodeB": 0},
    ),
    (
        "the nodes that all of their taints are tolerated by the pod, get the same score, "
        "no matter how many tolerable taints a node has",
        pod_with(tol("cpu-type", "arm64", PREFER, "Equal"), tol("disk-type", "ssd", PREFER, "Equal")),
        [("nodeA", []), ("nodeB", [ARM]), ("nodeC", [ARM, SSD])],
        {"nodeA": 100, "nodeB": 100, "nodeC": 100},
    ),
    (
        "the more intolerable taints a node has, the lower score it gets.",
        pod_with(tol("foo", "bar", PREFER, "Equal")),
        [("nodeA", []), ("nodeB", [ARM]), ("nodeC", [ARM, SSD])],
        {"nodeA": 100, "nodeB": 50, "nodeC": 0},
    ),
    (
        "only taints and tolerations that have effect PreferNoSchedule are checked by taints-tolerations priority function",
        pod_with(tol("cpu-type", "arm64", NO_SCHEDULE, "Equal"), tol("disk-type", "ssd", NO_SCHEDULE, "Equal")),
        [("nodeA", []), ("nodeB", [taint("cpu-type", "arm64", NO_SCHEDULE)]), ("nodeC", [ARM, SSD])],
        {"nodeA": 100, "nodeB": 100, "nodeC": 0},
    ),
    (
        "Default behaviour No taints and tolerations, lands on node with no taints",
        pod_with(),
        [("nodeA", []), ("nodeB", [ARM])],
        {"nodeA": 100, "nodeB": 0},
    ),
]


@pytest.mark.parametrize(("incoming", "nodes", "want"), [pytest.param(*c[1:], id=c[0]) for c in SCORE])
def test_taint_toleration_score(
    incoming: Any, nodes: list[tuple[str, list[dict[str, str]]]], want: dict[str, int]
) -> None:
    cluster = state([node(n, taints=t) for n, t in nodes])
    assert normalized_scores(incoming, cluster, "TaintToleration") == want


USER1 = taint("dedicated", "user1", NO_SCHEDULE)

FILTER = [
    (
        "A pod having no tolerations can't be scheduled onto a node with nonempty taints",
        pod_with(),
        [USER1],
        ("node(s) had untolerated taint {dedicated: user1}",),
    ),
    (
        "A pod which can be scheduled on a dedicated node assigned to user1 with effect NoSchedule",
        pod_with(tol("dedicated", "user1", NO_SCHEDULE)),
        [USER1],
        None,
    ),
    (
        "A pod which can't be scheduled on a dedicated node assigned to user2 with effect NoSchedule",
        pod_with(tol("dedicated", "user2", NO_SCHEDULE, "Equal")),
        [USER1],
        ("node(s) had untolerated taint {dedicated: user1}",),
    ),
    (
        "A pod can be scheduled onto the node, with a toleration uses operator Exists that tolerates the taints on the node",
        pod_with(tol("foo", effect=NO_SCHEDULE, operator="Exists")),
        [taint("foo", "bar", NO_SCHEDULE)],
        None,
    ),
    (
        "A pod has multiple tolerations, node has multiple taints, all the taints are tolerated, "
        "pod can be scheduled onto the node",
        pod_with(tol("dedicated", "user2", NO_SCHEDULE, "Equal"), tol("foo", effect=NO_SCHEDULE, operator="Exists")),
        [taint("dedicated", "user2", NO_SCHEDULE), taint("foo", "bar", NO_SCHEDULE)],
        None,
    ),
    (
        "A pod has a toleration that keys and values match the taint on the node, but (non-empty) effect doesn't match, "
        "can't be scheduled onto the node",
        pod_with(tol("foo", "bar", PREFER, "Equal")),
        [taint("foo", "bar", NO_SCHEDULE)],
        ("node(s) had untolerated taint {foo: bar}",),
    ),
    (
        "The pod has a toleration that keys and values match the taint on the node, the effect of toleration is empty, "
        "and the effect of taint is NoSchedule. Pod can be scheduled onto the node",
        pod_with(tol("foo", "bar", operator="Equal")),
        [taint("foo", "bar", NO_SCHEDULE)],
        None,
    ),
    (
        "The pod has a toleration that key and value don't match the taint on the node, "
        "but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
        pod_with(tol("dedicated", "user2", NO_SCHEDULE, "Equal")),
        [taint("dedicated", "user1", PREFER)],
        None,
    ),
    (
        "The pod has no toleration, "
        "but the effect of taint on node is PreferNoSchedule. Pod can be scheduled onto the node",
        pod_with(),
        [taint("dedicated", "user1", PREFER)],
        None,
    ),
]


@pytest.mark.parametrize(("incoming", "taints", "want"), [pytest.param(*c[1:], id=c[0]) for c in FILTER])
def test_taint_toleration_filter(incoming: Any, taints: list[dict[str, str]], want: tuple[str, ...] | None) -> None:
    cluster = state([node("nodeA", taints=taints)])
    # every failure of this plugin is UnschedulableAndUnresolvable upstream
    assert filter_status(incoming, cluster, "nodeA", rule="TaintToleration") == (
        None if want is None else (UNRESOLVABLE, want)
    )
