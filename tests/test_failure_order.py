"""A node's reported failure, and whether it is unresolvable, is its first failing filter in rule
order, however the filters were evaluated (node tables, columns, shared answers, node by node).

What is checked, on every face that reports why a node does not fit: a cycle's FitError
histogram (node tables, stale rows evaluated node by node or as columns), the statuses
preemption reads (which nodes it may try), ``--explain``'s per-node reasons and unresolvable set,
and the extender's FailedNodes / FailedAndUnresolvableNodes.

- A table test ported from upstream's framework (pkg/scheduler/framework/runtime/framework_test.go
  TestFilterPlugins): two filter plugins, each succeeding, Unschedulable or
  UnschedulableAndUnresolvable; the node's status is the first failing plugin's.
- A property over generated clusters (the strategies of tests/test_fast_path_property.py): the
  default filters in their order and reversed, a last filter failing every node so that every
  node is reported; the answers must be the reference interpreter's, node by node.
- kube-scheduler's default profile order (getDefaultPlugins,
  pkg/scheduler/apis/config/v1/default_plugins.go): a node both tainted and full reports the
  taint, unresolvable, and preemption is not tried there.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.extender.service import Extender
from rulesched.lang import RuleSet, RulesHandle, Session, load_rules_text, resolve_rules_path
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.model import Node, Pod
from rulesched.model.decode import decode_pod
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.evaluate import node_statuses
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.preemption import NOT_HELPFUL, preempt
from tests.helpers.profiles import examples
from tests.helpers.scenarios import (
    NAMESPACES,
    SETTINGS,
    apply_events,
    assemble,
    pod_parts,
    reported_reasons,
    scenarios,
)
from tests.upstream.harness import node, pod

Failures = dict[str, tuple[tuple[str, ...], bool]]  # node -> (reasons, unresolvable)


def pod_object(name: str, namespace: str, spec: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": dict(labels)},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
        "status": {"phase": "Pending"},
    }


def reference(rules: RuleSet, p: Pod, state: ClusterStore) -> Failures:
    """The interpreter, node by node, filters in rule order, on a cluster rebuilt from objects."""
    checked = rules.checked
    interp = Interpreter(checked.notes, checked.lets)
    cluster = ClusterStore.build([n.node for n in state.nodes], list(state.pods()), namespaces=NAMESPACES)
    ctx = EvalContext(p, cluster)
    filters = [r for r in checked.rules if r.kind is ast.RuleKind.FILTER and interp.applies(r, ctx)]
    out: Failures = {}
    for info in cluster.nodes:
        for r in filters:
            if not interp.body(r, ctx, info):
                out[info.name] = (
                    reported_reasons(interp.reason(r, ctx, info), r.name),
                    interp.unresolvable(r, ctx, info),
                )
                break
    return out


def histogram(failures: Failures) -> Counter[str]:
    return Counter(reason for reasons, _ in failures.values() for reason in set(reasons))


class Faces:
    """Every face of one rule set, kept across a sequence of checks (tables, columns and the
    extender's caches carry over, as in a live scheduler)."""

    def __init__(self, rules: RuleSet, state: ClusterStore) -> None:
        self.rules, self.state = rules, state
        self.session = Session(rules)
        self.walks = {
            columns_from: Cycle(SchedulerSettings(engine=EngineSettings(columns_from=columns_from)))
            for columns_from in (0, 1)
        }
        self.explained = Cycle(SchedulerSettings(percentage_of_nodes_to_score=100, explain=True))
        self.extender = Extender(RulesHandle(rules))
        self.extender.store.set_namespaces(state.namespaces)

    def check(self, obj: dict[str, Any], where: object = None) -> Failures:
        """Every face's answer for the pod ``obj``, asserted equal to the reference; returns it."""
        p = decode_pod(obj, "test")
        expected = reference(self.rules, p, self.state)
        snapshot = self.state.snapshot()
        names = [n.name for n in snapshot.nodes]
        feasible = [n for n in names if n not in expected]
        for cycle in self.walks.values():
            result, bound = cycle.run(p, snapshot, self.session)
            try:
                if not feasible:
                    assert result.code is Code.UNSCHEDULABLE, where
                    assert result.reasons == histogram(expected), where
                    statuses = node_statuses(bound, snapshot.nodes)
                    assert statuses == {
                        n: Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
                        for n, (_, unresolvable) in expected.items()
                    }, where
                else:
                    assert result.node in feasible, where
            finally:
                bound.release()
        result, bound = self.explained.run(p, snapshot, self.session)
        bound.release()
        assert result.filtered == {n: why for n, (why, _) in expected.items()}, where
        assert result.unresolvable == {n for n, (_, unresolvable) in expected.items() if unresolvable}, where
        answer = self.extender_filter(obj)
        assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == feasible, where
        assert answer["FailedNodes"] == {n: ", ".join(why) for n, (why, u) in expected.items() if not u}, where
        assert answer["FailedAndUnresolvableNodes"] == {n: ", ".join(why) for n, (why, u) in expected.items() if u}
        return expected

    def extender_filter(self, obj: dict[str, Any]) -> Any:
        """The extender's filter answer, the nodes sent whole (its store holds the running pods)."""
        store = self.extender.store
        running = {p.key: p for p in self.state.pods()}
        for gone in [p.key for p in store.pods() if p.key not in running]:
            store.remove_pod(gone)
        for p in running.values():
            store.upsert_pod(p)
        nodes = [node_object(n.node) for n in self.state.nodes]
        body = json.dumps({"Pod": obj, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})
        return json.loads(self.extender.filter(body.encode()).body)


def node_object(n: Node) -> dict[str, Any]:
    """A node as the API (and kube-scheduler, nodeCacheCapable false) would send it."""
    obj = {
        "metadata": {"name": n.name, "labels": dict(n.labels)},
        "spec": {"unschedulable": n.unschedulable, "taints": [dataclasses.asdict(t) for t in n.taints]},
        "status": {"allocatable": {r: f"{v}m" for r, v in n.allocatable.items()}},
    }
    obj["metadata"]["resourceVersion"] = str(zlib.crc32(json.dumps(obj, sort_keys=True).encode()))
    return obj


# --- upstream's TestFilterPlugins ---------------------------------------------------------------

# Each plugin's outcome on a node comes from the node's label for it. TestPlugin1 reads the node's
# taints too, so it is evaluated per group of nodes alike in taints, TestPlugin2 as a column:
# evaluated in another order than the rules', reported in the rules'.
PLUGINS = """
filter TestPlugin1:
    node.labels["p1"] == "success" and all(t in node.taints where t.key != "never")
    else "injected filter status (TestPlugin1)"
    unresolvable when node.labels["p1"] == "unresolvable"

filter TestPlugin2:
    node.labels["p2"] == "success"
    else "injected filter status (TestPlugin2)"
    unresolvable when node.labels["p2"] == "unresolvable"
"""
OUTCOMES = ("success", "unschedulable", "unresolvable")


@pytest.mark.parametrize("rows", [1, 40], ids=["one-node-each", "columns"])
def test_filter_plugins_status_is_the_first_failing_plugins(rows: int) -> None:
    """TestFilterPlugins' cases (SuccessAndSuccessFilters, UnschedulableAndUnschedulableFilters,
    UnschedulableAndUnschedulableAndUnresolvableFilters, SuccessAndUnschedulableFilters, ...):
    every pair of outcomes, each on ``rows`` nodes (enough for column evaluation)."""
    rules = load_rules_text({"plugins.rules": PLUGINS})
    nodes = [
        node(f"{a}-{b}-{i}", {"p1": a, "p2": b})
        for a in OUTCOMES
        for b in OUTCOMES
        for i in range(rows)
        if (a, b) != ("success", "success")  # one node passes: the cycle places the pod there
    ]
    state = ClusterStore.build(nodes, [])
    got = Faces(rules, state).check(pod_object("p", "default", {}, {}))
    for name in (n.name for n in nodes):
        first, second = name.split("-")[:2]
        plugin, outcome = ("TestPlugin1", first) if first != "success" else ("TestPlugin2", second)
        assert got[name] == ((f"injected filter status ({plugin})",), outcome == "unresolvable"), name


# --- property: any order of the default filters --------------------------------------------------


def _filter_blocks() -> tuple[str, list[str]]:
    """The bundled default rules' lets and filters, each filter's text apart, in their order."""
    text = Path(resolve_rules_path("default")).read_text()
    head, _, rest = text.partition("\nfilter ")
    filters_text = ("filter " + rest).split("\n# --- scores")[0]
    blocks = ["filter " + b for b in filters_text.split("\nfilter ") if b.strip()]
    blocks[0] = blocks[0][len("filter ") :]
    lets = "\n".join(line for line in head.splitlines() if line.startswith("let "))
    return lets, [b.split("\n\n#")[0].strip() + "\n" for b in blocks]


LAST = 'filter Last:\n    node.name == ""\n    else "fails every node"\n'


def ordered_sets() -> dict[str, RuleSet]:
    lets, blocks = _filter_blocks()
    assert [b.split(":")[0].split()[1] for b in blocks][:4] == [
        "PodGroupTopology",  # (first: a pod group's placement leaves the other nodes out)
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
    ]
    return {
        name: load_rules_text({"order.rules": "\n".join([lets, *order, LAST])})
        for name, order in (("default order", blocks), ("reversed", blocks[::-1]))
    }


SETS = ordered_sets()


@st.composite
def probe_objects(draw: Any) -> list[dict[str, Any]]:
    return [
        pod_object(f"probe{i}", *assemble(*draw(pod_parts(True, rich=draw(st.booleans())))))
        for i in range(draw(st.integers(1, 3)))
    ]


@pytest.mark.parametrize("order", sorted(SETS))
@settings(SETTINGS, max_examples=examples(25))
@given(scenarios(), probe_objects())
def test_reported_failure_is_the_first_failing_filter_in_rule_order(order: str, scenario: Any, probes: Any) -> None:
    """Every node fails (the last filter fails them all), so every face reports every node;
    between checks pods come and go and nodes change, so tables and shared columns are stale
    in places and reused in others."""
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    faces = Faces(SETS[order], state)
    for step, events in enumerate(scenario.events):
        apply_events(state, events, step)
        for obj in probes:
            faces.check(obj, (obj["metadata"]["name"], step))


# --- the default profile's order ---------------------------------------------------------------


def test_a_tainted_full_node_reports_its_taint_unresolvable_and_is_not_tried_for_preemption() -> None:
    """kube-scheduler's order runs TaintToleration before NodeResourcesFit: the tainted node that
    is also out of room reports the taint (UnschedulableAndUnresolvable), so preemption tries only
    the untainted full node, where evicting the low-priority pod makes room."""
    rules = load_rules_text({"default.rules": Path(resolve_rules_path("default")).read_text()})
    room = {"cpu": "2", "memory": "4Gi", "pods": "110"}
    nodes = [
        node("tainted", {}, room, [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node("full", {}, room),
    ]
    low = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}], "priority": 0}
    running = [pod("low-t", "default", low, node_name="tainted"), pod("low-f", "default", low, node_name="full")]
    state = ClusterStore.build(nodes, running, namespaces=NAMESPACES)
    high = pod_object("high", "default", {**low, "priority": 100}, {})
    got = Faces(rules, state).check(high)
    assert got == {
        "tainted": (("node(s) had untolerated taint {dedicated: gpu}",), True),
        "full": (("Insufficient cpu",), False),
    }
    session = Session(rules)
    outcome = preempt(state.snapshot(), session, decode_pod(high, "test"))
    assert outcome.nominated == "full" and [v.name for v in outcome.victims] == ["low-f"]
    # with the full node gone too, nothing is left to try: the taint alone answers
    alone = ClusterStore.build(nodes[:1], running[:1], namespaces=NAMESPACES)
    outcome = preempt(alone.snapshot(), Session(rules), decode_pod(high, "test"))
    assert outcome.nominated is None
    assert outcome.message == f"preemption: 0/1 nodes are available: 1 {NOT_HELPFUL}."
