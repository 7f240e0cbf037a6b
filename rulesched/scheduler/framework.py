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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rulesched.engine import EngineSettings
from rulesched.errors import ConfigError
from rulesched.lang import Term
from rulesched.model import Pod
from rulesched.scheduler.reasons import Reason, pod_reasons
from rulesched.semantics.volume_binding import Decision

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
MAX_NODE_SCORE = 100
# DefaultPreemptionArgs' defaults: how many candidate nodes a preemption's dry runs look for
MIN_CANDIDATE_NODES_PERCENTAGE = 10
MIN_CANDIDATE_NODES_ABSOLUTE = 100


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
class Status:
    """A node's verdict for a pod that does not fit there (upstream's framework.Status from a
    Filter plugin): the filter ``rule`` that failed it, its ``reasons``, and whether evicting
    pods cannot help there (the rule's ``unresolvable`` clause held on the node)."""

    rule: str
    reasons: tuple[str, ...]
    unresolvable: bool = False

    @property
    def code(self) -> Code:
        return Code.UNSCHEDULABLE_AND_UNRESOLVABLE if self.unresolvable else Code.UNSCHEDULABLE

    @property
    def message(self) -> str:
        """The reasons as one line (the rule's name when it gave none)."""
        return ", ".join(self.reasons) or self.rule


@dataclass(frozen=True)
class Binding:
    """What the binder receives once a cycle placed a pod (upstream's Bind extension point gets
    the pod, the node and the cycle's state): the pod as assumed on ``node``, the digest of the
    rule set that chose it (for the pod's event and the binder's logs), and VolumeBinding's
    decisions for its claims, the volume writes to make before the binding (their API patches are
    the binder's: :func:`rulesched.kube.volumes.writes_for`)."""

    pod: Pod
    node: str
    rules: str = ""
    volumes: tuple[Decision, ...] = ()
    # DynamicResources' PreBind: the claims the assumption changed (with the allocations and the
    # pod in reservedFor), and the keys of those it allocated (the rest it only joined)
    claims: tuple[Any, ...] = ()
    allocated: frozenset[str] = frozenset()
    # the request mappings of the claim made for its DRA-served extended resources (the claim is
    # the one ``pod.extended_claim`` names: to create, then allocate like the others)
    extended: tuple[Any, ...] = ()


@dataclass(frozen=True)
class SchedulerSettings:
    """Built by the command line; every knob of the cycle and the queue."""

    percentage_of_nodes_to_score: int = 0  # 0: upstream's adaptive formula; 100: every node
    seed: int = 0
    explain: bool = False  # node by node, every node's reasons and scores kept (see `explanation`)
    initial_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 10.0
    scheduler_name: str | None = None  # None: every pending pod
    # The batch engine's budgets and thresholds (rulesched.engine.settings), among them the
    # walk's: ``columns_from`` (from how many stale nodes rules go as columns) and ``walk_chunk``
    # (the most nodes one step of a table walk takes; the live scheduler's 448).
    engine: EngineSettings = EngineSettings()
    # Record each cycle's timing (CycleResult.timing) for metrics; and the per cent of cycles that
    # time each rule as well (kube-scheduler samples its plugin durations in 10). The simulator and
    # the extender, which export no such metrics, leave both off.
    timings: bool = False
    rule_metrics_sample_percent: int = 0
    # What each cycle explains of itself for reports (``simulate --explain``): EXPLAIN_SUMMARY,
    # the best nodes' scores and the filtered nodes grouped by reason, or EXPLAIN_FULL, every
    # evaluated node's reasons and scores too (CycleResult.explanation). Computed from the
    # cycle's own walk after its pick, which does not change, and timed apart
    # (CycleResult.explain_seconds). (``explain`` is the node-by-node walk that keeps every
    # node's answers: ``rulesched test``, and the reference the table walk is tested against.)
    explanation: str = ""
    # Explain the cycles that find no node (EXPLAIN_SUMMARY's reasons, timed apart like it) even
    # without ``explanation``: the reason codes `run` puts on its FailedScheduling events and
    # metrics (CycleResult.reason_codes).
    diagnose: bool = False
    # Give a cycle up this many seconds after it took its pod (the pod is retried with backoff
    # and an error naming the rule then running: rulesched.scheduler.cancel). None: never (the
    # simulator and `rulesched test`, whose answers must not depend on the machine's speed).
    cycle_deadline_seconds: float | None = None
    # DefaultPreemptionArgs: preemption dry-runs the potential nodes from a random offset until it
    # has at least this share of them (per cent) or this many candidates, whichever is more
    # (rulesched.scheduler.preemption; checked by candidate_sampling_errors).
    min_candidate_nodes_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE
    # The victims a PodDisruptionBudget selects are evicted through the Eviction API, which refuses
    # an eviction violating the budget (``run --evict-victims`` budgeted, the default, or all): a
    # preemption candidate the store says would violate one is futile and is not taken
    # (rulesched.scheduler.preemption). False: victims are deleted whatever the budgets, as
    # kube-scheduler deletes them (the simulator; ``--evict-victims=none``).
    budgets_refuse: bool = False


EXPLAIN_SUMMARY, EXPLAIN_FULL = "summary", "full"


def num_feasible_nodes_to_find(num_nodes: int, percentage: int, profile: int | None = None) -> int:
    """kube-scheduler's numFeasibleNodesToFind: how many feasible nodes end a cycle's walk.
    ``percentage`` is the global percentageOfNodesToScore; ``profile``, a profile's own, replaces
    it when set (its 0 too). 0 is the adaptive percentage: 50 less one per 125 nodes, 5 at least.
    Never fewer than 100 nodes (or all of them, when fewer)."""
    if profile is not None:
        percentage = profile
    if num_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_nodes
    if percentage <= 0:
        percentage = max(MIN_FEASIBLE_NODES_PERCENTAGE, 50 - num_nodes // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, num_nodes * percentage // 100)


def num_candidates(num_nodes: int, percentage: int, absolute: int) -> int:
    """DefaultPreemption's calculateNumCandidates: how many candidates a preemption's dry runs
    look for among ``num_nodes`` potential nodes: ``percentage`` of them (rounded down) or
    ``absolute``, whichever is more, and never more than there are."""
    return min(max(num_nodes * percentage // 100, absolute), num_nodes)


def candidate_sampling_errors(percentage: int, absolute: int) -> list[str]:
    """ValidateDefaultPreemptionArgs: the percentage in 0..100, the absolute at least 0, and not
    both 0 (no candidate would ever be looked for). One message per problem, naming the field."""
    errors = []
    if not 0 <= percentage <= 100:
        errors.append(f"min_candidate_nodes_percentage: {percentage} is not in 0..100")
    if absolute < 0:
        errors.append(f"min_candidate_nodes_absolute: {absolute} is below 0")
    if percentage == 0 and absolute == 0:
        errors.append("min_candidate_nodes_percentage and min_candidate_nodes_absolute cannot both be 0")
    return errors


def check_percentage_of_nodes_to_score(value: object, field: str = "percentage_of_nodes_to_score") -> None:
    """ValidateKubeSchedulerConfiguration's percentageOfNodesToScore: a whole number in 0..100
    (0: the adaptive percentage), as every other percentage is checked; ConfigError naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{field}: expected a whole number 0..100, got {value!r}")
    if not 0 <= value <= 100:
        raise ConfigError(f"{field}: {value} is not in 0..100")


def check_sampling(percentage: int, absolute: int) -> None:
    """ConfigError naming the fields when :func:`candidate_sampling_errors` finds any."""
    errors = candidate_sampling_errors(percentage, absolute)
    if errors:
        raise ConfigError("; ".join(errors))


@dataclass(frozen=True)
class Preemption:
    """What preemption did for a pod that fit nowhere."""

    nominated: str | None
    victims: tuple[Pod, ...] = ()
    message: str = ""  # upstream's "preemption: ..." post-filter message
    # False: the pod may not preempt now (PodEligibleToPreemptOthers), so a nomination it has
    # stays; True with no node nominated: no node would help, and a nomination it had ends.
    eligible: bool = True
    pdb_violations: int = 0  # the chosen victims' PodDisruptionBudget violations (for the metric)
    # no node nominated, and some candidate was dropped because the Eviction API would refuse
    # its victims: worth trying again when a budget changes
    futile: bool = False


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
    # The CPU the cycle took on its thread (``time.thread_time``): without the waits for a core
    # or for the interpreter lock that the times above include (rulesched's own metric).
    cpu_seconds: float = 0.0

    def phase(self, point: str, since: float, status: str = SUCCESS) -> float:
        """An extension point that began at ``since`` ended now; returns now."""
        now = time.perf_counter()
        self.phases.append((point, status, now - since))
        return now


@dataclass(frozen=True)
class ReasonGroup:
    """Filtered nodes failing with one reason (a node with two reasons is in both groups)."""

    reason: str
    nodes: int
    unresolvable: int  # of those, the nodes preemption cannot help
    names: tuple[str, ...]  # the first of them in walk order (at most Explanation.named)
    # The values of the domain and cluster aggregates the failing filter read, each distinct
    # set of them once (``app_here = 3 in topology.kubernetes.io/zone=a, app_fewest = 1``).
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoredNode:
    name: str
    values: tuple[int, ...]  # each score rule's normalised value, in Explanation.rules order
    total: int  # the weighted sum the cycle ranks by
    # The node load the rules read (node.usage, node.metrics, node.metrics_age), as reports show
    # it: "cpu" (millicores), "memory" (bytes), each metric by name, "age" (seconds); None: the
    # node has none (or the cycle's walk did not keep its nodes).
    load: Mapping[str, float] | None = None
    # On the best TERM_NODES nodes (rulesched.scheduler.explanation): each score rule built from
    # lets -> the lets it read there (rulesched.lang.evaluation.terms); None: not kept.
    terms: Mapping[str, tuple[Term, ...]] | None = None


@dataclass(frozen=True)
class Explanation:
    """One cycle, explained compactly: how many nodes the filters ran on, the filtered ones
    grouped by reason (most nodes first), and the best scored nodes (best first: highest total,
    the chosen node first among equals, then by name). ``failed`` and ``unresolvable_nodes``
    (every filtered node, in walk order) and ``best`` holding every scored node come with
    EXPLAIN_FULL only."""

    evaluated: int
    filtered: int
    groups: tuple[ReasonGroup, ...]
    unresolvable: int
    unresolvable_names: tuple[str, ...]
    scored: int
    rules: tuple[str, ...]  # the score rules applied
    best: tuple[ScoredNode, ...]
    failed: Mapping[str, tuple[str, ...]] | None = None
    unresolvable_nodes: frozenset[str] | None = None
    # The filtered nodes' reasons as codes (rulesched.scheduler.reasons), by rule and message,
    # each with its node counts and the smallest shortfall among them
    codes: tuple[Reason, ...] = ()

    def scores(self, nodes: Sequence[ScoredNode] | None = None) -> dict[str, dict[str, int]]:
        """``best`` (or ``nodes``) as node -> rule -> normalised score, and ``total``."""
        rules = self.rules
        out = {}
        for node in self.best if nodes is None else nodes:
            entry = dict(zip(rules, node.values, strict=True))
            entry["total"] = node.total
            out[node.name] = entry
        return out


@dataclass(frozen=True)
class Trial:
    """One placement a pod group was tried in (topology-aware scheduling), for explanations."""

    group: str  # the group's namespace/name
    domain: Mapping[str, str]
    fit: bool
    placed: int  # members placed there (a composite: its children that fit)
    message: str  # why it did not fit ("" when it did)
    seconds: float = 0.0  # how long the trial took (scheduler_placement_evaluation_duration_seconds)


@dataclass(frozen=True)
class GroupDetail:
    """What became of a workload API member's group in its attempt: ``simulate --explain`` and
    ``explain`` show it beside the pod's own walk."""

    group: str  # the root group's namespace/name
    kind: str  # PodGroup or CompositePodGroup
    policy: str  # "gang minCount 3", "basic", "gang minGroupCount 2"
    members: int  # pending members attempted (every leaf's)
    fit: int  # of those, how many fit before the group was decided (given back when it failed)
    before: int  # members already on nodes
    placed: bool
    outcome: str  # the group's status message ("" when placed)
    domain: Mapping[str, str]  # the placement chosen (topology-aware), empty otherwise
    trials: tuple[Trial, ...] = ()

    def lines(self) -> list[str]:
        verdict = "placed" if self.placed else f"not placed: {self.outcome or 'no member newly fit'}"
        head = (
            f"group {self.group} ({self.kind}, {self.policy}): {self.fit} of {self.members} pending members fit, "
            f"{self.before} already placed; {verdict}"
        )
        out = [head]
        if self.domain:
            out.append("  domain chosen: " + ", ".join(f"{k}={v}" for k, v in self.domain.items()))
        for trial in self.trials:
            where = ", ".join(f"{k}={v}" for k, v in trial.domain.items())
            result = "fits" if trial.fit else trial.message
            out.append(f"  tried {trial.group} in {where}: {result}")
        return out

    def json(self) -> dict[str, object]:
        return {
            "group": self.group,
            "kind": self.kind,
            "policy": self.policy,
            "members": self.members,
            "fit": self.fit,
            "before": self.before,
            "placed": self.placed,
            "outcome": self.outcome,
            "domain": dict(self.domain),
            "trials": [
                {"group": t.group, "domain": dict(t.domain), "fit": t.fit, "placed": t.placed, "message": t.message}
                for t in self.trials
            ],
        }


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
    # audit-mode (shadow) filters that would have rejected the node chosen (never enforced)
    shadow_rejected: tuple[str, ...] = ()
    timing: CycleTiming | None = None  # with SchedulerSettings.timings
    explanation: Explanation | None = None  # with SchedulerSettings.explanation, when nodes were evaluated
    explain_seconds: float = 0.0  # the time that took (not part of the cycle's own work)
    # A gang member's (rulesched.scheduler.gang): its group's key and what became of the group
    # (set when the group was not placed: then ``member`` says what this pod alone found).
    group: str = ""
    group_message: str = ""
    # DynamicResources' Reserve for the chosen node: the claims' allocations (claim key ->
    # allocation), the claims to reserve for the pod, as the cycle's Filter found them, and the
    # claim to make for its DRA-served extended resources with its mappings (or None)
    claims: tuple[Mapping[str, Any], tuple[str, ...], Any] | None = None
    fitted: str | None = None  # the node the member fit on before its group was given up
    # A workload API member's (rulesched.scheduler.workloads): the message kube-scheduler writes
    # for it (FailedScheduling, PodScheduled), and whether it was held before any cycle (its
    # group short of members, or unseen: upstream's PreEnqueue, which reports nothing).
    status_message: str = ""
    waiting: bool = False
    group_detail: GroupDetail | None = None

    @property
    def message(self) -> str:
        if self.code is Code.SCHEDULED:
            return f"Successfully assigned {self.pod.key} to {self.node}"
        if self.status_message:
            return self.status_message
        if self.group_message:
            return f"{self.group_message} This pod: {self.member}"
        return self.member

    @property
    def outcome(self) -> str:
        """``scheduled`` (a node fitted), ``nominated`` (preemption chose victims) or
        ``unschedulable``: the kinds of cycle whose costs differ most (a failing cycle also works
        out why, and preemption dry-runs nodes)."""
        if self.code is Code.SCHEDULED:
            return "scheduled"
        if self.preemption is not None and self.preemption.nominated is not None:
            return "nominated"
        return "unschedulable"

    def reason_codes(self) -> tuple[Reason, ...]:
        """Why it is not placed, as codes (rulesched.scheduler.reasons): the pod's or its
        group's own (gated, waiting for its group, a gang short of members) from its message,
        then its nodes' from its cycle's explanation (with ``explanation`` or ``diagnose``)."""
        if self.code is Code.SCHEDULED:
            return ()
        own = pod_reasons(self.message)
        nodes = self.explanation.codes if self.explanation is not None else ()
        alone = not (self.waiting or self.group_message or self.status_message)
        if not own and not nodes and self.num_nodes == 0 and alone:  # (upstream's ErrNoNodesAvailable)
            own = pod_reasons("no nodes available to schedule pods")
        return (*own, *nodes)

    @property
    def member(self) -> str:
        """What the pod's own cycle found (for a gang member, apart from its group's outcome)."""
        if self.fitted is not None:
            return f"fit on node {self.fitted}, released with its group."
        if self.group_message and not self.num_nodes:
            return "not attempted."
        message = fit_error(self.num_nodes, self.reasons)
        if self.preemption is not None and self.preemption.message:
            message += f" {self.preemption.message}"
        return message


def skip_deleting(pod: Pod) -> str:
    """What kube-scheduler says of a pending pod it skips because it is being deleted
    (``metadata.deletionTimestamp`` set): it never attempts one (skipPodSchedule)."""
    return f"skip schedule deleting pod: {pod.key}"


def fit_error(num_nodes: int, reasons: Mapping[str, int]) -> str:
    """FitError.Error(): ``0/N nodes are available: <count reason>, ... sorted.``"""
    message = f"0/{num_nodes} nodes are available:"
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    if histogram:
        message += " " + ", ".join(histogram) + "."
    return message
