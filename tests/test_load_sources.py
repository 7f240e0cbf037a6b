"""Live load sources (``run --config``'s load_sources): their settings, metrics.k8s.io read through
the official client from the test API server (tests/apiserver.py), staleness (a source down keeps
its last values until they are older than max_age, then they are absent), unknown nodes ignored,
and the scheduler never waiting on a slow or failing source."""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import _parser
from rulesched.cluster.store import ClusterStore
from rulesched.errors import ConfigError
from rulesched.kube.api import KubeApi
from rulesched.loadsources.poller import LoadSources
from rulesched.loadsources.prometheus import PrometheusQuery, SourceError, parse_vector
from rulesched.loadsources.settings import MetricsApiSettings, PrometheusSettings, parse_load_sources
from rulesched.model.load import NEVER_MEASURED, LoadSnapshot
from rulesched.run.cli import settings_from
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for
from tests.helpers.timing import Stopwatch
from tests.upstream import harness


def test_settings_are_read_and_mistakes_are_one_line() -> None:
    sources = parse_load_sources(
        "c.yaml",
        [
            {"kind": "metrics-api", "interval": "15s", "max-age": "1m"},
            {
                "kind": "prometheus",
                "name": "cpu_5m",
                "url": "http://prom:9090",
                "query": "q",
                "node_label": "instance",
                "node_pattern": "(.*):[0-9]+",
                "window": "5m",
                "pod_estimate": 2.5,
            },
        ],
    )
    api, prom = sources
    assert isinstance(api, MetricsApiSettings) and (api.interval, api.max_age, api.timeout) == (15.0, 60.0, 5.0)
    assert isinstance(prom, PrometheusSettings) and prom.window == 300.0 and prom.pod_estimate == 2.5
    bad: list[tuple[Any, str]] = [
        ([{"kind": "graphite"}], "c.yaml: load_sources[0].kind: expected metrics-api or prometheus"),
        ([{"kind": "metrics-api", "interval": "10s", "max_age": "5s"}], "load_sources[0].max_age: 5s is shorter"),
        ([{"kind": "metrics-api", "intervall": "10s"}], "unknown setting 'intervall'"),
        ([{"kind": "prometheus", "name": "x", "url": "prom:9090", "query": "q"}], "load_sources[0].url"),
        ([{"kind": "prometheus", "name": "9x", "url": "http://p", "query": "q"}], "load_sources[0].name"),
        ([{"kind": "metrics-api"}, {"kind": "metrics-api"}], "load_sources[1]: a second metrics-api source"),
        ({"kind": "metrics-api"}, "expected a list of sources"),
    ]
    for raw, message in bad:
        with pytest.raises(ConfigError) as err:
            parse_load_sources("c.yaml", raw)
        assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_prometheus_vectors_by_node_label() -> None:
    data = {
        "resultType": "vector",
        "result": [
            {"metric": {"instance": "n1:9100"}, "value": [1000.0, "41.5"]},
            {"metric": {"instance": "n2:9100"}, "value": [1000.0, "NaN"]},
            {"metric": {"job": "x"}, "value": [1000.0, "1"]},
            {"metric": {"instance": "n3:9100"}, "value": [1000.0, "1"]},
            {"metric": {"instance": "n3:9100", "cpu": "1"}, "value": [1000.0, "2"]},
        ],
    }
    result = parse_vector(data, "instance", re.compile("(.*):[0-9]+"), 60.0, now=2000.0)
    assert dict(result.values) == {"n1": result.values["n1"]} and result.values["n1"].value == 41.5
    assert result.values["n1"].at == 1000.0 and result.values["n1"].window == 60.0
    assert dict(result.left_out) == {
        "not a finite number": 1,
        "no instance label": 1,
        "node given by several series": 1,
    }
    with pytest.raises(SourceError, match="gives a matrix, not a vector"):
        parse_vector({"resultType": "matrix", "result": []}, "node", None, 60.0, 0.0)


def _api(server: TestApiServer, tmp_path: Path) -> KubeApi:
    return KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))


def test_metrics_api_values_kept_while_the_source_is_down_then_absent(server: TestApiServer, tmp_path: Path) -> None:
    server.set_node_metrics("n1", "1500m", "2Gi", at=995.0, window="20.5s")
    server.set_node_metrics("ghost", "9", "1Gi", at=995.0)
    clock = [1000.0]
    published: list[LoadSnapshot] = []
    settings = MetricsApiSettings(interval=10.0, max_age=30.0, timeout=2.0)
    sources = LoadSources((settings,), _api(server, tmp_path), published.append, threading.Event(), lambda: clock[0])
    sources._read(settings, None)
    store = ClusterStore()
    store.add_node(harness.node("n1"))
    store.set_load(sources.snapshot())
    info = store.snapshot().nodes[0]
    assert info.usage == {"cpu": 1500, "memory": 2 * 2**30 * 1000} and info.metrics_age == 5.0
    assert [n.name for n in store.snapshot().nodes] == ["n1"]  # the ghost node's values are ignored
    assert ("GET", "/apis/metrics.k8s.io/v1beta1/nodes") in server.store.requests
    server.set_faults(metrics_unavailable=True)
    clock[0] = 1020.0
    with pytest.raises(Exception, match="503|unable to handle"):
        sources._read(settings, None)
    store.set_load(sources.snapshot())
    assert store.snapshot().nodes[0].usage["cpu"] == 1500 and store.snapshot().nodes[0].metrics_age == 25.0
    clock[0] = 1026.0  # 31 s old: dropped
    store.set_load(sources.snapshot())
    info = store.snapshot().nodes[0]
    assert dict(info.usage) == {} and info.metrics_age == NEVER_MEASURED
    server.set_faults()
    server.set_node_metrics("n1", "500m", "1Gi", at=1025.0)
    sources._read(settings, None)
    store.set_load(sources.snapshot())
    assert store.snapshot().nodes[0].usage["cpu"] == 500


LOAD_RULES = """extends "default"

score coolest weight 20:
    if not has(node.usage, "cpu") then 0
    else 100 - 100 * node.usage.cpu / node.allocatable.cpu
"""


def _loop(server: TestApiServer, tmp_path: Path, source: MetricsApiSettings) -> Loop:
    rules = tmp_path / "load.rules"
    rules.write_text(LOAD_RULES, encoding="utf-8")
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
        rules=(str(rules),),
        grace_seconds=2,
        load_sources=(source,),
    )
    return Loop(settings)


def test_run_places_pods_by_measured_load_and_estimates_a_burst(server: TestApiServer, tmp_path: Path) -> None:
    for name in ("n1", "n2", "n3"):
        server.add("nodes", node(name, cpu="8"))
    server.set_node_metrics("n1", "6", "1Gi")
    server.set_node_metrics("n2", "1", "1Gi")
    server.set_node_metrics("n3", "7", "1Gi")
    server.set_node_metrics("gone", "1", "1Gi")  # a node the cluster does not have: ignored
    loop = _loop(server, tmp_path, MetricsApiSettings(interval=0.2, max_age=60.0, timeout=0.2, window=60.0))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: loop.store.load.measured.version > 0 and loop.load.reads["metrics-api"] > 0)
        # (the loop's thread owns the store: only its nodes' fields are read here, never a snapshot taken)
        assert wait_for(lambda: [n.usage.get("cpu") for n in loop.store.nodes] == [6000, 1000, 7000])
        for i in range(4):
            server.add("pods", pod(f"p{i}", cpu="2"))
        assert wait_for(lambda: all(p["spec"].get("nodeName") for p in server.objects("pods")))
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    placed = sorted(p["spec"]["nodeName"] for p in server.objects("pods"))
    # n2 (1 cpu used) takes pods until its estimate (2 cpu each) makes it hotter than n1 (6 used):
    # 1 + 2 + 2 = 5 < 6, so three go to n2, then n1 (6 < 7) rather than a fourth to n2 (7 + 2)
    assert placed == ["n1", "n2", "n2", "n2"], placed


def test_a_slow_or_failing_source_never_holds_a_cycle(server: TestApiServer, tmp_path: Path) -> None:
    for name in ("n1", "n2"):
        server.add("nodes", node(name))
    server.set_faults(metrics_delay=60.0)  # no read is ever answered: each times out after 5 s
    loop = _loop(server, tmp_path, MetricsApiSettings(interval=5.0, max_age=20.0, timeout=5.0))
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        assert wait_for(lambda: loop.ready)
        clock = Stopwatch()
        for i in range(5):
            server.add("pods", pod(f"p{i}"))
        assert wait_for(lambda: all(p["spec"].get("nodeName") for p in server.objects("pods")), seconds=30)
        # A cycle that waited on a read would wait its 5 s timeout: 25 s for the five. Bound in
        # 2.5 s on a quiet machine (the machine's slowdown on top), none of them held.
        assert clock.stop() < clock.bound(2.5), str(clock)
        assert wait_for(lambda: loop.load.failures["metrics-api"] > 0, seconds=30)
        errors = loop.metrics.load_reads.labels(source="metrics-api", result="error")
        assert wait_for(lambda: errors._value.get() >= 1, seconds=10)  # (rulesched_load_source_reads_total)
        server.set_faults(metrics_unavailable=True)
        server.add("pods", pod("later"))
        assert wait_for(lambda: server.store.objects["pods"]["default/later"]["spec"].get("nodeName"), seconds=30)
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    assert not thread.is_alive()


def test_prometheus_failures_are_one_line_source_errors(tmp_path: Path) -> None:
    answers: list[tuple[int, bytes]] = []
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            seen.append(dict(self.headers))
            code, body = answers.pop(0)
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("s3cret\n", encoding="utf-8")
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    query = PrometheusQuery(
        PrometheusSettings(
            name="x", url=url, query="q", interval=1.0, max_age=2.0, timeout=1.0, bearer_token_file=str(token)
        )
    )
    try:
        answers.append((400, b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}'))
        with pytest.raises(SourceError, match="400: parse error at char 3"):
            query.read(time.time())
        assert seen[0]["Authorization"] == "Bearer s3cret"
        answers.append((200, b"<html>not json</html>"))
        with pytest.raises(SourceError, match="not JSON"):
            query.read(time.time())
        answers.append((200, b'{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}'))
        with pytest.raises(SourceError, match="gives a scalar, not a vector"):
            query.read(time.time())
    finally:
        query.close()
        httpd.shutdown()
        httpd.server_close()
    closed = PrometheusQuery(PrometheusSettings(name="x", url=url, query="q", interval=1.0, max_age=2.0, timeout=0.5))
    with pytest.raises(SourceError) as err:
        closed.read(time.time())
    assert "\n" not in str(err.value) and url in str(err.value)


def test_run_reads_load_sources_from_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "load_sources:\n"
        "  - {kind: metrics-api, interval: 15s, max_age: 1m}\n"
        "  - {kind: prometheus, name: cpu_5m, url: 'http://prom:9090', query: up, window: 5m}\n",
        encoding="utf-8",
    )
    settings = settings_from(_parser().parse_args(["run", "--config", str(config)]))
    assert [s.name for s in settings.load_sources] == ["metrics-api", "cpu_5m"]
    assert settings.load_sources[1].window == 300.0
    config.write_text("load_sources:\n  - {kind: prometheus, name: x, query: up}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config.yaml: load_sources\[0\].url: required"):
        settings_from(_parser().parse_args(["run", "--config", str(config)]))
