"""DRA objects on the real kube-apiserver of the test bed (tests/realk8s.py): a DeviceClass and
a node's ResourceSlice (``devices``), claim templates, pods claiming from them, and the claim the
resource-claim controller made for a pod, read back (``pod_claim``, ``allocated``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tests.realk8s import Kube

DRIVER = "gpu.rulesched.example.com"
RESOURCE = "/apis/resource.k8s.io/v1"


@contextlib.contextmanager
def devices(k8s: Kube, node: str, count: int) -> Iterator[None]:
    """A DeviceClass ``gpu`` for DRIVER and one ResourceSlice of ``count`` devices on ``node``
    (what the driver's kubelet plugin would publish), removed on exit (cluster-scoped: the
    fixture's cleanup does not reach them)."""
    k8s.create(
        f"{RESOURCE}/deviceclasses",
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}},
    )
    k8s.create(
        f"{RESOURCE}/resourceslices",
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"index": {"int": i}, "model": {"string": "a100"}},
                        "capacity": {"memory": {"value": "40Gi"}},
                    }
                    for i in range(count)
                ],
            },
        },
    )
    try:
        yield
    finally:
        k8s.delete(f"{RESOURCE}/resourceslices/{node}-gpus")
        k8s.delete(f"{RESOURCE}/deviceclasses/gpu")


def claim_template(k8s: Kube, ns: str, name: str, count: int = 1, selector: str | None = None) -> None:
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    k8s.create(
        f"{RESOURCE}/namespaces/{ns}/resourceclaimtemplates",
        {
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
        },
    )


def dra_pod(k8s: Kube, ns: str, name: str, template: str, scheduler: str = "rulesched") -> dict[str, Any]:
    return k8s.pod(
        ns,
        name,
        cpu="100m",
        scheduler=scheduler,
        spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]},
    )


def pod_claim(k8s: Kube, ns: str, pod: str) -> dict[str, Any] | None:
    """The claim the resource-claim controller made for the pod (named in its status)."""
    statuses = k8s.read_pod(ns, pod).get("status", {}).get("resourceClaimStatuses") or []
    name = next((s.get("resourceClaimName") for s in statuses if s["name"] == "gpu"), None)
    return dict(k8s.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{name}")) if name else None


def allocated(k8s: Kube, ns: str, pod: str) -> dict[str, Any] | None:
    claim = pod_claim(k8s, ns, pod)
    return (
        claim
        if claim and claim.get("status", {}).get("allocation") and k8s.read_pod(ns, pod)["spec"].get("nodeName")
        else None
    )


@contextlib.contextmanager
def extended_class(k8s: Kube, resource: str = "example.com/gpu") -> Iterator[None]:
    """A DeviceClass ``gpu-ext`` for DRIVER serving the extended resource ``resource``
    (KEP-5004's ``extendedResourceName``), removed on exit."""
    k8s.create(
        f"{RESOURCE}/deviceclasses",
        {
            "metadata": {"name": "gpu-ext"},
            "spec": {
                "extendedResourceName": resource,
                "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            },
        },
    )
    try:
        yield
    finally:
        k8s.delete(f"{RESOURCE}/deviceclasses/gpu-ext")


def extended_pod(k8s: Kube, ns: str, name: str, scheduler: str = "rulesched") -> dict[str, Any]:
    """A pod asking ``example.com/gpu: 1`` in plain requests (a class serves it through DRA)."""
    gpu = {"requests": {"cpu": "100m", "example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}
    return k8s.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x", "resources": gpu}]},
        },
    )


def extended_placed(k8s: Kube, ns: str, name: str) -> dict[str, Any] | None:
    """The pod once bound with its status.extendedResourceClaimStatus written."""
    pod = k8s.read_pod(ns, name)
    return pod if pod.get("status", {}).get("extendedResourceClaimStatus") and pod["spec"].get("nodeName") else None
