"""The core scheduler apart from the simulator: bindings that finish later, preemption that
reads a snapshot and never the store, rules swapped between cycles, and rules loaded from text
(as a ConfigMap holds them)."""

from __future__ import annotations

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.errors import RulesError
from rulesched.lang import RulesHandle, load_rules, load_rules_text, resolve_rules_path
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.helpers.scheduling import Clock, Later, Recording, Seen, cpu
from tests.upstream.harness import default_rules, node, pod


def test_a_binding_under_way_holds_the_node_and_finishes_or_rolls_back() -> None:
    store = ClusterStore(assumed_ttl=30.0)
    store.add_node(node("n1", allocatable={"cpu": "2", "memory": "4Gi", "pods": "10"}))
    binder, seen, clock = Later(), Seen(), Clock()
    scheduler = Scheduler(default_rules(), store, SchedulerSettings(), binder, clock=clock, observer=seen)
    for name in ("a", "b", "c"):
        scheduler.add(pod(name, spec=cpu("1")))
    first, second, third = (scheduler.schedule_one() for _ in range(3))
    assert first is not None and first.code is Code.SCHEDULED and first.node == "n1"
    assert second is not None and second.node == "n1"
    assert third is not None and third.code is Code.UNSCHEDULABLE  # a and b are assumed: the node is full
    assert binder.calls == [("default/a", "n1"), ("default/b", "n1")] and scheduler.bindings_in_flight == 2
    assert store.is_assumed("default/a") and store.is_assumed("default/b")
    scheduler.binding_finished("default/a", ok=True)
    assert store.is_assumed("default/a")  # until the informer reports it bound, or it expires
    store.upsert_pod(pod("a", spec=cpu("1"), node_name="n1"))
    assert not store.is_assumed("default/a")
    scheduler.binding_finished("default/b", ok=False, reason="409 Conflict")
    assert store.pod_node("default/b") is None  # rolled back, and retried after its backoff
    assert any(e.pod.key == "default/b" for e in scheduler.queue._error_backoff)  # (an error: its own queue)
    assert ("bound", "default/a") in seen.events and ("failed", "default/b") in seen.events
    scheduler.binding_finished("default/unknown", ok=True)  # an outcome nobody waits for
    assert scheduler.bindings_in_flight == 0


def test_an_unconfirmed_binding_expires() -> None:
    store = ClusterStore(assumed_ttl=30.0)
    store.add_node(node("n1"))
    clock = Clock()
    scheduler = Scheduler(default_rules(), store, SchedulerSettings(), Later(), clock=clock)
    scheduler.add(pod("a"))
    scheduler.schedule_one()
    scheduler.binding_finished("default/a", ok=True)
    clock.now += 29
    assert scheduler.expire_assumed() == 0
    clock.now += 1
    assert scheduler.expire_assumed() == 1 and store.pod_node("default/a") is None


def test_preemption_reads_the_snapshot_and_never_changes_the_store() -> None:
    store = ClusterStore()
    for n in ("n1", "n2"):
        store.add_node(node(n, allocatable={"cpu": "2", "memory": "4Gi", "pods": "10"}))
    for i, n in enumerate(("n1", "n1", "n2")):
        store.add_pod(pod(f"low{i}", spec=cpu("1", priority=0), node_name=n))
    evictor = Recording()
    scheduler = Scheduler(default_rules(), store, SchedulerSettings(), Later(), evictor=evictor)
    scheduler.add(pod("high", spec=cpu("2", priority=100)))
    before = (store.pod_position, store.generation, [(i.name, [p.key for p in i.pods]) for i in store.nodes])
    result = scheduler.schedule_one()
    assert result is not None and result.preemption is not None and result.preemption.nominated == "n2"
    assert evictor.evicted == ["default/low2"]  # the node with the fewest victims
    # The dry runs took pods off and put them back on an overlay: the store saw none of it
    # (victims leave the store when their deletion is reported, not before).
    assert (store.pod_position, store.generation, [(i.name, [p.key for p in i.pods]) for i in store.nodes]) == before


def test_a_swap_takes_effect_at_the_next_cycle() -> None:
    store = ClusterStore()
    for n in ("n1", "n2"):
        store.add_node(node(n))
    store.add_pod(pod("busy", node_name="n1"))
    prefer_busy = load_rules_text({"busy.rules": 'extends "default"\n\nscore busy weight 100:\n    len(node.pods)\n'})
    prefer_idle = load_rules_text(
        {"idle.rules": 'extends "default"\n\nscore idle weight 100:\n    10 - len(node.pods)\n'}
    )
    handle = RulesHandle(prefer_busy)
    scheduler = Scheduler(handle, store, SchedulerSettings(), Later())
    scheduler.add(pod("a"))
    first = scheduler.schedule_one()
    handle.swap(prefer_idle)
    scheduler.add(pod("b"))
    second = scheduler.schedule_one()
    assert first is not None and second is not None and (first.node, second.node) == ("n1", "n2")
    assert handle.swaps == 1 and handle.digest == prefer_idle.digest


def test_rules_from_text_name_their_keys_and_extend_other_keys_or_bundled_sets() -> None:
    texts = {
        "a-base.rules": 'extends "default"\n\nlet heavy = 2\n',
        "b-policy.rules": 'extends "a-base"\n\nscore heavy_nodes weight 2:\n    heavy * len(node.pods)\n',
        "README.md": "not rules",
    }
    rules = load_rules_text(texts)
    assert "heavy_nodes" in rules.names and "NodeResourcesFit" in rules.names
    with pytest.raises(RulesError) as err:
        load_rules_text({"bad.rules": "filter broken:\n    node.nope > 1\n"})
    assert str(err.value).startswith("bad.rules:2:")
    with pytest.raises(RulesError, match="no .rules entries"):
        load_rules_text({"notes.txt": "x"})
    with pytest.raises(RulesError, match="cannot extend 'missing'"):
        load_rules_text({"x.rules": 'extends "missing"\n'})


def test_the_same_rules_have_the_same_digest_from_a_file_or_from_text() -> None:
    path = resolve_rules_path("default")
    from_file = load_rules([path])
    from_text = load_rules_text({"whatever.rules": path.read_text()})
    assert from_file.digest == from_text.digest
    assert load_rules_text({"x.rules": path.read_text() + "\n# changed\n"}).digest != from_file.digest
