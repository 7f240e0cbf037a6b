"""Builders of the explain tests (tests/test_explain_pod.py, tests/test_fixes.py,
tests/test_group_fixes.py): nodes with GPUs, pods with requests and priorities, a cluster file, a
GPU rule set and the GPU cluster both explain tests start from; ``rulesched explain`` run for its
text or JSON, and a fix made on the cluster files by ``simulate --apply``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

GPU_RULES = """extends "default"

filter gpu_free when pod.requests["nvidia.com/gpu"] > 0:
    node.free["nvidia.com/gpu"] >= pod.requests["nvidia.com/gpu"]
    else "no free GPU"
score gpu_pack weight 2: 100 - 100 * node.free["nvidia.com/gpu"] / (node.allocatable["nvidia.com/gpu"] + 1)
"""


def node(name: str, cpu: str = "4", gpus: str = "0", **extra: Any) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110", "nvidia.com/gpu": gpus}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": extra,
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m", gpus: str = "0", node_name: str = "", priority: int = 0) -> dict[str, Any]:
    requests = {"cpu": cpu}
    if gpus != "0":
        requests["nvidia.com/gpu"] = gpus
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests, "limits": requests}}],
        "priority": priority,
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending", "startTime": "2026-01-01T00:00:00Z"},
    }


def cluster(tmp_path: Path, *items: dict[str, Any]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return str(path)


def gpu_cluster(tmp_path: Path) -> tuple[str, str]:
    """A CPU node, two GPU nodes each with its GPUs held, a tainted GPU node, and a pending
    ``trainer`` asking one GPU (that fits nowhere); the cluster file and the GPU rules' file."""
    rules = tmp_path / "gpu.rules"
    rules.write_text(GPU_RULES)
    path = cluster(
        tmp_path,
        node("cpu-1", cpu="1"),
        node("gpu-1", cpu="8", gpus="1"),
        node("gpu-2", cpu="8", gpus="2"),
        node("tainted", cpu="8", gpus="4", taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]),
        pod("holder", gpus="1", node_name="gpu-1"),
        pod("holder2", gpus="2", node_name="gpu-2"),
        pod("trainer", cpu="2", gpus="1"),
    )
    return path, str(rules)


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``rulesched explain ARGS``: its exit code and what it printed."""
    code = main(["explain", *args])
    return code, capsys.readouterr().out


def explain_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    """``rulesched explain ARGS --output json``, read back."""
    main(["explain", *args, "--output", "json"])
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    return answer


def simulated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, path: str, fix: dict[str, Any], *rules: str
) -> dict[str, Any]:
    """Each pending pod -> its node, after ``fix`` is made on the cluster file by simulate --apply."""
    fixfile = tmp_path / "fix.json"
    fixfile.write_text(json.dumps(fix))
    extra = [a for r in rules for a in ("--rules", r)]
    assert main(["simulate", path, "--apply", str(fixfile), "--output", "json", *extra]) == 0
    rows = json.loads(capsys.readouterr().out)["pods"]
    return {r["pod"]: r["node"] for r in rows}
