"""What operators read: Prometheus metrics (served with ``/healthz`` and ``/readyz`` by
:mod:`rulesched.run.ops_server`).

The metrics are kube-scheduler's (``pkg/scheduler/metrics``, client-go's request and leader
election metrics, the process collector): the same names, types, labels, buckets and help text,
so dashboards and alerts written for kube-scheduler read rulesched unchanged. A scheduling
attempt ends ``scheduled`` only once its binding succeeded, ``error`` when the binding failed,
``unschedulable`` when no node fit. Where rulesched's parts differ from kube-scheduler's the
metric says what it measures: a rule stands for a plugin (``plugin="NodeResourcesFit"`` is the
rule of that name), and the extension points are the phases of a rulesched cycle (see
:mod:`rulesched.scheduler.framework`). rulesched's own metrics are prefixed ``rulesched_``
(the active rule set as an info metric, rule reloads). Pending and unschedulable pods and the
leader's status are read from the queue and the elector when scraped. ``profile`` is the
scheduler name of the profile that scheduled the pod (kube-scheduler's label): with several
profiles in one process, each has its own series; rulesched's own rule metrics carry it too.

Every metric lives in the :class:`Metrics` object's own registry (:mod:`rulesched.metrics`:
no ``_created`` series), so two schedulers in one process (tests) never share one. The HTTP side
is :mod:`rulesched.run.ops_server`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client import Counter, Gauge, Histogram, Info, Summary
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from rulesched.metrics import (
    Labelled,
    Registry,
    RestClientMetrics,
    add_helper_process_collector,
    add_process_collector,
    alpha,
    beta,
    exponential_buckets,
    stable,
)
from rulesched.scheduler.audit import AuditReport
from rulesched.scheduler.framework import BIND, ERROR, POST_FILTER, SUCCESS, CycleResult
from rulesched.scheduler.reasons import Reason

ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)  # upstream: "all histograms start at 1 ms"
QUEUES = ("active", "backoff", "unschedulable", "gated")  # scheduler_pending_pods{queue}


GROUP_BUCKETS = tuple(0.001 * 2**i for i in range(15))  # ExponentialBuckets(0.001, 2, 15)


def attempts_label(attempts: int) -> str:
    """kube-scheduler's getAttemptsLabel: the count, capped at "15+" (bounded cardinality)."""
    return "15+" if attempts >= 15 else str(attempts)


class _Live:
    """The gauges read from the scheduler when scraped: pending pods by sub-queue, parked pods by
    the rule that failed them, whether this replica leads."""

    def __init__(self) -> None:
        self.pending: Callable[[], Mapping[str, int]] | None = None
        # (profile, rule) -> parked pods of that profile the rule failed
        self.unschedulable: Callable[[], Mapping[tuple[str, str], int]] | None = None
        self.leader: tuple[str, Callable[[], bool]] | None = None  # (lease name, leading?)
        self.entities: Callable[[], Mapping[tuple[str, str], int]] | None = None  # (queue, type) -> count
        self._rules_seen: set[tuple[str, str]] = set()  # once counted, a series stays, at 0, as upstream's
        self._lock = threading.Lock()

    def collect(self) -> Iterable[Metric]:
        pending = GaugeMetricFamily(
            "scheduler_pending_pods",
            stable(
                "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
                "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
                "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the "
                "number of unschedulable pods that the scheduler never attempted to schedule because "
                "they are gated."
            ),
            labels=["queue"],
        )
        counts = self.pending() if self.pending is not None else {}
        for queue in QUEUES:
            pending.add_metric([queue], counts.get(queue, 0))
        yield pending
        entities = GaugeMetricFamily(
            "scheduler_queued_entities",
            alpha(
                "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual "
                "pods that are not members of any podgroup) by the queue type. 'active' means number of "
                "entities in activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' "
                "means number of entities in unschedulableEntities that the scheduler attempted to "
                "schedule and failed; 'gated' is the number of unschedulable entities that the scheduler "
                "never attempted to schedule because they are gated."
            ),
            labels=["queue", "type"],
        )
        found = self.entities() if self.entities is not None else {}
        for queue in QUEUES:
            for kind in ("pod", "podgroup"):
                entities.add_metric([queue, kind], found.get((queue, kind), 0))
        yield entities
        rules = GaugeMetricFamily(
            "scheduler_unschedulable_pods",
            alpha(
                "The number of unschedulable pods broken down by plugin name. A pod will increment the "
                "gauge for all plugins that caused it to not schedule and so this metric have meaning "
                "only when broken down by plugin. (rulesched: plugin is the name of a filter rule, "
                "counted for the pods parked in the unschedulable queue that it rejected on some node.)"
            ),
            labels=["plugin", "profile"],
        )
        found = self.unschedulable() if self.unschedulable is not None else {}
        with self._lock:
            self._rules_seen.update(found)
            seen = sorted(self._rules_seen)
        for profile, rule in seen:
            rules.add_metric([rule, profile], found.get((profile, rule), 0))
        yield rules
        if self.leader is not None:
            name, leading = self.leader
            status = GaugeMetricFamily(
                "leader_election_master_status",
                alpha(
                    "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                    "backup, 1 indicates master. 'name' is the string used to identify the lease. "
                    "Please make sure to group by name."
                ),
                labels=["name"],
            )
            status.add_metric([name], 1.0 if leading() else 0.0)
            yield status


class Metrics:
    """kube-scheduler's metrics for one scheduler process serving ``profiles`` (scheduler names)."""

    def __init__(self, profiles: Sequence[str]) -> None:
        self.profiles = tuple(profiles)
        self.registry = Registry()
        r = self.registry.metrics
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            stable(
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
                "not be scheduled, while 'error' means an internal scheduler problem."
            ),
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            stable("Scheduling attempt latency in seconds (scheduling algorithm + binding)"),
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.algorithm = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            alpha("Scheduling algorithm latency in seconds"),
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        # kube-scheduler's pod group metrics (GenericWorkload, alpha): one attempt per group
        self.group_attempts = Counter(
            "scheduler_podgroup_schedule_attempts",
            alpha(
                "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod "
                "group could not be scheduled, while 'error' means an internal scheduler problem."
            ),
            ["result", "profile"],
            registry=r,
        )
        self.group_attempt_duration = Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            alpha("Pod group scheduling attempt latency in seconds"),
            ["result", "profile"],
            buckets=GROUP_BUCKETS,
            registry=r,
        )
        self.group_algorithm = Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            alpha("Pod group scheduling algorithm latency in seconds"),
            buckets=GROUP_BUCKETS,
            registry=r,
        )
        self.sli = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            beta(
                "E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
                "queue and might involve multiple scheduling attempts."
            ),
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            stable("Number of attempts to successfully schedule a pod."),
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            stable("Total preemption attempts in the cluster till now"),
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            stable("Number of selected preemption victims"),
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        self.incoming = Counter(
            "scheduler_queue_incoming_pods",
            stable("Number of pods added to scheduling queues by event and queue type."),
            ["queue", "event"],
            registry=r,
        )
        # --- 1.36-1.37 (pkg/scheduler/metrics/metrics.go at v1.37.2) --------------------------------
        self.incoming_entities = Counter(
            "scheduler_queue_incoming_entities",
            alpha(
                "Number of scheduling entities added to scheduling queues by event, queue type, and entity "
                "type. Entity types are either 'pod' (for individual pods that are not members of any "
                "podgroup) or 'podgroup'. (rulesched: a pod group's members enter the queue one by one, "
                "each counted as a 'podgroup' entry.)"
            ),
            ["queue", "event", "type"],
            registry=r,
        )
        self.after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            alpha(
                "Number of pods that were successfully scheduled after being flushed from "
                "unschedulableEntities due to timeout. This metric helps detect potential queueing hint "
                "misconfigurations or event handling issues."
            ),
            registry=r,
        )
        self.workload_preemption_attempts = Counter(
            "scheduler_workload_preemption_attempts",
            alpha("Total preemption attempts initiated by workload (including pod groups) in the cluster till now."),
            ["result"],
            registry=r,
        )
        self.workload_preemption_victims = Histogram(
            "scheduler_workload_preemption_victims",
            alpha("Number of pod preemption victims caused by workload preemption."),
            buckets=exponential_buckets(1, 2, 11),
            registry=r,
        )
        self.workload_disruptions = Histogram(
            "scheduler_preemption_workload_disruptions",
            alpha(
                "Number of workload preemption units being preempted. A single preemption unit can be all "
                "pods in a pod group (in case of DisruptionMode=all), or a single pod (in case of "
                "DisruptionMode=single)."
            ),
            ["preemptor"],
            buckets=exponential_buckets(1, 2, 11),
            registry=r,
        )
        self.preemption_evaluation = Histogram(
            "scheduler_preemption_evaluation_duration_seconds",
            alpha("Duration in seconds for identifying the target preemption victims."),
            ["preemptor", "result"],
            buckets=exponential_buckets(0.001, 2, 16),
            registry=r,
        )
        self.preemption_execution = Histogram(
            "scheduler_preemption_execution_duration_seconds",
            alpha(
                "Duration in seconds for preempting the target preemption victims. With async preemption "
                "enabled, preemption execution does not block the scheduling of other pods."
            ),
            ["preemptor", "result"],
            buckets=exponential_buckets(0.001, 2, 16),
            registry=r,
        )
        self.pdb_violations = Counter(
            "scheduler_preemption_pdb_violations",
            alpha("Total number of pod disruption budget violations caused by preemption."),
            ["preemptor"],
            registry=r,
        )
        self.generated_placements = Counter(
            "scheduler_generated_placements",
            alpha("Number of candidate placements generated when scheduling pod groups."),
            ["profile"],
            registry=r,
        )
        self.placement_evaluations = Counter(
            "scheduler_placement_evaluations",
            alpha(
                "Number of candidate placements evaluated when scheduling pod groups, by result. 'feasible' "
                "means the pod group fit into the placement, while 'infeasible' means it did not."
            ),
            ["result", "profile"],
            registry=r,
        )
        self.placement_duration = Histogram(
            "scheduler_placement_evaluation_duration_seconds",
            alpha(
                "Latency in seconds of evaluating a single candidate placement when scheduling pod groups, "
                "by result. 'feasible' means the pod group fit into the placement, while 'infeasible' means "
                "it did not."
            ),
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.extension_points = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            stable(
                "Latency for running all plugins of a specific extension point. (rulesched: PreFilter "
                "binds the rules to the pod, Filter walks the nodes, Score ranks the feasible ones, "
                "PostFilter is preemption, Reserve assumes the pod on its node, Bind writes its volumes "
                "and the binding through the API.)"
            ),
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.plugins = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            alpha(
                "Duration for running a plugin at a specific extension point. (rulesched: plugin is a "
                "rule, timed in one scheduling cycle out of ten as upstream samples; one observation "
                "per rule and cycle: the rule's time over all the nodes it evaluated, which may be one "
                "column evaluation over many nodes.)"
            ),
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=r,
        )
        self.rules = Info(
            "rulesched_rules", "The active rule set of each profile: its hash and files.", ["profile"], registry=r
        )
        self.reloads = Counter(
            "rulesched_rules_reloads", "Rule reloads by profile and result.", ["result", "profile"], registry=r
        )
        for profile in self.profiles:  # (each profile's series from the start, at 0)
            for result in ("success", "error"):
                self.reloads.labels(result=result, profile=profile)
        self.load_reads = Counter(
            "rulesched_load_source_reads",
            "Reads of the node load sources (--config load_sources) by source and result.",
            ["source", "result"],
            registry=r,
        )
        # (the children the scheduler observes on every pod, looked up once each)
        self._points, self._plugins = Labelled(self.extension_points), Labelled(self.plugins)
        self._attempts, self._attempt_duration = Labelled(self.attempts), Labelled(self.attempt_duration)
        self._sli, self._incoming = Labelled(self.sli), Labelled(self.incoming)
        self.shadow_rejections = Counter(
            "rulesched_shadow_rejections",
            "Scheduling decisions an audit-mode (shadow) filter would have rejected: the node chosen fails it. "
            "Audit-mode filters never reject; this is what enforcing one would have changed.",
            ["rule", "profile"],
            registry=r,
        )
        self.cycle_cpu = Summary(
            "rulesched_scheduling_cycle_cpu_seconds",
            "CPU seconds each scheduling cycle took on the scheduling thread (its waits for a core "
            "or for the interpreter lock left out), by outcome: scheduled (a node fitted), nominated "
            "(preemption chose victims) or unschedulable.",
            ["outcome", "profile"],
            registry=r,
        )
        self._cycle_cpu = Labelled(self.cycle_cpu)
        self.unschedulable_reasons = Counter(
            "rulesched_unschedulable_reasons",
            "Unschedulable attempts by each reason code they were refused for (docs/explain-and-audit.md, "
            "'Reason codes') and the filter rule reporting it ('' for a pod's or group's own reason): an "
            "attempt counts once per distinct code and rule. Both labels come from closed sets (the codes, "
            "the rule set's names); the resource, taint or domain never is a label.",
            ["code", "rule", "profile"],
            registry=r,
        )
        self.audit_violations = Gauge(
            "rulesched_audit_violations",
            "Running pods that fail the filter on their node, as of the last audit (--audit-interval).",
            ["rule"],
            registry=r,
        )
        self.audit_shadow = Gauge(
            "rulesched_audit_shadow_rejections",
            "Running pods an audit-mode filter would reject on their node, as of the last audit.",
            ["rule"],
            registry=r,
        )
        self.audit_runs = Counter(
            "rulesched_audit_runs", "Audits of the running pods, by result (success, error).", ["result"], registry=r
        )
        self.rest = RestClientMetrics(self.registry)
        self.live = _Live()
        self.registry.add(self.live)
        add_process_collector(self.registry)
        # The binding process's own (rulesched_binding_process_cpu_seconds_total, ..._resident_memory_bytes...)
        self.binding_pid: Callable[[], int | None] = lambda: None
        add_helper_process_collector(self.registry, "rulesched_binding", lambda: self.binding_pid())

    def set_rules(self, profile: str, digest: str, files: Iterable[str]) -> None:
        self.rules.labels(profile=profile).info({"hash": digest, "files": ",".join(files)})

    def load_read(self, source: str, ok: bool) -> None:
        """(On a load source's poller thread: counters are thread-safe.)"""
        self.load_reads.labels(source=source, result="success" if ok else "error").inc()

    def audited(self, report: AuditReport | None) -> None:
        """An audit ended (None: it failed): each rule's violating pods replace the last counts."""
        if report is None:
            self.audit_runs.labels(result="error").inc()
            return
        self.audit_runs.labels(result="success").inc()
        for gauge, pick in ((self.audit_violations, "violations"), (self.audit_shadow, "shadow")):
            counts: dict[str, int] = {}
            for p in report.pods:
                for v in getattr(p, pick):
                    counts[v.rule] = counts.get(v.rule, 0) + 1
            gauge.clear()
            for rule, count in counts.items():
                gauge.labels(rule=rule).set(count)

    def reloaded(self, profile: str, ok: bool) -> None:
        self.reloads.labels(result="success" if ok else "error", profile=profile).inc()

    # --- what the scheduler reports ------------------------------------------------------------------
    def cycle(self, result: CycleResult) -> None:
        """A scheduling cycle ended: its extension points, its algorithm time, its rules' times
        when sampled, its preemption."""
        profile, timing = result.pod.scheduler_name, result.timing
        for rule in result.shadow_rejected:
            self.shadow_rejections.labels(rule=rule, profile=profile).inc()
        if timing is not None:
            for point, status, seconds in timing.phases:
                self._points(point, status, profile).observe(seconds)
                if point == POST_FILTER:
                    self.preemption_evaluation.labels(preemptor="pod", result=status).observe(seconds)
            self.algorithm.observe(timing.algorithm_seconds)
            for (point, rule), seconds in (timing.rule_seconds or {}).items():
                self._plugins(rule, point, SUCCESS).observe(seconds)
        preemption = result.preemption
        if timing is not None and timing.cpu_seconds:
            self._cycle_cpu(result.outcome, profile).observe(timing.cpu_seconds)
        if preemption is not None:  # (PostFilter ran: upstream counts every run as an attempt)
            self.preemption_attempts.inc()
            if preemption.nominated is not None:  # (the executor's observeVictims)
                self.preemption_victims.observe(len(preemption.victims))
                if preemption.pdb_violations:
                    self.pdb_violations.labels(preemptor="pod").inc(preemption.pdb_violations)

    def reasons(self, profile: str, codes: Sequence[Reason]) -> None:
        """An unschedulable attempt's reasons as codes (rulesched.scheduler.reasons)."""
        for code, rule in dict.fromkeys((r.code.value, r.rule) for r in codes):
            self.unschedulable_reasons.labels(code=code, rule=rule, profile=profile).inc()

    def attempt(self, profile: str, result: str, seconds: float) -> None:
        """A scheduling attempt of ``profile`` ended (``scheduled``, ``unschedulable`` or
        ``error``) ``seconds`` after its cycle began."""
        self._attempts(result, profile).inc()
        self._attempt_duration(result, profile).observe(seconds)

    def group_attempt(self, profile: str, result: str, seconds: float) -> None:
        """A pod group's attempt ended (``scheduled``, ``unschedulable``, ``waiting_on_preemption``
        or ``error``) after ``seconds``."""
        self.group_attempts.labels(result=result, profile=profile).inc()
        self.group_attempt_duration.labels(result=result, profile=profile).observe(seconds)
        self.group_algorithm.observe(seconds)

    def workload_preemption(
        self, code: str, victims: int, disruptions: int, violations: int, seconds: float, preemptor: str = "podgroup"
    ) -> None:
        """Workload-aware preemption ran for a pod group (``code``: its status, e.g. Success).
        ``preemptor``: ``podgroup`` or ``compositepodgroup``, the executor's preemptor.Type()
        that labels the victims' figures (the evaluation's label is always ``podgroup``, as
        PodGroupEvaluator.evaluate writes it)."""
        self.workload_preemption_attempts.labels(result=code).inc()
        self.preemption_evaluation.labels(preemptor="podgroup", result=code).observe(seconds)
        if code == SUCCESS:
            self.workload_preemption_victims.observe(victims)
            if disruptions:
                self.workload_disruptions.labels(preemptor=preemptor).observe(disruptions)
            if violations:
                self.pdb_violations.labels(preemptor=preemptor).inc(violations)

    def preemption_executed(self, preemptor: str, result: str, seconds: float) -> None:
        """One preemption's victims all evicted (``success``) or some not (``error``), ``seconds``
        after the first eviction began (``preemptor``: ``pod``, ``podgroup``, ``compositepodgroup``)."""
        self.preemption_execution.labels(preemptor=preemptor, result=result).observe(seconds)

    def placements(self, profile: str, trials: Sequence[tuple[bool, float]]) -> None:
        """Topology-aware scheduling tried these placements: (fit?, seconds) each."""
        if trials:
            self.generated_placements.labels(profile=profile).inc(len(trials))
        for fit, seconds in trials:
            result = "feasible" if fit else "infeasible"
            self.placement_evaluations.labels(result=result, profile=profile).inc()
            self.placement_duration.labels(result=result, profile=profile).observe(seconds)

    def scheduled(self, attempts: int, queued_seconds: float | None) -> None:
        """A pod was bound after ``attempts`` attempts, ``queued_seconds`` after it first entered
        the active queue."""
        self.pod_attempts.observe(attempts)
        if queued_seconds is not None:
            self._sli(attempts_label(attempts)).observe(queued_seconds)

    def queued(self, queue: str, event: str) -> None:
        """A pod entered a sub-queue (the queue's ``incoming`` hook)."""
        self._incoming(queue, event).inc()

    def queued_entity(self, queue: str, event: str, kind: str) -> None:
        """An entity entered a sub-queue (``incoming_entities``): ``pod``, or ``podgroup`` for a
        member of a group."""
        self.incoming_entities.labels(queue=queue, event=event, type=kind).inc()

    def binding(self, profile: str, ok: bool, seconds: float) -> None:
        status = SUCCESS if ok else ERROR
        self._points(BIND, status, profile).observe(seconds)
