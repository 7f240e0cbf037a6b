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

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import urllib3

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
    # rulesched's event carries the reasons as codes in an annotation the API server keeps
    coded = json.loads(
        event(k8s, ours, "FailedScheduling", "too-big")["metadata"]["annotations"]["rulesched.io/reasons"]
    )  # type: ignore[index]
    (reason,) = coded["reasons"]
    assert (reason["code"], reason["resource"], reason["unit"], reason["nearest"]) == (
        "InsufficientResource",
        "cpu",
        "cores",
        "n1",
    )
    assert reason["shortfall"] in (1, 2, 3)  # 3 cpu less what n1 had free then (both "fits" pods land there)


def test_a_second_failure_posts_a_second_event_as_kube_schedulers(k8s: Kube) -> None:
    """client-go's events.k8s.io/v1 broadcaster, which kube-scheduler's events go through, makes
    a repeated event a series only when it is isomorphic, the object reference included, and the
    reference carries the pod's resourceVersion: a pod that failed, had its PodScheduled
    condition written, and failed again with another message gets a second event, not a series
    (seen here on the real kube-scheduler; rulesched.run.event_series). The retry: a node big
    enough but tainted (NodeResourcesFit's hint requeues the pod; the taint turns it away)."""
    k8s.node("n1", cpu="2")
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    for ns, scheduler in ((ours, "rulesched"), (theirs, "default-scheduler")):
        k8s.pod(ns, "too-big", cpu="3", scheduler=scheduler)

    def failed(ns: str) -> list[dict[str, Any]]:
        return sorted((e for e in k8s.events(ns) if e["reason"] == "FailedScheduling"), key=lambda e: e["eventTime"])

    def tainted(ns: str) -> list[dict[str, Any]]:
        return [e for e in failed(ns) if "untolerated taint" in e["note"]]

    with k8s.kube_scheduler(), Running(k8s):
        for ns in (ours, theirs):
            assert k8s.wait(lambda ns=ns: failed(ns), 30)
        k8s.node("n2", cpu="8", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
        for ns in (ours, theirs):
            assert k8s.wait(lambda ns=ns: tainted(ns), 30), (ns, failed(ns))
        time.sleep(1.0)  # (nothing more to come)
    for ns in (ours, theirs):
        first, *_ = failed(ns)
        # (the first of the events naming the taint: n2 is created, then its status written; both
        # schedulers' hints skip the first, without allocatable, and queue the pod for the second)
        second = tainted(ns)[0]
        assert first["metadata"]["name"] != second["metadata"]["name"] and "series" not in first, (ns, first)
        assert first["note"].startswith("0/1 nodes are available: 1 Insufficient cpu."), (ns, first)
        assert second["note"].startswith("0/2 nodes are available:"), (ns, second)
        message = condition(k8s.read_pod(ns, "too-big"), "PodScheduled")["message"]  # type: ignore[index]
        assert message == second["note"], (ns, message)
        # the reference names the version of the pod the failed cycle read, as client-go's does
        assert second["regarding"]["resourceVersion"] != first["regarding"]["resourceVersion"], (ns, second)


def unschedulable_attempts(metrics: str) -> float:
    """scheduler_schedule_attempts_total{result="unschedulable"}, summed over profiles."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("scheduler_schedule_attempts_total{") and 'result="unschedulable"' in line
    )


def test_a_node_change_unrelated_to_the_rejecting_filters_retries_nothing(k8s: Kube) -> None:
    """Both schedulers' queueing hints for a changed node (rulesched.scheduler.hints): a pod too
    big for n1 (NodeResourcesFit) and turned away by n2's taint (TaintToleration). A label added
    to n2 leaves both filters' answers there as they were (fit passed before and passes; the
    taint failed before and fails): neither scheduler tries the pod again (kube-scheduler's
    fit.go and taint_toleration.go hints skip it; rulesched's failed there before the change too
    and so skips it). The taint removed then: both place the pod on n2."""
    k8s.node("n1", cpu="2")
    k8s.node("n2", cpu="8", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    for ns, scheduler in ((ours, "rulesched"), (theirs, "default-scheduler")):
        k8s.pod(ns, "too-big", cpu="3", scheduler=scheduler)

    def failed(ns: str) -> bool:
        return any(e["reason"] == "FailedScheduling" for e in k8s.events(ns))

    with k8s.kube_scheduler() as theirs_scheduler, Running(k8s, metrics_bind_address="127.0.0.1:0") as loop:
        assert k8s.wait(lambda: failed(ours) and failed(theirs), 30)

        def attempts() -> tuple[float, float]:
            answer = urllib3.PoolManager().request("GET", f"http://127.0.0.1:{loop.ops.port}/metrics")
            return unschedulable_attempts(answer.data.decode()), unschedulable_attempts(theirs_scheduler.metrics())

        time.sleep(2.0)  # (the first attempts over: n2's status write may have moved the pods once)
        settled = attempts()
        k8s.patch("/api/v1/nodes/n2", {"metadata": {"labels": {"unrelated": "yes"}}})
        time.sleep(3.0)  # (a pod moved would be tried again within its 1-2 s backoff)
        assert attempts() == settled, (settled, attempts())
        k8s.patch("/api/v1/nodes/n2", {"spec": {"taints": None}})
        for ns in (ours, theirs):
            placed = k8s.wait(lambda ns=ns: k8s.read_pod(ns, "too-big")["spec"].get("nodeName") == "n2", 30)
            assert placed, (ns, loop.scheduler.queue.counts(), k8s.read_pod(ns, "too-big")["status"])


def test_preemption_reads_back_as_kube_schedulers(k8s: Kube) -> None:
    """The same preemption in two namespaces, on two nodes of their own (a nodeSelector each):
    a 2-cpu node running a low-priority 2-cpu pod; a high-priority 2-cpu pod. Both delete
    their victim (no PodDisruptionBudget selects it: rulesched's Eviction API is for those a
    budget selects, tests/test_real_live.py); the victims stay terminating (no kubelet). The
    preemptors' nominatedNodeName, the FailedScheduling events saying so, the victims'
    DisruptionTarget condition and their Preempted events read back alike, but for who wrote
    them and the related object kube-scheduler 1.37.2 loses."""
    k8s.create("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    for ns, scheduler in ((ours, "rulesched"), (theirs, "default-scheduler")):
        k8s.node(f"n-{ns}", cpu="2", labels={"side": ns})
        k8s.pod(ns, "low", cpu="2", scheduler=scheduler, spec={"nodeName": f"n-{ns}"})
        k8s.mark_running(ns, "low")
    with k8s.kube_scheduler(), Running(k8s):
        for ns, scheduler in ((ours, "rulesched"), (theirs, "default-scheduler")):
            spec = {"priorityClassName": "high", "nodeSelector": {"side": ns}}
            k8s.pod(ns, "high", cpu="2", scheduler=scheduler, spec=spec)
        for ns in (ours, theirs):
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "high").get("status", {}).get("nominatedNodeName"), 30)
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "low")["metadata"].get("deletionTimestamp"), 30)
            assert k8s.wait(lambda ns=ns: event(k8s, ns, "Preempted", "low"), 30)
            assert k8s.wait(lambda ns=ns: event(k8s, ns, "FailedScheduling", "high"), 30)
        got = {ns: k8s.pods(ns) for ns in (ours, theirs)}
        for ns in (ours, theirs):
            assert got[ns]["high"]["status"]["nominatedNodeName"] == f"n-{ns}"
            assert not got[ns]["high"]["spec"].get("nodeName")  # waits while its victim terminates
        mine, upstream = (condition(got[ns]["low"], "DisruptionTarget") for ns in (ours, theirs))
        assert mine is not None and upstream is not None and mine["status"] == upstream["status"] == "True"
        assert upstream["reason"] == mine["reason"] == "PreemptionByScheduler"
        assert upstream["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
        assert mine["message"] == "rulesched: preempting to accommodate a higher priority pod"
        marked = condition(got[ours]["low"], "rulesched.io/PreemptedByScheduler")
        assert marked is not None and marked["status"] == "True"
        # 1.37's conditions carry the pod's generation when written (PodObservedGenerationTracking;
        # the victim's graceful deletion bumps its generation after), the preemptor's PodScheduled too
        assert mine.get("observedGeneration") == upstream.get("observedGeneration") == 1, (mine, upstream)
        scheduled = [condition(got[ns]["high"], "PodScheduled") for ns in (ours, theirs)]
        assert [c and c.get("observedGeneration") for c in scheduled] == [1, 1], scheduled
        for reason, name in (("Preempted", "low"), ("FailedScheduling", "high")):
            m, u = event(k8s, ours, reason, name), event(k8s, theirs, reason, name)
            assert m is not None and u is not None
            for key in ("type", "action", "reason"):
                assert m[key] == u[key], (key, m, u)
        m, u = event(k8s, ours, "Preempted", "low"), event(k8s, theirs, "Preempted", "low")
        assert m is not None and u is not None
        assert m["note"] == f"Preempted by pod {got[ours]['high']['metadata']['uid']} on node n-{ours}"
        assert u["note"] == f"Preempted by pod {got[theirs]['high']['metadata']['uid']} on node n-{theirs}"
        # rulesched names the preemptor as the related object, as kube-scheduler meant to and did
        # before 1.37: 1.37.2 passes its internal preemptor wrapper (preemption/executor.go,
        # podExecutorPreemptor) to Eventf, whose reference.GetReference fails (logged at -v=9),
        # so its Preempted events carry no related object
        assert (m.get("related") or {}).get("name") == "high" and u.get("related") is None
        m, u = event(k8s, ours, "FailedScheduling", "high"), event(k8s, theirs, "FailedScheduling", "high")
        assert m is not None and u is not None
        assert m["note"].replace(f"n-{ours}", "N") == u["note"].replace(f"n-{theirs}", "N"), (m["note"], u["note"])
        for ns in (ours, theirs):  # the kubelets: the victims' containers stopped
            k8s.remove_terminating(ns)
        for ns in (ours, theirs):
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "high")["spec"].get("nodeName") == f"n-{ns}", 30)


def test_quiet_watches_stay_open(k8s: Kube) -> None:
    """A real API server sends a watch bookmark about once a minute (the test server: every
    second), so a quiet watch must outlive a read timeout of seconds: over 15 quiet seconds each
    of rulesched's watches is opened once and not again (they were cut every 10 s, the watch's
    (connect, read) timeout read as a total)."""
    k8s.node("n1")
    mark = k8s.audit_mark()
    with Running(k8s) as loop:
        assert k8s.wait(lambda: loop.ready, 30)
        time.sleep(15)
        watches = [
            e["objectRef"].get("resource")
            for e in k8s.audit(mark, user="kubernetes-admin", settle=0)
            if e["verb"] == "watch" and e["userAgent"].startswith("rulesched/") and e["stage"] == "ResponseStarted"
        ]
    assert watches and max(Counter(watches).values()) == 1, Counter(watches)
