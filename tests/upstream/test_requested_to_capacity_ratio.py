"""NodeResourcesFit Score with the RequestedToCapacityRatio strategy, through
rules/requested-to-capacity-ratio.rules (cpu and memory, weight 1 each).

Ported from kube-scheduler's pkg/scheduler/framework/plugins/noderesources/fit_test.go TestFitScore:
"test case for ScoringStrategy RequestedToCapacityRatio case1" (the bundled shape {0: 10, 100: 0}),
its "if PreScore is not called" twin (the same here: there is no PreScore state to miss) and "case2"
({0: 0, 100: 10}, run on a copy of the rules with that shape). They score a node the pod does not
fit, so they run here rather than in rules/requested-to-capacity-ratio.test.yaml, which holds
requested_to_capacity_ratio_test.go's TestRequestedToCapacityRatioScoringStrategy.

Not ported: TestResourceBinPackingSingleExtended and TestResourceBinPackingMultipleExtended (extended
resources with their own weights: the bundled file scores cpu and memory) and TestBrokenLinearFunction
(the helper on unscaled points; the rules scale the shape to 0-100 first, as the plugin does). In
their place a property compares the rules with upstream's arithmetic, written out below, over
random two-point shapes, requests and node sizes.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.lang import RuleSet, load_rules_text, resolve_rules_path
from tests.helpers.profiles import examples
from tests.upstream.harness import node, pod, state

RULES_TEXT = resolve_rules_path("requested-to-capacity-ratio").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=64)
def rules_with_shape(low: tuple[int, int], high: tuple[int, int]) -> RuleSet:
    """The bundled file with another shape: (utilization, score) points, upstream's units."""
    text = RULES_TEXT
    for name, value in (
        ("rtcr_shape_low_utilization", low[0]),
        ("rtcr_shape_low_score", low[1]),
        ("rtcr_shape_high_utilization", high[0]),
        ("rtcr_shape_high_score", high[1]),
    ):
        text, replaced = _replace_let(text, name, value)
        assert replaced, name
    return load_rules_text({"rtcr.rules": text})


def _replace_let(text: str, name: str, value: int) -> tuple[str, bool]:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(f"let {name} = "):
            lines[i] = f"let {name} = {value}"
            return "\n".join(lines) + "\n", True
    return text, False


def mkpod(cpu: str | None, memory: str | None, name: str = "p", node_name: str = "") -> Any:
    """st.MakePod(), with one container requesting cpu and memory when given."""
    containers = [] if cpu is None else [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    return pod(name, spec={"containers": containers}, node_name=node_name)


def fit_score(rules: RuleSet, incoming: Any, cluster: Any, name: str) -> int:
    bound = rules.bind(incoming, cluster)
    (score,) = [s for s in bound.scores if s.name == "NodeResourcesFit"]
    info = cluster.node_view(name)
    assert info is not None
    return score.score(info)


# --- TestFitScore ---------------------------------------------------------------------------------

FIT_SCORE_NODES = [("node1", "4", "10000"), ("node2", "6", "10000")]
FIT_SCORE_PODS = [mkpod("2", "4000", "e1", "node1"), mkpod("1", "2000", "e2", "node2")]

FIT_SCORE = [
    ("test case for ScoringStrategy RequestedToCapacityRatio case1", (0, 10), (100, 0), {"node1": 10, "node2": 32}),
    (
        "test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called",
        (0, 10),
        (100, 0),
        {"node1": 10, "node2": 32},
    ),
    ("test case for ScoringStrategy RequestedToCapacityRatio case2", (0, 0), (100, 10), {"node1": 95, "node2": 68}),
]


@pytest.mark.parametrize(("low", "high", "want"), [pytest.param(*c[1:], id=c[0]) for c in FIT_SCORE])
def test_fit_score(low: tuple[int, int], high: tuple[int, int], want: dict[str, int]) -> None:
    nodes = [node(n, allocatable={"cpu": c, "memory": m, "pods": "32"}) for n, c, m in FIT_SCORE_NODES]
    cluster = state(nodes, FIT_SCORE_PODS)
    rules = rules_with_shape(low, high)
    assert {n: fit_score(rules, mkpod("3", "5000"), cluster, n) for n, _, _ in FIT_SCORE_NODES} == want


def test_bundled_file_has_the_shape_of_upstream_tests() -> None:
    text = "\n".join(line for line in RULES_TEXT.splitlines() if line.startswith("let rtcr_shape_"))
    assert text.split("\n") == [
        "let rtcr_shape_low_utilization = 0",
        "let rtcr_shape_low_score = 10",
        "let rtcr_shape_high_utilization = 100",
        "let rtcr_shape_high_score = 0",
    ]


# --- upstream's arithmetic, as a property ---------------------------------------------------------


def broken_linear(points: list[tuple[int, int]], p: int) -> int:
    """helper.BuildBrokenLinearFunction (Go int64 division truncates toward zero)."""
    for i, (u, s) in enumerate(points):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = points[i - 1]
            delta = (s - s0) * (p - u0)
            return s0 + int(delta / (u - u0)) if abs(delta) < 2**52 else s0 + _trunc_div(delta, u - u0)
    return points[-1][1]


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def upstream_score(low: tuple[int, int], high: tuple[int, int], requested: list[int], allocatable: list[int]) -> int:
    """buildRequestedToCapacityRatioScorerFunction with cpu and memory at weight 1."""
    points = [(low[0], low[1] * 10), (high[0], high[1] * 10)]
    total = weights = 0
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        utilization = 100 if req > alloc else req * 100 // alloc
        score = broken_linear(points, utilization)
        if score > 0:
            total += score
            weights += 1
    return 0 if weights == 0 else math.floor(total / weights + 0.5)


milli = st.integers(0, 64_000)


@settings(max_examples=examples(60), deadline=None)
@given(
    u=st.tuples(st.integers(0, 100), st.integers(0, 100)).filter(lambda t: t[0] < t[1]),
    s=st.tuples(st.integers(0, 10), st.integers(0, 10)),
    used=st.tuples(milli, milli),
    wanted=st.tuples(milli, milli),
    size=st.tuples(milli, milli),
)
def test_rules_follow_upstream_arithmetic(
    u: tuple[int, int], s: tuple[int, int], used: tuple[int, int], wanted: tuple[int, int], size: tuple[int, int]
) -> None:
    low, high = (u[0], s[0]), (u[1], s[1])
    cluster = state(
        [node("n", allocatable={"cpu": f"{size[0]}m", "memory": f"{size[1]}m", "pods": "32"})],
        [mkpod(f"{used[0]}m", f"{used[1]}m", "e", "n")],
    )
    got = fit_score(rules_with_shape(low, high), mkpod(f"{wanted[0]}m", f"{wanted[1]}m"), cluster, "n")
    requested = [used[0] + wanted[0], used[1] + wanted[1]]
    assert got == upstream_score(low, high, requested, list(size))
