"""A restart never takes the scheduler down, and reloads never starve, over HTTP against the test
API server: a replica that starts while the ConfigMap does not compile runs the last good set the
leader recorded (a Warning event names the rejected keys); with no record it stays up, not ready
and not scheduling, and starts the moment a valid set arrives (and records it); a continuous
stream of updates still applies valid sets within the maximum delay, with the refusals in one
aggregated event; any failure inside a reload is refused like a bad set and the next valid set
is applied."""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from rulesched.lang import RuleSet, bundled_rules_dir, load_rules_text, load_sources
from rulesched.lang.frontend.files import content_digest
from rulesched.last_good import DIGEST, SOURCE_VERSION
from rulesched.rejections import RejectionEvents
from rulesched.reload import Reloader, ReloadOutcome, ReloadSettings, RulesSources
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess, extender_args
from tests.helpers.timing import Stopwatch

MAX_DELAY = 0.5
SLACK = 1.5  # seconds on top of the maximum delay, on a quiet machine (scaled by its slowdown)


def only(node: str) -> str:
    return f'extends "default"\n\nfilter only_{node}:\n    node.name == "{node}"\n    else "node is not {node}"\n'


BROKEN = 'extends "default"\n\nfilter broken:\n    node.nme == "x"\n'  # policy.rules:4:5
# ~170 chained lets: deep enough to overflow the checker's recursion (before it was made iterative)
LET_CHAIN = "let v0 = 1\n" + "".join(f"let v{i} = v{i - 1} + 1\n" for i in range(1, 170)) + "filter f:\n    v169 > 0\n"


def digest_of(text: str) -> str:
    return load_rules_text({"policy.rules": text}).digest


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "rulesched", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    s = TestApiServer()
    yield s
    s.stop()


def _configmap(text: str) -> dict[str, Any]:
    return {"metadata": {"name": "policy", "namespace": "rulesched"}, "data": {"policy.rules": text}}


def _update(server: TestApiServer, text: str) -> None:
    current = server.store.objects["configmaps"]["rulesched/policy"]
    server.update("configmaps", {**current, "data": {"policy.rules": text}})


def _loop(server: TestApiServer, tmp_path: Path, **settings: Any) -> Loop:
    return Loop(
        RunSettings(
            kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
            rules=(),
            rules_configmap="rulesched/policy",
            grace_seconds=2,
            rules_debounce=0.05,
            rules_max_delay=MAX_DELAY,
            **settings,
        )
    )


def _run(loop: Loop) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def _stop(loop: Loop, thread: threading.Thread) -> None:
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=10)
    assert not thread.is_alive()


def _wait(condition: Callable[[], object], seconds: float = 30.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def _node_of(server: TestApiServer, name: str) -> str | None:
    return server.store.objects["pods"][f"default/{name}"]["spec"].get("nodeName")


def _events(server: TestApiServer, reason: str) -> list[dict[str, Any]]:
    return [e for e in list(server.store.objects["events"].values()) if e["reason"] == reason]


def _record(server: TestApiServer) -> dict[str, Any] | None:
    return server.store.objects["configmaps"].get("rulesched/policy-last-good")


def _get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def test_a_restart_with_a_bad_configmap_runs_the_last_good_set(server: TestApiServer, tmp_path: Path) -> None:
    for name in ("a", "b"):
        server.add("nodes", node(name))
    server.add("configmaps", _configmap(only("a")))
    good = digest_of(only("a"))
    first = _loop(server, tmp_path)  # the leader (no election: it records) accepts the set
    thread = _run(first)
    try:
        assert _wait(lambda: (_record(server) or {}).get("metadata", {}).get("annotations", {}).get(DIGEST) == good)
    finally:
        _stop(first, thread)
    record = _record(server)
    assert record is not None and record["data"] == {"policy.rules": only("a")}
    source = server.store.objects["configmaps"]["rulesched/policy"]
    assert record["metadata"]["annotations"][SOURCE_VERSION] == source["metadata"]["resourceVersion"]

    _update(server, BROKEN)  # then a bad edit, and the replica restarts (a rollout, an OOM kill)
    loop = _loop(server, tmp_path, metrics_bind_address="127.0.0.1:0")
    assert loop.reloader.origin == "last good record" and loop.rules.digest == good
    thread = _run(loop)
    try:
        server.add("pods", pod("p1"))
        assert _wait(lambda: _node_of(server, "p1") == "a")
        assert _wait(lambda: _events(server, "Scheduled"))
        (scheduled,) = _events(server, "Scheduled")
        assert scheduled["note"].endswith(f"(rules {good})")
        (warning,) = _events(server, "RulesRejected")
        assert warning["type"] == "Warning" and warning["regarding"]["name"] == "policy"
        note = warning["note"]
        assert "keys policy.rules rejected" in note and f"last good set {good}" in note
        assert "policy.rules:4:5" in note
        assert loop.ops is not None and _get(loop.ops.port, "/readyz")[0] == 200
        assert _record(server)["data"] == {"policy.rules": only("a")}  # type: ignore[index]  # kept
    finally:
        _stop(loop, thread)


def test_no_good_set_at_all_stays_up_not_ready_until_a_valid_one_arrives(
    server: TestApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server.add("nodes", node("a"))
    server.add("configmaps", _configmap(BROKEN))
    with caplog.at_level(logging.ERROR, logger="rulesched.reload"):
        loop = _loop(server, tmp_path, metrics_bind_address="127.0.0.1:0")
    assert not loop.rules.loaded and loop.reloader.origin == "nothing"
    assert loop.metrics.reloads.labels(result="error", profile="rulesched")._value.get() == 1
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("policy.rules:4:5" in line and "nme" in line for line in logged), logged
    assert any("no valid rules" in line for line in logged), logged
    thread = _run(loop)
    try:
        assert _wait(lambda: loop.ops is not None) and loop.ops is not None
        port = loop.ops.port
        assert _wait(lambda: loop.ready)
        status, body = _get(port, "/readyz")
        assert status == 503 and "no valid rules" in body and "policy.rules:4:5" in body
        assert _get(port, "/healthz")[0] == 200
        server.add("pods", pod("waiting"))
        time.sleep(0.5)
        assert _node_of(server, "waiting") is None and not server.store.binding_log
        assert _wait(lambda: _events(server, "RulesRejected"))
        (warning,) = _events(server, "RulesRejected")
        assert "no last good set" in warning["note"] and "policy.rules:4:5" in warning["note"]
        assert _record(server) is None

        _update(server, only("a"))
        assert _wait(lambda: _node_of(server, "waiting") == "a")
        assert loop.rules.loaded and loop.rules.digest == digest_of(only("a"))
        assert _get(port, "/readyz")[0] == 200
        assert _wait(lambda: _record(server) is not None)
        assert _record(server)["metadata"]["annotations"][DIGEST] == loop.rules.digest  # type: ignore[index]
    finally:
        _stop(loop, thread)


def test_no_resource_fit_is_said_of_the_first_set_loaded_not_of_the_stand_in(
    server: TestApiServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With no valid set at start, the stand-in that refuses every pod (rules=none) is no policy:
    no ``no-resource-fit`` then (issue 34, item 6), but for the first set that arrives if it
    checks no fit, once."""
    server.add("nodes", node("a"))
    server.add("configmaps", _configmap(BROKEN))
    with caplog.at_level(logging.WARNING, logger="rulesched.run.loop"):
        loop = _loop(server, tmp_path)
        assert not loop.rules.loaded
        assert [r for r in caplog.records if "no-resource-fit" in r.getMessage()] == []
        thread = _run(loop)
        try:
            _update(server, 'filter only_a:\n    node.name == "a"\n')  # no extends "default"
            assert _wait(lambda: loop.rules.loaded)
            _update(server, 'filter only_b:\n    node.name == "b"\n')
            assert _wait(lambda: loop.rules.digest == digest_of('filter only_b:\n    node.name == "b"\n'))
        finally:
            _stop(loop, thread)
    unfit = [r for r in caplog.records if "no-resource-fit" in r.getMessage()]
    assert len(unfit) == 1 and getattr(unfit[0], "rules", "") == digest_of('filter only_a:\n    node.name == "a"\n')


def test_a_storm_of_updates_still_applies_valid_sets_and_aggregates_refusals(
    server: TestApiServer, tmp_path: Path
) -> None:
    names = [f"n{i}" for i in range(6)]
    for name in names:
        server.add("nodes", node(name))
    server.add("configmaps", _configmap(only("n0")))
    loop = _loop(server, tmp_path)
    outcomes: list[tuple[float, ReloadOutcome]] = []  # (when it ended, what it did)
    reported = loop.reloader.on_outcome
    loop.reloader.on_outcome = lambda o: (outcomes.append((time.monotonic(), o)), reported(o))[1]
    begun: list[float] = []  # when each reload began (a compile later, it ends)
    reload_now = loop.reloader.reload_now
    loop.reloader.reload_now = lambda: (begun.append(time.monotonic()), reload_now())[1]
    thread = _run(loop)
    try:
        server.add("pods", pod("warm"))
        assert _wait(lambda: _node_of(server, "warm") == "n0")
        default = (bundled_rules_dir() / "default.rules").read_text()

        def digest(text: str) -> str:  # what the loader computes, without compiling (checked below)
            return content_digest([default, text])

        assert digest(only("n0")) == digest_of(only("n0"))
        sent: list[tuple[float, str | None]] = []  # (when, digest of a valid set; None: invalid)
        clock = Stopwatch()
        started = time.monotonic()
        for i in range(241):  # ~5 s of updates every 20 ms: the debounce never goes quiet
            valid = i % 4 != 3  # (the last one, 240, is valid)
            text = only(names[i % 6]) + f"# update {i}\n" if valid else BROKEN + f"# {i}\n"
            _update(server, text)
            sent.append((time.monotonic(), digest(text) if valid else None))
            if i % 40 == 0:
                server.add("pods", pod(f"s{i}"))
            time.sleep(max(0.0, started + 0.02 * (i + 1) - time.monotonic()))
        ended = time.monotonic()
        clock.stop()
        last_valid = next(d for _, d in reversed(sent) if d is not None)
        assert _wait(lambda: loop.rules.digest == last_valid)

        # Each reload's span: from its start to its outcome (the reloader runs one at a time).
        # Compiling the set takes the span's time, which a loaded machine stretches; the pacing
        # is what lies between spans, and the delivery of updates before one starts.
        # The last reload may have begun and not yet answered (an invalid set after the last
        # valid one): wait for its outcome rather than race it.
        assert _wait(lambda: len(begun) == len(outcomes)), (len(begun), len(outcomes))
        spans = [(b, t, o) for b, (t, o) in zip(begun, outcomes, strict=False)]
        during = [(b, t, o) for b, t, o in spans if started <= t and b <= ended]
        bound = MAX_DELAY + clock.bound(SLACK)  # (the slack as many times wider as the machine is slower)
        assert during and during[0][0] - started < bound, ("no reload while updates kept coming", str(clock))
        gaps = [b[0] - a[1] for a, b in zip(during, during[1:], strict=False)]
        assert max(gaps, default=0.0) < bound, (gaps, str(clock))  # the reloader reads the newest state that often
        applied = [(b, t, o.digest) for b, t, o in during if o.ok and o.changed]
        assert applied, "no valid set applied during the storm"
        for begin, end, digest in applied:  # each applied set was sent at most max_delay (+ slack) before its reload
            assert any(d == digest and begin - bound <= t <= end for t, d in sent), digest
        refused = sum(1 for _, o in outcomes if not o.ok)
        rejected = _events(server, "RulesRejected")
        assert (len(rejected) >= 1) == (refused >= 1), (refused, rejected)
        assert len(rejected) <= 2, [e["note"] for e in rejected]  # one, not one per refusal
        print(f"storm: {len(during)} reloads, {len(applied)} applied, {refused} refused, {len(rejected)} event(s)")
        for i in range(0, 240, 40):
            assert _wait(lambda i=i: _node_of(server, f"s{i}") is not None), i
    finally:
        _stop(loop, thread)


def test_a_crash_inside_a_reload_is_refused_and_the_next_valid_set_applies(
    server: TestApiServer, tmp_path: Path
) -> None:
    """Through the ConfigMap: a deep chain of lets (a RecursionError in the checker, or a plain
    diagnostic once the checker handles it), then a valid set."""
    server.add("nodes", node("a"))
    server.add("nodes", node("b"))
    server.add("configmaps", _configmap(only("a")))
    loop = _loop(server, tmp_path)
    thread = _run(loop)
    try:
        first = loop.rules.digest
        _update(server, LET_CHAIN)
        assert _wait(lambda: loop.reloader.failures or loop.rules.digest != first)
        _update(server, only("b"))
        assert _wait(lambda: loop.rules.digest == digest_of(only("b")))
        server.add("pods", pod("after"))
        assert _wait(lambda: _node_of(server, "after") == "b")
        assert all(t.is_alive() for t in loop.reloader._threads)
    finally:
        _stop(loop, thread)


def test_any_failure_in_the_reloader_is_reported_and_it_keeps_running(server: TestApiServer, tmp_path: Path) -> None:
    """A loader that fails on demand (no Kubernetes client patched): a MemoryError in a reload
    is a refused set (logged, one event, result error); a failure in the outcome callback is
    logged; both times the reloader goes on and applies the next valid set."""
    from rulesched.kube.api import KubeApi

    server.add("configmaps", _configmap(only("a")))

    def loader(paths: Sequence[Path], texts: Mapping[str, str | bytes] | None) -> RuleSet:
        if texts and "# boom" in str(texts.get("policy.rules")):
            raise MemoryError("injected")
        return load_sources(paths, texts)

    outcomes: list[ReloadOutcome] = []

    def on_outcome(outcome: ReloadOutcome) -> None:
        outcomes.append(outcome)
        if len(outcomes) == 2:
            raise RuntimeError("a bug in the callback")

    stop = threading.Event()
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    reloader = Reloader(
        RulesSources((), "rulesched/policy"),
        api,
        stop,
        on_outcome=on_outcome,
        settings=ReloadSettings(debounce=0.05, max_delay=MAX_DELAY),
        loader=loader,
    )
    handle = reloader.initial()
    reloader.start()
    try:
        _update(server, only("b") + "# boom\n")
        assert _wait(lambda: outcomes)
        failed = outcomes[0]
        assert not failed.ok and "internal error" in failed.error and "MemoryError: injected" in failed.error
        assert handle.digest == digest_of(only("a"))
        (warning,) = _events(server, "RulesRejected")
        assert "MemoryError" in warning["note"] and "keys policy.rules" in warning["note"]
        _update(server, only("b") + "# 3\n")  # its callback raises: logged, the reloader lives
        assert _wait(lambda: len(outcomes) >= 2 and handle.digest == digest_of(only("b") + "# 3\n"))
        _update(server, only("a") + "# 4\n")
        assert _wait(lambda: handle.digest == digest_of(only("a") + "# 4\n"))
        assert all(t.is_alive() for t in reloader._threads)
    finally:
        stop.set()
        reloader.join(2)


def test_refusals_are_aggregated_into_one_event_per_interval() -> None:
    now = [0.0]
    posted: list[str] = []
    events = RejectionEvents(posted.append, interval=60.0, clock=lambda: now[0], wall=lambda: 0.0)
    events.rejected("first")
    for i in range(5):
        now[0] += 1
        events.rejected(f"bad {i}")
        events.flush()
    assert posted == ["first"]
    now[0] = 61.0
    events.flush()
    assert posted[1] == "5 updates rejected since 1970-01-01T00:00:00Z; latest: bad 4"
    events.flush()
    now[0] = 200.0
    events.flush()
    assert len(posted) == 2  # nothing held: nothing more
    events.rejected("alone")
    assert posted[2] == "alone"


def test_the_extender_without_a_good_set_answers_503_until_one_arrives(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    policy = folder / "policy.rules"
    policy.write_text(BROKEN.replace('extends "default"\n', ""))
    process = ExtenderProcess("--rules", str(folder), "--rules-max-delay", "500ms")
    try:
        assert any("policy.rules:3:5" in line for line in process.log), process.log
        status, body = process.request("GET", "/readyz")
        assert status == 503 and body.startswith(b"not ready: no valid rules"), body
        args = extender_args(pod("p"), nodes=[node("a"), node("b")])
        status, answer = process.post("/filter", args)
        assert status == 503 and "no valid rules" in answer["Error"]
        # Written again every 2 s until the extender is ready: its watcher thread may not be
        # watching yet the first time, on a loaded machine (no change is missed once it is).
        end = time.monotonic() + 60
        while process.request("GET", "/readyz")[0] != 200 and time.monotonic() < end:
            policy.write_text('filter only_b:\n    node.name == "b"\n')
            for _ in range(20):
                if process.request("GET", "/readyz")[0] == 200:
                    break
                time.sleep(0.1)
        process.wait_ready(10)
        status, answer = process.post("/filter", args)
        assert status == 200 and [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["b"]
    finally:
        process.stop()


def test_only_a_replica_that_may_record_writes_the_record(server: TestApiServer, tmp_path: Path) -> None:
    """A standby (may_record false) accepts sets but leaves the record to the leader; once it
    leads, it records the set it holds."""
    from rulesched.kube.api import KubeApi

    server.add("configmaps", _configmap(only("a")))
    leading = threading.Event()
    stop = threading.Event()
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    reloader = Reloader(
        RulesSources((), "rulesched/policy"),
        api,
        stop,
        settings=ReloadSettings(debounce=0.05, max_delay=MAX_DELAY),
        may_record=leading.is_set,
    )
    handle = reloader.initial()
    reloader.start()
    try:
        time.sleep(0.5)
        assert _record(server) is None
        leading.set()
        assert _wait(lambda: _record(server) is not None)
        assert _record(server)["metadata"]["annotations"][DIGEST] == handle.digest  # type: ignore[index]
    finally:
        stop.set()
        reloader.join(2)


def test_record_writes_are_conditional_on_the_version_they_read(server: TestApiServer, tmp_path: Path) -> None:
    """Another replica writes the record between this one's read and its write: the write gets
    409 from the server, reads again and writes over the newer version, never blindly."""
    from rulesched.kube.api import KubeApi
    from rulesched.kube.resources import CONFIGMAPS
    from rulesched.last_good import LastGoodRecord

    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    first = LastGoodRecord(KubeApi(kubeconfig), "rulesched", "policy")
    source = server.add("configmaps", _configmap(only("a")))
    assert first.write(source, "aaaa")
    other = KubeApi(kubeconfig)
    conflicts: list[str] = []
    reads: list[str] = []

    class Racing(KubeApi):
        """Between this replica's read and its write, the other replica writes (once)."""

        def get(self, resource: Any, namespace: str | None, name: str) -> dict[str, Any]:
            found = super().get(resource, namespace, name)
            reads.append(name)
            if name.endswith("-last-good") and not conflicts:
                conflicts.append(found["metadata"]["resourceVersion"])
                LastGoodRecord(other, "rulesched", "policy").write({**source, "data": {"policy.rules": "x"}}, "bbbb")
            return found

    second = LastGoodRecord(Racing(kubeconfig), "rulesched", "policy")
    assert second.write(source, "cccc")
    assert len(reads) == 2  # read, write refused with 409, read again, write
    record = other.get(CONFIGMAPS, "rulesched", "policy-last-good")
    assert record["metadata"]["annotations"][DIGEST] == "cccc" and record["data"] == source["data"]
    assert int(record["metadata"]["resourceVersion"]) > int(conflicts[0]) + 1  # b's write came between
    assert second.write(source, "cccc")  # already there: nothing written
    assert (
        other.get(CONFIGMAPS, "rulesched", "policy-last-good")["metadata"]["resourceVersion"]
        == (record["metadata"]["resourceVersion"])
    )
