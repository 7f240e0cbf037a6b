"""``rulesched run`` allocating DRA claims through the API (the project's test API server: the real
one of the test bed is issue 35's, not on main yet).

What kube-scheduler's DynamicResources plugin writes before the Binding, read back from the
server: the claim's finalizer (an update of the claim), ``status.allocation`` with the chosen
device and ``status.reservedFor`` naming the pod (one status update); the pod then bound to the
node of the device. A claim made from a template waits for the resourceclaim controller (here:
the test writes what the controller writes) and is allocated once it exists. A binding that
fails takes the pod out of ``reservedFor`` again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rulesched.model.dra import FINALIZER
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait, wait_for

DRIVER = "gpu.example.com"


class Running:
    def __init__(self, server: TestApiServer, tmp_path: Path) -> None:
        self.loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
        self.thread = threading.Thread(target=self.loop.run, daemon=True)

    def __enter__(self) -> Loop:
        self.thread.start()
        return self.loop

    def __exit__(self, *exc: object) -> None:
        self.loop.stop.set()
        self.loop.scheduler.queue.wake()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def gpu_slice(node_name: str, count: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(count)],
        },
    }


GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }


def dra_pod(name: str, claim_name: str) -> dict[str, Any]:
    return pod(
        name,
        cpu="1",
        spec={"schedulerName": "rulesched", "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}]},
    )


def test_run_allocates_the_claim_before_binding(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    server.add("nodes", node("n2"))
    server.add("deviceclasses", GPU_CLASS)
    server.add("resourceslices", gpu_slice("n2", 1))
    server.add("resourceclaims", claim("gpu-claim"))
    server.add("pods", dra_pod("train", "gpu-claim"))
    pods = server.store.objects["pods"]
    with Running(server, tmp_path):
        wait(lambda: pods["default/train"]["spec"].get("nodeName"))
    assert pods["default/train"]["spec"]["nodeName"] == "n2"
    written = server.store.objects["resourceclaims"]["default/gpu-claim"]
    assert FINALIZER in written["metadata"]["finalizers"]
    allocation = written["status"]["allocation"]
    assert allocation["devices"]["results"] == [{"request": "gpu", "driver": DRIVER, "pool": "n2", "device": "gpu-0"}]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n2"]
    assert allocation["allocationTimestamp"]
    (consumer,) = written["status"]["reservedFor"]
    assert consumer == {"resource": "pods", "name": "train", "uid": pods["default/train"]["metadata"]["uid"]}


def test_run_waits_for_the_controllers_claim(server: TestApiServer, tmp_path: Path) -> None:
    """A template's claim is the resourceclaim controller's to make: the pod waits until its
    status names the claim, then is allocated and bound."""
    server.add("nodes", node("n1"))
    server.add("deviceclasses", GPU_CLASS)
    server.add("resourceslices", gpu_slice("n1", 1))
    template_pod = pod(
        "train",
        cpu="1",
        spec={
            "schedulerName": "rulesched",
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
    )
    created = server.add("pods", template_pod)
    pods = server.store.objects["pods"]
    with Running(server, tmp_path):
        wait(lambda: (pods["default/train"].get("status") or {}).get("conditions"))  # unschedulable first
        assert not pods["default/train"]["spec"].get("nodeName")
        made = claim("train-gpu-abcde")  # what the controller makes: owned by the pod
        made["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": created["metadata"]["uid"], "controller": True}
        ]
        server.add("resourceclaims", made)
        current = dict(pods["default/train"])
        current["status"] = {
            **(current.get("status") or {}),
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "train-gpu-abcde"}],
        }
        server.update("pods", current)
        wait(lambda: pods["default/train"]["spec"].get("nodeName"), 20)
    written = server.store.objects["resourceclaims"]["default/train-gpu-abcde"]
    assert written["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    assert written["status"]["reservedFor"][0]["name"] == "train"


def test_run_deallocates_a_claim_no_one_uses_when_nothing_fits(server: TestApiServer, tmp_path: Path) -> None:
    """PostFilter: the claim allocated on n1 (too small for the pod) and used by no one is
    deallocated through the API; the next attempt allocates it on n2 and binds the pod there."""
    small = node("n1")
    small["status"]["allocatable"]["cpu"] = "1"
    server.add("nodes", small)
    server.add("nodes", node("n2"))
    server.add("deviceclasses", GPU_CLASS)
    server.add("resourceslices", gpu_slice("n1", 1))
    server.add("resourceslices", gpu_slice("n2", 1))
    held = claim("gpu-claim")
    held["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
            },
        }
    }
    server.add("resourceclaims", held)
    big = dra_pod("train", "gpu-claim")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    server.add("pods", big)
    pods = server.store.objects["pods"]
    with Running(server, tmp_path):
        wait(lambda: pods["default/train"]["spec"].get("nodeName"), 30)
    assert pods["default/train"]["spec"]["nodeName"] == "n2"
    written = server.store.objects["resourceclaims"]["default/gpu-claim"]
    assert written["status"]["allocation"]["devices"]["results"][0]["pool"] == "n2"


def extended_setup(server: TestApiServer) -> dict[str, Any]:
    server.add("nodes", node("n1"))
    server.add("deviceclasses", {**GPU_CLASS, "spec": {**GPU_CLASS["spec"], "extendedResourceName": "example.com/gpu"}})
    server.add("resourceslices", gpu_slice("n1", 2))
    body = pod("train", cpu="1", spec={"schedulerName": "rulesched"})
    body["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "example.com/gpu": "2"},
        "limits": {"example.com/gpu": "2"},
    }
    server.add("pods", body)
    return body


def test_a_failed_binding_deletes_the_claim_made_for_extended_resources(server: TestApiServer, tmp_path: Path) -> None:
    """unreserveExtendedResourceClaim: the first binding fails (500) after the claim was made;
    the claim is deleted (its finalizer removed first), so the retry can make it again (the
    name is the same: without the delete, its create would answer 409 for ever)."""
    extended_setup(server)
    server.set_faults(fail_bindings=("default/train",))
    pods = server.store.objects["pods"]
    with Running(server, tmp_path):
        wait(lambda: pods["default/train"]["spec"].get("nodeName"))
    assert "default/train" in server._server.failed_bindings
    name = pods["default/train"]["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    made = server.store.objects["resourceclaims"][f"default/{name}"]
    assert [c["name"] for c in made["status"]["reservedFor"]] == ["train"]


def test_run_makes_the_claim_for_extended_resources_backed_by_dra(server: TestApiServer, tmp_path: Path) -> None:
    """KEP-5004 in run: a pod asking `example.com/gpu: 2` where a DeviceClass names that
    resource and n1 publishes GPUs: before the Binding the claim made for it is created (owned
    by the pod, annotated), allocated and reserved, and the pod's
    status.extendedResourceClaimStatus names it with the request's mapping to its container."""
    body = extended_setup(server)
    pods = server.store.objects["pods"]
    with Running(server, tmp_path):
        wait(lambda: pods["default/train"]["spec"].get("nodeName"))
    assert pods["default/train"]["spec"]["nodeName"] == "n1"
    status = pods["default/train"]["status"]["extendedResourceClaimStatus"]
    name = status["resourceClaimName"]
    assert name.startswith("train-extended-resources-")
    assert status["requestMappings"] == [
        {
            "containerName": body["spec"]["containers"][0]["name"],
            "resourceName": "example.com/gpu",
            "requestName": "container-0-request-1",
        }
    ]
    made = server.store.objects["resourceclaims"][f"default/{name}"]
    assert made["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "train",
        pods["default/train"]["metadata"]["uid"],
        True,
    )
    assert made["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-1",
            "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 2},
        }
    ]
    assert FINALIZER in made["metadata"]["finalizers"]
    assert sorted(r["device"] for r in made["status"]["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]
    assert [c["name"] for c in made["status"]["reservedFor"]] == ["train"]


def test_run_deletes_the_claim_an_earlier_attempt_left(server: TestApiServer, tmp_path: Path) -> None:
    """A scheduler that died between making the claim for a pod's extended resources and binding
    the pod leaves the claim allocated (both of n1's GPUs) and reserved: every node fails with
    "cannot schedule extended resource claim", PostFilter deletes the claim through the API (its
    finalizer removed first: deleteClaim), and once the informer reports it gone the pod is
    tried again and bound with a claim made afresh, holding the same GPUs."""
    from rulesched.model.decode import decode_pod
    from rulesched.semantics.dra_extended import claim_name

    extended_setup(server)
    pods = server.store.objects["pods"]
    uid = pods["default/train"]["metadata"]["uid"]
    name = claim_name(decode_pod(pods["default/train"], "test"))
    results = [
        {"request": "container-0-request-1", "driver": DRIVER, "pool": "n1", "device": f"gpu-{i}"} for i in (0, 1)
    ]
    server.add(
        "resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": name,
                "namespace": "default",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": uid, "controller": True}
                ],
                "finalizers": [FINALIZER],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-1",
                            "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 2},
                        }
                    ]
                }
            },
            "status": {
                "allocation": {"devices": {"results": results}},
                "reservedFor": [{"resource": "pods", "name": "train", "uid": uid}],
            },
        },
    )
    old_uid = server.store.objects["resourceclaims"][f"default/{name}"]["metadata"]["uid"]
    with Running(server, tmp_path):
        assert wait_for(lambda: pods["default/train"]["spec"].get("nodeName"), 30)
    assert pods["default/train"]["spec"]["nodeName"] == "n1"
    made = server.store.objects["resourceclaims"][f"default/{name}"]
    assert made["metadata"]["uid"] != old_uid  # the earlier claim deleted, this one made anew
    assert sorted(r["device"] for r in made["status"]["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]
    assert [c["uid"] for c in made["status"]["reservedFor"]] == [uid]
    deletes = [path for method, path in server.store.requests if method == "DELETE" and "resourceclaims" in path]
    assert deletes == [f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}"]
