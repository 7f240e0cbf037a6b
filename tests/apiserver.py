"""A Kubernetes API server for tests and benchmarks: real HTTP, real watch streams, faults on
demand.

It keeps objects of the kinds rulesched reads and writes (nodes, pods, namespaces,
PodDisruptionBudgets, PriorityClasses, Events, Leases, ConfigMaps, Services, ReplicaSets,
StatefulSets, ReplicationControllers, PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes, and wgpolicyk8s.io PolicyReports) with one resourceVersion counter, as etcd does, and serves:

* list (``GET /api/v1/pods``, namespaced or not) with ``metadata.resourceVersion``;
* watch (``?watch=1&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=S``): JSON lines,
  ADDED / MODIFIED / DELETED / BOOKMARK, and an ERROR event with a 410 Status when N is older
  than the history kept (``history`` events);
* create, get, replace (with resourceVersion preconditions: 409), merge-patch, strategic
  merge-patch (``status.conditions`` entries merge by ``type``, as the real server merges them)
  and delete;
* the ``binding`` (409 when already bound) and ``eviction`` (429 when a PodDisruptionBudget
  allows no disruption) subresources, and ``status`` patches. An eviction marks the pod as the
  real one does (condition ``DisruptionTarget``, reason ``EvictionByEvictionAPI``, replacing a
  condition of that type) before deleting it; with ``graceful_evictions`` the pod then stays,
  terminating (``deletionTimestamp`` set), until the test deletes it, as a kubelet's grace period
  keeps it. Every write (POST, PUT, PATCH, DELETE) is recorded in order in ``Store.writes``.

Every request is recorded as it came, method and path with its query (``store.requests``), for
tests of what a client asks: the verbs its RBAC must grant, no watch where a read was meant.

Faults, set through ``POST /_faults`` (JSON) or :meth:`TestApiServer.set_faults`: every watch
cut after ``cut_watches_every`` seconds (the stream ended cleanly), or reset after
``reset_watches_every`` seconds (an abrupt TCP reset mid-stream, as a load balancer or a dying
server gives: no final chunk, an RST), ``error_rate`` of requests answered 500/503,
``bind_conflict_rate`` of bindings answered 409, ``fail_bindings`` (pod keys whose first binding
is answered 500, once each), ``reset_bindings`` (pod keys whose first binding request gets its
connection reset, no answer, once each), ``slow_bindings`` (pod keys whose bindings are answered
``slow_seconds`` late, the other requests meanwhile answered as ever), ``slow_events`` (every
event created answered ``slow_seconds`` late), ``gone_on_resume`` (every watch that resumes
from a resourceVersion gets 410), ``delay`` seconds before every answer, ``bookmark_every``
seconds between bookmarks on a quiet watch (1 s here; a real server sends one about a minute),
``refuse_protobuf`` (a protobuf body answered 415, as from a server taking only JSON),
``close_connections`` (every answer says ``Connection: close`` and its connection is closed);
``POST /_restart`` closes every connection (a restart that keeps etcd).

Bodies are JSON, or Kubernetes' protobuf for the kinds rulesched sends so (bindings, events:
read with rulesched/kube/protobuf.py); ``Store.bodies`` records each one's Content-Type.

Every binding call is recorded in ``Store.binding_calls`` (:class:`BindingCall`): who made it
(the User-Agent), its answer, and who held each Lease at that moment, so tests can check that
no replica binds without the lease.

It also serves the ``metrics.k8s.io/v1beta1`` API metrics-server adds through the aggregation
layer: ``GET /apis/metrics.k8s.io/v1beta1/nodes`` lists the NodeMetrics set with
:meth:`TestApiServer.set_node_metrics` (read only, no watch, as the real API), and one node's by
name; fault ``metrics_unavailable`` answers 503 as the aggregator does while metrics-server is
down, ``metrics_delay`` delays only these answers.

Run it as a process: ``python -m tests.apiserver --port 0`` prints ``listening on PORT``.
"""

from __future__ import annotations

import argparse
import bisect
import copy
import json
import random
import re
import socket
import struct
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec

from rulesched.kube import protobuf

_encode = msgspec.json.Encoder().encode  # (a pod in 2 us where json.dumps takes 15: the benchmarks' server)

# plural -> (kind, group/version prefix, namespaced)
RESOURCES = {
    "nodes": ("Node", "/api/v1", False),
    "pods": ("Pod", "/api/v1", True),
    "namespaces": ("Namespace", "/api/v1", False),
    "configmaps": ("ConfigMap", "/api/v1", True),
    "events": ("Event", "/api/v1", True),
    "poddisruptionbudgets": ("PodDisruptionBudget", "/apis/policy/v1", True),
    "priorityclasses": ("PriorityClass", "/apis/scheduling.k8s.io/v1", False),
    "leases": ("Lease", "/apis/coordination.k8s.io/v1", True),
    "services": ("Service", "/api/v1", True),
    "replicationcontrollers": ("ReplicationController", "/api/v1", True),
    "replicasets": ("ReplicaSet", "/apis/apps/v1", True),
    "statefulsets": ("StatefulSet", "/apis/apps/v1", True),
    "persistentvolumes": ("PersistentVolume", "/api/v1", False),
    "persistentvolumeclaims": ("PersistentVolumeClaim", "/api/v1", True),
    "storageclasses": ("StorageClass", "/apis/storage.k8s.io/v1", False),
    "csinodes": ("CSINode", "/apis/storage.k8s.io/v1", False),
    "policyreports": ("PolicyReport", "/apis/wgpolicyk8s.io/v1alpha2", True),
    "podgroups": ("PodGroup", "/apis/scheduling.x-k8s.io/v1alpha1", True),
    # the workload API (1.37): its PodGroups kept apart from scheduler-plugins' of the same plural
    "podgroups.scheduling.k8s.io": ("PodGroup", "/apis/scheduling.k8s.io/v1beta1", True),
    "compositepodgroups": ("CompositePodGroup", "/apis/scheduling.k8s.io/v1alpha3", True),
    "deviceclasses": ("DeviceClass", "/apis/resource.k8s.io/v1", False),
    "devicetaintrules": ("DeviceTaintRule", "/apis/resource.k8s.io/v1", False),
    "resourceclaims": ("ResourceClaim", "/apis/resource.k8s.io/v1", True),
    "resourceclaimtemplates": ("ResourceClaimTemplate", "/apis/resource.k8s.io/v1", True),
    "resourceslices": ("ResourceSlice", "/apis/resource.k8s.io/v1", False),
}
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# plurals served under more than one API group: (prefix, plural) -> the store's name for them
SHARED_PLURALS = {("/apis/scheduling.k8s.io/v1beta1", "podgroups"): "podgroups.scheduling.k8s.io"}
# what discovery of /apis/<group> answers (the group's versions, preferred first)
GROUP_VERSIONS = {"scheduling.k8s.io": ["v1beta1", "v1alpha3", "v1"]}
WATCH_BATCH = 100  # watch events written at once, at most
PREFIX_OF = {"Event": ["/api/v1", "/apis/events.k8s.io/v1"]}
METRICS_NODES = "/apis/metrics.k8s.io/v1beta1/nodes"


@dataclass
class Faults:
    cut_watches_every: float = 0.0
    reset_watches_every: float = 0.0
    error_rate: float = 0.0
    bind_conflict_rate: float = 0.0
    fail_bindings: tuple[str, ...] = ()  # namespace/name: the first binding of each answered 500
    reset_bindings: tuple[str, ...] = ()  # namespace/name: the first binding of each gets an RST, no answer
    slow_bindings: tuple[str, ...] = ()  # namespace/name: each binding answered slow_seconds late
    slow_evictions: tuple[str, ...] = ()  # namespace/name: each eviction answered slow_seconds late
    # namespace/name: each eviction refused (429) as a budget refuses it, whatever the budget's status
    # (the API server's budget ahead of the status a scheduler's store has seen)
    refuse_evictions: tuple[str, ...] = ()
    slow_seconds: float = 1.0
    slow_events: bool = False  # each event answered slow_seconds late
    gone_on_resume: bool = False
    delay: float = 0.0
    seed: int = 0
    # (not a fault: evicted or deleted bound pods stay terminating until deleted with grace 0)
    graceful_evictions: bool = False
    bookmark_every: float = 1.0  # seconds between BOOKMARK events on a quiet watch (a real server: ~60)
    metrics_unavailable: bool = False  # metrics.k8s.io answers 503 (metrics-server down)
    metrics_delay: float = 0.0  # seconds before every metrics.k8s.io answer (a slow metrics-server)
    refuse_protobuf: bool = False  # protobuf bodies answered 415 (as a server or proxy taking only JSON)
    close_connections: bool = False  # every answer with Connection: close, its connection closed after it


@dataclass(frozen=True)
class BindingCall:
    """One binding request as the server saw it."""

    pod: str  # namespace/name
    node: str
    at: float  # time.monotonic()
    caller: str  # the User-Agent
    code: int  # the answer: 201, 409, 404
    holders: dict[str, str]  # Lease namespace/name -> spec.holderIdentity at that moment


@dataclass
class Store:
    """The objects, by plural then ``namespace/name`` (``name`` when cluster-scoped)."""

    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: {p: {} for p in RESOURCES})
    revision: int = 0
    # per plural, the latest changes: (rv, type, obj), oldest first; and the newest rv dropped
    changes: dict[str, list[tuple[int, str, dict[str, Any]]]] = field(
        default_factory=lambda: {p: [] for p in RESOURCES}
    )
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESOURCES, 0))
    history_size: int = 20_000
    changed: threading.Condition = field(default_factory=threading.Condition)
    # per plural, a condition on the same lock: a write wakes only the watches of its kind
    watchers: dict[str, threading.Condition] = field(default_factory=dict)
    bindings: int = 0  # successful binding calls, for tests
    binding_log: list[tuple[str, str, float]] = field(default_factory=list)  # (pod key, node, time)
    binding_calls: list[BindingCall] = field(default_factory=list)  # every call, successful or not
    evictions: list[str] = field(default_factory=list)
    # pods removed by a preemption: evicted, or deleted after their DisruptionTarget condition
    preempted: list[str] = field(default_factory=list)
    writes: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every write, in order
    created: dict[str, float] = field(default_factory=dict)  # pod key -> when created (monotonic)
    # pod key -> when a status patch first marked it PodScheduled=False (benchmarks: pods that stop fitting)
    marked: dict[str, float] = field(default_factory=dict)
    # every request as it came: (method, path with its query), for tests of what a client asks
    requests: list[tuple[str, str]] = field(default_factory=list)
    # (method, path, Content-Type) of every request with a body: which went as protobuf
    bodies: list[tuple[str, str, str]] = field(default_factory=list)
    node_metrics: dict[str, dict[str, Any]] = field(default_factory=dict)  # node name -> NodeMetrics

    def write(self, plural: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Record a change (``kind``: ADDED, MODIFIED, DELETED) under the next revision."""
        with self.changed:
            self.revision += 1
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.revision)
            key = _key(meta)
            if kind == "DELETED":
                self.objects[plural].pop(key, None)
            else:
                self.objects[plural][key] = obj
            changes = self.changes[plural]
            # Stored objects are never changed in place (every change writes a new one), so the
            # history can share them with the objects: no copy per write.
            changes.append((self.revision, kind, obj))
            if len(changes) > 2 * self.history_size:  # compaction, as etcd's
                self.dropped[plural] = changes[-self.history_size - 1][0]
                del changes[: -self.history_size]
            self.watchers_of(plural).notify_all()
            return obj

    def watchers_of(self, plural: str) -> threading.Condition:
        """The condition a watch of ``plural`` waits on (the caller holds ``changed``)."""
        found = self.watchers.get(plural)
        if found is None:
            found = self.watchers[plural] = threading.Condition(self.changed._lock)  # type: ignore[attr-defined]
        return found

    def since(self, plural: str, rv: int) -> list[tuple[int, str, dict[str, Any]]]:
        """The plural's changes after revision ``rv`` (the caller holds ``changed``)."""
        changes = self.changes[plural]
        return changes[bisect.bisect_right(changes, rv, key=lambda c: c[0]) :]

    @property
    def history(self) -> list[tuple[int, str, str, dict[str, Any]]]:
        """Every kept change, in order: (rv, plural, type, object)."""
        with self.changed:
            merged = [(rv, plural, kind, obj) for plural, changes in self.changes.items() for rv, kind, obj in changes]
        return sorted(merged, key=lambda c: c[0])


def _key(meta: dict[str, Any]) -> str:
    ns = meta.get("namespace")
    return f"{ns}/{meta['name']}" if ns else str(meta["name"])


def _selected_name(query: dict[str, list[str]]) -> str | None:
    """The name a ``fieldSelector=metadata.name=NAME`` asks for (the only selector supported)."""
    selector = query.get("fieldSelector", [""])[0]
    return selector.removeprefix("metadata.name=") if selector.startswith("metadata.name=") else None


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        if parsed:
            self.server.store.requests.append((self.command, self.path))
        return parsed

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm holds the body
        # until the client's delayed ACK of the headers (~40 ms a request on loopback).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # --- plumbing -----------------------------------------------------------------------------
    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = _encode(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.server.faults.close_connections:
            self.send_header("Connection", "close")
            self.close_connection = True
        # headers and body in one write (end_headers would write the headers alone)
        self._headers_buffer.extend((b"\r\n", data))  # type: ignore[attr-defined]
        self.flush_headers()

    def _body(self) -> Any:
        """The request's body: JSON, or Kubernetes' protobuf for the kinds rulesched sends so
        (rulesched/kube/protobuf.py; with ``refuse_protobuf`` none: :attr:`unsupported` is set
        and the caller answers 415)."""
        self.unsupported = False
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        kind = self.headers.get("Content-Type") or ""
        if data:
            with self.server.store.changed:
                self.server.store.bodies.append((self.command, urlsplit(self.path).path, kind))
        if kind.startswith(protobuf.CONTENT_TYPE):
            if self.server.faults.refuse_protobuf:
                self.unsupported = True
                return None
            return protobuf.decode(data)
        return json.loads(data or b"null") if length else None

    def _fault(self) -> bool:
        faults = self.server.faults
        if faults.delay:
            time.sleep(faults.delay)
        if faults.error_rate and self.server.rng.random() < faults.error_rate:
            code = self.server.rng.choice((500, 503))
            self._send(code, _status(code, "InternalError" if code == 500 else "ServiceUnavailable", "injected fault"))
            return True
        return False

    def _record(self) -> None:
        """A write, in the order the server received it (bench loads through /_bulk are not)."""
        store = self.server.store
        with store.changed:
            store.writes.append((self.command, urlsplit(self.path).path))

    def _route(self) -> tuple[str, str | None, str | None, str | None, dict[str, list[str]]] | None:
        """(plural, namespace, name, subresource, query) for a resource path."""
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        for prefix in (
            "/api/v1",
            "/apis/policy/v1",
            "/apis/scheduling.k8s.io/v1",
            "/apis/coordination.k8s.io/v1",
            "/apis/events.k8s.io/v1",
            "/apis/apps/v1",
            "/apis/storage.k8s.io/v1",
            "/apis/wgpolicyk8s.io/v1alpha2",
            "/apis/scheduling.x-k8s.io/v1alpha1",
            "/apis/scheduling.k8s.io/v1beta1",
            "/apis/scheduling.k8s.io/v1alpha3",
            "/apis/resource.k8s.io/v1",
        ):
            if url.path.startswith(prefix + "/"):
                parts = [unquote(part) for part in url.path[len(prefix) + 1 :].split("/")]  # as the API server
                break
        else:
            return None
        namespace = None
        if parts[0] == "namespaces" and len(parts) >= 3:
            namespace, parts = parts[1], parts[2:]
        plural = parts[0]
        plural = SHARED_PLURALS.get((prefix, plural), plural)
        if plural not in RESOURCES:
            return None
        kind, home, _ = RESOURCES[plural]
        if prefix != home and prefix not in PREFIX_OF.get(kind, ()) and home.startswith("/apis/scheduling"):
            return None  # (a plural of one scheduling API asked for under another)
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        return plural, namespace, name, sub, query

    # --- verbs --------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if urlsplit(self.path).path.startswith(METRICS_NODES):
            self._node_metrics(urlsplit(self.path).path[len(METRICS_NODES) :].strip("/"))
            return
        path = urlsplit(self.path).path
        if path.startswith("/apis/") and path.count("/") == 2 and path[len("/apis/") :] in GROUP_VERSIONS:
            versions = GROUP_VERSIONS[path[len("/apis/") :]]
            group = path[len("/apis/") :]
            body = {
                "kind": "APIGroup",
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
            }
            self._send(200, body)
            return
        route = self._route()
        if route is None:
            self._send(404, _status(404, "NotFound", self.path))
            return
        if self._fault():
            return
        plural, namespace, name, _, query = route
        store = self.server.store
        if name is not None:
            obj = store.objects[plural].get(f"{namespace}/{name}" if namespace else name)
            if obj is None:
                self._send(404, _status(404, "NotFound", f"{plural} {name} not found"))
            else:
                self._send(200, obj)
            return
        if query.get("watch", ["0"])[0] in ("1", "true"):
            self._watch(plural, namespace, query)
            return
        named = _selected_name(query)
        with store.changed:
            items = [
                o
                for k, o in store.objects[plural].items()
                if (namespace is None or k.startswith(namespace + "/")) and named in (None, o["metadata"].get("name"))
            ]
            body = {
                "kind": RESOURCES[plural][0] + "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": str(store.revision)},
                "items": list(items),  # encoded below, never changed
            }
        self._send(200, body)

    def _node_metrics(self, name: str) -> None:
        faults, store = self.server.faults, self.server.store
        if faults.metrics_delay:
            time.sleep(faults.metrics_delay)
        if faults.metrics_unavailable:
            message = "the server is currently unable to handle the request (get nodes.metrics.k8s.io)"
            self._send(503, _status(503, "ServiceUnavailable", message))
            return
        with store.changed:
            items = [copy.deepcopy(o) for o in store.node_metrics.values()]
        if name:
            found = next((o for o in items if o["metadata"]["name"] == name), None)
            if found is None:
                self._send(404, _status(404, "NotFound", f'nodemetrics.metrics.k8s.io "{name}" not found'))
            else:
                self._send(200, found)
            return
        body = {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}
        self._send(200, body)

    def _watch(self, plural: str, namespace: str | None, query: dict[str, list[str]]) -> None:
        store, faults = self.server.store, self.server.faults
        since = int(query.get("resourceVersion", ["0"])[0] or 0)
        bookmarks = query.get("allowWatchBookmarks", ["false"])[0] == "true"
        timeout = float(query.get("timeoutSeconds", ["300"])[0])
        named = _selected_name(query)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.server.track(self.connection)
        started = time.monotonic()
        cut = faults.cut_watches_every or faults.reset_watches_every
        reset = False
        try:
            if since and (faults.gone_on_resume or since < store.dropped[plural]):
                self._chunk({"type": "ERROR", "object": _status(410, "Expired", f"too old resource version: {since}")})
                return
            # From the version given (a list of the empty store says "0": everything since), else now
            position = since if query.get("resourceVersion", [""])[0] else store.revision
            last_bookmark = time.monotonic()
            while True:
                now = time.monotonic()
                if cut and now - started >= cut:
                    reset = bool(faults.reset_watches_every)
                    return
                if now - started >= timeout or self.server.stopping:
                    return
                with store.changed:
                    pending = store.since(plural, position)
                    if not pending:
                        store.watchers_of(plural).wait(0.2)
                        pending = store.since(plural, position)
                        if not pending:
                            position = max(position, store.revision)
                lines: list[bytes] = []
                for rv, kind, obj in pending:
                    position = rv
                    if namespace and obj["metadata"].get("namespace") != namespace:
                        continue
                    if named is not None and obj["metadata"].get("name") != named:
                        continue
                    lines.append(_encode({"type": kind, "object": obj}) + b"\n")
                for start in range(0, len(lines), WATCH_BATCH):  # (many events a write: one thread
                    self._chunks(lines[start : start + WATCH_BATCH])  # streams a burst as it comes)
                if bookmarks and time.monotonic() - last_bookmark > faults.bookmark_every:
                    last_bookmark = time.monotonic()
                    self._chunk(
                        {
                            "type": "BOOKMARK",
                            "object": {
                                "kind": RESOURCES[plural][0],
                                "apiVersion": "v1",
                                "metadata": {"resourceVersion": str(position)},
                            },
                        }
                    )
        except (BrokenPipeError, ConnectionResetError, OSError):
            return
        finally:
            self.close_connection = True
            if reset:
                self._reset()
            else:
                try:
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass

    def _reset(self) -> None:
        """Abort the connection: SO_LINGER 0 makes the close send an RST, not a FIN."""
        connection = self.connection
        try:
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.rfile.close()  # (its reference keeps the socket open otherwise)
            connection.close()
        except OSError:
            pass

    def _chunk(self, event: dict[str, Any]) -> None:
        self._chunks([_encode(event) + b"\n"])

    def _chunks(self, lines: list[bytes]) -> None:
        """Watch events, one JSON line each, in one HTTP chunk (a client reads lines, however
        they are chunked)."""
        data = b"".join(lines)
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802
        payload = self._body()  # read first: an answer that leaves it unread breaks the connection
        if self.unsupported:
            self._send(415, _status(415, "UnsupportedMediaType", "the body's media type is not supported"))
            return
        if self.path == "/_faults":
            self.server.set_faults(**(payload or {}))
            self._send(200, {"ok": True})
            return
        if self.path == "/_restart":
            self._send(200, {"ok": True})
            self.server.drop_connections()
            return
        if self.path == "/_bulk":  # benchmarks: many objects in one request
            plural, items = payload["plural"], payload["items"]
            store = self.server.store
            now = time.monotonic()
            for obj in items:
                meta = obj.setdefault("metadata", {})
                meta.setdefault("uid", str(uuid.uuid4()))
                if RESOURCES[plural][2]:
                    meta.setdefault("namespace", "default")
                obj.setdefault("kind", RESOURCES[plural][0])
                store.write(plural, "ADDED", obj)
                if plural == "pods":
                    store.created[_key(meta)] = now
            self._send(200, {"ok": True, "count": len(items)})
            return
        if self.path == "/_stats":  # benchmarks: what the server saw (``{"latencies": true}``: each pod's too)
            store = self.server.store
            with store.changed:
                bound = {k: when for k, _, when in store.binding_log}
                settled = [store.created[k] for k in (*bound, *store.marked) if k in store.created]
                body = {
                    "bindings": store.bindings,
                    "first_created": min(settled, default=0.0),  # (of the pods bound or marked)
                    "last_bound": max(bound.values(), default=0.0),
                    "bound_keys": len(bound),
                    "marked": len(store.marked),
                    "last_marked": max(store.marked.values(), default=0.0),
                    "revision": store.revision,
                }
                if (payload or {}).get("latencies"):  # creation to binding, each bound pod
                    body["latencies"] = [when - store.created[k] for k, when in bound.items() if k in store.created]
            self._send(200, body)
            return
        route = self._route()
        if route is None:
            self._send(404, _status(404, "NotFound", self.path))
            return
        if self._fault():
            return
        self._record()
        plural, namespace, name, sub, _ = route
        body = payload or {}
        store = self.server.store
        if sub == "binding":
            self._bind(namespace, name, body)
            return
        if sub == "eviction":
            self._evict(namespace, name)
            return
        if plural == "events" and self.server.faults.slow_events:
            time.sleep(self.server.faults.slow_seconds)
        meta = body.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            # As the real server validates it: a DNS subdomain once a trailing dash is masked
            # (apimachinery's NameIsDNSSubdomain with prefix): "p." is refused, "p-" is not.
            prefix = meta["generateName"]
            if not _DNS_SUBDOMAIN.fullmatch(prefix[:-1] + "a" if prefix.endswith("-") else prefix):
                self._send(422, _status(422, "Invalid", f"metadata.generateName: Invalid value: {prefix!r}"))
                return
            meta["name"] = prefix + uuid.uuid4().hex[:5]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        body.setdefault("kind", RESOURCES[plural][0])
        with store.changed:
            if _key(meta) in store.objects[plural]:
                self._send(409, _status(409, "AlreadyExists", f"{plural} {meta['name']} already exists"))
                return
            obj = store.write(plural, "ADDED", body)
            if plural == "pods":
                store.created[_key(meta)] = time.monotonic()
        self._send(201, obj)

    def _bind(self, namespace: str | None, name: str | None, body: dict[str, Any]) -> None:
        store, server = self.server.store, self.server
        target = (body.get("target") or {}).get("name")
        key = f"{namespace}/{name}"
        if key in server.faults.fail_bindings and key not in server.failed_bindings:
            server.failed_bindings.add(key)
            self._send(500, _status(500, "InternalError", "injected binding fault"))
            return
        if key in server.faults.reset_bindings and key not in server.failed_bindings:
            server.failed_bindings.add(key)
            self.close_connection = True
            self._reset()
            return
        if key in server.faults.slow_bindings:
            time.sleep(server.faults.slow_seconds)
        with store.changed:
            pod = store.objects["pods"].get(f"{namespace}/{name}")
            conflict = pod is not None and bool(
                pod.get("spec", {}).get("nodeName")
                or (server.faults.bind_conflict_rate and server.rng.random() < server.faults.bind_conflict_rate)
            )
            holders = {k: (o.get("spec") or {}).get("holderIdentity") or "" for k, o in store.objects["leases"].items()}
            caller = self.headers.get("User-Agent") or ""
            code = 404 if pod is None else 409 if conflict else 201
            call = BindingCall(f"{namespace}/{name}", str(target), time.monotonic(), caller, code, holders)
            store.binding_calls.append(call)
            if pod is None:
                self._send(404, _status(404, "NotFound", f"pods {name} not found"))
                return
            if conflict:
                self._send(
                    409,
                    _status(
                        409,
                        "Conflict",
                        f"pod {name} is already assigned to node {pod.get('spec', {}).get('nodeName', '')!r}",
                    ),
                )
                return
            pod = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": target}}  # (stored objects never change)
            store.write("pods", "MODIFIED", pod)
            store.bindings += 1
            store.binding_log.append((f"{namespace}/{name}", str(target), time.monotonic()))
        self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    def _evict(self, namespace: str | None, name: str | None) -> None:
        store = self.server.store
        if f"{namespace}/{name}" in self.server.faults.slow_evictions:  # (as the real one retrying its budget's update)
            time.sleep(self.server.faults.slow_seconds)
        with store.changed:
            pod = store.objects["pods"].get(f"{namespace}/{name}")
            if pod is None:
                self._send(404, _status(404, "NotFound", f"pods {name} not found"))
                return
            if f"{namespace}/{name}" in self.server.faults.refuse_evictions:
                refusal = "Cannot evict pod as it would violate the pod's disruption budget."
                self._send(429, _status(429, "TooManyRequests", refusal))
                return
            labels = pod.get("metadata", {}).get("labels") or {}
            for pdb in store.objects["poddisruptionbudgets"].values():
                if pdb["metadata"].get("namespace") != namespace:
                    continue
                wanted = (pdb.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
                if wanted and all(labels.get(k) == v for k, v in wanted.items()):
                    allowed = int((pdb.get("status") or {}).get("disruptionsAllowed", 0))
                    if allowed <= 0:
                        self._send(
                            429,
                            _status(
                                429,
                                "TooManyRequests",
                                "Cannot evict pod as it would violate the pod's disruption budget.",
                            ),
                        )
                        return
                    pdb = copy.deepcopy(pdb)
                    pdb.setdefault("status", {})["disruptionsAllowed"] = allowed - 1
                    store.write("poddisruptionbudgets", "MODIFIED", pdb)
            # as the registry's addConditionAndDeletePod (PodDisruptionConditions): the condition
            # replaces one of its type, then the pod is deleted
            pod = copy.deepcopy(pod)
            evicting = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
            _set_condition(pod, {**evicting, "message": "Eviction API: evicting"})
            if self.server.faults.graceful_evictions:
                pod["metadata"].setdefault("deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                pod["metadata"].setdefault("deletionGracePeriodSeconds", 30)
                store.write("pods", "MODIFIED", pod)
            else:
                store.write("pods", "DELETED", pod)
            store.evictions.append(f"{namespace}/{name}")
            store.preempted.append(f"{namespace}/{name}")
        self._send(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    def _existing(self) -> tuple[str, str | None, str, dict[str, Any]] | None:
        """For PUT, PATCH and DELETE of one object: (plural, namespace, name, the object as
        stored), or None once a 404 or a bad path has been answered. The caller holds the
        store's lock (and has injected its faults before taking it)."""
        route = self._route()
        if route is None or route[2] is None:
            self._send(404, _status(404, "NotFound", self.path))
            return None
        plural, namespace, name, _, _ = route
        current = self.server.store.objects[plural].get(f"{namespace}/{name}" if namespace else name)
        if current is None:
            self._send(404, _status(404, "NotFound", f"{plural} {name} not found"))
            return None
        return plural, namespace, name, current

    def do_PUT(self) -> None:  # noqa: N802
        body = self._body() or {}
        store = self.server.store
        if self._fault():
            return
        self._record()
        with store.changed:
            found = self._existing()
            if found is None:
                return
            plural, namespace, name, current = found
            wanted = body.get("metadata", {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                message = "the object has been modified; please apply your changes to the latest version and try again"
                self._send(409, _status(409, "Conflict", message))
                return
            meta = body.setdefault("metadata", {})
            meta.update({"name": name, "uid": current["metadata"].get("uid")})
            if namespace:
                meta["namespace"] = namespace
            obj = store.write(plural, "MODIFIED", body)
        self._send(200, obj)

    def do_PATCH(self) -> None:  # noqa: N802
        patch = self._body() or {}
        store = self.server.store
        if self._fault():
            return
        self._record()
        strategic = "strategic-merge-patch" in (self.headers.get("Content-Type") or "")
        with store.changed:
            found = self._existing()
            if found is None:
                return
            plural, _, _, current = found
            obj = store.write(plural, "MODIFIED", _merge(copy.deepcopy(current), patch, strategic))
            if plural == "pods" and any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in (patch.get("status") or {}).get("conditions") or ()
            ):
                store.marked.setdefault(_key(obj["metadata"]), time.monotonic())
        self._send(200, obj)

    def do_DELETE(self) -> None:  # noqa: N802
        body = self._body()
        store = self.server.store
        if self._fault():
            return
        self._record()
        with store.changed:
            found = self._existing()
            if found is None:
                return
            plural, namespace, name, current = found
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != current["metadata"].get("uid"):
                message = f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                self._send(409, _status(409, "Conflict", message + str(current["metadata"].get("uid"))))
                return
            if plural == "pods" and any(
                c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                for c in (current.get("status") or {}).get("conditions") or ()
            ):
                store.preempted.append(f"{namespace}/{name}")
            if plural == "pods" and self.server.faults.graceful_evictions and current["spec"].get("nodeName"):
                # (as the real server: a bound pod stays, terminating, until its kubelet removes it)
                current = copy.deepcopy(current)
                current["metadata"].setdefault("deletionTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                current["metadata"].setdefault("deletionGracePeriodSeconds", 30)
                store.write(plural, "MODIFIED", current)
            else:
                store.write(plural, "DELETED", {**current, "metadata": dict(current["metadata"])})
        self._send(200, current)


# Lists a strategic merge patch merges by a key (their patchMergeKey), rather than replacing.
MERGE_KEYS = {"conditions": "type"}


def _merge(target: dict[str, Any], patch: dict[str, Any], strategic: bool = False) -> dict[str, Any]:
    """JSON merge patch (RFC 7386): lists are replaced, None deletes. ``strategic``: the lists
    of MERGE_KEYS merge entry by entry on their key instead (what the fields rulesched patches
    need of a strategic merge patch)."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value, strategic)
        elif strategic and key in MERGE_KEYS and isinstance(value, list) and isinstance(target.get(key), list):
            for entry in value:
                _merge_entry(target[key], entry, MERGE_KEYS[key])
        else:
            target[key] = value
    return target


def _merge_entry(entries: list[dict[str, Any]], entry: dict[str, Any], key: str) -> None:
    for i, old in enumerate(entries):
        if old.get(key) == entry.get(key):
            entries[i] = {**old, **entry}
            return
    entries.append(entry)


def _set_condition(pod: dict[str, Any], condition: dict[str, Any]) -> None:
    """UpdatePodCondition: replace the pod's condition of that type, or add it."""
    status = pod.setdefault("status", {})
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        conditions = status["conditions"] = []
    for i, old in enumerate(conditions):
        if old.get("type") == condition["type"]:
            conditions[i] = condition
            return
    conditions.append(condition)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's default of 5 drops the SYNs of a client opening more
    # connections at once (sixteen binding connections), which then wait out TCP's one-second
    # retransmission; a real API server (Go's net.Listen) takes the kernel's somaxconn.
    request_queue_size = 4096
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.store = Store()
        self.faults = Faults()
        self.rng = random.Random(0)
        self.failed_bindings: set[str] = set()
        self.stopping = False
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    def set_faults(self, **settings: Any) -> None:
        self.faults = Faults(**settings)
        self.rng = random.Random(self.faults.seed)
        self.failed_bindings: set[str] = set()  # the fail_bindings already failed

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):  # (a client gone: its loss)
            super().handle_error(request, client_address)

    def track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.track(request)
        super().process_request(request, client_address)

    def drop_connections(self) -> None:
        """Close every open connection: what clients see when an API server restarts."""
        with self._lock:
            conns, self._connections = list(self._connections), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class TestApiServer:
    """The server on a thread of this process (tests), at ``url``."""

    __test__ = False  # not a pytest class

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(("127.0.0.1", port))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def store(self) -> Store:
        return self._server.store

    def set_faults(self, **settings: Any) -> None:
        self._server.set_faults(**settings)

    def restart(self) -> None:
        self._server.drop_connections()

    @property
    def connections(self) -> int:
        """Connections accepted (since the last :meth:`restart`)."""
        with self._server._lock:
            return len(self._server._connections)

    def add(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create an object directly (set-up)."""
        obj = copy.deepcopy(obj)
        obj.setdefault("kind", RESOURCES[plural][0])
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        if RESOURCES[plural][2]:
            meta.setdefault("namespace", "default")
        if plural == "pods":
            self.store.created[_key(meta)] = time.monotonic()
        return self.store.write(plural, "ADDED", obj)

    def update(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.store.write(plural, "MODIFIED", copy.deepcopy(obj))

    def delete(self, plural: str, key: str) -> None:
        obj = self.store.objects[plural].get(key)
        if obj is not None:
            self.store.write(plural, "DELETED", {**obj, "metadata": dict(obj["metadata"])})

    def set_node_metrics(self, name: str, cpu: str, memory: str, at: float | None = None, window: str = "20s") -> None:
        """What metrics-server measured on node ``name`` (``at``: seconds since the epoch, now
        by default)."""
        taken = time.time() if at is None else at
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(taken))
        obj = {
            "metadata": {"name": name, "creationTimestamp": stamp},
            "timestamp": stamp,
            "window": window,
            "usage": {"cpu": cpu, "memory": memory},
        }
        with self.store.changed:
            self.store.node_metrics[name] = obj

    def objects(self, plural: str) -> Iterator[dict[str, Any]]:
        with self.store.changed:
            return iter(list(self.store.objects[plural].values()))

    def stop(self) -> None:
        self._server.stopping = True
        self._server.shutdown()
        self._server.drop_connections()
        self._server.server_close()

    def kubeconfig(self, path: str) -> str:
        """Write a kubeconfig for this server to ``path``; returns the path."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {"token": "test-token"}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f)
        return path


def main() -> None:
    parser = argparse.ArgumentParser(description="a Kubernetes API server for tests and benchmarks")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    # Many threads (a watch each, a request each), one interpreter lock: switching between them
    # often keeps one answer from waiting behind another's 5 ms slices.
    sys.setswitchinterval(0.0005)
    server = TestApiServer(args.port)
    print(f"listening on {server.url.rsplit(':', 1)[1]}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
