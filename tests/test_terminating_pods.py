"""Pending pods being deleted (``metadata.deletionTimestamp``): kube-scheduler never attempts one
(schedule_one.go, skipPodSchedule: "skip schedule deleting pod"), so it takes no node's room. The
simulator, ``rulesched test`` and ``rulesched diff`` skip them as ``rulesched run`` does, and say
so; a running pod being deleted still holds its node until it is gone, as upstream's cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.simulate.html import render_html
from rulesched.simulate.load import load_cluster
from rulesched.simulate.report import render_json, render_table
from rulesched.simulate.run import SimulateSettings, simulate

DELETED_AT = "2024-05-01T10:00:00Z"
RULES = 'filter fits: node.free.cpu >= pod.requests.cpu else "Insufficient cpu"\nscore flat: 1\n'


def node(name: str, cpu: str = "1") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}}


def pod(name: str, *, deleting: bool = False, node_name: str = "", priority: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = DELETED_AT
        meta["finalizers"] = ["example.com/hold"]  # (what keeps a pending pod around while deleted)
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    phase = "Running" if node_name else "Pending"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def write_cluster(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    return path


@pytest.fixture
def crowded(tmp_path: Path) -> Path:
    """One node with room for one pod; a terminating pending pod of higher priority, listed first,
    would take it if scheduled."""
    return write_cluster(tmp_path, node("n1"), pod("old", deleting=True, priority=1000), pod("new"))


def test_the_simulator_skips_a_terminating_pending_pod(crowded: Path) -> None:
    report = simulate(load_cluster([crowded]), SimulateSettings(cluster=(str(crowded),)))
    doc = json.loads(render_json(report))
    rows = {p["pod"]: p for p in doc["pods"]}
    assert rows["default/new"]["node"] == "n1"
    assert rows["default/old"]["node"] is None
    assert rows["default/old"]["message"] == "skip schedule deleting pod: default/old"
    assert report.history["default/old"].attempts == 0
    summary = doc["summary"]
    assert (summary["scheduled"], summary["unschedulable"], summary["terminating"], summary["gated"]) == (1, 0, 1, 0)
    table = render_table(report)
    assert "skip schedule deleting pod: default/old" in table
    assert table.splitlines()[-1].startswith("1 scheduled, 0 unschedulable, 1 terminating (not scheduled), 0 preempted")
    page = render_html(report)
    assert ">terminating<" in page and "skip schedule deleting pod: default/old" in page


def test_the_simulate_command_prints_the_terminating_count(crowded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(crowded), "--output", "summary"]) == 0
    assert "1 scheduled, 0 unschedulable, 1 terminating (not scheduled)" in capsys.readouterr().out


def test_a_running_pod_being_deleted_still_holds_its_node(tmp_path: Path) -> None:
    path = write_cluster(tmp_path, node("n1"), pod("leaving", deleting=True, node_name="n1"), pod("new"))
    report = simulate(load_cluster([path]), SimulateSettings(cluster=(str(path),)))
    doc = json.loads(render_json(report))
    assert [p["pod"] for p in doc["pods"]] == ["default/new"]
    assert doc["pods"][0]["node"] is None and "Insufficient cpu" in doc["pods"][0]["message"]
    assert doc["summary"]["terminating"] == 0 and doc["summary"]["unschedulable"] == 1


def test_rule_test_case_of_a_terminating_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "policy.rules").write_text(RULES)
    terminating = {k: v for k, v in pod("old", deleting=True).items() if k in ("metadata", "spec")}
    cases = [
        {
            "name": "skipped",
            "pod": terminating,
            "expect": {"unschedulable": True, "message": "skip schedule deleting pod: default/old"},
        },
        {"name": "expects a node", "pod": terminating, "expect": {"feasible": ["n1"]}},
    ]
    suite = tmp_path / "policy.test.yaml"
    suite.write_text(yaml.safe_dump({"nodes": [node("n1", cpu="4")], "cases": cases}, sort_keys=False))
    assert main(["test", str(suite), "--output", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    by_name = {c["name"]: c for c in doc["cases"]}
    assert by_name["skipped"]["passed"], by_name["skipped"]
    got = by_name["skipped"]["got"]
    assert got["feasible"] == [] and got["filtered"] == {} and got["scores"] == {} and got["nominated"] is None
    failures = by_name["expects a node"]["failures"]
    assert failures[0].startswith("feasible: expected [n1], got []")
    assert failures[-1] == "the pod has metadata.deletionTimestamp: kube-scheduler skips a pod being deleted"


def test_diff_never_reports_a_terminating_pod(
    tmp_path: Path, crowded: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = tmp_path / "old.rules", tmp_path / "new.rules"
    old.write_text(RULES)
    new.write_text(RULES.replace("score flat: 1", "score flat: 2"))
    assert main(["diff", "--old", str(old), "--new", str(new), str(crowded), "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["pods"] == []
    for side in ("old", "new"):
        summary = doc["summary"][side]
        assert (summary["scheduled"], summary["unschedulable"], summary["terminating"]) == (1, 0, 1)
