"""Why nodes fail, counted as columns (rulesched.engine.failures, .encoded), gives what
node by node gives: the same first failing filter per node, the same FitError histogram, the
same statuses for preemption, the same reasons row by row, and the same FailedScheduling
diagnosis read from what the walk learned as asked node by node; and the encoded evaluation of reason expressions equals the
reference interpreter's value on every node, for the shapes it handles and for those it hands
back (loops over a node's own list)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given

from rulesched import engine
from rulesched.cluster.store import ClusterStore
from rulesched.engine import (
    ColumnStore,
    KnownFailures,
    NodeColumns,
    NodeTable,
    Unsupported,
    encode,
    first_failures,
    group_reasons,
    reason_counts,
    unresolvable_rows,
)
from rulesched.lang import RuleSet
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.load import load_rules_text
from rulesched.scheduler.evaluate import failure_reasons, node_statuses
from rulesched.scheduler.explanation import explain_walk
from rulesched.scheduler.framework import Code
from tests.helpers.scenarios import NAMESPACES, SETTINGS, Scenario, apply_events, scenarios
from tests.upstream.harness import default_rules, node, pod


def check(rules: RuleSet, store: ClusterStore, probes: list[Any]) -> None:
    snapshot = store.snapshot()
    columns = ColumnStore()
    cols = columns.current(snapshot)
    nodes = snapshot.nodes
    rows = np.arange(len(nodes), dtype=np.intp)
    for p in probes:
        bound = rules.bind(p, snapshot)
        shared = columns.shared(snapshot, 1) if bound.cached else None
        failed = first_failures(bound, cols, rows, shared)
        first = {nodes[r].name: g.filter.name for g in failed for r in g.rows.tolist()}
        expected = {}
        for n in nodes:
            failure = bound.first_failure(n)
            if failure is not None:
                expected[n.name] = failure[0].name
        assert first == expected, p.key
        reasons, names = reason_counts(bound, cols, failed)
        rejected: set[str] = set()
        assert reasons == failure_reasons(bound, nodes, rejected), p.key
        assert names == rejected, p.key
        statuses = {
            nodes[r].name: Code.UNSCHEDULABLE_AND_UNRESOLVABLE if u else Code.UNSCHEDULABLE
            for g in failed
            for r, u in zip(g.rows.tolist(), unresolvable_rows(bound, cols, g).tolist(), strict=True)
        }
        assert statuses == node_statuses(bound, nodes), p.key
        kept = [group_reasons(bound, cols, g) for g in failed]
        for g, why in zip(failed, kept, strict=True):  # each row's reasons, as its node gives them
            assert [why.reasons[c] for c in why.codes.tolist()] == [g.filter.reasons(nodes[r]) for r in g.rows], p.key
        # the diagnosis from what the walk learned is the one asked node by node (codes included)
        table = NodeTable(bound, columns, 1)
        table.sync(snapshot)
        try:
            known = KnownFailures(bound, cols, failed, kept)
            none = np.zeros(0, dtype=np.intp)
            for full in (False, True):
                asked = explain_walk(table, rows[::-1], none, None, None, None, full)
                assert explain_walk(table, rows[::-1], none, None, None, None, full, known) == asked, p.key
        finally:
            table.release()
        assert engine.columns_of(bound) is not None and engine.columns_of(bound).evaluator.fallbacks.count == 0


@SETTINGS
@given(scenarios())
def test_failures_as_columns_match_node_by_node(scenario: Scenario) -> None:
    rules = default_rules()
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    for i, (p, event) in enumerate(zip(scenario.pending, scenario.events, strict=True)):
        apply_events(state, event, i)
        check(rules, state, [*scenario.probes, p])
        feasible, _ = rules.bind(p, state).feasible(state.nodes, 0, len(state.nodes))
        if feasible:
            target = feasible[scenario.places[i] % len(feasible)]
            state.finish_binding(state.assume(p, target.name).key)


REASONS = """
filter Busy:
    len(node.pods) < 2 and node.free.cpu >= pod.requests.cpu
    else (if len(node.pods) >= 2 then ["busy", "very busy"] else []) + collect("short of " + r for r in ["cpu", "memory"] where pod.requests[r] > node.free[r])
    unresolvable when node.allocatable.cpu < pod.requests.cpu

filter Named:
    node.name != "n3"
    else "not " + node.name

filter Tainted:
    len(node.taints) == 0
    else collect(t.key for t in node.taints)[0]
    unresolvable

filter Indexed:
    node.labels["tier"] != "cold"
    else ["cold", node.labels["tier"], "x"][pod.priority]
"""


def _pod(name: str, cpu: str, priority: int = 0, node_name: str = "") -> Any:
    resources = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    spec = {"priority": priority, "containers": [{"name": "c", "image": "busybox", "resources": resources}]}
    return pod(name, spec=spec, node_name=node_name)


def _cluster() -> ClusterStore:
    nodes = [
        node(
            f"n{i}",
            labels={"tier": ("hot", "warm", "cold")[i % 3]},
            allocatable={"cpu": ("1", "2", "4")[i % 3], "memory": "1Gi", "pods": "110"},
            taints=[{"key": f"t{i % 2}", "effect": "NoSchedule"}] if i % 4 == 3 else (),
        )
        for i in range(12)
    ]
    running = [_pod(f"r{i}", "500m", node_name=f"n{(i * 5) % 12}") for i in range(10)]
    return ClusterStore.build(nodes, running)


@pytest.mark.parametrize("priority", [0, 1, 2])
def test_reason_shapes_match_node_by_node(priority: int) -> None:
    rules = load_rules_text({"r.rules": REASONS})
    store = _cluster()
    probes = [_pod(f"p{i}", cpu, priority) for i, cpu in enumerate(("100m", "1500m", "3"))]
    check(rules, store, probes)


def test_encoded_values_equal_the_interpreter() -> None:
    rules = load_rules_text({"r.rules": REASONS})
    store = _cluster()
    snapshot = store.snapshot()
    cols = NodeColumns(snapshot.nodes)
    rows = np.arange(len(snapshot.nodes), dtype=np.intp)
    checked = rules.checked
    interp = Interpreter(checked.notes, checked.lets)
    handled = Counter[str]()
    for p in (_pod("p", "1500m", 1), _pod("q", "3", 2)):
        bound = rules.bind(p, snapshot)
        assert engine.columns_of(bound) is not None
        for rule in checked.rules:
            expr = rule.rule.reason
            assert expr is not None
            ctx = EvalContext(p, snapshot)
            try:
                got = encode(engine.columns_of(bound).evaluator, expr, bound.ctx, cols, rows, {})
            except Unsupported:
                continue
            handled[rule.name] += 1
            values = [got.values[c] for c in got.codes.tolist()]
            assert values == [interp.evaluate(expr, ctx, n, {}) for n in snapshot.nodes], rule.name
    assert set(handled) == {"Busy", "Named", "Indexed"}  # Tainted loops over node.taints: node by node
