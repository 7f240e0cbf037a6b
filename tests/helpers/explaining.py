"""Builders of the explain tests (tests/test_explain_pod.py, tests/test_fixes.py): nodes with
GPUs, pods with requests and priorities, a cluster file, and a GPU rule set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

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
