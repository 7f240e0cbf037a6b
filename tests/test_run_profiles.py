"""Several profiles in one ``rulesched run``, as kube-scheduler's: over HTTP against the test API
server, each profile's pods are placed by that profile's rules (default spreads, most-allocated
packs), events name each profile's scheduler, ``/metrics`` has a series per profile, a pod of
another scheduler is never touched, and a broken rules ConfigMap of one profile holds back only
that profile's pods until it is fixed. ``--config`` lists profiles; mistakes are one line naming
the file; the single-profile flags keep working."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rulesched.cli import _parser
from rulesched.cluster.store import ClusterStore
from rulesched.errors import ConfigError
from rulesched.lang import RulesHandle, load_rules, load_rules_text, resolve_rules_path
from rulesched.run.cli import settings_from
from rulesched.run.loop import Loop
from rulesched.run.profiles import ProfileSettings
from rulesched.run.settings import RunSettings
from rulesched.scheduler.framework import Binding, Code, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.apiserver import TestApiServer
from tests.helpers.scheduling import Clock
from tests.upstream import harness

PACK = "rulesched-pack"
PACK_RULES = 'extends "most-allocated"\n'
BROKEN = 'extends "most-allocated"\n\nfilter broken:\n    node.nme == "x"\n'  # pack.rules:4:5


@pytest.fixture
def server() -> Iterator[TestApiServer]:
    s = TestApiServer()
    yield s
    s.stop()


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str, scheduler: str, cpu: str = "500m", memory: str = "2Gi", **spec: Any) -> dict[str, Any]:
    """Requests in the nodes' own cpu:memory ratio, so balanced allocation scores every node
    alike and only the resource strategy (spread or pack) decides."""
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **spec,
        },
        "status": {"phase": "Running" if spec.get("nodeName") else "Pending"},
    }


def requests(cpu: str, memory: str) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}


def node_of(server: TestApiServer, name: str) -> str | None:
    found = server.store.objects["pods"][f"default/{name}"]["spec"].get("nodeName")
    return str(found) if found else None


def events(server: TestApiServer, reason: str) -> list[dict[str, Any]]:
    return [e for e in list(server.store.objects["events"].values()) if e["reason"] == reason]


def wait_for(condition: Callable[[], object], seconds: float = 15.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def start(server: TestApiServer, tmp_path: Path, *profiles: ProfileSettings) -> tuple[Loop, threading.Thread]:
    loop = Loop(
        RunSettings(
            kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
            profiles=profiles,
            metrics_bind_address="127.0.0.1:0",
            grace_seconds=2,
            rules_debounce=0.05,
            rules_max_delay=0.3,
        )
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    assert wait_for(lambda: loop.ops is not None)
    return loop, thread


def stop(loop: Loop, thread: threading.Thread) -> None:
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_each_profile_places_its_pods_by_its_own_rules(server: TestApiServer, tmp_path: Path) -> None:
    for name in ("n1", "n2"):
        server.add("nodes", node(name))
    server.add("pods", pod("busy", "default-scheduler", cpu="2", memory="8Gi", nodeName="n1"))  # n1 half full
    spread, packed = ["s1", "s2"], ["p1", "p2"]
    for a, b in zip(spread, packed, strict=True):  # interleaved: one queue serves both profiles
        server.add("pods", pod(a, "rulesched"))
        server.add("pods", pod(b, PACK))
    server.add("pods", pod("theirs", "other-scheduler"))
    loop, thread = start(server, tmp_path, ProfileSettings("rulesched"), ProfileSettings(PACK, ("most-allocated",)))
    try:
        assert wait_for(lambda: all(node_of(server, n) for n in spread + packed))
        # default (LeastAllocated) spreads to the empty node; most-allocated packs the busy one
        assert [node_of(server, n) for n in spread] == ["n2", "n2"]
        assert [node_of(server, n) for n in packed] == ["n1", "n1"]
        assert wait_for(lambda: len(events(server, "Scheduled")) == 4)
        digests = {p.name: p.rules.digest for p in loop.profiles}
        assert digests["rulesched"] != digests[PACK]
        for event in events(server, "Scheduled"):
            profile = "rulesched" if event["regarding"]["name"] in spread else PACK
            assert event["reportingController"] == profile, event
            assert event["note"].endswith(f"(rules {digests[profile]})")
        assert loop.ops is not None
        port = loop.ops.port
        assert get(port, "/readyz") == (
            200,
            f"ok: rulesched: rules {digests['rulesched']}, {PACK}: rules {digests[PACK]}",
        )

        def scraped() -> str:
            return get(port, "/metrics")[1]

        both = [
            f'scheduler_schedule_attempts_total{{profile="{p}",result="scheduled"}} 2.0' for p in ("rulesched", PACK)
        ]
        assert wait_for(lambda: all(series in scraped() for series in both)), scraped()
        samples = [s for f in text_string_to_metric_families(scraped()) for s in f.samples]
        info = {s.labels["profile"]: s.labels["hash"] for s in samples if s.name == "rulesched_rules_info"}
        assert info == digests
        points = {
            s.labels["profile"]
            for s in samples
            if s.name == "scheduler_framework_extension_point_duration_seconds_count"
            and s.labels["extension_point"] == "Filter"
        }
        assert points == {"rulesched", PACK}
        time.sleep(0.2)
        assert node_of(server, "theirs") is None  # another scheduler's pod: never touched
        assert "default/theirs" not in {key for key, _, _ in server.store.binding_log}
        assert not [e for e in server.store.objects["events"].values() if e["regarding"]["name"] == "theirs"]
    finally:
        stop(loop, thread)


def test_a_broken_configmap_of_one_profile_holds_back_only_its_pods(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    server.add("configmaps", {"metadata": {"name": "pack", "namespace": "rulesched"}, "data": {"pack.rules": BROKEN}})
    server.add("pods", pod("waits", PACK))
    server.add("pods", pod("goes", "rulesched"))
    loop, thread = start(
        server, tmp_path, ProfileSettings("rulesched"), ProfileSettings(PACK, (), rules_configmap="rulesched/pack")
    )
    try:
        ours, pack = loop.profiles
        assert ours.rules.loaded and not pack.rules.loaded
        assert wait_for(lambda: node_of(server, "goes") == "n1")  # the other profile schedules
        assert loop.ops is not None
        port = loop.ops.port
        status, body = get(port, "/readyz")
        assert status == 503 and f"{PACK}: no valid rules: pack.rules:4:5" in body
        assert f"rulesched: rules {ours.rules.digest}" in body
        assert wait_for(lambda: events(server, "RulesRejected"))  # (posted by a worker)
        (rejected,) = events(server, "RulesRejected")
        assert rejected["reportingController"] == PACK and rejected["regarding"]["name"] == "pack"
        assert loop.metrics.reloads.labels(result="error", profile=PACK)._value.get() == 1
        assert loop.metrics.reloads.labels(result="error", profile="rulesched")._value.get() == 0
        time.sleep(0.3)
        assert node_of(server, "waits") is None  # parked untried: no event, no condition
        assert not [e for e in events(server, "FailedScheduling") if e["regarding"]["name"] == "waits"]
        assert not server.store.objects["pods"]["default/waits"]["status"].get("conditions")

        current = server.store.objects["configmaps"]["rulesched/pack"]
        server.update("configmaps", {**current, "data": {"pack.rules": PACK_RULES}})  # fixed
        assert wait_for(lambda: node_of(server, "waits") == "n1")
        assert pack.rules.loaded and pack.rules.digest == load_rules_text({"pack.rules": PACK_RULES}).digest
        assert get(port, "/readyz")[0] == 200
        (scheduled,) = [e for e in events(server, "Scheduled") if e["regarding"]["name"] == "waits"]
        assert scheduled["reportingController"] == PACK
    finally:
        stop(loop, thread)


# --- the scheduler's side -----------------------------------------------------------------------


class Later:
    """A binder whose answers come later, as the API server's do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def bind(self, binding: Binding) -> bool | None:
        self.calls.append((binding.pod.key, binding.node))
        return None


def test_one_scheduler_picks_each_pods_profile_and_keeps_each_profiles_tables() -> None:
    """One queue, a profile per scheduler name: interleaved pods of two profiles each go where
    their own rules send them, and neither profile's node tables are thrown away by the other's
    cycles (a Cycle per profile); a profile whose rules are not loaded parks its pods untried."""
    store = ClusterStore()
    for name in ("n1", "n2"):
        store.add_node(harness.node(name, allocatable={"cpu": "4", "memory": "16Gi", "pods": "110"}))
    store.upsert_pod(harness.pod("busy", spec=requests("2", "8Gi"), node_name="n1"))
    binder, clock = Later(), Clock()
    scheduler = Scheduler(
        harness.default_rules(), store, SchedulerSettings(scheduler_name="rulesched"), binder, clock=clock
    )
    pack = scheduler.add_profile(PACK, load_rules([resolve_rules_path("most-allocated")]))
    later = scheduler.add_profile("later", RulesHandle.empty("no valid rules: not yet"))
    spread = scheduler.profile_of(harness.pod("x", spec={"schedulerName": "rulesched"}))
    assert spread.cycle is scheduler.cycle and pack.cycle is not spread.cycle
    assert spread.cycle.framework.shares == pack.cycle.framework.shares == 3  # (the tables' memory budget is split)
    for i in range(3):
        scheduler.add(harness.pod(f"s{i}", spec={**requests("250m", "1Gi"), "schedulerName": "rulesched"}))
        scheduler.add(harness.pod(f"p{i}", spec={**requests("250m", "1Gi"), "schedulerName": PACK}))
    scheduler.add(harness.pod("w", spec={**requests("250m", "1Gi"), "schedulerName": "later"}))
    tables: dict[str, object] = {}
    for _ in range(6):
        result = scheduler.schedule_one()
        assert result is not None and result.code is Code.SCHEDULED
        cycle = scheduler.profile_of(result.pod).cycle
        (table,) = cycle.framework.tables.values()  # the class's table, kept across the other profile's cycles
        assert tables.setdefault(result.pod.scheduler_name, table) is table
    assert sorted(binder.calls) == [(f"default/p{i}", "n1") for i in range(3)] + [
        (f"default/s{i}", "n2") for i in range(3)
    ]
    assert scheduler.schedule_one() is None and "default/w" in scheduler.queue._unschedulable  # untried
    assert not later.cycle.framework.tables and not any(key == "default/w" for key, _ in binder.calls)
    later.rules.swap(harness.default_rules())  # its rules arrive: the reload moves parked pods
    scheduler.queue.move()
    clock.now += 20
    result = scheduler.schedule_one()
    assert result is not None and result.pod.key == "default/w" and result.code is Code.SCHEDULED


# --- settings --------------------------------------------------------------------------------------


def settings(tmp_path: Path, text: str, *flags: str) -> RunSettings:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    result: RunSettings = settings_from(_parser().parse_args(["run", "--config", str(config), *flags]))
    return result


def test_a_config_file_lists_profiles(tmp_path: Path) -> None:
    loaded = settings(
        tmp_path,
        "percentage_of_nodes_to_score: 50\n"
        "profiles:\n"
        "  - scheduler_name: rulesched\n"
        "  - scheduler-name: rulesched-pack\n"
        "    rules: most-allocated\n"
        "    percentage-of-nodes-to-score: 100\n"
        "  - scheduler_name: team-a\n"
        "    rules_configmap: team-a/rules\n"
        "  - scheduler_name: team-b\n"
        "    rules: [default, team-b.rules]\n"
        "    rules_configmap: team-b/rules\n",
    )
    assert loaded.effective_profiles == (
        ProfileSettings("rulesched", ("default",)),
        ProfileSettings("rulesched-pack", ("most-allocated",), None, 100),
        ProfileSettings("team-a", (), "team-a/rules"),  # a ConfigMap alone, as --rules-configmap alone
        ProfileSettings("team-b", ("default", "team-b.rules"), "team-b/rules"),
    )
    assert loaded.percentage_of_nodes_to_score == 50  # (the profiles without their own)


def test_the_single_profile_flags_keep_working(tmp_path: Path) -> None:
    flags = settings_from(_parser().parse_args(["run", "--scheduler-name", "mine", "--rules-configmap", "ns/r"]))
    assert flags.effective_profiles == (ProfileSettings("mine", (), "ns/r"),)
    assert RunSettings().effective_profiles == (ProfileSettings("rulesched", ("default",)),)
    file = settings(tmp_path, "scheduler_name: team\nrules: [most-allocated]\n", "--scheduler-name", "other")
    assert file.effective_profiles == (ProfileSettings("other", ("most-allocated",)),)


@pytest.mark.parametrize(
    ("text", "flags", "message"),
    [
        (
            "profiles:\n  - scheduler_name: a\n  - scheduler_name: b\n  - scheduler_name: a\n",
            (),
            r"profiles\[2\]\.scheduler_name: duplicate value 'a' \(profiles\[0\] has it\)",
        ),
        ("profiles:\n  - rules: [default]\n", (), r"profiles\[0\]\.scheduler_name: required"),
        (
            "profiles:\n  - scheduler_name: a\n    schedulerName: b\n",
            (),
            r"profiles\[0\]: unknown setting 'schedulerName'",
        ),
        ("profiles: []\n", (), r"profiles: expected a list of mappings"),
        ("profiles:\n  - a\n", (), r"profiles\[0\]: expected a mapping"),
        ("profiles:\n  - {scheduler_name: a, rules: [1]}\n", (), r"profiles\[0\]\.rules: expected a path or a list"),
        ("profiles:\n  - {scheduler_name: a, rules_configmap: nope}\n", (), r"expected NAMESPACE/NAME"),
        ("profiles:\n  - {scheduler_name: a, percentage_of_nodes_to_score: 101}\n", (), r"101 is not in 0\.\.100"),
        (
            "profiles:\n  - {scheduler_name: a, rules_configmap: ns/r}\n  - {scheduler_name: b, rules_configmap: ns/r}\n",
            (),
            r"profiles\[1\]\.rules_configmap: ns/r is profiles\[0\]'s already",
        ),
        (
            "scheduler_name: x\nprofiles:\n  - scheduler_name: a\n",
            (),
            r"scheduler_name cannot be combined with profiles",
        ),
        ("profiles:\n  - scheduler_name: a\n", ("--rules", "x.rules"), r"--rules cannot be combined with profiles"),
    ],
    ids=[
        "duplicate",
        "unnamed",
        "unknown-key",
        "empty",
        "not-a-mapping",
        "bad-rules",
        "bad-configmap",
        "percentage",
        "shared-configmap",
        "top-level-name",
        "flag",
    ],
)
def test_profile_mistakes_are_one_line_naming_the_file(
    tmp_path: Path, text: str, flags: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        settings(tmp_path, text, *flags)
    assert str(raised.value).startswith(str(tmp_path / "config.yaml") + ": ") and "\n" not in str(raised.value)


def test_settings_made_in_code_refuse_duplicates_too() -> None:
    with pytest.raises(ConfigError, match=r"profiles\[1\]\.scheduler_name: duplicate value 'a'"):
        RunSettings(profiles=(ProfileSettings("a"), ProfileSettings("a", ("most-allocated",))))


def test_the_readme_profiles_example_is_a_valid_config(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (block,) = [b.split("```", 1)[0] for b in readme.split("```yaml\n")[1:] if b.startswith("percentage_of_nodes")]
    loaded = settings(tmp_path, block)
    assert [p.scheduler_name for p in loaded.effective_profiles] == ["rulesched", "rulesched-pack"]
    assert loaded.effective_profiles[1] == ProfileSettings("rulesched-pack", ("most-allocated",), None, 100)
