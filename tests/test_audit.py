"""``rulesched audit`` over cluster files: each running pod's violated filters on its node (all of
them), the best other node it fits with the score gain, a PodDisruptionBudget that moving it
would break; exit codes, JSON, HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

# Nodes labelled tier=old may no longer run `web` pods; `prefer_new` pulls towards tier=new.
RULES = """extends "default"

filter no_old when pod.labels["app"] == "web":
    node.labels["tier"] != "old"
    else "tier old is retired"
filter small_nodes_only when pod.labels["app"] == "web":
    node.allocatable.cpu <= 4
    else "web runs on small nodes"
score prefer_new weight 5: if node.labels["tier"] == "new" then 100 else 0
"""


def node(name: str, tier: str, cpu: str = "4") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "tier": tier}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, node_name: str, app: str = "web", cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": app}},
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Running"},
    }


def pdb(name: str, app: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": 1},
        "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1},
    }


def files(tmp_path: Path, *items: dict[str, Any]) -> tuple[str, str]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    rules = tmp_path / "policy.rules"
    rules.write_text(RULES)
    return str(cluster), str(rules)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["audit", *args])
    return code, capsys.readouterr().out


def test_violations_best_node_gain_and_pdb(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster, rules = files(
        tmp_path,
        node("old-big", "old", cpu="16"),
        node("mid", "mid"),
        node("new", "new"),
        pod("web-1", "old-big"),
        pod("db-1", "old-big", app="db"),  # not web: no rule applies
        pod("web-2", "new"),
        pdb("web", "web", 0),
    )
    code, out = run(capsys, cluster, "--rules", rules, "--output", "json")
    assert code == 1
    a = json.loads(out)
    assert a["summary"]["audited"] == 3 and a["summary"]["violating"] == 1
    (found,) = a["pods"]
    assert found["pod"] == "default/web-1" and found["node"] == "old-big"
    # every filter it fails on its node, in rule order
    assert [v["rule"] for v in found["violations"]] == ["no_old", "small_nodes_only"]
    assert found["best"] == "new" and found["gain"] > 0
    assert found["pdb"] == "default/web"
    _, text = run(capsys, cluster, "--rules", rules)
    assert "default/web-1 on old-big: violates no_old (tier old is retired); small_nodes_only" in text
    assert "moving it would break PDB default/web" in text
    _, html = run(capsys, cluster, "--rules", rules, "--output", "html")
    assert html.startswith("<!DOCTYPE html>") and "default/web-1" in html and "<script" not in html


def test_its_own_requests_do_not_count_against_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # a pod filling its node exactly still fits there (it is taken off before the check)
    cluster, _ = files(tmp_path, node("a", "new", cpu="2"), pod("full", "a", app="db", cpu="2"))
    code, out = run(capsys, cluster)
    assert code == 0 and "1 pods audited, 0 violating" in out


def test_a_violating_pod_that_fits_nowhere_else(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster, rules = files(tmp_path, node("old", "old"), pod("web-1", "old"))
    code, out = run(capsys, cluster, "--rules", rules, "--output", "json")
    (found,) = json.loads(out)["pods"]
    assert code == 1 and found["best"] is None and found["gain"] is None and found["pdb"] is None
