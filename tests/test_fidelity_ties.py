"""The fidelity harness sets apart preemptions kube-scheduler's pickOneNodeForPreemption cannot
order (benchmarks/kube_bench/fidelity.py preemption_tie), criteria from v1.37.2's
framework/preemption/preemption.go and util.GetEarliestPodStartTime; and victims on one node
SelectVictimsOnNode's unstable sort leaves to chance (reprieve_tie)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from kube_bench.fidelity import preemption_tie, reprieve_tie  # noqa: E402


def pod(name: str, priority: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"priorityClassName": f"bench-priority-{priority}"},
    }


OBJECTS = {
    "running": [pod("a", 1), pod("b", 1), pod("c", 1), pod("d", 2), pod("e", 1, {"app": "kept"})],
    "pending": [],
    "pdbs": [{"spec": {"selector": {"matchLabels": {"app": "kept"}}}}],
}


def test_victims_started_in_the_same_second_tie() -> None:
    times = {"a": "2026-12-03T10:00:01Z", "b": "2026-12-03T10:00:01Z", "c": "2026-12-03T10:00:02Z"}
    assert preemption_tie(OBJECTS, ["a"], ["b"], times)


def test_a_later_start_decides() -> None:
    # the candidate whose highest-priority victims started latest wins: no tie
    times = {"a": "2026-12-03T10:00:01Z", "c": "2026-12-03T10:00:02Z"}
    assert not preemption_tie(OBJECTS, ["a"], ["c"], times)


def test_never_started_victims_tie_and_beat_a_started_one() -> None:
    assert preemption_tie(OBJECTS, ["a"], ["b"], {})
    # time.Now() is after any start time: the never-started victim's node wins outright
    assert not preemption_tie(OBJECTS, ["a"], ["b"], {"a": "2026-12-03T10:00:01Z"})


def test_earlier_criteria_come_first() -> None:
    times = {"a": "2026-12-03T10:00:01Z", "d": "2026-12-03T10:00:01Z"}
    assert not preemption_tie(OBJECTS, ["a"], ["d"], times)  # highest priority differs
    assert not preemption_tie(OBJECTS, ["a"], ["b", "c"], {})  # count differs
    assert not preemption_tie(OBJECTS, ["a"], ["e"], {})  # a budget covers e


def test_only_the_highest_priority_victims_start_times_count() -> None:
    times = {"a": "2026-12-03T10:00:05Z", "b": "2026-12-03T10:00:09Z", "d": "2026-12-03T10:00:01Z"}
    # both sets' highest-priority victim is d (priority 2): same earliest start, same sums
    objects = {**OBJECTS, "running": [*OBJECTS["running"], pod("f", 2)]}
    times["f"] = "2026-12-03T10:00:01Z"
    assert preemption_tie(objects, ["a", "d"], ["b", "f"], times)


def test_same_node_victims_alike_in_priority_start_and_budget_tie() -> None:
    """Fidelity Run 7's pending-55: pending-30 in both sets, then one of three priority-1 pods
    started in the same second, each under a budget, reprieved first by chance."""
    objects = {
        "running": [pod("r92", 1, {"app": "x"}), pod("r124", 1, {"app": "y"}), pod("r226", 1, {"app": "z"})],
        "pending": [pod("p30", 1)],
        "pdbs": [{"spec": {"selector": {"matchLabels": {"app": a}}}} for a in "xyz"],
    }
    same = {n: "2026-12-04T21:15:26Z" for n in ("r92", "r124", "r226")}
    assert reprieve_tie(objects, ["p30", "r124", "r92"], ["p30", "r226"], same)


def test_same_node_victims_that_differ_in_order_do_not_tie() -> None:
    times = {"a": "2026-12-03T10:00:01Z", "b": "2026-12-03T10:00:01Z", "c": "2026-12-03T10:00:02Z"}
    assert reprieve_tie(OBJECTS, ["a"], ["b"], times)
    assert not reprieve_tie(OBJECTS, ["a"], ["c"], times)  # c started later: reprieved after a
    assert not reprieve_tie(OBJECTS, ["a"], ["d"], times)  # another priority
    assert not reprieve_tie(OBJECTS, ["a"], ["e"], {})  # e under a budget, a not: another group
    assert not reprieve_tie(OBJECTS, ["a"], ["a"], times)  # nothing differs
