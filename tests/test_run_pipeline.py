"""The binding pipeline (rulesched.run.pipeline) on its own, against the test API server: a
request unanswered past the client's timeout fails alone, on time, while requests sent after it
bind; the timeouts are checked from the oldest request on, never by scanning every one in flight."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from rulesched.kube.api import KubeApi
from rulesched.run.binder import BindTarget
from rulesched.run.pipeline import Pipeline
from rulesched.run.workers import Outcome
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for


class Seen:
    def __init__(self) -> None:
        self.outcomes: dict[str, tuple[Outcome, float]] = {}  # pod key -> its outcome and when (monotonic)
        self.finished = 0
        self.lock = threading.Lock()

    def outcome(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes[outcome.key] = (outcome, time.monotonic())

    def done(self) -> None:
        with self.lock:
            self.finished += 1


def pipeline(server: TestApiServer, tmp_path: Path, timeout: float, *names: str) -> tuple[Pipeline, Seen]:
    server.add("nodes", node("n1"))
    for name in names:
        server.add("pods", pod(name))
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")), timeout=timeout)
    seen = Seen()
    return Pipeline(api, 4, seen.outcome, seen.done), seen


def target(name: str) -> BindTarget:
    return BindTarget("default", name, f"uid-{name}", "rulesched")


def test_an_answer_past_the_timeout_fails_its_binding_alone(server: TestApiServer, tmp_path: Path) -> None:
    """With a 1 s client timeout and one binding answered 5 s late, that binding fails after
    about 1 s (not when its answer comes); the bindings sent after it, on the other channels,
    bind with their events meanwhile, and its channel is opened anew for the next one."""
    process, seen = pipeline(server, tmp_path, 1.0, "slow", "a", "b", "after")
    server.set_faults(slow_bindings=("default/slow",), slow_seconds=5.0)
    try:
        sent = time.monotonic()
        process.bind(target("slow"), "n1", "", math.inf)
        assert wait_for(lambda: ("POST", "/api/v1/namespaces/default/pods/slow/binding") in server.store.requests)
        time.sleep(0.3)  # (sent later than the slow one: their timeouts would come later)
        for name in ("a", "b"):
            process.bind(target(name), "n1", "", math.inf)
        assert wait_for(lambda: "default/slow" in seen.outcomes, seconds=4.0), "the timeout was not noticed"
        failed, at = seen.outcomes["default/slow"]
        assert not failed.ok and "no answer within 1s" in failed.reason
        assert 0.9 <= at - sent < 2.5
        process.bind(target("after"), "n1", "", math.inf)
        assert wait_for(lambda: seen.finished == 4)  # (each binding once its work, its event too, is over)
    finally:
        process.close()
    assert {key: o.ok for key, (o, _) in seen.outcomes.items()} == {
        "default/slow": False,
        "default/a": True,
        "default/b": True,
        "default/after": True,
    }
    events = sorted(e["regarding"]["name"] for e in server.store.objects["events"].values())
    assert events == ["a", "after", "b"]


def test_many_answered_requests_leave_nothing_to_check(server: TestApiServer, tmp_path: Path) -> None:
    """Two hundred bindings and their events through four channels: every one answered in time,
    none timed out, and once they are over nothing is left among the requests the timeout
    check looks at (answered ones are dropped as they reach the front, each once)."""
    names = [f"p{n}" for n in range(200)]
    process, seen = pipeline(server, tmp_path, 30.0, *names)
    try:
        for name in names:
            process.bind(target(name), "n1", "", math.inf)
        assert wait_for(lambda: seen.finished == len(names), seconds=30.0)
        assert process._oldest() is None  # (nothing in flight, and the answered entries dropped)
        assert not process._by_sent
    finally:
        process.close()
    assert all(o.ok for o, _ in seen.outcomes.values()) and len(seen.outcomes) == len(names)
