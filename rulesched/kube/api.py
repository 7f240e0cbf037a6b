"""The Kubernetes API behind one thin adapter: the only module that imports the client library.

The official ``kubernetes`` client does the transport: configuration (a kubeconfig file, or the
pod's service account in a cluster), authentication, TLS and the urllib3 connection pool. This
module asks it for raw responses and decodes the JSON itself, since rulesched decodes API objects
into its own model (:mod:`rulesched.model.decode`) and the client's generated classes would only
be thrown away. Failures become the small error tree of :mod:`rulesched.errors`:

    KubeError                   anything the API server refused, or could not be reached for
    ├── ConflictError           409: a binding to a pod already bound, a stale resourceVersion
    ├── GoneError               410: a watch's resourceVersion is too old (relist)
    ├── NotFoundError           404
    ├── TooManyRequestsError    429: an eviction a PodDisruptionBudget forbids, or throttling
    └── UnavailableError        5xx, or the connection failed or was cut: retry with backoff

Next stage: :mod:`rulesched.kube.informer` lists and watches with :meth:`KubeApi.list` and
:meth:`KubeApi.watch`.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

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


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API."""

    kind: str
    prefix: str  # /api/v1, /apis/policy/v1, ...
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        """The URL path, every variable part checked as the API server would check it and
        percent-escaped: a name such as ``p?watch=1`` must never turn a read into a watch."""
        parts = [self.prefix]
        if namespace is not None and self.namespaced:
            parts += ["namespaces", quote(checked_namespace(namespace), safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(checked_name(name, self.kind), safe=""))
        if sub is not None:
            parts.append(quote(sub, safe=""))
        return "/".join(parts)


MAX_NAME = 253  # a DNS subdomain: the longest name of every kind rulesched addresses by name
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def checked_namespace(namespace: str) -> str:
    """A namespace name as the API server accepts it (a DNS label), else KubeError (400)."""
    if len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace):
        raise KubeError(f"namespace {namespace[:70]!r} is not a valid namespace name (a DNS-1123 label)", 400)
    return namespace


def checked_name(name: str, kind: str = "object") -> str:
    """A name that can stand in a URL path (apimachinery's ValidatePathSegmentName: not empty,
    not ``.`` or ``..``, no ``/`` or ``%``; at most 253 characters), else KubeError (400)."""
    if not name or name in (".", "..") or "/" in name or "%" in name or len(name) > MAX_NAME:
        raise KubeError(f"{kind} name {name[:70]!r} cannot be addressed (empty, '.', '..', '/', '%' or too long)", 400)
    return name


@dataclass(frozen=True)
class Scope:
    """Which objects of a kind a list or watch covers: one namespace, one name (a field
    selector on ``metadata.name``, as for a single ConfigMap)."""

    namespace: str | None = None
    name: str | None = None

    def query(self) -> dict[str, str]:
        return {"fieldSelector": f"metadata.name={self.name}"} if self.name else {}


NODES = Resource("Node", "/api/v1", "nodes", False)
PODS = Resource("Pod", "/api/v1", "pods", True)
NAMESPACES = Resource("Namespace", "/api/v1", "namespaces", False)
CONFIGMAPS = Resource("ConfigMap", "/api/v1", "configmaps", True)
PDBS = Resource("PodDisruptionBudget", "/apis/policy/v1", "poddisruptionbudgets", True)
PRIORITY_CLASSES = Resource("PriorityClass", "/apis/scheduling.k8s.io/v1", "priorityclasses", False)
LEASES = Resource("Lease", "/apis/coordination.k8s.io/v1", "leases", True)
EVENTS = Resource("Event", "/apis/events.k8s.io/v1", "events", True)
# read for their selectors (system default topology spreading)
SERVICES = Resource("Service", "/api/v1", "services", True)
REPLICATION_CONTROLLERS = Resource("ReplicationController", "/api/v1", "replicationcontrollers", True)
REPLICA_SETS = Resource("ReplicaSet", "/apis/apps/v1", "replicasets", True)
STATEFUL_SETS = Resource("StatefulSet", "/apis/apps/v1", "statefulsets", True)
PVS = Resource("PersistentVolume", "/api/v1", "persistentvolumes", False)
PVCS = Resource("PersistentVolumeClaim", "/api/v1", "persistentvolumeclaims", True)
STORAGE_CLASSES = Resource("StorageClass", "/apis/storage.k8s.io/v1", "storageclasses", False)
CSINODES = Resource("CSINode", "/apis/storage.k8s.io/v1", "csinodes", False)


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


@dataclass(frozen=True)
class Listed:
    items: list[dict[str, Any]]
    resource_version: str


class KubeApi:
    """Requests to one API server. Safe to share between threads (the pool is)."""

    def __init__(self, kubeconfig: str | None = None, timeout: float = 30.0) -> None:
        configuration = k8s_client.Configuration()
        try:
            if kubeconfig:
                k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except (k8s_config.ConfigException, OSError, ValueError) as err:
            where = kubeconfig or "the in-cluster service account"
            raise ConfigError(f"cannot configure the Kubernetes client from {where}: {err}") from None
        configuration.retries = False  # retries are ours: with backoff, and never for a binding
        hook = configuration.refresh_api_key_hook
        if hook is not None:  # the loaders re-apply the whole config before every request: once
            configuration.refresh_api_key_hook = _at_most_every(TOKEN_REFRESH_SECONDS, hook)  # a minute is plenty
        configuration.connection_pool_maxsize = 64  # watches, binding workers, events at once
        self.host = configuration.host
        self._client = k8s_client.ApiClient(configuration)
        self._timeout = timeout

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
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        try:
            method, url, headers, body, post = self._client.param_serialize(
                method,
                path,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
                _host=self.host,  # (the configuration's own host property re-reads proxy settings every time)
            )
            response = self._client.call_api(
                method, url, headers, body, post, _request_timeout=timeout or self._timeout
            )
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise UnavailableError(f"{method} {path}: {err}") from None
        raw = response.response
        if response.status >= 400:
            data = raw.data
            raw.release_conn()
            raise _error(method, path, response.status, data)
        if stream:
            return raw
        data = raw.data
        raw.release_conn()
        return json.loads(data) if data else None

    def list(self, resource: Resource, scope: Scope | None = None) -> Listed:
        query = scope.query() if scope is not None else {}
        found = self._call("GET", resource.path(scope.namespace if scope else None), query)
        return Listed(found.get("items") or [], str(found.get("metadata", {}).get("resourceVersion", "")))

    def watch(
        self, resource: Resource, resource_version: str, timeout_seconds: int = 300, scope: Scope | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(type, object) from a watch that starts after ``resource_version``: ADDED, MODIFIED,
        DELETED and BOOKMARK. A 410 in the stream raises GoneError; the stream ending (the
        server's timeout, a cut connection) ends the iteration or raises UnavailableError."""
        query = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
            **(scope.query() if scope is not None else {}),
        }
        path = resource.path(scope.namespace if scope else None)
        raw = self._call("GET", path, query, timeout=(10.0, timeout_seconds + 30.0), stream=True)
        try:
            buffer = b""
            for chunk in raw.stream(65536, decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        code = int(obj.get("code") or 0)
                        raise _error("WATCH", resource.path(), code or 500, json.dumps(obj).encode())
                    yield str(kind), obj
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise UnavailableError(f"watch {resource.plural}: {err}") from None
        finally:
            raw.release_conn()

    def get(self, resource: Resource, namespace: str | None, name: str, timeout: float | None = None) -> dict[str, Any]:
        found: dict[str, Any] = self._call("GET", resource.path(namespace, name), timeout=timeout)
        return found

    def create(self, resource: Resource, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        created: dict[str, Any] = self._call("POST", resource.path(namespace), body=body)
        return created

    def replace(self, resource: Resource, namespace: str | None, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT: fails with ConflictError when body's resourceVersion is not the current one."""
        replaced: dict[str, Any] = self._call("PUT", resource.path(namespace, name), body=body)
        return replaced

    def delete(self, resource: Resource, namespace: str | None, name: str) -> None:
        self._call("DELETE", resource.path(namespace, name))

    # --- what the scheduler writes --------------------------------------------------------------
    def bind(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None) -> None:
        """POST pods/binding (ConflictError: already bound)."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self._call("POST", PODS.path(namespace, name, "binding"), body=body, timeout=timeout)

    def evict(self, namespace: str, name: str) -> None:
        """POST pods/eviction (TooManyRequestsError: a PodDisruptionBudget forbids it now)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self._call("POST", PODS.path(namespace, name, "eviction"), body=body)

    def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        timeout: float | None = None,
    ) -> None:
        """A JSON merge patch (``None`` removes a field): the scheduler's volume choices."""
        self._call(
            "PATCH",
            resource.path(namespace, name),
            body=patch,
            content_type="application/merge-patch+json",
            timeout=timeout,
        )

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._call(
            "PATCH", PODS.path(namespace, name, "status"), body=patch, content_type="application/merge-patch+json"
        )

    def post_event(self, regarding: dict[str, str], type_: str, reason: str, action: str, note: str, by: str) -> None:
        """An events.k8s.io/v1 Event about ``regarding`` (kind, apiVersion, namespace, name, uid);
        a connection failure is retried a few times, as client-go's event broadcaster does."""
        namespace = regarding.get("namespace") or "default"
        name = regarding.get("name") or "object"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": by,
            "reportingInstance": by,
            "action": action,
            "reason": reason,
            "type": type_,
            "note": note[:1024],
            "regarding": regarding,
        }
        for attempt in range(EVENT_ATTEMPTS):
            try:
                self.create(EVENTS, namespace, body)
                return
            except UnavailableError:
                if attempt == EVENT_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * 2**attempt)


def _error(method: str, path: str, status: int, data: bytes) -> KubeError:
    try:
        message = json.loads(data).get("message") or ""
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
