"""Node load in the cluster store: the latest measured :class:`~rulesched.model.load.LoadSnapshot`
and the estimates of pods placed since, as every snapshot of the store shows them.

Metrics lag: metrics-server averages usage over a window of tens of seconds, a PromQL ``rate``
over minutes, so a pod just bound is not in them yet, and without a correction a burst of pods
would all go to the node that looked coolest before the first of them started. As Trimaran's
TargetLoadPacking and Koordinator's LoadAware do, each pod the scheduler places
(:meth:`LoadState.bound`: assumed in ``run``, placed in ``simulate``) adds an estimate of its load to
its node's values until they catch up: until a value taken at least its ``window`` after the
binding (TargetLoadPacking counts a pod scheduled less than its metrics agent's reporting interval
before the metrics window's end; Koordinator LoadAware one assigned less than a report interval
before the NodeMetric's update time). How much a pod adds is the snapshot's
:class:`~rulesched.model.load.EstimateRules`: ``cpu_percent``/``memory_percent`` of its requests
(TargetLoadPacking adds the request itself, the default 100 here; Koordinator scales it by its
``estimatedScalingFactors``, cpu 85 and memory 70), counting kube-scheduler's non-zero defaults
(100m cpu, 200Mi memory) for a pod asking none, as Koordinator does; and a fixed amount per pod
for a named metric that configures one (nothing otherwise: a metric's unit is the query's).

A pod deleted, finished or whose binding failed takes its estimate with it. Estimates are kept
for at most :data:`ESTIMATE_HORIZON` seconds on a node without values (by then any value a source
brings back is newer than the binding). Pods other schedulers bind are not estimated: only this
scheduler's own placements are (Koordinator counts every assigned pod).

The store has one writer, which applies the values to its nodes' ``usage``, ``metrics`` and
``metrics_age`` (:meth:`LoadState.fields`): a new measurement changes the nodes whose values
changed (as a Node update does), a placed pod's estimate changes its node with the pod. Values
for nodes the store does not hold are never asked for: they are ignored.
Next stage: :mod:`rulesched.cluster.nodeinfo` holds what rules read.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rulesched.model import Pod
from rulesched.model.load import (
    NEVER_MEASURED,
    NO_ESTIMATE,
    NO_LOAD,
    NO_METRICS,
    NO_USAGE,
    Estimate,
    LoadSnapshot,
    NodeLoad,
    NodeUsage,
    Sample,
)

ESTIMATE_HORIZON = 600.0  # seconds an estimate is kept on a node without values
_MILLI = 1000


@dataclass(frozen=True, slots=True)
class BoundPod:
    """A pod the scheduler placed: when (seconds since the epoch, or the file snapshot's time),
    and its requests (non-zero defaults included)."""

    key: str
    at: float
    cpu_milli: int
    memory_bytes: int


def _pending(pods: tuple[BoundPod, ...], taken: float, window: float) -> list[BoundPod]:
    """The pods a value taken at ``taken`` over ``window`` does not hold yet: those bound no
    earlier than the start of its window (a pod bound while values were read from a file, at
    the file's time 0, is never in them)."""
    return [p for p in pods if taken <= p.at + window]


def estimate_for(load: NodeLoad, pods: tuple[BoundPod, ...], measured: LoadSnapshot) -> Estimate:
    """What ``pods`` (placed on the node) add to ``load``'s values, per value: the pods its value
    does not hold yet."""
    rules = measured.estimates
    counted: set[str] = set()
    cpu = memory = 0
    usage = load.usage
    if usage is not None:
        for pod in _pending(pods, usage.at, usage.window):
            counted.add(pod.key)
            cpu += round(pod.cpu_milli * rules.cpu_percent / 100)
            memory += round(pod.memory_bytes * rules.memory_percent / 100)
    metrics: dict[str, float] = {}
    for name, per_pod in rules.per_pod.items():
        sample = load.metrics.get(name)
        if sample is None:
            continue
        pending = _pending(pods, sample.at, sample.window)
        if pending:
            counted.update(p.key for p in pending)
            metrics[name] = per_pod * len(pending)
    if not counted:
        return NO_ESTIMATE
    return Estimate(len(counted), cpu, memory, MappingProxyType(metrics))


class LoadState:
    """The store's node load: measured values (:meth:`set_measured`, from the sources or a
    file) and the pods placed since (:meth:`bound`, :meth:`unbound`). Nothing is recorded until
    values are first set: a store without load sources pays nothing."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.measured: LoadSnapshot = NO_LOAD
        self.enabled = False
        self.generation = 0
        self._bound: dict[str, tuple[BoundPod, ...]] = {}  # node -> pods placed on it, oldest first
        self._where: dict[str, str] = {}  # pod key -> its node, for the pods in _bound

    def _now(self) -> float:
        """When a pod is placed now: the clock, unless the values are a file's (their time)."""
        fixed = self.measured.now
        return self.clock() if fixed is None or self.measured.live else fixed

    def _ages_at(self) -> float:
        """The time ages are counted at: the publication's (see LoadSnapshot.now)."""
        fixed = self.measured.now
        return self.clock() if fixed is None else fixed

    def _writable(self) -> dict[str, tuple[BoundPod, ...]]:
        self.generation += 1
        return self._bound

    def set_measured(self, snapshot: LoadSnapshot) -> None:
        """New measured values (replacing the last); estimates their values now hold are dropped."""
        self.enabled = True
        self.measured = snapshot
        now = self._now()
        bound = self._writable()
        for node, pods in list(bound.items()):
            load = snapshot.node(node)
            kept = tuple(p for p in pods if _still_pending(p, load, snapshot, now))
            if len(kept) != len(pods):
                for pod in pods:
                    if pod not in kept:
                        self._where.pop(pod.key, None)
                if kept:
                    bound[node] = kept
                else:
                    del bound[node]

    def bound(self, pod: Pod, node: str) -> None:
        """The scheduler placed ``pod`` on ``node`` (assumed, or placed in a simulation)."""
        if not self.enabled:
            return
        self.unbound(pod.key)
        requests = pod.nonzero_requests or pod.requests
        placed = BoundPod(pod.key, self._now(), requests.get("cpu", 0), -(-requests.get("memory", 0) // _MILLI))
        bound = self._writable()
        bound[node] = (*bound.get(node, ()), placed)
        self._where[pod.key] = node

    def unbound(self, key: str) -> None:
        """The pod is gone (deleted, finished, its binding failed): its estimate goes too."""
        node = self._where.pop(key, None)
        if node is None:
            return
        bound = self._writable()
        kept = tuple(p for p in bound.get(node, ()) if p.key != key)
        if kept:
            bound[node] = kept
        else:
            bound.pop(node, None)

    def fields(self, name: str) -> tuple[Mapping[str, int], Mapping[str, float], float]:
        """What rules read of node ``name``: its values plus the estimates of the pods placed
        on it since (:meth:`NodeLoad.fields`)."""
        load = self.measured.node(name)
        if load is None:
            return NO_USAGE, NO_METRICS, NEVER_MEASURED
        pods = self._bound.get(name)
        if pods:
            estimate = estimate_for(load, pods, self.measured)
            if estimate is not NO_ESTIMATE:
                load = dataclasses.replace(load, estimate=estimate)
        return load.fields(self._ages_at())


def _still_pending(pod: BoundPod, load: NodeLoad | None, snapshot: LoadSnapshot, now: float) -> bool:
    """Whether some value of the node may still lack the pod; with no value at all, until the
    horizon (any value that shows up later is newer than that)."""
    values: list[NodeUsage | Sample] = []
    if load is not None:
        if load.usage is not None:
            values.append(load.usage)
        values += [s for name, s in load.metrics.items() if name in snapshot.estimates.per_pod]
    if not values:
        return now - pod.at < ESTIMATE_HORIZON
    return any(value.at <= pod.at + value.window for value in values)
