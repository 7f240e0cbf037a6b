"""Filtering with nominated pods, through rules/default.rules and a scheduling cycle.

Ported from kube-scheduler:
- pkg/scheduler/framework/runtime/framework_test.go TestFilterPluginsWithNominatedPods. Upstream
  injects statuses from fake plugins; here the same situations are built with real requests on a
  node of 1 cpu: a nominated pod of higher priority that leaves room (the filters pass), one that
  does not (they fail), and one of lower priority that would not leave room but is ignored.
- pkg/scheduler/schedule_one_test.go TestFindFitPredicateCallCounts: upstream counts filter calls
  (once when the nominated pods have lower priority, twice when higher). The count is what the
  nominated pods a cycle must respect decide; here that outcome is checked instead: which nodes
  the pod must leave room on.
- pkg/scheduler/schedule_one_test.go TestPreferNominatedNodeFilterCallCounts: upstream counts
  filter calls (only the nominated node when it fits, every node otherwise); here the outcome:
  the pod lands on its nominated node when that fits, even where another node scores higher,
  and elsewhere when it does not.

Not ported: TestFilterPluginsWithNominatedPods "node has a high-priority nominated pod and pre
filters fail" and "node has a high-priority nominated pod and filters fail" (errors injected by
fake plugins: rules cannot fail that way).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.model import Pod
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.nominator import Nominator
from tests.upstream.harness import default_rules, node, pod, state

LOW, MID, HIGH = 0, 100, 1000
ONE_CPU = {"cpu": "1", "memory": "1Gi", "pods": "10"}


def P(name: str, prio: int, cpu: str = "0", nominated: str = "", on: str = "") -> Pod:
    spec = {"priority": prio, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    p = pod(name, spec=spec, node_name=on)
    return dataclasses.replace(p, nominated_node_name=nominated) if nominated else p


def schedule(incoming: Pod, nodes: list[Any], pods: list[Pod], nominated: list[tuple[Pod, str]]) -> str | None:
    """One cycle for ``incoming`` with the given nominations; the node chosen, or None."""
    nominator = Nominator()
    for p, where in nominated:
        nominator.nominate(p, where)
    cluster = state(nodes, pods)
    result, bound = Cycle(SchedulerSettings()).run(
        incoming, cluster.snapshot(), default_rules().session(), nominator.reserved_for(incoming)
    )
    bound.release()
    return result.node if result.code is Code.SCHEDULED else None


# --- TestFilterPluginsWithNominatedPods -----------------------------------------------------------

FILTER_WITH_NOMINATED = [
    ("node has no nominated pod", P("low", LOW, "500m"), [], "node1"),
    (
        "node has a high-priority nominated pod and all filters succeed",
        P("low", LOW, "500m"),
        [(P("high", HIGH, "250m"), "node1")],
        "node1",
    ),
    (
        # (upstream's filter fails by injection; here the nominated pod's request does it)
        "node has a high-priority nominated pod and the filters fail with it added",
        P("low", LOW, "500m"),
        [(P("high", HIGH, "750m"), "node1")],
        None,
    ),
    (
        "node has a low-priority nominated pod and pre filters return unschedulable",
        P("high", HIGH, "500m"),
        [(P("low", LOW, "750m"), "node1")],
        "node1",
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nominated", "want"), [pytest.param(*c[1:], id=c[0]) for c in FILTER_WITH_NOMINATED]
)
def test_filter_plugins_with_nominated_pods(incoming: Pod, nominated: list, want: str | None) -> None:
    existing = [P("existing", LOW, "100m", on="node1")]  # framework.NewNodeInfo(pod): the node holds a pod
    assert schedule(incoming, [node("node1", allocatable=ONE_CPU)], existing, nominated) == want


def test_the_pod_itself_is_not_counted_against_its_own_nomination() -> None:
    """(addGENominatedPods skips the pod being scheduled, by UID.)"""
    me = P("me", HIGH, "750m", nominated="node1")
    assert schedule(me, [node("node1", allocatable=ONE_CPU)], [], [(me, "node1")]) == "node1"


# --- TestFindFitPredicateCallCounts -----------------------------------------------------------------

CALL_COUNTS = [
    ("nominated pods have lower priority, predicate is called once", P("1", HIGH), None),
    ("nominated pods have higher priority, predicate is called twice", P("1", LOW), {"1"}),
]


@pytest.mark.parametrize(("incoming", "second_pass_on"), [pytest.param(*c[1:], id=c[0]) for c in CALL_COUNTS])
def test_find_fit_predicate_call_counts(incoming: Pod, second_pass_on: set[str] | None) -> None:
    nominator = Nominator()
    nominator.nominate(P("nominated", MID), "1")
    reserved = nominator.reserved_for(incoming)
    assert (None if reserved is None else set(reserved.nodes)) == second_pass_on


# --- TestPreferNominatedNodeFilterCallCounts --------------------------------------------------------

# node1 is the fullest, so scoring alone would never pick it
BUSY = [P("busy", HIGH, "600m", on="node1")]
PREFER_NOMINATED = [
    (
        "pod has the nominated node set, filter is called only once",
        P("p_with_nominated_node", HIGH, nominated="node1"),
        False,
        "node1",
    ),
    (
        "pod without the nominated pod, filter is called for each node",
        P("p_without_nominated_node", HIGH),
        False,
        "any",
    ),
    (
        "nominated pod cannot pass the filter, filter is called for each node",
        P("p_with_nominated_node", HIGH, nominated="node1"),
        True,
        "any",
    ),
]


@pytest.mark.parametrize(
    ("incoming", "node1_unschedulable", "want"), [pytest.param(*c[1:], id=c[0]) for c in PREFER_NOMINATED]
)
def test_prefer_nominated_node(incoming: Pod, node1_unschedulable: bool, want: str) -> None:
    nodes = [node("node1", allocatable=ONE_CPU, unschedulable=node1_unschedulable)]
    nodes += [node(n, allocatable=ONE_CPU) for n in ("node2", "node3")]
    chosen = schedule(incoming, nodes, BUSY, [])
    assert chosen == want if want != "any" else chosen in {"node2", "node3"}


def test_the_nominated_node_shortcut_respects_other_nominations() -> None:
    """(Upstream's evaluateNominatedNode filters with nominated pods too.)"""
    incoming = P("p", LOW, "500m", nominated="node1")
    nodes = [node(n, allocatable=ONE_CPU) for n in ("node1", "node2")]
    assert schedule(incoming, nodes, [], [(P("holder", HIGH, "600m"), "node1")]) == "node2"
