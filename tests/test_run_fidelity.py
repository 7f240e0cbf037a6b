"""``rulesched run`` over HTTP against the test API server: preemption and filters as
kube-scheduler reports them, and pods rulesched cannot place.

- Victims are marked as upstream's prepareCandidate marks them (pkg/scheduler/framework/
  preemption/preemption.go): a status patch with the DisruptionTarget condition, reason
  PreemptionByScheduler, message "<scheduler>: preempting to accommodate a higher priority pod",
  before their removal (here a deletion: no budget selects them), their other conditions kept; the Preempted event
  names the preemptor as related.
- A restarted scheduler (another replica taking over) whose pending preemptor arrives nominated
  waits for its victims while they terminate (upstream's PodEligibleToPreemptOthers with
  podTerminatingByPreemption), although the Eviction API rewrote their DisruptionTarget
  condition to EvictionByEvictionAPI: rulesched's own condition still names them.
- kube-scheduler's filter order: a node both tainted and full reports the taint, and preemption
  evicts nothing there.
- A pod with DRA claims is unschedulable on every node, and preempts nothing.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import events, node, pod, wait

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
READY = {"type": "Ready", "status": "True"}


def running(name: str, node_name: str, cpu: str = "2", priority: int = 0) -> dict[str, Any]:
    return pod(
        name,
        cpu=cpu,
        spec={"nodeName": node_name, "priority": priority},
        status={"phase": "Running", "conditions": [READY]},
    )


class Running:
    """A Loop on a thread, stopped on exit."""

    def __init__(self, server: TestApiServer, tmp_path: Path, **settings: Any) -> None:
        kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
        self.loop = Loop(RunSettings(kubeconfig=kubeconfig, grace_seconds=2, **settings))
        self.thread = threading.Thread(target=self.loop.run, daemon=True)

    def __enter__(self) -> Loop:
        self.thread.start()
        return self.loop

    def __exit__(self, *exc: object) -> None:
        self.loop.stop.set()
        self.loop.scheduler.queue.wake()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def test_victims_get_disruption_target_before_eviction_and_a_tainted_full_node_is_left_alone(
    server: TestApiServer, tmp_path: Path
) -> None:
    """Two full 2-cpu nodes, one also tainted; a high-priority 2-cpu pod. The tainted node reports
    its taint (unresolvable: TaintToleration comes before NodeResourcesFit), so only the other
    node's pod is preempted: its status is patched (DisruptionTarget and rulesched's condition,
    Ready kept) before the eviction, and its Preempted event names the preemptor."""
    server.add("nodes", {**node("tainted", cpu="2"), "spec": {"taints": [TAINT]}})
    server.add("nodes", node("full", cpu="2"))
    server.add("pods", running("low-t", "tainted"))
    server.add("pods", running("low-f", "full"))
    high = server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    with Running(server, tmp_path):
        wait(lambda: server.store.objects["pods"]["default/high"]["spec"].get("nodeName"))
        preempted = wait(lambda: events(server, "Preempted", "low-f"))
        failed = wait(lambda: events(server, "FailedScheduling", "high"))
    assert server.store.objects["pods"]["default/high"]["spec"]["nodeName"] == "full"
    assert server.store.preempted == ["default/low-f"]  # the tainted node's pod stays
    assert "default/low-t" in server.store.objects["pods"]
    assert failed[0]["note"].startswith(
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."
    )
    # the patch, then the deletion (as kube-scheduler's: no budget selects the victim): in that
    # order, the victim's own requests
    writes = [w for w in server.store.writes if "/pods/low-f" in w[1]]
    assert writes == [
        ("PATCH", "/api/v1/namespaces/default/pods/low-f/status"),
        ("DELETE", "/api/v1/namespaces/default/pods/low-f"),
    ]
    marked = [
        o
        for _, plural, kind, o in server.store.history
        if plural == "pods" and kind == "MODIFIED" and o["metadata"]["name"] == "low-f"
    ]
    conditions = {c["type"]: c for c in marked[-1]["status"]["conditions"]}
    target = conditions["DisruptionTarget"]
    assert (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
    assert target["message"] == "rulesched: preempting to accommodate a higher priority pod"
    assert conditions["rulesched.io/PreemptedByScheduler"]["status"] == "True"
    assert conditions["Ready"] == READY  # a strategic merge: the pod's other conditions stay
    (event,) = preempted
    assert event["related"] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": "default",
        "name": "high",
        "uid": high["metadata"]["uid"],
    }
    assert event["note"] == f"Preempted by pod {high['metadata']['uid']} on node full"
    assert event["type"] == "Normal" and event["action"] == "Preempting"


def test_a_restarted_scheduler_waits_for_its_victims_the_eviction_api_marked(
    server: TestApiServer, tmp_path: Path
) -> None:
    """The first run preempts n1's two pods through the Eviction API (``evict_victims="all"``: by
    default a victim no budget selects is deleted); evicted pods stay terminating (graceful
    evictions), their DisruptionTarget rewritten to EvictionByEvictionAPI. A second run (a new leader: no
    memory of the first) finds the preemptor nominated to n1 and a new node n2 whose single
    low-priority pod would be the cheaper preemption: it waits for n1's victims instead, and
    once they are gone binds the preemptor there; n2's pod is never touched."""
    server.set_faults(graceful_evictions=True)
    server.add("nodes", node("n1", cpu="2"))
    server.add("pods", running("low-a", "n1", cpu="1"))
    server.add("pods", running("low-b", "n1", cpu="1"))
    server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    pods = server.store.objects["pods"]
    with Running(server, tmp_path, evict_victims="all"):
        wait(
            lambda: len(server.store.evictions) == 2 and pods["default/high"].get("status", {}).get("nominatedNodeName")
        )
    for name in ("low-a", "low-b"):
        victim = pods[f"default/{name}"]
        assert victim["metadata"].get("deletionTimestamp")
        reasons = {c["type"]: c.get("reason") for c in victim["status"]["conditions"]}
        assert reasons["DisruptionTarget"] == "EvictionByEvictionAPI"  # the API server's rewrite
    server.add("nodes", node("n2", cpu="2"))
    server.add("pods", running("bystander", "n2"))
    with Running(server, tmp_path, evict_victims="all"):
        waiting = wait(
            lambda: [
                e
                for e in events(server, "FailedScheduling", "high")
                if "terminating pod on the nominated node" in e["note"]
            ]
        )
        assert waiting
        time.sleep(1.0)  # retries keep waiting
        assert sorted(server.store.evictions) == ["default/low-a", "default/low-b"]
        for name in ("low-a", "low-b"):  # the kubelet finishes them
            server.delete("pods", f"default/{name}")
        wait(lambda: pods["default/high"]["spec"].get("nodeName"))
    assert pods["default/high"]["spec"]["nodeName"] == "n1"
    assert "default/bystander" in pods and sorted(server.store.evictions) == ["default/low-a", "default/low-b"]


def test_a_dra_pod_waits_for_its_claim_and_preempts_nothing(server: TestApiServer, tmp_path: Path) -> None:
    """The claim of a template is the resourceclaim controller's to make: until the pod's status
    names it, the pod is unschedulable everywhere, unresolvable (upstream's PreEnqueue and
    PreFilter say the same: resourceclaim.Name's ErrClaimNotFound)."""
    server.add("nodes", node("n1", cpu="2"))
    server.add("pods", running("low", "n1"))
    claims = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    server.add("pods", pod("dra", cpu="2", spec={"priority": 1000, "resourceClaims": claims}))
    with Running(server, tmp_path):
        failed = wait(lambda: events(server, "FailedScheduling", "dra"))
        wait(lambda: server.store.objects["pods"]["default/dra"].get("status", {}).get("conditions"))
        time.sleep(0.5)
    assert failed[0]["note"] == (
        '0/1 nodes are available: 1 pod "default/dra": ResourceClaim not created yet. '
        "preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )
    (condition,) = server.store.objects["pods"]["default/dra"]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert not server.store.objects["pods"]["default/dra"]["spec"].get("nodeName")
    assert server.store.preempted == [] and "default/low" in server.store.objects["pods"]
