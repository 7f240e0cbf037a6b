"""The scheduler: pops pods from the queue, runs a cycle, preempts, assumes and binds.

One driver for every face of rulesched: the simulator binds into its in-memory store, the
scheduler loop binds through the API server. Each cycle reads the rules once from their handle
and the cluster once as a snapshot, so a reload or an informer event never shows a cycle half of
anything. The scheduling cycle is apart from the binding cycle: the pod is assumed in the store
first, so the next cycle sees it, then handed to a :class:`Binder`, which may answer at once (the
simulator) or later (:meth:`Scheduler.binding_finished`, called on the scheduler's thread when
the API server has answered). A failed binding rolls the assumption back and requeues the pod
with backoff. What happens to each pod is reported to an :class:`Observer` (the simulator's
report, the live scheduler's events and metrics); a face plugs in a Binder, an Evictor and
an Observer (:mod:`rulesched.scheduler.interfaces`). What pod groups ask of the scheduler is in
:mod:`rulesched.scheduler.gang_host`.

The scheduler keeps the nominations (:class:`rulesched.scheduler.nominator.Nominator`): of the
pods its preemption placed, and of pending pods that arrive with ``status.nominatedNodeName``.
Each cycle leaves room on those nodes for nominated pods of its pod's priority or higher.

A cycle under way can be given up (:mod:`rulesched.scheduler.cancel`: shutdown, a reload, its
deadline) until the scheduler assumes its pod or nominates it: nothing is assumed or evicted,
:meth:`Scheduler.schedule_one` returns None and the pod goes back to the queue: with backoff
(shutdown); at once (a reload: the new rules decide); with backoff and an error reported to the
:class:`Observer`, naming the rule being evaluated, as kube-scheduler reports a cycle's error
(past ``SchedulerSettings.cycle_deadline_seconds``).

Profiles (kube-scheduler's): one scheduler may serve several scheduler names, each with its own
rules and its own :class:`rulesched.scheduler.cycle.Cycle` (whose class tables belong to one rule
set, so two sets never evict each other's), over one store, one queue (priority order across
profiles, as upstream) and one nominator (nominations are cluster-wide). A pod is scheduled by the
profile its ``spec.schedulerName`` names (:meth:`Scheduler.add_profile`; the rules given to the
constructor serve every other name); a profile whose rules are not loaded yet parks its pods,
untried, until they are (its reload moves them back).

The scheduler is not thread-safe: one thread owns it, the store and the queue's pops; other
threads reach it through that thread (see :mod:`rulesched.scheduler.queue` for waking it); only
its :class:`rulesched.scheduler.cancel.Cancellation` may be set from any thread.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, RulesHandle, RuleTimer
from rulesched.logs import VERBOSE
from rulesched.model import Pod
from rulesched.scheduler import gang, workloads
from rulesched.scheduler.cancel import DEADLINE, SUPERSEDED, Cancellation, CycleCancelled
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import (
    POST_FILTER,
    RESERVE,
    SUCCESS,
    Binding,
    Code,
    CycleResult,
    Preemption,
    SchedulerSettings,
)
from rulesched.scheduler.gang_host import GangHostMixin
from rulesched.scheduler.gang_preemption import GANG_NOT_PREEMPTIBLE, GANG_VIOLATES_BUDGET, whole_gangs, widened_refused
from rulesched.scheduler.hint_host import HintHostMixin
from rulesched.scheduler.interfaces import Binder, Evictor, Observer, StoreEvictor
from rulesched.scheduler.nominator import Nominator
from rulesched.scheduler.preemption import NOT_ELIGIBLE_TERMINATING, Sampling, preempt
from rulesched.scheduler.queue import SchedulingQueue
from rulesched.scheduler.removals import Refusals, RemovalsMixin
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.victims import order_key
from rulesched.semantics.dra_preemption import freed_by

log = logging.getLogger(__name__)


def shadow_rejections(shadow: RuleSet, pod: Pod, snapshot: Snapshot, node_name: str) -> tuple[str, ...]:
    """The audit-mode filters that would reject ``node_name`` for ``pod`` (one node: cheap)."""
    node = snapshot.node_view(node_name)
    if node is None:
        return ()
    bound = shadow.session().bind(pod, snapshot)
    try:
        return tuple(f.name for f in bound.filters if not f.passes(node))
    finally:
        bound.release()


def _waits_on_other_pods(pod: Pod) -> bool:
    return bool(pod.pod_affinity or pod.topology_spread_constraints)


@dataclasses.dataclass(frozen=True)
class Profile:
    """One scheduler name's rules, and the cycles that run them (their caches are the set's)."""

    name: str
    rules: RulesHandle
    cycle: Cycle


@dataclasses.dataclass
class _Binding:
    pod: Pod
    node: str
    result: CycleResult


class Scheduler(RemovalsMixin, GangHostMixin, HintHostMixin):
    def __init__(
        self,
        rules: RulesHandle | RuleSet,
        store: ClusterStore,
        settings: SchedulerSettings,
        binder: Binder,
        evictor: Evictor | None = None,
        clock: Callable[[], float] = time.monotonic,
        observer: Observer | None = None,
        cancel: Cancellation | None = None,
        framework: Framework | None = None,
    ) -> None:
        """``framework``: the node tables and columns to use (a framework another scheduler of
        the same store used before: explain's trials); None: its own."""
        self.rules = rules if isinstance(rules, RulesHandle) else RulesHandle(rules)
        self.store = store
        self.settings = settings
        self.binder = binder
        self.evictor = evictor or StoreEvictor(store)
        self.clock = clock
        self.observer = observer or Observer()
        self.queue = SchedulingQueue(clock, settings.initial_backoff_seconds, settings.max_backoff_seconds)
        self.cancel = cancel if cancel is not None else Cancellation()
        self.cycle = Cycle(settings, self.cancel, framework)
        self.cycle.framework.follow(self.rules)  # (a reload drops its tables: it is told)
        self._default = Profile(settings.scheduler_name or "", self.rules, self.cycle)
        self._profiles: dict[str, Profile] = {}  # scheduler name -> its profile (others: _default)
        self._bindings: dict[str, _Binding] = {}  # pod key -> binding under way
        self._victims: dict[str, list[str]] = {}  # preemptor -> its victims not yet gone
        self._preempted_at: dict[str, float] = {}  # preemptor -> when (clock) it last preempted
        # preemptor -> the claims its victims' going frees, not deallocated yet, and the victims'
        # uids (rulesched.semantics.dra_preemption.unsettled)
        self._victim_claims: dict[str, tuple[list[str], frozenset[str]]] = {}
        # claims whose deletion was handed to the binder (key -> uid), until the store drops them
        self._deleting_claims: dict[str, str] = {}
        self.refusals = Refusals()  # victims whose eviction a budget refused (rulesched.scheduler.removals)
        self.queue.awaiting_victims = self._awaiting_victims
        self.nominator = Nominator()
        self.gangs = gang.Gangs(clock)  # pod groups and the members they hold back
        self.last_cycle_seconds = 0.0  # the last cycle's own time (filter, score, preempt, assume)
        self._cycle_rules = ""  # the digest of the rule set the cycle under way reads (its messages)
        # Which cycles time each rule (not the cycle's seeded tie-break: sampling must not move pods).
        self._sampler = random.Random()

    @property
    def cycle_rules(self) -> str:
        """The digest of the rule set the cycle under way (or the last one) reads: for messages
        and for watching the scheduler; a binder is handed its binding's own
        (:attr:`Binding.rules`)."""
        return self._cycle_rules

    def add_profile(
        self, name: str, rules: RulesHandle | RuleSet, percentage_of_nodes_to_score: int | None = None
    ) -> Profile:
        """Schedule the pods naming ``name`` with ``rules`` (and their own percentage of nodes to
        score, as a kube-scheduler profile may set it; None: the scheduler's)."""
        settings = self.settings
        if percentage_of_nodes_to_score is not None:
            settings = dataclasses.replace(settings, percentage_of_nodes_to_score=percentage_of_nodes_to_score)
        handle = rules if isinstance(rules, RulesHandle) else RulesHandle(rules)
        profile = self._profiles[name] = Profile(name, handle, Cycle(settings, self.cancel))
        profile.cycle.framework.follow(handle)
        cycles = [self.cycle, *(p.cycle for p in self._profiles.values() if p.cycle is not self.cycle)]
        for cycle in cycles:  # (the node tables' memory budget is the scheduler's, split between them)
            cycle.framework.shares = len(cycles)
        return profile

    def profile_of(self, pod: Pod) -> Profile:
        """The profile that schedules ``pod`` (kube-scheduler's frameworkForPod)."""
        return self._profiles.get(pod.scheduler_name, self._default)

    # --- pending pods ------------------------------------------------------------------------------
    def add(self, pod: Pod) -> None:
        self.gangs.added(pod)
        if self.gangs.updated(pod):
            return
        self.queue.add(pod)
        self._nominated(pod)

    def update(self, pod: Pod) -> None:
        if self.gangs.updated(pod):  # a member its group holds back
            return
        self.gangs.added(pod)
        self.queue.update(pod)
        self._nominated(pod)

    def _nominated(self, pod: Pod) -> None:
        """A pending pod's nomination from its status; without one, a nomination already made
        stays (the update may predate the scheduler's own status patch), with the new version.
        A pod held back by scheduling gates holds nothing until they go (as upstream's queue)."""
        if pod.node_name or pod.scheduling_gates:
            return
        node = pod.nominated_node_name or self.nominator.node_of(pod.key)
        if node:
            if self.nominator.node_of(pod.key) not in (None, node):
                self._end_nomination(pod.key)
            self.nominator.nominate(pod, node)

    def delete(self, key: str) -> None:
        held = self.gangs.holds(key)
        self.gangs.gone(key)
        if held is not None:  # a member its group held: the group may stand for it no more
            group = self.gangs.group_of(held)
            state = self.gangs.states.get(group.key) if group is not None else None
            if state is not None and state.waiting and not any(k in self.queue for k in state.pending):
                first = next(iter(state.waiting))
                self.queue.add(state.waiting.pop(first))
        self.queue.delete(key)
        self._victims.pop(key, None)
        self._preempted_at.pop(key, None)
        self._victim_claims.pop(key, None)
        self._end_nomination(key)

    @property
    def bindings_in_flight(self) -> int:
        return len(self._bindings)

    # --- one cycle ------------------------------------------------------------------------------------
    def schedule_one(self, timeout: float | None = 0.0) -> CycleResult | None:
        """One cycle for the next ready pod; None when none is ready (waiting up to ``timeout``
        seconds for one: see :meth:`SchedulingQueue.pop`) or when :attr:`cancel` gave the
        cycle up (the pod is back in the queue)."""
        if self.gangs.states:
            self.expire_groups()
        pod = self.queue.pop(timeout)
        if pod is None:
            return None
        profile = self._profiles.get(pod.scheduler_name, self._default)  # (the one lookup per cycle)
        if not profile.rules.loaded:  # no valid rules for its profile yet: parked, untried
            self.queue.unschedulable(pod)
            return None
        started = time.perf_counter()
        deadline = self.settings.cycle_deadline_seconds  # (None: the deadline is the caller's, if any)
        # From now on a reload gives the cycle up (the rules it reads are read after this).
        self.cancel.begin(profile.rules, deadline)
        try:
            return self._cycle(pod, profile, started)
        except CycleCancelled as cancelled:
            self.last_cycle_seconds = time.perf_counter() - started
            self._given_up(pod, cancelled)
            return None
        finally:
            self.cancel.end(limited=deadline is not None)

    def _given_up(self, pod: Pod, cancelled: CycleCancelled) -> None:
        extra = {"pod": pod.key, "rule": cancelled.rule or None, "rules": self._cycle_rules}
        if cancelled.kind == SUPERSEDED:  # the new rules decide, at once
            log.info("scheduling cycle given up: the rules were reloaded; retrying now", extra=extra)
            self.queue.requeue(pod, backoff=False)
            return
        self.queue.requeue(pod, backoff=True)
        if cancelled.kind != DEADLINE:
            log.info("scheduling cycle given up: %s", cancelled.reason, extra=extra)
            return
        seconds = self.cancel.seconds or 0.0
        message = f"scheduling cycle exceeded its {seconds:g}s deadline"
        if cancelled.rule:
            message += f" while evaluating rule {cancelled.rule!r}"
        message += f" (rules {self._cycle_rules})"
        log.warning("%s; retrying with backoff", message, extra={**extra, "deadline": f"{seconds:g}s"})
        # a scheduling error ends the pod's nomination (clearNominatedNode, kubernetes PR #135007)
        if self._end_nomination(pod.key) is not None or pod.nominated_node_name:
            self.observer.nominations_ended([pod])
        self.observer.cycle_failed(pod, message, self.last_cycle_seconds)

    def _cycle(self, pod: Pod, profile: Profile, started: float) -> CycleResult:
        cpu_started = time.thread_time()
        group = self.gangs.group_of(pod) if self.gangs.groups else None
        if group is not None or pod.scheduling_group:
            self._cycle_rules = profile.rules.rules.digest
            if pod.scheduling_group:  # the workload API's: placed as kube-scheduler places it
                result = workloads.attempt(self, self.gangs, pod, group)
            else:
                assert group is not None
                result = gang.attempt(self, self.gangs, pod, group)
            self.last_cycle_seconds = time.perf_counter() - started
            return result
        nominated = self.nominator.node_of(pod.key) or ""
        if pod.nominated_node_name != nominated:  # the book is the truth; the pod's copy may lag
            pod = dataclasses.replace(pod, nominated_node_name=nominated)
        rules = profile.rules.rules  # once per cycle: a reload gives up the cycle and decides it anew
        self._cycle_rules = rules.digest  # the set that makes this cycle's decision
        session = rules.session()
        snapshot = self.store.snapshot()
        reserved = self.nominator.reserved_for(pod)
        percent = self.settings.rule_metrics_sample_percent
        timer = RuleTimer() if percent and self._sampler.randrange(100) < percent else None
        watch = session.watch  # (the rule it is evaluating, when the cycle is given up)
        watch.arm(self.cancel.check)
        try:
            result, bound = profile.cycle.run(pod, snapshot, session, reserved, timer)  # (released if it raises)
        except BaseException as err:
            watch.disarm()
            if isinstance(err, CycleCancelled):
                err.rule = watch.rule
            raise
        timing = result.timing
        if timing is not None:
            timing.started = started  # (the whole cycle: nominations and snapshot included)
        waiting = deallocated = False
        try:
            if result.code is Code.SCHEDULED and result.node is not None:
                outcome = None
                if rules.shadow is not None:
                    result.shadow_rejected = shadow_rejections(rules.shadow, pod, snapshot, result.node)
                if bound.dra_claims is not None:  # (read before the binding lets go of its cluster)
                    result.claims = bound.device_allocations(snapshot.node_view(result.node))
                if timing is not None:
                    timing.algorithm_seconds = time.perf_counter() - started
            else:
                preempting = time.perf_counter()
                if self._victims_remain(pod):
                    # Its earlier preemption's victims are still leaving (their deletion has not
                    # been reported): wait for them rather than preempt again
                    # (PodEligibleToPreemptOthers).
                    outcome = Preemption(
                        None, message="preemption: waiting for the preempted pods to leave.", eligible=False
                    )
                    waiting = True
                else:
                    if pod.resource_claims or pod.extended_requests:  # DynamicResources' PostFilter, first
                        deallocated = self._deallocate(bound)
                    # the statuses from the cycle's binding, whose per-node answers are still warm
                    statuses = profile.cycle.statuses(bound, snapshot)
                    columns = profile.cycle.columns(snapshot)
                    cycle, settings = profile.cycle, profile.cycle.settings
                    sampling = Sampling(settings.min_candidate_nodes_percentage, settings.min_candidate_nodes_absolute)
                    order = order_key(list(self.store.pods()), self.gangs) if self.gangs.groups else None
                    outcome = preempt(
                        snapshot,
                        session,
                        pod,
                        statuses,
                        reserved,
                        columns,
                        self.cancel.check,
                        sampling,
                        cycle.preemption_rng,
                        order,
                        bound,
                        self.spared_victims(),
                        settings.budgets_refuse,
                        self.nominator.displaced_by(pod),
                    )
                    if outcome.futile:
                        self.hold_for_budgets(pod.key)  # (tried again when a budget changes)
                    if outcome.victims and self.gangs.groups:  # gangs go whole or not at all
                        whole = whole_gangs(self, outcome.victims, pod)
                        if whole is None:
                            outcome = Preemption(None, message=GANG_NOT_PREEMPTIBLE)
                        elif widened_refused(self, outcome.victims, whole, pod):
                            outcome = Preemption(None, message=GANG_VIOLATES_BUDGET)
                            self.hold_for_budgets(pod.key)  # (tried again when a budget changes)
                        else:
                            outcome = dataclasses.replace(outcome, victims=tuple(whole))
                    waiting = outcome.message == NOT_ELIGIBLE_TERMINATING  # (as above: its victims are leaving)
                result.preemption = outcome
                if timing is not None:
                    status = SUCCESS if outcome.nominated is not None else Code.UNSCHEDULABLE.value
                    done = timing.phase(POST_FILTER, preempting, status)
                    timing.algorithm_seconds = done - started  # (upstream's includes PostFilter when nothing fits)
            self.cancel.check()  # the last point where giving up leaves nothing behind
        except CycleCancelled as cancelled:
            cancelled.rule = watch.rule
            raise
        finally:
            # Done reading: once nobody holds the snapshot, the store changes in place again.
            bound.release()
            watch.disarm()  # (nothing after this evaluates a rule, nor may stop)
        del snapshot
        if outcome is None:
            self._victims.pop(pod.key, None)
            self._preempted_at.pop(pod.key, None)
            self._victim_claims.pop(pod.key, None)
            result = self._bind(pod, result, rules.digest)  # (before the observer sees it: never changed after)
        elif outcome.nominated is None:
            if outcome.eligible and self._end_nomination(pod.key) is not None:
                # upstream clears the nomination when preemption finds no node
                self.observer.nominations_ended([pod])
            self.queue.unschedulable(
                pod, waits_on_pods=_waits_on_other_pods(pod) and not waiting, rejected_by=result.rejected_by
            )
            if deallocated:  # (the claim's change, as its informer event would, moves the pod)
                self.queue.move(Event.OTHER)
        else:
            self._nominate(pod, outcome.nominated, outcome.victims, result.rejected_by)
        self.last_cycle_seconds = time.perf_counter() - started
        if result.timing is not None:
            result.timing.cpu_seconds = time.thread_time() - cpu_started
        self.observer.attempted(result)
        return result

    def _deallocate(self, bound: Any) -> bool:
        """DynamicResources' PostFilter: an allocated claim that some node could not use and no
        other pod uses is deallocated (in the store at once, and through the binder's
        ``deallocate`` when it has one: the API), so that the pod's next attempt may allocate it
        where it fits; failing that, the claim an earlier attempt made for the pod's DRA-served
        extended resources is deleted (the binder's ``delete_claim``; without one, from the
        store), so that the next attempt makes one afresh (dynamicresources.go
        deallocateOrDeletePodClaims). True: the pod is to be tried again now."""
        found = bound.dra_claims
        if found is None:
            return False
        claim = found.deallocatable()
        if claim is not None:
            freed = dataclasses.replace(claim, allocation=None, reserved_for=())
            self.store.dra.put("claims", claim.key, freed)
            deallocate = getattr(self.binder, "deallocate", None)
            if deallocate is not None:
                deallocate(claim)
            log.log(VERBOSE, "deallocated claim %s", claim.key, extra={"pod": bound.ctx.pod.key})
            return True
        stale = found.to_delete()
        if stale is None:
            return False
        log.log(VERBOSE, "deleting claim %s", stale.key, extra={"pod": bound.ctx.pod.key})
        delete = getattr(self.binder, "delete_claim", None)
        if delete is None:  # (no API server: the store is the cluster)
            self.store.dra.put("claims", stale.key, None)
            return True
        # The claim leaves the store when the informer reports it gone, which moves the pod: a
        # retry before that would make its new claim under the same name while the old one is
        # still there (its create refused). Upstream deletes within PostFilter, so no retry sees
        # the claim in between; here a worker does, and a retry in between (the finalizer's
        # removal is a claim event that moves the pod) must not send a second delete.
        claims = self.store.dra.state.claims
        for key in [k for k, uid in self._deleting_claims.items() if getattr(claims.get(k), "uid", None) != uid]:
            del self._deleting_claims[key]
        if self._deleting_claims.get(stale.key) != stale.uid:
            self._deleting_claims[stale.key] = stale.uid
            delete(stale)
        return False

    def _nominate(
        self, pod: Pod, node: str, victims: tuple[Pod, ...], rejected_by: frozenset[str] = frozenset()
    ) -> None:
        if victims:
            self._victims[pod.key] = [v.key for v in victims]
            self._preempted_at[pod.key] = self.clock()
            if any(v.resource_claims or v.extended_claim for v in victims):
                freed = freed_by(self.store.dra.state.claims, victims, pod)
                if freed[0]:
                    self._victim_claims[pod.key] = freed
        if self.nominator.node_of(pod.key) not in (None, node):
            self._end_nomination(pod.key)
        self.nominator.nominate(pod, node)
        at_once = getattr(self.evictor, "at_once", True)
        # A victim terminating already is sent nothing more (kube-scheduler's executor skips a
        # victim with a deletionTimestamp); a store evictor is the only one to remove it.
        sent = [victim for victim in victims if at_once or not victim.deleting]
        # Lower-priority pods nominated to the node lose it to the preemptor (upstream clears
        # their status.nominatedNodeName: getLowerPriorityNominatedPods, clearNominatedNodeName).
        # kube-scheduler 1.37.2's asynchronous executor does that in the goroutine that sends the
        # removals, which prepareCandidateAsync does not start when it has no victim to send
        # (every one terminating already): their nominations then stay. (Its synchronous
        # prepareCandidate, a store evictor's counterpart here, clears them always.)
        displaced = self.nominator.lower_on(node, pod.priority) if sent or at_once else []
        for other in displaced:
            self._end_nomination(other.key)
        if displaced:
            self.observer.nominations_ended(displaced)
        for victim in sent:
            self.evictor.evict(victim, pod)
        log.log(VERBOSE, "nominated; evicting %d pod(s)", len(victims), extra={"pod": pod.key, "node": node})
        nominated = dataclasses.replace(pod, nominated_node_name=node)
        if victims and not at_once:
            # The victims leave through the API server: their deletions, as events, move the
            # parked preemptor (and the other parked pods) back, as kube-scheduler's queue
            # does; tried at once it would only fail on the victims still there.
            self.queue.unschedulable(nominated, rejected_by=rejected_by)
            return
        self.queue.move(Event.POD_DELETED)
        self.queue.requeue(nominated, backoff=False)

    # --- binding --------------------------------------------------------------------------------------
    def _bind(self, pod: Pod, result: CycleResult, rules: str, placed: Pod | None = None) -> CycleResult:
        """Assume the pod on its node (unless ``placed``: a gang member assumed already) and bind
        (the binder gets a :class:`Binding`: ``rules``, the digest of the set that chose the node,
        and the volume decisions the assumption took). Returns the cycle's result as the binder left
        it: a binder that refuses at once makes it BIND_FAILED (a copy: results are values once
        made); one under way reports later (:meth:`binding_finished`), to the observer only."""
        node = result.node
        assert node is not None
        reserving = time.perf_counter()
        if placed is None:
            allocations, reserve, made = result.claims if result.claims is not None else (None, (), None)
            placed = self.store.assume(pod, node, allocations, reserve, made)
        if result.timing is not None:
            result.timing.phase(RESERVE, reserving)
        self.nominator.remove(pod.key)  # placed: its own resources count on the node now
        volumes = self.store.volume_decisions(placed.key) if placed.volumes else ()
        claims, allocated = (
            self.store.dra.assumed_claims(placed.key)
            if placed.resource_claims or placed.extended_claim
            else ((), frozenset())
        )
        extended = (self.store.dra.extended_mappings(placed.key) or ()) if placed.extended_claim else ()
        outcome = self.binder.bind(Binding(placed, node, rules, volumes, claims, allocated, tuple(extended)))
        if outcome is None:
            self._bindings[pod.key] = _Binding(pod, node, result)
            return result
        self._finish(pod, node, result, outcome, final=True)
        return result if outcome else dataclasses.replace(result, code=Code.BIND_FAILED)

    def binding_finished(self, key: str, ok: bool, reason: str = "") -> None:
        """The outcome of a binding that was under way (the Binder returned None)."""
        binding = self._bindings.pop(key, None)
        if binding is not None:
            self._finish(binding.pod, binding.node, binding.result, ok, final=False, reason=reason)

    def _finish(self, pod: Pod, node: str, result: CycleResult, ok: bool, final: bool, reason: str = "") -> None:
        if ok:
            self.store.finish_binding(pod.key, None if final else self.clock())
            self.queue.done(pod.key)
            self.gangs.gone(pod.key)
            log.debug("bound", extra={"pod": pod.key, "node": node})
            self.observer.bound(pod, node)
            if self.queue.any_waiting_on_pods:
                self.queue.move(Event.POD_ADDED)  # a new pod can satisfy affinity or spreading
            return
        self.store.forget(pod.key)
        # The room it was assumed to take is free again (handleBindingCycleError: the forgotten
        # pod as an AssignedPodDelete).
        self.pods_gone([dataclasses.replace(pod, node_name=node)])
        # A failed binding ends the pod's nomination, in the scheduler and in its status
        # (handleBindingCycleError's clearNominatedNode: kubernetes PR #135007, 1.35).
        self._end_nomination(pod.key)
        if pod.nominated_node_name:
            self.observer.nominations_ended([pod])
        log.warning("binding failed; retrying with backoff", extra={"pod": pod.key, "node": node, "reason": reason})
        self.observer.bind_failed(pod, node, reason)
        # A gang member whose siblings may be bound already: retried first, alone (gang's docstring).
        self.queue.requeue(pod, backoff=result.group == "")

    # --- upkeep ---------------------------------------------------------------------------------------
    def expire_assumed(self) -> int:
        """Drop assumptions no informer confirmed in time (their resources come back)."""
        expired = self.store.expire_assumed(self.clock())
        if expired:
            log.warning("%d assumed pod(s) expired unconfirmed", len(expired))
            self.queue.move(Event.POD_DELETED)
        return len(expired)
