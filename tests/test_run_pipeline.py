"""The binding pipeline (rulesched.run.pipeline) in this process, against the test API server:
what used to hold up its thread (and so every other answer) is done elsewhere or later; a
request unanswered past the client's timeout fails alone, on time, while requests sent after it
bind; the timeouts are checked from the oldest request on, never by scanning every one in flight."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rulesched.kube.api import KubeApi
from rulesched.kube.channel import Channel
from rulesched.run.binder import BindTarget
from rulesched.run.pipeline import Pipeline
from rulesched.run.workers import Outcome
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for


def test_an_event_unanswered_is_retried_while_bindings_go_on(server: TestApiServer, tmp_path: Path) -> None:
    """An event whose answer does not come is retried on the pipeline's channels, and bindings
    go on meanwhile (it used to be retried through the blocking call, on the pipeline's thread:
    up to six timeouts during which no answer was read and no binding sent)."""
    server.add("nodes", node("n1"))
    for name in ("a", "late"):
        server.add("pods", pod(name))
    outcomes: list[tuple[Outcome, float]] = []
    finished = threading.Semaphore(0)
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")), timeout=1.0)
    pipeline = Pipeline(api, 4, lambda o: outcomes.append((o, time.monotonic())), finished.release)
    server.set_faults(slow_events=True, slow_seconds=5.0)  # (past the client's timeout of 1 s)
    try:
        pipeline.bind(BindTarget("default", "a", "uid-a", "rulesched"), "n1", "", math.inf)
        assert wait_for(lambda: len(outcomes) == 1)
        # the event's answer does not come within the timeout: it fails (after 1-2 s), and is retried
        time.sleep(2.5)
        handed = time.monotonic()
        pipeline.bind(BindTarget("default", "late", "uid-late", "rulesched"), "n1", "", math.inf)
        assert wait_for(lambda: len(outcomes) == 2, seconds=10.0)
        assert outcomes[1][0].key == "default/late" and outcomes[1][0].ok
        assert outcomes[1][1] - handed < 0.5, f"the binding waited {outcomes[1][1] - handed:.1f}s"
        server.set_faults()  # (the server answers again: a retry of each event goes through)
        assert finished.acquire(timeout=15) and finished.acquire(timeout=15)
    finally:
        server.set_faults()
        pipeline.close()
        api.close()
    posted = [e["regarding"]["name"] for e in server.store.objects["events"].values() if e["reason"] == "Scheduled"]
    assert sorted(set(posted)) == ["a", "late"]


def test_a_connection_the_server_closed_with_its_answer_is_opened_again_off_the_pipelines_thread(
    server: TestApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kube-apiserver closes connections with an answer (``Connection: close``) when it shuts
    down: such a channel is opened again by an opener, as a failed one is, not by the next
    request on the pipeline's thread (a TLS handshake there holds every other answer)."""
    server.add("nodes", node("n1"))
    names = ["a", "b", "c"]
    for name in names:
        server.add("pods", pod(name))
    inline: list[str] = []
    send = Channel.send

    def watched(channel: Channel, method: str, path: str, body: Any = None, answer: bool = True) -> None:
        if not channel.connected:
            inline.append(path)  # (the send would connect on the pipeline's thread)
        send(channel, method, path, body, answer)

    monkeypatch.setattr(Channel, "send", watched)
    finished = threading.Semaphore(0)
    outcomes: list[Outcome] = []
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    server.set_faults(close_connections=True)
    pipeline = Pipeline(api, 1, outcomes.append, finished.release)
    try:
        assert wait_for(lambda: server.connections == 1)
        for name in names:
            pipeline.bind(BindTarget("default", name, f"uid-{name}", "rulesched"), "n1", "", math.inf)
        for _ in names:
            assert finished.acquire(timeout=15)
    finally:
        server.set_faults()
        pipeline.close()
        api.close()
    assert [(o.key, o.ok) for o in outcomes] == [(f"default/{n}", True) for n in names]
    assert inline == []


def test_the_pipeline_says_when_its_connections_are_open(server: TestApiServer, tmp_path: Path) -> None:
    """The binding process says it takes bindings once its channels are open (each a TLS
    handshake: made after it said so, they went on while the first bindings waited);
    ``wait_open`` waits for every channel's first opening, a failed one counted too, within its
    bound."""
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    pipeline = Pipeline(api, 6, lambda o: None, lambda: None)
    try:
        assert pipeline.wait_open(15.0) == 6
        assert wait_for(lambda: server.connections == 6)  # (the server's accepts follow the kernel's)
    finally:
        pipeline.close()
        api.close()
    config = Path(server.kubeconfig(str(tmp_path / "kubeconfig2")))
    config.write_text(config.read_text().replace(server.url, "http://127.0.0.1:1"))
    dead = KubeApi(str(config))  # (nothing listens: each opening fails at once, and is counted)
    pipeline = Pipeline(dead, 3, lambda o: None, lambda: None)
    try:
        assert pipeline.wait_open(15.0) == 3
    finally:
        pipeline.close()
        dead.close()


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


def started(server: TestApiServer, tmp_path: Path, timeout: float, *names: str) -> tuple[Pipeline, Seen, KubeApi]:
    server.add("nodes", node("n1"))
    for name in names:
        server.add("pods", pod(name))
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")), timeout=timeout)
    seen = Seen()
    return Pipeline(api, 4, seen.outcome, seen.done), seen, api


def target(name: str) -> BindTarget:
    return BindTarget("default", name, f"uid-{name}", "rulesched")


def test_an_answer_past_the_timeout_fails_its_binding_alone(server: TestApiServer, tmp_path: Path) -> None:
    """With a 1 s client timeout and one binding answered 5 s late, that binding fails after
    about 1 s (not when its answer comes); the bindings sent after it, on the other channels,
    bind with their events meanwhile, and its channel is opened anew for the next one."""
    process, seen, api = started(server, tmp_path, 1.0, "slow", "a", "b", "after")
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
        api.close()
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
    process, seen, api = started(server, tmp_path, 30.0, *names)
    try:
        for name in names:
            process.bind(target(name), "n1", "", math.inf)
        assert wait_for(lambda: seen.finished == len(names), seconds=30.0)
        assert process._oldest() is None  # (nothing in flight, and the answered entries dropped)
        assert not process._by_sent
    finally:
        process.close()
        api.close()
    assert all(o.ok for o, _ in seen.outcomes.values()) and len(seen.outcomes) == len(names)
