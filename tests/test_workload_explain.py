"""``simulate --explain`` and ``explain`` show a workload API member's group (issue 37): how many
members fit, the domain chosen, each domain tried and what stopped it there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLUSTER = """
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n0, labels: {rack: r0}}, status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {rack: r0}}, status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {rack: r1}}, status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}}
- apiVersion: scheduling.k8s.io/v1beta1
  kind: PodGroup
  metadata: {name: train, namespace: default}
  spec: {schedulingPolicy: {gang: {minCount: 3}}, schedulingConstraints: {topology: [{key: rack}]}}
- apiVersion: scheduling.k8s.io/v1beta1
  kind: PodGroup
  metadata: {name: big, namespace: default}
  spec: {schedulingPolicy: {gang: {minCount: 2}}, schedulingConstraints: {topology: [{key: rack}]}}
"""
POD = (
    "- {{apiVersion: v1, kind: Pod, metadata: {{name: {name}, namespace: default}}, spec: {{schedulingGroup: "
    '{{podGroupName: {group}}}, containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]}}}}\n'
)


def _cluster(tmp_path: Path) -> Path:
    text = CLUSTER + "".join(POD.format(name=f"w{i}", group="train", cpu="2") for i in range(3))
    text += "".join(POD.format(name=f"b{i}", group="big", cpu="3") for i in range(2))
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    return path


def _rulesched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rulesched", *args], capture_output=True, text=True, timeout=120)


def test_simulate_explain_shows_the_group(tmp_path: Path) -> None:
    done = _rulesched("simulate", str(_cluster(tmp_path)), "--explain", "--output", "json")
    assert done.returncode in (0, 1), done.stderr
    rows = {r["pod"]: r for r in json.loads(done.stdout)["pods"]}
    train = rows["default/w0"]["group"]
    assert (train["group"], train["placed"], train["domain"]) == ("default/train", True, {"rack": "r0"})
    assert [(t["domain"], t["fit"]) for t in train["trials"]] == [({"rack": "r0"}, True), ({"rack": "r1"}, False)]
    big = rows["default/b0"]["group"]
    assert not big["placed"] and big["outcome"].startswith("pod group is unschedulable, 0/2 placements are available")
    assert any("minCount (2) cannot be satisfied" in t["message"] for t in big["trials"])
    table = _rulesched("simulate", str(_cluster(tmp_path)), "--explain").stdout
    assert "group default/train (PodGroup, gang minCount 3): 3 of 3 pending members fit" in table
    assert "tried default/train in rack=r1: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining" in table


def test_explain_shows_the_group(tmp_path: Path) -> None:
    done = _rulesched("explain", "default/b1", "--cluster", str(_cluster(tmp_path)))
    assert "Pod group default/big (PodGroup, gang minCount 2): " in done.stdout, done.stdout + done.stderr
    assert "not placed: pod group is unschedulable, 0/2 placements are available" in done.stdout
    answer = json.loads(
        _rulesched("explain", "default/w1", "--cluster", str(_cluster(tmp_path)), "--output", "json").stdout
    )
    assert answer["group"]["placed"] and answer["group"]["node"] in ("n0", "n1")
