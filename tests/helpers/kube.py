"""Kubernetes objects as the API server holds them (dicts), for tests that run rulesched against
the test API server (tests/apiserver.py) or send the extender what kube-scheduler sends.

``node``/``pod``: a plain node and a pending pod naming rulesched; ``zonal_node``,
``claiming_pod``, ``claim``, ``storage_class``, ``local_volume``: the storage objects of volume
tests; ``extender_node``/``extender_pod``: as kube-scheduler's json.Marshal writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.apiserver import TestApiServer

ZONE = "topology.kubernetes.io/zone"


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str, cpu: str = "500m", scheduler: str = "rulesched", **extra: Any) -> dict[str, Any]:
    spec = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
    }
    spec.update(extra.pop("spec", {}))
    return {
        "metadata": {"name": name, "namespace": "default", **extra.pop("metadata", {})},
        "spec": spec,
        "status": extra.pop("status", {"phase": "Pending"}),
    }


def wait_for(condition: Any, seconds: float = 60.0) -> bool:
    """Whether ``condition()`` became true within ``seconds``: an "eventually", generous for a
    loaded machine (a test that passes waits only as long as it takes)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())


def zonal_node(name: str, zone: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def claiming_pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "rulesched",
            "containers": [{"name": "c", "image": "x"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
        "status": {"phase": "Pending"},
    }


def claim(name: str, cls: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "storageClassName": cls,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
        "status": {"phase": "Pending"},
    }


def storage_class(name: str, provisioner: str, zones: list[str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return obj


def local_volume(name: str, node_name: str) -> dict[str, Any]:
    """An available volume of the no-provisioner class "local", reachable from one node only."""
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}]}
    return {
        "metadata": {"name": name},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
        },
        "status": {"phase": "Available"},
    }


def extender_node(name: str, cpu: str = "4", **spec: Any) -> dict[str, Any]:
    """A node as kube-scheduler's json.Marshal writes it (what it sends an extender)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "7",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "a"},
        },
        "spec": spec,
        "status": {
            "capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "",
                "systemUUID": "",
                "bootID": "",
                "kernelVersion": "",
                "osImage": "",
                "containerRuntimeVersion": "",
                "kubeletVersion": "",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def extender_pod(name: str, cpu: str = "500m", priority: int = 0, node_name: str = "", **labels: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        "schedulerName": "default-scheduler",
        "priority": priority,
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def _no_pod_slots(name: str) -> dict[str, Any]:
    full = extender_node(name)
    full["status"]["allocatable"]["pods"] = "0"
    return full


# full nodes of every kind the extender's filter tells apart
EXTENDER_NODES = [
    extender_node("n1"),
    extender_node("n2", unschedulable=True),
    extender_node("n3", cpu="100m"),
    extender_node("n4", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    _no_pod_slots("n5"),
]


def wait(condition: Callable[[], Any], seconds: float = 60.0) -> Any:
    """``condition()``'s first true value within ``seconds`` (an "eventually", as :func:`wait_for`)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out")


def events(server: TestApiServer, reason: str, name: str) -> list[dict[str, Any]]:
    return [e for e in server.objects("events") if e["reason"] == reason and e["regarding"]["name"] == name]
