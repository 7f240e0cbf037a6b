"""The cyclic collector while pods are scheduled (rulesched.engine.collector): ``rulesched run``
freezes what its first lists loaded and collects seldom until it stops, then puts the
collector back as it found it."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulesched.engine import RUN_GC_THRESHOLDS, keep_loaded, let_go
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    s = TestApiServer()
    yield s
    s.stop()


@pytest.fixture
def collector() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.unfreeze()
    gc.set_threshold(*before)


def test_keep_loaded_freezes_and_collects_seldom_until_let_go(collector: tuple[int, int, int]) -> None:
    kept = [[i] for i in range(1000)]  # (objects the collector tracks, loaded before)
    before = keep_loaded()
    assert before == collector
    young, *older = gc.get_threshold()
    assert young >= max(RUN_GC_THRESHOLDS[0], len(kept)) and older == list(RUN_GC_THRESHOLDS[1:])
    assert gc.get_freeze_count() >= len(kept)
    let_go(before)
    assert gc.get_threshold() == collector and gc.get_freeze_count() == 0


def test_the_live_loop_collects_seldom_while_it_runs(
    server: TestApiServer, tmp_path: Path, collector: tuple[int, int, int]
) -> None:
    server.add("nodes", node("n0"))
    server.add("pods", pod("a"))
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    assert gc.get_freeze_count() == 0
    thread.start()
    try:
        end = time.monotonic() + 30
        while not server.store.bindings and time.monotonic() < end:
            time.sleep(0.02)
        assert server.store.bindings == 1
        # (synced, and scheduling: what the first lists loaded is frozen, young collections rare)
        assert gc.get_threshold()[0] >= RUN_GC_THRESHOLDS[0] and gc.get_freeze_count() > 0
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert gc.get_threshold() == collector and gc.get_freeze_count() == 0
