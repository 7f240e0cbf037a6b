"""The scheduler's hooks in a live run: what a cycle decides goes to the API server through the
workers (:mod:`rulesched.run.workers`) — bindings with their volume and claim writes, PostFilter's
claim writes, events and status patches — and to the metrics, counted as kube-scheduler counts them.

Used by :class:`rulesched.run.loop.Loop`, which builds one binder and one reporter per process.
"""

from __future__ import annotations

import logging
import time

from rulesched.cluster.store import ClusterStore
from rulesched.kube.claims import claim_writes
from rulesched.kube.volumes import writes_for
from rulesched.logs import VERBOSE
from rulesched.model import Pod
from rulesched.model.dra import ResourceClaim
from rulesched.model.groups import POD_GROUP_API
from rulesched.run.ops import Metrics
from rulesched.run.workers import Workers
from rulesched.scheduler.framework import Binding, Code, CycleResult
from rulesched.scheduler.gang import GroupOutcome
from rulesched.scheduler.interfaces import Observer, decision
from rulesched.scheduler.queue import SchedulingQueue

# Decision lines keep the name they always had (the loop's): log filters and the README's samples use it.
log = logging.getLogger("rulesched.run.loop")


class WorkerBinder:
    """The scheduler's binder in a live run: API writes on the workers."""

    def __init__(self, workers: Workers, store: ClusterStore) -> None:
        self.workers, self.store = workers, store

    def bind(self, binding: Binding) -> bool | None:
        """The volume decisions and DRA claims as API writes (the claims as the store has them
        now), then the binding, on a worker."""
        node = binding.node
        volumes = writes_for(binding.volumes, self.store.storage, node) if binding.volumes else []
        claims = (
            claim_writes(binding.claims, binding.allocated, binding.pod, binding.extended) if binding.claims else []
        )
        self.workers.bind(binding.pod, node, binding.rules, volumes, claims)
        return None  # the outcome comes back through the loop

    def deallocate(self, claim: ResourceClaim) -> None:
        """DynamicResources' PostFilter: the claim deallocated through the API, on a worker."""
        pod_uid = claim.reserved_for[0].uid if claim.reserved_for else ""
        self.workers.deallocate(claim.namespace, claim.name, pod_uid)

    def delete_claim(self, claim: ResourceClaim) -> None:
        """DynamicResources' PostFilter: the claim an earlier attempt made for the pod's extended
        resources deleted through the API (its finalizer first), on a worker."""
        self.workers.delete_claim(claim.namespace, claim.name)


class WorkerReporter(Observer):
    """Events and status patches through the workers; metrics. An attempt that placed its pod
    counts once its binding is over (``scheduled`` or ``error``), as kube-scheduler counts it."""

    def __init__(self, workers: Workers, metrics: Metrics, queue: SchedulingQueue) -> None:
        self.workers, self.metrics, self.queue = workers, metrics, queue
        # pod key -> (its cycle's start, its attempts, when it first went active), while binding
        self._binding: dict[str, tuple[float, int, float | None]] = {}
        self._started: set[str] = set()  # pod groups whose status this process set to Scheduling

    def attempted(self, result: CycleResult) -> None:
        if result.waiting:  # held before any cycle (upstream's PreEnqueue): no event, no metric
            return
        pod = result.pod
        self.metrics.cycle(result)
        started = result.timing.started if result.timing is not None else time.perf_counter()
        if result.code is Code.SCHEDULED:
            self._binding[pod.key] = (started, self.queue.attempts(pod.key), self.queue.entered(pod.key))
        else:
            self.metrics.attempt(pod.scheduler_name, "unschedulable", time.perf_counter() - started)
        if result.code is Code.UNSCHEDULABLE:
            preemption = result.preemption
            nominated = preemption.nominated if preemption is not None else None
            codes = result.reason_codes()
            self.metrics.reasons(pod.scheduler_name, codes)
            # (a nomination goes in the condition's patch, as kube-scheduler's updatePod sends both)
            self.workers.unschedulable(pod, result.message, codes=codes, nodes=result.num_nodes, nominated=nominated)
        if log.isEnabledFor(VERBOSE):
            decision(log, result)

    def bound(self, pod: Pod, node: str) -> None:
        self.workers.forget(pod.key)  # (its "bound" line: log_bound, as the loop applied the outcome)
        if self.queue.flushed(pod.key):
            self.metrics.after_flush.inc()
        started, attempts, entered = self._binding.pop(pod.key, (time.perf_counter(), 1, None))
        self.metrics.attempt(pod.scheduler_name, "scheduled", time.perf_counter() - started)
        self.metrics.scheduled(attempts, None if entered is None else time.monotonic() - entered)

    def group_attempted(self, outcome: GroupOutcome, seconds: float) -> None:
        if outcome.waiting:  # short of members: not an attempt (upstream never attempts it either)
            return
        for condition in outcome.conditions:  # the workload API's PodGroups, as kube-scheduler sets them
            self.workers.pod_group_condition(condition.group, condition.status, condition.reason, condition.message)
        profile = outcome.members[0].scheduler_name if outcome.members else ""
        preemption = outcome.preemption
        result = "scheduled" if outcome.placed else "unschedulable"
        if preemption is not None and preemption.code == "Success":
            result = "waiting_on_preemption"
        elif any(c.reason == "SchedulerError" for c in outcome.conditions):
            result = "error"
        self.metrics.group_attempt(profile, result, seconds)
        if preemption is not None and preemption.code:
            self.metrics.workload_preemption(
                preemption.code,
                len(preemption.victims),
                preemption.disruptions,
                preemption.violations,
                preemption.seconds,
                "compositepodgroup" if outcome.group.composite else "podgroup",
            )
        self.metrics.placements(profile, [(t.fit, t.seconds) for t in outcome.trials])
        group = outcome.group
        if group.api == POD_GROUP_API and group.phase in ("", "Pending") and group.key not in self._started:
            # What scheduler-plugins' controller writes once the group has its minimum of pods
            # (phase Scheduling), and when the scheduler began placing it; the controller counts
            # running, succeeded and failed members itself and moves the phase on from there.
            self._started.add(group.key)
            self.workers.pod_group_status(group, {"phase": "Scheduling"})

    def bind_failed(self, pod: Pod, node: str, reason: str) -> None:
        started, _, _ = self._binding.pop(pod.key, (time.perf_counter(), 1, None))
        self.metrics.attempt(pod.scheduler_name, "error", time.perf_counter() - started)

    def cycle_failed(self, pod: Pod, message: str, seconds: float) -> None:
        self.metrics.attempt(pod.scheduler_name, "error", seconds)
        self.workers.scheduler_error(pod, message)

    def nominations_ended(self, pods: list[Pod]) -> None:
        for pod in pods:
            self.workers.nominate(pod, "")
