"""``rulesched run`` end to end, over HTTP, against the test API server with faults: pending pods
that name rulesched are bound exactly once each, no node over its allocatable, one Scheduled
event per pod; pods of other schedulers, terminating pods and finished pods are never touched;
the loop stops cleanly."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from rulesched.scheduler.preemption import VIOLATES_BUDGET
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for
from tests.helpers.timing import Stopwatch


def milli(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def run_until_bound(server: TestApiServer, tmp_path: Path, ours: list[str], seconds: float = 90.0) -> Loop:
    loop = Loop(
        RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=8, grace_seconds=5)
    )

    def done() -> bool:
        pods = server.store.objects["pods"]
        return all(pods[f"default/{n}"]["spec"].get("nodeName") for n in ours)

    thread = threading.Thread(target=loop.run, kwargs={"until": lambda: loop.stop.is_set()}, daemon=True)
    thread.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        time.sleep(0.1)
    time.sleep(0.5)  # let the last events land
    clock = Stopwatch()
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=120)
    # (10 s on a quiet machine, the grace period 5 s of it; the machine's slowdown on top)
    assert not thread.is_alive() and clock.stop() < clock.bound(10), f"the loop did not stop in time: {clock}"
    assert done(), [n for n in ours if not server.store.objects["pods"][f"default/{n}"]["spec"].get("nodeName")]
    return loop


@pytest.mark.parametrize(
    "faults",
    [{}, {"cut_watches_every": 2.0, "error_rate": 0.05, "bind_conflict_rate": 0.05, "seed": 11}],
    ids=["clean", "faults"],
)
def test_every_pod_bound_once_within_allocatable(server: TestApiServer, tmp_path: Path, faults: dict[str, Any]) -> None:
    for i in range(50):
        server.add("nodes", node(f"n{i}"))
    ours = [f"p{i}" for i in range(200)]
    for i, name in enumerate(ours):
        server.add("pods", pod(name, cpu=["250m", "500m", "1"][i % 3]))
    # never touched: another scheduler's pod, a terminating pod, a finished pod
    server.add("pods", pod("theirs", scheduler="default-scheduler"))
    server.add("pods", pod("leaving", metadata={"deletionTimestamp": "2026-01-01T00:00:00Z"}))
    server.add("pods", pod("done", spec={"nodeName": "n0"}, status={"phase": "Succeeded"}))
    server.set_faults(**faults)
    loop = run_until_bound(server, tmp_path, ours)
    server.set_faults()
    # an attempt counts as scheduled once its binding succeeded: once per pod, faults or not
    assert loop.metrics.attempts.labels(result="scheduled", profile="rulesched")._value.get() == len(ours)
    bound = Counter(key for key, _, _ in server.store.binding_log)
    assert all(bound[f"default/{n}"] == 1 for n in ours), {k: v for k, v in bound.items() if v != 1}
    assert set(bound) == {f"default/{n}" for n in ours}  # nobody else's pod was bound
    pods = server.store.objects["pods"]
    assert not pods["default/theirs"]["spec"].get("nodeName") and not pods["default/leaving"]["spec"].get("nodeName")
    used: Counter[str] = Counter()
    for name in ours:
        spec = pods[f"default/{name}"]["spec"]
        used[spec["nodeName"]] += milli(spec["containers"][0]["resources"]["requests"]["cpu"])
    assert max(used.values()) <= 4000
    scheduled = Counter(
        e["regarding"]["name"] for e in server.store.objects["events"].values() if e["reason"] == "Scheduled"
    )
    assert all(scheduled[n] == 1 for n in ours), {n: scheduled[n] for n in ours if scheduled[n] != 1}


def test_unschedulable_pods_get_a_failed_scheduling_event_and_condition(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("small", cpu="1"))
    server.add("pods", pod("fits", cpu="500m"))
    server.add("pods", pod("huge", cpu="8"))
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    end = time.monotonic() + 30
    events: list[dict[str, Any]] = []
    while time.monotonic() < end:
        events = [e for e in server.store.objects["events"].values() if e["reason"] == "FailedScheduling"]
        status = server.store.objects["pods"]["default/huge"].get("status", {})
        bound = server.store.objects["pods"]["default/fits"]["spec"].get("nodeName")  # (its binding is a worker's)
        if events and status.get("conditions") and bound:
            break
        time.sleep(0.1)
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=10)
    assert events and events[0]["regarding"]["name"] == "huge" and events[0]["type"] == "Warning"
    assert events[0]["note"].startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # the reasons as codes, on the event's annotation and in the metrics (docs/explain-and-audit.md)
    coded = json.loads(events[0]["metadata"]["annotations"]["rulesched.io/reasons"])
    assert coded["nodes"] == 1
    (reason,) = coded["reasons"]
    assert (reason["code"], reason["rule"], reason["plugin"], reason["resource"]) == (
        "InsufficientResource",
        "NodeResourcesFit",
        "NodeResourcesFit",
        "cpu",
    )
    assert (reason["shortfall"], reason["unit"], reason["quantity"], reason["nearest"]) == (
        7.5,
        "cores",
        "7500m",
        "small",
    )  # fits took 500m
    assert reason["unresolvable"] is True  # 8 cpu is more than the node has in all
    counted = loop.metrics.unschedulable_reasons.labels(
        code="InsufficientResource", rule="NodeResourcesFit", profile="rulesched"
    )
    assert counted._value.get() >= 1
    (condition,) = server.store.objects["pods"]["default/huge"]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert server.store.objects["pods"]["default/fits"]["spec"]["nodeName"] == "small"


def guarded_node(server: TestApiServer, allowed: int = 1) -> None:
    """Node n1 (2 cpu) full with two low-priority pods under a budget allowing ``allowed``
    disruptions."""
    server.add("nodes", node("n1", cpu="2"))
    for name in ("low-a", "low-b"):
        server.add(
            "pods",
            pod(
                name,
                cpu="1",
                spec={"nodeName": "n1", "priority": 0},
                metadata={"labels": {"app": "guarded"}},
                status={"phase": "Running"},
            ),
        )
    server.add(
        "poddisruptionbudgets",
        {
            "metadata": {"name": "guard", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "guarded"}}},
            "status": {"disruptionsAllowed": allowed},
        },
    )


def pod_status(server: TestApiServer, name: str) -> dict[str, Any]:
    return dict(server.store.objects["pods"][f"default/{name}"].get("status") or {})


def test_a_refused_eviction_is_not_retried_until_the_budget_allows_it(server: TestApiServer, tmp_path: Path) -> None:
    """A high-priority pod fits only once both low-priority pods on the node go; their budget
    allows two disruptions as the scheduler's store has it, but the API server refuses low-b's
    eviction (429: its budget ahead of the status the store has seen). The refusal is reported at
    once: the preemptor is tried again within a second, finds no victim but the one the budget
    protects (spared, not evicted again), so it stays unschedulable saying so, its nomination
    cleared. Once the budget's status changes, it preempts again and is bound there."""
    guarded_node(server, allowed=2)
    server.set_faults(refuse_evictions=("default/low-b",))
    server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: server.store.evictions == ["default/low-a"], 20)

        def message() -> str:
            conditions = pod_status(server, "high").get("conditions") or [{}]
            return str(conditions[0].get("message", ""))

        assert wait_for(lambda: "PodDisruptionBudget refused" in message(), 5), message()
        assert "nominatedNodeName" not in pod_status(server, "high")
        time.sleep(1.0)  # not evicted again meanwhile: one refusal in all
        refusals = [w for w in server.store.writes if w[1].endswith("low-b/eviction")]
        assert len(refusals) == 1, refusals
        assert not server.store.objects["pods"]["default/high"]["spec"].get("nodeName")
        server.set_faults()
        budget = server.store.objects["poddisruptionbudgets"]["default/guard"]
        server.update("poddisruptionbudgets", {**budget, "status": {"disruptionsAllowed": 1}})  # a new status
        assert wait_for(lambda: server.store.objects["pods"]["default/high"]["spec"].get("nodeName") == "n1", 30)
        assert sorted(server.store.evictions) == ["default/low-a", "default/low-b"]
        # (each eviction sent, and the refusal told back, by the binding process: rulesched.run.remover)
        assert loop._binding is not None and loop._binding.removals_answered == 3
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)


def test_victims_a_budget_protects_are_not_asked_for(server: TestApiServer, tmp_path: Path) -> None:
    """The budget allows one disruption and the preemptor needs both pods gone: the only candidate
    would violate it, so with the victims evicted through the Eviction API (--evict-victims
    budgeted, the default) it is none (upstream's kube-scheduler, deleting its victims, would take
    it): nothing is evicted, the pod stays unschedulable saying why. A new status of the budget
    allowing two tries it again: both are evicted and it is bound."""
    guarded_node(server, allowed=1)
    server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:

        def message() -> str:
            conditions = pod_status(server, "high").get("conditions") or [{}]
            return str(conditions[0].get("message", ""))

        assert wait_for(lambda: VIOLATES_BUDGET in message(), 20), message()
        time.sleep(1.0)
        assert server.store.evictions == [] and "nominatedNodeName" not in pod_status(server, "high")
        budget = server.store.objects["poddisruptionbudgets"]["default/guard"]
        server.update("poddisruptionbudgets", {**budget, "status": {"disruptionsAllowed": 2}})
        assert wait_for(lambda: server.store.objects["pods"]["default/high"]["spec"].get("nodeName") == "n1", 30)
        assert sorted(server.store.evictions) == ["default/low-a", "default/low-b"]
        assert loop._binding is not None and loop._binding.removals_answered == 2  # (none before the new status)
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)


def test_a_nominated_preemptor_keeps_the_space_its_evictions_free(server: TestApiServer, tmp_path: Path) -> None:
    """While the preemptor waits for its second victim (its eviction answered late, as the API
    server retrying a busy budget's update answers it), the space the first one freed is held for
    it: a lower-priority pod that would fit there stays pending. A pod that arrived nominated to
    the node by an earlier run loses that nomination (cleared in its status) to the higher
    preemptor."""
    guarded_node(server, allowed=2)
    server.set_faults(slow_evictions=("default/low-b",), slow_seconds=3.0)
    server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    server.add("pods", pod("sneaky", cpu="1", spec={"priority": 10}))
    server.add(
        "pods", pod("stale", cpu="4", spec={"priority": 5}, status={"phase": "Pending", "nominatedNodeName": "n1"})
    )
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    pods = server.store.objects["pods"]
    try:
        assert wait_for(lambda: "default/low-a" not in pods, 20)
        assert "default/low-b" in pods  # (its eviction is under way, slow)
        time.sleep(1.0)  # room for "sneaky" to take the first victim's place, were it not held
        assert not pods["default/sneaky"]["spec"].get("nodeName")
        assert "nominatedNodeName" not in pods["default/stale"].get("status", {})
        assert wait_for(lambda: pods["default/high"]["spec"].get("nodeName") == "n1", 30)
        assert not pods["default/sneaky"]["spec"].get("nodeName")
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)


def test_probes_and_metrics(server: TestApiServer, tmp_path: Path) -> None:
    import urllib.request

    server.add("nodes", node("n1"))
    server.add("pods", pod("a"))
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), metrics_bind_address="127.0.0.1:0", grace_seconds=2
    )
    loop = Loop(settings)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(
            lambda: loop.ops is not None and server.store.objects["pods"]["default/a"]["spec"].get("nodeName")
        )
        assert loop.ops is not None
        base = f"http://127.0.0.1:{loop.ops.port}"
        with urllib.request.urlopen(base + "/healthz") as r:
            assert r.status == 200
        with urllib.request.urlopen(base + "/readyz") as r:
            assert r.read().decode() == f"ok: rules {loop.rules.digest}"
        assert wait_for(
            lambda: (
                'scheduler_schedule_attempts_total{profile="rulesched",result="scheduled"} 1.0'
                in fetch(base + "/metrics")
            )
        )
        text = fetch(base + "/metrics")
        assert 'rulesched_rules_info{files="' in text and f'hash="{loop.rules.digest}"' in text
        assert "scheduler_scheduling_attempt_duration_seconds_bucket" in text and "scheduler_pending_pods" in text
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)


def fetch(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url) as r:
        return str(r.read().decode())
