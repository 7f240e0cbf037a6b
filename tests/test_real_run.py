"""``rulesched run`` against the real kube-apiserver 1.37 (tests/realk8s.py), beside the real
kube-scheduler: what both write about a pod must read back the same.

- The test bed is what it says: /version and kubectl say v1.37.2; the DRA (resource.k8s.io/v1)
  and Workload (scheduling.k8s.io/v1beta1) APIs are served.
- Pods naming rulesched are bound; the bound pod's PodScheduled condition, its Scheduled event
  and, for a pod that fits nowhere, the FailedScheduling event and PodScheduled=False condition
  have the shape kube-scheduler's have for the same pods, scheduled by the real kube-scheduler
  in another namespace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.realk8s import Kube, Running


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def event(k8s: Kube, ns: str, reason: str, name: str) -> dict[str, Any] | None:
    return next((e for e in k8s.events(ns) if e["reason"] == reason and e["regarding"]["name"] == name), None)


def test_the_test_bed_is_kubernetes_1_37_with_the_dra_and_workload_apis(real_k8s: Kube) -> None:
    version = real_k8s.get("/version")
    assert version["gitVersion"] == "v1.37.2" and (version["major"], version["minor"]) == ("1", "37")
    client = real_k8s.kubectl("version", "--client", "-o", "json").stdout
    assert '"gitVersion": "v1.37.2"' in client
    groups = {g["name"]: [v["version"] for v in g["versions"]] for g in real_k8s.get("/apis")["groups"]}
    assert "v1" in groups["resource.k8s.io"]
    assert "v1beta1" in groups["scheduling.k8s.io"]
    assert real_k8s.env["ETCD_VERSION"].startswith("3.")


def test_binding_and_failures_read_back_as_kube_schedulers(k8s: Kube, tmp_path: Path) -> None:
    """The same two pods (one fits, one is too big for any node) in two namespaces, one placed
    by kube-scheduler, one by rulesched: the bound pods' PodScheduled condition and Scheduled
    event, and the unschedulable pods' condition and FailedScheduling event, field by field."""
    k8s.node("n1", cpu="2")
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    for ns, scheduler in ((ours, "rulesched"), (theirs, "default-scheduler")):
        k8s.pod(ns, "fits", cpu="1", scheduler=scheduler)
        k8s.pod(ns, "too-big", cpu="3", scheduler=scheduler)
    with k8s.kube_scheduler(), Running(k8s):
        for ns in (ours, theirs):
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "fits")["spec"].get("nodeName"), 30)
            assert k8s.wait(lambda ns=ns: condition(k8s.read_pod(ns, "too-big"), "PodScheduled"), 30)
            assert k8s.wait(lambda ns=ns: event(k8s, ns, "Scheduled", "fits"), 30)
            assert k8s.wait(lambda ns=ns: event(k8s, ns, "FailedScheduling", "too-big"), 30)
    got = {ns: k8s.pods(ns) for ns in (ours, theirs)}
    for ns in (ours, theirs):
        assert got[ns]["fits"]["spec"]["nodeName"] == "n1"
        scheduled = condition(got[ns]["fits"], "PodScheduled")
        assert scheduled is not None and scheduled["status"] == "True"
        unschedulable = condition(got[ns]["too-big"], "PodScheduled")
        assert unschedulable is not None
        assert (unschedulable["status"], unschedulable["reason"]) == ("False", "Unschedulable")
        assert unschedulable["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # the events, field by field, but for who wrote them
    for reason, name in (("Scheduled", "fits"), ("FailedScheduling", "too-big")):
        mine, upstream = event(k8s, ours, reason, name), event(k8s, theirs, reason, name)
        assert mine is not None and upstream is not None
        for key in ("type", "action", "reason"):
            assert mine[key] == upstream[key], (key, mine, upstream)
        assert mine["regarding"]["kind"] == upstream["regarding"]["kind"] == "Pod"
        assert mine["reportingController"] == "rulesched" and upstream["reportingController"] == "default-scheduler"
        assert bool(mine.get("eventTime")) and bool(upstream.get("eventTime"))
    assert event(k8s, ours, "Scheduled", "fits")["note"].startswith(f"Successfully assigned {ours}/fits to n1")  # type: ignore[index]
    assert event(k8s, theirs, "Scheduled", "fits")["note"] == f"Successfully assigned {theirs}/fits to n1"  # type: ignore[index]
    mine_note = event(k8s, ours, "FailedScheduling", "too-big")["note"]  # type: ignore[index]
    upstream_note = event(k8s, theirs, "FailedScheduling", "too-big")["note"]  # type: ignore[index]
    assert mine_note == upstream_note, (mine_note, upstream_note)
