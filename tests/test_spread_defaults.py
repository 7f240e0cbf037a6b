"""System default topology spreading beyond the upstream tables: the default selector, the
Services and controllers along their way in (dumps, the store and its snapshots, the informer
cache), a Deployment's pods spread across zones by `rulesched simulate`, and a property: the
system defaults score exactly as the same constraints written on the pod, on nodes that carry
both topology keys."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError
from rulesched.kube.api import KubeApi
from rulesched.lang.builtins.spread_defaults import default_selector
from rulesched.lang.builtins.spreading import _spread_score_state
from rulesched.mirror import Mirror
from rulesched.model import LabelSelector, LabelSelectorRequirement
from rulesched.model.workloads import Controller, Service, Workloads
from rulesched.simulate.load import load_cluster
from rulesched.simulate.run import SimulateSettings, simulate
from tests.apiserver import TestApiServer
from tests.helpers.profiles import examples
from tests.upstream.harness import bind, controller, node, normalized_scores, owned_by, pod, service, state

HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
APP = {"app": "web", "tier": "front"}
APP_EXISTS = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}


# --- the default selector --------------------------------------------------------------------


def selector_of(p: Any, *objs: Any) -> LabelSelector | None:
    services = [o for o in objs if isinstance(o, Service)]
    controllers = [o for o in objs if isinstance(o, Controller)]
    return default_selector(p, Workloads.of(services, controllers))


def test_services_selecting_the_pod_are_merged_others_are_not() -> None:
    web = pod("web", labels=APP)
    got = selector_of(
        web,
        service("a", selector={"app": "web"}),
        service("b", selector={"tier": "front"}),
        service("other-app", selector={"app": "db"}),
        service("elsewhere", "prod", selector={"app": "web"}),  # another namespace
        service("headless"),  # no selector: selects nothing
    )
    assert got == LabelSelector((("app", "web"), ("tier", "front")))


def test_the_controller_adds_its_selector_a_replication_controller_its_labels() -> None:
    rs = controller("ReplicaSet", "web-1", selector={"matchLabels": {"pod-template-hash": "1"}, **APP_EXISTS})
    got = selector_of(
        pod("w", labels=APP, **owned_by("ReplicaSet", "web-1")), rs, service("s", selector={"tier": "front"})
    )
    assert got == LabelSelector(
        (("tier", "front"),),
        (LabelSelectorRequirement("pod-template-hash", "In", ("1",)), LabelSelectorRequirement("app", "Exists")),
    )
    rc = controller("ReplicationController", "old", selector={"app": "web"})
    assert selector_of(pod("w", labels=APP, **owned_by("ReplicationController", "old")), rc) == LabelSelector(
        (("app", "web"),)
    )
    ss = controller("StatefulSet", "db", selector={"matchLabels": {"app": "db"}})
    assert selector_of(pod("db-0", labels={"app": "db"}, **owned_by("StatefulSet", "db")), ss) == LabelSelector(
        (), (LabelSelectorRequirement("app", "In", ("db",)),)
    )


@pytest.mark.parametrize(
    ("owner", "objs"),
    [
        (
            owned_by("ReplicaSet", "gone"),
            [controller("ReplicaSet", "web-1", selector=APP_EXISTS)],
        ),  # not in the cluster
        (
            owned_by("Deployment", "web"),
            [controller("ReplicaSet", "web", selector=APP_EXISTS)],
        ),  # not a controller kind
        ({}, [controller("ReplicaSet", "web", selector=APP_EXISTS)]),  # no owner
        (owned_by("ReplicaSet", "web"), [controller("ReplicaSet", "web", "prod", selector=APP_EXISTS)]),  # namespace
        (owned_by("ReplicaSet", "web"), [controller("ReplicaSet", "web", selector={})]),  # selects every pod: no labels
    ],
)
def test_nothing_to_spread_by(owner: dict[str, Any], objs: list[Any]) -> None:
    assert selector_of(pod("w", labels=APP, **owner), *objs) is None


# --- in the store and its snapshots ------------------------------------------------------------


def test_the_store_keeps_workloads_and_snapshots_keep_theirs() -> None:
    store = ClusterStore()
    before = store.snapshot()
    generation = store.generation
    store.set_service(service("s", selector={"app": "web"}))
    store.set_controller(controller("ReplicaSet", "rs", selector=APP_EXISTS))
    assert store.generation == generation + 2
    after = store.snapshot()
    assert before.workloads.services_in("default") == ()
    assert [s.name for s in after.workloads.services_in("default")] == ["s"]
    assert after.workloads.controller("ReplicaSet", "default", "rs") is not None
    # the same object again (a status update) changes nothing
    store.set_controller(controller("ReplicaSet", "rs", selector=APP_EXISTS))
    store.set_service(service("s", selector={"app": "web"}))
    assert store.generation == generation + 2 and store.snapshot() is after
    store.remove_service("default/s")
    store.remove_controller("ReplicaSet", "default/rs")
    store.remove_controller("ReplicaSet", "default/never-there")
    assert not store.workloads and store.generation == generation + 4
    assert after.workloads.controller("ReplicaSet", "default", "rs") is not None  # the snapshot's own


def test_a_new_service_starts_spreading_pods_of_an_equivalence_class_already_bound() -> None:
    nodes = [node(f"n{i}", {HOST: f"n{i}", ZONE: "z1" if i < 2 else "z2"}) for i in range(4)]
    running = [pod(f"r{i}", labels=APP, node_name="n0") for i in range(3)]
    store = state(nodes, running)
    names = [n.name for n in nodes]
    first = normalized_scores(pod("a", labels=APP), store, "PodTopologySpread", feasible=names)
    assert set(first.values()) == {0}  # nothing selects the pod: skipped
    store.set_service(service("web", selector={"app": "web"}))
    second = normalized_scores(pod("b", labels=APP), store, "PodTopologySpread", feasible=names)
    assert second["n0"] < second["n1"] < second["n2"] == second["n3"] == 100


# --- from dumps, and simulated -----------------------------------------------------------------


def _objects(replica_set: bool) -> list[dict[str, Any]]:
    def node_obj(name: str, zone: str, cpu: str) -> dict[str, Any]:
        return {
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOST: name, ZONE: zone}},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
        }

    # zone a's nodes are much the biggest: resource scores alone would put every pod there
    objs = [node_obj(f"{z}-{i}", z, "64" if z == "a" else "8") for z in "abc" for i in (1, 2)]
    meta = owned_by("ReplicaSet", "web-5d8f")
    for i in range(9):
        objs.append(
            {
                "kind": "Pod",
                "metadata": {"name": f"web-5d8f-{i}", "namespace": "shop", "labels": {"app": "web"}, **meta},
                "spec": {"containers": [{"name": "c", "image": "web", "resources": {"requests": {"cpu": "1"}}}]},
            }
        )
    objs.append({"kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}})
    if replica_set:
        objs.append(
            {
                "kind": "ReplicaSet",
                "apiVersion": "apps/v1",
                "metadata": {"name": "web-5d8f", "namespace": "shop"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "replicas": 9},
            }
        )
    return objs


def _zones(tmp_path: Path, replica_set: bool) -> tuple[Counter[str], tuple[str, ...]]:
    path = tmp_path / f"cluster-{replica_set}.json"
    path.write_text(json.dumps({"kind": "List", "items": _objects(replica_set)}))
    objects = load_cluster([path])
    report = simulate(objects, SimulateSettings(cluster=(str(path),), seed=1))
    placed = [report.history[p.key].node for p in report.pending]
    return Counter(str(n)[0] for n in placed), objects.warnings


def test_a_deployments_pods_spread_across_zones_once_the_replica_set_is_read(tmp_path: Path) -> None:
    without, warnings = _zones(tmp_path, replica_set=False)
    assert without == {"a": 9}, "resource scores alone pack the big zone"
    assert warnings == ("skipped 1 object of another kind (Deployment)",)
    spread, _ = _zones(tmp_path, replica_set=True)
    assert sum(spread.values()) == 9 and set(spread) == {"a", "b", "c"}
    assert max(spread.values()) - min(spread.values()) <= 1, spread


def test_workloads_in_dumps_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Service\nmetadata: {name: s, namespace: shop}\nspec: {selector: [app]}\n")
    with pytest.raises(InputError) as err:
        load_cluster([bad])
    assert str(err.value).count("\n") == 0
    assert "Service shop/s" in str(err.value) and "spec.selector" in str(err.value)
    twice = tmp_path / "twice.yaml"
    rs = "kind: ReplicaSet\nmetadata: {name: r}\nspec: {selector: {matchLabels: {app: a}}}\n"
    twice.write_text(rs + "---\n" + rs)
    with pytest.raises(InputError, match="duplicate ReplicaSet default/r"):
        load_cluster([twice])


# --- watched by the informer cache --------------------------------------------------------------


def test_the_mirror_keeps_services_and_controllers(tmp_path: Path) -> None:
    server = TestApiServer()
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")), timeout=5)
    try:
        server.add("services", {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"selector": {"app": "web"}}})
        server.add(
            "replicasets", {"metadata": {"name": "web-1", "namespace": "shop"}, "spec": {"selector": APP_EXISTS}}
        )
        server.add("statefulsets", {"metadata": {"name": "db", "namespace": "shop"}, "spec": {"selector": {}}})
        rc = {"metadata": {"name": "old", "namespace": "shop"}, "spec": {"selector": {"app": "old"}}}
        server.add("replicationcontrollers", rc)
        store = ClusterStore()
        deltas: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        mirror = Mirror(api, store, deltas.put, stop)
        mirror.start()

        def drain_until(done: Any) -> None:
            deadline = time.monotonic() + 20
            while not done():
                assert time.monotonic() < deadline, "the informers did not deliver"
                try:
                    mirror.apply(deltas.get(timeout=0.05))
                except queue.Empty:
                    pass

        drain_until(lambda: mirror.synced and deltas.empty() and len(store.workloads.controllers) == 3)
        workloads = store.workloads
        assert [s.name for s in workloads.services_in("shop")] == ["web"]
        assert {k for k, _, _ in workloads.controllers} == {"ReplicaSet", "StatefulSet", "ReplicationController"}
        assert workloads.controller("ReplicationController", "shop", "old") is not None
        server.delete("services", "shop/web")
        server.delete("replicasets", "shop/web-1")
        drain_until(lambda: not store.workloads.services and len(store.workloads.controllers) == 2)
        stop.set()
        mirror.join(5)
    finally:
        api.close()
        server.stop()


# --- the defaults are the same constraints written on the pod ----------------------------------


@st.composite
def clusters(draw: Any) -> tuple[list[Any], list[Any]]:
    count = draw(st.integers(1, 6))
    nodes = [node(f"n{i}", {HOST: f"n{i}", ZONE: draw(st.sampled_from(["z1", "z2", "z3"]))}) for i in range(count)]
    running = []
    for i in range(draw(st.integers(0, 14))):
        labels = draw(st.sampled_from([{"app": "web"}, {"app": "db"}, {}]))
        namespace = draw(st.sampled_from(["default", "default", "other"]))
        running.append(pod(f"r{i}", namespace, labels=labels, node_name=f"n{draw(st.integers(0, count - 1))}"))
    return nodes, running


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_system_defaults_score_as_the_same_constraints_on_the_pod(cluster: Any, data: Any) -> None:
    nodes, running = cluster
    names = [n.name for n in nodes]
    feasible = data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    rs = controller("ReplicaSet", "web", selector={"matchLabels": {"app": "web"}})
    defaulted = pod("p", labels={"app": "web"}, **owned_by("ReplicaSet", "web"))
    web = {"matchLabels": {"app": "web"}}
    spec = {
        "topologySpreadConstraints": [
            {"maxSkew": 3, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": web},
            {"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": web},
        ]
    }
    explicit = pod("q", spec=spec, labels={"app": "web"})
    store = state(nodes, running, workloads=[rs])
    assert normalized_scores(defaulted, store, "PodTopologySpread", feasible) == normalized_scores(
        explicit, store, "PodTopologySpread", feasible
    )


def test_only_the_defaults_keep_nodes_without_a_zone() -> None:
    nodes = [node("n0", {HOST: "n0", ZONE: "z1"}), node("n1", {HOST: "n1"})]
    rs = controller("ReplicaSet", "web", selector={"matchLabels": {"app": "web"}})
    store = state(nodes, [], workloads=[rs])
    bound = bind(pod("p", labels={"app": "web"}, **owned_by("ReplicaSet", "web")), store)
    bound.ctx.feasible = list(store.nodes)
    defaults = _spread_score_state(bound.ctx)
    assert defaults.ignored == frozenset() and defaults.counts[1] == {"z1": 0, "": 0}
    spec = {"topologySpreadConstraints": [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}
    own = bind(pod("q", spec=spec, labels={"app": "web"}), store)
    own.ctx.feasible = list(store.nodes)
    assert _spread_score_state(own.ctx).ignored == frozenset({"n1"})
