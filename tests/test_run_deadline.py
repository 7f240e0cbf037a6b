"""``rulesched run`` over HTTP against the test API server, with a rule far too costly for the
checker (its limits lifted to compile it): a cycle past its deadline is given up and its pod told
why, naming the rule, as kube-scheduler reports a cycle's error (a FailedScheduling warning,
PodScheduled=False with reason SchedulerError, ``scheduler_schedule_attempts_total{result="error"}``),
the pod is retried with backoff and the pods behind it are scheduled; and a reload to cheap rules
takes effect during such a cycle, which is given up for it, without waiting for the cycle to end.

The costly rule loops four times nested over each node's labels: ~0.1 s per node of 17 labels,
~1 s per node of 31, on 24 nodes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.deadline import HEAVY, lifted
from tests.helpers.kube import events, pod, wait
from tests.helpers.scrape import families, fetch, value
from tests.helpers.timing import Stopwatch

NODES = 24
SIZE = {"cpu": "8", "memory": "16Gi", "pods": "110"}


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    s = TestApiServer()
    yield s
    s.stop()


def add_nodes(server: TestApiServer, labels: int) -> None:
    for i in range(NODES):
        named = {"kubernetes.io/hostname": f"n{i}", **{f"l{j}": str(i) for j in range(labels)}}
        server.add("nodes", {"metadata": {"name": f"n{i}", "labels": named}, "status": {"allocatable": SIZE}})


class Running:
    """A Loop on a thread, the costly set swapped in before it starts (as a reload would)."""

    def __init__(self, server: TestApiServer, tmp_path: Path, deadline: float) -> None:
        self.settings = RunSettings(
            kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
            rules=("default",),
            cycle_deadline=deadline,
            metrics_bind_address="127.0.0.1:0",
            bind_workers=4,
            grace_seconds=2,
        )
        self.loop = Loop(self.settings)
        self.heavy = lifted(HEAVY)
        self.loop.rules.swap(self.heavy)
        self.thread = threading.Thread(target=self.loop.run, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.stop.set()
        self.loop.scheduler.queue.wake()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


def node_of(server: TestApiServer, name: str) -> str | None:
    found: str | None = server.store.objects["pods"][f"default/{name}"]["spec"].get("nodeName")
    return found


def condition(server: TestApiServer, name: str) -> dict[str, Any] | None:
    conditions = server.store.objects["pods"][f"default/{name}"].get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_a_cycle_past_its_deadline_names_the_rule_and_the_pods_behind_it_are_bound(
    server: TestApiServer, tmp_path: Path
) -> None:
    add_nodes(server, 16)
    server.add("pods", pod("a-slow", metadata={"labels": {"cost": "high"}}))
    server.add("pods", pod("b-cheap"))
    clock = Stopwatch()
    with Running(server, tmp_path, deadline=0.3) as running:
        failed = wait(lambda: events(server, "FailedScheduling", "a-slow"), 30)
        assert running.loop.ops is not None
        metrics = f"http://127.0.0.1:{running.loop.ops.port}/metrics"
        note = failed[0]["note"]
        assert note == (
            f"scheduling cycle exceeded its 0.3s deadline while evaluating rule 'heavy' (rules {running.heavy.digest})"
        ), note
        assert failed[0]["type"] == "Warning"
        wait(lambda: node_of(server, "b-cheap"), 30)  # the pod behind it
        got = wait(lambda: condition(server, "a-slow"), 30)
        assert (got["status"], got["reason"]) == ("False", "SchedulerError") and got["message"] == note

        def errors() -> float:
            attempts = families(fetch(metrics))["scheduler_schedule_attempts_total"]
            return value(attempts, "_total", result="error", profile="rulesched")

        wait(lambda: errors() >= 2, 30)  # past its backoff (1 s): tried again, and given up again
        assert node_of(server, "a-slow") is None
        found = families(fetch(metrics))
    attempts = found["scheduler_schedule_attempts_total"]
    assert value(attempts, "_total", result="scheduled", profile="rulesched") == 1
    duration = found["scheduler_scheduling_attempt_duration_seconds"]
    count = value(duration, "_count", result="error")
    mean = value(duration, "_sum", result="error") / count
    print(f"cycles given up: {count:g}, {mean:.2f}s each on average (deadline 0.3s); {clock}")
    # given up at the deadline, give or take an evaluation of 'heavy' (~0.1 s of CPU: 1 s of slack
    # on a quiet machine, as many times more as the machine is slower; the whole cycle: ~3 s of CPU)
    assert mean < 0.3 + clock.bound(1.0), (mean, str(clock))


def test_a_reload_takes_effect_during_a_long_cycle(server: TestApiServer, tmp_path: Path) -> None:
    add_nodes(server, 30)  # a cycle of ~20 s
    server.add("pods", pod("slow", metadata={"labels": {"cost": "high"}}))
    with Running(server, tmp_path, deadline=600) as running:
        loop = running.loop
        wait(lambda: loop.ready and loop.cycles == 0 and loop.scheduler.cycle_rules == running.heavy.digest, 20)
        time.sleep(0.5)  # well into the cycle over the costly rule (several seconds)
        assert node_of(server, "slow") is None
        reloaded, cpu = time.monotonic(), time.process_time()
        loop.reloader.trigger()  # (SIGHUP): the sources' rules, the default profile, replace the costly set
        wait(lambda: node_of(server, "slow"), 120)
        took, cpu = time.monotonic() - reloaded, time.process_time() - cpu
    print(f"reload to binding during a long cycle: {took:.2f}s, {cpu:.2f}s of CPU")
    assert node_of(server, "slow") is not None
    assert loop.rules.digest != running.heavy.digest
    assert events(server, "FailedScheduling", "slow") == []  # given up for the reload: no error
    # The work this process did from the reload to the binding (CPU time, which a loaded machine
    # does not inflate): the reload's compile (~0.5 s) and a cheap cycle, not the rest of the
    # costly one (~20 s of CPU alone).
    assert cpu < 5.0, (cpu, took)
