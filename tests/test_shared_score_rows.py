"""Score vectors shared between classes (rulesched.engine.score_rows): what keys them, and that a
class reading another's rows scores every node as its own binding does, node by node.

FGD's scores read a pod's cpu request and its claims (through ``devices_after``), not its memory,
which the filters read: classes apart for the filters share one score key. Two pods differing in
anything a score reads must not: the property replays GPU pods of several shapes, each shape with
several cpu requests and memory sizes, through `simulate` and checks every score vector a walk
reads against a binding of the pod made afresh, evaluated node by node.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.engine import NodeTable, RuleShare, rule_share
from rulesched.engine.batch import columns_of, plan_of
from rulesched.lang import load_rules_text
from rulesched.lang.context import new_index_store
from rulesched.lang.load import load_rules

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from openb import MILLI, GpuNode, TracePod  # noqa: E402

from tests.helpers.gpu_replay import gpu_nodes, replay  # noqa: E402

FGD = Path(__file__).resolve().parent.parent / "rules" / "gpu-fragmentation.rules"


def test_fgd_scores_are_keyed_by_the_cpu_request_and_the_claims() -> None:
    rules = load_rules([FGD])
    notes, lets = rules.checked.notes, rules.checked.lets
    for r in rules.scores:
        assert rule_share(r.checked.rule.body, notes, lets) == RuleShare(
            ("namespace", "resource_claims"), True, frozenset({"devices_after"}), (("requests", "cpu"),)
        ), r.name


def test_map_entries_read_by_constant_keys_key_alone() -> None:
    rules = load_rules_text(
        {
            "r.rules": "score a:\n    number(pod.requests.cpu + node.free.cpu)\n"
            'score b:\n    if pod.labels["app"] == "x" then 1 else 0\n'
            "score c:\n    number(pod.requests.cpu) + len(pod.requests)\n"
            'score d:\n    if pod.labels[pod.namespace] == "" then 1 else 0\n'
        }
    )
    notes, lets = rules.checked.notes, rules.checked.lets
    got = {r.name: rule_share(r.checked.rule.body, notes, lets) for r in rules.scores}
    assert got["a"] == RuleShare((), True, frozenset(), (("requests", "cpu"),))
    assert got["b"] == RuleShare((), False, frozenset(), (("labels", "app"),))
    assert got["c"] == RuleShare(("requests",), False)  # (read whole too: keyed by all of it)
    assert got["d"] == RuleShare(("labels", "namespace"), False)  # (a key that is not constant)


def test_devices_after_is_not_shared_where_device_scores_read_the_pod() -> None:
    """An allocation is a function of the claims and the node only while the device scores
    ranking the candidates read the device alone."""
    text = FGD.read_text()
    alike = load_rules_text({"a.rules": text})
    assert {id(r) for r in alike.scores} <= set(plan_of(alike)._shares)
    per_pod = text.replace(
        '1000 - number(device.free["milli"])', 'number(pod.requests.memory) - number(device.free["milli"])'
    )
    assert per_pod != text
    rules = load_rules_text({"a.rules": per_pod})
    assert not rules.ranks_devices_alike
    assert not {id(r) for r in rules.scores} & set(plan_of(rules)._shares)


@st.composite
def gpu_pods(draw: st.DrawFn) -> list[TracePod]:
    """Pods of a few GPU shapes, each asked with two cpu requests and two memory sizes: classes
    alike in their claims but not their cpu (scores differ), and alike but for memory (scores
    shared)."""
    shapes = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just(0), st.just(0), st.just(())),
                st.tuples(st.just(1), st.sampled_from([250, 470, 500, 810]), st.sampled_from([(), ("T4",)])),
                st.tuples(st.sampled_from([1, 2]), st.just(MILLI), st.just(())),
            ),
            min_size=1,
            max_size=3,
        )
    )
    cpus = draw(st.lists(st.sampled_from([1000, 4000, 12000, 30000]), min_size=2, max_size=2, unique=True))
    picks = draw(
        st.lists(
            st.tuples(st.integers(0, len(shapes) - 1), st.integers(0, 1), st.sampled_from([1024, 120_000])),
            min_size=5,
            max_size=30,
        )
    )
    return [TracePod(f"p{i:03}", cpus[c], memory, *shapes[s]) for i, (s, c, memory) in enumerate(picks)]


def _checking(vectors: Any, seen: list[int]) -> Any:
    """NodeTable.vectors, each answer checked against the pod bound afresh (uncached, its own
    index store), node by node."""

    def checked(table: NodeTable, rows: Any) -> Any:
        out = vectors(table, rows)
        bound = table.bound
        fresh = bound.rule_set.bind_new(bound.ctx.pod, bound.ctx.cluster, new_index_store(), cache=False)
        expected = [fresh.score_vector(table.node(r)) for r in rows.tolist()]
        assert [tuple(v) for v in out.tolist()] == expected
        bodies = columns_of(bound)
        seen.append(bodies is not None and bool(bodies.score_shares) and None not in bodies.score_shares)
        return out

    return checked


@pytest.mark.parametrize("columns_from", [0, 1])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(gpu_nodes(), gpu_pods(), st.integers(0, 2**16))
def test_shared_score_rows_equal_each_pods_own_scores(
    columns_from: int, nodes: list[GpuNode], pods: list[TracePod], seed: int
) -> None:
    seen: list[int] = []
    init = NodeTable.__init__

    def init_with(self: NodeTable, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if columns_from:  # (as columns from one stale row: the shared per-rule columns too)
            self._columns_from = columns_from

    with (
        mock.patch.object(NodeTable, "vectors", _checking(NodeTable.vectors, seen)),
        mock.patch.object(NodeTable, "__init__", init_with),
    ):
        replay(nodes, pods, seed, explain=False)
    assert all(seen)


def test_classes_alike_but_for_memory_share_score_rows() -> None:
    """Two classes (memory apart) read one set of score rows; a third (cpu apart) its own."""
    nodes = [GpuNode("a", 32_000, 262_144, 2, "T4"), GpuNode("b", 64_000, 262_144, 4, "A100")]
    pods = [
        TracePod("p0", 4000, 1024, 1, 500, ()),
        TracePod("p1", 4000, 120_000, 1, 500, ()),
        TracePod("p2", 8000, 1024, 1, 500, ()),
    ]
    kept: list[Any] = []
    vectors = NodeTable.vectors

    def keeping(table: NodeTable, rows: Any) -> Any:
        kept.append(table._scores)
        return vectors(table, rows)

    with mock.patch.object(NodeTable, "vectors", keeping):
        replay(nodes, pods, 1, explain=False)
    assert len(kept) == 3
    assert kept[0] is kept[1]
    assert kept[2] is not kept[0]
