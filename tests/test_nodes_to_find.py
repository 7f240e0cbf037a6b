"""percentageOfNodesToScore and the feasible-node walk, ported from upstream's
pkg/scheduler/schedule_one_test.go: TestNumFeasibleNodesToFind (its table, and the sizes 100 to
100,000 nodes), TestFairEvaluationForNodes (the start rotates by the nodes processed, so every
node is looked at over successive cycles), TestSchedulerSchedulePod's "test without score plugin
no extra nodes are evaluated" (without score rules the walk stops at the first feasible node),
and the nominated node's place in processedNodes (findNodesThatFitPod).

Upstream filters nodes on 16 goroutines and stops once enough fit; with one goroutine (and, with
several, whenever every node fits) the nodes processed are exactly those up to the last feasible
node taken, which is what a rulesched cycle looks at. Both of its walks are checked: the table
walk (``explain`` off) and the node-by-node one (``explain`` on), the table walk with small steps
too (``walk_chunk``), with the rules evaluated as columns or node by node (``columns_from``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.lang import RuleSet, Session, load_rules_text
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import Code, CycleResult, SchedulerSettings, num_feasible_nodes_to_find
from tests.upstream.harness import node, pod

SCORED = load_rules_text({"scored.rules": 'filter ok: node.labels["bad"] != "yes" else "bad node"\nscore flat: 1\n'})
FILTERS_ONLY = load_rules_text({"filters.rules": 'filter ok: node.labels["bad"] != "yes" else "bad node"\n'})

# (explain, walk_chunk, columns_from): the table walk in one step or in steps of 7 nodes, rules as
# columns or node by node; and the node-by-node walk of explain runs.
WALKS = [(False, 0, 32), (False, 7, 0), (True, 0, 32)]
WALK_IDS = ["table", "table-steps", "explain"]


# --- TestNumFeasibleNodesToFind ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("global_percentage", "profile_percentage", "nodes", "want"),
    [
        (0, None, 10, 10),  # not set, nodes fewer than 50 (upstream's name; fewer than 100)
        (0, 40, 10, 10),  # profile set, too few nodes
        (0, None, 1000, 420),  # not set: adaptive, 50 - 1000/125 = 42%
        (0, 40, 1000, 400),  # profile set
        (100, 40, 1000, 400),  # global and profile set: the profile's wins
        (40, None, 1000, 400),  # global set
        (0, None, 6000, 300),  # adaptive below 5%: 5%
        (0, 40, 6000, 2400),  # profile set, many nodes
    ],
)
def test_num_feasible_nodes_to_find_upstream_table(
    global_percentage: int, profile_percentage: int | None, nodes: int, want: int
) -> None:
    assert num_feasible_nodes_to_find(nodes, global_percentage, profile_percentage) == want


# The sizes, adaptive percentage: 100 (50% of 100 is below the minimum of 100), 42% of
# 1000, 10% of 5000, and 5% (the floor) of 15,000 and 100,000.
SIZES = {100: 100, 1000: 420, 5000: 500, 15000: 750, 100000: 5000}


def test_num_feasible_nodes_to_find_at_cluster_sizes() -> None:
    assert {n: num_feasible_nodes_to_find(n, 0) for n in SIZES} == SIZES
    assert {n: num_feasible_nodes_to_find(n, 100) for n in SIZES} == {n: n for n in SIZES}
    assert num_feasible_nodes_to_find(99, 0) == 99 and num_feasible_nodes_to_find(0, 0) == 0


# --- the nodes a cycle looks at ----------------------------------------------------------------


def grown_snapshots(sizes: list[int], bad_every: int) -> Iterator[Snapshot]:
    """Snapshots of one store grown to each size in turn (nodes n000000...; every ``bad_every``th
    one fails the filter), built once: 100,000 decoded nodes would take seconds."""
    good, bad = node("tpl"), node("tpl", labels={"bad": "yes"})
    store = ClusterStore()
    added = 0
    for size in sizes:
        while added < size:
            template = bad if bad_every and added % bad_every == bad_every - 1 else good
            store.add_node(dataclasses.replace(template, name=f"n{added:06}"))
            added += 1
        yield store.snapshot()


def expected_walk(snapshot: Snapshot, start: int, wanted: int) -> tuple[int, int]:
    """Upstream's walk, one goroutine: (nodes processed, feasible nodes found) from ``start``."""
    nodes = snapshot.nodes
    found = 0
    for looked in range(len(nodes)):
        if nodes[(start + looked) % len(nodes)].node.labels.get("bad") != "yes":
            found += 1
            if found == wanted:
                return looked + 1, found
    return len(nodes), found


def cycle(settings: SchedulerSettings) -> Cycle:
    return Cycle(settings)


def run(c: Cycle, snapshot: Snapshot, rules: RuleSet = SCORED, name: str = "p", **meta: object) -> CycleResult:
    p = pod(name)
    if meta:
        p = dataclasses.replace(p, **meta)  # type: ignore[arg-type]
    result, bound = c.run(p, snapshot, Session(rules))
    bound.release()
    return result


def test_nodes_looked_at_per_cycle_at_cluster_sizes() -> None:
    """At each size, two cycles in a row with every third node failing: each looks at the
    nodes up to its 100/420/500/750/5000th feasible one, and the next starts after them."""
    cycles = {
        ids: cycle(SchedulerSettings(explain=e, engine=EngineSettings(walk_chunk=k, columns_from=c)))
        for ids, (e, k, c) in zip(WALK_IDS, WALKS, strict=True)
    }
    for snapshot in grown_snapshots(list(SIZES), bad_every=3):
        count = len(snapshot.nodes)
        wanted = SIZES[count]
        for name, c in cycles.items():
            c.next_start = count // 3  # anywhere: the walk wraps round
            for _ in range(2):
                start = c.next_start
                looked, found = expected_walk(snapshot, start, wanted)
                result = run(c, snapshot)
                assert (result.evaluated, result.feasible) == (looked, found), (name, count, start)
                assert c.next_start == (start + looked) % count, (name, count)
                assert result.code is Code.SCHEDULED and result.num_nodes == count


@pytest.mark.parametrize(("explain", "chunk", "columns_from"), WALKS, ids=WALK_IDS)
def test_fair_evaluation_for_nodes(explain: bool, chunk: int, columns_from: int) -> None:
    """TestFairEvaluationForNodes: 500 nodes, 30%: 150 found per cycle, the start moving 150 at a
    time (500 is not a multiple: it wraps mid-walk), every node looked at over the cycles."""
    (snapshot,) = grown_snapshots([500], bad_every=0)
    c = cycle(
        SchedulerSettings(
            percentage_of_nodes_to_score=30,
            explain=explain,
            engine=EngineSettings(walk_chunk=chunk, columns_from=columns_from),
        )
    )
    to_find = num_feasible_nodes_to_find(500, 30)
    assert to_find == 150
    seen: set[int] = set()
    for i in range(2 * (500 // to_find + 1)):
        start = c.next_start
        result = run(c, snapshot)
        assert result.feasible == to_find and result.evaluated == to_find
        assert c.next_start == (i + 1) * to_find % 500
        seen.update((start + k) % 500 for k in range(result.evaluated))
    assert seen == set(range(500))


@pytest.mark.parametrize(("explain", "chunk", "columns_from"), WALKS, ids=WALK_IDS)
def test_without_score_rules_the_first_feasible_node_is_taken(explain: bool, chunk: int, columns_from: int) -> None:
    """ "test without score plugin no extra nodes are evaluated": 3 nodes, a filter and no score:
    one node evaluated; the walk's start then moves on by one, so the next pod takes the next
    node (upstream's nextStartNodeIndex), skipping a failing one."""
    store = ClusterStore()
    for name, bad in (("node1", False), ("node2", True), ("node3", False)):
        store.add_node(node(name, labels={"bad": "yes"} if bad else {}))
    snapshot = store.snapshot()
    c = cycle(SchedulerSettings(explain=explain, engine=EngineSettings(walk_chunk=chunk, columns_from=columns_from)))
    first = run(c, snapshot, FILTERS_ONLY, "a")
    assert (first.node, first.evaluated, first.feasible, c.next_start) == ("node1", 1, 1, 1)
    second = run(c, snapshot, FILTERS_ONLY, "b")
    assert (second.node, second.evaluated, second.feasible, c.next_start) == ("node3", 2, 1, 0)
    if explain:  # explain still records what it looked at: node2's reason, each fitting node
        assert second.filtered == {"node2": ("bad node",)}
        assert set(second.scores or {}) == {"node1", "node3"}


@pytest.mark.parametrize(("explain", "chunk", "columns_from"), WALKS, ids=WALK_IDS)
@pytest.mark.parametrize(("nominated", "processed"), [("n000150", 101), ("n000050", 101), ("n000199", 101)])
def test_a_nominated_node_that_does_not_fit_counts_as_processed(
    explain: bool, chunk: int, columns_from: int, nominated: str, processed: int
) -> None:
    """200 nodes, 100 to find; the pod's nominated node fails. Upstream tries it first, and its
    status stays in the cycle's diagnosis: processedNodes counts it once, whether or not the walk
    (100 nodes, or 101 when the failing node is among them) reaches it."""
    good = node("tpl")
    store = ClusterStore()
    for i in range(200):
        name = f"n{i:06}"
        store.add_node(node(name, labels={"bad": "yes"}) if name == nominated else dataclasses.replace(good, name=name))
    snapshot = store.snapshot()
    assert num_feasible_nodes_to_find(200, 0) == 100
    c = cycle(SchedulerSettings(explain=explain, engine=EngineSettings(walk_chunk=chunk, columns_from=columns_from)))
    result = run(c, snapshot, nominated_node_name=nominated)
    assert result.code is Code.SCHEDULED and result.node != nominated
    assert (result.evaluated, result.feasible, c.next_start) == (processed, 100, processed)


def test_a_nominated_node_that_fits_leaves_the_start_alone() -> None:
    (snapshot,) = grown_snapshots([300], bad_every=0)
    c = cycle(SchedulerSettings())
    c.next_start = 7
    result = run(c, snapshot, nominated_node_name="n000200")
    assert (result.node, result.evaluated, result.feasible, c.next_start) == ("n000200", 1, 1, 7)
