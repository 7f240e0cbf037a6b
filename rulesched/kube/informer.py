"""Informers: list, then watch from the list's resourceVersion, for one kind each, on a thread.

Each informer hands a stream of :class:`Delta` (ADDED, MODIFIED, DELETED, with the raw API
object) to a sink, which must be thread-safe (the scheduler's loop puts them on a queue and
applies them between cycles). As client-go's reflector does:

* a watch resumes from the last resourceVersion seen (bookmarks move it on without events);
* a watch that ends, whether the server closed it (its timeout, a restart) or the connection
  broke (a reset, a cut), is resumed at once: that is a watch's ordinary life, not a failure.
  Only the start of a new watch is paced, :data:`WATCH_FLOOR` after the previous one started,
  so a server that closes every watch at once is not asked again in a hot loop;
* a 410 Gone (the version is older than the server keeps) means a relist, and the relist is
  reconciled against what was delivered: objects that vanished meanwhile come as DELETED, the
  rest as ADDED or MODIFIED, so the consumer never holds a stale or duplicate object;
* failures (a list or a watch request refused or unanswered: connection errors, 5xx) are
  retried with exponential backoff and jitter up to 30 s; the delay starts afresh after a
  successful list or any event received (a bookmark too), so a single failure after hours of
  health waits the initial delay, not the last one. When no server answers at all, the
  informers on one API client back off together (:class:`Reachability`), logged once per step.

(client-go's reflector also resumes a closed watch at once, but counts a watch that ended
within a second without events as a failure and relists after a backoff; here it is only
paced by the floor, so frequent resets never delay new objects by more than that.)

:attr:`Informer.synced` is set once the first list has been delivered (readiness).
Next stage: the scheduler's loop decodes the objects into the store and the queue.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rulesched.errors import GoneError, KubeError, UnavailableError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import Resource, Scope

log = logging.getLogger(__name__)
WATCH_FLOOR = 0.1  # seconds between the starts of two watches of one informer, at least
OPTIONAL_RECHECK_SECONDS = 300.0  # an optional resource the server does not serve: asked again after


@dataclass(frozen=True)
class Delta:
    kind: str  # the resource's kind: Node, Pod, ...
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict[str, Any]

    @property
    def key(self) -> str:
        return object_key(self.obj)


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


class Backoff:
    """Exponential backoff with full jitter, as client-go's reflector backs off."""

    def __init__(self, initial: float = 0.2, maximum: float = 30.0, rng: random.Random | None = None) -> None:
        self.initial, self.maximum = initial, maximum
        self._next = initial
        self._rng = rng or random.Random()

    def next(self) -> float:
        delay = self._rng.uniform(self._next / 2, self._next)
        self._next = min(self.maximum, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.initial


class Reachability:
    """Whether the API server answers, as the informers sharing this find it. A request that
    got no answer at all (no connection: :class:`UnavailableError` without an HTTP status) is
    the server's failure, not one informer's: the informers then retry together on one backoff,
    and each step is one log line, "API server unreachable, retrying (attempt N, next in S s)",
    instead of a warning from each informer at each of its own retries. ``quiet`` (a one-shot
    command, which says it in its own one line) logs nothing; :attr:`attempt` and
    :attr:`last_error` tell it how things stand."""

    def __init__(self, backoff: Backoff | None = None, quiet: bool = False) -> None:
        self.quiet = quiet
        self.attempt = 0  # steps of the backoff since the server last answered
        self.last_error: KubeError | None = None
        self._backoff = backoff or Backoff()
        self._retry_at = 0.0  # (monotonic) when the informers of the current step retry
        self._lock = threading.Lock()

    def failed(self, err: KubeError) -> float:
        """Seconds to wait before retrying, after a request that reached no server: the first
        failure after the step's retry time starts the next step (and logs it), the others wait
        for the same time."""
        with self._lock:
            now = time.monotonic()
            self.last_error = err
            if now >= self._retry_at:
                self.attempt += 1
                delay = self._backoff.next()
                self._retry_at = now + delay
                if not self.quiet:
                    log.warning(
                        "API server unreachable, retrying (attempt %d, next in %.1f s)",
                        self.attempt,
                        delay,
                        extra={"error": str(err)},
                    )
            return self._retry_at - now

    def answered(self) -> None:
        """The server answered a request (any answer, an error status too)."""
        if not self.attempt:  # (the common case, on every event: no lock)
            return
        with self._lock:
            if self.attempt and not self.quiet:
                log.info("API server reachable again", extra={"attempts": self.attempt})
            self.attempt = 0
            self._retry_at = 0.0
            self._backoff.reset()


_SHARED: weakref.WeakKeyDictionary[KubeApi, Reachability] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def shared_reachability(api: KubeApi) -> Reachability:
    """The one :class:`Reachability` of the informers talking to ``api`` (a scheduler's caches and
    its rules' ConfigMap watch alike), so that an unreachable server is one line a step."""
    with _SHARED_LOCK:
        try:
            found = _SHARED.get(api)
            if found is None:
                found = _SHARED[api] = Reachability()
        except TypeError:  # (no client to share with: a cache fed by hand, in tests and tools)
            return Reachability()
        return found


class Informer:
    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        sink: Callable[[Delta], None],
        stop: threading.Event,
        watch_timeout: int = 300,
        backoff: Backoff | None = None,
        scope: Scope | None = None,
        reachability: Reachability | None = None,
    ) -> None:
        self.api, self.resource, self.sink, self.stop = api, resource, sink, stop
        self.scope = scope
        self.reachability = reachability or shared_reachability(api)
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff()
        self.synced = threading.Event()
        self.relists = 0
        self.errors = 0  # failures (backed off)
        self.resumes = 0  # watches that ended or broke and were resumed at once
        self._known: dict[str, str] = {}  # key -> resourceVersion delivered
        self._thread = threading.Thread(target=self._run, name=f"informer-{resource.plural}", daemon=True)

    def start(self) -> Informer:
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        version: str | None = None
        last_watch = -WATCH_FLOOR
        while not self.stop.is_set():
            try:
                if version is None:
                    version = self._relist()
                    self.backoff.reset()
                    self.reachability.answered()
                pause = last_watch + WATCH_FLOOR - time.monotonic()
                if pause > 0 and self.stop.wait(pause):
                    return
                last_watch = time.monotonic()
                stream = self.api.watch(self.resource, version, self.watch_timeout, self.scope)
                try:
                    for kind, obj in stream:
                        if self.stop.is_set():
                            return
                        self.backoff.reset()  # the server answers: a later failure starts afresh
                        self.reachability.answered()
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if kind != "BOOKMARK":
                            self._deliver(kind, obj)
                except UnavailableError as err:  # the stream broke (a reset, a cut): resume at once
                    if self.stop.is_set():
                        return
                    self.resumes += 1
                    log.debug("%s watch ended: %s; resuming", self.resource.plural, err)
                else:
                    self.resumes += 1  # the server ended it (its timeout): resume at once
            except GoneError:
                log.debug("watch of %s expired; relisting", self.resource.plural)
                version = None
            except KubeError as err:
                if self.stop.is_set():
                    return
                if err.status == 404 and self.resource.optional:
                    # not served (an older server, an API off): there are none; ask again later
                    if not self.synced.is_set():
                        log.info("%s: not served by the API server; none assumed", self.resource.plural)
                        self.synced.set()
                    self.reachability.answered()
                    self.stop.wait(OPTIONAL_RECHECK_SECONDS)
                    version = None
                    continue
                self.errors += 1
                if isinstance(err, UnavailableError) and not err.status:  # no server answered
                    self.stop.wait(self.reachability.failed(err))
                    continue
                self.reachability.answered()
                delay = self.backoff.next()
                log.warning("%s informer: %s; retrying in %.1fs", self.resource.plural, err, delay)
                self.stop.wait(delay)
            except Exception:  # noqa: BLE001 - an informer must not die; the loop retries
                self.errors += 1
                log.exception("%s informer failed; retrying", self.resource.plural)
                self.stop.wait(self.backoff.next())

    def _relist(self) -> str:
        listed = self.api.list(self.resource, self.scope)
        self.relists += 1
        seen = set()
        for obj in listed.items:
            obj.setdefault("kind", self.resource.kind)
            key = object_key(obj)
            seen.add(key)
            self._deliver("MODIFIED" if key in self._known else "ADDED", obj)
        for key in [k for k in self._known if k not in seen]:  # deleted while we were not watching
            namespace, _, name = key.rpartition("/")
            meta = {"name": name, **({"namespace": namespace} if namespace else {})}
            self._deliver("DELETED", {"kind": self.resource.kind, "metadata": meta})
        self.synced.set()
        return listed.resource_version

    def _deliver(self, kind: str, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "DELETED":
            if self._known.pop(key, None) is None:
                return  # never delivered: nothing to delete
        else:
            if self._known.get(key) == version and version:
                return  # the same version again (a relist): nothing new
            self._known[key] = version
        obj.setdefault("kind", self.resource.kind)
        obj.setdefault("apiVersion", self.resource.api_version)  # (list items carry neither)
        self.sink(Delta(self.resource.kind, kind, obj))
