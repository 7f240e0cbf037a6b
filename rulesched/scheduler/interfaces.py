"""What each face plugs into the :class:`rulesched.scheduler.scheduler.Scheduler`: how it binds
(:class:`Binder`), how it takes victims away (:class:`Evictor`) and what it hears of each pod
(:class:`Observer`), and the one-line log of a cycle's decision they share.

The simulator binds and evicts in its own store (:class:`StoreEvictor`); the live scheduler
through the API server (rulesched.run); explain's trials observe without binding anything.
"""

from __future__ import annotations

import logging
from typing import Protocol

from rulesched.cluster.store import ClusterStore
from rulesched.logs import VERBOSE
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler import gang
from rulesched.scheduler.framework import Binding, Code, CycleResult


def decision(logger: logging.Logger, result: CycleResult) -> None:
    """A cycle's outcome for the log at VERBOSE (kube-scheduler's V(2)): the node and how many
    nodes were evaluated and found feasible, or the unschedulable message and what preemption
    did (the nominated node, the victims)."""
    pod = result.pod
    if result.code is Code.SCHEDULED:
        extra = {"pod": pod.key, "node": result.node, "evaluated": result.evaluated, "feasible": result.feasible}
        logger.log(VERBOSE, "scheduled", extra=extra)
        return
    preemption = result.preemption
    victims = ",".join(v.key for v in preemption.victims) if preemption is not None else ""
    nominated = preemption.nominated if preemption is not None else None
    extra = {"pod": pod.key, "reason": result.message, "nominated": nominated, "victims": victims}
    logger.log(VERBOSE, "unschedulable", extra=extra)


class Binder(Protocol):
    def bind(self, binding: Binding) -> bool | None:
        """Bind the pod (already assumed on ``binding.node``). True: bound, and final (the binder
        is the cluster, as the simulator's is); False: refused (the pod is retried); None: under
        way, the outcome comes later through :meth:`Scheduler.binding_finished`."""
        ...


class Evictor(Protocol):
    """Takes victims away. An evictor whose victims leave later, each deletion reported as a
    cluster event (the API server's), says so with a class attribute ``at_once = False``; one
    without it removes them from the store at once (the simulators)."""

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        """Evict ``pod`` for ``preemptor`` (for ``group``, when a workload API group preempts)."""


class Observer:
    """What happened to pods, for reports, events and metrics. The methods do nothing here."""

    def attempted(self, result: CycleResult) -> None:
        """A cycle ended (``result.preemption`` says what preemption did, if it ran)."""

    def bound(self, pod: Pod, node: str) -> None:
        """The pod's binding succeeded."""

    def bind_failed(self, pod: Pod, node: str, reason: str) -> None:
        """The pod's binding failed; it will be retried."""

    def cycle_failed(self, pod: Pod, message: str, seconds: float) -> None:
        """The pod's cycle ended in an error after ``seconds`` (its deadline passed: ``message``
        says so, naming the rule); it will be retried with backoff."""

    def group_attempted(self, outcome: gang.GroupOutcome, seconds: float) -> None:
        """A pod group's attempt ended after ``seconds`` (placed, or not: ``outcome.message``)."""

    def nominations_ended(self, pods: list[Pod]) -> None:
        """These pending pods lost their nominated node: their preemption found no node any
        more, or a higher-priority preemptor took the node."""


class StoreEvictor:
    """Eviction into the store itself: the victim is gone at once (no API server to ask)."""

    def __init__(self, store: ClusterStore) -> None:
        self.store = store

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.store.remove_pod(pod.key)
