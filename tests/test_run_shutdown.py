"""``rulesched run`` over HTTP against the test API server: prompt exit on SIGTERM, and watches
that keep new pods coming while the connections under them are reset.

* SIGTERM with nothing in flight: the process exits 0 promptly, even though the server sends
  bookmarks as rarely as a real one (informer threads blocked on a watch read are woken by
  closing their streams, not waited on one after another).
* Watches reset abruptly (TCP RST mid-stream) every few hundred milliseconds: each is resumed at
  once, so pods created meanwhile are bound within a fraction of a second; none of the resets
  counts as a failure (no backoff), and the informers never pause longer than the floor between
  two watch starts (what they wait is recorded, so a loaded machine cannot fail the test)."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rulesched.kube.informer import WATCH_FLOOR
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod
from tests.helpers.timing import Stopwatch

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    s = TestApiServer()
    yield s
    s.stop()


def wait(condition: object, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return bool(condition())  # type: ignore[operator]


def test_sigterm_with_nothing_in_flight_exits_at_once(server: TestApiServer, tmp_path: Path) -> None:
    server.set_faults(bookmark_every=60.0)  # watches stay silent, as on a real server
    for i in range(3):
        server.add("nodes", node(f"n{i}"))
    server.add("pods", pod("a"))
    log = tmp_path / "run.log"
    command = [sys.executable, "-m", "rulesched.cli", "-v", "run", "--kubeconfig"]
    command += [server.kubeconfig(str(tmp_path / "kubeconfig")), "--metrics-bind-address", "127.0.0.1:0"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        assert wait(lambda: server.store.bindings == 1, 60), log.read_text()[-2000:]
        time.sleep(0.3)  # its Scheduled event and status writes done: nothing in flight
        clock = Stopwatch()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        clock.stop()
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    print(f"SIGTERM to exit: {clock}")
    # 5 s on a quiet machine (measured ~0.5 s; 13-15 s when the informers were joined one after
    # another), as many times more as the machine is slower now: a thread left waiting on a
    # silent watch (a bookmark a minute) still fails it.
    assert code == 0 and clock.stop() < clock.bound(5.0), (str(clock), text[-2000:])
    assert "Traceback" not in text


def test_abruptly_reset_watches_resume_at_once(server: TestApiServer, tmp_path: Path) -> None:
    for i in range(4):
        server.add("nodes", node(f"n{i}"))
    server.set_faults(reset_watches_every=0.3)  # every watch: an RST 0.3-0.5 s after it opened
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), bind_workers=4))
    for informer in loop.mirror.informers:  # every pause an informer takes goes through its stop event
        informer.stop = PausesRecorded(loop.stop)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait(lambda: loop.ready, 30)
        names = [f"p{i}" for i in range(16)]
        clock = Stopwatch()
        for name in names:  # one every 0.15 s: many land while a watch is being reset and resumed
            server.add("pods", pod(name))
            time.sleep(0.15)
        pods = server.store.objects["pods"]
        assert wait(lambda: all(pods[f"default/{n}"]["spec"].get("nodeName") for n in names), 30)
        clock.stop()
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    assert not thread.is_alive()
    store = server.store
    bound_at = {key: at for key, _, at in store.binding_log}
    delays = sorted(bound_at[f"default/{n}"] - store.created[f"default/{n}"] for n in names)
    print(f"creation to binding under watch resets: p50 {statistics.median(delays):.3f}s, max {delays[-1]:.3f}s")
    assert Counter(key for key, _, _ in store.binding_log) == Counter(f"default/{n}" for n in names)
    informers = loop.mirror.informers
    assert sum(i.resumes for i in informers) > len(informers)  # the resets happened, and were resumed
    assert sum(i.errors for i in informers) == 0  # none of them was a failure: no backoff
    # Resumed at once: no informer ever paused longer than the floor between two watch starts
    # (before, the backoff grew towards 30 s), and every pod was bound within 2 s of its creation
    # on a quiet machine (measured: max ~0.1 s), as many times more as the machine is slower now.
    assert delays[-1] < clock.bound(2.0), (delays, str(clock))
    recorded = [i.stop for i in informers if isinstance(i.stop, PausesRecorded)]
    assert len(recorded) == len(informers) and all(r.checks for r in recorded)  # (they did use it)
    pauses = [p for r in recorded for p in r.pauses]
    assert max(pauses, default=0.0) <= WATCH_FLOOR, sorted(pauses)[-5:]


class PausesRecorded(threading.Event):
    """The loop's stop event as an informer sees it, recording every wait it asks for."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self.shared = stop
        self.pauses: list[float] = []
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.shared.is_set()

    def set(self) -> None:
        self.shared.set()

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(float("inf") if timeout is None else timeout)
        return self.shared.wait(timeout)
