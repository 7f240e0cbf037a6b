"""``rulesched run --pod-groups`` over HTTP against the test API server, with faults (5xx,
binding conflicts, watch cuts): 50 gangs of 8 on 100 nodes are each bound whole, once per pod;
a gang that cannot fit binds none of its members and holds nothing; PodGroups' status is set
as scheduler-plugins' controller expects (phase Scheduling, scheduleStartTime); the
scheduler_podgroup_* metrics count the attempts."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rulesched.model.groups import POD_GROUP_LABEL
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import events, node, pod, wait

GANGS, SIZE, NODES = 50, 8, 100


def _group(name: str, minimum: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": minimum},
    }


def _member(name: str, group: str, cpu: str) -> dict[str, Any]:
    return pod(name, cpu=cpu, metadata={"labels": {POD_GROUP_LABEL: group}})


@pytest.mark.parametrize(
    "faults",
    [{}, {"cut_watches_every": 2.0, "error_rate": 0.03, "bind_conflict_rate": 0.03, "seed": 7}],
    ids=["clean", "faults"],
)
def test_gangs_bound_whole_once(server: TestApiServer, tmp_path: Path, faults: dict[str, Any]) -> None:
    for i in range(NODES):
        server.add("nodes", node(f"n{i}"))
    ours = []
    for g in range(GANGS):
        server.add("podgroups", _group(f"g{g}", SIZE))
        for m in range(SIZE):
            server.add("pods", _member(f"g{g}-{m}", f"g{g}", "500m"))
            ours.append(f"g{g}-{m}")
    server.add("podgroups", _group("huge", 4))
    for m in range(4):
        server.add("pods", _member(f"huge-{m}", "huge", "3"))  # 3 of them fit nowhere else: never placed
    for i in range(NODES - 1):  # every node but one keeps 2 cpu busy: the huge gang fits one member only
        server.add("pods", pod(f"busy-{i}", cpu="2", spec={"nodeName": f"n{i}"}, status={"phase": "Running"}))
    server.set_faults(**faults)
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=8, grace_seconds=5, pod_groups=True
    )
    loop = Loop(settings)
    pods = server.store.objects["pods"]

    def done() -> bool:
        return all(pods[f"default/{n}"]["spec"].get("nodeName") for n in ours)

    thread = threading.Thread(target=loop.run, kwargs={"until": lambda: loop.stop.is_set()}, daemon=True)
    thread.start()
    end = time.monotonic() + 60
    while time.monotonic() < end and not done():
        time.sleep(0.1)
    time.sleep(0.5)
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=15)
    server.set_faults()
    assert not thread.is_alive()
    assert done()
    bound = Counter(key for key, _, _ in server.store.binding_log)
    assert all(bound[f"default/{n}"] == 1 for n in ours), {k: v for k, v in bound.items() if v != 1}
    assert not any(k.startswith("default/huge-") for k in bound)  # no partial gang
    assert not any(loop.store.pod_node(f"default/huge-{m}") for m in range(4))  # nothing held for it
    per_group = Counter(
        p["metadata"]["labels"][POD_GROUP_LABEL]
        for p in pods.values()
        if p["spec"].get("nodeName") and POD_GROUP_LABEL in p["metadata"].get("labels", {})
    )
    assert all(per_group[f"g{g}"] == SIZE for g in range(GANGS))
    groups = server.store.objects["podgroups"]
    started = [g for g in groups.values() if (g.get("status") or {}).get("phase") == "Scheduling"]
    assert len(started) >= GANGS and all(g["status"].get("scheduleStartTime") for g in started)
    scheduled = loop.metrics.group_attempts.labels(result="scheduled", profile="rulesched")._value.get()
    assert scheduled >= GANGS  # (a member whose binding failed is retried alone: a group of one attempt more)
    assert loop.metrics.group_attempts.labels(result="unschedulable", profile="rulesched")._value.get() >= 1


def _native_group(name: str, minimum: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"schedulingPolicy": {"gang": {"minCount": minimum}}, **spec},
    }


def test_workload_api_gangs_and_their_conditions(server: TestApiServer, tmp_path: Path) -> None:
    """`run --workloads` against the test API server (discovery serves scheduling.k8s.io/v1beta1):
    a gang that fits is bound whole and its PodGroup gets PodGroupInitiallyScheduled=True; one
    that cannot fit binds nothing and gets the condition False with kube-scheduler's message; a
    pod whose PodGroup is missing waits with no event and no condition (upstream's PreEnqueue)."""
    for i in range(4):
        server.add("nodes", node(f"n{i}", cpu="8" if i == 0 else "4"))  # one member of huge fits, on n0
    server.add("podgroups.scheduling.k8s.io", _native_group("fits", 4))
    server.add("podgroups.scheduling.k8s.io", _native_group("huge", 3))
    for m in range(4):
        server.add("pods", pod(f"fits-{m}", cpu="1", spec={"schedulingGroup": {"podGroupName": "fits"}}))
    for m in range(3):
        server.add("pods", pod(f"huge-{m}", cpu="6", spec={"schedulingGroup": {"podGroupName": "huge"}}))
    server.add("pods", pod("orphan", cpu="1", spec={"schedulingGroup": {"podGroupName": "missing"}}))
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=4, grace_seconds=5, workloads=True
    )
    loop = Loop(settings)
    pods = server.store.objects["pods"]
    groups = server.store.objects["podgroups.scheduling.k8s.io"]

    def condition(group: str) -> dict[str, Any] | None:
        found = (groups[f"default/{group}"].get("status") or {}).get("conditions") or []
        return next((c for c in found if c["type"] == "PodGroupInitiallyScheduled"), None)

    def done() -> bool:
        return (
            all(pods[f"default/fits-{m}"]["spec"].get("nodeName") for m in range(4)) and condition("huge") is not None
        )

    thread = threading.Thread(target=loop.run, kwargs={"until": lambda: loop.stop.is_set()}, daemon=True)
    thread.start()
    end = time.monotonic() + 60
    while time.monotonic() < end and not (done() and condition("fits") is not None):
        time.sleep(0.1)
    time.sleep(0.5)
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert done()
    fits, huge = condition("fits"), condition("huge")
    assert fits is not None and (fits["status"], fits["reason"], fits["observedGeneration"]) == ("True", "Scheduled", 1)
    assert huge is not None and (huge["status"], huge["reason"]) == ("False", "Unschedulable")
    assert huge["message"].startswith("minCount (3) cannot be satisfied: 1 scheduled, 1 remaining")
    assert not any(pods[f"default/huge-{m}"]["spec"].get("nodeName") for m in range(3))
    orphan = pods["default/orphan"]
    assert not orphan["spec"].get("nodeName") and not (orphan.get("status") or {}).get("conditions")
    metrics = loop.metrics
    assert metrics.group_attempts.labels(result="scheduled", profile="rulesched")._value.get() >= 1
    assert metrics.group_attempts.labels(result="unschedulable", profile="rulesched")._value.get() >= 1
    unresolvable = metrics.workload_preemption_attempts.labels(result="UnschedulableAndUnresolvable")
    assert unresolvable._value.get() >= 1  # huge: no lower-priority pod to preempt


def test_a_workload_groups_victims_are_marked_and_announced_as_kube_schedulers(
    server: TestApiServer, tmp_path: Path
) -> None:
    """A PodGroup of priority 1000 preempts both 3-cpu pods of priority 0 on two 4-cpu nodes, as
    one unit: each victim is marked "…a higher priority podgroup" (DisruptionTarget, then deleted:
    no budget selects it) and its Preempted event reads "Preempted by podgroup
    <its uid> on node cluster" with the PodGroup as related object (kube-scheduler 1.37's executor;
    tests/test_real_workloads.py compares them with the real one)."""
    for i in range(2):
        server.add("nodes", node(f"n{i}", cpu="4"))
        server.add("pods", pod(f"low-{i}", cpu="3", spec={"nodeName": f"n{i}"}, status={"phase": "Running"}))
    group = server.add("podgroups.scheduling.k8s.io", _native_group("gang", 2, priority=1000))
    for m in range(2):
        spec = {"schedulingGroup": {"podGroupName": "gang"}, "priority": 1000}
        server.add("pods", pod(f"gang-{m}", cpu="3", spec=spec))
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=4, grace_seconds=5, workloads=True
    )
    loop = Loop(settings)
    thread = threading.Thread(target=loop.run, kwargs={"until": lambda: loop.stop.is_set()}, daemon=True)
    thread.start()
    # the two victims timed as one preemption (scheduler_preemption_execution_duration_seconds)
    executed = loop.metrics.preemption_execution.labels(preemptor="podgroup", result="success")
    try:
        preempted = [wait(lambda i=i: events(server, "Preempted", f"low-{i}"), 30) for i in range(2)]
        wait(lambda: executed._sum.get() > 0, 10)
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=15)
    assert sorted(server.store.preempted) == ["default/low-0", "default/low-1"]
    count = sum(b.get() for b in executed._buckets)
    assert count == 1 and executed._sum.get() > 0, (count, executed._sum.get())
    uid = group["metadata"]["uid"]
    for (event,) in preempted:
        assert event["note"] == f"Preempted by podgroup {uid} on node cluster"
        assert event["related"] == {
            "kind": "PodGroup",
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "namespace": "default",
            "name": "gang",
            "uid": uid,
        }
    marked = [
        o
        for _, plural, kind, o in server.store.history
        if plural == "pods" and kind == "MODIFIED" and o["metadata"]["name"] == "low-0"
    ]
    conditions = {c["type"]: c for c in marked[-1]["status"]["conditions"]}
    assert conditions["DisruptionTarget"]["message"] == (
        "rulesched: preempting to accommodate a higher priority podgroup"
    )
