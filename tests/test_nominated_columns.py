"""Nodes checked with their nominated pods added, many at once as columns
(rulesched.engine.held_failures, through ReservedCheck.judge), answer as the node-by-node check
on a private overlay: the same status (failing rule, reasons, unresolvable) or none, on
generated clusters (node sizes, taints, pods of every priority, nominated pods with host ports
or required anti-affinity, which the columns leave to the node-by-node check)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.engine import ColumnStore, dryrun
from rulesched.scheduler.nominator import AsColumns, Reserved, ReservedCheck
from tests.upstream.harness import default_rules, node, pod, state


def _pod(name: str, cpu: int, on: str = "", port: bool = False, anti: bool = False, app: str = "a") -> Any:
    container: dict[str, Any] = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": f"{cpu}m"}}}
    if port:
        container["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    spec: dict[str, Any] = {"priority": 100, "containers": [container]}
    if anti:
        term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod(name, spec=spec, labels={"app": app}, node_name=on)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(2, 6), st.booleans()), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 7), st.integers(100, 1500)), max_size=20),
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2000), st.booleans(), st.booleans()), max_size=10),
    st.integers(0, 3000),
    st.booleans(),
)
def test_nodes_checked_together_answer_as_node_by_node(
    shapes: list[tuple[int, int, bool]],
    running: list[tuple[int, int]],
    nominated: list[tuple[int, int, bool, bool]],
    cpu: int,
    port: bool,
) -> None:
    nodes = [
        node(
            f"n{i}",
            {"kubernetes.io/hostname": f"n{i}"},
            allocatable={"cpu": str(c), "memory": "8Gi", "pods": str(slots)},
            taints=[{"key": "k", "effect": "NoSchedule"}] if tainted else (),
        )
        for i, (c, slots, tainted) in enumerate(shapes)
    ]
    pods = [_pod(f"r{j}", c, f"n{n % len(nodes)}") for j, (n, c) in enumerate(running)]
    held: dict[str, tuple[Any, ...]] = {}
    for k, (n, c, ports, anti) in enumerate(nominated):
        name = f"n{n % len(nodes)}"
        held[name] = (*held.get(name, ()), _pod(f"held{k}", c, name, ports and k % 2 == 0, anti and k % 3 == 0, "db"))
    snapshot = state(nodes, pods, []).snapshot()
    rules = default_rules()
    incoming = _pod("incoming", cpu, port=port, app="web")
    session = rules.session()
    bound = session.bind(incoming, snapshot)
    columns = ColumnStore().current(snapshot)
    rows = {n.name: i for i, n in enumerate(snapshot.nodes)}
    together = AsColumns(bound, lambda: columns, lambda: rows)
    reserved = Reserved(held)
    names = [n.name for n in snapshot.nodes]
    batched = ReservedCheck(reserved, snapshot, session, incoming, together=together)
    batched.judge(names)
    alone = ReservedCheck(reserved, snapshot, rules.session(), incoming)
    # the nodes the pod fits without their nominated pods (a walk's feasible rows), judged
    # asking only the filters those pods change
    fitting = [n.name for n in snapshot.nodes if bound.first_failure(n) is None]
    memo: dict[str, Any] = {}  # (a class's, across cycles: unasked verdicts kept as such)
    spared = ReservedCheck(reserved, snapshot, rules.session(), incoming, memo, bound.token, together)
    spared.judge(fitting, fitting=True)
    later = ReservedCheck(reserved, snapshot, rules.session(), incoming, memo, bound.token, together)
    later.judge(fitting, fitting=True)
    try:
        expected = [alone.failure(n) for n in names]
        assert [batched.failure(n) for n in names] == expected
        wanted = [e for n, e in zip(names, expected, strict=True) if n in fitting]
        # whether each fits is known without asking why (passes), and why, when asked, is the same
        assert [spared.passes(n) for n in fitting] == [e is None for e in wanted]
        assert [spared.failure(n) for n in fitting] == wanted
        assert [later.passes(n) for n in reversed(fitting)] == [e is None for e in reversed(wanted)]
        assert [later.failure(n) for n in reversed(fitting)] == list(reversed(wanted))
    finally:
        later.release()
        batched.release()
        alone.release()
        spared.release()
        bound.release()


def test_why_a_judged_node_fails_asks_only_the_filter_it_failed(monkeypatch: Any) -> None:
    """A node the pod fits alone but not beside its nominated pods, judged verdict first: when
    its status is asked, only the reasons and unresolvable clause of the filter it failed are
    (no filter is evaluated again), in this check and in a later one reading the class's memo."""
    nodes = [
        node(f"n{i}", {"kubernetes.io/hostname": f"n{i}"}, allocatable={"cpu": "2", "memory": "8Gi", "pods": "10"})
        for i in range(3)
    ]
    held = {"n0": (_pod("held0", 1500, "n0", app="db"),), "n2": (_pod("held2", 200, "n2", app="db"),)}
    snapshot = state(nodes, [_pod("r0", 300, "n1")], []).snapshot()
    rules = default_rules()
    incoming = _pod("incoming", 1000, app="web")
    session = rules.session()
    bound = session.bind(incoming, snapshot)
    columns = ColumnStore().current(snapshot)
    rows = {n.name: i for i, n in enumerate(snapshot.nodes)}
    together = AsColumns(bound, lambda: columns, lambda: rows)
    names = [n.name for n in snapshot.nodes]
    alone = ReservedCheck(Reserved(held), snapshot, rules.session(), incoming)
    memo: dict[str, Any] = {}
    checks = [ReservedCheck(Reserved(held), snapshot, session, incoming, memo, bound.token, together) for _ in range(2)]
    asked: list[str] = []
    try:
        expected = [alone.failure(n) for n in names]
        assert [e is None for e in expected] == [False, True, True], expected
        assert expected[0] is not None and expected[0].rule == "NodeResourcesFit"
        for check in checks:  # (the second reads the first's unasked verdicts from the memo)
            check.judge(names, fitting=True)
            assert [check.passes(n) for n in names] == [False, True, True]
        filter_, reasons = dryrun._filter, dryrun.failing_reasons

        def counted_filter(b: Any, cols: Any, rows_: Any, index: int) -> Any:
            asked.append(f"filter {b.filters[index].name}")
            return filter_(b, cols, rows_, index)

        def counted_reasons(b: Any, cols: Any, rows_: Any, index: int, unknown: Any = None) -> Any:
            asked.append(f"reasons {b.filters[index].name}")
            return reasons(b, cols, rows_, index, unknown)

        for check in checks:
            monkeypatch.setattr(dryrun, "_filter", counted_filter)
            monkeypatch.setattr(dryrun, "failing_reasons", counted_reasons)
            assert [check.failure(n) for n in names] == expected
            monkeypatch.undo()
        assert asked == ["reasons NodeResourcesFit", "reasons NodeResourcesFit"]
    finally:
        for check in (*checks, alone):
            check.release()
        bound.release()
