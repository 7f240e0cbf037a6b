"""Nominated pods keep their place: a preemptor's freed space is not taken by pods of lower or
equal priority while it waits, in the scheduler (run's evictions that take time), the simulator
(dumps with status.nominatedNodeName), both walks of a cycle (node table and node by node, with
--explain) and preemption's dry runs; nominations end when the pod is placed, deleted, displaced
by a higher preemptor, or its preemption finds nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.decode import decode_pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler import preemption
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.cycle import Cycle
from rulesched.scheduler.framework import Binding, Code, SchedulerSettings
from rulesched.scheduler.nominator import Nominator
from rulesched.scheduler.removals import AWAIT_VICTIMS_SECONDS
from rulesched.scheduler.scheduler import Observer, Scheduler
from rulesched.simulate.driver import Simulation
from tests.helpers.profiles import examples
from tests.upstream.harness import default_rules, node, pod

SMALL = {"cpu": "1", "memory": "1Gi", "pods": "10"}


def P(name: str, prio: int = 0, cpu: str = "1", on: str = "", nominated: str = "", **meta: Any) -> Pod:
    spec = {"priority": prio, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    p = pod(name, spec=spec, node_name=on, **meta)
    return dataclasses.replace(p, nominated_node_name=nominated) if nominated else p


class SlowEvictor:
    """Evictions as the API server does them: the victim leaves later (``finish``)."""

    def __init__(self, store: ClusterStore) -> None:
        self.store, self.pending = store, list[Pod]()

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.pending.append(pod)

    def finish(self) -> None:
        for victim in self.pending:
            self.store.remove_pod(victim.key)
        self.pending.clear()


class Ended(Observer):
    def __init__(self) -> None:
        self.ended: list[str] = []

    def nominations_ended(self, pods: list[Pod]) -> None:
        self.ended += [p.key for p in pods]


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def cluster(*names: str) -> ClusterStore:
    store = ClusterStore()
    for n in names:
        store.add_node(node(n, allocatable=SMALL))
    return store


def scheduler(store: ClusterStore, settings: SchedulerSettings | None = None) -> tuple[Scheduler, SlowEvictor, Clock]:
    evictor, clock = SlowEvictor(store), Clock()
    s = Scheduler(default_rules(), store, settings or SchedulerSettings(), _Binder(), evictor, clock, Ended())
    return s, evictor, clock


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


def preempt_then_free(store: ClusterStore, s: Scheduler, evictor: SlowEvictor, clock: Clock) -> None:
    """The preemptor "high" evicts "victim" from n1 and is nominated there; its retry finds the
    victim still leaving (parked); then the victim goes and "high" waits out its backoff."""
    store.add_pod(P("victim", 0, on="n1"))
    s.add(P("high", 100))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None and first.preemption.nominated == "n1"
    again = s.schedule_one()
    assert again is not None and again.code is Code.UNSCHEDULABLE  # the victim has not left yet
    assert s.nominator.node_of("default/high") == "n1"
    evictor.finish()
    s.queue.move()  # the victim's deletion: "high" goes to backoff


def test_a_lower_priority_pod_does_not_take_the_space_freed_for_a_nominated_preemptor() -> None:
    store = cluster("n1")
    s, evictor, clock = scheduler(store)
    preempt_then_free(store, s, evictor, clock)
    s.add(P("later", 50))
    result = s.schedule_one()  # "later" is active while "high" backs off
    assert result is not None and result.pod.name == "later"
    assert result.code is Code.UNSCHEDULABLE and result.reasons == {"Insufficient cpu": 1}
    assert result.preemption is not None and result.preemption.nominated is None  # nothing lower to evict
    clock.now += 60
    placed = s.schedule_one()
    assert placed is not None and placed.pod.name == "high" and placed.node == "n1"
    assert s.nominator.node_of("default/high") is None  # placed: the nomination ended


def test_an_equal_priority_pod_is_held_back_too_and_a_higher_one_is_not() -> None:
    for prio, fits in ((100, False), (101, True)):
        store = cluster("n1")
        s, evictor, clock = scheduler(store)
        preempt_then_free(store, s, evictor, clock)
        s.add(P("other", prio))
        result = s.schedule_one()
        assert result is not None and result.pod.name == "other"
        assert (result.code is Code.SCHEDULED) is fits, prio


def test_the_pod_goes_to_another_node_rather_than_the_reserved_one() -> None:
    store = cluster("n1", "n2")
    store.add_pod(P("busy", 1000, on="n2", cpu="500m"))
    s, evictor, clock = scheduler(store)
    s.add(P("holder", 100, nominated="n1"))  # nominated by an earlier run (status.nominatedNodeName)
    s.queue.delete("default/holder")  # ... and not in this scheduler's queue: only its nomination holds
    s.add(P("small", 0, cpu="500m"))
    result = s.schedule_one()
    assert result is not None and result.node == "n2"


def test_explain_and_the_node_table_walk_agree() -> None:
    for explain in (False, True):
        store = cluster(*(f"n{i}" for i in range(6)))
        s, _, _ = scheduler(store, SchedulerSettings(explain=explain))
        for i in range(5):
            s.nominator.nominate(P(f"held{i}", 10), f"n{i}")
        s.add(P("p", 10))
        result = s.schedule_one()
        assert result is not None and result.node == "n5", explain
        if explain:
            assert result.filtered is not None
            assert {n: r for n, r in result.filtered.items()} == {f"n{i}": ("Insufficient cpu",) for i in range(5)}
        s.add(P("q", 10))
        full = s.schedule_one()  # n5 is taken now: every node fails, and the message says why
        assert full is not None and full.code is Code.UNSCHEDULABLE
        assert full.reasons == {"Insufficient cpu": 6}, explain


def test_a_wanted_count_smaller_than_the_cluster_walks_past_reserved_nodes() -> None:
    store = cluster(*(f"n{i:03}" for i in range(120)))
    nominator = Nominator()
    for i in range(110):
        nominator.nominate(P(f"held{i}", 5), f"n{i:03}")
    p = P("p", 1)
    snapshot, session = store.snapshot(), default_rules().session()
    result, bound = Cycle(SchedulerSettings(percentage_of_nodes_to_score=5)).run(
        p, snapshot, session, nominator.reserved_for(p)
    )
    bound.release()
    assert result.code is Code.SCHEDULED and result.node is not None and int(result.node[1:]) >= 110


def test_pods_nominated_in_a_dump_hold_their_node_in_the_simulator() -> None:
    store = ClusterStore()  # n1 is the roomier node: "first" would go there if nothing held it
    store.add_node(node("n1", allocatable={**SMALL, "cpu": "1500m"}))
    store.add_node(node("n2", allocatable={**SMALL, "cpu": "1200m"}))
    sim = Simulation(default_rules(), store, SchedulerSettings())
    pending = {
        "kind": "Pod",
        "metadata": {"name": "first", "namespace": "default"},
        "spec": {"priority": 5, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
    }
    nominated = {
        **pending,
        "metadata": {"name": "second", "namespace": "default"},
        "status": {"nominatedNodeName": "n1"},
    }
    sim.add(decode_pod(pending, "dump"))  # arrives first, same priority: must leave n1 to "second"
    sim.add(decode_pod(nominated, "dump"))
    sim.run()
    assert sim.history["default/first"].node == "n2"
    assert sim.history["default/second"].node == "n1"


def test_a_preemptor_ends_lower_nominations_on_its_node_and_a_failed_preemption_ends_its_own() -> None:
    store = cluster("n1")
    store.add_pod(P("victim", 0, on="n1"))
    s, _, _ = scheduler(store)
    observer = s.observer
    assert isinstance(observer, Ended)
    s.add(P("low", 1, nominated="n1"))
    s.queue.delete("default/low")
    s.add(P("high", 100))
    s.schedule_one()
    assert s.nominator.node_of("default/high") == "n1" and s.nominator.node_of("default/low") is None
    assert observer.ended == ["default/low"]
    s.add(P("stuck", 0, cpu="2", nominated="n1"))  # fits nowhere, nothing to preempt
    s.queue.delete("default/high")
    result = s.schedule_one()
    assert result is not None and result.pod.name == "stuck" and result.code is Code.UNSCHEDULABLE
    assert s.nominator.node_of("default/stuck") is None and observer.ended[-1] == "default/stuck"


def test_deleting_or_binding_ends_a_nomination() -> None:
    store = cluster("n1")
    s, _, _ = scheduler(store)
    s.add(P("a", 1, nominated="n1"))
    s.delete("default/a")
    assert s.nominator.node_of("default/a") is None
    s.add(P("b", 1, nominated="n1"))
    result = s.schedule_one()
    assert result is not None and result.node == "n1" and s.nominator.node_of("default/b") is None
    s.update(P("c", 1))
    s.update(P("c", 2, nominated="n1"))
    assert s.nominator.node_of("default/c") == "n1"
    s.update(P("c", 3))  # an update without the field keeps what is known, with the new version
    assert s.nominator.pods_on("n1")[0].priority == 3


def test_preemption_dry_runs_count_nominated_pods() -> None:
    """A preemptor evicting on n1 must also leave room for a nominated pod of higher priority
    there; so it picks n2, where victims suffice."""
    store = cluster("n1", "n2")
    store.add_pod(P("v1", 0, on="n1"))
    store.add_pod(P("v2", 0, on="n2"))
    nominator = Nominator()
    nominator.nominate(P("holder", 200, cpu="500m"), "n1")
    incoming = P("p", 100)
    result = preemption.preempt(
        store.snapshot(), default_rules().session(), incoming, reserved=nominator.reserved_for(incoming)
    )
    assert (result.nominated, [v.name for v in result.victims]) == ("n2", ["v2"])
    without = preemption.preempt(store.snapshot(), default_rules().session(), incoming)
    assert without.nominated == "n1"


def test_a_gated_pod_holds_nothing_until_its_gates_go() -> None:
    store = cluster("n1")
    s, _, _ = scheduler(store)
    gated = dataclasses.replace(P("g", 100, nominated="n1"), scheduling_gates=("wait",))
    s.add(gated)
    assert s.nominator.node_of("default/g") is None
    s.update(dataclasses.replace(gated, scheduling_gates=()))
    assert s.nominator.node_of("default/g") == "n1"


# --- property: the chosen node has room for the pod and for every nomination it must respect ------


@st.composite
def nominated_clusters(
    draw: Any,
) -> tuple[list[int], list[tuple[int, int]], list[tuple[int, int, int]], tuple[int, int]]:
    """Nodes' cpu (in quarters), running pods (node, quarters), nominations (node, quarters,
    priority) and the incoming pod (quarters, priority)."""
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=6))
    node_index = st.integers(0, len(nodes) - 1)
    running = draw(st.lists(st.tuples(node_index, st.integers(1, 4)), max_size=6))
    nominations = draw(st.lists(st.tuples(node_index, st.integers(1, 4), st.integers(0, 3)), max_size=5))
    return nodes, running, nominations, (draw(st.integers(1, 4)), draw(st.integers(0, 3)))


@given(nominated_clusters(), st.booleans())
@settings(max_examples=examples(60), deadline=None)
def test_the_chosen_node_fits_with_and_without_the_nominations_it_must_respect(case: Any, explain: bool) -> None:
    nodes, running, nominations, (want, priority) = case
    store = ClusterStore()
    for i, quarters in enumerate(nodes):
        store.add_node(node(f"n{i}", allocatable={"cpu": f"{quarters * 250}m", "memory": "1Gi", "pods": "10"}))
    used = [0] * len(nodes)
    for j, (i, quarters) in enumerate(running):
        if used[i] + quarters <= nodes[i]:
            store.add_pod(P(f"r{j}", 0, cpu=f"{quarters * 250}m", on=f"n{i}"))
            used[i] += quarters
    nominator, held = Nominator(), [0] * len(nodes)
    for j, (i, quarters, prio) in enumerate(nominations):
        nominator.nominate(P(f"h{j}", prio, cpu=f"{quarters * 250}m"), f"n{i}")
        held[i] += quarters if prio >= priority else 0
    incoming = P("p", priority, cpu=f"{want * 250}m")
    result, bound = Cycle(SchedulerSettings(explain=explain)).run(
        incoming, store.snapshot(), default_rules().session(), nominator.reserved_for(incoming)
    )
    bound.release()
    fits = {f"n{i}" for i in range(len(nodes)) if used[i] + held[i] + want <= nodes[i]}
    if fits:
        assert result.code is Code.SCHEDULED and result.node in fits
    else:
        assert result.code is Code.UNSCHEDULABLE
        assert result.reasons == {"Insufficient cpu": len(nodes)}


def test_kept_answers_follow_the_node_and_the_nominations() -> None:
    """A class's answers for reserved nodes are kept across cycles, and dropped when the node
    changes or its nominated pods do."""
    store = cluster("n1", "n2")
    store.add_pod(P("big", 0, cpu="900m", on="n2"))  # n2 never fits: n1 is the only candidate
    cycle, session, nominator = Cycle(SchedulerSettings()), default_rules().session(), Nominator()

    def place(name: str) -> str | None:
        incoming = P(name, 0, cpu="400m")
        result, bound = cycle.run(incoming, store.snapshot(), session, nominator.reserved_for(incoming))
        bound.release()
        return result.node

    nominator.nominate(P("holder", 10, cpu="500m"), "n1")
    assert place("a") == "n1"  # 400m + 500m held fit in 1 cpu
    store.add_pod(P("more", 0, cpu="200m", on="n1"))
    assert place("b") is None  # the node changed: 200m + 400m + 500m do not
    nominator.nominate(P("holder", 10, cpu="300m"), "n1")
    assert place("c") == "n1"  # the nomination changed: 200m + 400m + 300m do
    nominator.remove("default/holder")
    store.add_pod(P("most", 0, cpu="500m", on="n1"))
    assert place("d") is None  # no nomination: the node alone is full


class ApiEvictor(SlowEvictor):
    """As the live scheduler's workers: victims leave later, each deletion an event."""

    at_once = False


def test_a_preemptor_whose_victims_leave_through_the_api_waits_parked_for_them() -> None:
    """kube-scheduler parks the preemptor (nominated) until its victims' deletions move it (issue
    35); retried at once it failed again on victims still there, and its preemption moved every
    other parked pod for nothing."""
    store = cluster("n1", "n2")
    evictor, clock = ApiEvictor(store), Clock()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock, Ended())
    store.add_pod(P("victim", 0, on="n1"))
    store.add_pod(P("other", 200, on="n2"))
    s.add(P("low", 0))  # fits nowhere and preempts nothing: parked
    s.add(P("high", 100))
    first = s.schedule_one()
    assert first is not None and first.pod.name == "high" and first.preemption is not None
    assert first.preemption.nominated == "n1"
    parked = s.queue._unschedulable
    assert "default/high" in parked and parked["default/high"].pod.nominated_node_name == "n1"
    second = s.schedule_one()
    assert second is not None and second.pod.name == "low" and second.code is Code.UNSCHEDULABLE
    assert s.schedule_one() is None  # nothing tried again before the victim leaves
    evictor.finish()
    assert s.queue.move(Event.POD_DELETED) == 2  # the victim's deletion moves both
    clock.now += 60
    placed = s.schedule_one()
    assert placed is not None and placed.pod.name == "high" and placed.node == "n1"


def test_another_pods_deletion_leaves_a_preemptor_parked_until_its_last_victim_goes() -> None:
    """Two victims on n1 (each half of it): the deletion of an unrelated pod, then of the first
    victim, move the other parked pod but not the preemptor (tried then, it would only wait for
    the second victim and double its backoff); the second victim's deletion moves it, and it binds."""
    store = cluster("n1", "n2")
    evictor, clock = ApiEvictor(store), Clock()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock, Ended())
    store.add_pod(P("victim-a", 0, cpu="500m", on="n1"))
    store.add_pod(P("victim-b", 0, cpu="500m", on="n1"))
    store.add_pod(P("other", 200, on="n2"))
    store.add_pod(P("bystander", 200, cpu="10m", on="n2"))
    s.add(P("low", 0))  # fits nowhere and preempts nothing: parked
    s.add(P("high", 100))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None and first.preemption.nominated == "n1"
    assert sorted(v.name for v in first.preemption.victims) == ["victim-a", "victim-b"]
    assert s.schedule_one() is not None and s.schedule_one() is None  # low tried, both parked
    parked = s.queue._unschedulable
    store.remove_pod("default/bystander")
    assert s.queue.move(Event.POD_DELETED) == 1 and set(parked) == {"default/high"}
    clock.now += 1.5  # (low's first backoff: 1 s; all within AWAIT_VICTIMS_SECONDS of the preemption)
    assert s.schedule_one() is not None and s.schedule_one() is None  # low again, parked again
    victim_a, victim_b = evictor.pending
    store.remove_pod(victim_a.key)
    assert s.queue.move(Event.POD_DELETED) == 1 and set(parked) == {"default/high"}
    clock.now += 2.5  # (its second: 2 s)
    assert s.schedule_one() is not None  # (low)
    store.remove_pod(victim_b.key)
    assert s.queue.move(Event.POD_DELETED) == 2 and not parked
    clock.now += 60
    placed = [s.schedule_one(), s.schedule_one()]
    assert {(r.pod.name, r.node) for r in placed if r is not None} >= {("high", "n1")}


def test_a_preemptor_whose_victim_stays_is_moved_by_deletions_again_after_a_while() -> None:
    """A victim a budget keeps (its eviction refused, retried) may stay for long: past
    AWAIT_VICTIMS_SECONDS the preemptor is moved by another pod's deletion again, as any parked
    pod (it may fit elsewhere by then)."""
    store = cluster("n1", "n2")
    evictor, clock = ApiEvictor(store), Clock()
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), evictor, clock, Ended())
    store.add_pod(P("victim", 0, on="n1"))
    store.add_pod(P("other", 200, on="n2"))
    store.add_pod(P("bystander", 200, cpu="10m", on="n2"))
    s.add(P("high", 100))
    first = s.schedule_one()
    assert first is not None and first.preemption is not None and first.preemption.nominated == "n1"
    assert s.queue.move(Event.POD_DELETED) == 0  # (held)
    clock.now += AWAIT_VICTIMS_SECONDS + 0.5  # the victim is still there
    store.remove_pod("default/bystander")
    assert s.queue.move(Event.POD_DELETED) == 1
