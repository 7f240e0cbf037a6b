"""``rulesched run``: the scheduler on the Kubernetes API, one thread owning store and queue.

Informer threads (the :mod:`rulesched.mirror`) and binding workers (:mod:`rulesched.run.workers`)
put what they learn on one thread-safe queue and wake the scheduler's thread, which applies it
between cycles: the mirror writes nodes, bound pods, PodDisruptionBudgets and namespaces into the
store; pending pods that name one of its profiles' schedulers go into the scheduling queue
(updated in place, dropped when deleted or bound by someone else); binding outcomes into the
scheduler. Objects that do not decode are logged in one line and skipped; the loop never stops
for them.

Profiles (:mod:`rulesched.run.profiles`): each scheduler name has its own reloader and rules;
the store, the queue, the scheduler, the workers, leader election and the metrics are shared. A
profile without valid rules (a broken ConfigMap at start, no last good record) holds back only
its own pods; the process is ready once every profile has rules.

Pods bound by other schedulers count as used capacity; finished pods (Succeeded, Failed) and
deleted pods free their node; a cordoned or deleted node counts at once. Parked pods move back
when a node is added or changes in labels, taints, allocatable or schedulability, or a pod is
deleted (and after at most five minutes).

Stopping (SIGTERM, or the lease lost): the stop event is the scheduler's
:class:`rulesched.scheduler.cancel.Cancellation` too, so a cycle under way is given up at its
next check (its pod goes back to the queue, nothing assumed or bound); open watches are closed,
so informer threads end at once; bindings under way get the grace period; then the lease is
released and the process exits, waiting on no thread for long.
With leader election, the loop takes pods only while the elector :meth:`holds
<rulesched.run.leader.LeaderElector.holds>` the lease, and every write the workers make checks
it right before the call (fencing).
Next stage: :mod:`rulesched.scheduler.scheduler` schedules what the queue holds.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings, keep_loaded, let_go
from rulesched.errors import InputError
from rulesched.explain_service import ExplainService, LiveView, SnapshotHandOff
from rulesched.kube.api import KubeApi
from rulesched.kube.informer import Delta
from rulesched.kube.resources import PODGROUPS, WORKLOAD_API_GROUP, Resource, composite_pod_groups, workload_pod_groups
from rulesched.lang import RuleSet, RulesHandle, startup_warning
from rulesched.loadsources.poller import LoadSources
from rulesched.mirror import EVERYTHING, Mirror
from rulesched.model import Node, Pod, PriorityClass
from rulesched.model.groups import group_key
from rulesched.model.load import LoadSnapshot
from rulesched.reload import Reloader, ReloadOutcome, ReloadSettings, RulesSources
from rulesched.run.audit import PeriodicAudit
from rulesched.run.binder import BindingProcess
from rulesched.run.evictions import NONE, RemovalFailed
from rulesched.run.hooks import WorkerBinder, WorkerReporter
from rulesched.run.leader import LeaderElector, LeaderSettings
from rulesched.run.ops import Metrics
from rulesched.run.ops_server import OpsServer
from rulesched.run.profiles import ProfileSettings
from rulesched.run.settings import RunSettings
from rulesched.run.workers import REMOVAL_THREADS, Outcome, Workers, log_bound
from rulesched.scheduler.cancel import Cancellation
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler

log = logging.getLogger(__name__)


WALK_CHUNK = 448  # see EngineSettings.walk_chunk: under numpy's 500, which frees the lock
RULE_METRICS_SAMPLE_PERCENT = 10  # kube-scheduler's pluginMetricsSamplePercent
# The client's kept-alive connections beside the workers' writes (--bind-workers at once, and the
# victims' removals: REMOVAL_THREADS): a watch a resource (~15), the lease, reloads, load pollers;
# past the pool, a request opens and drops one.
OTHER_CONNECTIONS = 32
SHUTDOWN_WAIT_SECONDS = 1.0  # at exit, the most time spent waiting on the lease release, and on informers


@dataclass(frozen=True)
class LoopProfile:
    """A profile at run time: its settings, its reloader and the rules handle that swaps."""

    settings: ProfileSettings
    reloader: Reloader
    rules: RulesHandle

    @property
    def name(self) -> str:
        return self.settings.scheduler_name


class Loop:
    def __init__(self, settings: RunSettings, api: KubeApi | None = None) -> None:
        self.settings = settings
        self._own_api = api is None  # (a binding process makes its own client from the same settings)
        self.api = api or KubeApi(
            settings.kubeconfig, connections=settings.bind_workers + REMOVAL_THREADS + OTHER_CONNECTIONS
        )
        self.store = ClusterStore()
        self.stop = threading.Event()
        self.profiles = [self._profile(p, len(settings.effective_profiles) > 1) for p in settings.effective_profiles]
        first = self.profiles[0]
        self.reloader, self.rules = first.reloader, first.rules  # (the first profile's: the only one, usually)
        self._names = frozenset(p.name for p in self.profiles)
        self._some_rules = False  # latched once any profile has valid rules (none are ever taken back)
        self._fit_checked: set[str] = set()  # profiles whose first set was checked for no-resource-fit
        for profile in self.profiles:  # once each: the set is that scheduler's whole policy
            self._check_fit(profile)
        self._inbox: queue.SimpleQueue[Delta | Outcome | LoadSnapshot | RemovalFailed] = queue.SimpleQueue()
        self._gone: list[Pod] = []  # pods gone from their nodes in this drain: judged together at its end
        # nodes added or changed in this drain, likewise: name -> its Node before (None: added)
        self._nodes: dict[Event, dict[str, Node | None]] = {}
        self.workers = Workers(
            self.api,
            self._deliver,
            settings.bind_workers,
            may_write=lambda: self.leading,
            lease_until=self._lease_until,
            evict_victims=settings.evict_victims,
            budgets=lambda: self.store.pdbs,
        )
        scheduler_settings = SchedulerSettings(
            percentage_of_nodes_to_score=settings.percentage_of_nodes_to_score,
            scheduler_name=first.name,
            engine=EngineSettings(walk_chunk=WALK_CHUNK),
            timings=True,
            diagnose=True,  # reason codes for FailedScheduling events and metrics
            rule_metrics_sample_percent=RULE_METRICS_SAMPLE_PERCENT,
            cycle_deadline_seconds=settings.cycle_deadline or None,
            min_candidate_nodes_percentage=settings.min_candidate_nodes_percentage,
            min_candidate_nodes_absolute=settings.min_candidate_nodes_absolute,
            budgets_refuse=settings.evict_victims != NONE,  # (budgeted and all go through the Eviction API)
        )
        self.metrics = Metrics([p.name for p in self.profiles])
        self.workers.executed = self.metrics.preemption_executed
        self.workers.removal_failed = self._deliver  # (applied between cycles: RemovalsMixin.removal_failed)
        for profile in self.profiles:
            self.metrics.set_rules(profile.name, profile.rules.digest, profile.rules.rules.files)
            if profile.reloader.origin != "sources":  # refused at start (running the last good record, or nothing)
                self.metrics.reloaded(profile.name, ok=False)
        self.api.observer = self.metrics.rest.observe
        percent = first.settings.percentage_of_nodes_to_score  # (the first profile's own, if it has one)
        if percent is not None:
            scheduler_settings = replace(scheduler_settings, percentage_of_nodes_to_score=percent)
        self.scheduler = Scheduler(
            self.rules,
            self.store,
            scheduler_settings,
            WorkerBinder(self.workers, self.store),
            evictor=self.workers,
            clock=time.monotonic,
            cancel=Cancellation(self.stop),  # stopping gives the cycle under way up
        )
        for profile in self.profiles[1:]:
            self.scheduler.add_profile(profile.name, profile.rules, profile.settings.percentage_of_nodes_to_score)
        self.scheduler.gangs.keep_outcomes = False  # (reports keep them; a live scheduler must not)
        self.scheduler.observer = WorkerReporter(self.workers, self.metrics, self.scheduler.queue)
        self.scheduler.queue.incoming = self.metrics.queued
        self.scheduler.queue.incoming_entities = self.metrics.queued_entity
        self.scheduler.queue.group_of = group_key
        self.metrics.live.entities = self.scheduler.queue.entity_counts
        self.metrics.live.pending = self.scheduler.queue.counts
        self.metrics.live.unschedulable = self.scheduler.queue.unschedulable_by_profile
        self.ops: OpsServer | None = None
        self._binding: BindingProcess | None = None  # the binding process, when bindings go there
        # The first lists are in the store (kube-scheduler's /readyz check sched-handler-sync:
        # its event handlers have taken in the informers' initial lists), latched.
        self._handlers_synced = False
        self._collector: tuple[int, int, int] | None = None  # (the collector's thresholds before keep_loaded)
        # /debug/explain: a snapshot handed over between cycles, evaluated on the request's thread
        self._handoff = SnapshotHandOff(self.scheduler.queue.wake)
        self.explainer = ExplainService(self._live_view, group=self._last_group_attempt)
        self.auditor: PeriodicAudit | None = None
        if settings.audit_interval:
            self.auditor = PeriodicAudit(
                self.api,
                settings.audit_interval,
                self._audit_snapshot,
                lambda: {p.name: p.rules.rules for p in self.profiles if p.rules.loaded},
                self.metrics.audited,
                lambda: self.leading,
                self.stop,
            )
        groups = (
            *((PODGROUPS,) if settings.pod_groups else ()),
            *(self._workload_resources() if settings.workloads else ()),
        )
        resources = (*EVERYTHING[:-1], *groups, EVERYTHING[-1])  # (groups before pods: members find them)
        self.mirror = Mirror(self.api, self.store, self._deliver, self.stop, resources)
        # node load: pollers on threads of their own, their values applied between cycles
        self.load = LoadSources(
            settings.load_sources, self.api, self._deliver, self.stop, on_read=self.metrics.load_read
        )
        self.cycles = 0
        self.exit_code = 0
        self.elector: LeaderElector | None = None
        if settings.leader_elect:
            leader = LeaderSettings(
                settings.leader_elect_resource_namespace,
                settings.leader_elect_resource_name,
                settings.leader_elect_lease_duration,
                settings.leader_elect_renew_deadline,
                settings.leader_elect_retry_period,
            )
            self.elector = LeaderElector(self.api, leader, self.stop, on_lost=self._lost)
            self.metrics.live.leader = (settings.leader_elect_resource_name, self.elector.leading.is_set)

    def _last_group_attempt(self, pod: Pod) -> dict[str, Any] | None:
        """A workload API member's group as the scheduler's last attempt left it (read from the
        explain request's thread: a dict lookup of results the scheduler no longer changes)."""
        key = group_key(pod)
        if key is None or not pod.scheduling_group:
            return None
        state = self.scheduler.gangs.states.get(key)
        last = state.last.get(pod.key) if state is not None else None
        if last is None:
            return None
        if last.group_detail is not None:
            return last.group_detail.json()
        return {"group": f"{pod.namespace}/{pod.scheduling_group}", "outcome": last.message}

    def _workload_resources(self) -> tuple[Resource, ...]:
        """The workload API's runtime groups at the versions the server serves: PodGroups at
        v1beta1 (1.37) or else v1alpha2 (1.36), CompositePodGroups at v1alpha3 when served."""
        served = self.api.served_versions(WORKLOAD_API_GROUP)
        version = next((v for v in ("v1beta1", "v1alpha2") if v in served), None)
        if version is None:
            log.warning(
                "--workloads: the API server serves no PodGroups (scheduling.k8s.io/v1beta1 needs the "
                "GenericWorkload gate and --runtime-config=scheduling.k8s.io/v1beta1=true; served: %s)",
                ", ".join(served) or "none",
            )
            return ()
        found = [workload_pod_groups(version)]
        if "v1alpha3" in served:
            found.append(composite_pod_groups("v1alpha3"))
        log.info(
            "watching the workload API's groups",
            extra={"resources": ", ".join(r.prefix + "/" + r.plural for r in found)},
        )
        return tuple(found)

    def _profile(self, profile: ProfileSettings, several: bool) -> LoopProfile:
        """A profile's reloader (its own sources, last good record and events, named by its
        scheduler) and its first rules."""
        settings, name = self.settings, profile.scheduler_name
        reloader = Reloader(
            RulesSources(profile.rules, profile.rules_configmap),
            self.api,
            self.stop,
            on_outcome=lambda outcome: self._reloaded(name, outcome),
            settings=ReloadSettings(
                settings.rules_debounce,
                settings.rules_max_delay,
                settings.rules_event_interval,
                settings.rules_last_good,
            ),
            controller=name,
            may_record=lambda: self.leading,  # the leader records the last good set
            profile=name if several else None,  # (its log lines say which profile, when it matters)
        )
        return LoopProfile(profile, reloader, reloader.initial())

    def _check_fit(self, profile: LoopProfile) -> None:
        """``no-resource-fit`` logged once a profile, for its first set: at start, or when the
        first valid set arrives if none was loaded then (the stand-in that refuses every pod
        while none is, ``rules=none``, is no policy to warn about)."""
        if profile.name in self._fit_checked or not profile.rules.loaded:
            return
        self._fit_checked.add(profile.name)
        unfit = startup_warning(profile.rules.rules.checked, profile.rules.rules.files)
        if unfit is not None:
            log.warning(unfit, extra={"rules": profile.rules.digest, "profile": profile.name})

    def _reloaded(self, profile: str, outcome: ReloadOutcome) -> None:
        """(On a reloader's thread: metrics and the queue are thread-safe.) New rules may fit
        pods the old ones parked: they go back to the queue."""
        if outcome.ok and profile not in self._fit_checked:
            for each in self.profiles:
                if each.name == profile:
                    self._check_fit(each)
        self.metrics.reloaded(profile, outcome.ok)
        self.metrics.set_rules(profile, outcome.digest, outcome.files)
        if outcome.changed:
            self.scheduler.queue.move(Event.OTHER)
            self.scheduler.queue.wake()

    def _lost(self) -> None:
        """Leadership lost: stop scheduling at once and exit (a restart comes back as a standby),
        as kube-scheduler does."""
        log.error("leader election lost; exiting", extra={"exit": 1})
        self.exit_code = 1
        self.stop.set()
        self.scheduler.queue.wake()

    def _lease_until(self) -> float:
        """(monotonic) Until when this replica may write, as :attr:`leading` decides it."""
        elector = self.elector
        if elector is None:
            return math.inf
        return elector.valid_until if elector.leading.is_set() else -math.inf

    @property
    def leading(self) -> bool:
        """Whether this replica may schedule and write now (any thread): without leader
        election always; with it, while the lease is held for sure (fencing)."""
        return self.elector is None or self.elector.holds()

    def _deliver(self, item: Delta | Outcome | LoadSnapshot | RemovalFailed) -> None:
        self._inbox.put(item)
        self.scheduler.queue.wake()

    @property
    def ready(self) -> bool:
        return self.mirror.synced

    # --- running ---------------------------------------------------------------------------------
    def run(self, until: Callable[[], bool] | None = None) -> None:
        """Schedule until :attr:`stop` is set (or ``until()`` is true); then stop taking pods
        and let bindings under way finish within the grace period."""
        if self.settings.metrics_bind_address:
            self.ops = OpsServer(
                self.settings.metrics_bind_address, self.metrics, self._readiness, self.explainer
            ).start()
        if self.settings.bind_process and self._own_api:
            process = BindingProcess(
                self.settings.kubeconfig,
                self.settings.bind_workers,
                self.api.agent,
                self._inbox.put,  # (the scheduler's thread woken once per read, not per outcome)
                self.workers.process_finished,
                self._observe_request,
                self.scheduler.queue.wake,
                removed=self.workers.removal_answered,  # (victims' removals: rulesched.run.remover)
            )
            try:
                self.workers.use_process(process.start())
                self._binding = process
                self.metrics.binding_pid = lambda: process.pid
            except OSError as err:  # (no process to start: bind on this one's threads)
                log.warning("binding process not started: %s; binding in-process", err)
        self.mirror.start()
        self.load.start()
        for profile in self.profiles:
            profile.reloader.start()
        if self.auditor is not None:
            self.auditor.start()
        if self.elector is not None:
            self.elector.start()
        while not self.ready and not self.stop.is_set():
            self._drain()
            self.stop.wait(0.05)
        self._drain()  # (the last lists: so the counts below are what the caches hold)
        if self.ready:
            self._handlers_synced = True
            # (what the first lists loaded lives as long as the process: out of the cyclic
            # collector's sight, which collects seldom from now on: rulesched.engine.collector)
            self._collector = keep_loaded()
            log.info(
                "caches synced",
                extra={
                    "nodes": len(self.store.nodes),
                    "pods": sum(1 for _ in self.store.pods()),
                    "pending": sum(self.scheduler.queue.counts().values()),
                    "rules": ",".join(p.rules.digest for p in self.profiles),
                },
            )
        else:  # stopped first (a SIGTERM while the API server was never reached, say)
            log.info("stopped before the caches synced", extra={"waiting": ",".join(self.mirror.waiting())})
        last_expiry = time.monotonic()
        while not self.stop.is_set() and (until is None or not until()):
            self._drain()
            if not self.leading or not (self._some_rules or self._any_rules()):  # a standby, or no rules yet: wait
                self.workers.flush()  # (bindings from before the lease was lost: the child refuses them)
                self.stop.wait(0.1)
                continue
            result = self.scheduler.schedule_one()
            if result is None:  # nothing ready: hand the waiting bindings over, then wait for pods
                self.workers.flush()
                result = self.scheduler.schedule_one(timeout=0.5)
            else:  # (and after a cycle, the bindings that have waited long enough)
                self.workers.flush(late_only=True)
            if result is not None:
                self.cycles += 1
            now = time.monotonic()
            if now - last_expiry > 1.0:
                self.scheduler.expire_assumed()
                self.workers.sweep_series()  # (ended FailedScheduling series: their counts)
                last_expiry = now
        self.shutdown()

    def shutdown(self) -> None:
        """Stop (the cycle under way was given up: ``stop`` cancels it); end every watch now;
        let the writes under way finish within the grace period, taking no new ones; then give
        the lease up and stop the servers. Informer and reloader threads are daemons, waited on
        briefly, never one after another with a timeout each."""
        self.stop.set()
        self.api.close_watches()
        self.workers.close()
        deadline = time.monotonic() + self.settings.grace_seconds
        while self.workers.in_flight and time.monotonic() < deadline:
            self._drain()
            time.sleep(0.02)
        self._drain()
        self.workers.shutdown(wait=False)
        if self.elector is not None:
            self.elector.release(timeout=SHUTDOWN_WAIT_SECONDS)
        if self.ops is not None:
            self.ops.stop()
        self.mirror.join(timeout=SHUTDOWN_WAIT_SECONDS)
        self.load.join(timeout=0.1)
        for profile in self.profiles:
            profile.reloader.join(timeout=0.1)
        if self._collector is not None:
            let_go(self._collector)
            self._collector = None

    def _observe_request(self, method: str, code: str, seconds: float) -> None:
        """(The binding process's reader thread.) One of its requests, for rest_client metrics."""
        observer = self.api.observer
        if observer is not None:
            observer(method, self.api.host, code, seconds)

    def _any_rules(self) -> bool:
        self._some_rules = any(p.rules.loaded for p in self.profiles)
        return self._some_rules

    def reload(self) -> None:
        """Reload every profile's rules soon (SIGHUP)."""
        for profile in self.profiles:
            profile.reloader.trigger()

    def _readiness(self) -> tuple[bool, str]:
        """Ready once every profile has valid rules and the caches are synced; the detail names
        each profile's rules (``NAME: rules HASH``, or why it has none), with one profile just
        ``rules HASH``. A profile without rules holds back only its own pods meanwhile."""
        role = "" if self.elector is None else ("; leading" if self.leading else "; standby")
        several = len(self.profiles) > 1

        def about(profile: LoopProfile) -> str:
            rules = profile.rules
            state = f"rules {rules.digest}" if rules.loaded else rules.waiting
            return f"{profile.name}: {state}" if several else state

        if not all(p.rules.loaded for p in self.profiles):
            return False, "; ".join(about(p) for p in self.profiles)
        if not self.ready:
            return False, f"caches not synced ({', '.join(self.mirror.waiting())})"
        if not self._handlers_synced:
            return False, "caches synced, being taken in"
        if self._binding is not None and self._binding.alive and not self._binding.ready:  # (dead: in-process)
            return False, "binding process starting"
        return True, ", ".join(about(p) for p in self.profiles) + role

    def _live_view(self) -> LiveView | None:
        """(On an explain request's thread.) The current snapshot, once the caches are synced."""
        if not self.ready:
            return None
        snapshot = self._handoff.ask()
        if snapshot is None:
            return None
        served = {p.name: p.rules for p in self.profiles}

        def rules_for(pod: Pod) -> RuleSet | None:
            # a posted pod naming no scheduler served here: the one profile's, when there is one
            handle = served.get(pod.scheduler_name) or (next(iter(served.values())) if len(served) == 1 else None)
            return handle.rules if handle is not None and handle.loaded else None

        def classes() -> tuple[PriorityClass, ...]:
            try:  # (the informer thread may add one meanwhile: then none are offered this time)
                return tuple(self.store.priority_classes.values())
            except RuntimeError:
                return ()

        return LiveView(snapshot, rules_for, self.scheduler.queue.find, classes, self.scheduler.queue.pending)

    def _audit_snapshot(self) -> Snapshot | None:
        """(On the audit thread.) A snapshot, once the caches are synced."""
        return self._handoff.ask() if self.ready else None

    def _drain(self) -> None:
        self._handoff.serve(self.store.snapshot)  # (explain requests: a snapshot, between cycles)
        while True:
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                if self._gone:  # (the queueing hints once for the drain's deletions: rulesched.scheduler.hints)
                    gone, self._gone = self._gone, []
                    self.scheduler.pods_gone(gone)
                if self._nodes:  # (and once for its nodes added or changed)
                    nodes, self._nodes = self._nodes, {}
                    for event, changed in nodes.items():
                        before = {name: node for name, node in changed.items() if node is not None}
                        self.scheduler.nodes_changed(event, sorted(changed), before)
                return
            try:
                if isinstance(item, Outcome):
                    self._outcome(item)
                elif isinstance(item, RemovalFailed):
                    self.scheduler.removal_failed(item.victim, item.refused)
                elif isinstance(item, LoadSnapshot):
                    if item.version > self.store.load.measured.version:  # (two pollers may race to the inbox)
                        self.store.set_load(item)
                else:
                    self._apply(item)
            except InputError as err:
                log.warning("skipping %s %s: %s", getattr(item, "kind", ""), getattr(item, "key", ""), err)

    # --- applying what arrived -------------------------------------------------------------------
    def _outcome(self, outcome: Outcome) -> None:
        self.metrics.binding(outcome.profile, outcome.ok, outcome.seconds)
        if outcome.ok and not outcome.logged:
            log_bound(outcome)
        if outcome.bound_elsewhere is not None:
            self.scheduler.binding_finished(outcome.key, False, outcome.reason)
            self.scheduler.delete(outcome.key)
            self.store.upsert_pod(self.mirror.decode_pod(outcome.bound_elsewhere, "binding"))
            return
        self.scheduler.binding_finished(outcome.key, outcome.ok, outcome.reason)

    def _apply(self, delta: Delta) -> None:
        scheduler = self.scheduler
        applied = self.mirror.apply(delta, scheduler.queue.any_waiting_on_pods)
        if applied.settled is not None:
            scheduler.delete(applied.settled)  # bound (by us, confirmed, or elsewhere), finished or gone
            if delta.type == "DELETED":
                self.workers.forget(applied.settled)
        if delta.kind == "PodDisruptionBudget":  # (a victim spared after a refusal may be evictable now)
            scheduler.budgets_changed()
        for key in applied.removed_groups:
            scheduler.remove_group(key)
        for group in applied.groups:
            scheduler.set_group(group)
        pod = applied.pending
        if pod is not None and pod.key not in scheduler.queue and self.store.is_assumed(pod.key):
            # Bound by us, not yet confirmed by the informer: an update from before the binding
            # (a status patch) must not queue it again (kube-scheduler skips assumed pods too).
            pod = None
        if pod is not None:
            if pod.scheduler_name in self._names and not pod.deleting:  # (a pod of one of its profiles)
                scheduler.add(pod)  # new, or updated while pending (held back while gated)
                if pod.scheduling_gates and self.leading:  # (a standby writes nothing)
                    self.workers.gated(pod)
            else:
                scheduler.delete(pod.key)  # terminating, or handed to another scheduler
        if applied.gone is not None:
            self._gone.append(applied.gone)
        elif applied.node is not None and applied.event is not None:
            # (a node changed twice in a drain: judged against the Node before the first change)
            self._nodes.setdefault(applied.event, {}).setdefault(applied.node, applied.before)
        elif applied.event is not None:
            scheduler.queue.move(applied.event)
