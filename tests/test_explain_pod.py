"""``rulesched explain NS/POD`` offline: every failing filter per node, the failing
sub-expression with operand values and its place, single-rule blockers, shortfalls, scores,
preemption; a pod not yet submitted (``-f``); table, JSON and HTML; exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rulesched.cli import main
from tests.helpers import explaining
from tests.helpers.explaining import cluster, explain, node, pod


@pytest.fixture
def gpu_cluster(tmp_path: Path) -> tuple[str, str]:
    return explaining.gpu_cluster(tmp_path)


def test_every_failing_filter_with_blame_and_location(
    capsys: pytest.CaptureFixture[str], gpu_cluster: tuple[str, str]
) -> None:
    path, rules = gpu_cluster
    code, out = explain(capsys, "default/trainer", "--cluster", path, "--rules", rules, "--output", "json")
    assert code == 1  # no node fits
    a = json.loads(out)
    assert a["feasible"] == 0 and a["nodes"] == 4
    detailed = {d["node"]: d for d in a["detailed"]}
    # cpu-1 fails two filters (both reported, in rule order): resources and the GPU rule
    assert [f["rule"] for f in detailed["cpu-1"]["failures"]] == ["NodeResourcesFit", "gpu_free"]
    gpu = detailed["gpu-1"]["failures"]
    gpu_free = next(f for f in gpu if f["rule"] == "gpu_free")
    assert gpu_free["reasons"] == ["no free GPU"]
    assert gpu_free["blame"] == [
        {
            "expression": 'node.free["nvidia.com/gpu"] (0) >= pod.requests["nvidia.com/gpu"] (1)',
            "at": f"{rules}:4:5",
        }
    ]
    # the default rule's failing element of all(...) with the loop variable written as its value
    fit = next(f for f in gpu if f["rule"] == "NodeResourcesFit")
    assert any(
        'pod.requests["nvidia.com/gpu"] (1) <= node.free["nvidia.com/gpu"] (0)' in b["expression"] for b in fit["blame"]
    )
    tainted = detailed["tainted"]["failures"]
    assert [f["rule"] for f in tainted] == ["TaintToleration"] and tainted[0]["unresolvable"]
    # grouped by (filter, reason); the message stays kube-scheduler's (first failing filter)
    reasons = {(g["rule"], g["reason"]): g["nodes"] for g in a["reasons"]}
    assert reasons[("gpu_free", "no free GPU")] == 3
    assert a["message"].startswith("0/4 nodes are available: ")
    assert "1 node(s) had untolerated taint {x: y}" in a["message"]


def test_blockers_shortfalls_and_preemption(capsys: pytest.CaptureFixture[str], gpu_cluster: tuple[str, str]) -> None:
    path, rules = gpu_cluster
    _, out = explain(capsys, "default/trainer", "--cluster", path, "--rules", rules, "--output", "json")
    a = json.loads(out)
    blockers = {b["rule"]: b["names"] for b in a["blockers"]}
    assert blockers == {"TaintToleration": ["tainted"]}  # the GPU nodes fail two rules each
    shortfalls = {s["node"]: s["needs"] for s in a["shortfalls"]}
    assert shortfalls["gpu-1"] == {"nvidia.com/gpu": "1"}
    assert shortfalls["cpu-1"] == {"cpu": "1", "nvidia.com/gpu": "1"}
    # same priority as the holders: nothing may be evicted
    assert a["preemption"]["tried"] and not a["preemption"]["helps"]
    assert "preemption: 0/4 nodes are available" in a["preemption"]["why"]


def test_preemption_that_helps_names_its_victims(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = cluster(tmp_path, node("a", cpu="2"), pod("low", cpu="2", node_name="a"), pod("high", cpu="2", priority=100))
    code, out = explain(capsys, "high", "--cluster", path, "--output", "json")
    a = json.loads(out)
    assert code == 1
    assert a["preemption"]["helps"] and a["preemption"]["nominated"] == "a"
    assert a["preemption"]["victims"] == ["default/low"]


def test_scores_of_the_best_nodes(
    capsys: pytest.CaptureFixture[str], gpu_cluster: tuple[str, str], tmp_path: Path
) -> None:
    path, rules = gpu_cluster
    new = tmp_path / "new.yaml"
    new.write_text(yaml.safe_dump(pod("small", cpu="100m")))
    code, out = explain(capsys, "-f", str(new), "--cluster", path, "--rules", rules, "--output", "json")
    a = json.loads(out)
    assert code == 0 and a["pod"] == "default/small" and a["feasible"] == 3
    names = [r["rule"] for r in a["scores"]["rules"]]
    assert "gpu_pack" in names and "NodeResourcesFit" in names
    best = a["scores"]["best"]
    assert len(best) == 3 and best[0]["total"] >= best[-1]["total"]
    assert all(len(s["values"]) == len(names) for s in best)
    assert "gpu_free" in a["filters_not_applied"]  # its `when` is false for a pod without GPUs


def test_table_and_html(capsys: pytest.CaptureFixture[str], gpu_cluster: tuple[str, str]) -> None:
    path, rules = gpu_cluster
    code, out = explain(capsys, "default/trainer", "--cluster", path, "--rules", rules)
    assert code == 1
    assert 'node.free["nvidia.com/gpu"] (0) >= pod.requests["nvidia.com/gpu"] (1)   at ' in out
    assert "Single-rule blockers" in out and "needs 1 more nvidia.com/gpu on gpu-1" in out
    code, out = explain(capsys, "default/trainer", "--cluster", path, "--rules", rules, "--output", "html")
    assert out.startswith("<!DOCTYPE html>") and "<script" not in out
    assert "node.free[&quot;nvidia.com/gpu&quot;] (0)" in out


def test_a_running_pod_is_explained_as_if_unplaced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = cluster(tmp_path, node("a", cpu="2"), pod("p", cpu="2", node_name="a"))
    code, out = explain(capsys, "default/p", "--cluster", path, "--output", "json")
    assert code == 0 and json.loads(out)["feasible"] == 1  # its own requests do not count against it


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = cluster(tmp_path, node("a"))
    assert main(["explain", "default/missing", "--cluster", path]) == 2
    assert "pod default/missing is not in" in capsys.readouterr().err
    assert main(["explain", "default/missing"]) == 2
    assert "--cluster" in capsys.readouterr().err
