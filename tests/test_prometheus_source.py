"""A real Prometheus server as a load source: Debian's ``prometheus`` (the package ``.ci/run``
installs for promtool) started on a free loopback port, scraping every 200 ms a tiny exporter this
test serves; ``rulesched run`` with a ``prometheus`` load source then places pods by the values
its instant query gives, per node (a series for a node the cluster lacks is ignored), and when the
server is gone keeps them until they are older than max_age, then sees them absent.

Skipped when the binary is missing, unless ``RULESCHED_REQUIRE_PROMTOOL`` is set (CI): then it
fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rulesched.loadsources.poller import LoadSources
from rulesched.loadsources.prometheus import PrometheusQuery
from rulesched.loadsources.settings import PrometheusSettings
from rulesched.model.load import LoadSnapshot
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for

CONFIG = """global:
  scrape_interval: 200ms
  scrape_timeout: 200ms
scrape_configs:
  - job_name: loadtest
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


class Exporter:
    """``/metrics`` with one gauge per node, ``test_node_load{node="NAME"} VALUE``."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                lines = [f'test_node_load{{node="{n}"}} {v}' for n, v in sorted(exporter.values.items())]
                body = ("# TYPE test_node_load gauge\n" + "\n".join(lines) + "\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[str, Exporter, subprocess.Popen[bytes]]]:
    binary = shutil.which("prometheus")
    if binary is None:
        if os.environ.get("RULESCHED_REQUIRE_PROMTOOL"):
            pytest.fail("RULESCHED_REQUIRE_PROMTOOL is set but the prometheus binary is not installed")
        pytest.skip("the prometheus binary is not installed (Debian's prometheus package)")
    exporter = Exporter()
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(port=exporter.port), encoding="utf-8")
    port = _free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield f"http://127.0.0.1:{port}", exporter, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        exporter.stop()


def test_run_places_pods_by_a_prometheus_query(
    prometheus: tuple[str, Exporter, subprocess.Popen[bytes]], server: TestApiServer, tmp_path: Path
) -> None:
    url, exporter, process = prometheus
    exporter.values = {"n1": 80.0, "n2": 10.0, "n3": 50.0, "ghost": 0.0}
    source = PrometheusSettings(
        name="load", url=url, query="test_node_load", node_label="node", interval=0.2, max_age=2.0, timeout=0.2
    )
    # the source alone first: the query's values per node, as Prometheus scraped them
    published: list[LoadSnapshot] = []
    alone = LoadSources((source,), None, published.append, threading.Event())

    def answered() -> bool:
        try:
            alone._read(source, alone_query)
        except Exception:
            return False
        return len(alone.snapshot().nodes) == 4

    alone_query = PrometheusQuery(source)
    assert wait_for(answered, seconds=20), "Prometheus never answered the query with the exporter's series"
    values = {name: load.metric("load") for name, load in alone.snapshot().nodes.items()}
    assert values == {"n1": 80.0, "n2": 10.0, "n3": 50.0, "ghost": 0.0}
    alone_query.close()

    for name in ("n1", "n2", "n3"):
        server.add("nodes", node(name))
    rules = tmp_path / "load.rules"
    rules.write_text(
        'extends "default"\n\n'
        "score coolest weight 20:\n"
        '    if has(node.metrics, "load") and node.metrics_age < 2 then 100 - node.metrics["load"] else 0\n',
        encoding="utf-8",
    )
    settings = RunSettings(
        kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
        rules=(str(rules),),
        grace_seconds=2,
        load_sources=(source,),
    )
    loop = Loop(settings)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        # (the loop's thread owns the store: only its nodes' fields are read here, never a snapshot taken)
        expected = {"n1": 80.0, "n2": 10.0, "n3": 50.0}  # (the ghost node's series is ignored)
        assert wait_for(lambda: {n.name: n.metrics.get("load") for n in loop.store.nodes} == expected, seconds=30)
        server.add("pods", pod("cool"))
        assert wait_for(lambda: server.store.objects["pods"]["default/cool"]["spec"].get("nodeName"))
        assert server.store.objects["pods"]["default/cool"]["spec"]["nodeName"] == "n2"
        # Prometheus gone: the last values stay until they are 2 s old, then they are absent
        stopped = time.monotonic()
        process.kill()  # (gone at once, as a crashed server)
        process.wait(timeout=10)
        assert wait_for(lambda: loop.load.failures["load"] > 0, seconds=30)
        if time.monotonic() - stopped < 1.5:  # (a starved machine may take longer: then only the end is checked)
            assert loop.store.nodes[1].metrics.get("load") == 10.0  # kept while under max_age
        assert wait_for(lambda: all("load" not in n.metrics for n in loop.store.nodes), seconds=30)
        assert time.monotonic() - stopped >= 1.5
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=10)
    assert not thread.is_alive()
