"""Property: the store ends up the same whatever order informer events arrive in.

Hypothesis draws the objects a cluster ends with (nodes, pods bound to them or to nodes that do
not exist, PodDisruptionBudgets, namespaces) and a history that leads there: each object passes
through earlier versions (pods that finish, nodes relabelled), some are created and deleted
again, some events are delivered twice (a relist), deletes arrive for objects never seen, and
the histories of different objects are interleaved arbitrarily (a pod before its node, a node
deleted under its pods and re-created). Events of one object keep their order, as one watch
stream guarantees. The store fed that history must equal a store built from the final objects
alone; every snapshot taken along the way must still show what it showed when it was taken
(the store copies before it changes anything a snapshot holds); and the aggregates of every
node must equal a recount of its pods.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.model import Node, Pod, PodDisruptionBudget
from tests.helpers.profiles import examples
from tests.upstream.harness import node, pdb, pod

NODE_NAMES = ("n1", "n2", "n3", "n4")
POD_NAMES = ("a", "b", "c", "d", "e", "f")


@dataclass(frozen=True)
class Event:
    kind: str  # "node", "pod", "pdb", "namespace"
    name: str
    obj: Any  # the object, or None for a delete

    def apply(self, store: ClusterStore) -> None:
        if self.kind == "node":
            store.add_node(self.obj) if self.obj is not None else store.remove_node(self.name)
        elif self.kind == "pod":
            store.upsert_pod(self.obj) if self.obj is not None else store.remove_pod(self.name)
        elif self.kind == "pdb":
            store.set_pdb(self.obj) if self.obj is not None else store.remove_pdb(self.name)
        elif self.obj is not None:
            store.set_namespace(self.name, self.obj)
        else:
            store.remove_namespace(self.name)


def node_version(name: str, draw: Any) -> Node:
    return node(
        name,
        {"zone": draw(st.sampled_from(["a", "b"])), "kubernetes.io/hostname": name},
        {"cpu": draw(st.sampled_from(["2", "4"])), "memory": "8Gi", "pods": "110"},
        images=[(["img:1"], 10)] if draw(st.booleans()) else [],
    )


ANTI = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
            ]
        }
    }
}


def pod_version(name: str, draw: Any, node_name: str) -> Pod:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": "img:1", "resources": {"requests": {"cpu": draw(st.sampled_from(["100m", "500m"]))}}}
        ]
    }
    if draw(st.booleans()):
        spec.update(ANTI)
    p = pod(name, labels={"app": "x"}, spec=spec, node_name=node_name)
    if node_name and draw(st.integers(0, 5)) == 0:
        p = dataclasses.replace(p, phase=draw(st.sampled_from(["Succeeded", "Failed"])))
    return p


@st.composite
def histories(draw: Any) -> tuple[list[Event], dict[str, Any]]:
    """(events in delivery order, the final objects by kind)."""
    per_object: list[list[Event]] = []
    final: dict[str, Any] = {"nodes": [], "pods": [], "pdbs": [], "namespaces": {}}
    for name in NODE_NAMES:
        versions = [Event("node", name, node_version(name, draw)) for _ in range(draw(st.integers(0, 3)))]
        if versions and draw(st.integers(0, 3)) == 0:  # deleted, maybe re-created
            versions.append(Event("node", name, None))
            versions += [Event("node", name, node_version(name, draw)) for _ in range(draw(st.integers(0, 1)))]
        if not versions and draw(st.booleans()):
            versions.append(Event("node", name, None))  # a delete of a node never seen
        per_object.append(versions)
        if versions and versions[-1].obj is not None:
            final["nodes"].append(versions[-1].obj)
    for name in POD_NAMES:
        versions = []
        for _ in range(draw(st.integers(0, 3))):
            bound_to = draw(st.sampled_from(["", *NODE_NAMES, "gone"]))
            versions.append(Event("pod", f"default/{name}", pod_version(name, draw, bound_to)))
        if versions and draw(st.integers(0, 3)) == 0:
            versions.append(Event("pod", f"default/{name}", None))
        if not versions and draw(st.booleans()):
            versions.append(Event("pod", f"default/{name}", None))
        per_object.append(versions)
        if versions and versions[-1].obj is not None:
            final["pods"].append(versions[-1].obj)
    for name in ("p1", "p2"):
        versions = [
            Event("pdb", f"default/{name}", pdb(name, "default", {"app": "x"}, draw(st.integers(0, 2))))
            for _ in range(draw(st.integers(0, 2)))
        ]
        if versions and draw(st.booleans()):
            versions.append(Event("pdb", f"default/{name}", None))
        per_object.append(versions)
        if versions and versions[-1].obj is not None:
            final["pdbs"].append(versions[-1].obj)
    for name in ("default", "other"):
        versions = [
            Event("namespace", name, {"env": draw(st.sampled_from(["prod", "dev"]))})
            for _ in range(draw(st.integers(0, 2)))
        ]
        if versions and draw(st.booleans()):
            versions.append(Event("namespace", name, None))
        per_object.append(versions)
        if versions and versions[-1].obj is not None:
            final["namespaces"][name] = versions[-1].obj
    # Interleave: repeatedly take the next event of a drawn object; sometimes deliver it twice.
    events: list[Event] = []
    queues = [list(v) for v in per_object if v]
    while queues:
        i = draw(st.integers(0, len(queues) - 1))
        event = queues[i].pop(0)
        events.append(event)
        if draw(st.integers(0, 5)) == 0:
            events.append(event)
        if not queues[i]:
            queues.pop(i)
    return events, final


def view(snapshot: Snapshot) -> Any:
    """What a snapshot shows, as plain values."""
    return (
        [(n.name, n.node, tuple(p.key for p in n.pods), dict(n.requested), dict(n.free)) for n in snapshot.nodes],
        sorted(p.key for p, _ in snapshot.affinity_pods()),
        snapshot.pdbs,
        dict(snapshot.namespaces),
        snapshot.pod_position,
        snapshot.generation,
        [(s, p.key, n.name) for s, p, n in snapshot.pod_changes(max(0, snapshot.pod_position - 50)) or ()],
    )


def recount(store: ClusterStore) -> None:
    for info in store.nodes:
        total: Counter[str] = Counter()
        for p in info.pods:
            total.update(p.requests)
            assert p.node_name == info.name
        assert info.requested == {k: v for k, v in total.items() if v}, info
        for r in info.allocatable.keys() | info.requested.keys():
            assert info.free.get(r, 0) == info.allocatable.get(r, 0) - info.requested.get(r, 0)
    images = Counter(name for info in store.nodes for name in info.images)
    assert all(store.image_node_count(name) == count for name, count in images.items())


@settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(histories(), st.data())
def test_any_event_order_gives_the_store_the_final_objects_give(
    history: tuple[list[Event], dict[str, Any]], data: Any
) -> None:
    events, final = history
    store = ClusterStore()
    taken: list[tuple[Snapshot, Any]] = []
    for event in events:
        event.apply(store)
        if data.draw(st.integers(0, 3)) == 0:
            snapshot = store.snapshot()
            taken.append((snapshot, view(snapshot)))
        recount(store)
    expected = ClusterStore()
    for n in final["nodes"]:
        expected.add_node(n)
    for p in final["pods"]:
        expected.upsert_pod(p)
    for b in final["pdbs"]:
        expected.set_pdb(b)
    for name, labels in final["namespaces"].items():
        expected.set_namespace(name, labels)
    assert store.contents() == expected.contents()
    for snapshot, seen in taken:
        assert view(snapshot) == seen, "a snapshot changed after it was taken"


def test_a_pod_before_its_node_waits_and_a_deleted_node_keeps_its_pods() -> None:
    store = ClusterStore()
    early = pod(
        "early",
        node_name="n1",
        spec={"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
    )
    store.upsert_pod(early)
    assert store.orphans == {"default/early": early} and store.pod_node("default/early") is None
    store.add_node(node("n1"))
    info = store.node_view("n1")
    assert info is not None and [p.key for p in info.pods] == ["default/early"] and info.requested["cpu"] == 1000
    assert store.remove_node("n1") == [early]
    assert "default/early" in store.orphans and store.nodes == []
    store.add_node(node("n1"))  # re-registered: its pods are back
    assert store.pod_node("default/early") == "n1"
    store.remove_pod("default/unknown")  # deletes of unknown objects do nothing
    store.remove_node("unknown")
    store.remove_pdb("default/unknown")
    store.remove_namespace("unknown")
    assert store.pod_node("default/early") == "n1"


def test_assumed_pods_expire_unless_an_informer_confirms_them() -> None:
    store = ClusterStore(assumed_ttl=30.0)
    store.add_node(node("n1"))
    a, b = pod("a"), pod("b")
    store.assume(a, "n1")
    store.assume(b, "n1")
    store.finish_binding("default/a", now=100.0)
    store.finish_binding("default/b", now=100.0)
    store.upsert_pod(pod("a", node_name="n1"))  # the informer reports a bound: confirmed
    assert not store.is_assumed("default/a") and store.is_assumed("default/b")
    assert store.expire_assumed(129.0) == []
    expired = store.expire_assumed(130.0)
    assert [p.key for p in expired] == ["default/b"]
    assert store.pod_node("default/b") is None and store.pod_node("default/a") == "n1"
    # an assumption whose binding is still under way never expires
    store.assume(pod("c"), "n1")
    assert store.expire_assumed(10_000.0) == [] and store.is_assumed("default/c")
    # the informer's older view of an assumed pod as unbound does not undo the assumption
    store.upsert_pod(pod("c"))
    assert store.pod_node("default/c") == "n1"
    # a pod found bound elsewhere is taken as bound there
    store.add_node(node("n2"))
    store.upsert_pod(pod("c", node_name="n2"))
    assert store.pod_node("default/c") == "n2" and not store.is_assumed("default/c")


def test_finished_pods_free_their_node() -> None:
    store = ClusterStore()
    store.add_node(node("n1"))
    running = pod(
        "r", node_name="n1", spec={"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    )
    store.upsert_pod(running)
    assert store.node_view("n1").requested.get("cpu") == 1000  # type: ignore[union-attr]
    store.upsert_pod(dataclasses.replace(running, phase="Succeeded"))
    assert store.node_view("n1").requested.get("cpu", 0) == 0  # type: ignore[union-attr]
    assert store.pod_node("default/r") is None


def test_pdbs_and_namespaces_are_kept_by_key() -> None:
    store = ClusterStore()
    first: PodDisruptionBudget = pdb("b", "default", {"app": "x"}, 1)
    store.set_pdb(first)
    store.set_pdb(pdb("b", "default", {"app": "x"}, 0))
    assert [p.disruptions_allowed for p in store.pdbs] == [0]
    before = store.node_generation
    store.set_namespace("default", {"env": "prod"})
    assert store.node_generation == before + 1 and store.namespace_labels("default") == {"env": "prod"}
    store.set_namespace("default", {"env": "prod"})  # the same again: no change
    assert store.node_generation == before + 1
