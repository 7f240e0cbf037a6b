"""The binding pipeline (rulesched.run.pipeline) in this process, against the test API server:
what used to hold up its thread (and so every other answer) is done elsewhere or later."""

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
