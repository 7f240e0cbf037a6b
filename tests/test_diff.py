"""``rulesched diff``: two rule sets simulated on one cluster; the pods that change, the rules that
made the difference, exit codes, JSON output and the explanation limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

# Two score rules pulling towards different nodes: gold wins (2 x 50 against 1 x 60).
OLD = """filter fits: node.free.cpu >= pod.requests.cpu else "Insufficient cpu"
score gold weight 2: if node.labels["tier"] == "gold" then 50 else 0
score silver weight 1: if node.labels["tier"] == "silver" then 60 else 0
"""
# ... and silver wins once its weight is raised (5 x 60 against 2 x 50).
HEAVIER_SILVER = OLD.replace("score silver weight 1", "score silver weight 5")
SMALL_ONLY = OLD + 'filter small_only: pod.requests.cpu < 2 else "node(s) take only small pods"\n'


def node(name: str, tier: str, cpu: str = "4") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "tier": tier}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Pending"},
    }


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def cluster(tmp_path: Path, *items: dict[str, Any]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return str(path)


@pytest.fixture
def three_pods(tmp_path: Path) -> str:
    return cluster(tmp_path, node("a", "gold"), node("b", "silver"), pod("p1"), pod("p2"), pod("p3"))


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["diff", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(capsys, *args, "--output", "json")
    assert err == ""
    document: dict[str, Any] = json.loads(out)
    return code, document


# --- a changed weight ---------------------------------------------------------------------------


def test_a_raised_weight_moves_pods_and_names_that_score(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = write(tmp_path / "old.rules", OLD), write(tmp_path / "new.rules", HEAVIER_SILVER)
    code, out, err = run(capsys, "--old", old, "--new", new, three_pods)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == "3 pods moved, 0 newly unschedulable, 0 newly scheduled (of 3 pending)"
    blocks = out.split("\n\n")[1:]
    assert [b.splitlines()[0] for b in blocks] == [f"default/p{i}: moved a → b" for i in (1, 2, 3)]
    for block in blocks:
        # silver's pull towards b grew from 1 x 60 to 5 x 60; gold's (2 x -50) did not change
        assert "  score silver: weight 1→5, b−a +60 → +300" in block.splitlines()
        assert "gold" not in block
        assert "  total b−a: -40 → +200 (normalised over these two nodes)" in block.splitlines()


def test_identical_rule_sets_change_nothing_and_exit_0(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path / "old.rules", OLD)
    folder = tmp_path / "same"
    folder.mkdir()
    write(folder / "policy.rules", OLD)
    code, out, err = run(capsys, "--old", old, "--new", str(folder), three_pods)
    assert (code, err) == (0, "")
    assert out == (
        "0 pods moved, 0 newly unschedulable, 0 newly scheduled (of 3 pending)\nno rule differs between --old and --new\n"
    )
    # --old defaults to the bundled default rules, which --new may name as simulate's --rules does
    assert run(capsys, "--new", "default", three_pods)[0] == 0


def test_composed_sets_diff_like_simulates_rules(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--old/--new are repeatable: a later file overrides a rule of an earlier one."""
    old = write(tmp_path / "old.rules", OLD)
    heavier = write(
        tmp_path / "heavier.rules",
        'override score silver weight 5: if node.labels["tier"] == "silver" then 60 else 0\n',
    )
    code, out, _ = run(capsys, "--old", old, "--new", old, "--new", heavier, three_pods)
    assert code == 1
    assert "  score silver: weight 1→5, b−a +60 → +300" in out.splitlines()


# --- filters ------------------------------------------------------------------------------------


def test_a_new_filter_makes_a_pod_unschedulable_and_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster(tmp_path, node("a", "gold"), node("b", "silver"), pod("small"), pod("big", cpu="3"))
    old, new = write(tmp_path / "old.rules", OLD), write(tmp_path / "new.rules", SMALL_ONLY)
    code, out, _ = run(capsys, "--old", old, "--new", new, path)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "0 pods moved, 1 newly unschedulable, 0 newly scheduled (of 2 pending)"
    assert lines[1:3] == ["rules that differ (--old → --new):", "  filter small_only: added"]
    assert lines[4:] == [
        "default/big: newly unschedulable a → none",
        "  0/2 nodes are available: 2 node(s) take only small pods."
        " preemption: not eligible due to preemptionPolicy=Never.",
        "  filter small_only on a: absent → fail (node(s) take only small pods)",
    ]
    # the other way round the pod is newly scheduled, and the filter that no longer rejects a is named
    code, out, _ = run(capsys, "--old", new, "--new", old, path)
    assert code == 1
    assert out.splitlines()[0] == "0 pods moved, 0 newly unschedulable, 1 newly scheduled (of 2 pending)"
    assert out.splitlines()[1:3] == ["rules that differ (--old → --new):", "  filter small_only: removed"]
    assert out.splitlines()[4:7] == [
        "default/big: newly scheduled none → a",
        "  was: 0/2 nodes are available: 2 node(s) take only small pods."
        " preemption: not eligible due to preemptionPolicy=Never.",
        "  filter small_only on a: fail (node(s) take only small pods) → absent",
    ]


def test_a_knock_on_move_names_no_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """p1 is sent to b by a new filter; p2, after it, then finds b full and takes a: no rule of
    its own differs, and the report says so."""
    path = cluster(
        tmp_path, node("a", "gold", cpu="1"), node("b", "silver", cpu="1"), pod("p1", "600m"), pod("p2", "600m")
    )
    new_text = OLD + 'filter p1_silver when pod.name == "p1": node.labels["tier"] == "silver"\n'
    old, new = write(tmp_path / "old.rules", OLD), write(tmp_path / "new.rules", new_text)
    code, out, _ = run(capsys, "--old", old, "--new", new, path)
    assert code == 1
    p1, p2 = out.split("\n\n")[1:]
    assert p1.splitlines() == [
        "default/p1: moved a → b",
        "  filter p1_silver on a: absent → fail (node(s) didn't satisfy rule p1_silver)",
        "  total b−a: -40 → -40 (normalised over these two nodes)",
    ]
    assert p2.splitlines()[0] == "default/p2: moved b → a"
    assert "no rule differs on b or a in the cluster before scheduling" in p2


def test_a_tightened_filter_is_listed_and_named_for_the_pod_it_leaves_unschedulable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34, item 5: a filter changed from ``< 3`` to ``< 2`` pods a node only bites once the
    nodes have filled, so the cluster before scheduling shows no difference: the diff said "no
    rule differs on n1 ... a knock-on effect" with ``"filters": []`` and never listed the changed
    rule. It is listed first now, and found as the cluster stood once --new had placed the rest."""
    path = cluster(tmp_path, node("a", "gold"), node("b", "silver"), *(pod(f"p{i}") for i in range(1, 6)))
    limit = 'extends "default"\n\nfilter pods_per_node:\n    len(node.pods) < {}\n    else "node runs enough pods"\n'
    old, new = write(tmp_path / "old.rules", limit.format(3)), write(tmp_path / "new.rules", limit.format(2))
    code, out, _ = run(capsys, "--old", old, "--new", new, path)
    assert code == 1
    head, block = out.split("\n\n")
    assert head.splitlines() == [
        "0 pods moved, 1 newly unschedulable, 0 newly scheduled (of 5 pending)",
        "rules that differ (--old → --new):",
        "  filter pods_per_node: changed (body)",
    ]
    lines = block.splitlines()
    assert lines[0].startswith("default/p5: newly unschedulable ") and lines[0].endswith(" → none")
    node_name = lines[0].split()[-3]
    assert lines[2:] == [
        "  in the cluster as --new left it:",
        f"  filter pods_per_node on {node_name}: pass → fail (node runs enough pods)",
    ]
    code, document = run_json(capsys, "--old", old, "--new", new, path)
    (change,) = document["pods"]
    assert [f["rule"] for f in change["explanation"]["filters"]] == ["pods_per_node"]
    assert change["explanation"]["state"] == "in the cluster as --new left it"
    assert document["summary"]["rules"] == [
        {"kind": "filter", "rule": "pods_per_node", "change": "changed", "aspects": ["body"]}
    ]


def test_a_rule_reading_a_changed_let_is_listed_with_it(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "let limit = {}\nfilter fits: node.free.cpu >= pod.requests.cpu\nfilter few: len(node.pods) < limit\n"
    old, new = write(tmp_path / "old.rules", text.format(3)), write(tmp_path / "new.rules", text.format(2))
    code, document = run_json(capsys, "--old", old, "--new", new, three_pods)
    assert document["summary"]["rules"] == [
        {"kind": "filter", "rule": "few", "change": "changed", "aspects": ["let limit"]}
    ]


# --- errors -------------------------------------------------------------------------------------


def test_rules_that_do_not_compile_exit_2_naming_file_line_and_column(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old = write(tmp_path / "old.rules", OLD)
    bad = write(tmp_path / "bad.rules", "score s weight 1:\n    node.free.gpu\n")
    code, out, err = run(capsys, "--old", old, "--new", bad, three_pods)
    assert (code, out) == (2, "")
    *diagnostics, summary = err.strip().splitlines()
    assert summary.startswith(f"rulesched: {bad}:2:5: ")  # the one-line summary comes last,
    assert diagnostics[0].startswith(f"{bad}:2:5: error: ")  # after lint's rendering (caret, hint)
    assert "^" in err


def test_a_missing_cluster_file_or_rules_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = write(tmp_path / "old.rules", OLD)
    code, out, err = run(capsys, "--old", old, "--new", old, str(tmp_path / "missing.yaml"))
    assert (code, out) == (2, "")
    assert err.startswith(f"rulesched: {tmp_path / 'missing.yaml'}: ")
    code, _, err = run(capsys, "--old", old, "--new", str(tmp_path / "nope.rules"), str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "nope.rules: no such file or folder" in err


# --- JSON ---------------------------------------------------------------------------------------


def test_json_output_has_the_summary_each_change_and_its_explanation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = cluster(tmp_path, node("a", "gold"), node("b", "silver"), pod("p1"), pod("big", cpu="3"))
    new_text = HEAVIER_SILVER + 'filter small_only: pod.requests.cpu < 2 else "node(s) take only small pods"\n'
    old, new = write(tmp_path / "old.rules", OLD), write(tmp_path / "new.rules", new_text)
    code, document = run_json(capsys, "--old", old, "--new", new, path)
    assert code == 1
    assert set(document) == {"summary", "pods", "evicted"}
    summary = document["summary"]
    assert {k: summary[k] for k in ("pending", "moved", "newly_unschedulable", "newly_scheduled")} == {
        "pending": 2,
        "moved": 1,
        "newly_unschedulable": 1,
        "newly_scheduled": 0,
    }
    assert (summary["explained"], summary["left_out"]) == (2, 0)
    assert summary["old"]["rules"] == [old] and summary["new"]["rules"] == [new]
    assert (summary["old"]["scheduled"], summary["new"]["scheduled"]) == (2, 1)
    assert summary["old"]["digest"] != summary["new"]["digest"]
    assert set(summary["seconds"]) == {"load", "old", "new", "explain"}
    assert document["evicted"] == {"only_old": [], "only_new": []}

    moved, unschedulable = document["pods"]
    assert moved["pod"] == "default/p1" and moved["change"] == "moved"
    assert moved["old"] == {"node": "a", "message": "Successfully assigned default/p1 to a"}
    assert moved["new"] == {"node": "b", "message": "Successfully assigned default/p1 to b"}
    assert moved["explanation"] == {
        "nodes": ["a", "b"],
        "filters": [],
        "scores": [
            {
                "rule": "silver",
                "old": {"state": "applies", "weight": 1, "scores": {"a": 0, "b": 60}, "difference": 60},
                "new": {"state": "applies", "weight": 5, "scores": {"a": 0, "b": 60}, "difference": 300},
                "change": 240,
            }
        ],
        "totals": {"old": -40, "new": 200},
        "state": "in the cluster before scheduling",
    }
    assert summary["rules"] == [
        {"kind": "score", "rule": "silver", "change": "changed", "aspects": ["weight 1 → 5"]},
        {"kind": "filter", "rule": "small_only", "change": "added", "aspects": []},
    ]
    assert unschedulable["change"] == "newly unschedulable"
    assert unschedulable["new"]["node"] is None
    assert unschedulable["new"]["message"].startswith("0/2 nodes are available: 2 node(s) take only small pods.")
    assert unschedulable["explanation"]["filters"] == [
        {
            "rule": "small_only",
            "node": "a",
            "old": {"verdict": "absent", "reasons": []},
            "new": {"verdict": "fail", "reasons": ["node(s) take only small pods"]},
        }
    ]
    assert unschedulable["explanation"]["totals"] is None


def test_explanations_are_capped_and_the_rest_counted(
    tmp_path: Path, three_pods: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = write(tmp_path / "old.rules", OLD), write(tmp_path / "new.rules", HEAVIER_SILVER)
    code, document = run_json(capsys, "--old", old, "--new", new, "--explain-limit", "1", three_pods)
    assert code == 1
    assert (document["summary"]["explained"], document["summary"]["left_out"]) == (1, 2)
    assert [p["explanation"] is None for p in document["pods"]] == [False, True, True]
    code, out, _ = run(capsys, "--old", old, "--new", new, "--explain-limit", "1", three_pods)
    assert out.splitlines()[-1] == "rules named for the first 1 changed pod only; 2 left out (--explain-limit)"
    assert out.count("  score silver: weight") == 1
