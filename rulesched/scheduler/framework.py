"""The scheduling vocabulary: settings, outcomes as a closed set of codes, the message users see.

Outcomes are values, not exceptions, as in kube-scheduler's framework: a cycle ends
:attr:`Code.SCHEDULED`, :attr:`Code.UNSCHEDULABLE` (no node fits; maybe preemption helped) or
:attr:`Code.BIND_FAILED`. A node the pod does not fit has the status :attr:`Code.UNSCHEDULABLE`,
or :attr:`Code.UNSCHEDULABLE_AND_UNRESOLVABLE` when its first failing filter says evicting pods
cannot help there (the filter's ``unresolvable`` clause): preemption leaves those nodes alone.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from rulesched.model import Pod

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
MAX_NODE_SCORE = 100


# kube-scheduler's extension points, as its metrics name them, and the statuses they end with
# (rulesched's counterparts: PreFilter binds the rules to the pod, Filter walks the nodes,
# Score ranks the feasible ones, PostFilter is preemption, Reserve assumes the pod on its node,
# Bind writes the binding, and its volumes, through the API).
PRE_FILTER, FILTER, POST_FILTER, SCORE, RESERVE, BIND = "PreFilter", "Filter", "PostFilter", "Score", "Reserve", "Bind"
SUCCESS, ERROR = "Success", "Error"


class Code(Enum):
    SCHEDULED = "Scheduled"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"  # a node's status, never a cycle's
    BIND_FAILED = "BindFailed"


@dataclass(frozen=True)
class SchedulerSettings:
    """Built by the command line; every knob of the cycle and the queue."""

    percentage_of_nodes_to_score: int = 0  # 0: upstream's adaptive formula; 100: every node
    seed: int = 0
    explain: bool = False
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
    scheduler_name: str | None = None  # None: every pending pod
    # A table walk that meets at least this many stale nodes evaluates the rules over them as
    # columns (rulesched.lang.evaluation.columns) rather than node by node; 0 never does.
    columns_from: int = 32
    # The most nodes one step of a table walk takes (0: as many as the walk wants). numpy lets go
    # of the interpreter lock for operations on more than 500 elements; where other threads are
    # busy (the live scheduler's informers and binding workers) the walk then waits to get it
    # back, so the live scheduler keeps steps under that size. Results do not depend on it.
    walk_chunk: int = 0
    # Record each cycle's timing (CycleResult.timing) for metrics; and the per cent of cycles that
    # time each rule as well (kube-scheduler samples its plugin durations in 10). The simulator and
    # the extender, which export no such metrics, leave both off.
    timings: bool = False
    rule_metrics_sample_percent: int = 0
    # Give a cycle up this many seconds after it took its pod (the pod is retried with backoff
    # and an error naming the rule then running: rulesched.scheduler.cancel). None: never (the
    # simulator and `rulesched test`, whose answers must not depend on the machine's speed).
    cycle_deadline_seconds: float | None = None


def num_feasible_nodes_to_find(num_nodes: int, percentage: int) -> int:
    """kube-scheduler's numFeasibleNodesToFind."""
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE, 50 - num_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, num_nodes * percentage // 100)


@dataclass(frozen=True)
class Preemption:
    """What preemption did for a pod that fit nowhere."""

    nominated: str | None
    victims: tuple[Pod, ...] = ()
    message: str = ""  # upstream's "preemption: ..." post-filter message
    # False: the pod may not preempt now (PodEligibleToPreemptOthers), so a nomination it has
    # stays; True with no node nominated: no node would help, and a nomination it had ends.
    eligible: bool = True


@dataclass(slots=True)
class CycleTiming:
    """A cycle's times, for the live scheduler's metrics: when it began (``time.perf_counter``),
    how long each extension point took (point, status, seconds), the filtering and scoring (and
    preemption when nothing fit) alone, and on a sampled cycle each rule's seconds by
    (point, rule) (rulesched.lang.evaluation.timing)."""

    started: float
    phases: list[tuple[str, str, float]] = field(default_factory=list)
    algorithm_seconds: float = 0.0
    rule_seconds: dict[tuple[str, str], float] | None = None

    def phase(self, point: str, since: float, status: str = SUCCESS) -> float:
        """An extension point that began at ``since`` ended now; returns now."""
        now = time.perf_counter()
        self.phases.append((point, status, now - since))
        return now


@dataclass
class CycleResult:
    pod: Pod
    code: Code
    node: str | None = None
    num_nodes: int = 0
    evaluated: int = 0  # nodes the filters ran on (kube-scheduler's evaluatedNodes)
    feasible: int = 0  # of those, the nodes that passed (feasibleNodes)
    reasons: Counter[str] = field(default_factory=Counter)  # reason -> number of nodes
    preemption: Preemption | None = None
    filtered: dict[str, tuple[str, ...]] | None = None  # with explain: node -> reasons
    unresolvable: set[str] | None = None  # with explain: the filtered nodes preemption cannot help
    scores: dict[str, dict[str, int]] | None = None  # with explain: node -> rule -> score, total
    # The filters that rejected some node (first failing, per node), when no node fit:
    # kube-scheduler's UnschedulablePlugins, a rule name standing for a plugin's.
    rejected_by: frozenset[str] = frozenset()
    timing: CycleTiming | None = None  # with SchedulerSettings.timings

    @property
    def message(self) -> str:
        if self.code is Code.SCHEDULED:
            return f"Successfully assigned {self.pod.key} to {self.node}"
        message = fit_error(self.num_nodes, self.reasons)
        if self.preemption is not None and self.preemption.message:
            message += f" {self.preemption.message}"
        return message


def fit_error(num_nodes: int, reasons: Mapping[str, int]) -> str:
    """FitError.Error(): ``0/N nodes are available: <count reason>, ... sorted.``"""
    message = f"0/{num_nodes} nodes are available:"
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if histogram:
        message += " " + ", ".join(histogram) + "."
    return message
