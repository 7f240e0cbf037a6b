"""Scheduling gates (kube-scheduler's SchedulingGates plugin): a pod with ``spec.schedulingGates``
is never attempted; once an update removes the last gate it is scheduled. In the queue, in the
simulator's report, and live against the test API server."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rulesched.model import Pod
from rulesched.model.decode import decode_pod
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from rulesched.scheduler.queue import SchedulingQueue
from rulesched.simulate.load import load_cluster
from rulesched.simulate.report import render_json
from rulesched.simulate.run import SimulateSettings, simulate
from tests.apiserver import TestApiServer


def gated(name: str, *gates: str, scheduler: str = "default-scheduler") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {"phase": "Pending"}}


# Upstream's SchedulingGates PreEnqueue table (pkg/scheduler/framework/plugins/schedulinggates):
# no gates -> enqueued; one or more gates -> held back ("waiting for scheduling gates").
@pytest.mark.parametrize(
    ("gates", "attempted"),
    [((), True), (("foo",), False), (("foo", "bar"), False)],
    ids=["no gates", "one gate", "two gates"],
)
def test_gated_pods_are_not_attempted(gates: tuple[str, ...], attempted: bool) -> None:
    queue = SchedulingQueue(lambda: 0.0)
    pod = decode_pod(gated("p", *gates))
    queue.add(pod)
    popped = queue.pop()
    assert (popped is not None) is attempted
    assert queue.counts()["gated"] == (0 if attempted else 1)
    assert "default/p" in queue


def test_removing_the_last_gate_schedules_the_pod() -> None:
    queue = SchedulingQueue(lambda: 0.0)
    queue.add(decode_pod(gated("p", "a", "b")))
    queue.update(decode_pod(gated("p", "b")))  # one gate left
    assert queue.pop() is None and [g.scheduling_gates for g in queue.gated()] == [("b",)]
    queue.add(decode_pod(gated("p")))  # an informer's MODIFIED arrives as add: the last gate went
    popped = queue.pop()
    assert isinstance(popped, Pod) and popped.scheduling_gates == () and queue.counts()["gated"] == 0


def test_a_deleted_gated_pod_leaves() -> None:
    queue = SchedulingQueue(lambda: 0.0)
    queue.add(decode_pod(gated("p", "a")))
    assert queue.delete("default/p") and "default/p" not in queue and queue.counts()["gated"] == 0


def test_the_simulator_reports_gated_pods(tmp_path: Path) -> None:
    import json

    import yaml

    cluster = tmp_path / "cluster.yaml"
    node = {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}}
    docs = [node, {"kind": "Pod", **gated("waiting", "example.com/quota")}, {"kind": "Pod", **gated("free")}]
    cluster.write_text(yaml.safe_dump_all(docs))
    report = simulate(load_cluster([cluster]), SimulateSettings(cluster=(str(cluster),)))
    doc = json.loads(render_json(report))
    messages = {p["pod"]: (p["node"], p["message"]) for p in doc["pods"]}
    assert messages["default/free"][0] == "n1"
    assert messages["default/waiting"] == (
        None,
        "Scheduling is blocked due to non-empty scheduling gates (example.com/quota)",
    )
    assert doc["summary"]["gated"] == 1 and doc["summary"]["unschedulable"] == 0


def test_run_waits_for_the_gates_then_binds(tmp_path: Path) -> None:
    server = TestApiServer()
    try:
        server.add("nodes", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "pods": "10"}}})
        server.add("pods", gated("held", "example.com/quota", scheduler="rulesched"))
        server.add("pods", gated("free", scheduler="rulesched"))
        loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
        thread = threading.Thread(target=loop.run, daemon=True)
        thread.start()
        pods = server.store.objects["pods"]
        end = time.monotonic() + 30
        while not pods["default/free"]["spec"].get("nodeName") and time.monotonic() < end:
            time.sleep(0.02)
        end = time.monotonic() + 30  # (its condition is written by a worker, soon after)
        while not pods["default/held"].get("status", {}).get("conditions") and time.monotonic() < end:
            time.sleep(0.02)
        time.sleep(0.5)
        assert pods["default/free"]["spec"].get("nodeName") == "n1"
        assert not pods["default/held"]["spec"].get("nodeName")  # gated: not attempted
        (condition,) = pods["default/held"]["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "PodScheduled",
            "False",
            "SchedulingGated",
        )
        server.update("pods", {**pods["default/held"], "spec": {**pods["default/held"]["spec"], "schedulingGates": []}})
        end = time.monotonic() + 30
        while not pods["default/held"]["spec"].get("nodeName") and time.monotonic() < end:
            time.sleep(0.02)
        assert pods["default/held"]["spec"].get("nodeName") == "n1"
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    finally:
        server.stop()
