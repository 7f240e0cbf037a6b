"""The scheduler: pops pods from the queue, runs a cycle, preempts, assumes and binds.

One driver for every face of rulesched: the simulator binds into its in-memory state, the
scheduler loop binds through the API server. Binding goes through a :class:`Binder`; the pod is
assumed in the cluster state first so the next cycle sees it, and a failed bind rolls the
assumption back and requeues the pod with backoff.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from rulesched.cluster.state import ClusterState
from rulesched.lang import BoundRules, RuleSet
from rulesched.model import Pod
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import Code, CycleResult, SchedulerSettings
from rulesched.scheduler.preemption import preempt
from rulesched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)


class Binder(Protocol):
    def bind(self, pod: Pod, node: str) -> bool:
        """Bind the pod to the node; False if the API refused (the pod is then retried)."""
        ...


class Evictor(Protocol):
    def evict(self, pod: Pod, preemptor: Pod) -> None: ...


@dataclass
class PodHistory:
    """What happened to one pending pod, for reports: its last cycle and what it preempted."""

    pod: Pod
    last: CycleResult | None = None
    node: str | None = None
    nominated: str | None = None
    victims: list[Pod] = field(default_factory=list)
    attempts: int = 0


class VirtualClock:
    """Simulated time: the simulator jumps it to the next backoff expiry instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _waits_on_other_pods(pod: Pod) -> bool:
    return bool(pod.pod_affinity or pod.topology_spread_constraints)


class Scheduler:
    def __init__(self, rules: RuleSet, state: ClusterState, settings: SchedulerSettings, binder: Binder,
                 evictor: Evictor | None = None, clock: Callable[[], float] | None = None) -> None:
        self.rules = rules
        self.state = state
        self.settings = settings
        self.binder = binder
        self.evictor = evictor
        self.clock = clock or VirtualClock()
        self.queue = SchedulingQueue(self.clock, settings.initial_backoff_seconds, settings.max_backoff_seconds)
        self.cycle = Cycle(rules, state, settings)
        self.history: dict[str, PodHistory] = {}
        self.evicted: list[Pod] = []

    def add(self, pod: Pod) -> None:
        self.history.setdefault(pod.key, PodHistory(pod))
        self.queue.add(pod)

    def schedule_one(self) -> CycleResult | None:
        """One cycle for the next ready pod; None when no pod is ready."""
        pod = self.queue.pop()
        if pod is None:
            return None
        history = self.history.setdefault(pod.key, PodHistory(pod))
        history.attempts += 1
        result, bound = self.cycle.run(pod)
        history.last = result
        if result.code is Code.SCHEDULED and result.node is not None:
            self._bind(pod, result, history)
        else:
            self._preempt_or_park(pod, result, bound, history)
        return result

    def _bind(self, pod: Pod, result: CycleResult, history: PodHistory) -> None:
        node = result.node
        assert node is not None
        placed = self.state.assume(pod, node)
        if self.binder.bind(placed, node):
            self.state.finish_binding(placed.key)
            self.queue.forget(pod.key)
            history.node = node
            log.debug("bound", extra={"pod": pod.key, "node": node})
            if self.queue.any_waiting_on_pods:
                self.queue.cluster_changed()  # a new pod can satisfy affinity or spreading
            return
        self.state.forget(placed.key)
        result.code = Code.BIND_FAILED
        log.info("binding failed; retrying with backoff", extra={"pod": pod.key, "node": node})
        self.queue.requeue(pod, backoff=True)

    def _preempt_or_park(self, pod: Pod, result: CycleResult, bound: BoundRules, history: PodHistory) -> None:
        outcome = preempt(self.state, bound)
        result.preemption = outcome
        if outcome.nominated is None:
            self.queue.unschedulable(pod, waits_on_pods=_waits_on_other_pods(pod))
            return
        for victim in outcome.victims:
            self.state.remove_pod(victim.key)
            self.evicted.append(victim)
            if self.evictor is not None:
                self.evictor.evict(victim, pod)
        history.nominated = outcome.nominated
        history.victims.extend(outcome.victims)
        log.info("preempted %d pod(s)", len(outcome.victims), extra={"pod": pod.key, "node": outcome.nominated})
        self.queue.cluster_changed()
        self.queue.requeue(dataclasses.replace(pod, nominated_node_name=outcome.nominated), backoff=False)

    def run(self) -> None:
        """Schedule until the queue settles: nothing ready and nothing backing off."""
        clock = self.clock
        while True:
            if self.schedule_one() is not None:
                continue
            ready = self.queue.next_ready_time()
            if ready is None or not isinstance(clock, VirtualClock):
                return
            clock.now = max(clock.now, ready)
