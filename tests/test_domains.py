"""Topology domains and the cluster (rulesched.lang.builtins.domains): the checker's decisions
and diagnostics; every indexed aggregate and domain sum equals a recount from scratch (the
reference interpreter over a cluster rebuilt from the objects) while pods are added, moved and
deleted and nodes relabelled; and the scheduler places pods where the reference would."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.lang import load_rules_text
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.files import check_texts
from rulesched.lang.values import as_score
from rulesched.model import Node, Pod
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.scoring import normalize
from tests.helpers.scenarios import AlwaysBind
from tests.helpers.scenarios import VirtualClock as Clock
from tests.upstream.harness import node, pod

AGGREGATES = """
score same_app_zone: count(p in domain(node, "zone").pods where p.labels["app"] == pod.labels["app"])
score team_rack: count(p in domain(node, "rack").pods where p.labels["team"] == pod.labels["team"] and p.namespace == pod.namespace)
score gpus: number(sum(p.requests["example.com/gpu"] for p in cluster.pods where p.labels["team"] == pod.labels["team"]))
score cpu_zone: number(sum(p.requests.cpu for p in domain(node, "zone").pods))
score halves: sum(p.priority / 3 for p in domain(node, "zone").pods where p.labels["app"] != "c") * 1000
score any_all: (if any(p in domain(node, "rack").pods where p.labels == pod.labels) then 7 else 0)
  + (if all(p in cluster.pods where p.priority < 50) then 3 else 0)
score nodes: count(n in domain(node, "zone").nodes where n.labels["rack"] != "") * 100 + len(cluster.nodes)
score sums: number(domain(node, "zone").allocatable.cpu) + number(domain(node, "rack").requested.cpu)
  + number(domain(node, "zone").free.cpu) + number(cluster.free["example.com/gpu"])
score min_zone: min(count(p in domain(n, "zone").pods where p.labels["app"] == pod.labels["app"]) for n in cluster.nodes where "zone" in n.labels) * 10
  + number(max(sum(p.requests.cpu for p in domain(n, "rack").pods where p.namespace == pod.namespace) for n in cluster.nodes))
preempt over_quota: sum(p.requests["example.com/gpu"] for p in cluster.pods where p.labels["team"] == victim.labels["team"]) > 4
"""

APPS, TEAMS = ("a", "b", "c"), ("x", "y")


def a_node(i: int, zone: int | None, rack: int | None, cpu: int, gpus: int) -> Node:
    labels = {"kubernetes.io/hostname": f"n{i}"}
    if zone is not None:
        labels["zone"] = f"z{zone}"
    if rack is not None:
        labels["rack"] = f"r{rack}"
    return node(f"n{i}", labels, {"cpu": str(cpu), "memory": "64Gi", "pods": "110", "example.com/gpu": str(gpus)})


def a_pod(
    name: str, app: str, team: str, cpu: int, gpus: int, priority: int, node_name: str = "", ns: str = "default"
) -> Pod:
    limits = {"example.com/gpu": str(gpus)} if gpus else {}
    spec = {
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": f"{cpu}m", **limits}, "limits": limits}}
        ],
        "priority": priority,
    }
    return pod(name, ns, spec=spec, labels={"app": app, "team": team}, node_name=node_name)


nodes_st = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(0, 2)),
        st.one_of(st.none(), st.integers(0, 3)),
        st.integers(1, 8),
        st.integers(0, 4),
    ),
    min_size=1,
    max_size=7,
)
pods_st = st.tuples(
    st.sampled_from(APPS),
    st.sampled_from(TEAMS),
    st.integers(0, 3000),
    st.integers(0, 3),
    st.integers(0, 100),
    st.sampled_from(["default", "other"]),
)
# (op, pod index or new pod, node index): add, move, delete, relabel a node
ops_st = st.lists(
    st.tuples(st.sampled_from(["add", "add", "move", "delete", "relabel"]), pods_st, st.integers(0, 99)), max_size=25
)


def built(nodes: list[Node], store: ClusterStore) -> ClusterStore:
    return ClusterStore.build(nodes, list(store.pods()))


def reference_scores(text_rules: Any, incoming: Pod, cluster: ClusterStore, victim: Pod) -> list[Any]:
    checked = text_rules.checked
    interp = Interpreter(checked.notes, checked.lets)
    ctx = EvalContext(incoming, cluster)
    out = []
    for n in cluster.nodes:
        for r in checked.rules:
            out.append(
                interp.body(r, ctx, n, victim) if r.kind is ast.RuleKind.PREEMPT else as_score(interp.body(r, ctx, n))
            )
    return out


@settings(max_examples=40, deadline=None)
@given(nodes_st, ops_st, pods_st)
def test_every_domain_aggregate_equals_a_recount(node_specs: Any, ops: Any, incoming_spec: Any) -> None:
    rules = load_rules_text({"domains.rules": AGGREGATES})
    nodes = [a_node(i, z, r, cpu, g) for i, (z, r, cpu, g) in enumerate(node_specs)]
    store = ClusterStore.build(nodes, [])
    incoming = a_pod("incoming", *incoming_spec[:5], ns=incoming_spec[5])
    placed: list[str] = []
    for step, (op, (app, team, cpu, gpus, prio, ns), where) in enumerate(ops):
        target = nodes[where % len(nodes)].name
        if op == "add" or not placed:
            p = a_pod(f"p{step}", app, team, cpu, gpus, prio, target, ns)
            store.add_pod(p)
            placed.append(p.key)
        elif op == "move":
            key = placed[where % len(placed)]
            old = store.remove_pod(key)
            assert old is not None
            store.add_pod(
                a_pod(old.name, old.labels["app"], old.labels["team"], cpu, gpus, prio, target, old.namespace)
            )
        elif op == "delete":
            store.remove_pod(placed.pop(where % len(placed)))
        else:  # a node's labels change: domains are rebuilt
            i = where % len(nodes)
            nodes[i] = a_node(i, (where // 7) % 3, (where // 3) % 4, 4, 2)
            store.add_node(nodes[i])
        victim = next(iter(store.pods()), incoming)
        bound = rules.bind(incoming, store)  # one session: its indexes follow the changes
        fast = []
        for n in store.nodes:
            fast.extend(s.score(n) for s in bound.scores)
            fast.extend(p.allows(n, victim) for p in bound.preempts)
        assert fast == reference_scores(rules, incoming, built(nodes, store), victim), step


def test_a_node_without_the_label_is_in_no_domain() -> None:
    rules = load_rules_text({"x.rules": AGGREGATES})
    nodes = [a_node(0, 0, 0, 4, 1), a_node(1, None, None, 4, 1)]
    store = ClusterStore.build(nodes, [a_pod("r", "a", "x", 500, 1, 1, "n1"), a_pod("s", "a", "x", 500, 1, 1, "n0")])
    bound = rules.bind(a_pod("in", "a", "x", 0, 0, 0), store)
    scores = {s.name: s.score(store.nodes[1]) for s in bound.scores}
    assert scores["same_app_zone"] == 0 and scores["team_rack"] == 0 and scores["cpu_zone"] == 0
    assert scores["gpus"] == 2  # the cluster holds every node's pods
    assert scores["nodes"] == 2  # count over no nodes, plus len(cluster.nodes)


def diagnostics(text: str) -> list[str]:
    return [f"{d.code} {d.location}: {d.message} {d.suggestion}" for d in check_texts({"t.rules": text}).diagnostics]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "filter f: count(p in clustr.pods) < 3",
            ["unknown-name t.rules:1:22: unknown name 'clustr' did you mean `cluster`?"],
        ),
        ('filter f: len(domain(node, "zone").nodez) < 3', ["unknown-field", "did you mean `(...).nodes`?"]),
        ("filter f: len(cluster.pods) < 3", ["not-indexable t.rules:1:15: cluster.pods can only be aggregated over"]),
        (
            "filter f: count(p in cluster.pods where p.node_name == node.name) < 3",
            ["not-indexable t.rules:1:56:", "(or the victim); this reads 'node'"],
        ),
        (
            "filter f: max(p.priority for p in cluster.pods) < 3",
            ["not-indexable t.rules:1:11:", "only count, any, all and sum"],
        ),
        (
            "filter f: count(p in cluster.pods where p == pod) < 3",
            ["not-indexable", "which an index cannot be keyed by"],
        ),
        ("filter f when count(p in cluster.pods) < 3: true", ["scope", "'cluster' cannot be used in a when guard"]),
        (
            'filter f: count(n in domain(node, "zone").nodes where n.free.cpu > 1 and n.labels["a"] == "b") < 3',
            ["too-costly"],
        ),
        (
            'filter f: domain(node, "zone").free.cpu > 1 and count(p in cluster.pods where p.namespace == pod.namespace) < 9',
            [],
        ),
    ],
)
def test_checker_decides_and_locates(text: str, expected: list[str]) -> None:
    found = diagnostics(text)
    if not expected:
        assert found == []
        return
    for part in expected:
        assert part in found[0], found


# --- placements: the scheduler against the reference ------------------------------------------------

PLACEMENT = """extends "default"
let here = count(p in domain(node, "zone").pods where p.labels["app"] == pod.labels["app"])
let fewest = min(count(p in domain(n, "zone").pods where p.labels["app"] == pod.labels["app"]) for n in cluster.nodes where "zone" in n.labels)
filter zone_spread: "zone" in node.labels and here + 1 - fewest <= 1
filter rack_limit: count(p in domain(node, "rack").pods where p.labels["team"] == pod.labels["team"]) < 3
score less_app: 10 - here
"""


@settings(max_examples=15, deadline=None)
@given(nodes_st, st.lists(pods_st, min_size=1, max_size=12), st.integers(0, 2**16))
def test_the_scheduler_places_pods_where_the_reference_would(node_specs: Any, pending: Any, seed: int) -> None:
    from rulesched.scheduler.scheduler import Scheduler

    rules = load_rules_text({"p.rules": PLACEMENT})
    nodes = [a_node(i, z, r, cpu, g) for i, (z, r, cpu, g) in enumerate(node_specs)]
    store = ClusterStore.build(nodes, [])
    scheduler = Scheduler(
        rules, store, SchedulerSettings(percentage_of_nodes_to_score=100, seed=seed), AlwaysBind(), clock=Clock()
    )
    for i, (app, team, cpu, gpus, prio, ns) in enumerate(pending):
        scheduler.add(a_pod(f"q{i}", app, team, cpu, gpus, prio, ns=ns))
    checked = rules.checked
    interp = Interpreter(checked.notes, checked.lets)
    for _ in range(len(pending)):
        result = scheduler.schedule_one()
        if result is None:
            break
        key = result.pod.key
        cluster = ClusterStore.build(nodes, [p for p in store.pods() if p.key != key])
        ctx = EvalContext(result.pod, cluster)
        applied = [r for r in checked.rules if interp.applies(r, ctx)]
        feasible = [
            n for n in cluster.nodes if all(interp.body(r, ctx, n) for r in applied if r.kind is ast.RuleKind.FILTER)
        ]
        if result.code is not Code.SCHEDULED:
            assert feasible == [], key
            continue
        ctx.feasible = feasible
        scores = [r for r in applied if r.kind is ast.RuleKind.SCORE]
        totals = dict.fromkeys((n.name for n in feasible), 0)
        for r in scores:
            raw = [as_score(interp.body(r, ctx, n)) for n in feasible]
            for n, v in zip(feasible, normalize(r.normalize, raw), strict=True):
                totals[n.name] += r.weight * v
        assert result.node in totals, key
        assert totals[result.node] == max(totals.values()), (key, result.node, totals)


# --- answers kept per label group (columns.node_labels), on clusters big enough for columns ----------


@settings(max_examples=10, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), min_size=24, max_size=48),
    st.lists(st.tuples(st.sampled_from(["add", "add", "delete", "move"]), pods_st, st.integers(0, 99)), max_size=40),
    st.integers(0, 2**16),
)
def test_grouped_answers_follow_pods_added_moved_and_deleted(node_specs: Any, ops: Any, seed: int) -> None:
    """Columns from 2 rows on, so the domain filters are evaluated once per zone or rack and kept
    for the cycle: between cycles pods are added, moved and deleted behind the scheduler's back;
    every placement still passes the reference's filters and is one of its best. (Up to 8
    groups, as here, a grouped filter goes node by node on one node of each.)"""
    follow_pods([a_node(i, z, r, 8, 1) for i, (z, r) in enumerate(node_specs)], ops, seed)


@settings(max_examples=6, deadline=None)
@given(
    st.lists(st.sampled_from(["add", "add", "delete", "move"]), max_size=30).map(
        lambda names: [(op, (APPS[i % 3], TEAMS[i % 2], 0, 0, 0, "default"), 7 * i) for i, op in enumerate(names)]
    ),
    st.integers(0, 2**16),
)
def test_grouped_answers_as_columns_follow_pods(ops: Any, seed: int) -> None:
    """Past 8 groups (12 racks) a grouped filter goes as columns over one node of each group
    (a keyed count's answers for all of them from one index lookup): the same placements."""
    follow_pods([a_node(i, i % 3, i % 12, 8, 1) for i in range(48)], ops, seed)


def follow_pods(nodes: list[Node], ops: Any, seed: int) -> None:
    from rulesched.scheduler.scheduler import Scheduler

    rules = load_rules_text({"p.rules": PLACEMENT})
    store = ClusterStore.build(nodes, [])
    scheduler = Scheduler(
        rules,
        store,
        SchedulerSettings(percentage_of_nodes_to_score=100, seed=seed, engine=EngineSettings(columns_from=2)),
        AlwaysBind(),
        clock=Clock(),
    )
    checked = rules.checked
    interp = Interpreter(checked.notes, checked.lets)
    for i, (op, (app, team, *_), at) in enumerate(ops):
        bound_pods = [p for p in store.pods() if p.node_name]
        if op == "delete" and bound_pods:
            store.remove_pod(bound_pods[at % len(bound_pods)].key)
            continue
        if op == "move" and bound_pods:
            moved = bound_pods[at % len(bound_pods)]
            store.remove_pod(moved.key)
            store.add_pod(
                a_pod(
                    moved.name,
                    moved.labels["app"],
                    moved.labels["team"],
                    100,
                    0,
                    0,
                    nodes[at % len(nodes)].name,
                    moved.namespace,
                )
            )
            continue
        scheduler.add(a_pod(f"q{i}", app, team, 100, 0, 0))  # (six classes: they recur)
        result = scheduler.schedule_one()
        assert result is not None
        key = result.pod.key
        cluster = ClusterStore.build(nodes, [p for p in store.pods() if p.key != key and p.node_name])
        ctx = EvalContext(result.pod, cluster)
        applied = [r for r in checked.rules if interp.applies(r, ctx)]
        feasible = [
            n for n in cluster.nodes if all(interp.body(r, ctx, n) for r in applied if r.kind is ast.RuleKind.FILTER)
        ]
        if result.code is not Code.SCHEDULED:
            assert feasible == [], key
            continue
        assert result.node in {n.name for n in feasible}, key
        ctx.feasible = feasible
        totals = dict.fromkeys((n.name for n in feasible), 0)
        for r in (r for r in applied if r.kind is ast.RuleKind.SCORE):
            raw = [as_score(interp.body(r, ctx, n)) for n in feasible]
            for n, v in zip(feasible, normalize(r.normalize, raw), strict=True):
                totals[n.name] += r.weight * v
        assert totals[result.node] == max(totals.values()), (key, result.node, totals)
    gc.collect()
    # Domain aggregates keep their counts in the binding's scratch, emptied when the cycle lets go
    # of its snapshot: no snapshot outlives its cycle (a live one makes the store copy each node
    # it changes next).
    assert store._cow.held() == -1


def test_node_labels_finds_the_labels_a_rule_reads_the_node_through() -> None:
    from rulesched.engine.columns import node_labels

    rules = load_rules_text({"p.rules": PLACEMENT + 'filter other: node.labels["rack"] != "" and node.free.cpu > 0\n'})
    checked = rules.checked
    found = {r.name: node_labels(r.rule.body, checked.notes, checked.lets) for r in checked.rules}
    assert found["zone_spread"] == ("zone",)
    assert found["rack_limit"] == ("rack",)
    assert found["other"] is None  # (reads node.free: one answer per node)


# --- explanations show the domain and cluster values a rule read -----------------------------------


def test_explanations_show_the_domain_values_a_filter_read() -> None:
    from rulesched.authoring.explain import Explainer, explanation_lines
    from rulesched.scheduler.why import explain_pod, explanation_json

    rules = load_rules_text({"p.rules": PLACEMENT})
    nodes = [a_node(0, 0, 0, 8, 0), a_node(1, 1, 0, 8, 0), a_node(2, 2, 1, 8, 0), a_node(3, None, 1, 8, 0)]
    running = [a_pod(f"w{i}", "a", "x", 100, 0, 0, node_name="n0") for i in range(2)]
    running.append(a_pod("w2", "a", "y", 100, 0, 0, node_name="n1"))
    store = ClusterStore.build(nodes, running)
    incoming = a_pod("q", "a", "x", 100, 0, 0)
    why = explanation_json(explain_pod(incoming, store.snapshot(), rules))
    detailed = {d["node"]: {f["rule"]: f["values"] for f in d["failures"]} for d in why["detailed"]}
    assert detailed["n0"]["zone_spread"] == ["here = 2 in zone=z0", "fewest = 0"]
    assert detailed["n1"]["zone_spread"] == ["here = 1 in zone=z1", "fewest = 0"]
    assert detailed["n3"]["zone_spread"] == ["here = 0 in no zone domain", "fewest = 0"]
    assert "n2" not in detailed  # (fits: zone z2 has none of the app's pods)
    assert why["feasible"] == 1
    # rulesched diff's explainer: the verdict on each node with the values it read.
    empty = load_rules_text({"e.rules": 'extends "default"\n'})
    lines = explanation_lines(Explainer(empty, rules, store.snapshot()).explain(incoming, "n0", "n2"))
    assert any(
        "zone_spread on n0: absent → fail" in line and "[here = 2 in zone=z0, fewest = 0]" in line for line in lines
    ), lines


def test_keyed_counts_agree_both_ways_round_through_forks() -> None:
    """KeyedCounts keeps each count twice (by domain, then by the element's values; and the other
    way round, for a column of domains): both agree as pods come and go, and a fork (preemption's
    dry runs) changes neither its original nor the other way round."""
    from rulesched.lang.builtins.domains import KeyedCounts

    nodes = [a_node(i, i % 2, None, 4, 0) for i in range(4)]
    counts = KeyedCounts("zone", [lambda p: p.labels["team"]], None)
    pods = [(a_pod(f"p{i}", "a", TEAMS[i % 2], 100, 0, 0), nodes[i % 4]) for i in range(7)]

    def agree(c: KeyedCounts) -> dict[tuple[Any, Any], Any]:
        flat = {(d, v): n for d, sub in c.per.items() for v, n in sub.items()}
        assert flat == {(d, v): n for v, sub in c.by_values.items() for d, n in sub.items()}
        assert 0 not in flat.values()
        return flat

    for p, n in pods:
        counts.apply(1, p, n)
    before = agree(counts)
    assert before == {("z0", ("x",)): 4, ("z1", ("y",)): 3}
    twin = counts.fork()
    for p, n in pods[:4]:
        twin.apply(-1, p, n)
    assert agree(twin) == {("z0", ("x",)): 2, ("z1", ("y",)): 1}
    assert agree(counts) == before
    assert counts.fork().by_values is not counts.by_values
