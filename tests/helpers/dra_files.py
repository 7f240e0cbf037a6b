"""DRA cluster files for `simulate` tests: nodes, pods claiming devices, a node's ResourceSlice
of GPUs, their DeviceClass and a claim template (``write`` makes the file, ``simulate`` runs it
and returns the JSON report's rows by pod)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

DRIVER = "gpu.example.com"
CLAIMS = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str = "", priority: int = 0, cpu: str = "1", **spec: Any) -> dict[str, Any]:
    body = {
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def gpus(node_name: str, count: int, model: str = "A100") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": model}}} for i in range(count)],
        },
    }


GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}


def template(name: str = "one-gpu", selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def write(tmp_path: Path, items: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    return path


def simulate(path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["simulate", str(path), "--output", "json", "--explain-full", *args]) == 0
    return {row["pod"]: row for row in json.loads(capsys.readouterr().out)["pods"]}
