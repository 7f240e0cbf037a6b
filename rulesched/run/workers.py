"""The binding cycle, apart from the scheduling cycle: API calls on a bounded pool of threads.

The scheduler's thread assumes a pod and hands its binding here (:class:`ApiBinder` answers
"under way"); a worker posts the binding through the ``pods/binding`` subresource, then the
``Scheduled`` event, and sends the outcome back to the scheduler's thread as an
:class:`Outcome`, which that thread applies between cycles. A 409 means the pod is bound
already: the worker reads where, and the outcome says so (the pod is then taken as bound there,
not retried). Evictions of preemption victims (each marked with the DisruptionTarget condition
first, as kube-scheduler marks them), ``FailedScheduling`` events and pod status patches
(PodScheduled condition, nominatedNodeName) go through the same pool; a victim goes through the
Eviction API when a PodDisruptionBudget selects it, else with a DELETE (``--evict-victims``); an
eviction that a budget refuses (429) is reported to the scheduler, which tries the preemptor again
(:mod:`rulesched.run.evictions`).

Fencing: every write checks ``may_write`` (the leader election's
:meth:`rulesched.run.leader.LeaderElector.holds`) right before its API call; a replica that may
no longer hold the lease writes nothing: the binding comes back failed (the pod is requeued and
nothing stays assumed), evictions, status patches and events are dropped, each logged.
At shutdown :meth:`Workers.close` refuses new work while the work under way finishes.

Events name the profile's scheduler as their reporting controller, as kube-scheduler's per-profile
recorders do: the pod's ``spec.schedulerName`` (the profile that scheduled it), and for a
victim's ``Preempted`` event the preemptor's.
Next stage: :mod:`rulesched.run.loop` applies the outcomes.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from rulesched.errors import ConflictError, KubeError, NotFoundError
from rulesched.kube.api import KubeApi
from rulesched.kube.bodies import event_name, observed_generation
from rulesched.kube.claims import ClaimWrite, deallocate_claim, delete_claim, release_claims, write_claims
from rulesched.kube.resources import PODGROUPS, PODS, workload_pod_groups
from rulesched.kube.volumes import VolumeWrite, apply_writes, revert_writes
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.model.groups import PodGroup
from rulesched.run.event_series import EventSeries, Key, Send, Write
from rulesched.run.evictions import ALL, Ended, EvictionsMixin, PreemptionExecution, Removal, RemovalFailed
from rulesched.run.written import Written
from rulesched.scheduler.reasons import ANNOTATION, Reason, annotation_value, pod_reasons

log = logging.getLogger(__name__)
REMOVAL_THREADS = 16  # preemption's victims removed at once, at most (their own pool)


@dataclass(frozen=True)
class Outcome:
    """A binding's end, for the scheduler's thread."""

    key: str
    node: str
    ok: bool
    reason: str = ""
    bound_elsewhere: dict[str, Any] | None = None  # the pod as the API has it, when a 409 says so
    seconds: float = 0.0  # the binding call
    profile: str = ""  # the scheduler name of the profile that chose the node
    rules: str = ""  # the digest of the rule set that chose it
    logged: bool = False  # its "bound" line is written (by the binding process, off the scheduler's thread)


def log_bound(outcome: Outcome) -> None:
    """The ``bound`` line, written by the thread that applies the outcome: one writer, where
    the binding threads queued on the log handler's lock (8 ms a line at 1000 bindings/s)."""
    log.info("bound", extra={"pod": outcome.key, "node": outcome.node, "rules": outcome.rules})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


GROUP_STATUS_TRIES = 3


class BindingChannel(Protocol):
    """Where bindings go when they leave this process (:class:`rulesched.run.binder.BindingProcess`,
    declared here so the workers need not import the module that runs them in a child)."""

    @property
    def alive(self) -> bool: ...
    def bind(self, pod: Target, node: str, rules: str, until: float) -> bool: ...
    def remove(self, removal: Removal, until: float) -> bool: ...
    def flush(self, late_only: bool = False) -> None: ...
    def close(self) -> None: ...
    def stop(self) -> None: ...


class Target(Protocol):
    """What a binding and its event need of a pod (a :class:`Pod`, or the binding process's
    :class:`rulesched.run.binder.BindTarget`)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def scheduler_name(self) -> str: ...
    @property
    def key(self) -> str: ...


class Workers(EvictionsMixin):
    """The pool, and what it does for the scheduler."""

    at_once = False  # (as an evictor: victims leave when the API server deletes them, seen as events)

    def __init__(
        self,
        api: KubeApi,
        outcomes: Callable[[Outcome], None],
        threads: int = 16,
        may_write: Callable[[], bool] = lambda: True,
        finished: Callable[[], None] | None = None,
        lease_until: Callable[[], float] = lambda: math.inf,
        evict_victims: str = ALL,
        budgets: Callable[[], Sequence[PodDisruptionBudget]] = tuple,
    ) -> None:
        self.api = api
        # which victims go through the Eviction API (rulesched.run.evictions; without the
        # cluster's budgets to read, all of them), and those budgets
        self.evict_victims = evict_victims
        self.budgets = budgets
        self.outcomes = outcomes
        self.may_write = may_write
        self.finished = finished  # told after each task (the binding process counts them)
        self.lease_until = lease_until  # (monotonic) when may_write turns false, for the binding process
        self.process: BindingChannel | None = None  # bindings without volumes go there while it lives
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bind")
        # Preemption's victims on threads of their own: their removal is what the preemptor waits
        # for, and on the shared pool it queued behind the events and status patches of every
        # attempt (1.4-2.8 s a preemption on the preemption benchmark; rulesched.run.evictions).
        self._removals = ThreadPoolExecutor(
            max_workers=max(1, min(threads, REMOVAL_THREADS)), thread_name_prefix="evict"
        )
        self._lock = threading.Lock()
        self._series = EventSeries()  # FailedScheduling events as client-go's broadcaster counts them
        self._written = Written()  # each pod's and group's status as this process last wrote it
        self._closed = False
        self._executions: dict[str, PreemptionExecution] = {}  # preemptions whose evictions are under way
        self._removing: set[str] = set()  # victims whose removal is under way (rulesched.run.evictions)
        # pod key -> its status writes not yet sent, in order (see _in_order)
        self._status_writes: dict[str, collections.deque[tuple[Callable[..., object], tuple[Any, ...]]]] = {}
        # told when one preemption's evictions are all over: (preemptor kind, result, seconds)
        self.executed: Callable[[str, str, float], None] = lambda kind, result, seconds: None
        self.removal_failed: Callable[[RemovalFailed], None] = lambda failed: None  # (the loop's inbox)
        self.in_flight = 0
        self.refused = 0  # writes not made: the lease may be lost

    def use_process(self, process: BindingChannel) -> None:
        """Bind through ``process`` from now on (:mod:`rulesched.run.binder`)."""
        self.process = process

    @property
    def remover(self) -> BindingChannel | None:
        """Victims' removals go to the binding process too (rulesched.run.evictions)."""
        return self.process

    def _handed_over(self, send: Callable[[], bool]) -> bool:
        """Count a task the binding process takes in :attr:`in_flight` (its answer takes it back
        off); False when ``send()`` found the process gone (do it here instead). Once closed,
        nothing is taken (True: done with, as :meth:`_submit` drops it)."""
        with self._lock:
            if self._closed:
                return True
            self.in_flight += 1
        if send():
            return True
        with self._lock:
            self.in_flight -= 1
        return False

    def removal_answered(self, removal: Removal, ended: Ended) -> None:
        """(The binding process's reader thread.) A removal handed over is over (:meth:`removal_over`)."""
        try:
            self.removal_over(removal, ended)
        finally:
            with self._lock:
                self.in_flight -= 1

    def process_finished(self) -> None:
        """(The binding process's reader thread.) One binding handed over is over."""
        with self._lock:
            self.in_flight -= 1

    def flush(self, late_only: bool = False) -> None:
        """Send the bindings the binding process has not been sent yet (they wait a moment for
        others to go with them): the scheduler's thread calls this before it waits for pods,
        and after each cycle with ``late_only`` (only those that have waited long enough)."""
        if self.process is not None:
            self.process.flush(late_only)

    def close(self) -> None:
        """Take no new work (shutdown: eviction retries included); work under way goes on."""
        with self._lock:
            self._closed = True
        if self.process is not None:
            self.process.close()

    def shutdown(self, wait: bool = True) -> None:
        self.close()
        if self.process is not None:
            self.process.stop()
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
        self._removals.shutdown(wait=wait, cancel_futures=not wait)

    def _fenced(self, what: str, pod: Target, node: str = "") -> bool:
        """True (logged) when this replica must not write: it may have lost the lease."""
        if self.may_write():
            return False
        with self._lock:
            self.refused += 1
        log.warning("%s not sent: not leading", what, extra={"pod": pod.key, "node": node or None})
        return True

    def _submit(self, fn: Callable[..., object], *args: Any, pool: ThreadPoolExecutor | None = None) -> None:
        """Run ``fn(*args)`` on the pool (``pool``: another one), counted in :attr:`in_flight`."""
        with self._lock:
            if self._closed:
                return
            self.in_flight += 1

        def run() -> None:
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a worker's failure is logged, never fatal
                log.exception("worker task failed")
            finally:
                with self._lock:
                    self.in_flight -= 1
                if self.finished is not None:
                    self.finished()

        (pool or self._pool).submit(run)

    def _in_order(self, key: str, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool after the writes for ``key`` (a pod's; ``group ...``) handed
        over before it: a pod's nomination set then cleared a few milliseconds later (its victim's
        eviction refused, its next attempt finding no node), a group's condition False then True,
        must reach the API server in that order, which two threads of the pool do not promise."""
        with self._lock:
            waiting = self._status_writes.get(key)
            if waiting is not None:  # (one under way: its task sends this one after it)
                waiting.append((fn, args))
                return
            self._status_writes[key] = collections.deque([(fn, args)])
        self._submit(self._write_in_order, key)

    def _write_in_order(self, key: str) -> None:
        while True:
            with self._lock:
                waiting = self._status_writes[key]
                if not waiting:
                    del self._status_writes[key]
                    return
                fn, args = waiting.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - as _submit: logged, and the pod's next writes still go
                log.exception("worker task failed")

    # --- binding ----------------------------------------------------------------------------------
    def bind(
        self,
        pod: Target,
        node: str,
        rules: str = "",
        volumes: Sequence[VolumeWrite] = (),
        claims: Sequence[ClaimWrite] = (),
    ) -> None:
        """Bind through the API; ``rules`` is the digest of the rule set that chose the node
        (the Scheduled event and the log name it). ``volumes``: the pod's volume choices, made
        first and taken back if the binding fails (rulesched.kube.volumes); ``claims``: its DRA
        claims' allocations and reservations, likewise (rulesched.kube.claims). Without either,
        and while this replica may write, the binding process does it if there is one."""
        process = self.process
        if process is not None and not volumes and not claims and process.alive and self.may_write():
            if self._handed_over(lambda: process.bind(pod, node, rules, self.lease_until())):
                return
        self._submit(self._bind, pod, node, rules, volumes, claims)

    def _bind(
        self,
        pod: Target,
        node: str,
        rules: str,
        volumes: Sequence[VolumeWrite] = (),
        claims: Sequence[ClaimWrite] = (),
    ) -> None:
        key, profile = pod.key, pod.scheduler_name
        started = time.monotonic()
        if (volumes or claims) and self._fenced("volume binding", pod, node):
            self.outcomes(Outcome(key, node, False, "not leading", seconds=0.0, profile=profile))
            return
        try:
            apply_writes(self.api, volumes)
        except KubeError as err:
            seconds = time.monotonic() - started
            self.outcomes(Outcome(key, node, False, f"binding volumes: {err}", seconds=seconds, profile=profile))
            return
        try:
            write_claims(self.api, claims)
        except KubeError as err:
            revert_writes(self.api, volumes)
            seconds = time.monotonic() - started
            self.outcomes(Outcome(key, node, False, f"binding claims: {err}", seconds=seconds, profile=profile))
            return
        if self._fenced("binding", pod, node):
            # (the volume and claim writes stay: a replica past its lease writes nothing, not even
            # an undo; as when a scheduler dies between the two, the next one's handling decides)
            seconds = time.monotonic() - started
            self.outcomes(Outcome(key, node, False, "not leading", seconds=seconds, profile=profile))
            return
        try:
            self.api.bind(pod.namespace, pod.name, pod.uid, node)
        except KubeError as err:
            release_claims(self.api, claims)
            revert_writes(self.api, volumes)
            self._bind_failed(pod, node, started, err)
            return
        self.outcomes(Outcome(key, node, True, seconds=time.monotonic() - started, profile=profile, rules=rules))
        self._event(pod, "Normal", "Scheduled", "Binding", scheduled_note(key, node, rules))

    def _bind_failed(self, pod: Target, node: str, started: float, err: KubeError) -> None:
        self.outcomes(failed_binding(self.api, pod, node, time.monotonic() - started, err))

    def deallocate(self, namespace: str, name: str, pod_uid: str) -> None:
        """DynamicResources' PostFilter: deallocate a claim no other pod uses (rulesched.kube.claims)."""
        self._submit(self._deallocate, namespace, name, pod_uid)

    def _deallocate(self, namespace: str, name: str, pod_uid: str) -> None:
        if not self.may_write():
            return
        try:
            deallocate_claim(self.api, namespace, name, pod_uid)
        except KubeError as err:
            log.warning("could not deallocate a claim", extra={"object": f"{namespace}/{name}", "reason": str(err)})

    def delete_claim(self, namespace: str, name: str) -> None:
        """DynamicResources' PostFilter: delete the claim an earlier attempt made for a pod's
        extended resources (rulesched.kube.claims)."""
        self._submit(self._delete_claim, namespace, name)

    def _delete_claim(self, namespace: str, name: str) -> None:
        if self.may_write():
            delete_claim(self.api, namespace, name)

    # --- what users see ---------------------------------------------------------------------------
    def unschedulable(
        self,
        pod: Pod,
        message: str,
        reason: str = "Unschedulable",
        codes: Sequence[Reason] = (),
        nodes: int = 0,
        nominated: str | None = None,
    ) -> None:
        """A FailedScheduling event, counted as client-go's broadcaster counts kube-scheduler's
        (:mod:`rulesched.run.event_series`: the first posted, the second making it a series, the
        rest counted), and the PodScheduled=False condition (``reason``) when it differs from
        the one this process last wrote (kube-scheduler's updatePod patches only a changed
        condition). ``nominated``: the pod's new nominatedNodeName ("" clears it), sent in the
        same status patch, as updatePod sends both. The event carries ``codes``, the reasons as
        codes, in its annotation :data:`rulesched.scheduler.reasons.ANNOTATION` (``nodes``: the
        nodes there were)."""
        now = time.monotonic()
        with self._lock:
            key = Key(
                "Warning", "Scheduling", "FailedScheduling", pod.scheduler_name, pod.key, pod.uid, pod.resource_version
            )
            due = self._series.due(now)
            send, series = self._series.observe(key, pod.namespace, event_name(pod.name), now)
            condition = self._written.condition_changes(pod.key, reason, message)
            if nominated is not None and not self._written.nomination_changes(pod, nominated):
                nominated = None  # (the pod has it already)
        for ended in due:
            self._submit(self._write_series, ended)
        if send is Send.NOTHING and not condition and nominated is None:
            return
        # (the reasons' codes encoded only when an event may be posted: not for a counted repeat)
        annotations = (
            None if send is Send.NOTHING else {ANNOTATION: annotation_value(codes or pod_reasons(message), nodes)}
        )
        self._in_order(
            pod.key, self._unschedulable, pod, message, reason, annotations, condition, nominated, send, series
        )

    def sweep_series(self) -> None:
        """Write the counts of the event series that ended or lasted thirty minutes (client-go's
        finishSeries and refreshExistingEventSeries run on their own tickers: an ended series'
        count was written here only when some other pod failed). Called by the loop each second;
        :meth:`EventSeries.due` looks once a minute at most."""
        with self._lock:
            due = self._series.due(time.monotonic())
        for ended in due:
            self._submit(self._write_series, ended)

    def scheduler_error(self, pod: Pod, message: str) -> None:
        """The pod's cycle failed (its deadline passed): as kube-scheduler reports an error, a
        FailedScheduling event and PodScheduled=False with reason SchedulerError."""
        self.unschedulable(pod, message, "SchedulerError")

    def _unschedulable(
        self,
        pod: Pod,
        message: str,
        reason: str,
        annotations: dict[str, str] | None,
        condition: bool,
        nominated: str | None,
        send: Send,
        series: Write,
    ) -> None:
        if send is Send.EVENT:
            self._event(pod, "Warning", "FailedScheduling", "Scheduling", message, annotations, series.name)
        elif send is Send.SERIES:
            self._write_series(series, pod, message, annotations)
        if condition:
            self._condition(pod, reason, message, nominated)
        elif nominated is not None:
            self._nominate(pod, nominated)

    def _write_series(self, series: Write, pod: Pod | None = None, note: str = "", annotations: Any = None) -> None:
        """The series' count written on its first event (client-go's recordEvent); if that event
        is gone (deleted, or never posted), the pod's event posted with the series. Without
        ``pod``: an ended or lasting series' count (finishSeries, refreshExistingEventSeries)."""
        allowed = self.may_write() if pod is None else not self._fenced("FailedScheduling event", pod)
        if not allowed:
            return
        try:
            if self.api.patch_event(series.namespace, series.name, {"series": series.fields()}) or pod is None:
                return
        except KubeError as err:
            log.warning("event series not written: %s", err, extra={"object": f"{series.namespace}/{series.name}"})
            return
        self._event(pod, "Warning", "FailedScheduling", "Scheduling", note, annotations, series.name, series.fields())

    def gated(self, pod: Pod) -> None:
        """PodScheduled=False, reason SchedulingGated (as kube-scheduler marks a gated pod), once
        per pod and set of gates; no event."""
        message = "Scheduling is blocked due to non-empty scheduling gates"
        with self._lock:
            if not self._written.gates_change(pod.key, ",".join(pod.scheduling_gates), message):
                return
        self._in_order(pod.key, self._condition, pod, "SchedulingGated", message)

    def _condition(self, pod: Pod, reason: str, message: str, nominated: str | None = None) -> None:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": _now()[:19] + "Z",
            **observed_generation(pod),
        }
        status: dict[str, Any] = {"conditions": [condition]}
        if nominated is not None:
            status["nominatedNodeName"] = nominated or None
        if not self._patch_status(pod, {"status": status}):
            with self._lock:  # (not written: the next attempt writes it again)
                self._written.condition_failed(pod.key, reason, message)
                if nominated is not None:
                    self._written.nomination_failed(pod.key, nominated)

    def nominate(self, pod: Pod, node: str) -> None:
        """Set the pod's status.nominatedNodeName ("" clears it), unless the pod has it already."""
        with self._lock:
            if not self._written.nomination_changes(pod, node):
                return
        self._in_order(pod.key, self._nominate, pod, node)

    def _nominate(self, pod: Pod, node: str) -> None:
        if not self._patch_status(pod, {"status": {"nominatedNodeName": node or None}}):
            with self._lock:
                self._written.nomination_failed(pod.key, node)

    def pod_group_status(self, group: PodGroup, status: dict[str, Any]) -> None:
        """Merge ``status`` into a scheduler-plugins PodGroup's status (``scheduleStartTime``
        added: when the scheduler began placing it)."""
        self._submit(self._pod_group_status, group, {"status": {**status, "scheduleStartTime": _now()[:19] + "Z"}})

    def pod_group_condition(self, group: PodGroup, status: bool, reason: str, message: str) -> None:
        """Set a workload API PodGroup's scheduled condition as kube-scheduler does
        (updatePodGroupCondition): never from True back to False, and not again when unchanged
        (this process's own record: what it last wrote); a strategic merge patch of the status
        subresource, the condition merged by its type."""
        if group.scheduled and not status:
            return
        value = "True" if status else "False"
        with self._lock:
            mark = f"{group.uid}/{group.generation}:{value}:{reason}:{message}"
            if not self._written.group_condition_changes(group.key, mark):
                return
        condition = {
            "type": group.condition_type,
            "status": value,
            "observedGeneration": group.generation,
            "lastTransitionTime": _now()[:19] + "Z",
            "reason": reason,
            "message": message,
        }
        self._in_order(f"group {group.key}", self._pod_group_status, group, {"status": {"conditions": [condition]}})

    def _pod_group_status(self, group: PodGroup, patch: dict[str, Any]) -> None:
        if not self.may_write():
            with self._lock:
                self.refused += 1
            log.warning("pod group status not sent: not leading", extra={"group": group.key})
            return
        for attempt in range(GROUP_STATUS_TRIES):  # (written once per group: worth a retry or two)
            try:
                if group.native:
                    resource = workload_pod_groups(group.api.split("/", 1)[1])
                    self.api.patch_status(resource, group.namespace, group.name, patch, strategic=True)
                else:
                    self.api.patch_status(PODGROUPS, group.namespace, group.name, patch)
                return
            except NotFoundError:
                return
            except KubeError as err:
                if attempt + 1 == GROUP_STATUS_TRIES:
                    log.warning("pod group status not patched: %s", err, extra={"group": group.key})
                    return
                time.sleep(0.2 * 2**attempt)

    def forget(self, key: str) -> None:
        with self._lock:
            self._written.forget(key)

    def _patch_status(self, pod: Pod, patch: dict[str, Any]) -> bool:
        """The patch sent (True), or not: fenced, or refused (the pod gone: True, nothing to write)."""
        if self._fenced("status patch", pod):
            return False
        try:
            self.api.patch_pod_status(pod.namespace, pod.name, patch)
        except NotFoundError:
            pass
        except KubeError as err:
            log.warning("status not patched: %s", err, extra={"pod": pod.key})
            return False
        return True

    def _event(
        self,
        pod: Target,
        type_: str,
        reason: str,
        action: str,
        note: str,
        annotations: dict[str, str] | None = None,
        name: str | None = None,
        series: dict[str, Any] | None = None,
    ) -> None:
        """An event about ``pod``, reported by the scheduler of the profile that acted (the pod's
        own; a victim's Preempted event: rulesched.run.evictions.post_preempted)."""
        if self._fenced(f"{reason} event", pod):
            return
        try:
            self.api.post_event(
                reference(pod), type_, reason, action, note, pod.scheduler_name, None, annotations, name, series
            )
        except KubeError as err:
            log.warning("event %s not posted: %s", reason, err, extra={"pod": pod.key})


def scheduled_note(key: str, node: str, rules: str) -> str:
    """The Scheduled event's note (kube-scheduler's text, and the digest of the rules)."""
    return f"Successfully assigned {key} to {node}" + (f" (rules {rules})" if rules else "")


def failed_binding(api: KubeApi, pod: Target, node: str, seconds: float, err: KubeError) -> Outcome:
    """The binding call failed: say why (a 409: the pod is bound already; it is read to say where)."""
    current = None
    if isinstance(err, ConflictError):
        try:
            current = api.get(PODS, pod.namespace, pod.name)
        except KubeError:
            current = None
    where = ((current or {}).get("spec") or {}).get("nodeName")
    return Outcome(pod.key, node, False, str(err), current if where else None, seconds, pod.scheduler_name)


def reference(pod: Target) -> dict[str, str]:
    """An ObjectReference to the pod, as events name the objects they are about (client-go's
    GetReference: with the resourceVersion of the pod as read, when known)."""
    ref = {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
    version = getattr(pod, "resource_version", "")
    return {**ref, "resourceVersion": version} if version else ref
