"""The Kubernetes API behind one thin adapter: the only module that imports the client library.

The official ``kubernetes`` client does the transport: configuration (a kubeconfig file, or the
pod's service account in a cluster), authentication, TLS and the urllib3 connection pool. This
module asks it for raw responses and decodes the JSON itself, since rulesched decodes API objects
into its own model (:mod:`rulesched.model.decode`) and the client's generated classes would only
be thrown away. Bodies go as JSON, except bindings and events, which go in Kubernetes' protobuf
encoding as client-go sends them (:mod:`rulesched.kube.protobuf`: less of the server's CPU);
answers are asked for in JSON. The client certificate is sent alone, without the CA OpenSSL
would chain to it (:func:`rulesched.kube.transport.leaf_alone`). Failures become the small
error tree of :mod:`rulesched.errors`:

    KubeError                   anything the API server refused, or could not be reached for
    ├── ConflictError           409: a binding to a pod already bound, a stale resourceVersion
    ├── GoneError               410: a watch's resourceVersion is too old (relist)
    ├── NotFoundError           404
    ├── TooManyRequestsError    429: an eviction a PodDisruptionBudget forbids, or throttling
    └── UnavailableError        5xx, or the connection failed or was cut: retry with backoff

A watch is a :class:`WatchStream`: opened when :meth:`KubeApi.watch` returns (so a refused or
failed request raises there, and a stream that breaks later raises while iterating), and
closeable from any thread: :meth:`KubeApi.close_watches` ends every open watch at shutdown, so
informer threads blocked on a read return at once instead of at the next event. Every request
names the process in its User-Agent (``rulesched/VERSION (HOST_PID)``), as audit logs show it.

Next stage: :mod:`rulesched.kube.informer` lists and watches with :meth:`KubeApi.list` and
:meth:`KubeApi.watch`.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import msgspec
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from rulesched.errors import (
    ConfigError,
    ConflictError,
    GoneError,
    KubeError,
    NotFoundError,
    TooManyRequestsError,
    UnavailableError,
)
from rulesched.kube import protobuf
from rulesched.kube.bodies import binding_body, event_body
from rulesched.kube.channel import Channel
from rulesched.kube.resources import EVENTS, PODS, Resource, Scope
from rulesched.kube.transport import URLLIB3_2, Transport, leaf_alone, user_agent
from rulesched.model.fields import describe
from rulesched.yamlreader import read_yaml_file

TOKEN_REFRESH_SECONDS = 60.0
EVENT_ATTEMPTS = 6


def _at_most_every(seconds: float, hook: Any) -> Any:
    """The token refresh hook, run at most once per ``seconds`` (tokens live for many minutes;
    the client would otherwise re-read the configuration and the proxy environment on every
    request: a third of a request's CPU)."""
    last = [-math.inf]
    hooks = [hook]
    lock = threading.Lock()

    def throttled(configuration: Any) -> None:
        now = time.monotonic()
        with lock:
            if now - last[0] < seconds:
                return
            last[0] = now
        hooks[0](configuration)
        installed = configuration.refresh_api_key_hook
        if installed is not throttled:  # the kubeconfig loader's hook puts itself back: keep ours
            hooks[0] = installed
            configuration.refresh_api_key_hook = throttled

    return throttled


# Told of every request: (method, the server's URL, status code or "<error>" when no answer
# came, seconds until the whole answer was read, or None for a watch, which is counted only).
# The servers' metrics (client-go's rest_client_* series) hang on this, so this module never
# imports the metrics library.
RequestObserver = Callable[[str, str, str, float | None], None]


@dataclass(frozen=True)
class Listed:
    items: list[dict[str, Any]]
    resource_version: str


def _check_kubeconfig(path: str) -> None:
    """A kubeconfig file read as the client will read it, so that what it cannot use is said in
    one line naming the file (the client's loader prints PyYAML's multi-line error, or raises
    TypeError on a file holding one word, or says "No configuration found" for a missing file)."""
    if not path:
        return
    try:
        loaded = read_yaml_file(path)
    except ValueError as err:
        raise ConfigError(f"kubeconfig {err}") from None
    if not isinstance(loaded, dict):
        got = "an empty file" if loaded is None else describe(loaded)
        raise ConfigError(f"kubeconfig {path}: expected a mapping (clusters, contexts, users), got {got}")


class KubeApi:
    """Requests to one API server. Safe to share between threads (the pool is)."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        timeout: float = 30.0,
        agent: str | None = None,
        connections: int = 64,
        protobuf: bool = True,
    ) -> None:
        """``agent``: the User-Agent to send (default :func:`user_agent`; a helper process of
        the scheduler's sends the scheduler's own, so the server sees one caller).
        ``connections``: how many kept-alive connections the pool holds (the requests its
        caller makes at once: past it, each one opens and then discards a connection of its own,
        a TLS handshake each). ``protobuf``: send the kinds :mod:`rulesched.kube.protobuf`
        encodes (bindings, events) in Kubernetes' protobuf encoding, as client-go sends them
        (the server decodes it for less CPU than JSON); answers are asked for in JSON. A
        server that refuses it (415) gets JSON from then on."""
        agent = agent or user_agent()
        self.agent = agent
        configuration = k8s_client.Configuration()
        if kubeconfig:
            for path in kubeconfig.split(os.pathsep):  # (a KUBECONFIG-style list is merged)
                _check_kubeconfig(path)
        try:
            if kubeconfig:
                k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (k8s_config.ConfigException, OSError, ValueError, TypeError, AttributeError, KeyError) as err:
            # (the loader indexes what it reads without checking its shape: a context that
            # is a string, a list where a mapping belongs, raise TypeError or AttributeError)
            where = kubeconfig or "the in-cluster service account"
            problem = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ConfigError(f"cannot configure the Kubernetes client from {where}: {problem}") from None
        configuration.retries = False  # retries are ours: with backoff, and never for a binding
        hook = configuration.refresh_api_key_hook
        if hook is not None:  # the loaders re-apply the whole config before every request: once
            configuration.refresh_api_key_hook = _at_most_every(TOKEN_REFRESH_SECONDS, hook)  # a minute is plenty
        configuration.connection_pool_maxsize = connections
        if configuration.cert_file:  # (the CA not sent along: the server verifies less per request)
            configuration.cert_file = leaf_alone(configuration.cert_file)
        self.host = configuration.host
        self._configuration = configuration
        self._client = k8s_client.ApiClient(configuration)
        self._client.user_agent = agent
        self._timeout = timeout
        self._timeouts: dict[float | tuple[float, float], urllib3.Timeout] = {}
        self._transport = Transport(self._client.rest_client.pool_manager, configuration.host)
        self._headers = {"Accept": "application/json", "User-Agent": agent}
        self.observer: RequestObserver | None = None
        self._watches: set[WatchStream] = set()
        self._watch_lock = threading.Lock()
        self._watches_closed = False
        self.protobuf = protobuf

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    # --- requests ---------------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
        answer: bool = True,
    ) -> Any:
        """One request through the client's connection pool. The client's own request path
        (parameter sanitising, header building, content-type matching: ~110 us a request,
        half a binding's CPU) is skipped; its configuration (host, TLS, proxy) and its
        credentials (the token, refreshed through its hook) are the client's. ``answer``
        False: the answer is not read (None), and for a protobuf body it is asked for in
        protobuf, which the server encodes for less CPU than JSON (a refusal still says why)."""
        data, content_type = (None, content_type) if body is None else self.encode(body, content_type)
        headers = self._headers_for(data is not None, content_type, answer)
        started = time.perf_counter()
        try:
            raw = self._transport.request(
                method,
                path + ("?" + urlencode(query) if query else ""),
                data,
                headers,
                self._timeout_of(timeout or self._timeout),
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self._observe(method, "<error>", started)
            raise UnavailableError(f"{method} {path}: {err}") from None
        if raw.status >= 400:
            refusal = raw.data
            raw.release_conn()
            self._observe(method, str(raw.status), started)
            if self.refused_protobuf(raw.status, content_type):  # (not taken: again, as JSON)
                return self._call(method, path, query, body, "application/json", timeout, stream, answer)
            raise _error(method, path, raw.status, refusal)
        if stream:
            self._observe(method, str(raw.status), None)
            return raw
        data = raw.data
        raw.release_conn()
        self._observe(method, str(raw.status), started)
        if not answer:
            return None
        try:
            return _decode(data) if data else None
        except msgspec.DecodeError as err:
            raise KubeError(f"{method} {path}: {raw.status} with a body that is not JSON: {err}", raw.status) from None

    def encode(self, body: Any, content_type: str = "application/json") -> tuple[bytes, str]:
        """A request's body and its Content-Type: a JSON body of a kind
        :mod:`rulesched.kube.protobuf` encodes goes as protobuf (while :attr:`protobuf`), the
        rest as given."""
        if self.protobuf and content_type == "application/json" and isinstance(body, dict):
            try:
                return protobuf.encode(body), protobuf.CONTENT_TYPE
            except ValueError:
                pass  # (a kind or a field it does not encode: JSON)
        return _encode(body), content_type

    def refused_protobuf(self, status: int, content_type: str) -> bool:
        """A 415 to a protobuf body: the server (or a proxy before it) does not take protobuf;
        JSON from now on. True if so."""
        if status == 415 and content_type == protobuf.CONTENT_TYPE and self.protobuf:
            self.protobuf = False
            return True
        return False

    def _headers_for(self, body: bool, content_type: str = "application/json", answer: bool = True) -> dict[str, str]:
        headers = dict(self._headers)
        if body:
            headers["Content-Type"] = content_type
        if not answer and self.protobuf:
            # An answer not read is asked for in protobuf, which the server encodes for less CPU
            # than JSON (a pod's status patch or deletion answers with the whole pod), JSON where
            # it has none (custom resources), as client-go's Accept for built-in kinds.
            headers["Accept"] = protobuf.ACCEPT_UNREAD
        token = self._configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:  # (as the client's auth_settings: its only header credential; certificates are the pool's)
            headers["authorization"] = token
        return headers

    def channel(self) -> Channel | None:
        """A connection of its own from the client's pool, for requests sent now and answered
        later (:mod:`rulesched.kube.channel`); None through a proxy, whose manager hands out no
        connection, and under urllib3 1.x, whose connections answer with http.client's responses
        (use the blocking calls then)."""
        pool = self._transport.pool
        if pool is None or not URLLIB3_2:
            return None
        connection = pool._new_conn()  # (the pool's factory: its host, TLS and socket settings)
        connection.timeout = self._timeout  # (read timeout too: the pool would set it per request)

        def observe(method: str, code: str, seconds: float | None) -> None:
            observer = self.observer
            if observer is not None:
                observer(method, self.host, code, seconds)

        return Channel(
            connection, self._transport.prefix, self._headers_for, observe, _error, self.encode, self.refused_protobuf
        )

    def _timeout_of(self, timeout: float | tuple[float, float]) -> urllib3.Timeout:
        found = self._timeouts.get(timeout)
        if found is None:
            # (connect, read): by name, as Timeout's first positional parameter is the total. A
            # watch's (10, 330) read as a total of 10 s cut every quiet watch 10 s after it opened;
            # the test server's bookmark every second hid it, a real API server's every minute not.
            found = (
                urllib3.Timeout(connect=timeout[0], read=timeout[1])
                if isinstance(timeout, tuple)
                else urllib3.Timeout(total=timeout)
            )
            self._timeouts[timeout] = found
        return found

    def _observe(self, method: str, code: str, started: float | None) -> None:
        observer = self.observer
        if observer is not None:
            observer(method, self.host, code, None if started is None else time.perf_counter() - started)

    def list(self, resource: Resource, scope: Scope | None = None, timeout: float | None = None) -> Listed:
        query = scope.query() if scope is not None else {}
        found = self._call("GET", resource.path(scope.namespace if scope else None), query, timeout=timeout)
        return Listed(found.get("items") or [], str(found.get("metadata", {}).get("resourceVersion", "")))

    def watch(
        self, resource: Resource, resource_version: str, timeout_seconds: int = 300, scope: Scope | None = None
    ) -> WatchStream:
        """An open watch that starts after ``resource_version``: iterate it for (type, object),
        ADDED, MODIFIED, DELETED and BOOKMARK. Opening raises what the request met (410 Gone
        too); while iterating, a 410 in the stream raises GoneError, a broken stream (a reset,
        a cut) UnavailableError, and the server ending it ends the iteration. After
        :meth:`close_watches`, raises UnavailableError at once."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **(scope.query() if scope is not None else {}),
        }
        path = resource.path(scope.namespace if scope else None)
        if self._watches_closed:
            raise UnavailableError(f"watch {resource.plural}: watches are closed")
        raw = self._call("GET", path, query, timeout=(10.0, timeout_seconds + 30.0), stream=True)
        stream = WatchStream(raw, resource, self._watch_ended)
        with self._watch_lock:
            closed = self._watches_closed
            if not closed:
                self._watches.add(stream)
        if closed:  # closed while this one was opening
            stream.close()
            raw.release_conn()
            raise UnavailableError(f"watch {resource.plural}: watches are closed")
        return stream

    def _watch_ended(self, stream: WatchStream) -> None:
        with self._watch_lock:
            self._watches.discard(stream)

    def close_watches(self) -> None:
        """End every open watch and refuse new ones (shutdown): a thread blocked reading one
        gets UnavailableError now."""
        with self._watch_lock:
            self._watches_closed = True
            streams = list(self._watches)
        for stream in streams:
            stream.close()

    def get(self, resource: Resource, namespace: str | None, name: str, timeout: float | None = None) -> dict[str, Any]:
        found: dict[str, Any] = self._call("GET", resource.path(namespace, name), timeout=timeout)
        return found

    def create(self, resource: Resource, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self._call("POST", resource.path(namespace), body=body)
        return created

    def replace(
        self, resource: Resource, namespace: str | None, name: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        """PUT: fails with ConflictError when body's resourceVersion is not the current one."""
        replaced: dict[str, Any] = self._call("PUT", resource.path(namespace, name), body=body, timeout=timeout)
        return replaced

    def replace_status(
        self, resource: Resource, namespace: str | None, name: str, body: dict[str, Any], timeout: float | None = None
    ) -> dict[str, Any]:
        """PUT of the ``status`` subresource (metadata changes are not kept there): ConflictError
        when body's resourceVersion is not the current one."""
        replaced: dict[str, Any] = self._call(
            "PUT", resource.path(namespace, name, "status"), body=body, timeout=timeout
        )
        return replaced

    def delete(self, resource: Resource, namespace: str | None, name: str, uid: str = "") -> None:
        """DELETE; ``uid``: only that object (a precondition: ConflictError when the name is
        another's now)."""
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        self._call("DELETE", resource.path(namespace, name), body=body, answer=False)

    # --- what the scheduler writes --------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None) -> None:
        """POST pods/binding (ConflictError: already bound)."""
        body = binding_body(namespace, name, uid, node)
        self._call("POST", PODS.path(namespace, name, "binding"), body=body, timeout=timeout, answer=False)

    def evict(self, namespace: str, name: str) -> None:
        """POST pods/eviction (TooManyRequestsError: a PodDisruptionBudget forbids it now)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self._call("POST", PODS.path(namespace, name, "eviction"), body=body, answer=False)

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        timeout: float | None = None,
        strategic: bool = False,
    ) -> None:
        """A JSON merge patch (``None`` removes a field): the scheduler's volume choices; with
        ``strategic`` a strategic merge patch (an event's series)."""
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        self._call(
            "PATCH",
            resource.path(namespace, name),
            body=patch,
            content_type=f"application/{kind}+json",
            timeout=timeout,
            answer=False,
        )

    def patch_status(
        self, resource: Resource, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False
    ) -> None:
        """A JSON merge patch of an object's ``status`` subresource (a PodGroup's); ``strategic``:
        a strategic merge patch (built-in kinds: the workload API's PodGroup, whose conditions
        merge by type, as kube-scheduler patches them)."""
        kind = "strategic-merge-patch" if strategic else "merge-patch"
        self._call(
            "PATCH",
            resource.path(namespace, name, "status"),
            body=patch,
            content_type=f"application/{kind}+json",
            answer=False,
        )

    def served_versions(self, group: str) -> tuple[str, ...]:
        """The versions of an API group the server serves (discovery), preferred first; () when
        it serves none."""
        try:
            found = self._call("GET", f"/apis/{quote(group, safe='.')}")
        except KubeError as err:
            if err.status == 404:
                return ()
            raise
        versions = [str(v.get("version", "")) for v in (found or {}).get("versions", []) if isinstance(v, dict)]
        return tuple(v for v in versions if v)

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False) -> None:
        """A JSON merge patch of the pod's status (lists replaced whole), or with ``strategic`` a
        strategic merge patch, as kube-scheduler's PatchPodStatus sends: ``status.conditions``
        entries merge by ``type``, so the pod's other conditions stay."""
        kind = "application/strategic-merge-patch+json" if strategic else "application/merge-patch+json"
        self._call("PATCH", PODS.path(namespace, name, "status"), body=patch, content_type=kind, answer=False)

    def post_event(
        self,
        regarding: dict[str, str],
        type_: str,
        reason: str,
        action: str,
        note: str,
        by: str,
        related: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        name: str | None = None,
        series: dict[str, Any] | None = None,
    ) -> None:
        """An events.k8s.io/v1 Event about ``regarding`` (kind, apiVersion, namespace, name, uid),
        naming ``related`` too if given (a victim's Preempted event: its preemptor), with
        ``annotations`` on its metadata, posted as ``name`` if given (else client-go's name for
        it), with ``series`` if given (a series whose first event is gone); a connection failure
        is retried a few times, as client-go's event broadcaster does."""
        body = event_body(regarding, type_, reason, action, note, by, related)
        if annotations:
            body["metadata"]["annotations"] = dict(annotations)
        if name:
            body["metadata"]["name"] = name
        if series:
            body["series"] = series
        namespace = body["metadata"]["namespace"]
        for attempt in range(EVENT_ATTEMPTS):
            try:
                self._call("POST", EVENTS.path(namespace), body=body, answer=False)
                return
            except UnavailableError:
                if attempt == EVENT_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * 2**attempt)

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        """A strategic merge patch of an event (its ``series``, as client-go's broadcaster
        patches a repeated event); False if the event is gone."""
        try:
            self.patch(EVENTS, namespace, name, patch, strategic=True)
        except NotFoundError:
            return False
        return True


_decode = msgspec.json.Decoder().decode  # (3 us a pod where json.loads takes 8)
_encode = msgspec.json.Encoder().encode


class WatchStream:
    """One open watch response: iterate for (type, object); :meth:`close` from any thread."""

    def __init__(self, raw: Any, resource: Resource, ended: Any) -> None:
        self._raw, self.resource, self._ended = raw, resource, ended
        self.closed = False

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        raw, resource = self._raw, self.resource
        try:
            buffer = b""
            for chunk in raw.stream(65536, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = _decode(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise _error("WATCH", resource.path(), code or 500, json.dumps(obj).encode())
                    yield str(kind), obj
            if self.closed:
                raise UnavailableError(f"watch {resource.plural}: closed")
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError) as err:
            # (ValueError: reading a response closed under it, or a line that is not JSON;
            # AttributeError: urllib3 1.26.0, the lock's floor, reads on after http.client has
            # dropped the socket of a chunked response the server ended)
            raise UnavailableError(f"watch {resource.plural}: {'closed' if self.closed else err}") from None
        finally:
            raw.release_conn()
            self._ended(self)

    def close(self) -> None:
        """End the stream: a read blocked on it in another thread returns (shutting the socket
        down wakes it; closing alone would not)."""
        self.closed = True
        shutdown = getattr(self._raw, "shutdown", None)  # urllib3 >= 2.3
        try:
            if shutdown is not None:
                shutdown()
            else:
                self._raw.close()
        except (OSError, ValueError, RuntimeError):
            pass  # already released or closed


def _error(method: str, path: str, status: int, data: bytes) -> KubeError:
    in_protobuf = protobuf.status_message(data)  # (the Status of a request that asked for protobuf)
    try:
        message = in_protobuf[0] if in_protobuf else json.loads(data).get("message") or ""
    except (ValueError, AttributeError):
        message = data[:200].decode("utf-8", "replace")
    text = f"{method} {path}: {status} {message}".rstrip()
    if status == 404:
        return NotFoundError(text, status)
    if status == 409:
        return ConflictError(text, status)
    if status == 410:
        return GoneError(text, status)
    if status == 429:
        return TooManyRequestsError(text, status)
    if status >= 500:
        return UnavailableError(text, status)
    return KubeError(text, status)
