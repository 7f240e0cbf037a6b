"""A cycle whose walk found no node hands preemption each node's first failing filter with the
statuses (rulesched.scheduler.cycle.Cycle.statuses, ``NodeStatuses.first``), which the dry runs
read for the filters no pod changes (rulesched.engine.dryrun.Known): on generated clusters it is
the filter BoundRules.first_failure names node by node (-1 where the node fits), and the codes
are those of node_statuses."""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from rulesched.lang.load import load_rules_text
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.evaluate import NodeStatuses, node_statuses
from rulesched.scheduler.framework import Code, SchedulerSettings
from tests.upstream.harness import default_rules, node, pod, state

ZONE_RULES = """
extends "default"

filter zone_ok:
    node.labels["zone"] != "bad"
    else "node(s) in a bad zone"
"""


def _pod(name: str, cpu: int, on: str = "") -> Any:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": f"{cpu}m"}}}
    return pod(name, spec={"priority": 5, "containers": [container]}, node_name=on)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.booleans()), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.integers(100, 1500)), max_size=25),
    st.integers(1500, 5000),
    st.booleans(),
)
def test_a_walk_that_finds_nothing_hands_on_each_nodes_first_failing_filter(
    shapes: list[tuple[int, bool, bool]], running: list[tuple[int, int]], cpu: int, zone: bool
) -> None:
    nodes = [
        node(
            f"n{i}",
            {"zone": "bad" if bad else "good"},
            allocatable={"cpu": str(c), "memory": "8Gi", "pods": "5"},
            taints=[{"key": "k", "effect": "NoSchedule"}] if tainted else (),
        )
        for i, (c, bad, tainted) in enumerate(shapes)
    ]
    pods = [_pod(f"r{j}", c, f"n{n % len(nodes)}") for j, (n, c) in enumerate(running)]
    snapshot = state(nodes, pods, []).snapshot()
    rules = load_rules_text({"r.rules": ZONE_RULES}) if zone else default_rules()
    incoming = _pod("incoming", cpu)
    cycle = Cycle(SchedulerSettings(percentage_of_nodes_to_score=100))
    result, bound = cycle.run(incoming, snapshot, rules.session())
    try:
        statuses = cycle.statuses(bound, snapshot)
        if result.code is Code.SCHEDULED:
            event("placed")  # (nothing handed on)
            return
        assert isinstance(statuses, NodeStatuses) and statuses.first is not None
        assert statuses.filters == tuple(f.name for f in bound.filters)
        index = {id(f): i for i, f in enumerate(bound.filters)}
        expected = []
        for n in snapshot.nodes:
            failure = bound.first_failure(n)
            expected.append(-1 if failure is None else index[id(failure[0])])
        assert statuses.first.tolist() == expected
        assert dict(statuses) == dict(node_statuses(bound, snapshot.nodes))
    finally:
        bound.release()
