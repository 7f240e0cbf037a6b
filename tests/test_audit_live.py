"""``rulesched audit --live [--publish]`` and ``rulesched run --audit-interval`` over HTTP against
the test API server: violations found in the cluster it lists, wgpolicyk8s.io PolicyReports
created (and replaced, not duplicated) per namespace, the audit metrics."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for
from tests.helpers.scrape import families, fetch, value

# n1 is being retired: no pod may run there any more (and, in audit mode, none on n2 either).
RULES = """extends "default"

filter retire_n1:
    node.name != "n1"
    else "n1 is being retired"

audit filter retire_n2:
    node.name != "n2"
    else "n2 will be retired"
"""


def running(name: str, node_name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return pod(
        name,
        spec={"nodeName": node_name},
        status={"phase": "Running"},
        metadata={"namespace": namespace, "uid": f"uid-{name}", "labels": labels},
    )


@pytest.fixture
def cluster(server: TestApiServer, tmp_path: Path) -> tuple[TestApiServer, str, str]:
    for name in ("n1", "n2", "n3"):
        server.add("nodes", node(name))
    server.add("namespaces", {"metadata": {"name": "default"}})
    server.add("namespaces", {"metadata": {"name": "shop"}})
    server.add("pods", running("a", "n1"))
    server.add("pods", running("b", "n2", namespace="shop"))
    server.add("pods", running("c", "n3", namespace="shop"))
    rules = tmp_path / "policy.rules"
    rules.write_text(RULES)
    return server, server.kubeconfig(str(tmp_path / "kubeconfig")), str(rules)


def test_audit_live_publishes_policy_reports(
    cluster: tuple[TestApiServer, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, kubeconfig, rules = cluster
    args = ["audit", "--live", "--kubeconfig", kubeconfig, "--rules", rules, "--output", "json", "--publish"]
    assert main(args) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"]["audited"] == 3 and answer["summary"]["violating"] == 1
    assert answer["summary"]["policy_reports"] == 2
    reports = server.store.objects["policyreports"]
    default = reports["default/rulesched"]
    assert default["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    (result,) = default["results"]
    assert result["rule"] == "retire_n1" and result["result"] == "fail" and result["source"] == "rulesched"
    assert result["resources"] == [{"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "a"}]
    assert (
        result["properties"]["node"] == "n1" and result["properties"]["best_node"] == "n2"
    )  # audit-mode rules never steer
    shop = reports["shop/rulesched"]
    assert shop["summary"] == {"pass": 2, "fail": 0, "warn": 1, "error": 0, "skip": 0}
    assert [r["rule"] for r in shop["results"]] == ["retire_n2"]
    # a second run replaces the reports: still one per namespace
    assert main(args) == 1
    capsys.readouterr()
    assert sorted(server.store.objects["policyreports"]) == ["default/rulesched", "shop/rulesched"]


def test_audit_needs_files_or_live(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit"]) == 2
    assert "--live" in capsys.readouterr().err


def test_run_audits_every_interval(cluster: tuple[TestApiServer, str, str]) -> None:
    server, kubeconfig, rules = cluster
    loop = Loop(
        RunSettings(
            kubeconfig=kubeconfig,
            rules=("default", rules),
            metrics_bind_address="127.0.0.1:0",
            grace_seconds=2,
            audit_interval=0.2,
            scheduler_name="rulesched",
        )
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: "default/rulesched" in server.store.objects["policyreports"])
        assert loop.ops is not None
        found = families(fetch(f"http://127.0.0.1:{loop.ops.port}/metrics"))
        assert value(found["rulesched_audit_violations"], rule="retire_n1") == 1
        assert value(found["rulesched_audit_shadow_rejections"], rule="retire_n2") == 1
        assert value(found["rulesched_audit_runs_total"], "_total", result="success") >= 1
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=15)
