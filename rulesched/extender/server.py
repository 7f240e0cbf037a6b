"""The extender's HTTP side: aiohttp serving kube-scheduler's verbs and the operator's probes.

aiohttp is already in rulesched's dependencies (the Kubernetes client needs it), parses HTTP in
C, caps request bodies (413) and answers unknown paths (404) and wrong methods (405) itself;
it serves TLS from a standard ``ssl`` context, client-certificate checks included. (The other
candidates: uvicorn and hypercorn need an ASGI layer on top; waitress has no TLS; the standard
library's servers are what the issue asks not to rely on for this.)

The event loop only moves bytes. Every request's decoding, evaluation and encoding runs on one
worker thread, in arrival order, so the :class:`rulesched.extender.service.Extender` and its
caches are only ever touched by that thread. Each request has a deadline covering its reading,
its wait for the worker and its evaluation; past it the answer is 503 with the reason in
``Error`` (kube-scheduler treats any status but 200 as the extender failing this pod, and
retries the pod later), and the worker gives the request up at its next check (a request not
started by then is never started), so one slow request holds up later ones by little more than
its own timeout. Its headers have the same deadline, from their first byte
(:mod:`.connections`); an idle kept-alive connection is closed after ``idle_timeout``. A client
that goes away mid-body is logged in one line. Errors are JSON ``{"Error": "..."}`` with the
status: 400 for a request that does not decode, 403 for a verb refused (the bind verb off or
refused, no client certificate where one is required), 404, 405, 413, 503.

With ``client_ca`` the TLS handshake checks a client certificate when one is offered, and the
verbs answer 403 without one; the probes and /metrics stay open (the kubelet's probes present
no certificate).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import Counter, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from rulesched import __version__
from rulesched.config import host_port
from rulesched.errors import ConfigError, InputError
from rulesched.explain_service import PATH as EXPLAIN_PATH
from rulesched.explain_service import ExplainService, LiveView
from rulesched.extender.binding import BindSettings
from rulesched.extender.connections import Guarded, guarded_factory
from rulesched.extender.service import Answer, Extender
from rulesched.extender.wire import encode
from rulesched.lang import RuleSet
from rulesched.metrics import Registry, RestClientMetrics, add_process_collector, readiness_body
from rulesched.model import Pod
from rulesched.reload import Reloader, ReloadOutcome, ReloadSettings, RulesSources
from rulesched.scheduler.cancel import CycleCancelled

log = logging.getLogger(__name__)

_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


@dataclass(frozen=True)
class ExtenderSettings:
    """Built by the command line (or a --config file)."""

    listen: str = "0.0.0.0:8888"
    rules: tuple[str, ...] = ("default",)
    rules_configmap: str | None = None  # NAMESPACE/NAME: its .rules keys join the set, watched
    rules_debounce: float = 0.1  # a burst of rule changes ends after this much quiet ...
    rules_max_delay: float = 2.0  # ... or this long after its first change
    rules_event_interval: float = 60.0  # at most one RulesRejected event per interval
    rules_last_good: bool = True  # keep the last accepted ConfigMap set in NAME-last-good
    kubeconfig: str | None = None  # the informer cache and binding: a kubeconfig file ...
    in_cluster: bool = False  # ... or the pod's service account
    tls_cert: str | None = None
    tls_key: str | None = None
    client_ca: str | None = None  # require client certificates signed by this CA
    max_body_bytes: int = 128 * 2**20  # 5000 full nodes are ~35 MB
    request_timeout: float = 5.0  # kube-scheduler's default httpTimeout; also for a request's headers
    idle_timeout: float = 100.0  # a kept-alive connection with no request (Go's clients give up at 90 s)
    node_ttl: float = 600.0  # forget a node a request sent (and the informer does not list) after this long
    node_cache_bytes: int = 128 * 2**20  # full-node requests: the JSON of the decoded nodes kept
    bind_verb: bool = False  # serve the bind verb (needs API access: RBAC for bindings and volumes)
    # pods the bind verb binds: those naming one of these schedulers (kube-scheduler's profiles
    # that call this extender)
    scheduler_names: tuple[str, ...] = ("default-scheduler",)
    filter_path: str = "/filter"
    prioritize_path: str = "/prioritize"
    preempt_path: str = "/preempt"
    bind_path: str = "/bind"


class ExtenderMetrics:
    """rulesched's own (``rulesched_`` prefix: kube-scheduler has no extender-side metrics), on the
    conventions of the scheduler's (:mod:`rulesched.metrics`): no ``_created`` series, client-go's
    ``rest_client_*`` for the informer cache's API requests, the process collector."""

    def __init__(self) -> None:
        self.registry = Registry()
        r = self.registry.metrics
        self.requests = Counter(
            "rulesched_extender_requests", "Extender requests by verb and status code.", ["verb", "code"], registry=r
        )
        self.latency = Histogram(
            "rulesched_extender_request_duration_seconds",
            "From the request's arrival to its answer, by verb.",
            ["verb"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.rules = Info("rulesched_rules", "The active rule set: its hash and files.", registry=r)
        self.reloads = Counter("rulesched_rules_reloads", "Rule reloads by result.", ["result"], registry=r)
        self.rest = RestClientMetrics(self.registry)
        add_process_collector(self.registry)

    def reloaded(self, outcome: ReloadOutcome) -> None:
        self.reloads.labels(result="success" if outcome.ok else "error").inc()
        self.rules.info({"hash": outcome.digest, "files": ",".join(outcome.files)})


async def _body(request: web.Request, limit: int) -> bytes:
    """The request's body. With a Content-Length: read into one buffer of that size (aiohttp's
    ``read`` grows a bytearray chunk by chunk and then copies it: 4 ms of a full-node request's
    7 MB on this machine); past ``limit``, 413 as aiohttp answers it."""
    length = request.content_length
    if length is None or request.headers.get("Transfer-Encoding"):
        return await request.read()
    if length > limit:
        raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=length)
    return await request.content.readexactly(length) if length else b""


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=encode({"Error": message}), content_type="application/json")


def tls_context(settings: ExtenderSettings) -> ssl.SSLContext | None:
    if not settings.tls_cert and not settings.tls_key:
        if settings.client_ca:
            raise ConfigError("--client-ca needs --tls-cert and --tls-key")
        return None
    if not (settings.tls_cert and settings.tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
        if settings.client_ca:
            context.load_verify_locations(settings.client_ca)
            # verified when offered (a bad one fails the handshake); the verbs require one
            context.verify_mode = ssl.CERT_OPTIONAL
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(f"TLS: {err}") from None
    return context


class ExtenderServer:
    def __init__(self, settings: ExtenderSettings, extender: Extender) -> None:
        self.settings = settings
        self.extender = extender
        self.metrics = ExtenderMetrics()
        self.metrics.rules.info({"hash": extender.rules.digest, "files": ",".join(extender.rules.rules.files)})
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="extender")
        self.app = web.Application(client_max_size=settings.max_body_bytes, middlewares=[self._errors])
        verbs: dict[str, Callable[[bytes], Answer]] = {
            settings.filter_path: extender.filter,
            settings.prioritize_path: extender.prioritize,
            settings.preempt_path: extender.preempt,
            settings.bind_path: extender.bind,
        }
        for path, verb in verbs.items():
            needs_rules = path != settings.bind_path
            self.app.router.add_post(path, self._handler(path.strip("/") or "root", verb, needs_rules))
        self._guards: dict[object, Guarded] = {}  # aiohttp's protocol of a connection -> its guard
        self._listener: asyncio.Server | None = None
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        # /debug/explain: a snapshot taken on the worker between verbs, evaluated on a thread of its own
        self.explainer = ExplainService(self._live_view)
        self.app.router.add_get(EXPLAIN_PATH, self._explain)
        self.app.router.add_post(EXPLAIN_PATH, self._explain)
        self._runner: web.AppRunner | None = None
        self.address = ""

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        guard = self._guards.get(request.protocol)
        if guard is not None:
            guard.request_started()  # the headers are in: their deadline is met
        try:
            return await handler(request)
        except web.HTTPException as err:  # 404, 405, 413 from aiohttp: the reason as JSON
            if err.status < 400:
                raise
            self.metrics.requests.labels(verb="other", code=str(err.status)).inc()
            return _error(err.status, err.text or err.reason)
        finally:
            if guard is not None:
                guard.request_done()

    def _handler(
        self, verb: str, call: Callable[[bytes], Answer], needs_rules: bool = True
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        timeout = self.settings.request_timeout
        rules = self.extender.rules

        async def handle(request: web.Request) -> web.Response:
            started, arrived = time.perf_counter(), time.monotonic()
            if self.settings.client_ca and request.transport and not request.transport.get_extra_info("peercert"):
                response = _error(403, f"{verb}: a client certificate is required")
                self.metrics.requests.labels(verb=verb, code="403").inc()
                return response
            if needs_rules and not rules.loaded:  # no valid set yet: kube-scheduler retries the pod later
                response = _error(503, f"{verb}: {rules.waiting}")
                self.metrics.requests.labels(verb=verb, code="503").inc()
                return response
            try:
                async with asyncio.timeout(timeout):
                    body = await _body(request, self.settings.max_body_bytes)
                    loop = asyncio.get_running_loop()
                    answer = await loop.run_in_executor(self._worker, self._call, call, body, arrived)
                response = web.Response(status=answer.status, body=answer.body, content_type="application/json")
            except TimeoutError:
                response = _error(503, f"{verb}: no answer within {timeout:g}s")
            except (ConnectionError, EOFError) as err:  # the client went away mid-body: nobody to answer
                reason = str(err) or type(err).__name__  # (the log formatter caps it)
                log.warning("%s: the client went away mid-request (%s)", verb, reason)
                self.metrics.requests.labels(verb=verb, code="499").inc()  # (nginx's "client closed request")
                return _error(400, f"{verb}: the request ended early")  # (written to nobody)
            self.metrics.requests.labels(verb=verb, code=str(response.status)).inc()
            self.metrics.latency.labels(verb=verb).observe(time.perf_counter() - started)
            return response

        return handle

    def _call(self, call: Callable[[bytes], Answer], body: bytes, arrived: float) -> Answer:
        timeout = self.settings.request_timeout
        try:
            return self.extender.answer(call, body, arrived, timeout)
        except CycleCancelled as cancelled:  # (the handler has answered 503 already, or is about to)
            during = f" (evaluating rule {cancelled.rule!r})" if cancelled.rule else ""
            return Answer(503, encode({"Error": f"no answer within {timeout:g}s{during}"}))
        except InputError as err:
            return Answer(400, encode({"Error": str(err)}))
        except Exception as err:  # noqa: BLE001 - a bug answers 500 and the server lives on
            log.exception("extender request failed")
            return Answer(500, encode({"Error": f"internal error: {type(err).__name__}: {err}"}))

    def _live_view(self) -> LiveView | None:
        rules = self.extender.rules
        try:
            snapshot, pending = self._worker.submit(self.extender.live_view).result(
                timeout=self.settings.request_timeout
            )
        except (concurrent.futures.TimeoutError, RuntimeError):  # (a busy or stopped worker)
            return None

        def rules_for(pod: Pod) -> RuleSet | None:
            return rules.rules if rules.loaded else None

        return LiveView(snapshot, rules_for, pending.get)

    async def _explain(self, request: web.Request) -> web.Response:
        if self.settings.client_ca and request.transport and not request.transport.get_extra_info("peercert"):
            return _error(403, "explain: a client certificate is required")  # (what the cluster holds is not public)
        body = await request.read() if request.method == "POST" else b""
        reply = await asyncio.to_thread(self.explainer.handle, request.method, request.query_string, body)
        self.metrics.requests.labels(verb="explain", code=str(reply.status)).inc()
        return web.Response(status=reply.status, body=reply.body, headers=dict(reply.headers))

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready, why = self.extender.ready  # (the active rules' hash, when ready)
        return web.Response(status=200 if ready else 503, text=readiness_body(ready, why))

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def start(self) -> str:
        host, port_number = host_port(self.settings.listen, "--listen")
        context = tls_context(self.settings)
        self._runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, keepalive_timeout=self.settings.idle_timeout
        )
        await self._runner.setup()
        assert self._runner.server is not None
        # (aiohttp's TCPSite, with each connection behind its header deadline)
        factory = guarded_factory(self._runner.server, self.settings.request_timeout, self._guards)
        try:
            self._listener = await asyncio.get_running_loop().create_server(
                factory, host or "0.0.0.0", port_number, ssl=context, reuse_address=True
            )
        except OSError as err:
            raise ConfigError(f"--listen {self.settings.listen}: {err}") from None
        bound = self._listener.sockets[0].getsockname()
        self.address = f"{bound[0]}:{bound[1]}"
        return self.address

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self._worker.shutdown(wait=False, cancel_futures=True)


async def serve(settings: ExtenderSettings, arm: Callable[[asyncio.Event, Reloader], None] | None = None) -> int:
    """Run the extender until ``arm``'s event is set (the command line sets it on SIGTERM, and
    triggers the reloader on SIGHUP)."""
    from rulesched.kube.api import KubeApi

    api = KubeApi(settings.kubeconfig) if settings.kubeconfig or settings.in_cluster else None
    if settings.bind_verb and api is None:
        raise ConfigError("--bind-verb needs API access (--kubeconfig or --in-cluster)")
    stopping = threading.Event()
    reload_settings = ReloadSettings(
        settings.rules_debounce, settings.rules_max_delay, settings.rules_event_interval, settings.rules_last_good
    )
    # No leader election among extender replicas: each may write the last good record (the
    # writes are conditional on resourceVersion, and an equal record is left alone).
    reloader = Reloader(RulesSources(settings.rules, settings.rules_configmap), api, stopping, settings=reload_settings)
    rules = reloader.initial()
    binding = BindSettings(
        settings.bind_verb, frozenset(settings.scheduler_names), max(0.5, settings.request_timeout - 1.0)
    )
    extender = Extender(
        rules,
        api,
        stop=stopping,
        node_ttl=settings.node_ttl,
        binding=binding,
        node_cache_bytes=settings.node_cache_bytes,
    )
    server = ExtenderServer(settings, extender)
    reloader.on_outcome = server.metrics.reloaded
    if api is not None:
        api.observer = server.metrics.rest.observe
    if reloader.origin != "sources":  # refused at start (running the last good record, or nothing)
        server.metrics.reloads.labels(result="error").inc()
    address = await server.start()
    extender.start()
    reloader.start()
    log.info(
        "rulesched %s extender listening on %s",  # (tests read the address from this line)
        __version__,
        address,
        extra={
            "version": __version__,
            "rules": rules.digest,
            "files": ",".join(rules.rules.files),
            "configmap": settings.rules_configmap,
            "cache": "informers" if api is not None else "none (full nodes only)",
            "tls": "on" if settings.tls_cert else "off",
        },
    )
    stop = asyncio.Event()
    if arm is not None:
        arm(stop, reloader)
    announce = asyncio.create_task(_announce_synced(server))
    try:
        await stop.wait()
    finally:
        announce.cancel()
        log.info("stopping: closing the listener; requests under way are answered or dropped")
        stopping.set()
        if api is not None:
            api.close_watches()  # informer threads blocked on a watch read end now, not at its next event
        await server.stop()
        extender.close()
        reloader.join(timeout=1.0)
        log.info("stopped", extra={"exit": 0})
    return 0


async def _announce_synced(server: ExtenderServer) -> None:
    """Log "caches synced" once the informers' first lists are in, with what the cache holds
    (counted on the requests' thread, which owns the store)."""
    extender = server.extender
    if extender.mirror is None:
        return
    while not extender.mirror.synced:
        await asyncio.sleep(0.1)
    nodes, pods = await asyncio.get_running_loop().run_in_executor(server._worker, extender.census)
    log.info("caches synced", extra={"nodes": nodes, "pods": pods, "rules": extender.rules.digest})
