"""Property: a class's NodeTable (rulesched.engine.table) answers as its binding does node by
node — same feasible nodes in the same walk order, same number looked at, same score vectors —
for any start and any number wanted, while pods come and go and nodes change between walks
(so stale rows must be found from the pod journal and node generations), whether stale rows are
evaluated node by node or as columns. And the scheduler picks the same nodes, seed for seed,
whether it walks tables (node by node or as columns) or (with ``explain``) node by node."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.lang import RuleSet
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.helpers.scenarios import (
    NAMESPACES,
    SETTINGS,
    AlwaysBind,
    Scenario,
    replay_walks,
    scenarios,
    schedule,
)


@pytest.mark.parametrize(
    ("columns_from", "chunk"), [(0, 0), (1, 0), (0, 5)], ids=["node-by-node", "columns", "small-steps"]
)
@SETTINGS
@given(scenarios(), st.lists(st.tuples(st.integers(0, 99), st.integers(1, 12)), min_size=1, max_size=4))
def test_table_walk_matches_the_node_by_node_walk(
    columns_from: int, chunk: int, scenario: Scenario, walks: list[tuple[int, int]]
) -> None:
    replay_walks(scenario, walks, columns_from, chunk)


def _placements(
    scenario: Scenario, seed: int, explain: bool, columns_from: int = 0, rules: RuleSet | None = None
) -> list[Any]:
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    settings = SchedulerSettings(seed=seed, explain=explain, engine=EngineSettings(columns_from=columns_from))
    return [(r.pod.key, r.code, r.node, r.message) for r in schedule(scenario, state, settings, rules)]


@SETTINGS
@given(scenarios(), st.integers(0, 2**16))
def test_tables_and_node_by_node_place_alike(scenario: Scenario, seed: int) -> None:
    by_node = _placements(scenario, seed, explain=True)
    assert _placements(scenario, seed, explain=False) == by_node
    assert _placements(scenario, seed, explain=False, columns_from=1) == by_node


def _per_pod_rules() -> RuleSet:
    """The default rules and a score that reads the pod's name: every pod is its own class."""
    from rulesched.lang.frontend.check import check
    from rulesched.lang.frontend.parse import parse_source
    from rulesched.lang.frontend.source import Source

    text = (
        'extends "default"\nscore named weight 1:\n    if endswith(node.name, pod.name) then 10 else len(node.pods)\n'
    )
    tree, problems = parse_source(Source("named.rules", text))
    assert problems == []
    return RuleSet(check([tree]))


@SETTINGS
@given(scenarios(), st.integers(0, 2**16))
def test_pods_of_their_own_class_place_alike(scenario: Scenario, seed: int) -> None:
    rules = _per_pod_rules()
    assert rules.class_key(scenario.pending[0]) is None if scenario.pending else True
    by_node = _placements(scenario, seed, explain=True, rules=rules)
    assert _placements(scenario, seed, explain=False, rules=rules) == by_node
    assert _placements(scenario, seed, explain=False, columns_from=1, rules=rules) == by_node


def test_scores_beyond_int64_fall_back_to_python_ints(tmp_path: Any) -> None:
    """A score too big for the table's int64 arrays: the cycle starts over node by node, from the
    same start, and places as the node-by-node path does (here: on the node with most pods)."""
    from rulesched.lang import load_rules
    from tests.upstream.harness import node, pod

    path = tmp_path / "big.rules"
    path.write_text('extends "default"\nscore crowd weight 1:\n    len(node.pods) * 100000000000000000000000\n')
    placements = []
    for explain in (False, True):
        state = ClusterStore.build(
            [node(f"n{i}") for i in range(4)], [pod(f"r{i}", node_name=f"n{min(i, 2)}") for i in range(4)]
        )
        scheduler = Scheduler(
            load_rules([path]),
            state,
            SchedulerSettings(seed=3, explain=explain, engine=EngineSettings(columns_from=1)),
            AlwaysBind(),
        )
        for i in range(3):
            scheduler.add(pod(f"p{i}"))
        placed = [scheduler.schedule_one() for _ in range(3)]
        placements.append([(r.pod.key, r.code, r.node) for r in placed if r is not None])
    assert placements[0] == placements[1]
    assert [node_name for _, _, node_name in placements[0]] == ["n2", "n2", "n2"]


@pytest.mark.parametrize("columns_from", [0, 1], ids=["node-by-node", "columns"])
def test_score_vectors_widen_as_scores_grow(tmp_path: Any, columns_from: int) -> None:
    """A table keeps score vectors in int16 while they fit: scores that outgrow it (a bind at a
    time, so through the rows re-scored after each) widen the kept type, to int32 then int64,
    and every vector stays what the binding computes node by node."""
    import numpy as np

    from rulesched.engine import ColumnStore, NodeTable
    from rulesched.lang import load_rules
    from tests.upstream.harness import node, pod

    path = tmp_path / "grow.rules"
    path.write_text('extends "default"\nscore crowd weight 1:\n    len(node.pods) * len(node.pods) * 20000\n')
    rules = load_rules([path])
    state = ClusterStore.build([node(f"n{i}") for i in range(3)], [])
    store = ColumnStore()
    table = None
    kinds = []
    for i in range(5):  # 0, 20 000, 80 000, ... 320 000 on n0; int16 holds the first two only
        snapshot = state.snapshot()
        bound = rules.bind(pod("p"), snapshot)
        if table is None or table.bound is not bound:
            table = NodeTable(bound, store, columns_from)
        table.sync(snapshot)
        rows = np.arange(3, dtype=np.intp)
        bound.ctx.feasible = list(snapshot.nodes)
        assert [tuple(v) for v in table.vectors(rows).tolist()] == [bound.score_vector(n) for n in snapshot.nodes]
        kinds.append(table._scores.vectors.dtype)
        table.release()
        state.finish_binding(state.assume(pod(f"r{i}"), "n0").key)
    assert kinds[0] == np.int16 and kinds[-1] in (np.int32, np.int64)
