"""Dynamic Resource Allocation against the real kube-apiserver 1.37 (tests/realk8s.py), beside the
real kube-scheduler: the same DRA pods, one placed by kube-scheduler and one by ``rulesched run``,
with devices one ResourceSlice publishes. The resource-claim controller makes each pod's claim
from its template; rulesched waits for it, allocates a device kube-scheduler did not take
(its allocation is read back as the devices in use), writes the finalizer, ``status.allocation``
and ``reservedFor`` and binds; the two claims then read back field by field alike but for the
device chosen. A pod whose request no node can meet stays pending, its claim unallocated.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.realdra import (
    DRIVER,
    RESOURCE,
    allocated,
    claim_template,
    devices,
    dra_pod,
    extended_class,
    extended_placed,
    extended_pod,
    pod_claim,
)
from tests.realk8s import Kube, Running


def test_a_dra_pod_is_allocated_and_bound_as_kube_scheduler_does(k8s: Kube, tmp_path: Path) -> None:
    k8s.node("n1", cpu="4")
    k8s.node("n2", cpu="4")  # (no devices: both schedulers must choose n1)
    ours, theirs = k8s.namespace("dra-ours"), k8s.namespace("dra-theirs")
    with devices(k8s, "n1", 2):
        for ns in (ours, theirs):
            claim_template(
                k8s, ns, "one-gpu", selector='device.attributes["gpu.rulesched.example.com"].model == "a100"'
            )
            claim_template(k8s, ns, "three-gpus", count=3)
        # kube-scheduler first: its allocation is then a device in use that rulesched must see
        with k8s.kube_scheduler():
            dra_pod(k8s, theirs, "fits", "one-gpu", scheduler="default-scheduler")
            assert k8s.wait(lambda: allocated(k8s, theirs, "fits"), 60)
        with Running(k8s):
            dra_pod(k8s, ours, "fits", "one-gpu")
            dra_pod(k8s, ours, "too-many", "three-gpus")
            assert k8s.wait(lambda: allocated(k8s, ours, "fits"), 60)
            assert k8s.wait(lambda: pod_claim(k8s, ours, "too-many"), 30)  # (the controller made it)
            assert k8s.wait(
                lambda: any(
                    c["type"] == "PodScheduled" and c["status"] == "False"
                    for c in k8s.read_pod(ours, "too-many").get("status", {}).get("conditions", [])
                ),
                30,
            )
        theirs_claim, ours_claim = pod_claim(k8s, theirs, "fits"), pod_claim(k8s, ours, "fits")
        assert theirs_claim and ours_claim
        too_many = pod_claim(k8s, ours, "too-many")
        assert too_many and not too_many.get("status", {}).get("allocation")
        for pod in (k8s.read_pod(theirs, "fits"), k8s.read_pod(ours, "fits")):
            assert pod["spec"]["nodeName"] == "n1"
        # the device: each its own, both of the slice
        (their_result,) = theirs_claim["status"]["allocation"]["devices"]["results"]
        (our_result,) = ours_claim["status"]["allocation"]["devices"]["results"]
        assert {their_result["device"], our_result["device"]} == {"gpu-0", "gpu-1"}
        for r in (their_result, our_result):
            assert (r["driver"], r["pool"], r["request"]) == (DRIVER, "n1", "gpu")
        # field by field as kube-scheduler writes them, but for the device chosen and the times
        assert sorted(our_result) == sorted(their_result)
        ours_alloc, theirs_alloc = ours_claim["status"]["allocation"], theirs_claim["status"]["allocation"]
        assert sorted(ours_alloc) == sorted(theirs_alloc)
        assert ours_alloc["nodeSelector"] == theirs_alloc["nodeSelector"]
        assert ours_alloc["devices"].get("config") == theirs_alloc["devices"].get("config")
        # reserved for its pod (by uid), and the finalizer that keeps an allocated claim
        for ns, claim in ((ours, ours_claim), (theirs, theirs_claim)):
            uid = k8s.read_pod(ns, "fits")["metadata"]["uid"]
            assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "fits", "uid": uid}]
        assert ours_claim["metadata"].get("finalizers") == theirs_claim["metadata"].get("finalizers")
        assert ours_claim["metadata"].get("finalizers"), ours_claim["metadata"]


def test_extended_resources_backed_by_dra_as_kube_scheduler_serves_them(k8s: Kube, tmp_path: Path) -> None:
    """KEP-5004 on the real API server: a DeviceClass names `example.com/gpu`; a pod asking it
    in plain requests is placed by kube-scheduler, another by ``rulesched run``, on n1, whose
    devices a ResourceSlice publishes (no node has the resource in its allocatable). Each gets
    a claim made for it (owned by the pod, annotated), allocated and reserved, named in the
    pod's status.extendedResourceClaimStatus; rulesched's reads back as kube-scheduler's but for
    the name's random part and the device."""
    k8s.node("n1", cpu="4")
    k8s.node("n2", cpu="4")
    ours, theirs = k8s.namespace("ext-ours"), k8s.namespace("ext-theirs")
    with devices(k8s, "n1", 2), extended_class(k8s):
        with k8s.kube_scheduler():
            extended_pod(k8s, theirs, "ext", "default-scheduler")
            assert k8s.wait(lambda: extended_placed(k8s, theirs, "ext"), 60)
        with Running(k8s):
            extended_pod(k8s, ours, "ext")
            assert k8s.wait(lambda: extended_placed(k8s, ours, "ext"), 60)
        claims = {}
        for ns in (ours, theirs):
            pod = extended_placed(k8s, ns, "ext")
            assert pod is not None and pod["spec"]["nodeName"] == "n1"
            status = pod["status"]["extendedResourceClaimStatus"]
            claim = dict(k8s.get(f"{RESOURCE}/namespaces/{ns}/resourceclaims/{status['resourceClaimName']}"))
            assert claim["metadata"]["name"].startswith("ext-extended-resources-")
            (owner,) = claim["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["name"], owner["uid"]) == ("Pod", "ext", pod["metadata"]["uid"])
            assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
            assert [c["uid"] for c in claim["status"]["reservedFor"]] == [pod["metadata"]["uid"]]
            claims[ns] = (status, claim)
        (our_status, our_claim), (their_status, their_claim) = claims[ours], claims[theirs]
        assert our_status["requestMappings"] == their_status["requestMappings"]
        assert our_claim["spec"] == their_claim["spec"]
        (ours_result,) = our_claim["status"]["allocation"]["devices"]["results"]
        (theirs_result,) = their_claim["status"]["allocation"]["devices"]["results"]
        assert {ours_result["device"], theirs_result["device"]} == {"gpu-0", "gpu-1"}
        assert sorted(ours_result) == sorted(theirs_result)
        assert our_claim["status"]["allocation"]["nodeSelector"] == their_claim["status"]["allocation"]["nodeSelector"]
        assert sorted(our_claim["metadata"]["finalizers"]) == sorted(their_claim["metadata"]["finalizers"])


def test_a_pod_preempts_for_the_device_a_lower_priority_pod_holds(k8s: Kube, tmp_path: Path) -> None:
    """Preemption frees the victims' devices (beyond kube-scheduler 1.37, as KEP-5690), in
    ``rulesched run`` on the real API server: n1's only GPU is allocated to a low-priority pod's
    claim; a high-priority pod asking a GPU evicts it, the resource-claim controller deallocates
    the victim's claim once the pod is gone (here: deleted at once, as its kubelet would), and the
    preemptor's claim gets the GPU, the preemptor bound to n1."""
    k8s.node("n1", cpu="4")
    ns = k8s.namespace("dra-preempt")
    classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    k8s.create(classes, {"metadata": {"name": "dra-high"}, "value": 1000})
    try:
        with devices(k8s, "n1", 1):
            claim_template(k8s, ns, "one-gpu")
            with Running(k8s):
                dra_pod(k8s, ns, "low", "one-gpu")
                assert k8s.wait(lambda: allocated(k8s, ns, "low"), 60)
                k8s.pod(
                    ns,
                    "high",
                    cpu="100m",
                    spec={
                        "priorityClassName": "dra-high",
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    },
                )
                assert k8s.wait(lambda: k8s.pods(ns).get("low", {}).get("metadata", {}).get("deletionTimestamp"), 60)
                assert k8s.wait(lambda: k8s.read_pod(ns, "high")["status"].get("nominatedNodeName") == "n1", 30)
                assert k8s.remove_terminating(ns) == ["low"]
                assert k8s.wait(lambda: allocated(k8s, ns, "high"), 90)
            claim = pod_claim(k8s, ns, "high")
            assert claim is not None
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            assert (result["pool"], result["device"]) == ("n1", "gpu-0")
            assert k8s.read_pod(ns, "high")["spec"]["nodeName"] == "n1"
    finally:
        k8s.delete(f"{classes}/dra-high")


def test_a_device_taint_rule_keeps_both_schedulers_off_the_device(k8s: Kube, tmp_path: Path) -> None:
    """A DeviceTaintRule (resource.k8s.io/v1, GA in 1.37) taints n1's gpu-0 NoSchedule:
    kube-scheduler gives its pod gpu-1; `run` then has no device for a pod that does not
    tolerate the taint (pending, its claim unallocated) and gives gpu-0 to one that does."""
    k8s.node("n1", cpu="4")
    ours, theirs = k8s.namespace("taint-ours"), k8s.namespace("taint-theirs")
    rule = {
        "metadata": {"name": "unhealthy-gpu-0"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n1", "device": "gpu-0"},
            "taint": {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"},
        },
    }
    with devices(k8s, "n1", 2):
        k8s.create(f"{RESOURCE}/devicetaintrules", rule)
        try:
            for ns in (ours, theirs):
                claim_template(k8s, ns, "one-gpu")
            k8s.create(
                f"{RESOURCE}/namespaces/{ours}/resourceclaimtemplates",
                {
                    "metadata": {"name": "tolerant"},
                    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                        "deviceClassName": "gpu",
                        "tolerations": [{"key": "example.com/unhealthy", "operator": "Exists"}],
                    }}]}}},
                },
            )  # fmt: skip
            with k8s.kube_scheduler():
                dra_pod(k8s, theirs, "fits", "one-gpu", scheduler="default-scheduler")
                assert k8s.wait(lambda: allocated(k8s, theirs, "fits"), 60)
            (theirs_result,) = allocated(k8s, theirs, "fits")["status"]["allocation"]["devices"]["results"]
            assert theirs_result["device"] == "gpu-1"
            with Running(k8s):
                dra_pod(k8s, ours, "intolerant", "one-gpu")
                dra_pod(k8s, ours, "tolerant", "tolerant")
                assert k8s.wait(lambda: allocated(k8s, ours, "tolerant"), 60)
                assert k8s.wait(
                    lambda: any(
                        c["type"] == "PodScheduled" and c["status"] == "False"
                        for c in k8s.read_pod(ours, "intolerant").get("status", {}).get("conditions", [])
                    ),
                    30,
                )
            (ours_result,) = allocated(k8s, ours, "tolerant")["status"]["allocation"]["devices"]["results"]
            assert ours_result["device"] == "gpu-0"
            intolerant = pod_claim(k8s, ours, "intolerant")
            assert intolerant and not intolerant.get("status", {}).get("allocation")
            assert not k8s.read_pod(ours, "intolerant")["spec"].get("nodeName")
        finally:
            k8s.delete(f"{RESOURCE}/devicetaintrules/unhealthy-gpu-0")
