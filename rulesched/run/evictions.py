"""Preemption's evictions, on the pool of :mod:`rulesched.run.workers`: a mixin of
:class:`rulesched.run.workers.Workers`, apart so that module keeps to bindings and what users see.

As kube-scheduler's executor (prepareCandidate) each victim gets the DisruptionTarget condition
first (reason PreemptionByScheduler), then goes. How it goes is ``--evict-victims``
(:data:`EVICT_VICTIMS`): by default a victim some PodDisruptionBudget selects goes through the
Eviction API, so that its budget holds, and any other with a plain DELETE, as kube-scheduler
1.37 deletes every victim (whatever the budgets: they only order its candidates). For a victim no
budget selects the Eviction API does nothing more than the DELETE, at three times its requests
inside the API server (it reads the pod, lists the budgets, writes its own DisruptionTarget
condition, then deletes); and while the API server retries the evictions under a busy budget
(every 500 ms), the preemptor waits on all of its victims. Which budgets select a victim is read
from the store when the scheduler hands it over (a budget created after that is not seen: the
same window kube-scheduler has for every victim). The victims of one preemption are timed
together (scheduler_preemption_execution_duration_seconds).

An eviction a budget refuses (the Eviction API's 429, "would violate the pod's disruption
budget") is not retried: the refusal is reported to the scheduler at once (:class:`RemovalFailed`,
through ``removal_failed``), which tries the preemptor again and spares the victim from then on
(:mod:`rulesched.scheduler.removals`). At the first refusal, not after retries: the dry run chose
the victim from the budgets' status in the store, as upstream's does (preferring candidates that
violate no budget, taking one that does when none better is found); a 429 says that choice cannot
be carried out now (the store was behind the budget, or the candidate knowingly violated it), so
the preemptor decides anew on the cluster as it is, as kube-scheduler's executor activates its
preemptor when an API call fails. Retrying would evict the victim later, for a preemption its
preemptor may meanwhile have given up (another node, other victims), while the preemptor waited.
Any other failure (throttling's 429, a 5xx, the server unreachable) is retried every
``EVICTION_RETRY_SECONDS``, and reported the same way when given up after ``EVICTION_TRIES``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rulesched.errors import ConflictError, KubeError, NotFoundError, TooManyRequestsError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import PODS
from rulesched.model import DISRUPTION_TARGET, PREEMPTED_CONDITION, PREEMPTION_BY_SCHEDULER, Pod, PodDisruptionBudget
from rulesched.model.groups import PodGroup
from rulesched.semantics.disruption import covers

log = logging.getLogger("rulesched.run.workers")  # (one logger for the pool's lines)
EVICTION_RETRY_SECONDS = 5.0
EVICTION_TRIES = 21  # a removal failing otherwise is tried this often in all, then given up
# --evict-victims: which victims go through the Eviction API (the others: a plain DELETE)
BUDGETED, ALL, NONE = "budgeted", "all", "none"
EVICT_VICTIMS = (BUDGETED, ALL, NONE)


def through_eviction(mode: str, victim: Pod, pdbs: Sequence[PodDisruptionBudget]) -> bool:
    """Whether ``victim`` goes through the Eviction API under ``mode`` (:data:`EVICT_VICTIMS`):
    ``all``: every victim; ``none``: none (kube-scheduler's plain DELETE); ``budgeted``: those a
    budget of ``pdbs`` selects as the Eviction API finds them (its namespace's budgets whose
    selector matches the labels; in policy/v1 an empty selector selects every pod)."""
    if mode == BUDGETED:
        return any(covers(pdb, victim) for pdb in pdbs)
    return mode == ALL


def refused_by_budget(err: KubeError) -> bool:
    """Whether an eviction's failure is a PodDisruptionBudget's refusal (the Eviction API's 429,
    eviction.go checkAndDecrement: "Cannot evict pod as it would violate the pod's disruption
    budget."), not throttling (API Priority and Fairness answers 429 too)."""
    return isinstance(err, TooManyRequestsError) and "disruption budget" in str(err)


@dataclass(frozen=True)
class RemovalFailed:
    """A victim's removal failed, for the scheduler's thread
    (:meth:`rulesched.scheduler.removals.RemovalsMixin.removal_failed`)."""

    victim: str  # namespace/name
    preemptor: str  # the pod it was evicted for
    refused: bool  # a PodDisruptionBudget refused its eviction; else given up after retries
    reason: str


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
    removal_failed: Callable[[RemovalFailed], None]  # told of each failed removal (off the scheduler's thread)
    evict_victims: str  # one of EVICT_VICTIMS
    # the cluster's budgets now (the store's, read on the scheduler's thread, which hands victims over)
    budgets: Callable[[], Sequence[PodDisruptionBudget]]

    _removals: ThreadPoolExecutor  # the victims' own threads (their removal, not their events)
    # (uid or key) of the victims whose removal is under way here: from evict() until it succeeded
    # or was given up (see evict)
    _removing: set[str]

    def _submit(self, fn: Callable[..., object], *args: Any, pool: ThreadPoolExecutor | None = None) -> None:
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
        go, microseconds apart; each victim is two API calls.) Whether it goes through the
        Eviction API or a DELETE is decided here, on the caller's thread, from the budgets
        :attr:`budgets` gives now (:func:`through_eviction`).

        A victim whose removal is under way already (handed over by an earlier preemption, its
        DELETE or eviction not answered yet, or being retried) is not sent again: another
        preemptor may choose it while it is still in the store, as kube-scheduler's does, and
        kube-scheduler's executor then sends nothing for it once it sees it terminating
        (prepareCandidateAsync: ``victim.DeletionTimestamp != nil``; the scheduler skips those,
        :meth:`rulesched.scheduler.scheduler.Scheduler._nominate`). Here the window before the
        watch shows it terminating is covered too: its patch, DELETE and event were sent once."""
        kind = "pod" if group is None else ("compositepodgroup" if group.composite else "podgroup")
        key = f"{kind}/{preemptor.key if group is None else group.key}"
        removing = victim.uid or victim.key
        with self._lock:
            if removing in self._removing:
                log.debug("removal under way already", extra={"pod": victim.key, "preemptor": preemptor.key})
                return
            self._removing.add(removing)
        eviction = through_eviction(self.evict_victims, victim, self.budgets())
        with self._lock:
            execution = self._executions.get(key)
            if execution is None:
                execution = self._executions[key] = PreemptionExecution(kind, time.monotonic())
            execution.pending += 1
        self._submit(self._evict, victim, preemptor, 0, group, key, eviction, pool=self._removals)

    def removing(self, victim: Pod) -> bool:
        """Whether ``victim``'s removal is under way here (handed over, not yet over: its calls
        unanswered, or being retried; a failure is reported when it ends): the preemptor keeps
        waiting for it (:func:`rulesched.scheduler.removals.leaving`)."""
        with self._lock:
            return (victim.uid or victim.key) in self._removing

    def _evict(
        self,
        victim: Pod,
        preemptor: Pod,
        attempt: int,
        group: PodGroup | None = None,
        execution: str = "",
        eviction: bool = True,
    ) -> None:
        result: str | None = "error"  # "success", "error", or None: retried later
        failed = None
        try:
            outcome = self._evict_once(victim, preemptor, attempt, group, execution, eviction)
            if isinstance(outcome, RemovalFailed):
                failed, outcome = outcome, "error"
            result = outcome
        finally:
            if result is not None:
                with self._lock:  # (over: a later preemption may hand it over again, if it is still there)
                    self._removing.discard(victim.uid or victim.key)
                if execution:
                    self._executed(execution, result)
        if failed is not None:  # (once it may be handed over again: the preemptor is tried at once)
            self.removal_failed(failed)

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
        self, victim: Pod, preemptor: Pod, attempt: int, group: PodGroup | None, execution: str, eviction: bool
    ) -> str | RemovalFailed | None:
        """As kube-scheduler's prepareCandidate: the victim's DisruptionTarget condition first
        (reason PreemptionByScheduler), then its removal (``eviction``: through the Eviction API,
        so its PodDisruptionBudget holds; else a DELETE, as kube-scheduler's, with the victim's
        uid as a precondition: a pod of the same name made since is not the victim), then the
        Preempted event (sent on the shared pool, apart from the removal) naming the preemptor as
        related: the pod, or for workload-aware preemption its PodGroup (or CompositePodGroup), as
        kube-scheduler's executor names a podGroupExecutorPreemptor. Returns how it ended
        (None: it is retried later; a :class:`RemovalFailed`: refused by a budget, or given up)."""
        if self._fenced("eviction", victim, victim.node_name or ""):
            return "error"  # (not retried: a later leader preempts anew if it must)
        try:
            kind = "pod" if group is None else ("compositepodgroup" if group.composite else "podgroup")
            patch = _preempted_status(preemptor, kind)
            self.api.patch_pod_status(victim.namespace, victim.name, patch, strategic=True)
            if eviction:
                self.api.evict(victim.namespace, victim.name)
            else:
                self.api.delete(PODS, victim.namespace, victim.name, uid=victim.uid)
            log.info(
                "evicted" if eviction else "deleted",
                extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key},
            )
            uid = preemptor.uid if group is None else group.uid
            # (a group's candidate is the whole cluster: PodGroupEvaluator.Preempt names it "cluster")
            where = victim.node_name if group is None else "cluster"
            # (on the shared pool: the victim is gone, its event waits its turn there, as
            # client-go's event broadcaster sends kube-scheduler's events apart from the executor)
            self._submit(
                self._event,
                victim,
                "Normal",
                "Preempted",
                "Preempting",
                f"Preempted by {kind} {uid} on node {where}",
                preemptor,
                None if group is None else _group_reference(group),
            )
        except NotFoundError:
            return "success"  # gone already
        except (TooManyRequestsError, KubeError) as err:
            if isinstance(err, ConflictError) and not eviction:
                return "success"  # the uid precondition: the victim is gone, another pod has its name
            refused = eviction and refused_by_budget(err)
            if refused or attempt + 1 >= EVICTION_TRIES:  # (the first refusal: see the module's docstring)
                log.log(
                    logging.INFO if refused else logging.WARNING,
                    "%s: %s",
                    "eviction refused" if refused else ("eviction" if eviction else "deletion") + " given up",
                    err,
                    extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key},
                )
                return RemovalFailed(victim.key, preemptor.key, refused, str(err))
            self._retry(victim, preemptor, attempt, group, execution, eviction, str(err))
            return None
        return "success"

    def _retry(
        self,
        victim: Pod,
        preemptor: Pod,
        attempt: int,
        group: PodGroup | None,
        execution: str,
        eviction: bool,
        why: str,
    ) -> None:
        log.info(
            "%s refused (%s); retrying in %gs",
            "eviction" if eviction else "deletion",
            why,
            EVICTION_RETRY_SECONDS,
            extra={"pod": victim.key, "node": victim.node_name, "preemptor": preemptor.key},
        )
        retry = (self._evict, victim, preemptor, attempt + 1, group, execution, eviction)
        timer = threading.Timer(EVICTION_RETRY_SECONDS, self._submit, retry, {"pool": self._removals})
        timer.daemon = True
        timer.start()


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
