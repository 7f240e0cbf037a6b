"""The live explain endpoint: ``GET /debug/explain?pod=NS/NAME`` and ``POST /debug/explain`` (a
Pod's JSON: a pod not yet submitted), served on the ops port of ``rulesched run`` and by the
extender's server; ``rulesched explain --server URL`` asks it (:mod:`rulesched.authoring.why`).

Read-only and never in scheduling's way: the scheduler's thread (or the extender's worker) only
hands over its current :class:`rulesched.cluster.snapshot.Snapshot`, a constant-time step between
cycles (a snapshot stays as it was for as long as it is held, the store copying what it then
changes); the evaluation (:func:`rulesched.scheduler.why.explain_pod`, on a private session) runs
on the HTTP request's own thread. Requests are rate-limited (a token bucket: ``per_second``,
``burst``) and one is evaluated at a time: more answer ``429`` with ``Retry-After``, as the API
server's priority and fairness does, so an explain storm costs one core at most.
Next stage: the HTTP servers that mount it (:mod:`rulesched.run.ops`, :mod:`rulesched.extender.server`).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError
from rulesched.lang import RuleSet
from rulesched.model import Pod, PriorityClass
from rulesched.model.decode import decode_pod
from rulesched.model.groups import PodGroup, decode_composite_pod_group, decode_pod_group
from rulesched.scheduler.fixes import BUDGET, fixes_json
from rulesched.scheduler.group_fixes import explain_group, group_json
from rulesched.scheduler.why import WhySettings, explain_pod, explanation_json, fix_pod
from rulesched.semantics.controllers import pods_of

log = logging.getLogger(__name__)

PATH = "/debug/explain"
MAX_BODY_BYTES = 1 << 20  # a Pod's JSON; larger is refused (413)
MAX_DETAILS = 50


@dataclass(frozen=True)
class ExplainLimits:
    per_second: float = 2.0
    burst: int = 5


@dataclass(frozen=True)
class LiveView:
    """What one request evaluates against: the current snapshot, the rule set for a pod (by
    its scheduler name; None: not served here) and the pending pod of a key (None: unknown)."""

    snapshot: Snapshot
    rules_for: Callable[[Pod], RuleSet | None]
    pending: Callable[[str], Pod | None]
    # the PriorityClasses known (a fix may raise a pod's priority to one of them)
    classes: Callable[[], Sequence[PriorityClass]] = lambda: ()
    # up to so many pending pods (what else a rule fix moves)
    others: Callable[[int], Sequence[Pod]] = lambda limit: ()


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


class ExplainService:
    """Answers explain requests; ``view()`` gives the current :class:`LiveView` (it may wait,
    briefly, for the scheduler's thread to hand a snapshot over; None: not available now)."""

    def __init__(
        self,
        view: Callable[[], LiveView | None],
        limits: ExplainLimits = ExplainLimits(),
        group: Callable[[Pod], dict[str, Any] | None] | None = None,
    ) -> None:
        self._view = view
        # a pod group member's group as the scheduler's last attempt left it (rulesched run)
        self._group = group
        self._limits = limits
        self._tokens = float(limits.burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._busy = threading.Lock()
        self.served = 0
        self.refused = 0

    def _take_token(self) -> float:
        """0 when a request may go ahead, else seconds until it may."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(float(self._limits.burst), self._tokens + (now - self._last) * self._limits.per_second)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return 0.0
            return (1 - self._tokens) / self._limits.per_second

    def handle(self, method: str, query: str, body: bytes, too_large: bool = False) -> Reply:
        if method not in ("GET", "POST"):
            return _error(405, f"{method} is not allowed: GET ?pod=NS/NAME or POST a Pod")
        if too_large or len(body) > MAX_BODY_BYTES:
            return _error(413, f"the pod is larger than {MAX_BODY_BYTES} bytes")
        wait = self._take_token()
        if wait or not self._busy.acquire(blocking=False):
            self.refused += 1
            retry = max(1, round(wait + 0.5))
            return _error(429, "too many explain requests; retry later", (("Retry-After", str(retry)),))
        try:
            return self._answer(method, urllib.parse.parse_qs(query), body)
        finally:
            self._busy.release()

    def _answer(self, method: str, query: dict[str, list[str]], body: bytes) -> Reply:
        view = self._view()
        if view is None:
            return _error(503, "no cluster snapshot yet (caches not synced)")
        try:
            pods, groups, name, created = self._subject(method, query, body, view)
            pod = pods[0]
            rules = view.rules_for(pod)
            if rules is None:
                return _error(404, f"pod {pod.key} names scheduler {pod.scheduler_name!r}, which is not served here")
            details = min(int(query.get("details", ["10"])[0]), MAX_DETAILS)
        except InputError as err:
            return _error(400, str(err))
        except ValueError:
            return _error(400, "details: not a whole number")
        except LookupError as err:
            return _error(404, str(err.args[0]))
        settings = WhySettings(detailed=details, nodes=tuple(query.get("node", [])))
        explained = explain_pod(pod, view.snapshot, rules, settings)
        answer = explanation_json(explained)
        fixes = query.get("fixes", ["1"])[0] not in ("0", "false")
        if len(pods) > 1 or groups:  # (the trials change a store of their own, made from the snapshot)
            store = ClusterStore.from_snapshot(view.snapshot)
            others = view.others(BUDGET.moves) if fixes else ()
            together = explain_group(
                pods, groups, store, rules, name, view.classes(), fixes=fixes, other_pending=others
            )
            answer["group_explanation"] = group_json(together) | {"created": list(created)}
        elif not explained.feasible and fixes:
            store = ClusterStore.from_snapshot(view.snapshot)
            found = fix_pod(pod, explained, store, rules, view.classes(), other_pending=view.others(BUDGET.moves))
            answer["fixes"] = fixes_json(found)
        group = self._group(pod) if self._group is not None else None
        if group is not None:
            answer["group"] = group
        answer["rules"] = [str(f) for f in rules.files]
        self.served += 1
        log.info("explained", extra={"pod": pod.key, "rules": rules.digest, "seconds": answer["seconds"]})
        return Reply(200, json.dumps(answer).encode(), (("Content-Type", "application/json"),))

    @staticmethod
    def _subject(
        method: str, query: dict[str, list[str]], body: bytes, view: LiveView
    ) -> tuple[list[Pod], list[PodGroup], str, list[str]]:
        """The pods asked about (the first explained node by node), their pod groups, what they
        are, and what they were made from (a posted List's controllers)."""
        if method == "POST":
            try:
                obj: Any = json.loads(body)
            except ValueError as err:
                raise InputError(f"request body: not JSON: {err}") from None
            if isinstance(obj, dict) and obj.get("kind") == "List":
                return _posted(obj, view)
            pod = decode_pod(obj, "request body")
            return [pod], [], f"pod {pod.key}", []
        return [ExplainService._pod(query, view)], [], "", []

    @staticmethod
    def _pod(query: dict[str, list[str]], view: LiveView) -> Pod:
        keys = query.get("pod", [])
        if len(keys) != 1:
            raise InputError("give one pod: ?pod=NS/NAME")
        key = keys[0] if "/" in keys[0] else f"default/{keys[0]}"
        pod = view.pending(key)
        if pod is None:
            raise LookupError(f"pod {key} is not pending in this scheduler's queue")
        return pod


def _posted(obj: dict[str, Any], view: LiveView) -> tuple[list[Pod], list[PodGroup], str, list[str]]:
    """A posted List: Pods and PodGroups as they are, the objects that make pods (Jobs, JobSets,
    Deployments, ReplicaSets, StatefulSets) as the pods their controllers would create."""
    items = obj.get("items")
    if not isinstance(items, list) or not items:
        raise InputError("request body: a List without items")
    classes = {c.name: c for c in view.classes()}
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    created: list[str] = []
    for i, item in enumerate(items):
        where = f"request body items[{i}]"
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind == "Pod":
            pods.append(decode_pod(item, where, classes))
        elif kind == "PodGroup":
            groups.append(decode_pod_group(item, where, classes))
        elif kind == "CompositePodGroup":
            groups.append(decode_composite_pod_group(item, where, classes))
        else:
            made = pods_of(str(kind), item, where)
            if made is None:
                raise InputError(f"{where}: kind {kind!r} makes no pods")
            label, made_pods, made_groups = made
            pods += [decode_pod(p, f"{where} ({label})", classes) for p in made_pods]
            groups += [decode_pod_group(g, f"{where} ({label})", classes) for g in made_groups]
            created.append(f"{label}: {len(made_pods)} pod(s)")
    if not pods:
        raise InputError("request body: no pod, and nothing that makes pods")
    roots = [g for g in groups if not g.parent]
    if len(roots) == 1:
        name = f"{roots[0].kind} {roots[0].ref}"
    elif len(created) == 1:
        name = created[0].split(":")[0]
    else:
        name = f"{len(pods)} pods"
    return pods, groups, name, created


def _error(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, json.dumps({"error": message}).encode(), (("Content-Type", "application/json"), *headers))


class SnapshotHandOff:
    """A snapshot asked for from any thread and taken by the thread that owns the store, between
    its cycles (:meth:`serve` there; ``wake`` makes it come round soon)."""

    def __init__(self, wake: Callable[[], None], timeout: float = 2.0) -> None:
        self._wake = wake
        self._timeout = timeout
        self._lock = threading.Lock()
        self._asked: list[tuple[threading.Event, list[Snapshot]]] = []

    def ask(self) -> Snapshot | None:
        done, box = threading.Event(), list[Snapshot]()
        with self._lock:
            self._asked.append((done, box))
        self._wake()
        if not done.wait(self._timeout):
            return None
        return box[0] if box else None

    def serve(self, take: Callable[[], Snapshot]) -> None:
        with self._lock:
            asked, self._asked = self._asked, []
        if asked:
            snapshot = take()
            for done, box in asked:
                box.append(snapshot)
                done.set()
