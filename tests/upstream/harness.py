"""Run rules/default.rules the way upstream plugin unit tests run one plugin.

Upstream tables build pods and nodes with st.MakePod()/st.MakeNode(); here they are written as
the Kubernetes dicts those builders produce and decoded with rulesched.model.decode, so a ported
table reads close to the original. ``filter_reasons`` runs one named filter rule (or all of them,
in order), ``filter_status`` gives upstream's status code with the reasons; ``normalized_scores`` runs one score rule over the feasible nodes and normalises it
the way the scheduler does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rulesched.cluster.store import ClusterStore
from rulesched.lang import BoundRules, RuleSet, load_rules, resolve_rules_path
from rulesched.model import Node, Pod, PodDisruptionBudget
from rulesched.model.decode import decode_node, decode_pdb, decode_pod
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.groups import PodGroup, decode_composite_pod_group, decode_pod_group
from rulesched.model.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass, StorageState
from rulesched.model.workloads import NO_WORKLOADS, Controller, Service, Workloads, decode_controller, decode_service
from rulesched.scheduler.scoring import normalize


@functools.lru_cache(maxsize=1)
def default_rules() -> RuleSet:
    return load_rules([resolve_rules_path("default")])


def node(
    name: str,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, Any] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    images: Sequence[tuple[Sequence[str], int]] = (),
) -> Node:
    obj: dict[str, Any] = {
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": dict(allocatable or {"cpu": "32", "memory": "64Gi", "pods": "110"}),
            "images": [{"names": list(n), "sizeBytes": size} for n, size in images],
        },
    }
    return decode_node(obj, "test", names=False)


def pod(
    name: str = "p",
    namespace: str = "default",
    spec: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    node_name: str = "",
    **meta: Any,
) -> Pod:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    body.update(spec or {})
    if node_name:
        body["nodeName"] = node_name
    obj = {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {}), **meta},
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }
    return decode_pod(obj, "test", names=False)


def pdb(
    name: str,
    namespace: str,
    match_labels: Mapping[str, str],
    disruptions_allowed: int,
    disrupted: Sequence[str] = (),
) -> PodDisruptionBudget:
    """A budget (``disrupted``: its status.disruptedPods, the pods whose eviction went through)."""
    status: dict[str, Any] = {"disruptionsAllowed": disruptions_allowed}
    if disrupted:
        status["disruptedPods"] = {name: "2026-12-04T00:00:00Z" for name in disrupted}
    return decode_pdb(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": dict(match_labels)}},
            "status": status,
        },
        "test",
        names=False,
    )


def service(name: str, namespace: str = "default", selector: Mapping[str, str] | None = None) -> Service:
    """A Service selecting ``selector`` (&v1.Service{Spec: v1.ServiceSpec{Selector: ...}})."""
    spec = {"selector": dict(selector)} if selector is not None else {}
    return decode_service(
        {"kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}, "test", names=False
    )


def controller(kind: str, name: str, namespace: str = "default", selector: Any = None) -> Controller:
    """A ReplicaSet or StatefulSet (``selector`` a LabelSelector dict) or a
    ReplicationController (a label map)."""
    obj = {"kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": {"selector": selector}}
    return decode_controller(obj, kind, "test", names=False)


def owned_by(kind: str, name: str) -> dict[str, Any]:
    """Pod metadata for st.MakePod().OwnerReference(name, gvk): a controller reference."""
    api = "v1" if kind == "ReplicationController" else "apps/v1"
    return {
        "ownerReferences": [{"apiVersion": api, "kind": kind, "name": name, "uid": f"{name}-uid", "controller": True}]
    }


def pv(
    name: str,
    labels: Mapping[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
    phase: str = "Available",
) -> PersistentVolume:
    """st.MakePersistentVolume(): a PersistentVolume, ``spec`` as the API spells it."""
    obj = {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": dict(spec or {}),
        "status": {"phase": phase},
    }
    return decode_pv(obj, "test", names=False)


def pvc(
    name: str,
    namespace: str = "default",
    spec: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str = "Pending",
    **meta: Any,
) -> PersistentVolumeClaim:
    obj = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations or {}), **meta},
        "spec": dict(spec or {}),
        "status": {"phase": phase},
    }
    return decode_pvc(obj, "test", names=False)


def storage_class(
    name: str, provisioner: str = "", mode: str = "Immediate", topologies: Sequence[Any] = ()
) -> StorageClass:
    obj = {
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
        "allowedTopologies": list(topologies),
    }
    return decode_storage_class(obj, "test", names=False)


def csinode(name: str, limits: Mapping[str, int | None]) -> CSINode:
    drivers = [
        {"name": d, "nodeID": name, **({"allocatable": {"count": c}} if c is not None else {})}
        for d, c in limits.items()
    ]
    return decode_csinode(
        {"kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}}, "test", names=False
    )


def storage(
    volumes: Iterable[PersistentVolume] = (),
    claims: Iterable[PersistentVolumeClaim] = (),
    classes: Iterable[StorageClass] = (),
    csinodes: Iterable[CSINode] = (),
) -> StorageState:
    return StorageState(
        {v.name: v for v in volumes},
        {c.key: c for c in claims},
        {c.name: c for c in classes},
        {c.name: c for c in csinodes},
    )


def state(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    pdbs: Iterable[PodDisruptionBudget] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
    workloads: Iterable[Service | Controller] = (),
    storage: StorageState | None = None,
) -> ClusterStore:
    """The cluster: nodes, running pods, budgets, namespace labels, the Services and controllers
    system default spreading reads (upstream's informer objects, ``objs``), and storage."""
    objs = list(workloads)
    found = (
        Workloads.of([o for o in objs if isinstance(o, Service)], [o for o in objs if isinstance(o, Controller)])
        if objs
        else NO_WORKLOADS
    )
    return ClusterStore.build(nodes, pods, pdbs, namespaces, found, storage=storage)


def bind(p: Pod, cluster: ClusterStore) -> BoundRules:
    return default_rules().bind(p, cluster)


def filter_reasons(p: Pod, cluster: ClusterStore, node_name: str, rule: str | None = None) -> tuple[str, ...] | None:
    """None if the node passes the named filter (every filter when ``rule`` is None), else the
    failing filter's reasons. A filter whose ``when`` guard is false passes."""
    status = filter_status(p, cluster, node_name, rule)
    return None if status is None else status[1]


UNSCHEDULABLE, UNRESOLVABLE = "Unschedulable", "UnschedulableAndUnresolvable"


def filter_status(
    p: Pod, cluster: ClusterStore, node_name: str, rule: str | None = None
) -> tuple[str, tuple[str, ...]] | None:
    """:func:`filter_reasons` with upstream's status code first: ``UNRESOLVABLE`` when the
    failing filter's unresolvable clause holds on the node, else ``UNSCHEDULABLE``."""
    bound = bind(p, cluster)
    info = cluster.node_view(node_name)
    assert info is not None, node_name
    for f in bound.filters:
        if rule is not None and f.name != rule:
            continue
        if not f.passes(info):
            return (UNRESOLVABLE if f.unresolvable(info) else UNSCHEDULABLE), f.reasons(info)
    return None


def raw_scores(p: Pod, cluster: ClusterStore, rule: str, feasible: Sequence[str] | None = None) -> dict[str, int]:
    """One score rule's values before normalisation, over ``feasible`` (default: every node)."""
    bound = bind(p, cluster)
    nodes = [cluster.node_view(n) for n in feasible] if feasible is not None else list(cluster.nodes)
    bound.ctx.feasible = nodes  # type: ignore[assignment]
    for s in bound.scores:
        if s.name == rule:
            return {n.name: s.score(n) for n in nodes if n is not None}
    return {n.name: 0 for n in nodes if n is not None}  # guard false: the plugin is skipped


def normalized_scores(
    p: Pod, cluster: ClusterStore, rule: str, feasible: Sequence[str] | None = None
) -> dict[str, int]:
    """One score rule normalised over the feasible nodes, as kube-scheduler's plugin tests check."""
    bound = bind(p, cluster)
    names = list(feasible) if feasible is not None else [n.name for n in cluster.nodes]
    nodes = [cluster.node_view(n) for n in names]
    bound.ctx.feasible = nodes  # type: ignore[assignment]
    for s in bound.scores:
        if s.name == rule:
            return dict(zip(names, normalize(s.normalize, [s.score(n) for n in nodes]), strict=True))
    return {n: 0 for n in names}


# st.MakePodGroup() and st.MakeCompositePodGroup() (the workload API, scheduling.k8s.io)
def pg(
    name: str,
    min_count: int | None = None,
    *,
    topology: str = "",
    parent: str = "",
    disruption: str = "",
    priority: int | None = None,
    policy: str = "",
    created: str = "",
    version: str = "v1beta1",
    namespace: str = "default",
) -> PodGroup:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}} if min_count else {"basic": {}}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if disruption:
        spec["disruptionMode"] = {disruption: {}}
    if priority is not None:
        spec["priority"] = priority
    if policy:
        spec["preemptionPolicy"] = policy
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if created:
        meta["creationTimestamp"] = created
    obj = {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "PodGroup", "metadata": meta, "spec": spec}
    return decode_pod_group(obj, "test")


def cpg(
    name: str,
    min_groups: int | None = None,
    *,
    topology: str = "",
    parent: str = "",
    disruption: str = "",
    priority: int | None = None,
    policy: str = "",
) -> PodGroup:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minGroupCount": min_groups}} if min_groups else {"basic": {}}
    }
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if parent:
        spec["parentCompositePodGroupName"] = parent
    if disruption:
        spec["disruptionMode"] = {disruption: {}}
    if priority is not None:
        spec["priority"] = priority
    if policy:
        spec["preemptionPolicy"] = policy
    obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    return decode_composite_pod_group(obj, "test")
