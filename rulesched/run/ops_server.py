"""The scheduler's HTTP side for operators: ``/healthz``, ``/readyz``, ``/metrics`` (the
:class:`rulesched.run.ops.Metrics` registry) and ``/debug/explain``. prometheus-client's WSGI app
behind the standard library's threaded WSGI server, with the two probes in front.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from rulesched.config import host_port
from rulesched.errors import ConfigError
from rulesched.explain_service import MAX_BODY_BYTES as EXPLAIN_MAX_BODY
from rulesched.explain_service import PATH as EXPLAIN_PATH
from rulesched.explain_service import ExplainService
from rulesched.metrics import readiness_body
from rulesched.run.ops import Metrics

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    503: "Service Unavailable",
}


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class OpsServer:
    """``/healthz`` (the process answers), ``/readyz`` (``ready()`` says why not),
    ``/metrics`` and, with ``explain``, ``/debug/explain`` (:mod:`rulesched.explain_service`:
    read-only, rate-limited, evaluated on the request's own thread) on a thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
        explain: ExplainService | None = None,
    ) -> None:
        host, port = host_port(address, "--metrics-bind-address")
        try:
            self._server = make_server(host, port, self._app, ThreadingWSGIServer, handler_class=_Quiet)
        except (OSError, ValueError) as err:
            raise ConfigError(f"--metrics-bind-address {address}: {err}") from None
        self.port = self._server.server_address[1]
        self._metrics_app = make_wsgi_app(metrics.registry)
        self._ready = ready
        self._explain = explain
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
            return [readiness_body(ok, detail).encode()]
        if path == "/metrics":
            result: Iterable[bytes] = self._metrics_app(environ, start_response)
            return result
        if path == EXPLAIN_PATH and self._explain is not None:
            try:
                length = int(environ.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            method, query = environ.get("REQUEST_METHOD", "GET"), environ.get("QUERY_STRING", "")
            if length > EXPLAIN_MAX_BODY:  # (refused unread: the handler says so)
                reply = self._explain.handle(method, query, b"", too_large=True)
            else:
                reply = self._explain.handle(method, query, environ["wsgi.input"].read(length) if length > 0 else b"")
            start_response(f"{reply.status} {_REASONS.get(reply.status, '')}".rstrip(), list(reply.headers))
            return [reply.body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found"]
