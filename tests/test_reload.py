"""Hot reload, over HTTP against the test API server and on files: a valid new set takes effect
within a second; an invalid one keeps the last good set, with a Warning event on the ConfigMap
naming file:line:col; a thousand rapid updates, a third of them invalid, end on the last valid
set with memory flat and no pod dropped or bound twice; the extender answers with one set or the
other, never a mix."""

from __future__ import annotations

import gc
import json
import os
import resource
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rulesched.errors import ConfigError
from rulesched.lang import load_rules_text
from rulesched.reload import Reloader, RulesSources
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess, extender_args
from tests.helpers.kube import wait
from tests.helpers.timing import Stopwatch


def only(node: str) -> str:
    """A set that sends every pod to ``node`` (the default profile plus one filter)."""
    return f'extends "default"\n\nfilter only_{node}:\n    node.name == "{node}"\n    else "node is not {node}"\n'


BROKEN = 'extends "default"\n\nfilter broken:\n    node.nme == "x"\n'  # line 4, col 5: no field nme


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


def configmap(text: str) -> dict[str, Any]:
    return {"metadata": {"name": "policy", "namespace": "rulesched"}, "data": {"policy.rules": text}}


def _update(server: TestApiServer, text: str) -> None:
    current = server.store.objects["configmaps"]["rulesched/policy"]
    server.update("configmaps", {**current, "data": {"policy.rules": text}})


def _node_of(server: TestApiServer, name: str, seconds: float = 10.0) -> str | None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        where = server.store.objects["pods"][f"default/{name}"]["spec"].get("nodeName")
        if where:
            return str(where)
        time.sleep(0.02)
    return None


def _start(server: TestApiServer, tmp_path: Path) -> tuple[Loop, threading.Thread]:
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
        rules=(),
        rules_configmap="rulesched/policy",
        grace_seconds=2,
    )
    loop = Loop(settings)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return loop, thread


def _stop(loop: Loop, thread: threading.Thread) -> None:
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_configmap_changes_take_effect_and_bad_ones_are_refused(server: TestApiServer, tmp_path: Path) -> None:
    for name in ("a", "b"):
        server.add("nodes", node(name))
    server.add("configmaps", configmap(only("a")))
    loop, thread = _start(server, tmp_path)
    try:
        server.add("pods", pod("p1"))
        assert _node_of(server, "p1") == "a"
        first = loop.rules.digest

        _update(server, only("b"))
        clock = Stopwatch()
        while loop.rules.digest == first and time.monotonic() - clock.started < 60:
            time.sleep(0.01)
        # within a second on a quiet machine (its 0.1 s debounce and a compile), as many more as
        # the machine is slower now; the 2 s max_delay, or a resync, would fail it
        assert clock.stop() < clock.bound(1.0), f"the new set took {clock}"
        server.add("pods", pod("p2"))
        assert _node_of(server, "p2") == "b"
        notes = wait(lambda: _scheduled_notes(server, "p1", "p2"), 10)  # (posted after the binding)
        assert notes["p1"].endswith(f"(rules {first})") and notes["p2"].endswith(f"(rules {loop.rules.digest})")

        good = loop.rules.digest
        _update(server, BROKEN)
        end = time.monotonic() + 5
        warnings: list[dict[str, Any]] = []
        while not warnings and time.monotonic() < end:
            warnings = [e for e in server.store.objects["events"].values() if e["reason"] == "RulesRejected"]
            time.sleep(0.02)
        (warning,) = warnings
        assert warning["type"] == "Warning" and warning["regarding"]["kind"] == "ConfigMap"
        assert warning["regarding"]["name"] == "policy" and warning["regarding"]["namespace"] == "rulesched"
        assert "policy.rules:4:5" in warning["note"] and "nme" in warning["note"]
        assert loop.rules.digest == good  # the last good set stays
        server.add("pods", pod("p3"))
        assert _node_of(server, "p3") == "b"
        errors = loop.metrics.reloads.labels(result="error", profile="rulesched")._value.get()
        assert errors == 1
    finally:
        _stop(loop, thread)


def _rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_thousand_rapid_updates_end_on_the_last_valid_set(server: TestApiServer, tmp_path: Path) -> None:
    names = [f"n{i}" for i in range(6)]
    for name in names:
        server.add("nodes", node(name))
    server.add("configmaps", configmap(only("n0")))
    loop, thread = _start(server, tmp_path)
    try:
        server.add("pods", pod("warm"))
        assert _node_of(server, "warm") == "n0"
        gc.collect()
        before = _rss_mb()
        texts = []
        for i in range(1000):
            texts.append(BROKEN + f"# {i}\n" if i % 3 == 2 else only(names[i % 6]) + f"# update {i}\n")
        pods = [f"q{i}" for i in range(100)]
        for i, text in enumerate(texts):
            _update(server, text)
            if i % 10 == 0:
                server.add("pods", pod(pods[i // 10]))
            if i % 100 in (49, 98):  # a pause now and then: a burst's last update is loaded alone
                time.sleep(0.3)  # (after 49: a valid set; after 98: an invalid one)
        last_valid = next(t for t in reversed(texts) if t is not BROKEN and "broken" not in t)
        expected = load_rules_text({"policy.rules": last_valid}).digest
        end = time.monotonic() + 20
        while loop.rules.digest != expected and time.monotonic() < end:
            time.sleep(0.05)
        assert loop.rules.digest == expected
        for name in pods:
            assert _node_of(server, name, 20) is not None, name
        gc.collect()
        after = _rss_mb()
        print(
            f"RSS before {before:.0f} MB, after 1000 updates {after:.0f} MB; reloads {loop.reloader.reloads}, "
            f"refused {loop.reloader.failures}"
        )
        assert after - before < 40, (before, after)
        bound = Counter(key for key, _, _ in server.store.binding_log)
        assert all(bound[f"default/{n}"] == 1 for n in pods), {k: v for k, v in bound.items() if v != 1}
        assert loop.reloader.reloads >= 3 and loop.reloader.failures >= 3  # bursts coalesced; pauses show both
    finally:
        _stop(loop, thread)


def test_files_are_watched_and_sighup_reloads(tmp_path: Path) -> None:
    folder = tmp_path / "rules"
    folder.mkdir()
    policy = folder / "policy.rules"
    policy.write_text(only("a"))
    stop = threading.Event()
    outcomes = []
    reloader = Reloader(RulesSources((str(folder),)), None, stop, on_outcome=outcomes.append)
    handle = reloader.initial()
    first = handle.digest
    reloader.start()
    try:
        # Written again each second until seen: the watcher thread may not be watching yet the
        # first time, on a loaded machine (no change is missed once it is).
        end = time.monotonic() + 30
        while handle.digest == first and time.monotonic() < end:
            policy.write_text(only("b"))
            for _ in range(50):
                if handle.digest != first:
                    break
                time.sleep(0.02)
        assert handle.digest != first
        second = handle.digest
        policy.write_text(BROKEN)
        end = time.monotonic() + 30
        while not any(not o.ok for o in outcomes) and time.monotonic() < end:
            time.sleep(0.02)
        assert handle.digest == second and "policy.rules:4:5" in outcomes[-1].error
        seen = len(outcomes)
        reloader.trigger()  # SIGHUP: the file is still broken; still refused, still the last good set
        end = time.monotonic() + 30
        while len(outcomes) == seen and time.monotonic() < end:
            time.sleep(0.02)
        assert len(outcomes) > seen and handle.digest == second and not outcomes[-1].ok
    finally:
        stop.set()
        reloader.join(2)


def test_reloads_do_not_leak(tmp_path: Path) -> None:
    """Hundreds of swaps: each old set and its caches go (weakly referenced: none survive)."""
    import weakref

    policy = tmp_path / "policy.rules"
    reloader = Reloader(RulesSources((str(policy),)), None, threading.Event())
    policy.write_text(only("n0"))
    handle = reloader.initial()
    old = []
    for i in range(300):
        policy.write_text(only(f"n{i % 7}") + f"# {i}\n")
        previous = handle.rules
        previous.session()  # as a scheduling thread would hold one
        old.append(weakref.ref(previous))
        del previous
        assert reloader.reload_now().ok
    gc.collect()
    assert sum(1 for r in old if r() is not None) <= 1


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="NAMESPACE/NAME"):
        RulesSources((), "no-slash")
    with pytest.raises(ConfigError, match="needs API access"):
        Reloader(RulesSources((), "ns/name"), None, threading.Event())


def test_the_extender_answers_with_one_set_or_the_other_never_a_mix(tmp_path: Path) -> None:
    """Each set has two filters; a mix of the two sets would pass nodes neither set passes."""
    folder = tmp_path / "rules"
    folder.mkdir()
    policy = folder / "policy.rules"
    one = 'filter a1:\n    node.name != "n2"\nfilter a2:\n    node.name != "n3"\n'
    two = 'filter b1:\n    node.name != "n1"\nfilter b2:\n    node.name != "n4"\n'
    policy.write_text(one)
    process = ExtenderProcess("--rules", str(folder))
    try:
        nodes = [node(f"n{i}") for i in range(1, 5)]
        body = json.dumps(extender_args(pod("p"), nodes=nodes)).encode()
        seen: Counter[tuple[str, ...]] = Counter()
        done = threading.Event()

        def ask() -> None:
            conn = process.connection()
            while not done.is_set():
                status, data = process.request("POST", "/filter", body, conn)
                answer = json.loads(data)
                seen[tuple(n["metadata"]["name"] for n in answer["Nodes"]["items"])] += 1

        client = threading.Thread(target=ask)
        client.start()

        def replace(text: str) -> None:
            # as a ConfigMap volume (and most editors) update a file: whole, never half-written
            staged = folder / ".policy.rules.tmp"
            staged.write_text(text)
            os.replace(staged, policy)

        for i in range(30):
            replace((two if i % 2 == 0 else one) + f"# {i}\n")
            time.sleep(0.1)
        replace(two)
        final = f'hash="{load_rules_text({"policy.rules": two}).digest}"'
        end = time.monotonic() + 30  # the last set applied, however slowly the machine compiles it
        while final not in process.request("GET", "/metrics")[1].decode() and time.monotonic() < end:
            time.sleep(0.1)
        assert final in process.request("GET", "/metrics")[1].decode()
        done.set()
        client.join(10)
        assert set(seen) <= {("n1", "n4"), ("n2", "n3")}, seen
        assert seen[("n1", "n4")] and seen[("n2", "n3")]
        status, data = process.request("POST", "/filter", body)
        assert [n["metadata"]["name"] for n in json.loads(data)["Nodes"]["items"]] == ["n2", "n3"]
        metrics = process.request("GET", "/metrics")[1].decode()
        assert 'rulesched_rules_reloads_total{result="success"}' in metrics
    finally:
        process.stop()


def test_a_pod_the_old_set_parked_is_retried_under_the_new_one(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("a"))
    server.add("configmaps", configmap(only("nowhere")))
    loop, thread = _start(server, tmp_path)
    try:
        server.add("pods", pod("parked"))
        end = time.monotonic() + 10
        while not loop.scheduler.queue.counts().get("unschedulable") and time.monotonic() < end:
            time.sleep(0.02)
        assert loop.scheduler.queue.counts().get("unschedulable") == 1
        _update(server, only("a"))
        # long before the five-minute flush (the pod backs off first: 1 s, 2 s on a loaded machine)
        assert _node_of(server, "parked", 30) == "a"
    finally:
        _stop(loop, thread)


def _scheduled_notes(server: TestApiServer, *names: str) -> dict[str, str] | None:
    """The Scheduled events' notes by pod name, once every one of ``names`` has one."""
    events = [e for e in server.store.objects["events"].values() if e["reason"] == "Scheduled"]
    notes = {e["regarding"]["name"]: e["note"] for e in events}
    return notes if all(n in notes for n in names) else None
