"""``/metrics`` read as kube-scheduler's: ``rulesched run`` against the test API server schedules a
pod, fails one binding (then binds it), parks an unschedulable pod and preempts for another; the
scrape has every metric kubernetes-mixin reads with upstream's type, label names and buckets,
counts the failed binding as ``error``, has no ``_created`` series, and passes Prometheus' own
``promtool check metrics``. The extender's ``/metrics`` likewise.

promtool comes from Debian's ``prometheus`` package (``.ci/run`` installs it and sets
``RULESCHED_REQUIRE_PROMTOOL=1``); without it, and without that variable, the promtool checks
are skipped, never the rest.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import Counter, generate_latest
from prometheus_client.metrics_core import Metric

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.kube.informer import Delta
from rulesched.metrics import Registry, exponential_buckets
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from rulesched.scheduler.framework import SchedulerSettings
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess
from tests.helpers.kube import extender_node as full_node
from tests.helpers.kube import extender_pod, node, pod, wait_for
from tests.helpers.scenarios import NAMESPACES, SETTINGS, Scenario, scenarios, schedule
from tests.helpers.scrape import families, fetch, value

# Upstream's buckets (pkg/scheduler/metrics, component-base's restclient), written out.
ATTEMPT = [0.001 * 2**i for i in range(15)]
SLI = [0.01 * 2**i for i in range(20)]
EXTENSION_POINT = [0.0001 * 2**i for i in range(12)]
PLUGIN = exponential_buckets(0.00001, 1.5, 20)
REST = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0]

# name as exposed -> (type, label names, histogram bucket bounds or None)
SCHEDULER: dict[str, tuple[str, set[str], list[float] | None]] = {
    "scheduler_schedule_attempts_total": ("counter", {"result", "profile"}, None),
    "scheduler_scheduling_attempt_duration_seconds": ("histogram", {"result", "profile"}, ATTEMPT),
    "scheduler_scheduling_algorithm_duration_seconds": ("histogram", set(), ATTEMPT),
    "scheduler_pod_scheduling_sli_duration_seconds": ("histogram", {"attempts"}, SLI),
    "scheduler_pod_scheduling_attempts": ("histogram", set(), [1, 2, 4, 8, 16]),
    "scheduler_pending_pods": ("gauge", {"queue"}, None),
    "scheduler_preemption_attempts_total": ("counter", set(), None),
    "scheduler_preemption_victims": ("histogram", set(), [1, 2, 4, 8, 16, 32, 64]),
    "scheduler_queue_incoming_pods_total": ("counter", {"queue", "event"}, None),
    "scheduler_framework_extension_point_duration_seconds": (
        "histogram",
        {"extension_point", "status", "profile"},
        EXTENSION_POINT,
    ),
    "scheduler_unschedulable_pods": ("gauge", {"plugin", "profile"}, None),
    "scheduler_plugin_execution_duration_seconds": ("histogram", {"plugin", "extension_point", "status"}, PLUGIN),
    "leader_election_master_status": ("gauge", {"name"}, None),
    "rest_client_requests_total": ("counter", {"code", "method", "host"}, None),
    "rest_client_request_duration_seconds": ("histogram", {"verb", "host"}, REST),
    "process_cpu_seconds_total": ("counter", set(), None),
    "process_resident_memory_bytes": ("gauge", set(), None),
    "process_start_time_seconds": ("gauge", set(), None),
    # the binding process's (rulesched.run.binder), as process_* are the scheduler's
    "rulesched_binding_process_cpu_seconds_total": ("counter", set(), None),
    "rulesched_binding_process_resident_memory_bytes": ("gauge", set(), None),
    "rulesched_rules_info": ("gauge", {"hash", "files", "profile"}, None),
    "rulesched_scheduling_cycle_cpu_seconds": ("summary", {"outcome", "profile"}, None),
    # 1.36-1.37 (pkg/scheduler/metrics/metrics.go at v1.37.2)
    "scheduler_queued_entities": ("gauge", {"queue", "type"}, None),
    "scheduler_queue_incoming_entities_total": ("counter", {"queue", "event", "type"}, None),
    "scheduler_preemption_evaluation_duration_seconds": (
        "histogram",
        {"preemptor", "result"},
        [0.001 * 2**i for i in range(16)],
    ),
    "scheduler_preemption_execution_duration_seconds": (
        "histogram",
        {"preemptor", "result"},
        [0.001 * 2**i for i in range(16)],
    ),
}
EXTENDER: dict[str, tuple[str, set[str], list[float] | None]] = {
    "rulesched_extender_requests_total": ("counter", {"verb", "code"}, None),
    "rulesched_extender_request_duration_seconds": ("histogram", {"verb"}, None),
    "rulesched_rules_info": ("gauge", {"hash", "files"}, None),
    "rest_client_requests_total": ("counter", {"code", "method", "host"}, None),
    "rest_client_request_duration_seconds": ("histogram", {"verb", "host"}, REST),
    "process_cpu_seconds_total": ("counter", set(), None),
}
REMOVED = ("scheduler_e2e_scheduling_duration_seconds", "scheduler_binding_duration_seconds")


def check_families(text: str, expected: dict[str, tuple[str, set[str], list[float] | None]]) -> dict[str, Metric]:
    found = families(text)
    for name, (kind, labels, buckets) in expected.items():
        assert name in found, f"{name} missing"
        family = found[name]
        assert family.type == kind, (name, family.type)
        assert family.samples, f"{name} has no samples"
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == labels, (name, sample.labels)
        if buckets is not None:
            first = {k: v for k, v in family.samples[0].labels.items() if k != "le"}
            bounds = [
                float(s.labels["le"])
                for s in family.samples
                if s.name.endswith("_bucket") and {k: v for k, v in s.labels.items() if k != "le"} == first
            ]
            assert bounds[:-1] == pytest.approx(buckets, rel=1e-12) and bounds[-1] == float("inf"), (name, bounds)
    assert not [line for line in text.splitlines() if "_created" in line.split(" ")[0].split("{")[0]]
    return found


def promtool(text: str) -> None:
    tool = shutil.which("promtool")
    if tool is None:
        if os.environ.get("RULESCHED_REQUIRE_PROMTOOL"):
            pytest.fail("RULESCHED_REQUIRE_PROMTOOL is set but promtool is not installed")
        pytest.skip("promtool not installed (Debian's prometheus package)")
    done = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), (done.stdout, done.stderr)


# --- rulesched run ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scheduler_scrape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, TestApiServer]]:
    """One run: ``fits`` binds (n2 and n3 fit it: scored); ``failing``'s first binding is
    answered 500, then it binds; ``huge`` fits nowhere; ``high`` fits no node but n1 without
    ``low``: it preempts ``low`` and binds there."""
    server = TestApiServer()
    server.add("nodes", node("n1", cpu="2"))
    server.add("nodes", node("n2", cpu="1500m"))
    server.add("nodes", node("n3", cpu="1500m"))
    server.add("pods", pod("low", cpu="2", spec={"nodeName": "n1", "priority": 0}, status={"phase": "Running"}))
    for name, cpu in (("fits", "500m"), ("failing", "500m"), ("huge", "8")):
        server.add("pods", pod(name, cpu=cpu))
    server.add("pods", pod("high", cpu="2", spec={"priority": 1000}))
    server.set_faults(fail_bindings=("default/failing",))
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path_factory.mktemp("metrics") / "kubeconfig")),
        metrics_bind_address="127.0.0.1:0",
        grace_seconds=2,
        leader_elect=True,
        leader_elect_resource_namespace="default",
        # A lease no loaded machine lets lapse: the loop renews every 0.2 s, and a binding sent
        # past the renew deadline is refused ("not leading"), which counts as a binding error and
        # requeues the pod (its node then free for another: the counts below would differ).
        leader_elect_lease_duration=30.0,
        leader_elect_renew_deadline=20.0,
        leader_elect_retry_period=0.2,
    )
    loop = Loop(settings)
    # Every cycle times its rules here (upstream samples one in ten): a few cycles must show them.
    loop.scheduler.settings = dataclasses.replace(loop.scheduler.settings, rule_metrics_sample_percent=100)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    pods = server.store.objects["pods"]
    try:

        def settled() -> bool:
            if loop.ops is None or not all(
                pods[f"default/{n}"]["spec"].get("nodeName") for n in ("fits", "failing", "high")
            ):
                return False
            found = families(fetch(f"http://127.0.0.1:{loop.ops.port}/metrics"))
            return (
                value(found["scheduler_schedule_attempts_total"], "_total", result="scheduled") == 3
                and value(found["scheduler_unschedulable_pods"], plugin="NodeResourcesFit") == 1
            )

        assert wait_for(settled, 30), "the pods did not settle"
        assert loop.ops is not None
        yield fetch(f"http://127.0.0.1:{loop.ops.port}/metrics"), server
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
        server.stop()


def test_scheduler_metrics_are_kube_schedulers(scheduler_scrape: tuple[str, TestApiServer]) -> None:
    text, server = scheduler_scrape
    found = check_families(text, SCHEDULER)
    assert not [name for name in REMOVED if name in text]
    attempts = found["scheduler_schedule_attempts_total"]
    # three pods bound, one binding failed: "scheduled" counts bindings that succeeded
    assert value(attempts, "_total", result="scheduled", profile="rulesched") == 3
    assert value(attempts, "_total", result="error", profile="rulesched") == 1
    assert value(attempts, "_total", result="unschedulable") >= 2  # huge, high before its preemption
    assert value(found["scheduler_scheduling_attempt_duration_seconds"], "_count", result="error") == 1
    # "failing" needed two attempts, "fits" one; each bound pod is observed once
    assert value(found["scheduler_pod_scheduling_attempts"], "_count") == 3
    sli = found["scheduler_pod_scheduling_sli_duration_seconds"]
    assert value(sli, "_count") == 3 and value(sli, "_count", attempts="1") >= 1
    assert value(found["scheduler_preemption_attempts_total"], "_total") >= 2  # high's, huge's
    victims = found["scheduler_preemption_victims"]
    assert (value(victims, "_count"), value(victims, "_sum")) == (1, 1)  # low, once
    incoming = found["scheduler_queue_incoming_pods_total"]
    assert value(incoming, "_total", queue="active", event="UnscheduledPodAdd") == 4
    assert value(incoming, "_total", queue="unschedulable", event="ScheduleAttemptFailure") >= 1
    assert value(incoming, "_total", queue="backoff", event="ScheduleAttemptFailure") >= 1  # the failed binding
    entities = found["scheduler_queue_incoming_entities_total"]
    assert value(entities, "_total", queue="active", event="UnscheduledPodAdd", type="pod") == 4
    queued = found["scheduler_queued_entities"]
    assert value(queued, queue="unschedulable", type="pod") == 1 and value(queued, queue="active", type="podgroup") == 0
    evaluation = found["scheduler_preemption_evaluation_duration_seconds"]
    assert value(evaluation, "_count", preemptor="pod", result="Success") == 1  # high's
    execution = found["scheduler_preemption_execution_duration_seconds"]
    assert value(execution, "_count", preemptor="pod", result="success") == 1  # low evicted for high
    pending = found["scheduler_pending_pods"]
    assert {s.labels["queue"] for s in pending.samples} == {"active", "backoff", "unschedulable", "gated"}
    assert value(pending, queue="unschedulable") == 1
    points = found["scheduler_framework_extension_point_duration_seconds"]
    for point in ("PreFilter", "Filter", "Score", "PostFilter", "Reserve", "Bind"):
        assert value(points, "_count", extension_point=point, profile="rulesched") >= 1, point
    assert value(points, "_count", extension_point="Bind", status="Error") == 1
    assert value(points, "_count", extension_point="PostFilter", status="Success") == 1  # high's nomination
    plugins = found["scheduler_plugin_execution_duration_seconds"]
    assert value(plugins, "_count", plugin="NodeResourcesFit", extension_point="Filter") >= 1
    assert value(plugins, "_count", extension_point="Score") >= 1  # two nodes fit "fits": scored
    assert value(found["leader_election_master_status"], name="rulesched") == 1
    assert value(found["rulesched_binding_process_resident_memory_bytes"]) > 10e6  # (a Python process)
    # each cycle's CPU by outcome: the four that fitted (one binding failed), high's nomination,
    # and the failures (huge's, failing's first, high's before its preemption)
    cpu = found["rulesched_scheduling_cycle_cpu_seconds"]
    assert value(cpu, "_count", outcome="scheduled", profile="rulesched") >= 4
    assert value(cpu, "_count", outcome="nominated", profile="rulesched") == 1
    assert value(cpu, "_count", outcome="unschedulable", profile="rulesched") >= 1
    assert 0 < value(cpu, "_sum", outcome="scheduled", profile="rulesched") < 10
    host = server.url.split("://", 1)[1]
    requests = found["rest_client_requests_total"]
    assert value(requests, "_total", code="500", method="POST", host=host) == 1  # the failed binding
    assert value(requests, "_total", code="201", method="POST", host=host) >= 3
    assert value(found["rest_client_request_duration_seconds"], "_count", verb="GET", host=host) >= 1


def test_scheduler_metrics_pass_promtool(scheduler_scrape: tuple[str, TestApiServer]) -> None:
    promtool(scheduler_scrape[0])


# --- rulesched extender -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def extender_scrape(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = TestApiServer()
    server.add("nodes", full_node("n1"))
    kubeconfig = server.kubeconfig(str(tmp_path_factory.mktemp("extender") / "kubeconfig"))
    process = ExtenderProcess("--kubeconfig", kubeconfig, "--rules", "default")
    try:
        process.wait_ready()
        status, answer = process.post("/filter", {"Pod": extender_pod("p"), "NodeNames": ["n1"]})
        assert status == 200 and answer["NodeNames"] == ["n1"], answer
        yield process.request("GET", "/metrics")[1].decode()
    finally:
        process.stop()
        server.stop()


def test_extender_metrics_follow_the_same_conventions(extender_scrape: str) -> None:
    found = check_families(extender_scrape, EXTENDER)
    assert value(found["rulesched_extender_requests_total"], "_total", verb="filter", code="200") == 1
    assert value(found["rest_client_requests_total"], "_total", code="200", method="GET") >= 1


def test_extender_metrics_pass_promtool(extender_scrape: str) -> None:
    promtool(extender_scrape)


# --- the registry ----------------------------------------------------------------------------------


def test_registry_leaves_out_created_series_for_itself_only() -> None:
    mine, other = Registry(), Registry()
    Counter("things", "Things.", registry=mine.metrics).inc()
    Counter("things", "Things.", registry=other.metrics).inc()  # (no clash: separate registries)
    text = generate_latest(mine).decode()
    assert "things_total 1.0" in text and "_created" not in text
    assert "things_total" in generate_latest(mine.restricted_registry(["things_total"])).decode()


def test_preemption_figures_are_labelled_by_the_preemptors_kind() -> None:
    """The executor's observeVictims (pkg/scheduler/framework/preemption/executor.go at v1.37.2):
    a pod's PDB violations under preemptor="pod", a composite group's victims' figures under
    "compositepodgroup" (its evaluation under "podgroup", as PodGroupEvaluator.evaluate labels
    it); an execution with an eviction given up is an "error"."""
    from rulesched.model.decode import decode_pod
    from rulesched.run.ops import Metrics
    from rulesched.scheduler.framework import Code, CycleResult, Preemption

    metrics = Metrics(["rulesched"])
    victim = decode_pod(pod("v", cpu="1"), "test")
    preemption = Preemption("n1", (victim,), pdb_violations=2)
    metrics.cycle(CycleResult(decode_pod(pod("p", cpu="1"), "test"), Code.UNSCHEDULABLE, preemption=preemption))
    metrics.workload_preemption("Success", 3, 2, 1, 0.01, "compositepodgroup")
    metrics.preemption_executed("compositepodgroup", "error", 0.5)
    found = families(generate_latest(metrics.registry).decode())
    violations = found["scheduler_preemption_pdb_violations_total"]
    assert value(violations, "_total", preemptor="pod") == 2
    assert value(violations, "_total", preemptor="compositepodgroup") == 1
    disruptions = found["scheduler_preemption_workload_disruptions"]
    assert value(disruptions, "_sum", preemptor="compositepodgroup") == 2
    evaluation = found["scheduler_preemption_evaluation_duration_seconds"]
    assert value(evaluation, "_count", preemptor="podgroup", result="Success") == 1
    execution = found["scheduler_preemption_execution_duration_seconds"]
    assert value(execution, "_sum", preemptor="compositepodgroup", result="error") == 0.5


def test_buckets_are_upstreams() -> None:
    assert exponential_buckets(0.001, 2, 15) == pytest.approx(ATTEMPT)
    assert exponential_buckets(1, 2, 5) == (1, 2, 4, 8, 16)
    assert len(PLUGIN) == 20 and PLUGIN[0] == 0.00001 and PLUGIN[-1] == pytest.approx(0.0221683782)


def test_attempts_label_is_capped() -> None:
    from rulesched.run.ops import attempts_label

    assert [attempts_label(n) for n in (1, 14, 15, 40)] == ["1", "14", "15+", "15+"]


@SETTINGS
@given(scenarios(), st.integers(0, 2**16), st.sampled_from([0, 1]))
def test_timing_the_rules_never_moves_a_pod(scenario: Scenario, seed: int, columns_from: int) -> None:
    """A sampled cycle (its rules timed) decides exactly what an unsampled one does."""
    outcomes = []
    for percent in (0, 100):
        state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
        settings_ = SchedulerSettings(
            seed=seed,
            timings=percent > 0,
            rule_metrics_sample_percent=percent,
            engine=EngineSettings(columns_from=columns_from),
        )
        results = list(schedule(scenario, state, settings_))
        outcomes.append([(r.pod.key, r.code, r.node, dict(r.reasons), r.rejected_by) for r in results])
        timed = [r.timing for r in results]
        if percent:
            assert all(t is not None and t.rule_seconds is not None and t.phases for t in timed)
        else:
            assert all(t is None for t in timed)
    assert outcomes[0] == outcomes[1]


def test_an_update_from_before_a_binding_does_not_queue_the_bound_pod_again(tmp_path: Path) -> None:
    """A status patch's event can reach the loop after the binding's outcome and before the
    informer reports the pod bound: the pod is assumed, not pending, and must not be scheduled
    (and counted) a second time. (kube-scheduler skips assumed pods.)"""
    server = TestApiServer()
    try:
        loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig"))))
        loop._apply(Delta("Node", "ADDED", server.add("nodes", node("n1"))))
        created = server.add("pods", pod("a"))
        loop._apply(Delta("Pod", "ADDED", created))
        result = loop.scheduler.schedule_one()
        assert result is not None and result.node == "n1"
        assert wait_for(lambda: not loop._inbox.empty(), 10)  # the binding's outcome (informers are off)
        loop._drain()
        assert loop.store.is_assumed("default/a") and "default/a" not in loop.scheduler.queue
        stale = {**created, "status": {"phase": "Pending", "nominatedNodeName": "n1"}}
        loop._apply(Delta("Pod", "MODIFIED", stale))
        assert "default/a" not in loop.scheduler.queue
        attempts = loop.metrics.attempts
        assert attempts.labels(result="scheduled", profile="rulesched")._value.get() == 1
    finally:
        loop.workers.shutdown(wait=False)
        server.stop()
