"""Score vectors shared between nodes alike in what the scores read (rulesched.engine.alike):
what keys a node, which rules may be keyed so, and that a row read from a node alike is the
vector the pod's own binding gives that node, node by node.

The property replays GPU pods on clusters of a few node types (many nodes alike, and alike again
as pods fill them alike) through `simulate`, and checks every score vector a walk reads against a
binding of the pod made afresh, evaluated node by node; a key missing what a score reads (the
devices after the pod's allocation, the free cpu) makes a row read from a node that scores
otherwise, and fails it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.engine import NodeTable
from rulesched.engine.alike import DeviceKeys, NodeReads, node_reads
from rulesched.engine.score_rows import ScoreRows
from rulesched.lang import load_rules_text
from rulesched.lang.context import new_index_store
from rulesched.lang.load import load_rules
from rulesched.model.dra import NodeDevice

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from openb import MILLI, GpuNode, TracePod  # noqa: E402

from tests.helpers.gpu_replay import MODELS, replay  # noqa: E402

FGD = Path(__file__).resolve().parent.parent / "rules" / "gpu-fragmentation.rules"


def test_fgd_scores_read_the_free_cpu_and_the_devices() -> None:
    rules = load_rules([FGD])
    notes, lets = rules.checked.notes, rules.checked.lets
    for r in rules.scores:
        assert node_reads(r.checked.rule.body, notes, lets) == NodeReads((("free", "cpu"),), True, True), r.name


def _reads(body: str, lets: str = "") -> NodeReads | None:
    rules = load_rules_text({"r.rules": f"{lets}score s:\n    {body}\n"})
    return node_reads(rules.scores[0].checked.rule.body, rules.checked.notes, rules.checked.lets)


def test_what_a_node_is_keyed_by() -> None:
    assert _reads("number(node.free.cpu)") == NodeReads((("free", "cpu"),))
    assert _reads('if node.labels["zone"] == "a" then 1 else 0') == NodeReads((("labels", "zone"),))
    assert _reads("len(node.pods)") == NodeReads((("pods", None),))  # (the field whole)
    assert _reads('if node.name == "a" then 1 else 0') == NodeReads((("name", None),))
    assert _reads("number(pod.requests.cpu)") == NodeReads()  # (the pod alone: one vector for all)
    assert _reads('count(d in devices_after(node) where d.free["milli"] > 0)') == NodeReads((), True, True)
    assert _reads('count(d in node.devices where d.name == "gpu-0")') == NodeReads((), True)


def test_what_a_node_is_not_keyed_by() -> None:
    # a device's pool names its node; the cluster and domains reach beyond the node; a built-in
    # given the node or a device may read anything of it
    assert _reads('count(d in node.devices where d.pool == "x")') is None
    assert _reads('count(d in devices_after(node) where d.pool == "x")') is None
    assert _reads('count(p in cluster.pods where p.namespace == "a")') is None
    assert _reads('count(p in domain(node, "zone").pods where p.namespace == "a")') is None
    assert _reads("len(node.devices)") is None
    assert _reads("dra_score(node)") is None
    assert _reads("len(node_devices)", "let node_devices = node.devices\n\n") is None


def _device(name: str, pool: str, free: int, claims: int = 0) -> NodeDevice:
    return NodeDevice(
        "gpu.example.com",
        pool,
        name,
        MappingProxyType({"model": "T4"}),
        MappingProxyType({}),
        MappingProxyType({"milli": MILLI}),
        MappingProxyType({"milli": MILLI - free}),
        MappingProxyType({"milli": free}),
        free < MILLI,
        True,
        claims,
    )


def test_device_lists_are_numbered_by_content_but_for_the_pool() -> None:
    keys = DeviceKeys()
    a = (_device("gpu-0", "node-a", 1000), _device("gpu-1", "node-a", 500, 1))
    b = (_device("gpu-0", "node-b", 1000), _device("gpu-1", "node-b", 500, 1))
    assert keys.of(a) == keys.of(b) == keys.of(a)
    assert keys.of(a) != keys.of((a[1], a[0]))  # (in order: the allocator's)
    assert keys.of(a) != keys.of((a[0], _device("gpu-1", "node-a", 400, 1)))
    assert keys.of(a) != keys.of((a[0], _device("gpu-2", "node-a", 500, 1)))
    assert keys.of(a) != keys.of((a[0], _device("gpu-1", "node-a", 500, 2)))


def test_device_numbers_are_never_reused_after_a_restart() -> None:
    keys = DeviceKeys(limit=2)
    keys.of((_device("gpu-0", "a", 1000),))
    epoch = keys.epoch
    keys.of((_device("gpu-0", "a", 300),))
    assert keys.of((_device("gpu-0", "a", 200),)) == (0,)  # (past the limit: numbering starts again)
    assert keys.epoch != epoch  # (keys hold the epoch: a number given again means nothing old)


def test_a_nodes_list_is_kept_by_its_name() -> None:
    keys = DeviceKeys()
    a, b = (_device("gpu-0", "a", 1000),), (_device("gpu-0", "a", 500),)
    assert keys.numbered(a, "a")[0] is a
    assert keys.numbered(b, "a")[0] is b  # (the node's list now replaces the one before)
    assert keys.numbered(a, "b")[1] != keys.numbered(b, "a")[1]


@st.composite
def alike_nodes(draw: st.DrawFn) -> list[GpuNode]:
    """Nodes of one or two types: many alike."""
    types = draw(
        st.lists(
            st.tuples(st.sampled_from([16, 32, 64]), st.sampled_from([0, 1, 2, 4]), st.sampled_from(MODELS)),
            min_size=1,
            max_size=2,
        )
    )
    picks = draw(st.lists(st.integers(0, len(types) - 1), min_size=3, max_size=8))
    return [GpuNode(f"node-{i}", types[t][0] * 1000, 262_144, types[t][1], types[t][2]) for i, t in enumerate(picks)]


@st.composite
def gpu_pods(draw: st.DrawFn) -> list[TracePod]:
    shapes = st.one_of(
        st.tuples(st.sampled_from([1000, 8000]), st.just(0), st.just(0), st.just(())),
        st.tuples(
            st.sampled_from([1000, 4000, 12000]),
            st.just(1),
            st.sampled_from([250, 470, 500, 810]),
            st.sampled_from([(), ("T4",)]),
        ),
        st.tuples(st.sampled_from([2000, 8000]), st.sampled_from([1, 2]), st.just(MILLI), st.just(())),
    )
    picks = draw(st.lists(st.tuples(shapes, st.sampled_from([1024, 30_000])), min_size=5, max_size=30))
    return [TracePod(f"p{i:03}", s[0], memory, s[1], s[2], s[3]) for i, (s, memory) in enumerate(picks)]


def _checking(vectors: Any) -> Any:
    """NodeTable.vectors, each answer checked against the pod bound afresh (uncached, its own
    index store), node by node."""

    def checked(table: NodeTable, rows: Any) -> Any:
        out = vectors(table, rows)
        bound = table.bound
        fresh = bound.rule_set.bind_new(bound.ctx.pod, bound.ctx.cluster, new_index_store(), cache=False)
        expected = [fresh.score_vector(table.node(r)) for r in rows.tolist()]
        assert [tuple(v) for v in out.tolist()] == expected
        return out

    return checked


def _counting(computed: list[int]) -> Any:
    """ScoreRows.from_alike, counting the stale rows left to compute."""
    from_alike = ScoreRows.from_alike

    def counted(rows: ScoreRows, stale: Any, key_of: Any, nodes: Any) -> Any:
        alike = from_alike(rows, stale, key_of, nodes)
        computed.append(len(alike.rows))
        return alike

    return counted


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(alike_nodes(), gpu_pods(), st.integers(0, 2**16))
def test_rows_read_from_nodes_alike_are_each_nodes_own_scores(
    nodes: list[GpuNode], pods: list[TracePod], seed: int
) -> None:
    with mock.patch.object(NodeTable, "vectors", _checking(NodeTable.vectors)):
        replay(nodes, pods, seed, explain=False)


def test_nodes_alike_are_scored_once() -> None:
    """Four nodes of one type: the first walk computes one of them and reads the rest; a pod
    bound to one leaves it apart from the others, which the next walk reads again."""
    nodes = [GpuNode(f"node-{i}", 32_000, 262_144, 2, "T4") for i in range(4)]
    pods = [TracePod("p0", 4000, 1024, 1, 500, ()), TracePod("p1", 4000, 1024, 1, 500, ())]
    computed: list[int] = []
    with (
        mock.patch.object(ScoreRows, "from_alike", _counting(computed)),
        mock.patch.object(NodeTable, "vectors", _checking(NodeTable.vectors)),
    ):
        outcomes = replay(nodes, pods, 3, explain=False)
    assert all(o[1] for o in outcomes)
    assert computed == [1, 1]  # (the second pod: the node the first took, unlike the others)


def test_nodes_alike_but_given_other_devices_score_apart(tmp_path: Path) -> None:
    """A device score reading the pool ranks node-0's GPUs its own way (the most free first):
    nodes alike in their devices then get other GPUs for one pod, so other devices after it, and
    score apart (keyed by their devices alone, node-1 read node-0's vector)."""
    text = FGD.read_text().replace(
        '    1000 - number(device.free["milli"])',
        '    if device.pool == "node-0" then number(device.free["milli"]) else 1000 - number(device.free["milli"])',
    )
    assert text != FGD.read_text()
    rules = tmp_path / "fgd-pool.rules"
    rules.write_text(text)
    nodes = [GpuNode(f"node-{i}", 32_000, 262_144, 2, "T4") for i in range(2)]
    pods = [TracePod(f"p{i:03}", 1000, 1024, 1, milli, ()) for i, milli in enumerate([750, 250, 500, 750, 250])]
    with mock.patch.object(NodeTable, "vectors", _checking(NodeTable.vectors)):
        replay(nodes, pods, 0, explain=False, rules=str(rules))
