"""A scheduling cycle's deadline and the rule it names (rulesched.lang.evaluation.watch,
rulesched.scheduler.cancel): evaluation checks between rules and every few nodes, a costly rule
before each evaluation; past the deadline the cycle is given up, its pod retried with backoff and
an error naming the rule being evaluated; a reload gives the cycle under way up and its pod is
retried at once with the new rules.

Expensive rules come from sets checked with the cost limits lifted (the checker refuses them).
Clocks here move one tick per read, so a deadline N ticks away passes at the Nth check and a test
decides where a cycle stops without waiting for it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rulesched import engine
from rulesched.cli import _parser
from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.errors import ConfigError
from rulesched.lang import RulesHandle
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.bound import BoundFilter, BoundRules, BoundScore
from rulesched.lang.evaluation.watch import CHECK_EVERY, RuleWatch
from rulesched.model import Pod
from rulesched.run.cli import settings_from
from rulesched.run.settings import RunSettings
from rulesched.scheduler.cancel import Cancellation
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.preemption import preempt
from rulesched.scheduler.scheduler import Scheduler
from tests.helpers.deadline import HEAVY, lifted
from tests.helpers.scheduling import Clock, Later, Recording, Seen, Ticks, cluster, cpu, requeued
from tests.upstream.harness import default_rules, node, pod

# Four nested loops over the node's label keys: L^4 steps on a node of L labels (a few ms at 10).


class Stop(Exception):
    pass


class Counted:
    """A check that raises at its ``at``-th call, and a node function counting its calls."""

    def __init__(self, at: int) -> None:
        self.at, self.checks, self.evaluations = at, 0, 0

    def check(self) -> None:
        self.checks += 1
        if self.checks >= self.at:
            raise Stop

    def passes(self, node: Any) -> bool:
        self.evaluations += 1
        return False

    def score(self, node: Any) -> int:
        self.evaluations += 1
        return 1


def by_hand(counted: Counted) -> tuple[BoundRules, RuleWatch]:
    watch = RuleWatch()
    watch.arm(counted.check)
    slow = BoundFilter("slow", passes=counted.passes, reasons=lambda n: ("slow",))
    filters = (BoundFilter("first", passes=lambda n: True), slow)
    scores = (BoundScore("slow_score", 1, "none", score=counted.score),)
    return BoundRules(EvalContext(pod("p")), filters, scores, (), watch=watch), watch


NODES = [SimpleNamespace(name=f"n{i}", generation=1, pods=()) for i in range(200)]


def test_node_by_node_loops_check_every_few_nodes_and_name_the_rule() -> None:
    counted = Counted(at=3)
    bound, watch = by_hand(counted)
    with pytest.raises(Stop):
        bound.feasible(NODES, 0, len(NODES))
    # stopped at the third check: at most CHECK_EVERY nodes evaluated between two checks
    assert 2 * CHECK_EVERY <= counted.evaluations <= 3 * CHECK_EVERY
    assert watch.rule == "slow"
    # rules as columns' fallback, node by node, and every score of each node in turn: the same
    # (a score evaluated node by node names itself only when costly: see the next test)
    for call, rule in (
        (lambda: engine.filter_mask(bound, SimpleNamespace(nodes=NODES), _rows(len(NODES))), "slow"),
        (lambda: engine.score_matrix(bound, SimpleNamespace(nodes=NODES), _rows(len(NODES))), "slow_score"),
        (lambda: bound.score_vectors(NODES), ""),
    ):
        counted.checks = counted.evaluations = 0
        watch.rule = ""
        with pytest.raises(Stop):
            call()
        assert counted.evaluations <= 3 * CHECK_EVERY, call
        assert watch.rule == rule
    # disarmed: nothing checks
    watch.disarm()
    counted.checks = 0
    assert bound.feasible(NODES, 0, len(NODES)) == ([], len(NODES))
    assert counted.checks == 0


def _rows(n: int) -> Any:
    import numpy as np

    return np.arange(n, dtype=np.intp)


def test_a_costly_rule_checks_before_each_evaluation_and_cheap_ones_do_not() -> None:
    rules = lifted(HEAVY)
    store = ClusterStore()
    labelled(store, 3, 4)
    snapshot = store.snapshot()
    session = rules.session()
    counted = Counted(at=10**9)
    session.watch.arm(counted.check)
    try:
        heavy = session.bind_private(pod("h", labels={"cost": "high"}), snapshot, {})
        cheap = session.bind_private(pod("c"), snapshot, {})
        assert [f.name for f in heavy.filters][-1] == "heavy" and "heavy" not in [f.name for f in cheap.filters]
        for info in snapshot.nodes:
            assert cheap.first_failure(info) is None
        assert counted.checks == 0  # the default profile's rules: checked by the loops, not per call
        for info in snapshot.nodes:
            assert heavy.first_failure(info) is None
        assert counted.checks == len(snapshot.nodes)  # one before each evaluation of 'heavy'
        assert session.watch.rule == "heavy"
    finally:
        session.watch.disarm()


# --- the scheduler ------------------------------------------------------------------------------


class Failures(Seen):
    def __init__(self) -> None:
        super().__init__()
        self.failed: list[tuple[str, str]] = []

    def cycle_failed(self, pod: Pod, message: str, seconds: float) -> None:
        self.failed.append((pod.key, message))


def labelled(store: ClusterStore, nodes: int, labels: int) -> None:
    for i in range(nodes):
        store.add_node(
            node(
                f"n{i:03}",
                labels={f"l{j}": str(i) for j in range(labels)},
                allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"},
            )
        )


def test_past_its_deadline_a_cycle_names_the_rule_and_its_pod_is_retried_with_backoff() -> None:
    store, ticks, clock = ClusterStore(assumed_ttl=30.0), Ticks(), Clock()
    labelled(store, 40, 3)
    rules = lifted(HEAVY)
    seen, binder = Failures(), Later()
    settings = SchedulerSettings(
        percentage_of_nodes_to_score=100, cycle_deadline_seconds=30, engine=EngineSettings(walk_chunk=50)
    )
    scheduler = Scheduler(
        rules,
        store,
        settings,
        binder,
        evictor=Recording(),
        clock=clock,
        observer=seen,
        cancel=Cancellation(clock=ticks),
    )
    scheduler.add(pod("slow", spec=cpu("1", priority=10), labels={"cost": "high"}))
    scheduler.add(pod("cheap", spec=cpu("1")))
    assert scheduler.schedule_one() is None  # 'slow' (higher priority) first: given up
    assert seen.failed == [
        (
            "default/slow",
            f"scheduling cycle exceeded its 30s deadline while evaluating rule 'heavy' (rules {rules.digest})",
        )
    ]
    assert requeued(scheduler, "default/slow") and binder.calls == [] and not store.is_assumed("default/slow")
    assert scheduler.cancel.deadline is None  # (each cycle sets its own)
    result = scheduler.schedule_one()  # the cheap pod behind it is scheduled
    assert result is not None and result.code is Code.SCHEDULED and result.pod.key == "default/cheap"
    assert [key for key, _ in binder.calls] == ["default/cheap"]
    # without a deadline the same pod is scheduled
    unlimited = Scheduler(rules, store, SchedulerSettings(), Later(), clock=clock, cancel=Cancellation(clock=ticks))
    unlimited.add(pod("slow", spec=cpu("1"), labels={"cost": "high"}))
    again = unlimited.schedule_one()
    assert again is not None and again.code is Code.SCHEDULED


def test_a_reload_gives_the_cycle_under_way_up_and_the_pod_is_retried_at_once() -> None:
    store, clock = cluster(100), Clock()
    old, new = lifted(HEAVY), default_rules()
    handle = RulesHandle(old)

    class SwapAt(Ticks):  # the reloader's swap, from the clock, in the middle of the walk
        def __call__(self) -> float:
            now = super().__call__()
            if self.reads == 12:
                handle.swap(new)
            return now

    seen = Failures()
    settings = SchedulerSettings(
        percentage_of_nodes_to_score=100, cycle_deadline_seconds=10**6, engine=EngineSettings(walk_chunk=10)
    )
    scheduler = Scheduler(
        handle, store, settings, Later(), clock=clock, observer=seen, cancel=Cancellation(clock=SwapAt())
    )
    scheduler.add(pod("a", spec=cpu("1"), labels={"cost": "high"}))
    assert scheduler.schedule_one() is None
    assert seen.failed == [] and seen.events == []  # no error: nothing reported
    assert not requeued(scheduler, "default/a")  # not backing off: ready at once
    result = scheduler.schedule_one()
    assert result is not None and result.code is Code.SCHEDULED and scheduler.cycle_rules == new.digest


def test_preemption_checks_every_few_nodes_and_names_the_preempt_rule() -> None:
    store = cluster(200, cpus="1")
    for i in range(200):
        store.add_pod(pod(f"low{i}", spec=cpu("1", priority=0), node_name=f"n{i:03}"))
    rules = lifted('override preempt DefaultPreemption: victim.labels["evictable"] == "yes"\n')
    snapshot, session, high = store.snapshot(), rules.session(), pod("high", spec=cpu("1", priority=100))
    statuses = {info.name: Code.UNSCHEDULABLE for info in snapshot.nodes}
    counted = Counted(at=10**9)
    session.watch.arm(counted.check)
    try:
        outcome = preempt(snapshot, session, high, statuses)  # no pod may go: no dry run
        assert outcome.nominated is None
        assert counted.checks == 200 // CHECK_EVERY  # the preempt rule over each node's pods: every few nodes
        counted.checks, counted.at = 0, 5
        with pytest.raises(Stop):
            preempt(snapshot, session, high, statuses)
        assert session.watch.rule == "DefaultPreemption"
    finally:
        session.watch.disarm()
    # In a cycle: past its deadline in preemption, the cycle is given up and names the rule.
    ticks, clock, seen, evictor = Ticks(), Clock(), Failures(), Recording()
    settings = SchedulerSettings(percentage_of_nodes_to_score=100, engine=EngineSettings(walk_chunk=50))
    cancel = Cancellation(clock=ticks)
    scheduler = Scheduler(rules, store, settings, Later(), evictor=evictor, clock=clock, observer=seen, cancel=cancel)
    scheduler.add(high)
    cancel.limit(10**6)  # a deadline never reached: count the checks of a whole cycle
    result = scheduler.schedule_one()
    assert result is not None and result.preemption is not None and result.preemption.nominated is None
    assert ticks.reads < 200  # fewer checks than nodes: per step, per rule over a batch, every few nodes
    # The same cycle twice more (answers cached now): count its checks, then give it up 3 reads
    # before its end, in preemption's walk over the nodes (the cycle's own last check follows).
    whole = 0
    for deadline in (10**6, None):
        scheduler.queue.move()
        clock.now += 60
        ticks.reads = 0
        cancel.limit(deadline if deadline is not None else whole - 3)
        scheduler.schedule_one()
        whole = whole or ticks.reads
    assert ticks.reads == whole - 2
    assert seen.failed and "while evaluating rule 'DefaultPreemption'" in seen.failed[-1][1]
    assert evictor.evicted == [] and scheduler.nominator.node_of("default/high") is None


# --- settings -----------------------------------------------------------------------------------


def test_the_deadline_is_a_flag_and_a_config_setting(tmp_path: Path) -> None:
    def parse(*argv: str) -> RunSettings:
        settings: RunSettings = settings_from(_parser().parse_args(["run", *argv]))
        return settings

    assert parse().cycle_deadline == 5.0
    assert parse("--cycle-deadline", "250ms").cycle_deadline == 0.25
    config = tmp_path / "config.yaml"
    config.write_text("cycle_deadline: 2\n")
    assert parse("--config", str(config)).cycle_deadline == 2.0
    assert parse("--config", str(config), "--cycle-deadline", "0").cycle_deadline == 0  # 0: none (the flag wins)
    for bad in ("-1", "soon"):
        config.write_text(f"cycle_deadline: {bad}\n")
        with pytest.raises(ConfigError, match="cycle_deadline"):
            parse("--config", str(config))
