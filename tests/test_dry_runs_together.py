"""Preemption's dry runs of many nodes at once (rulesched.engine.dryrun) give what the
node-by-node dry runs give (upstream's DefaultPreemption tables run both ways in
tests/upstream/test_defaultpreemption.py): on generated clusters (priorities, budgets, host ports, taints,
pods of other priorities, rules whose filters read what the columns cannot adjust) both ways
nominate the same node with the same victims and the same message, for any sample of the nodes
(DefaultPreemptionArgs) and offset."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.engine import ColumnStore, dryrun
from rulesched.lang.load import load_rules_text
from rulesched.scheduler import preemption
from rulesched.scheduler.evaluate import NodeStatuses, node_statuses
from rulesched.scheduler.framework import Code
from rulesched.scheduler.nominator import Reserved
from tests.helpers.preemption import batch_every_preemption
from tests.upstream.harness import default_rules, node, pdb, pod, state

REAL_PREEMPT = preemption.preempt  # (the fixture below wraps it)


@pytest.fixture(autouse=True)
def batched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every preemption in this module with the snapshot's columns, batched from one node on,
    and every candidate handed on."""
    batch_every_preemption(monkeypatch)
    yield


# a filter no pod changes (it reads a label), resolvable (evicting is thought to help there), after
# NodeResourcesFit: the dry runs read its answers from the cycle's walk where that knew them
ZONE_RULES = """
extends "default"

filter zone_ok:
    node.labels["zone"] != "bad"
    else "node(s) in a bad zone"
"""

PORTS_RULES = """
extends "default"

filter pod_count:
    count(p in node.pods where p.priority > 100) < 3
    else "node(s) hold too many important pods"
"""


def _pod(name: str, cpu: int, priority: int, node_name: str = "", app: str = "a", port: bool = False) -> Any:
    container: dict[str, Any] = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": f"{cpu}m"}}}
    if port:
        container["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return pod(name, spec={"priority": priority, "containers": [container]}, labels={"app": app}, node_name=node_name)


@pytest.mark.parametrize("outrank", [False, True], ids=["every-candidate", "outranked-left-out"])
@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=2, max_size=9),
    st.lists(
        st.tuples(
            st.integers(0, 8),
            st.integers(100, 1500),
            st.sampled_from([0, 5, 50, 200]),
            st.integers(0, 2),
            st.booleans(),
        ),
        max_size=30,
    ),
    st.integers(200, 3500),
    st.sampled_from([10, 100, 1000]),
    st.booleans(),
    st.sampled_from(["default", "ports", "zone"]),
    st.lists(st.tuples(st.integers(0, 8), st.integers(100, 2000), st.sampled_from([10, 100, 1000])), max_size=3),
    st.tuples(st.sampled_from([0, 10, 40, 100]), st.integers(1, 4), st.integers(0, 99)),
    st.sampled_from([1, 3]),
)
def test_dry_runs_together_decide_as_node_by_node(
    outrank: bool,
    shapes: list[tuple[int, bool]],
    running: list[tuple[int, int, int, int, bool]],
    cpu: int,
    priority: int,
    budgets: bool,
    own_rules: str,
    nominated: list[tuple[int, int, int]],
    sample: tuple[int, int, int],
    batch_from: int,
) -> None:
    # (batch_from 3: chunks of at least three nodes, a shorter tail joining the chunk before it)
    preemption.BATCH_FROM = batch_from  # (the fixture restores it)
    nodes = [
        node(
            f"n{i}",
            {"zone": "bad" if i % 4 == 1 else "good"},
            allocatable={"cpu": str(c), "memory": "8Gi", "pods": "5"},
            taints=[{"key": "k", "effect": "NoSchedule"}] if tainted and i % 3 == 0 else (),
        )
        for i, (c, tainted) in enumerate(shapes)
    ]
    pods = [
        _pod(f"r{j}", c, prio, f"n{n % len(nodes)}", f"app{app}", port and j % 4 == 0)
        for j, (n, c, prio, app, port) in enumerate(running)
    ]
    pdbs = [pdb("b0", "default", {"app": "app0"}, 1)] if budgets else []
    cluster = state(nodes, pods, pdbs)
    own = {"ports": PORTS_RULES, "zone": ZONE_RULES}.get(own_rules)
    rules = load_rules_text({"r.rules": own}) if own is not None else default_rules()
    incoming = _pod("incoming", cpu, priority, port=own_rules == "ports")
    snapshot = cluster.snapshot()
    preemption.OUTRANK = outrank  # (the fixture restores it)
    held: dict[str, tuple[Any, ...]] = {}
    for k, (n, c, prio) in enumerate(nominated):  # pods nominated to nodes, of priority >= the pod's
        if prio >= priority:
            name = f"n{n % len(nodes)}"
            held[name] = (*held.get(name, ()), _pod(f"nominated{k}", c, prio, name))
    reserved = Reserved(held) if held else None
    # the sample (DefaultPreemptionArgs) and its offset: the same for the three
    sampling, seed = preemption.Sampling(sample[0], sample[1]), sample[2]
    kw: dict[str, Any] = {"sampling": sampling}
    kw["rng"] = random.Random(seed)
    batched = preemption.preempt(
        snapshot, rules.session(), incoming, None, reserved, **kw
    )  # (this module's: with columns)
    # the statuses as the cycle hands them over: an array over the nodes
    found = node_statuses(rules.bind(incoming, snapshot), snapshot.nodes)
    codes = np.array(
        [{None: 0, Code.UNSCHEDULABLE: 1}.get(found.get(n.name), 2) for n in snapshot.nodes], dtype=np.int8
    )
    statuses = NodeStatuses(codes, snapshot.nodes, {n.name: i for i, n in enumerate(snapshot.nodes)})
    kw["rng"] = random.Random(seed)
    as_array = preemption.preempt(snapshot, rules.session(), incoming, statuses, reserved, **kw)
    # and as a cycle calls it: with what its walk found of each node (its first failing filter),
    # which the dry runs read for the filters no pod changes instead of asking them again, and
    # its binding of the pod (the dry runs together evaluate through it; node by node, through a
    # private one on an overlay)
    kw["rng"] = random.Random(seed)
    session = rules.session()
    cycle_bound = session.bind(incoming, snapshot)
    walked = _walked(rules, incoming, snapshot)
    with_first = preemption.preempt(snapshot, session, incoming, walked, reserved, cycle_bound=cycle_bound, **kw)
    cycle_bound.release()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(preemption, "BATCH_FROM", 10**9)
        kw["rng"] = random.Random(seed)
        alone = preemption.preempt(snapshot, rules.session(), incoming, None, reserved, **kw)
    expected = (alone.nominated, [v.key for v in alone.victims], alone.message)
    assert (batched.nominated, [v.key for v in batched.victims], batched.message) == expected
    assert (as_array.nominated, [v.key for v in as_array.victims], as_array.message) == expected
    assert (with_first.nominated, [v.key for v in with_first.victims], with_first.message) == expected


def _walked(rules: Any, incoming: Any, snapshot: Any) -> NodeStatuses:
    """The node statuses as a cycle whose walk found no node hands them over: codes, and each
    node's first failing filter (node by node here, as BoundRules.first_failure gives it)."""
    bound = rules.bind(incoming, snapshot)
    index = {id(f): i for i, f in enumerate(bound.filters)}
    codes, first = [], []
    for n in snapshot.nodes:
        failure = bound.first_failure(n)
        first.append(-1 if failure is None else index[id(failure[0])])
        codes.append(0 if failure is None else 2 if failure[0].unresolvable(n) else 1)
    names = tuple(f.name for f in bound.filters)
    rows = {n.name: i for i, n in enumerate(snapshot.nodes)}
    bound.release()
    return NodeStatuses(np.array(codes, dtype=np.int8), snapshot.nodes, rows, np.array(first, dtype=np.intp), names)


class _GiveUp(Exception):
    pass


@pytest.mark.parametrize("allowed", [0, 1, 2])
def test_a_cancelled_cycle_gives_the_dry_runs_together_up(allowed: int) -> None:
    """``between`` (a cycle's cancellation check) is called before the dry runs done together and
    between their steps: raising there gives preemption up, and the snapshot is left as it was."""
    nodes = [node(f"n{i}", allocatable={"cpu": "1", "memory": "8Gi", "pods": "5"}) for i in range(4)]
    pods = [_pod(f"r{i}-{k}", 300, 0, f"n{i}") for i in range(4) for k in range(3)]
    cluster = state(nodes, pods, [])
    snapshot = cluster.snapshot()
    before = [sorted(p.key for p in n.pods) for n in snapshot.nodes]
    calls: list[int] = []

    def between() -> None:
        calls.append(1)
        if len(calls) > allowed:
            raise _GiveUp

    with pytest.raises(_GiveUp):
        columns = ColumnStore().current(snapshot)
        REAL_PREEMPT(snapshot, default_rules().session(), _pod("incoming", 800, 100), None, None, columns, between)
    assert len(calls) == allowed + 1
    assert [sorted(p.key for p in n.pods) for n in snapshot.nodes] == before


def test_a_nominated_pod_whose_anti_affinity_selects_the_preemptor_is_not_added_as_numbers() -> None:
    """A pod nominated to a node, whose required anti-affinity selects the preemptor, keeps it
    off that node when added (upstream's InterPodAffinity AddPod counts its terms): the dry runs
    done together, which add nominated pods as requests and counts only, leave such nodes to the
    node-by-node dry run, and both ways decide alike."""
    nodes = [
        node(f"n{i}", {"kubernetes.io/hostname": f"n{i}"}, allocatable={"cpu": "1", "memory": "8Gi", "pods": "5"})
        for i in range(4)
    ]
    pods = [_pod(f"r{i}-{k}", 300, 0, f"n{i}") for i in range(4) for k in range(3)]
    incoming = _pod("incoming", 800, 100, app="web")
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    spec = {
        "priority": 1000,
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}],
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    }
    # nominated to the node the preemptor would otherwise take (the first in node order)
    reserved = Reserved({"n0": (pod("held", spec=spec, labels={"app": "db"}, node_name="n0"),)})
    snapshot = state(nodes, pods, []).snapshot()
    batched = preemption.preempt(snapshot, default_rules().session(), incoming, None, reserved)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(preemption, "BATCH_FROM", 10**9)
        alone = preemption.preempt(snapshot, default_rules().session(), incoming, None, reserved)
    assert alone.nominated not in (None, "n0")
    assert (batched.nominated, [v.key for v in batched.victims]) == (alone.nominated, [v.key for v in alone.victims])


def test_each_step_asks_only_the_filters_a_pod_put_back_changes() -> None:
    """The steps of the dry runs together ask only the filters reading what a pod put back
    changes (rulesched.engine.dryrun.changing_filters): of the default profile's, those reading
    the node's pods, free resources and host ports; never taints, labels or the node's name,
    which every node tried passed with all of its pods off."""
    rules = default_rules()
    cluster = state([node("n0", allocatable={"cpu": "2", "memory": "8Gi", "pods": "5"})], [])
    incoming = _pod("incoming", 500, 10, port=True)
    bound = rules.bind(incoming, cluster.snapshot())
    assert dryrun.node_local(bound)
    names = [bound.filters[i].name for i in dryrun.changing_filters(bound)]
    assert "NodeResourcesFit" in names and "NodePorts" in names
    assert not {"TaintToleration", "NodeAffinity", "NodeName", "NodeUnschedulable"} & set(names)
