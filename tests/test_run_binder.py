"""The binding process (rulesched.run.binder) against the test API server: it binds and posts the
Scheduled event with the scheduler's User-Agent, relays its requests for the metrics, reports a
409 with where the pod is bound, writes nothing past the lease deadline it was given, and when it
dies every binding it had not answered comes back failed (so the loop forgets and requeues the
pod) and binding falls back in-process."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from rulesched.run.binder import BindingProcess, BindTarget
from rulesched.run.workers import Outcome
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for

AGENT = "rulesched/test (linux/x86_64) host_4242"


class Recorder:
    def __init__(self) -> None:
        self.outcomes: list[Outcome] = []
        self.requests: list[tuple[str, str]] = []
        self.finished = 0
        self.lock = threading.Lock()

    def outcome(self, outcome: Outcome) -> None:
        with self.lock:
            self.outcomes.append(outcome)

    def done(self) -> None:
        with self.lock:
            self.finished += 1

    def observe(self, method: str, code: str, seconds: float) -> None:
        with self.lock:
            self.requests.append((method, code))


def start(server: TestApiServer, tmp_path: Path, seen: Recorder) -> BindingProcess:
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    return BindingProcess(kubeconfig, 4, AGENT, seen.outcome, seen.done, seen.observe).start()


def on_n1(server: TestApiServer, tmp_path: Path, *names: str) -> tuple[BindingProcess, Recorder]:
    """Node n1 and the pods ``names`` on the server, and a binding process started for them."""
    server.add("nodes", node("n1"))
    for name in names:
        server.add("pods", pod(name))
    seen = Recorder()
    return start(server, tmp_path, seen), seen


def target(name: str) -> BindTarget:
    return BindTarget("default", name, f"uid-{name}", "rulesched")


def test_binds_posts_the_event_and_relays_its_requests(server: TestApiServer, tmp_path: Path) -> None:
    process, seen = on_n1(server, tmp_path, "a", "b", "taken")
    server.update("pods", {**pod("taken"), "spec": {**pod("taken")["spec"], "nodeName": "n1"}})
    try:
        for name in ("a", "b", "taken"):
            assert process.bind(target(name), "n1", "digest1", math.inf)
        process.flush()  # (the lines wait a moment for others to go with them)
        assert wait_for(lambda: seen.finished == 3)
    finally:
        process.stop()
    by_key = {o.key: o for o in seen.outcomes}
    assert (
        by_key["default/a"].ok and by_key["default/a"].rules == "digest1" and by_key["default/a"].profile == "rulesched"
    )
    taken = by_key["default/taken"]  # a 409: bound already, and where
    assert not taken.ok and (taken.bound_elsewhere or {})["spec"]["nodeName"] == "n1"
    assert {c.caller for c in server.store.binding_calls} == {AGENT}
    events = [e for e in server.store.objects["events"].values() if e["reason"] == "Scheduled"]
    assert sorted(e["regarding"]["name"] for e in events) == ["a", "b"]
    assert "digest1" in events[0]["note"]
    assert seen.requests.count(("POST", "201")) == 4 and ("POST", "409") in seen.requests  # 2 bindings, 2 events


def test_says_it_is_ready_once_its_child_takes_bindings(server: TestApiServer, tmp_path: Path) -> None:
    """The child says "ready" once its imports and its client are done, and the parent latches
    it (``rulesched run``'s /readyz waits for it: before, bindings handed over during the child's
    start sat in the pipe, the first binding 0.5-2.5 s after the first pod on the test bed)."""
    process, seen = on_n1(server, tmp_path, "a")
    try:
        assert wait_for(lambda: process.ready)
        assert process.bind(target("a"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 1)
        assert process.ready and seen.outcomes[0].ok
    finally:
        process.stop()


def test_writes_nothing_past_the_lease_deadline(server: TestApiServer, tmp_path: Path) -> None:
    process, seen = on_n1(server, tmp_path, "late", "ontime")
    try:
        assert process.bind(target("late"), "n1", "", time.monotonic() - 1.0)  # the lease ran out
        assert process.bind(target("ontime"), "n1", "", time.monotonic() + 60.0)  # renewed
        process.flush()
        assert wait_for(lambda: seen.finished == 2)
    finally:
        process.stop()
    by_key = {o.key: o for o in seen.outcomes}
    assert not by_key["default/late"].ok and by_key["default/late"].reason == "not leading"
    assert by_key["default/ontime"].ok
    assert [c.pod for c in server.store.binding_calls] == ["default/ontime"]


def test_a_dead_binding_process_fails_what_it_had_not_answered(server: TestApiServer, tmp_path: Path) -> None:
    process, seen = on_n1(server, tmp_path, "slow")
    server.set_faults(delay=5.0)
    assert process.bind(target("slow"), "n1", "", math.inf)
    process.flush()
    assert wait_for(lambda: any(r[0] == "POST" for r in server.store.requests), 20)  # under way
    process.kill()
    assert wait_for(lambda: not process.alive)
    assert wait_for(lambda: seen.finished == 1)
    assert [(o.key, o.ok, o.reason) for o in seen.outcomes] == [("default/slow", False, "the binding process ended")]
    assert not process.bind(target("slow"), "n1", "", math.inf)  # (the caller binds in-process)
    process.stop()


def test_a_binding_waits_for_others_at_most_a_moment(server: TestApiServer, tmp_path: Path) -> None:
    """Lines wait in a buffer to be written together; one that has waited BATCH_SECONDS goes out
    with the next binding, without a flush."""
    from rulesched.run.binder import BATCH_SECONDS

    process, seen = on_n1(server, tmp_path, "first", "second")
    try:
        assert process.bind(target("first"), "n1", "", math.inf)
        time.sleep(0.5)
        assert seen.finished == 0  # still waiting for company
        time.sleep(BATCH_SECONDS)
        assert process.bind(target("second"), "n1", "", math.inf)  # the first waited long enough: both go
        assert wait_for(lambda: seen.finished == 2)
    finally:
        process.stop()
    assert sorted(key for key, _, _ in server.store.binding_log) == ["default/first", "default/second"]


def test_a_late_only_flush_sends_only_lines_that_waited(server: TestApiServer, tmp_path: Path) -> None:
    """After each cycle the loop asks for the lines that waited BATCH_SECONDS: cycles that bind
    nothing (the pods left do not fit) must not hold a binding back until the queue empties."""
    from rulesched.run.binder import BATCH_SECONDS

    process, seen = on_n1(server, tmp_path, "early")
    try:
        assert process.bind(target("early"), "n1", "", math.inf)
        process.flush(late_only=True)  # (it has not waited yet)
        time.sleep(0.3)
        assert seen.finished == 0
        time.sleep(BATCH_SECONDS)
        process.flush(late_only=True)
        assert wait_for(lambda: seen.finished == 1)
    finally:
        process.stop()
    assert [o.ok for o in seen.outcomes] == [True]


def test_connections_the_server_closed_while_idle_are_opened_again(server: TestApiServer, tmp_path: Path) -> None:
    """A kept-alive connection the API server closed between bindings (a restart, an idle
    timeout) is noticed before the next request and opened again: the binding is not lost."""
    process, seen = on_n1(server, tmp_path, "before", "after")
    try:
        assert process.bind(target("before"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 1)
        server.restart()  # (every connection closed)
        time.sleep(0.2)
        assert process.bind(target("after"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 2)
    finally:
        process.stop()
    assert [(o.key, o.ok) for o in seen.outcomes] == [("default/before", True), ("default/after", True)]


def test_a_connection_cut_fails_its_binding_and_the_rest_bind(server: TestApiServer, tmp_path: Path) -> None:
    """Bindings go out on kept-alive connections (rulesched.run.pipeline): one whose
    connection is reset comes back failed (the scheduler requeues it), the others in flight
    bind, and a later binding gets a new connection."""
    names = ["a", "cut", "b", "again"]
    process, seen = on_n1(server, tmp_path, *names)
    server.set_faults(reset_bindings=("default/cut",))
    try:
        for name in names[:3]:
            assert process.bind(target(name), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 3)
        assert process.bind(target("again"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 4)
    finally:
        process.stop()
    by_key = {o.key: o for o in seen.outcomes}
    assert not by_key["default/cut"].ok and "binding" in by_key["default/cut"].reason
    assert all(by_key[f"default/{n}"].ok for n in ("a", "b", "again"))
    events = sorted(e["regarding"]["name"] for e in server.store.objects["events"].values())
    assert events == ["a", "again", "b"]  # (no event for the binding that failed)


def test_a_slow_answer_holds_up_no_other_binding(server: TestApiServer, tmp_path: Path) -> None:
    """Each answer is read as it comes (rulesched.run.pipeline): bindings handed over after one
    the server answers 8 s late bind, with their events, long before it, on the other channels.
    (In rounds, every binding waited for its round's slowest answer and its events, and later
    ones for the next round: 130-200 pods/s on a busy real API server.)"""
    names = ["slow", "a", "b", "c"]
    process, seen = on_n1(server, tmp_path, *names)
    server.set_faults(slow_bindings=("default/slow",), slow_seconds=8.0)
    try:
        assert process.bind(target("slow"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: ("POST", "/api/v1/namespaces/default/pods/slow/binding") in server.store.requests)
        for name in names[1:]:
            assert process.bind(target(name), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 3, seconds=6.0), "the others waited for the slow answer"
        # (in any order: each went on its own connection)
        assert sorted(o.key for o in seen.outcomes) == ["default/a", "default/b", "default/c"]
        assert wait_for(lambda: seen.finished == 4)
    finally:
        process.stop()
    assert all(o.ok for o in seen.outcomes) and seen.outcomes[-1].key == "default/slow"
    events = sorted(e["regarding"]["name"] for e in server.store.objects["events"].values())
    assert events == sorted(names)


def test_events_leave_channels_to_bindings(server: TestApiServer, tmp_path: Path) -> None:
    """Scheduled events hold at most a quarter of the channels (rulesched.run.pipeline), and a
    binding goes before the events waiting: with every event answered 3 s late, a binding handed
    over after four others is answered at once. (In the order they became ready, on every
    channel, it waited behind the four events: on the test bed's preemption workload, bindings
    waited 1-2 s so, and some of those pods, assumed, were chosen as victims meanwhile.)"""
    names = ["a", "b", "c", "d", "late"]
    process, seen = on_n1(server, tmp_path, *names)  # (4 channels: 1 for events)
    server.set_faults(slow_events=True, slow_seconds=3.0)
    try:
        for name in names[:4]:
            assert process.bind(target(name), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: len(seen.outcomes) == 4)
        assert wait_for(lambda: sum(path.endswith("/events") for _, path in server.store.requests) >= 1)
        time.sleep(0.2)  # (the events that may go have gone)
        assert process.bind(target("late"), "n1", "", math.inf)
        handed = time.monotonic()
        process.flush()
        assert wait_for(lambda: len(seen.outcomes) == 5, seconds=10.0)
        answered = time.monotonic() - handed
    finally:
        process.stop(wait=0.1)
    assert seen.outcomes[-1].key == "default/late" and seen.outcomes[-1].ok
    assert answered < 1.5, f"the binding waited {answered:.1f}s behind events"


def test_connections_are_opened_before_the_first_binding(server: TestApiServer, tmp_path: Path) -> None:
    """The pipeline opens its connections (TCP and TLS) ahead, several at once, on threads of
    their own: on the loaded test bed, opened by the pipeline's thread as each was first
    needed, a burst's first 64 bindings went out one per 30-100 ms while no answer was read."""
    process, seen = on_n1(server, tmp_path, "a")
    try:
        assert wait_for(lambda: server.connections == 4, seconds=10.0)
        assert process.bind(target("a"), "n1", "", math.inf)
        process.flush()
        assert wait_for(lambda: seen.finished == 1)
    finally:
        process.stop()
    assert [(o.key, o.ok) for o in seen.outcomes] == [("default/a", True)]
    assert server.connections == 4  # (the binding and its event went on connections opened ahead)


def test_the_loop_binds_on_when_its_binding_process_dies(server: TestApiServer, tmp_path: Path) -> None:
    """Killed while bindings are under way (the server answers slowly): those come back failed,
    their pods are requeued (the server may have bound some already: a retry's 409 says where),
    and the rest bind in-process, each pod once."""
    from collections import Counter

    from rulesched.run.loop import Loop
    from rulesched.run.settings import RunSettings

    for i in range(4):
        server.add("nodes", node(f"n{i}"))
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: loop.ready and loop.workers.process is not None)
        server.add("pods", pod("first"))
        assert wait_for(lambda: len(server.store.binding_log) == 1)
        server.set_faults(delay=1.0)
        for i in range(3):
            server.add("pods", pod(f"slow{i}"))
        assert wait_for(lambda: sum(1 for c in server.store.requests if c[1].endswith("/binding")) >= 2)
        process = loop.workers.process
        assert process is not None
        killed = process.pid
        process.kill()
        assert wait_for(lambda: not process.alive)
        server.set_faults()
        for i in range(3):
            server.add("pods", pod(f"late{i}"))
        names = ["first"] + [f"slow{i}" for i in range(3)] + [f"late{i}" for i in range(3)]
        pods = server.store.objects["pods"]
        assert wait_for(lambda: all(pods[f"default/{n}"]["spec"].get("nodeName") for n in names), 30)
        assert wait_for(lambda: process.alive, 10)  # started again, a second later
        assert process.pid is not None and process.pid != killed
        server.add("pods", pod("after"))  # ... and it binds again
        names.append("after")
        assert wait_for(lambda: pods["default/after"]["spec"].get("nodeName"), 10)
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=15)
    assert Counter(key for key, _, _ in server.store.binding_log) == Counter(f"default/{n}" for n in names)
