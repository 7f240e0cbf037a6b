"""Preemption's evictions, on the pool of :mod:`rulesched.run.workers`: a mixin of
:class:`rulesched.run.workers.Workers`, apart so that module keeps to bindings and what users see.

As kube-scheduler's executor (prepareCandidate) each victim gets the DisruptionTarget condition
first (reason PreemptionByScheduler), then goes, here through the Eviction API so that
PodDisruptionBudgets hold; a 429 (a budget forbids it now) is retried every
``EVICTION_RETRY_SECONDS``, never fatal. The victims of one preemption are timed together
(scheduler_preemption_execution_duration_seconds).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rulesched.errors import KubeError, NotFoundError, TooManyRequestsError
from rulesched.kube.api import KubeApi
from rulesched.model import DISRUPTION_TARGET, PREEMPTED_CONDITION, PREEMPTION_BY_SCHEDULER, Pod
from rulesched.model.groups import PodGroup

log = logging.getLogger("rulesched.run.workers")  # (one logger for the pool's lines)
EVICTION_RETRY_SECONDS = 5.0


@dataclass
class PreemptionExecution:
    """One preemption's evictions under way (see :meth:`EvictionsMixin.evict`)."""

    kind: str  # the preemptor's: pod, podgroup, compositepodgroup
    started: float
    pending: int = 0
    failed: bool = False


class EvictionsMixin:
    """Evictions for :class:`rulesched.run.workers.Workers`; the attributes below are its."""

    api: KubeApi
    _lock: threading.Lock
    _executions: dict[str, PreemptionExecution]
    executed: Callable[[str, str, float], None]

    def _submit(self, fn: Callable[..., object], *args: Any) -> None:
        raise NotImplementedError

    def _fenced(self, what: str, pod: Any, node: str = "") -> bool:
        raise NotImplementedError

    def _event(
        self,
        pod: Any,
        type_: str,
        reason: str,
        action: str,
        note: str,
        related: Any = None,
        related_ref: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        raise NotImplementedError

    def evict(self, victim: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        """Evict ``victim`` for ``preemptor`` (or its ``group``). The victims of one preemption
        are timed together, as kube-scheduler's executor times its candidate's
        (scheduler_preemption_execution_duration_seconds): from the first handed here until the
        last is evicted or given up. (The scheduler hands a preemption's victims over in one
        go, microseconds apart; each eviction is two API calls.)"""
        kind = "pod" if group is None else ("compositepodgroup" if group.composite else "podgroup")
        key = f"{kind}/{preemptor.key if group is None else group.key}"
        with self._lock:
            execution = self._executions.get(key)
            if execution is None:
                execution = self._executions[key] = PreemptionExecution(kind, time.monotonic())
            execution.pending += 1
        self._submit(self._evict, victim, preemptor, 0, group, key)

    def _evict(
        self, victim: Pod, preemptor: Pod, attempt: int, group: PodGroup | None = None, execution: str = ""
    ) -> None:
        result: str | None = "error"  # "success", "error", or None: retried later
        try:
            result = self._evict_once(victim, preemptor, attempt, group, execution)
        finally:
            if result is not None and execution:
                self._executed(execution, result)

    def _executed(self, key: str, result: str) -> None:
        with self._lock:
            execution = self._executions.get(key)
            if execution is None:
                return
            execution.pending -= 1
            execution.failed = execution.failed or result != "success"
            if execution.pending > 0:
                return
            del self._executions[key]
        seconds = time.monotonic() - execution.started
        self.executed(execution.kind, "error" if execution.failed else "success", seconds)

    def _evict_once(
        self, victim: Pod, preemptor: Pod, attempt: int, group: PodGroup | None, execution: str
    ) -> str | None:
        """As kube-scheduler's prepareCandidate: the victim's DisruptionTarget condition first
        (reason PreemptionByScheduler), then its removal (here through the Eviction API, so
        PodDisruptionBudgets hold), then the Preempted event naming the preemptor as related:
        the pod, or for workload-aware preemption its PodGroup (or CompositePodGroup), as
        kube-scheduler's executor names a podGroupExecutorPreemptor. Returns how it ended
        (None: it is retried later)."""
        if self._fenced("eviction", victim, victim.node_name or ""):
            return "error"  # (not retried: a later leader preempts anew if it must)
        try:
            kind = "pod" if group is None else ("compositepodgroup" if group.composite else "podgroup")
            patch = _preempted_status(preemptor, kind)
            self.api.patch_pod_status(victim.namespace, victim.name, patch, strategic=True)
            self.api.evict(victim.namespace, victim.name)
            log.info("evicted", extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key})
            uid = preemptor.uid if group is None else group.uid
            # (a group's candidate is the whole cluster: PodGroupEvaluator.Preempt names it "cluster")
            where = victim.node_name if group is None else "cluster"
            self._event(
                victim,
                "Normal",
                "Preempted",
                "Preempting",
                f"Preempted by {kind} {uid} on node {where}",
                related=preemptor,
                related_ref=None if group is None else _group_reference(group),
            )
        except NotFoundError:
            return "success"  # gone already
        except (TooManyRequestsError, KubeError) as err:
            if attempt >= 20:
                log.warning(
                    "eviction given up: %s",
                    err,
                    extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key},
                )
                return "error"
            log.info(
                "eviction refused (%s); retrying in %gs",
                err,
                EVICTION_RETRY_SECONDS,
                extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key},
            )
            timer = threading.Timer(
                EVICTION_RETRY_SECONDS, self._submit, (self._evict, victim, preemptor, attempt + 1, group, execution)
            )
            timer.daemon = True
            timer.start()
            return None
        return "success"


def _group_reference(group: PodGroup) -> dict[str, str]:
    """An ObjectReference to a workload API group (the Preempted event's related object)."""
    kind = "CompositePodGroup" if group.composite else "PodGroup"
    return {"kind": kind, "apiVersion": group.api, "namespace": group.namespace, "name": group.name, "uid": group.uid}


def _preempted_status(preemptor: Pod, kind: str = "pod") -> dict[str, Any]:
    """The status patch that marks a victim (strategic: its other conditions stay): upstream's
    DisruptionTarget condition, and rulesched's own, which the Eviction API leaves alone when it
    rewrites DisruptionTarget to EvictionByEvictionAPI, so rulesched still knows its victims
    while they terminate, after a restart or a change of leader too."""
    message = f"{preemptor.scheduler_name}: preempting to accommodate a higher priority {kind}"
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "status": {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": PREEMPTION_BY_SCHEDULER,
                    "message": message,
                    "lastTransitionTime": when,
                }
                for kind in (DISRUPTION_TARGET, PREEMPTED_CONDITION)
            ]
        }
    }
