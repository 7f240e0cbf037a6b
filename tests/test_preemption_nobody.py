"""Preemption's static check (``preemption._nobody_to_evict``): when the preempt rules read the
victim only through its priority and refuse every priority the cluster's pods have (a replay
whose pods share one priority), preempt answers without a private binding or a dry run, and
answers exactly as the full search does: the same message (every potential node "No preemption
victims found", the others "not helpful"), no nomination, and the seeded source moved on alike.
A generated cluster of mixed priorities holds the check to the search; a check that fired while
some pod were a victim, counted the nodes otherwise or skipped the offset's draw fails it."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.engine import ColumnStore
from rulesched.lang import load_rules_text
from rulesched.scheduler import preemption
from rulesched.scheduler.evaluate import NodeStatuses, node_statuses
from rulesched.scheduler.framework import Code
from rulesched.scheduler.nominator import Reserved
from tests.upstream.harness import default_rules, node, pod, state

ALLOC = {"cpu": "2", "memory": "8Gi", "pods": "110"}


def _pod(name: str, priority: int, cpu: str, node_name: str = "") -> Any:
    spec = {"priority": priority, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    return pod(name, spec=spec, node_name=node_name)


def _preempt(
    cluster: Any, rules: Any, preemptor: Any, check: bool, as_array: bool, reserved: Reserved | None, seed: int
) -> tuple[Any, float]:
    snapshot = cluster.snapshot()
    bound = rules.bind(preemptor, snapshot)
    statuses: Any = node_statuses(bound, snapshot.nodes)
    if as_array:  # (as the cycle hands them over: an array over the nodes)
        codes = [
            0 if n.name not in statuses else 1 + (statuses[n.name] is not Code.UNSCHEDULABLE) for n in snapshot.nodes
        ]
        rows = {n.name: i for i, n in enumerate(snapshot.nodes)}
        statuses = NodeStatuses(np.array(codes, dtype=np.int8), snapshot.nodes, rows)
    columns = ColumnStore().current(snapshot)
    rng = random.Random(seed)
    found = preemption.preempt(
        snapshot, rules.session(), preemptor, statuses, reserved, columns, rng=rng, cycle_bound=bound if check else None
    )
    return found, rng.random()


def _same(a: Any, b: Any) -> None:
    (left, after_left), (right, after_right) = a, b
    assert left.nominated == right.nominated
    assert [v.key for v in left.victims] == [v.key for v in right.victims]
    assert (left.message, left.eligible, left.pdb_violations) == (right.message, right.eligible, right.pdb_violations)
    assert after_left == after_right  # (the seeded source drawn alike: later preemptions start alike)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.sampled_from([0, 5, 10]), max_size=2), min_size=1, max_size=6),
    st.sampled_from([0, 5, 10]),
    st.sampled_from(["1", "2", "3"]),
    st.booleans(),
    st.booleans(),
    st.integers(0, 1000),
)
def test_the_check_answers_as_the_search(
    layout: list[list[int]], priority: int, cpu: str, as_array: bool, held: bool, seed: int
) -> None:
    """Nodes of 2 CPUs holding 1-CPU pods of mixed priorities, a preemptor of some priority and
    size (3 CPUs fits nowhere even with every pod gone: "not helpful" nodes): with the check
    and without it, the same answer."""
    nodes = [node(f"n{i}", allocatable=ALLOC) for i in range(len(layout))]
    pods = [_pod(f"p{i}-{k}", p, "1", f"n{i}") for i, ps in enumerate(layout) for k, p in enumerate(ps)]
    cluster = state(nodes, pods)
    preemptor = _pod("high", priority, cpu)
    reserved = Reserved({"n0": (_pod("nominated", 10, "1", "n0"),)}) if held else None
    rules = default_rules()
    _same(
        _preempt(cluster, rules, preemptor, True, as_array, reserved, seed),
        _preempt(cluster, rules, preemptor, False, as_array, reserved, seed),
    )


def test_one_priority_is_answered_without_a_private_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every pod of priority 0, the preemptor too: nobody to evict, known from the rules and
    the priorities alone (the private binding the dry runs need is never made)."""
    nodes = [node(f"n{i}", allocatable=ALLOC) for i in range(4)]
    cluster = state(nodes, [_pod(f"p{i}", 0, "2", f"n{i}") for i in range(4)])
    rules = default_rules()
    full = _preempt(cluster, rules, _pod("late", 0, "1"), False, True, None, 3)
    monkeypatch.setattr(type(rules.session()), "bind_private", _refuse)
    quick = _preempt(cluster, rules, _pod("late", 0, "1"), True, True, None, 3)
    _same(quick, full)
    assert quick[0].message == "preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."


def test_a_lower_priority_pod_anywhere_means_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """One pod of a lower priority, on the last node: the check must not answer (the search
    finds that node and its victim)."""
    nodes = [node(f"n{i}", allocatable=ALLOC) for i in range(4)]
    pods = [_pod(f"p{i}", 5, "2", f"n{i}") for i in range(3)] + [_pod("low", 0, "2", "n3")]
    cluster = state(nodes, pods)
    found, _ = _preempt(cluster, default_rules(), _pod("mid", 5, "1"), True, True, None, 3)
    assert found.nominated == "n3" and [v.name for v in found.victims] == ["low"]


def test_rules_reading_the_node_mean_the_search() -> None:
    """A preempt rule that reads the node (not one answer per priority): the check stands
    aside, whatever the priorities."""
    text = 'preempt SpotOnly:\n    node.labels["spot"] == "true" and victim.priority < pod.priority\n'
    rules = load_rules_text({"spot.rules": text})
    assert not all(r.by_priority for r in rules.bind(_pod("x", 5, "1"), state([node("n0")]).snapshot()).preempts)
    nodes = [node("n0", labels={"spot": "true"}, allocatable=ALLOC)]
    cluster = state(nodes, [_pod("low", 0, "2", "n0")])
    snapshot = cluster.snapshot()
    bound = rules.bind(_pod("mid", 5, "1"), snapshot)
    statuses = node_statuses(bound, snapshot.nodes)
    nobody = preemption._nobody_to_evict(
        snapshot, _pod("mid", 5, "1"), bound, rules.node_memos, ColumnStore().current(snapshot), statuses, None, None
    )
    assert nobody is None


def _refuse(*_: Any, **__: Any) -> Any:
    raise AssertionError("a private binding was made")
