"""Rule answers shared between classes (rulesched.engine.sharing, rulesched.engine.shared).

What each default rule is keyed by, and properties: with many classes interleaved whose pods agree
on some rules' pod fields and not others, while pods come and go and nodes are added and replaced
between walks, every class's node table (all sharing one store) answers as its binding does node
by node, and the scheduler places pods as the node-by-node path does. Two rule sets on one store
never read each other's answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import ColumnStore, EngineSettings, NodeTable, RuleShare, rule_share
from rulesched.lang import load_rules_text
from rulesched.scheduler.framework import SchedulerSettings
from tests.helpers.scenarios import (
    NAMESPACES,
    SETTINGS,
    Scenario,
    assemble,
    components,
    replay_walks,
    scenarios,
    schedule,
)
from tests.upstream.harness import default_rules, node, pod


def _shares() -> dict[str, RuleShare | None]:
    rules = default_rules()
    notes, lets = rules.checked.notes, rules.checked.lets
    return {
        f"{r.checked.kind.value} {r.name}": rule_share(r.checked.rule.body, notes, lets)
        for r in (*rules.filters, *rules.scores)
    }


def test_default_rules_are_keyed_by_the_pod_fields_each_reads() -> None:
    shares = _shares()
    assert shares["filter NodeUnschedulable"] == RuleShare(("tolerations",), False)
    assert shares["filter NodeName"] == RuleShare(("node_name",), False)
    assert shares["filter NodePorts"] == RuleShare(("host_ports",), True)
    assert shares["filter NodeResourcesFit"] == RuleShare(("requests",), True)
    assert shares["filter NodeAffinity"] == RuleShare(
        ("has_required_node_affinity", "node_selector", "required_node_affinity"), False
    )
    assert shares["filter TaintToleration"] == RuleShare(("tolerations",), False)
    assert shares["score TaintToleration"] == RuleShare(("tolerations",), False)
    assert shares["score NodeAffinity"] == RuleShare(("preferred_node_affinity",), False)
    # (read by constant keys alone: keyed by those entries, not by every request)
    fit_keys = (("nonzero_requests", "cpu"), ("nonzero_requests", "memory"))
    assert shares["score NodeResourcesFit"] == RuleShare((), True, pod_keys=fit_keys)
    balanced_keys = (("requests", "cpu"), ("requests", "memory"))
    assert shares["score NodeResourcesBalancedAllocation"] == RuleShare((), True, pod_keys=balanced_keys)
    # context built-ins read the cluster and the pod whole: never shared
    for name in ("filter InterPodAffinity", "filter PodTopologySpread", "score ImageLocality"):
        assert shares[name] is None, name


def test_lets_are_followed_and_the_pod_whole_is_not_shared() -> None:
    rules = load_rules_text(
        {
            "r.rules": "let want = pod.requests.cpu\nlet busy = len(node.pods) > 3\n"
            "filter a:\n    want <= node.free.cpu\n"
            "filter b:\n    not busy\n"
            'filter c:\n    node.labels["x"] == pod.labels["x"]\n'
            'filter d:\n    pod.name != ""\n'
        }
    )
    notes, lets = rules.checked.notes, rules.checked.lets
    got = {r.name: rule_share(r.checked.rule.body, notes, lets) for r in rules.filters}
    assert got["a"] == RuleShare((), True, pod_keys=(("requests", "cpu"),))
    assert got["b"] == RuleShare((), True)
    assert got["c"] == RuleShare((), False, pod_keys=(("labels", "x"),))
    assert got["d"] == RuleShare(("name",), False)
    assert rules.class_fields is None  # a rule reads the name: no class is cached, none shares


@st.composite
def many_classes(draw: Any) -> Scenario:
    """A scenario whose pending pods come from 3-8 templates, each part picked from two values:
    templates agree on some rules' pod fields and differ on others, interleaved in arrival order."""
    scenario = draw(scenarios())
    app = scenario.pending[0].labels["app"]
    parts = components(app, pending=True)
    pools = {key: [draw(strategy), draw(strategy)] for key, strategy in parts.items()}
    templates = [
        {key: pool[draw(st.integers(0, 1))] for key, pool in pools.items()} for _ in range(draw(st.integers(3, 8)))
    ]
    picks = [draw(st.integers(0, len(templates) - 1)) for _ in scenario.pending]
    pending = [pod(f"p{i}", *assemble(app, templates[t])) for i, t in enumerate(picks)]
    probes = [pod(f"probe{i}", *assemble(app, t)) for i, t in enumerate(templates)]
    return replace(scenario, pending=pending, probes=probes)


@pytest.mark.parametrize("columns_from", [1, 3])
@SETTINGS
@given(many_classes(), st.lists(st.tuples(st.integers(0, 99), st.integers(1, 12)), min_size=1, max_size=3))
def test_tables_sharing_answers_match_the_node_by_node_walk(
    columns_from: int, scenario: Scenario, walks: list[tuple[int, int]]
) -> None:
    replay_walks(scenario, walks, columns_from)


@SETTINGS
@given(many_classes(), st.integers(0, 2**16))
def test_many_classes_place_as_node_by_node(scenario: Scenario, seed: int) -> None:
    placements = []
    for explain, columns_from in ((True, 0), (False, 0), (False, 1), (False, 2)):
        state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
        settings = SchedulerSettings(seed=seed, explain=explain, engine=EngineSettings(columns_from=columns_from))
        placements.append([(r.pod.key, r.code, r.node, r.message) for r in schedule(scenario, state, settings)])
    assert placements[1:] == placements[:1] * 3


def test_two_rule_sets_on_one_store_keep_their_answers_apart() -> None:
    """The same rule position and pod values under another rule set (a reload) is another key."""
    small = load_rules_text({"a.rules": "filter fit:\n    pod.requests.cpu <= node.free.cpu\n"})
    large = load_rules_text({"a.rules": "filter fit:\n    pod.requests.cpu > node.free.cpu\n"})
    nodes = [node(f"n{i}", allocatable={"cpu": str(i + 1), "memory": "1Gi", "pods": "10"}) for i in range(4)]
    state = ClusterStore.build(nodes, [])
    store = ColumnStore()
    p = pod("p", "default", {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]})
    found = {}
    for name, rules in (("small", small), ("large", large), ("small again", small)):
        snapshot = state.snapshot()
        table = NodeTable(rules.bind(p, snapshot), store, 1)
        table.sync(snapshot)
        rows, _ = table.feasible(0, 4)
        found[name] = [table.node(r).name for r in rows.tolist()]
        table.release()
    assert found == {"small": ["n1", "n2", "n3"], "large": ["n0"], "small again": ["n1", "n2", "n3"]}


values = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]), st.tuples(st.sampled_from(["x", "y"])))


@given(st.lists(st.tuples(values, values), max_size=40), st.integers(1, 2))
def test_groups_partition_nodes_by_their_values(rows: list[tuple[Any, Any]], width: int) -> None:
    """Rows share a group exactly when their values are equal; each group's representative is
    its first row; a changed row is found to have left its group (the fast path and still())."""
    from rulesched.engine import Groups

    getters = [lambda r, i=i: r[i] for i in range(width)]
    groups = Groups.of(rows, getters)
    assert groups is not None  # (at most 64 distinct values here)
    keys = [r[:width] for r in rows]
    firsts = {k: keys.index(k) for k in keys}
    assert [groups.representatives[c] for c in groups.codes.tolist()] == [firsts[k] for k in keys]
    assert groups.still(rows, list(range(len(rows))))
    if rows:
        changed = [(("changed",), *rows[0][1:])] + rows[1:]
        assert not groups.still(changed, [0])
