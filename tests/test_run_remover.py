"""Preemption victims' removals from the binding process (rulesched/run/remover.py, the binder's
``remove``/``removed`` lines): the child side fed lines with a fake API (what it calls, what it
answers, its fencing, its retries and its close), the parent's BindingProcess with a real child
against the test API server (a victim deleted, one evicted, one gone already, one a budget
refuses, one past the lease, one a dying child leaves), and the workers handing victims to the
child and applying its answers as their own threads' (removing() while under way, the preemption
execution metric, a refusal reported)."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from rulesched.errors import NotFoundError, TooManyRequestsError, UnavailableError
from rulesched.kube.api import KubeApi
from rulesched.model import LabelSelector, PodDisruptionBudget
from rulesched.run import evictions
from rulesched.run.binder import BindingProcess, serve
from rulesched.run.evictions import BUDGETED, GONE, NONE, NOT_SENT, REMOVED, Ended, Removal, RemovalFailed, removal_for
from rulesched.run.workers import Workers
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for
from tests.upstream.harness import pod as model_pod

AGENT = "rulesched/test (linux/x86_64) host_4242"
BUDGET_429 = "POST: 429 Cannot evict pod as it would violate the pod's disruption budget."
HIGH = model_pod("high", uid="u-high")


def victim(name: str, eviction: bool = False) -> Removal:
    return removal_for(model_pod(name, node_name="n1", uid=f"uid-{name}"), HIGH, None, "pod/default/high", eviction)


# --- the child's side: serve() fed lines, a fake API -------------------------------------------
class FakeApi:
    """What the child calls, in order; ``errors``: victim name -> what its removal raises (each time)."""

    observer: Any = None

    def __init__(self, **errors: Exception) -> None:
        self.calls: list[tuple[str, str]] = []
        self.errors = errors
        self.lock = threading.Lock()

    def channel(self) -> None:  # (no channels: the child binds on threads, as through a proxy)
        return None

    def _call(self, verb: str, name: str) -> None:
        with self.lock:
            self.calls.append((verb, name))
        if verb in ("evict", "delete") and name in self.errors:
            raise self.errors[name]

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False) -> None:
        assert strategic and {c["type"] for c in patch["status"]["conditions"]} >= {"DisruptionTarget"}
        self._call("patch", name)

    def evict(self, namespace: str, name: str) -> None:
        self._call("evict", name)

    def delete(self, resource: Any, namespace: str, name: str, uid: str = "") -> None:
        assert uid == f"uid-{name}"
        self._call("delete", name)

    def post_event(self, regarding: dict[str, str], type_: str, reason: str, *args: Any, **kw: Any) -> None:
        assert reason == "Preempted" and kw["related"]["name"] == "high"
        self._call("event", regarding["name"])


class Lines:
    """The parent's side of the pipe: these lines, then (once ``end`` is set) the pipe closed."""

    def __init__(self, *messages: list[Any]) -> None:
        self.lines = [msgspec.json.encode(m) + b"\n" for m in messages]
        self.end = threading.Event()
        self.end.set()

    def __iter__(self) -> Iterator[bytes]:
        yield from self.lines
        self.end.wait(30)


def child(api: FakeApi, lines: Lines) -> list[list[Any]]:
    """serve() until the lines end; what it wrote back, but the requests' lines."""
    read, write = os.pipe()
    served = threading.Thread(target=serve, args=(api, 2, lines, write))  # type: ignore[arg-type]
    served.start()
    served.join(60)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        answers = [msgspec.json.decode(line) for line in f.read().splitlines()]
    return [a for a in answers if a[0] != "requests"]


def test_the_child_removes_each_victim_and_says_how_it_ended() -> None:
    api = FakeApi(gone=NotFoundError("DELETE: 404"), guarded=TooManyRequestsError(BUDGET_429, 429))
    removals = [victim("loose"), victim("budgeted", eviction=True), victim("gone"), victim("guarded", eviction=True)]
    answers = child(api, Lines(["lease", None], *(["remove", *r.wire()] for r in removals)))
    assert answers[0] == ["ready"]
    ended = {a[1]: a[2] for a in answers if a[0] == "removed"}
    assert ended == {"uid-loose": REMOVED, "uid-budgeted": REMOVED, "uid-gone": GONE, "uid-guarded": [True, BUDGET_429]}
    by_victim = {
        name: [verb for verb, n in api.calls if n == name] for name in ("loose", "budgeted", "gone", "guarded")
    }
    assert by_victim == {
        "loose": ["patch", "delete", "event"],  # (the event only once it is removed, after its mark)
        "budgeted": ["patch", "evict", "event"],
        "gone": ["patch", "delete"],
        "guarded": ["patch", "evict"],  # refused once: not retried
    }


def test_the_child_writes_nothing_past_the_lease() -> None:
    api = FakeApi()
    answers = child(api, Lines(["lease", time.monotonic() - 1.0], ["remove", *victim("late").wire()]))
    assert [a for a in answers if a[0] == "removed"] == [["removed", "uid-late", NOT_SENT]]
    assert api.calls == []


def test_the_child_retries_then_gives_up_and_ends_what_waits_at_its_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 503 is retried every EVICTION_RETRY_SECONDS and given up after EVICTION_TRIES (told as a
    failure, not refused); a retry still waiting when the parent closes the pipe ends, not sent."""
    monkeypatch.setattr(evictions, "EVICTION_TRIES", 3)
    monkeypatch.setattr(evictions, "EVICTION_RETRY_SECONDS", 0.05)
    for retry, answer, tries in ((0.05, [False, "DELETE: 503"], 3), (30.0, NOT_SENT, 1)):
        monkeypatch.setattr(evictions, "EVICTION_RETRY_SECONDS", retry)
        api = FakeApi(flaky=UnavailableError("DELETE: 503", 503))
        lines = Lines(["lease", None], ["remove", *victim("flaky").wire()])
        lines.end.clear()
        closing = threading.Timer(1.0, lines.end.set)  # (the parent closes the pipe a second later)
        closing.start()
        answers = child(api, lines)
        assert [a[1:] for a in answers if a[0] == "removed"] == [["uid-flaky", answer]], retry
        assert [verb for verb, _ in api.calls] == ["patch", "delete"] * tries, retry


# --- the parent's side: a real child against the test API server --------------------------------
class Seen:
    def __init__(self) -> None:
        self.ended: dict[str, Ended] = {}
        self.lock = threading.Lock()

    def removed(self, removal: Removal, ended: Ended) -> None:
        with self.lock:
            self.ended[removal.name] = ended


def running(server: TestApiServer, name: str, **labels: str) -> None:
    server.add(
        "pods",
        pod(
            name,
            spec={"nodeName": "n1"},
            metadata={"labels": labels, "uid": f"uid-{name}"},
            status={"phase": "Running"},
        ),
    )


def budget(server: TestApiServer, app: str, allowed: int) -> None:
    server.add(
        "poddisruptionbudgets",
        {
            "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}},
            "status": {"disruptionsAllowed": allowed},
        },
    )


def start(server: TestApiServer, tmp_path: Path, removed: Any) -> BindingProcess:
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    nothing = lambda *args: None  # noqa: E731
    return BindingProcess(kubeconfig, 4, AGENT, nothing, nothing, nothing, removed=removed).start()


def test_the_binding_process_removes_victims_and_the_parent_hears_how(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    running(server, "loose", app="loose")
    running(server, "web", app="web")
    running(server, "guarded", app="guarded")
    budget(server, "web", 1)
    budget(server, "guarded", 0)
    seen = Seen()
    process = start(server, tmp_path, seen.removed)
    try:
        removals = [victim("loose"), victim("web", True), victim("gone"), victim("guarded", True)]
        for removal in removals:
            assert process.remove(removal, math.inf)
        assert wait_for(lambda: len(seen.ended) == 4, 30), seen.ended
        # (the lease line applies to what the child writes from then on, as with bindings)
        assert process.remove(victim("late"), time.monotonic() - 1.0)  # the lease ran out
        assert wait_for(lambda: len(seen.ended) == 5, 30), seen.ended
        assert wait_for(lambda: len(preempted_events(server)) == 2, 10)
    finally:
        process.stop()
    assert seen.ended == {
        "loose": REMOVED,
        "web": REMOVED,
        "gone": GONE,
        "guarded": RemovalFailed("default/guarded", "default/high", True, seen.ended["guarded"].reason),  # type: ignore[union-attr]
        "late": NOT_SENT,
    }
    assert "disruption budget" in seen.ended["guarded"].reason  # type: ignore[union-attr]
    assert process.removals_answered == 5
    assert sorted(server.store.preempted) == ["default/loose", "default/web"]
    assert server.store.evictions == ["default/web"]
    assert sorted(e["regarding"]["name"] for e in preempted_events(server)) == ["loose", "web"]
    assert "default/guarded" in server.store.objects["pods"]
    assert not [w for w in server.store.writes if "late" in w[1]]


def preempted_events(server: TestApiServer) -> list[dict[str, Any]]:
    return [e for e in server.store.objects["events"].values() if e["reason"] == "Preempted"]


def test_a_dead_binding_process_fails_the_removals_it_had_not_answered(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    running(server, "slow", app="slow")
    server.set_faults(slow_evictions=("default/slow",), slow_seconds=10.0)
    seen = Seen()
    process = start(server, tmp_path, seen.removed)
    assert process.remove(victim("slow", eviction=True), math.inf)
    assert wait_for(lambda: any(p.endswith("/slow/eviction") for _, p in server.store.requests), 20)  # under way
    process.kill()
    assert wait_for(lambda: "slow" in seen.ended, 10)
    assert seen.ended["slow"] == RemovalFailed("default/slow", "default/high", False, "the binding process ended")
    assert not process.remove(victim("slow"), math.inf)  # (the caller removes in-process)
    process.stop()


# --- the workers: victims handed to the child, its answers applied as their own threads' ---------
def test_the_workers_hand_victims_over_and_apply_the_answers(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    running(server, "slow", app="slow")
    running(server, "guarded", app="guarded")
    budget(server, "slow", 1)
    budget(server, "guarded", 0)
    server.set_faults(slow_evictions=("default/slow",), slow_seconds=1.5)
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    pdbs = [
        PodDisruptionBudget(app, "default", LabelSelector(match_labels=(("app", app),)), 1)
        for app in ("slow", "guarded")
    ]
    workers = Workers(KubeApi(kubeconfig), lambda o: None, 2, evict_victims=BUDGETED, budgets=lambda: pdbs)
    executed: list[tuple[str, str]] = []
    failed: list[RemovalFailed] = []
    workers.executed = lambda kind, result, seconds: executed.append((kind, result))
    workers.removal_failed = failed.append
    process = start(server, tmp_path, workers.removal_answered)
    workers.use_process(process)
    slow = model_pod("slow", node_name="n1", uid="uid-slow", labels={"app": "slow"})
    guarded = model_pod("guarded", node_name="n1", uid="uid-guarded", labels={"app": "guarded"})
    try:
        workers.evict(slow, HIGH)
        workers.evict(slow, model_pod("higher", uid="u-higher"))  # under way: not sent again
        assert workers.removing(slow) and workers.in_flight == 1
        assert wait_for(lambda: not workers.removing(slow), 20)
        assert executed == [("pod", "success")] and failed == []
        workers.evict(guarded, HIGH)
        assert wait_for(lambda: failed, 20)
        assert failed == [RemovalFailed("default/guarded", "default/high", True, failed[0].reason)]
        assert not workers.removing(guarded) and executed[-1] == ("pod", "error")
        assert wait_for(lambda: workers.in_flight == 0, 10)
    finally:
        workers.shutdown(wait=True)
    assert process.removals_answered == 2
    assert [p for _, p in server.store.requests if p.endswith("/slow/eviction")] == [
        "/api/v1/namespaces/default/pods/slow/eviction"
    ]  # (once: the second preemptor's hand-over found it under way)


def test_without_a_live_child_the_workers_remove_in_process(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    running(server, "loose")
    seen = Seen()
    process = start(server, tmp_path, seen.removed)
    process.kill()
    assert wait_for(lambda: not process.alive, 10)
    workers = Workers(KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig"))), lambda o: None, 2, evict_victims=NONE)
    workers.use_process(process)
    try:
        workers.evict(model_pod("loose", node_name="n1", uid="uid-loose"), HIGH)
        assert wait_for(lambda: server.store.preempted == ["default/loose"], 20)
    finally:
        workers.shutdown(wait=True)
        process.stop()
    assert seen.ended == {} and process.removals_answered == 0
