"""A preemptor whose victim's removal fails is tried again at once, and a victim a
PodDisruptionBudget refused is spared (rulesched/scheduler/removals.py, rulesched/run/evictions.py;
issue 35): kube-scheduler's executor activates its preemptor when a preemption API call fails
(preemption/executor.go prepareCandidateAsync); rulesched, which evicts the victims a budget
selects, must also not choose the refused victim again while its budget holds, or it would loop
on the same 429. On the scheduler with a fake clock and an evictor whose victims leave later (as
the API server's), and on the workers with a recording API."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.errors import TooManyRequestsError, UnavailableError
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.run import evictions
from rulesched.run.evictions import BUDGETED, RemovalFailed, refused_by_budget
from rulesched.run.workers import Workers
from rulesched.scheduler.framework import Binding, Code, CycleResult, SchedulerSettings
from rulesched.scheduler.preemption import REFUSED, VIOLATES_BUDGET
from rulesched.scheduler.queue import FORCE_ACTIVATE, SchedulingQueue
from rulesched.scheduler.removals import AWAIT_VICTIMS_SECONDS
from rulesched.scheduler.scheduler import Observer, Scheduler
from rulesched.simulate.driver import Simulation
from tests.upstream.harness import default_rules, node, pdb, pg, pod

SMALL = {"cpu": "1", "memory": "1Gi", "pods": "10"}
BUDGET_429 = "POST /api/v1/namespaces/default/pods/web/eviction: 429 Cannot evict pod as it would violate the pod's disruption budget."


def P(name: str, prio: int = 0, on: str = "", cpu: str = "1", **labels: str) -> Pod:
    spec = {"priority": prio, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    return pod(name, spec=spec, node_name=on, labels=labels or None, uid=f"uid-{name}")


class Evictor:
    """As the live scheduler's workers: victims leave later (each deletion an event), and say
    which removals are under way."""

    at_once = False

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.under_way: set[str] = set()

    def evict(self, victim: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.sent.append(victim.name)

    def removing(self, victim: Pod) -> bool:
        return victim.name in self.under_way


class Ended(Observer):
    def __init__(self) -> None:
        self.ended: list[str] = []

    def nominations_ended(self, pods: list[Pod]) -> None:
        self.ended += [p.name for p in pods]


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


def setup(*nodes: str) -> tuple[Scheduler, ClusterStore, Evictor, Clock, Ended]:
    store, evictor, clock, ended = ClusterStore(), Evictor(), Clock(), Ended()
    for name in nodes:
        store.add_node(node(name, allocatable=SMALL))
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock, ended)
    return s, store, evictor, clock, ended


def attempt(s: Scheduler) -> CycleResult:
    result = s.schedule_one()
    assert result is not None
    return result


def test_a_refused_victim_is_spared_and_its_preemptor_stays_unschedulable_saying_why() -> None:
    """n1's only pod is under a budget allowing no disruption: the dry run takes it all the same
    (the only candidate, as upstream's would), its eviction is refused; the preemptor is active
    again at once, finds nothing else to evict, and stays unschedulable with the reason, its
    nomination ended; the victim is not evicted again. A new status of the budget allowing a
    disruption moves it, and it preempts again."""
    s, store, evictor, clock, ended = setup("n1")
    store.add_pod(P("web", 0, on="n1", app="web"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 0))
    s.add(P("high", 100))
    first = attempt(s)
    assert first.preemption is not None and first.preemption.nominated == "n1" and evictor.sent == ["web"]
    assert first.preemption.pdb_violations == 1
    assert s.schedule_one() is None  # parked, waiting for its victim
    s.removal_failed("default/web", refused=True)
    assert s.queue.counts()["active"] == 1  # activated: tried now, not after a backoff or the flush
    again = attempt(s)
    assert again.code is Code.UNSCHEDULABLE and again.preemption is not None
    assert again.preemption.nominated is None and REFUSED in again.preemption.message, again.preemption.message
    assert ended.ended == ["high"] and s.nominator.node_of("default/high") is None
    assert evictor.sent == ["web"]  # not chosen again
    clock.now += 400  # (past the unschedulable pool's flush: still spared, as the budget is)
    assert attempt(s).preemption.nominated is None  # type: ignore[union-attr]
    assert evictor.sent == ["web"]
    s.budgets_changed()  # nothing changed: stays parked
    assert s.schedule_one() is None
    store.set_pdb(pdb("web", "default", {"app": "web"}, 1))  # the disruption controller's new status
    s.budgets_changed()
    clock.now += 20
    third = attempt(s)
    assert third.preemption is not None and third.preemption.nominated == "n1" and evictor.sent == ["web", "web"]


def test_after_a_refusal_the_preemptor_chooses_other_victims() -> None:
    """The store's budget said one disruption was allowed (its status behind the API server's),
    so n1's victim (priority 0) was preferred to n2's (priority 50); its eviction refused, the
    budget's status seen then is spared, and the next attempt preempts on n2."""
    s, store, evictor, _, _ = setup("n1", "n2")
    store.add_pod(P("web", 0, on="n1", app="web"))
    store.add_pod(P("other", 50, on="n2"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 1))
    s.add(P("high", 100))
    assert attempt(s).preemption.nominated == "n1"  # type: ignore[union-attr]
    s.removal_failed("default/web", refused=True)
    second = attempt(s)
    assert second.preemption is not None and second.preemption.nominated == "n2"
    assert [v.name for v in second.preemption.victims] == ["other"] and evictor.sent == ["web", "other"]


def test_a_removal_given_up_activates_the_preemptor_without_sparing_the_victim() -> None:
    s, store, evictor, _, _ = setup("n1")
    store.add_pod(P("loose", 0, on="n1"))
    s.add(P("high", 100))
    attempt(s)
    s.removal_failed("default/loose", refused=False)  # (a 5xx, twenty times)
    again = attempt(s)
    assert again.preemption is not None and again.preemption.nominated == "n1" and evictor.sent == ["loose", "loose"]


def test_every_preemptor_waiting_on_the_victim_is_activated() -> None:
    """Two preemptors chose the same victim (the second while the first's removal was under way:
    the workers send it once, and report its end once): both are tried again."""
    s, store, _, _, _ = setup("n1")
    store.add_pod(P("web", 0, on="n1", app="web"))
    for name in ("a", "b"):
        s._victims[f"default/{name}"] = ["default/web"]
        s.queue.add(P(name, 100))
        popped = s.queue.pop()
        assert popped is not None
        s.queue.unschedulable(popped)
    s.removal_failed("default/web", refused=False)
    assert s.queue.counts()["active"] == 2 and not s._victims


def test_a_preemptor_waits_past_the_window_only_for_victims_leaving() -> None:
    """Within AWAIT_VICTIMS_SECONDS of its preemption the preemptor waits for its victims;
    after, only for those terminating or whose removal is still under way; a victim neither (its
    failure never reported) no longer holds it: it preempts anew."""
    s, store, evictor, clock, _ = setup("n1")
    store.add_pod(P("low", 0, on="n1"))
    s.add(P("high", 100))
    attempt(s)
    high = s.queue.find("default/high")
    assert high is not None and s._victims_remain(high)
    clock.now += AWAIT_VICTIMS_SECONDS + 1
    evictor.under_way.add("low")
    assert s._victims_remain(high)  # its eviction unanswered yet
    evictor.under_way.clear()
    low = next(p for p in store.pods() if p.name == "low")
    store.upsert_pod(dataclasses.replace(low, deleting=True))
    assert s._victims_remain(high)  # terminating
    store.upsert_pod(low)
    assert not s._victims_remain(high) and "default/high" not in s._victims  # neither: preempts anew


def test_activate_moves_a_parked_or_backing_off_pod_to_the_active_queue() -> None:
    clock = Clock()
    moved: list[tuple[str, str]] = []
    queue = SchedulingQueue(clock)
    queue.incoming = lambda sub, event: moved.append((sub, event))
    queue.add(P("a"))
    assert not queue.activate("default/a")  # active already
    a = queue.pop()
    assert a is not None and not queue.activate("default/a")  # in flight
    queue.unschedulable(a)
    assert queue.activate("default/a") and queue.counts()["active"] == 1
    assert moved[-1] == ("active", FORCE_ACTIVATE)
    a = queue.pop()
    assert a is not None
    queue.requeue(a, backoff=True)  # (an error: the error backoff queue)
    assert queue.counts()["backoff"] == 1 and queue.activate("default/a")
    assert queue.counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "in_flight": 0, "gated": 0}
    assert queue.pop() is not None and queue.pop() is None  # (its old backoff entry left dead)
    assert not queue.activate("default/nobody")


class RefusingApi:
    """Evictions answered with ``error`` (each time); the calls counted."""

    def __init__(self, error: Exception) -> None:
        self.error, self.evictions = error, 0

    def patch_pod_status(self, *args: Any, **kw: Any) -> None:
        pass

    def evict(self, namespace: str, name: str) -> None:
        self.evictions += 1
        raise self.error

    def post_event(self, *args: Any, **kw: Any) -> None:
        pass


def removal(api: RefusingApi, wait: float = 5.0) -> tuple[list[RemovalFailed], Workers]:
    workers = Workers(
        api,
        outcomes=lambda o: None,
        threads=1,
        evict_victims=BUDGETED,
        budgets=lambda: [pdb("w", "default", {"app": "web"}, 0)],
    )  # type: ignore[arg-type]
    failed: list[RemovalFailed] = []
    workers.removal_failed = failed.append
    web = P("web", 0, on="n1", app="web")
    workers.evict(web, P("high", 100))
    end = time.monotonic() + wait
    while (workers.in_flight or workers.removing(web)) and time.monotonic() < end:
        time.sleep(0.01)
    return failed, workers


def test_a_budgets_refusal_is_reported_at_once_and_not_retried() -> None:
    api = RefusingApi(TooManyRequestsError(BUDGET_429, 429))
    failed, workers = removal(api)
    workers.shutdown(wait=True)
    assert api.evictions == 1
    assert failed == [RemovalFailed("default/web", "default/high", True, BUDGET_429)]


def test_throttling_is_retried_and_reported_when_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """API Priority and Fairness answers 429 too, and a 5xx may pass: retried; after
    EVICTION_TRIES the preemptor is told."""
    monkeypatch.setattr(evictions, "EVICTION_RETRY_SECONDS", 0.01)
    monkeypatch.setattr(evictions, "EVICTION_TRIES", 3)
    for error in (
        TooManyRequestsError("POST: 429 Too many requests, please try again later.", 429),
        UnavailableError("POST: 503", 503),
    ):
        assert not refused_by_budget(error)
        api = RefusingApi(error)
        failed, workers = removal(api)
        workers.shutdown(wait=True)
        assert api.evictions == 3
        assert [(f.victim, f.refused) for f in failed] == [("default/web", False)]


class SlowFirstApi:
    """Status patches recorded as they land; the first one takes a while (a busy connection)."""

    def __init__(self) -> None:
        self.landed: list[Any] = []

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False) -> None:
        if not self.landed and patch["status"].get("nominatedNodeName") == "n1":
            time.sleep(0.3)
        self.landed.append(patch["status"].get("nominatedNodeName"))

    def post_event(self, *args: Any, **kw: Any) -> None:
        pass


def test_a_pods_nomination_set_then_cleared_lands_in_that_order() -> None:
    """The nomination written with the first attempt's condition, then cleared by the next
    attempt a few milliseconds later (its victim's eviction refused): on a pool of threads the
    clearing could land first and leave the pod nominated; a pod's status writes go in order."""
    api = SlowFirstApi()
    workers = Workers(api, outcomes=lambda o: None, threads=4)  # type: ignore[arg-type]
    high = P("high", 100)
    workers.unschedulable(high, "preemption: found a potential placement", nominated="n1")
    workers.nominate(high, "")
    workers.nominate(P("other"), "n2")  # (another pod's write is not held behind them)
    end = time.monotonic() + 5
    while workers.in_flight and time.monotonic() < end:
        time.sleep(0.01)
    workers.shutdown(wait=True)
    assert api.landed == ["n2", "n1", None]


def test_where_budgets_refuse_a_candidate_violating_one_is_none() -> None:
    """With ``budgets_refuse`` (``run --evict-victims`` budgeted or all: the Eviction API refuses
    an eviction violating a budget), n1's only victim, under a budget allowing no disruption, is
    no candidate: nothing is evicted and the pod stays unschedulable saying why, where upstream's
    pickOneNodeForPreemption (fewest violations first, but any candidate) would take it and
    meet the 429. A budget's change tries it again; allowing a disruption now, it preempts."""
    s, store, evictor, clock, _ = setup("n1")
    s.settings = dataclasses.replace(s.settings, budgets_refuse=True)
    s.cycle.settings = s.settings
    store.add_pod(P("web", 0, on="n1", app="web"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 0))
    s.add(P("high", 100))
    first = attempt(s)
    assert first.code is Code.UNSCHEDULABLE and first.preemption is not None
    assert first.preemption.nominated is None and evictor.sent == []
    assert VIOLATES_BUDGET in first.preemption.message, first.preemption.message
    assert s.schedule_one() is None  # parked
    store.set_pdb(pdb("web", "default", {"app": "web"}, 1))
    s.budgets_changed()  # (activated: no backoff to wait out)
    second = attempt(s)
    assert second.preemption is not None and second.preemption.nominated == "n1" and evictor.sent == ["web"]


def test_where_budgets_refuse_a_candidate_violating_none_is_taken_as_upstream_would() -> None:
    """Upstream orders candidates by their violations first: n2's victim (priority 50, no budget)
    is taken over n1's (priority 0, its budget allowing none), with or without ``budgets_refuse``;
    and without it, n1's alone is taken (the preemption the refusals then spare)."""
    for refuse in (False, True):
        s, store, evictor, _, _ = setup("n1", "n2")
        s.settings = s.cycle.settings = dataclasses.replace(s.settings, budgets_refuse=refuse)
        store.add_pod(P("web", 0, on="n1", app="web"))
        store.add_pod(P("other", 50, on="n2"))
        store.set_pdb(pdb("web", "default", {"app": "web"}, 0))
        s.add(P("high", 100))
        assert attempt(s).preemption.nominated == "n2" and evictor.sent == ["other"]  # type: ignore[union-attr]
    s, store, evictor, _, _ = setup("n1")
    store.add_pod(P("web", 0, on="n1", app="web"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 0))
    s.add(P("high", 100))
    assert attempt(s).preemption.nominated == "n1" and evictor.sent == ["web"]  # type: ignore[union-attr]


def test_where_budgets_refuse_upstreams_count_of_violations_does_not_drop_a_candidate() -> None:
    """Upstream counts violations over every potential victim (filterPodsWithPDBViolation): with
    a budget allowing one disruption over n1's two pods, a (1 cpu, the more important) and b (2
    cpu), b counts as violating, and it is the victim (the pod needs 2 cpu). Evicted alone it
    takes the budget to zero: the Eviction API allows it, so the candidate is kept and b
    preempted."""
    store, evictor, clock, ended = ClusterStore(), Evictor(), Clock(), Ended()
    store.add_node(node("n1", allocatable={"cpu": "3", "memory": "1Gi", "pods": "10"}))
    s = Scheduler(default_rules(), store, SchedulerSettings(budgets_refuse=True), _Binder(), evictor, clock, ended)
    store.add_pod(P("a", 5, on="n1", app="web"))
    store.add_pod(P("b", 0, on="n1", cpu="2", app="web"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 1))
    s.add(P("high", 100, cpu="2"))
    first = attempt(s)
    assert first.preemption is not None and first.preemption.nominated == "n1", first.preemption
    assert first.preemption.pdb_violations == 1 and evictor.sent == ["b"]


def test_where_budgets_refuse_a_victim_not_started_is_no_refusal() -> None:
    """The Eviction API deletes a Pending pod (bound, never started: no kubelet ran it) or one
    being deleted without asking its budget (v1.37.2 eviction.go canIgnorePDB), so such a victim
    under a budget allowing no disruption keeps its candidate: it is evicted, as a real API
    server does (tests/test_real_deploy.py's guarded pods)."""
    s, store, evictor, _, _ = setup("n1")
    s.settings = s.cycle.settings = dataclasses.replace(s.settings, budgets_refuse=True)
    store.add_pod(dataclasses.replace(P("web", 0, on="n1", app="web"), phase="Pending"))
    store.set_pdb(pdb("web", "default", {"app": "web"}, 0))
    s.add(P("high", 100))
    first = attempt(s)
    assert first.preemption is not None and first.preemption.nominated == "n1", first.preemption
    assert evictor.sent == ["web"]


def test_workload_preemption_spares_a_refused_victim() -> None:
    """A pod group's preemption (rulesched.scheduler.workload_preemption) leaves a victim whose
    eviction a budget refused, as the per-pod preemption does: n1 (two pods at most) holds p1
    (priority 0, the less important, which upstream's reprieve evicts) and p2 (priority 10); p1
    refused while its budget's status is the one seen, p2 goes instead."""
    for spare, evicted in ((False, ["p1"]), (True, ["p2"])):
        n1 = node("n1", allocatable={"cpu": "32", "memory": "64Gi", "pods": "2"})
        store = ClusterStore.build([n1], [P("p1", 0, on="n1", app="web"), P("p2", 10, on="n1")], [])
        store.set_pdb(pdb("web", "default", {"app": "web"}, 1))
        sim = Simulation(default_rules(), store, SchedulerSettings())
        if spare:
            p1 = next(p for p in store.pods() if p.name == "p1")
            sim.scheduler.refusals.add(p1, store.pdbs)
        sim.add_group(pg("preemptor-pg", 1, priority=1000))
        sim.add(pod("p", spec={"priority": 1000, "schedulingGroup": {"podGroupName": "preemptor-pg"}}))
        sim.run()
        assert sorted(p.name for p in sim.evicted) == evicted
        assert sim.history["default/p"].node == "n1"
