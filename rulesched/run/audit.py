"""The live audit: the running pods of a cluster checked against the rules, published for
operators as PolicyReports and metrics; ``rulesched audit --live`` once, ``rulesched run
--audit-interval D`` every D seconds (on a thread of its own, from a snapshot the scheduler's
thread hands over between cycles: scheduling never waits for it).

The findings are :func:`rulesched.scheduler.audit.audit`'s. They are published as:

- one ``wgpolicyk8s.io/v1alpha2`` PolicyReport named ``rulesched`` per namespace with running
  pods audited (the report format Kyverno and Policy Reporter read): one result per violated
  filter (``result: fail``) and per audit-mode filter that would reject the pod (``warn``),
  the pod as its resource, the node, the best other node and the gain as properties, and a
  summary whose ``pass`` counts the namespace's pods that violate nothing. Written only by the
  leader (a standby's view may lag); results per report are capped at :data:`MAX_RESULTS`;
- gauges ``rulesched_audit_violations{rule}`` and ``rulesched_audit_shadow_rejections{rule}``
  (pods failing each filter on their node, as of the last audit) and the counter
  ``rulesched_audit_runs_total{result}`` (:class:`rulesched.run.ops.Metrics`).

:func:`read_cluster` is the one-off read ``audit --live`` makes: the informer cache, synced once.
Next stage: :mod:`rulesched.run.evict` (``audit --live --evict``) acts on the findings.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.errors import (
    ConflictError,
    InputError,
    KubeError,
    NotFoundError,
    TooManyRequestsError,
    UnavailableError,
)
from rulesched.kube.api import KubeApi
from rulesched.kube.informer import Delta, Reachability
from rulesched.kube.resources import POLICY_REPORTS
from rulesched.lang import RuleSet
from rulesched.mirror import Mirror
from rulesched.scheduler.audit import AuditReport, PodAudit, audit
from rulesched.scheduler.rebalance import Eviction

log = logging.getLogger(__name__)

REPORT_NAME = "rulesched"
MAX_RESULTS = 1000  # results per PolicyReport (a report is one object: etcd's 1.5 MiB bound)
SOURCE = "rulesched"


UNREACHABLE_ATTEMPTS = 4  # a one-shot command gives up after this many steps of backoff (about 1.5 s)


def read_cluster(api: KubeApi, timeout: float = 60.0) -> Snapshot:
    """The cluster as the informers list it (``audit --live``): synced once, then a snapshot.
    A one-shot command says in one line why it gives up: no server answering after
    :data:`UNREACHABLE_ATTEMPTS` tries (as kubectl says "connection refused" at once), or the
    lists not all in within ``timeout`` seconds; the informers' retries are not logged."""
    store = ClusterStore(assumed_ttl=None)
    inbox: queue.SimpleQueue[Delta] = queue.SimpleQueue()
    stop = threading.Event()
    reachability = Reachability(quiet=True)
    mirror = Mirror(api, store, inbox.put, stop, reachability=reachability)
    mirror.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            _drain(mirror, inbox)
            if mirror.synced:
                _drain(mirror, inbox)
                return store.snapshot()
            unreachable = reachability.attempt >= UNREACHABLE_ATTEMPTS
            if unreachable or time.monotonic() > deadline:
                error = reachability.last_error
                if error is not None and reachability.attempt:
                    raise UnavailableError(f"API server {api.host} unreachable ({reachability.attempt} tries): {error}")
                raise UnavailableError(f"the cluster was not listed within {timeout:g}s: {', '.join(mirror.waiting())}")
            time.sleep(0.05)
    finally:
        stop.set()
        api.close_watches()
        mirror.join(5.0)


def _drain(mirror: Mirror, inbox: queue.SimpleQueue[Delta]) -> None:
    while True:
        try:
            delta = inbox.get_nowait()
        except queue.Empty:
            return
        try:
            mirror.apply(delta, any_waiting_on_pods=False)
        except InputError as err:
            log.warning("skipping %s %s: %s", delta.kind, delta.key, err)


# --- PolicyReports -----------------------------------------------------------------------------------


def _result(p: PodAudit, rule: str, reasons: tuple[str, ...], result: str, seconds: int) -> dict[str, Any]:
    namespace, name = p.pod.split("/", 1)
    move = "fits no other node" if p.best is None else f"best other node {p.best} ({p.gain:+d})"
    message = f"{'fails' if result == 'fail' else 'audit-mode filter would reject it'} on {p.node}: "
    message += "; ".join(reasons) or "no reason given"
    properties = {"node": p.node}
    if result == "fail":
        message += f"; {move}" + (f"; moving it would break PDB {p.pdb}" if p.pdb else "")
        if p.best is not None:
            properties.update(best_node=p.best, gain=str(p.gain))
        if p.pdb is not None:
            properties["pdb"] = p.pdb
    return {
        "source": SOURCE,
        "policy": "rulesched",
        "rule": rule,
        "category": "scheduling",
        "result": result,
        "severity": "medium" if result == "fail" else "info",
        "scored": True,
        "message": message,
        "resources": [{"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}],
        "properties": properties,
        "timestamp": {"seconds": seconds, "nanos": 0},
    }


def policy_reports(report: AuditReport, audited: Mapping[str, int], now: float) -> dict[str, dict[str, Any]]:
    """Namespace -> its PolicyReport body; ``audited``: pods audited per namespace."""
    seconds = int(now)
    results: dict[str, list[dict[str, Any]]] = {ns: [] for ns in audited}
    failing: Counter[str] = Counter()
    for p in report.pods:
        namespace = p.pod.split("/", 1)[0]
        found = results.setdefault(namespace, [])
        found.extend(_result(p, v.rule, v.reasons, "fail", seconds) for v in p.violations)
        found.extend(_result(p, v.rule, v.reasons, "warn", seconds) for v in p.shadow)
        if p.violations:
            failing[namespace] += 1
    out = {}
    for namespace, found in sorted(results.items()):
        fails = sum(1 for r in found if r["result"] == "fail")
        out[namespace] = {
            "apiVersion": "wgpolicyk8s.io/v1alpha2",
            "kind": "PolicyReport",
            "metadata": {
                "name": REPORT_NAME,
                "namespace": namespace,
                "labels": {"app.kubernetes.io/managed-by": "rulesched"},
                "annotations": {"rulesched.io/rules": report.digest},
            },
            "summary": {
                "pass": max(0, audited.get(namespace, 0) - failing[namespace]),
                "fail": fails,
                "warn": len(found) - fails,
                "error": 0,
                "skip": 0,
            },
            "results": found[:MAX_RESULTS],
        }
    return out


def publish_reports(api: KubeApi, reports: Mapping[str, dict[str, Any]]) -> int:
    """Create or replace each namespace's report; the number written. A conflict (another
    writer in between) is retried once with the fresh resourceVersion."""
    written = 0
    for namespace, body in reports.items():
        for _ in range(2):
            try:
                current = api.get(POLICY_REPORTS, namespace, REPORT_NAME)
            except NotFoundError:
                api.create(POLICY_REPORTS, namespace, body)
                written += 1
                break
            replacing = {
                **body,
                "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]},
            }
            try:
                api.replace(POLICY_REPORTS, namespace, REPORT_NAME, replacing)
                written += 1
                break
            except ConflictError:
                continue
    return written


def evict(api: KubeApi, evictions: Sequence[Eviction]) -> list[tuple[Eviction, str]]:
    """Each planned eviction through the Eviction API: (eviction, outcome), the outcome
    ``evicted``, ``refused: ...`` (a 429: a budget the plan could not see) or ``gone``. A refusal
    is not retried in this run."""
    out = []
    for e in evictions:
        namespace, name = e.pod.split("/", 1)
        try:
            api.evict(namespace, name)
        except TooManyRequestsError as err:
            out.append((e, f"refused: {err}"))
            continue
        except NotFoundError:
            out.append((e, "gone"))
            continue
        log.info(
            "evicted: violates %s on its node; the rules place it on %s (%+d)",
            ", ".join(e.rules),
            e.best,
            e.gain,
            extra={"pod": e.pod, "node": e.node, "rule": ",".join(e.rules)},
        )
        out.append((e, "evicted"))
    return out


def audited_per_namespace(snapshot: Snapshot, scheduler_name: str | None) -> Counter[str]:
    return Counter(
        p.namespace
        for p in snapshot.pods()
        if p.node_name and not p.deleting and (scheduler_name is None or p.scheduler_name == scheduler_name)
    )


class PeriodicAudit:
    """``run --audit-interval``: audits every ``interval`` seconds on its own thread."""

    def __init__(
        self,
        api: KubeApi,
        interval: float,
        snapshot: Callable[[], Snapshot | None],
        profiles: Callable[[], Mapping[str, RuleSet]],
        record: Callable[[AuditReport | None], None],
        may_write: Callable[[], bool],
        stop: threading.Event,
    ) -> None:
        self.api, self.interval = api, interval
        self._snapshot, self._profiles, self._record, self._may_write = snapshot, profiles, record, may_write
        self.stop = stop
        self.runs = 0
        self._thread = threading.Thread(target=self._run, name="audit", daemon=True)

    def start(self) -> PeriodicAudit:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self.once()
            except KubeError as err:
                log.warning("audit: writing PolicyReports failed: %s", err)
                self._record(None)

    def once(self) -> AuditReport | None:
        """One audit of every profile's pods under its rules; published when leading."""
        snapshot = self._snapshot()
        if snapshot is None:
            return None
        merged: AuditReport | None = None
        audited: Counter[str] = Counter()
        for name, rules in self._profiles().items():
            report = audit(snapshot, rules, scheduler_name=name)
            audited.update(audited_per_namespace(snapshot, name))
            merged = report if merged is None else _merge(merged, report)
        self.runs += 1
        if merged is None:
            return None
        self._record(merged)
        if self._may_write():
            written = publish_reports(self.api, policy_reports(merged, audited, time.time()))
            log.info(
                "audit: %d pods, %d violating; %d PolicyReports written",
                merged.audited,
                len(merged.violating),
                written,
                extra={"rules": merged.digest},
            )
        return merged


def _merge(a: AuditReport, b: AuditReport) -> AuditReport:
    return AuditReport(a.audited + b.audited, a.pods + b.pods, f"{a.digest},{b.digest}", a.seconds + b.seconds)
