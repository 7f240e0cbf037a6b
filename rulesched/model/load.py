"""Node load as measured: each node's cpu and memory usage (the ``metrics.k8s.io`` API, as
``kubectl top node`` shows it) and named metric values (Prometheus instant queries), each with the
time it was taken, as frozen values.

A :class:`LoadSnapshot` maps node names to :class:`NodeLoad` values; it is immutable, and a new one
replaces the last as a whole (the live sources publish one per read, files give one per run). Time
is seconds since the epoch. A value is a :class:`Sample` (or, for cpu and memory together, a
:class:`NodeUsage`): what was measured, when (``at``, the end of the window it covers) and over
how long (``window``: metrics-server's averaging window, a PromQL range).

Pods bound since a value was taken are not in it yet: :class:`Estimate` is what the scheduler
adds for them until the value catches up (see :mod:`rulesched.cluster.load`), and
:class:`EstimateRules` says how much each such pod adds (a share of its requests; a fixed amount
per named metric). :class:`NodeLoad`'s ``cpu_milli``, ``memory_bytes`` and :meth:`NodeLoad.metric`
are measured plus estimated: what rules will read.
Next stage: :mod:`rulesched.model.decode_load` reads them from files and API objects;
:mod:`rulesched.cluster.load` carries them in the store and its snapshots.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

NO_SAMPLES: Mapping[str, Sample] = MappingProxyType({})
NO_VALUES: Mapping[str, float] = MappingProxyType({})
# What rules read on a node without values: no usage, no metrics (both read 0, has() is false),
# and an age no guard accepts (about 32 years: a finite number, so reports and JSON can show it).
NO_USAGE: Mapping[str, int] = MappingProxyType({})
NO_METRICS: Mapping[str, float] = NO_VALUES
NEVER_MEASURED = 1e9
_MILLI = 1000
# A named metric's name: Prometheus's metric name characters (it is shown as a label value, in
# reports and, in rules, as a string key; nothing there needs quoting).
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
MAX_METRIC_NAME = 100
USAGE = "usage"  # the key of the cpu and memory usage among a node's values' ages


def metric_name_problem(name: object) -> str:
    """Why ``name`` cannot name a metric (``""``: it can)."""
    if not isinstance(name, str) or not name:
        return "expected a metric name (letters, digits, '_' and ':', not starting with a digit)"
    if len(name) > MAX_METRIC_NAME or METRIC_NAME.fullmatch(name) is None or name == USAGE:
        shown = name if len(name) <= 40 else name[:37] + "..."
        return f"{shown!r} is not a metric name (letters, digits, '_' and ':', not starting with a digit; not 'usage')"
    return ""


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured value, taken at ``at`` (seconds since the epoch) over ``window`` seconds."""

    value: float
    at: float
    window: float = 0.0


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """What the ``metrics.k8s.io`` API says a node uses: cpu in millicores, memory in bytes
    (either may be missing from a hand-written file), averaged over ``window`` up to ``at``."""

    cpu_milli: int | None
    memory_bytes: int | None
    at: float
    window: float = 0.0


@dataclass(frozen=True, slots=True)
class Estimate:
    """What pods bound since the values were taken add to them: ``pods`` counted in some value,
    their share of cpu and memory (added to the usage), and per named metric its addition."""

    pods: int = 0
    cpu_milli: int = 0
    memory_bytes: int = 0
    metrics: Mapping[str, float] = field(default_factory=lambda: NO_VALUES)


NO_ESTIMATE = Estimate()


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node's load: measured ``usage`` and ``metrics`` (name -> sample), and the
    ``estimate`` of the pods bound since. The properties are the sums rules read; a value not
    measured (or dropped as too old) is ``None`` however much is estimated."""

    usage: NodeUsage | None = None
    metrics: Mapping[str, Sample] = field(default_factory=lambda: NO_SAMPLES)
    estimate: Estimate = NO_ESTIMATE

    @property
    def cpu_milli(self) -> int | None:
        usage = self.usage
        if usage is None or usage.cpu_milli is None:
            return None
        return usage.cpu_milli + self.estimate.cpu_milli

    @property
    def memory_bytes(self) -> int | None:
        usage = self.usage
        if usage is None or usage.memory_bytes is None:
            return None
        return usage.memory_bytes + self.estimate.memory_bytes

    def metric(self, name: str) -> float | None:
        sample = self.metrics.get(name)
        if sample is None:
            return None
        return sample.value + self.estimate.metrics.get(name, 0.0)

    def ages(self, now: float) -> dict[str, float]:
        """Each value's age in seconds at ``now`` (never below 0): ``usage``, then each metric."""
        ages = {USAGE: max(0.0, now - self.usage.at)} if self.usage is not None else {}
        ages.update((name, max(0.0, now - sample.at)) for name, sample in self.metrics.items())
        return ages

    def age(self, now: float) -> float | None:
        """The oldest value's age at ``now``; None without values."""
        return max(self.ages(now).values(), default=None)

    def empty(self) -> bool:
        return self.usage is None and not self.metrics

    def fields(self, now: float) -> tuple[Mapping[str, int], Mapping[str, float], float]:
        """What rules read at ``now``: ``node.usage`` (quantities in milli-units: cpu, memory),
        ``node.metrics`` (name -> value) and ``node.metrics_age`` (the oldest value's age)."""
        usage: dict[str, int] = {}
        cpu, memory = self.cpu_milli, self.memory_bytes
        if cpu is not None:
            usage["cpu"] = cpu
        if memory is not None:
            usage["memory"] = memory * _MILLI
        metrics = {name: sample.value + self.estimate.metrics.get(name, 0.0) for name, sample in self.metrics.items()}
        age = self.age(now)
        return (
            MappingProxyType(usage) if usage else NO_USAGE,
            MappingProxyType(metrics) if metrics else NO_METRICS,
            NEVER_MEASURED if age is None else age,
        )


@dataclass(frozen=True, slots=True)
class EstimateRules:
    """How much a pod bound since a value was taken adds to it: ``cpu_percent`` and
    ``memory_percent`` of its requests (kube-scheduler's non-zero requests: 100m and 200Mi for a
    container asking none) to the usage, ``per_pod[NAME]`` to the metric NAME (none: nothing)."""

    cpu_percent: int = 100
    memory_percent: int = 100
    per_pod: Mapping[str, float] = field(default_factory=lambda: NO_VALUES)


DEFAULT_ESTIMATES = EstimateRules()


@dataclass(frozen=True)
class LoadSnapshot:
    """Every node's measured load at one moment, replaced whole. ``now`` is the time ages are
    counted at: 0 for values read from files (``simulate``, ``test``, ``diff``: ages and
    estimates do not depend on when they run, every ``at`` is minus the value's age), the wall
    clock when live sources published it (ages then stay as published until the next
    publication, one refresh interval at most: rules' cached answers stay true until then);
    None: the reader's clock. ``version`` orders the snapshots one producer made. ``live``: pods
    are placed on the reader's clock (the live sources'); otherwise at ``now`` (a file's values
    never catch up with the run's placements)."""

    nodes: Mapping[str, NodeLoad] = field(default_factory=lambda: MappingProxyType({}))
    version: int = 0
    estimates: EstimateRules = DEFAULT_ESTIMATES
    now: float | None = None
    live: bool = False

    def node(self, name: str) -> NodeLoad | None:
        return self.nodes.get(name)

    def metric_names(self) -> tuple[str, ...]:
        """The named metrics some node has, sorted."""
        return tuple(sorted({name for load in self.nodes.values() for name in load.metrics}))


NO_LOAD = LoadSnapshot()
