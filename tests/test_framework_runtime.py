"""The framework's verbs (filter, score, preempt) over given nodes, and its caches' reset when the
rules handle announces a new set (rulesched.scheduler.runtime)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from rulesched.cluster.snapshot import ClusterOverlay
from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, RulesHandle
from rulesched.lang.frontend.files import check_texts
from rulesched.lang.indexes import ForkedIndexes
from rulesched.scheduler.framework import Code, SchedulerSettings, Status
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.scheduler import Scheduler
from tests.helpers.scheduling import Later
from tests.upstream.harness import node, pod

RULES = """
filter ready:
    not node.unschedulable
    else "node(s) were unschedulable"
    unresolvable

filter room:
    len(node.pods) < 1
    else "node is taken"

filter zone_a:
    node.labels["zone"] == "a"
    else "not in zone a"

score big weight 2 normalize max:
    number(node.allocatable["cpu"])

score flat:
    7
"""

ZONE_B = """
filter zone_b:
    node.labels["zone"] == "b"
    else "not in zone b"
"""

READY = Status("ready", ("node(s) were unschedulable",), True)
ROOM = Status("room", ("node is taken",))
ZONE_A = Status("zone_a", ("not in zone a",))


def compiled(text: str) -> RuleSet:
    checked = check_texts({"t.rules": text}).checked
    assert checked.ok, [d.render() for d in checked.diagnostics]
    return RuleSet(checked)


def cluster() -> ClusterStore:
    """n1 fits; n2 is in zone b; n3 is cordoned in zone b; n4 holds a pod; n5 holds one in zone b."""
    store = ClusterStore()
    for name, zone, size, cordoned in (
        ("n1", "a", "10", False),
        ("n2", "b", "20", False),
        ("n3", "b", "30", True),
        ("n4", "a", "40", False),
        ("n5", "b", "50", False),
    ):
        allocatable = {"cpu": size, "memory": "16Gi", "pods": "110"}
        store.add_node(node(name, labels={"zone": zone}, allocatable=allocatable, unschedulable=cordoned))
    store.upsert_pod(pod("held4", node_name="n4"))
    store.upsert_pod(pod("held5", node_name="n5"))
    return store


@pytest.mark.parametrize(
    ("names", "all_failing", "passing", "failed", "every"),
    [
        (["n1"], False, ["n1"], {}, None),
        (["n2"], False, [], {"n2": ZONE_A}, None),
        (["n3"], False, [], {"n3": READY}, None),  # first failing in rule order: unresolvable
        (["n5", "n1", "n4"], False, ["n1"], {"n5": ROOM, "n4": ROOM}, None),
        (["n1", "n2", "n3", "n4", "n5"], False, ["n1"], {"n2": ZONE_A, "n3": READY, "n4": ROOM, "n5": ROOM}, None),
        (
            ["n1", "n2", "n3", "n4", "n5"],
            True,
            ["n1"],
            {"n2": ZONE_A, "n3": READY, "n4": ROOM, "n5": ROOM},
            {"n2": (ZONE_A,), "n3": (READY, ZONE_A), "n4": (ROOM,), "n5": (ROOM, ZONE_A)},
        ),
        (["n1"], True, ["n1"], {}, {}),
    ],
)
def test_filter_gives_every_nodes_verdict(
    names: list[str],
    all_failing: bool,
    passing: list[str],
    failed: dict[str, Status],
    every: dict[str, tuple[Status, ...]] | None,
) -> None:
    store, framework = cluster(), Framework()
    snapshot = store.snapshot()
    bound = compiled(RULES).session().bind(pod("p"), snapshot)
    try:
        rows = framework.rows_of(snapshot, names)
        verdicts = framework.filter(bound, snapshot, rows, all_failing=all_failing)
        assert [snapshot.nodes[r].name for r in verdicts.passing.tolist()] == passing
        assert verdicts.failed == failed
        assert verdicts.every == every
    finally:
        bound.release()
    assert READY.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE and ZONE_A.code is Code.UNSCHEDULABLE


@pytest.mark.parametrize(
    ("names", "totals", "big", "flat"),
    [
        (["n1", "n2"], [2 * 50 + 7, 2 * 100 + 7], [50, 100], [7, 7]),  # normalised over these two
        (["n2", "n4", "n1"], [2 * 50 + 7, 2 * 100 + 7, 2 * 25 + 7], [50, 100, 25], [7, 7, 7]),
        (["n5"], [2 * 100 + 7], [100], [7]),
        ([], [], [], []),
    ],
)
def test_score_gives_per_rule_values_and_totals(
    names: list[str], totals: list[int], big: list[int], flat: list[int]
) -> None:
    store, framework = cluster(), Framework()
    snapshot = store.snapshot()
    bound = compiled(RULES).session().bind(pod("p"), snapshot)
    try:
        rows = framework.rows_of(snapshot, names)
        scores = framework.score(bound, snapshot, rows, per_rule=True)
        assert scores.per_rule is not None
        assert [int(v) for v in scores.totals] == totals
        assert [int(v) for v in scores.per_rule["big"]] == big
        assert [int(v) for v in scores.per_rule["flat"]] == flat
        assert np.array_equal(framework.score(bound, snapshot, rows).totals, scores.totals)
    finally:
        bound.release()


@pytest.mark.parametrize(
    ("name", "victims", "expected"),
    [
        ("n4", ["held4"], None),  # its pod gone, the pod fits
        ("n5", ["held5"], ZONE_A),  # still in the wrong zone
        ("n4", [], ROOM),  # nothing evicted: still taken
        ("n3", [], READY),
    ],
)
def test_preempt_dry_runs_on_the_overlay(name: str, victims: list[str], expected: Status | None) -> None:
    store = cluster()
    snapshot = store.snapshot()
    overlay = ClusterOverlay(snapshot)
    session = compiled(RULES).session()
    bound = session.bind_private(pod("p"), overlay, ForkedIndexes(session.indexes, snapshot))
    info = overlay.node_view(name)
    assert info is not None
    on_node = {p.name: p for p in info.pods}
    try:
        assert Framework.preempt(overlay, bound, name, [on_node[v] for v in victims]) == expected
        after = overlay.node_view(name)
        assert after is not None and sorted(p.name for p in after.pods) == sorted(on_node)  # put back
    finally:
        bound.release()


def test_a_swap_resets_the_tables_and_no_verdict_is_stale() -> None:
    store, framework = cluster(), Framework()
    handle = RulesHandle(compiled(RULES))
    framework.follow(handle)
    snapshot = store.snapshot()
    rows = framework.rows_of(snapshot, ["n1", "n2"])

    def verdicts() -> dict[str, Status]:
        bound = handle.rules.session().bind(pod("p"), snapshot)
        try:
            return framework.filter(bound, snapshot, rows).failed
        finally:
            bound.release()

    assert verdicts() == {"n2": ZONE_A}
    assert len(framework.tables) == 1 and framework.resets == 0
    handle.swap(handle.rules)  # the same set: nothing to drop
    assert verdicts() == {"n2": ZONE_A} and framework.resets == 0
    handle.swap(compiled(ZONE_B))  # told on the swapping thread; dropped at the next use
    assert len(framework.tables) == 1
    assert verdicts() == {"n1": Status("zone_b", ("not in zone b",))}
    assert framework.resets == 1 and len(framework.tables) == 1  # only the new set's table


def test_the_handle_holds_its_subscribers_weakly() -> None:
    handle = RulesHandle(compiled(RULES))
    framework = Framework()
    framework.follow(handle)
    del framework
    gc.collect()
    handle.swap(compiled(ZONE_B))  # (a dead subscriber is skipped)


def test_a_scheduler_reload_drops_the_profiles_tables() -> None:
    """The scheduler's cycle follows its handle: after a swap the next cycle walks a new table
    under the new rules, the old class's table gone with the old set."""
    store = cluster()
    handle = RulesHandle(compiled(RULES))
    binder = Later()
    scheduler = Scheduler(handle, store, SchedulerSettings(), binder)
    scheduler.add(pod("a"))
    result = scheduler.schedule_one()
    assert result is not None and result.node == "n1"
    (old,) = scheduler.cycle.framework.tables.values()
    handle.swap(compiled(ZONE_B))
    scheduler.add(pod("b"))
    result = scheduler.schedule_one()
    assert result is not None and result.node == "n2"
    (new,) = scheduler.cycle.framework.tables.values()
    assert new is not old and scheduler.cycle.framework.resets == 1
    assert [(b.pod.key, b.node, b.rules) for b in binder.bindings] == [
        ("default/a", "n1", compiled(RULES).digest),
        ("default/b", "n2", compiled(ZONE_B).digest),
    ]


def test_priority_classes_are_the_stores() -> None:
    """The informer cache writes PriorityClasses into the store, and pods decoded from then on
    resolve their priority there (the extender decodes its requests' pods with the same)."""
    import threading

    from rulesched.kube.informer import Delta
    from rulesched.mirror import Mirror

    store = ClusterStore()
    mirror = Mirror(None, store, lambda delta: None, threading.Event(), resources=())  # type: ignore[arg-type]
    high = {"metadata": {"name": "high"}, "value": 1000}
    mirror.apply(Delta("PriorityClass", "ADDED", high))
    assert store.priority_classes["high"].value == 1000
    pending = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"priorityClassName": "high"}}
    assert mirror.decode_pod(pending, "test").priority == 1000
    mirror.apply(Delta("PriorityClass", "DELETED", high))
    assert "high" not in store.priority_classes
