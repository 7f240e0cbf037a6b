"""What operators read: Prometheus metrics, and ``/healthz``, ``/readyz``, ``/metrics`` over HTTP.

Metric names follow kube-scheduler's where the meaning is the same
(``scheduler_schedule_attempts_total{result,profile}``, ``scheduler_pending_pods{queue}``,
``scheduler_e2e_scheduling_duration_seconds``, ``scheduler_binding_duration_seconds``); rulesched's
own are prefixed ``rulesched_`` (rule evaluation time per cycle, the active rule set's hash as an
info metric). Every metric lives in the :class:`Metrics` object's own registry, so two
schedulers in one process (tests) never share one. The HTTP side is prometheus-client's WSGI app
behind the standard library's threaded WSGI server, with the two probes in front.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from rulesched.errors import ConfigError

_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


class Metrics:
    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.registry = CollectorRegistry()
        r = self.registry
        self.attempts = Counter(
            "scheduler_schedule_attempts", "Scheduling attempts by result.", ["result", "profile"], registry=r
        )
        self.pending = Gauge("scheduler_pending_pods", "Pending pods by queue.", ["queue"], registry=r)
        self.e2e = Histogram(
            "scheduler_e2e_scheduling_duration_seconds",
            "From the start of a pod's scheduling cycle to the end of its binding.",
            ["result", "profile"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.binding = Histogram(
            "scheduler_binding_duration_seconds", "The binding API call.", ["result"], buckets=_BUCKETS, registry=r
        )
        self.evaluation = Histogram(
            "rulesched_rule_evaluation_duration_seconds",
            "One scheduling cycle's rule evaluation (filter, score, preemption).",
            buckets=_BUCKETS,
            registry=r,
        )
        self.preemption_victims = Counter("scheduler_preemption_victims", "Pods evicted by preemption.", registry=r)
        self.rules = Info("rulesched_rules", "The active rule set.", registry=r)
        self.reloads = Counter("rulesched_rules_reloads", "Rule reloads by result.", ["result"], registry=r)

    def set_rules(self, digest: str, files: Iterable[str]) -> None:
        self.rules.info({"hash": digest, "files": ",".join(files)})

    def set_pending(self, counts: dict[str, int]) -> None:
        for name, count in counts.items():
            self.pending.labels(queue=name).set(count)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class OpsServer:
    """``/healthz`` (the process answers), ``/readyz`` (``ready()`` says why not) and
    ``/metrics`` on a thread."""

    def __init__(self, address: str, metrics: Metrics, ready: Callable[[], tuple[bool, str]]) -> None:
        host, _, port = address.rpartition(":")
        try:
            self._server = make_server(
                host or "0.0.0.0", int(port), self._app, ThreadingWSGIServer, handler_class=_Quiet
            )
        except (OSError, ValueError) as err:
            raise ConfigError(f"--metrics-bind-address {address}: {err}") from None
        self.port = self._server.server_address[1]
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._ready = ready
        self._thread = threading.Thread(target=self._server.serve_forever, name="ops-http", daemon=True)

    def start(self) -> OpsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        if path == "/readyz":
            ok, detail = self._ready()
            start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"{'ok' if ok else 'not ready'}: {detail}".encode()]
        if path == "/metrics":
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]
