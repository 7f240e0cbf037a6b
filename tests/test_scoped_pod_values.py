"""Pod-side values under a quantifier's variable (``pod.requests[r]`` for each ``r in
pod.requests``), evaluated as columns: kept in the binding's scratch under the variables'
values (rulesched.engine.vectorise._pod_value), so a rule evaluated again (the walk's windows,
each step of preemption's dry runs) asks the interpreter nothing more, and each element still
reads its own value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rulesched import engine
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.engine import NodeColumns
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.model import Node, Pod, Toleration
from tests.helpers.rules import load

TEXT = """filter fits:
    all(r in pod.requests where pod.requests[r] <= 0 or pod.requests[r] <= node.free[r])

filter tolerates_all:
    all(t in pod.tolerations where t.key == "a" or len(node.pods) >= 0)
"""


def _cluster() -> list[NodeInfo]:
    sizes = [(4000, 2**30), (1000, 2**32), (8000, 2**20), (3000, 2**31)]
    return [
        NodeInfo(Node(f"n{i}", allocatable={"cpu": cpu, "memory": memory, "pods": 110}))
        for i, (cpu, memory) in enumerate(sizes)
    ]


def _asked(interp: Interpreter, calls: list[dict[str, Any]]) -> None:
    """Record the scope of every evaluation the column evaluator asks of the interpreter (not
    the interpreter's own inner ones)."""
    evaluate, depth = interp.evaluate, [0]

    def recorded(expr: Any, ctx: Any, node: Any, scope: Any = None) -> Any:
        if not depth[0]:
            calls.append(dict(scope or {}))
        depth[0] += 1
        try:
            return evaluate(expr, ctx, node, scope)
        finally:
            depth[0] -= 1

    interp.evaluate = recorded  # type: ignore[method-assign]


def _first_filter(
    checked: Any, pod: Pod
) -> tuple[Callable[[np.ndarray], np.ndarray], list[bool], list[dict[str, Any]]]:
    """The first filter of ``checked`` bound to ``pod``, as columns over :func:`_cluster`'s rows;
    the interpreter's answers node by node; the scopes of what the columns ask it from now on."""
    cluster = _cluster()
    cols = NodeColumns(cluster)
    bound = RuleSet(checked).bind(pod)
    bodies = engine.columns_of(bound)
    assert bodies is not None and bodies.filters[0] is not None
    body, evaluator = bodies.filters[0], bodies.evaluator
    interp = Interpreter(checked.notes, checked.lets)
    expected = [bool(interp.body(checked.rules[0], EvalContext(pod), n)) for n in cluster]
    calls: list[dict[str, Any]] = []
    _asked(evaluator.interp, calls)
    return (lambda rows: evaluator.filter(body, bound.ctx, cols, rows)), expected, calls


def test_each_element_reads_its_own_value_and_asks_once() -> None:
    # cpu asks more than n1 has, memory more than n0 and n2 have: a value kept without its
    # resource name would answer every element with the first one's request
    pod = Pod("p", requests={"cpu": 2000, "memory": 2**30 + 1})
    filter_, expected, calls = _first_filter(load(TEXT), pod)
    assert expected == [False, False, False, True]
    rows = np.arange(len(expected), dtype=np.intp)
    first = filter_(rows).tolist()
    scoped = [c for c in calls if c]
    assert first == expected
    assert sorted({c["r"] for c in scoped}) == ["cpu", "memory"]
    calls.clear()
    again = filter_(rows[::-1]).tolist()
    assert again == expected[::-1]
    assert [c for c in calls if c] == []  # every value under r from the scratch


def test_values_under_a_record_are_asked_each_time() -> None:
    """A variable holding a record (a toleration) keys nothing: asked anew every evaluation."""
    checked = load(TEXT)
    cluster = _cluster()
    pod = Pod("p", tolerations=(Toleration(key="a"), Toleration(key="b")))
    bound = RuleSet(checked).bind(pod)
    bodies = engine.columns_of(bound)
    assert bodies is not None and bodies.filters[1] is not None
    calls: list[dict[str, Any]] = []
    _asked(bodies.evaluator.interp, calls)
    rows = np.arange(len(cluster), dtype=np.intp)
    asked = []
    for _ in range(2):
        calls.clear()
        assert bodies.evaluator.filter(bodies.filters[1], bound.ctx, NodeColumns(cluster), rows).tolist() == [True] * 4
        asked.append([c["t"].key for c in calls if c])
    assert asked[0] == asked[1] and set(asked[0]) == {"a", "b"}


def test_constants_and_variables_are_not_asked() -> None:
    """Literals (coerced as the interpreter would) and a quantifier's variable itself are read
    without the interpreter; the list a quantifier walks is asked once per cycle."""
    checked = load(
        "filter room:\n    all(r in pod.requests where node.free[r] - 500m >= pod.requests[r] - 0 or r == node.name)\n"
    )
    filter_, expected, calls = _first_filter(checked, Pod("p", requests={"cpu": 3000, "memory": 2**29}))
    assert expected == [True, False, False, False]
    rows = np.arange(len(expected), dtype=np.intp)
    assert filter_(rows).tolist() == expected
    first = len(calls)
    assert 0 < first <= 1 + 2 * 2  # (pod.requests once; per resource pod.requests[r] - 0 and r == ...: no 500m, no r)
    calls.clear()
    assert filter_(rows[::-1]).tolist() == expected[::-1]
    assert calls == []
