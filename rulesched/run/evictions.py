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
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any, Protocol

from rulesched.errors import ConflictError, KubeError, NotFoundError, TooManyRequestsError
from rulesched.kube.api import KubeApi
from rulesched.kube.bodies import observed_generation
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


@dataclass(frozen=True)
class Removal:
    """One victim's removal as it is handed over: to the evict threads here, or down the pipe to
    the binding process (:mod:`rulesched.run.binder`, :mod:`rulesched.run.remover`), whose line
    carries these fields in this order (:meth:`wire`). Everything in it is decided by the
    scheduling process when the scheduler hands the victim over: how it goes, its status patch,
    its Preempted event."""

    namespace: str
    name: str
    uid: str
    node: str  # where it runs (logs)
    preemptor: str  # the preemptor's key (logs, :class:`RemovalFailed`)
    execution: str  # the preemption it belongs to (:class:`PreemptionExecution`'s key)
    eviction: bool  # through the Eviction API (else a DELETE with the uid as a precondition)
    patch: dict[str, Any]  # the DisruptionTarget status patch (:func:`_preempted_status`)
    note: str  # the Preempted event's
    reporter: str  # the scheduler reporting the event: the preemptor's profile
    related: dict[str, str]  # the event's related object: the preemptor, or its group
    handed: float = 0.0  # (monotonic, one clock for both processes) when the scheduler handed it over

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def token(self) -> str:
        """What marks it under way (:meth:`EvictionsMixin.removing`): the victim's uid, or key."""
        return self.uid or self.key

    def wire(self) -> list[Any]:
        return [getattr(self, f.name) for f in fields(self)]

    @classmethod
    def from_wire(cls, values: list[Any]) -> Removal:
        return cls(*values)


def removal_for(victim: Pod, preemptor: Pod, group: PodGroup | None, execution: str, eviction: bool) -> Removal:
    """The removal of ``victim`` for ``preemptor`` (or its ``group``): the Preempted event names
    the preemptor as related, the pod, or for workload-aware preemption its PodGroup (or
    CompositePodGroup), as kube-scheduler's executor names a podGroupExecutorPreemptor."""
    kind = "pod" if group is None else ("compositepodgroup" if group.composite else "podgroup")
    uid = preemptor.uid if group is None else group.uid
    # (a group's candidate is the whole cluster: PodGroupEvaluator.Preempt names it "cluster")
    where = victim.node_name if group is None else "cluster"
    related = (
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "namespace": preemptor.namespace,
            "name": preemptor.name,
            "uid": preemptor.uid,
        }
        if group is None
        else _group_reference(group)
    )
    return Removal(
        victim.namespace,
        victim.name,
        victim.uid,
        victim.node_name or "",
        preemptor.key,
        execution,
        eviction,
        _preempted_status(preemptor, kind, victim),
        f"Preempted by {kind} {uid} on node {where}",
        preemptor.scheduler_name,
        related,
        time.monotonic(),
    )


# How a removal's attempt ended (:func:`remove_once`): the victim removed (its Preempted event
# follows), gone already, not sent (fenced), or a failure to report; None: to be tried again.
REMOVED, GONE, NOT_SENT = "removed", "gone", "error"
Ended = str | RemovalFailed


def execution_result(ended: Ended) -> str:
    """The preemption execution metric's result for one victim's end."""
    return "success" if ended in (REMOVED, GONE) else "error"


def remove_once(api: KubeApi, removal: Removal, attempt: int, fenced: Callable[[str], bool]) -> Ended | None:
    """As kube-scheduler's prepareCandidate: the victim's DisruptionTarget condition first
    (reason PreemptionByScheduler), then its removal (``eviction``: through the Eviction API,
    so its PodDisruptionBudget holds; else a DELETE, as kube-scheduler's, with the victim's
    uid as a precondition: a pod of the same name made since is not the victim). ``fenced(what)``
    is asked before each write (True: this replica must not write; the attempt ends
    :data:`NOT_SENT`, not retried: a later leader preempts anew if it must). Returns how it
    ended; None: it is to be tried again in EVICTION_RETRY_SECONDS (logged here). The caller
    posts the Preempted event of a victim :data:`REMOVED`."""
    extra: dict[str, Any] = {"pod": removal.key, "node": removal.node or None, "preemptor": removal.preemptor}
    started = time.monotonic()
    what = "eviction" if removal.eviction else "deletion"
    try:
        if fenced("eviction"):
            return NOT_SENT
        api.patch_pod_status(removal.namespace, removal.name, removal.patch, strategic=True)
        patched = time.monotonic()
        if fenced(what):
            return NOT_SENT
        if removal.eviction:
            api.evict(removal.namespace, removal.name)
        else:
            api.delete(PODS, removal.namespace, removal.name, uid=removal.uid)
        # (where its time went, in ms: waiting for a thread since handed over, the patch, the removal)
        timings = (started - removal.handed, patched - started, time.monotonic() - patched)
        extra["ms"] = "/".join(f"{1000 * t:.0f}" for t in timings) if attempt == 0 else None
        log.info("evicted" if removal.eviction else "deleted", extra=extra)
    except NotFoundError:
        return GONE
    except (TooManyRequestsError, KubeError) as err:
        if isinstance(err, ConflictError) and not removal.eviction:
            return GONE  # the uid precondition: the victim is gone, another pod has its name
        refused = removal.eviction and refused_by_budget(err)
        if refused or attempt + 1 >= EVICTION_TRIES:  # (the first refusal: see the module's docstring)
            level = logging.INFO if refused else logging.WARNING
            log.log(level, "%s: %s", "eviction refused" if refused else what + " given up", err, extra=extra)
            return RemovalFailed(removal.key, removal.preemptor, refused, str(err))
        log.info("%s refused (%s); retrying in %gs", what, err, EVICTION_RETRY_SECONDS, extra=extra)
        return None
    return REMOVED


def post_preempted(api: KubeApi, removal: Removal) -> None:
    """The victim's Preempted event, reported by the preemptor's scheduler, naming the preemptor
    (or its group) as related."""
    regarding = {"kind": "Pod", "apiVersion": "v1", "namespace": removal.namespace, "name": removal.name}
    try:
        api.post_event(
            {**regarding, "uid": removal.uid},
            "Normal",
            "Preempted",
            "Preempting",
            removal.note,
            removal.reporter,
            related=removal.related,
        )
    except KubeError as err:
        log.warning("event Preempted not posted: %s", err, extra={"pod": removal.key})


class RemovalChannel(Protocol):
    """Where removals go when they leave this process (:class:`rulesched.run.binder.BindingProcess`)."""

    @property
    def alive(self) -> bool: ...
    def remove(self, removal: Removal, until: float) -> bool: ...


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
    may_write: Callable[[], bool]
    lease_until: Callable[[], float]

    _removals: ThreadPoolExecutor  # the victims' own threads (their removal, not their events)
    # (uid or key) of the victims whose removal is under way here: from evict() until it succeeded
    # or was given up (see evict)
    _removing: set[str]

    @property
    def remover(self) -> RemovalChannel | None:
        """The binding process, which removes victims while it lives (else this one's threads)."""
        raise NotImplementedError

    def _submit(self, fn: Callable[..., object], *args: Any, pool: ThreadPoolExecutor | None = None) -> None:
        raise NotImplementedError

    def _handed_over(self, send: Callable[[], bool]) -> bool:
        raise NotImplementedError

    def _fenced(self, what: str, pod: Any, node: str = "") -> bool:
        raise NotImplementedError

    def evict(self, victim: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        """Evict ``victim`` for ``preemptor`` (or its ``group``). The victims of one preemption
        are timed together, as kube-scheduler's executor times its candidate's
        (scheduler_preemption_execution_duration_seconds): from the first handed here until the
        last is evicted or given up. (The scheduler hands a preemption's victims over in one
        go, microseconds apart; each victim is two API calls.) Whether it goes through the
        Eviction API or a DELETE is decided here, on the caller's thread, from the budgets
        :attr:`budgets` gives now (:func:`through_eviction`).

        The calls go from the binding process while it lives and this replica may write
        (:mod:`rulesched.run.remover`: on the scheduling process's threads they waited for the
        interpreter lock behind the scheduling thread, a victim's DELETE sent 0.35-0.64 s after
        the preemption, median, on the saturated 2-core test bed, against kube-scheduler's
        0.07-0.11 s, and while it lingered later preemptors preempted again on its node); else
        on this process's evict threads. Either way its end comes back to
        :meth:`removal_over`.

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
        removal = removal_for(
            victim, preemptor, group, key, through_eviction(self.evict_victims, victim, self.budgets())
        )
        with self._lock:
            execution = self._executions.get(key)
            if execution is None:
                execution = self._executions[key] = PreemptionExecution(kind, time.monotonic())
            execution.pending += 1
        remover = self.remover
        if remover is not None and remover.alive and self.may_write():
            if self._handed_over(lambda: remover.remove(removal, self.lease_until())):
                return
        self._submit(self._evict, removal, 0, pool=self._removals)

    def removing(self, victim: Pod) -> bool:
        """Whether ``victim``'s removal is under way here (handed over, not yet over: its calls
        unanswered, or being retried; a failure is reported when it ends): the preemptor keeps
        waiting for it (:func:`rulesched.scheduler.removals.leaving`)."""
        with self._lock:
            return (victim.uid or victim.key) in self._removing

    def _evict(self, removal: Removal, attempt: int) -> None:
        ended: Ended | None = NOT_SENT
        try:
            ended = remove_once(self.api, removal, attempt, lambda what: self._fenced(what, removal, removal.node))
            if ended is None:
                self._retry(removal, attempt)
            elif ended == REMOVED:
                # (on the shared pool: the victim is gone, its event waits its turn there, as
                # client-go's event broadcaster sends kube-scheduler's events apart from the executor)
                self._submit(self._preempted_event, removal)
        finally:
            if ended is not None:
                self.removal_over(removal, ended)

    def removal_over(self, removal: Removal, ended: Ended) -> None:
        """(Any thread: an evict thread's, the binding process's reader.) A victim's removal is
        over: it may be handed over again (were it still there), its preemption's timing counts
        it, and a failure goes to the scheduler, which tries the preemptor again at once."""
        with self._lock:
            self._removing.discard(removal.token)
        self._executed(removal.execution, execution_result(ended))
        if isinstance(ended, RemovalFailed):
            self.removal_failed(ended)

    def _preempted_event(self, removal: Removal) -> None:
        if not self._fenced("Preempted event", removal):
            post_preempted(self.api, removal)

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

    def _retry(self, removal: Removal, attempt: int) -> None:
        retry = (self._evict, removal, attempt + 1)
        timer = threading.Timer(EVICTION_RETRY_SECONDS, self._submit, retry, {"pool": self._removals})
        timer.daemon = True
        timer.start()


def _group_reference(group: PodGroup) -> dict[str, str]:
    """An ObjectReference to a workload API group (the Preempted event's related object)."""
    kind = "CompositePodGroup" if group.composite else "PodGroup"
    return {"kind": kind, "apiVersion": group.api, "namespace": group.namespace, "name": group.name, "uid": group.uid}


def _preempted_status(preemptor: Pod, kind: str, victim: Pod) -> dict[str, Any]:
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
                    **observed_generation(victim),
                }
                for kind in (DISRUPTION_TARGET, PREEMPTED_CONDITION)
            ]
        }
    }
