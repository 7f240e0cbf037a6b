"""Pods with Dynamic Resource Allocation claims (spec.resourceClaims): rulesched allocates no
claims, so `simulate`, `test` (and `run`: tests/test_run_fidelity.py) leave such a pod
unschedulable on every node, unresolvable (no preemption tried), with a reason saying why, under
any rule set; the extender leaves the claims to kube-scheduler, which allocates them itself.

Upstream: without the DynamicResources plugin (pkg/scheduler/framework/plugins/dynamicresources)
nothing allocates the claims, and the kubelet cannot start a pod bound without an allocation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.extender.service import Extender
from rulesched.lang import RulesHandle, load_rules, resolve_rules_path
from rulesched.lang.evaluation.prechecks import DRA_REASON

CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
MESSAGE = (
    f"0/2 nodes are available: 2 {DRA_REASON}. preemption: 0/2 nodes are available: "
    "2 Preemption is not helpful for scheduling."
)


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str = "", priority: int = 0, **spec: Any) -> dict[str, Any]:
    body = {
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "4"}}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    status = {"phase": "Running" if node_name else "Pending"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
        "status": status,
    }


def cluster(tmp_path: Path) -> Path:
    """Two full nodes of low-priority pods; a high-priority DRA pod (preemption would make room
    for it, were it tried) and an ordinary one, which preempts."""
    items = [
        node("n1"),
        node("n2"),
        pod("low-1", "n1"),
        pod("low-2", "n2"),
        pod("dra", priority=100, resourceClaims=CLAIMS),
        pod("plain", priority=50),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


@pytest.mark.parametrize("rules", ["default", "custom"])
def test_simulate_leaves_a_dra_pod_unschedulable_without_preempting(
    rules: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the rule set: a custom set without `extends "default"` (one score, one
    permissive preempt rule) would otherwise place it."""
    if rules == "custom":
        (tmp_path / "mine.rules").write_text(
            "score few weight 1:\n    100 - len(node.pods)\n\npreempt anyone:\n    victim.priority < pod.priority\n"
        )
        rules = str(tmp_path / "mine.rules")
    assert main(["simulate", str(cluster(tmp_path)), "--rules", rules, "--output", "json", "--explain-full"]) == 0
    rows = {row["pod"]: row for row in json.loads(capsys.readouterr().out)["pods"]}
    dra = rows["default/dra"]
    assert dra["node"] is None and dra["nominated"] is None and dra["victims"] == []
    assert dra["message"] == MESSAGE
    assert dra["filtered"] == {"n1": [DRA_REASON], "n2": [DRA_REASON]}
    assert dra["unresolvable"] == ["n1", "n2"]
    # the ordinary pod behind it is placed (under the default rules by preempting a low pod)
    assert rows["default/plain"]["node"] in ("n1", "n2")


def test_rule_test_reports_the_dra_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dra.test.yaml").write_text(
        yaml.safe_dump(
            {
                "rules": ["default"],
                "nodes": [node("n1"), node("n2")],
                "pods": [pod("low-1", "n1")],
                "cases": [
                    {
                        "name": "a pod with DRA claims fits nowhere and preempts nothing",
                        "pod": pod("dra", priority=100, resourceClaims=CLAIMS),
                        "expect": {
                            "unschedulable": True,
                            "feasible": [],
                            "reasons": {"n1": [DRA_REASON], "n2": [DRA_REASON]},
                            "unresolvable": ["n1", "n2"],
                            "message": MESSAGE,
                        },
                    }
                ],
            }
        )
    )
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out


def test_the_extender_leaves_claims_to_kube_scheduler() -> None:
    """kube-scheduler's DynamicResources plugin filtered the nodes for the claims before asking,
    and allocates them before binding: the extender's rules see the pod as any other."""
    extender = Extender(RulesHandle(load_rules([resolve_rules_path("default")])))
    obj = pod("dra", priority=100, resourceClaims=CLAIMS)
    body = {"Pod": obj, "Nodes": {"metadata": {}, "items": [node("n1"), node("n2")]}, "NodeNames": None}
    answer = json.loads(extender.filter(json.dumps(body).encode()).body)
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n1", "n2"]
    assert answer["FailedNodes"] == {} and answer["FailedAndUnresolvableNodes"] == {}
