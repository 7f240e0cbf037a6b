"""The informer cache: the cluster as the API server tells it, kept in a :class:`ClusterStore`.

Informer threads (:mod:`rulesched.kube.informer`) hand their deltas to a sink; the thread that
owns the store applies them with :meth:`Mirror.apply` (one thread writes the store, so a cycle or
an extender request never sees half an update). The store takes nodes, pods that are bound or
finished, PodDisruptionBudgets, namespaces, the selectors of Services, ReplicaSets,
StatefulSets and ReplicationControllers (system default spreading) and the storage objects the
volume filters read (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes) and
Dynamic Resource Allocation's objects (DeviceClasses, ResourceSlices with the DeviceTaintRules'
taints on their devices, ResourceClaims, templates);
pod groups (scheduler-plugins' PodGroups; the workload API's PodGroups and CompositePodGroups:
when watched) go to the scheduler through :class:`Applied`;
priority classes go to the store too
(:attr:`ClusterStore.priority_classes`), which pods' priorities resolve from.
Pending pods are not placed anywhere: :class:`Applied` hands them back to the caller (the live
scheduler queues the ones that name it; the extender ignores them). Objects that do not decode
raise :class:`rulesched.errors.InputError` for the caller to log and skip.

Both live faces read the cluster through this one module: ``rulesched run`` and ``rulesched
extender`` (whose node-cache-capable mode takes nodes from here, and whose full-node mode takes
only pods: nodes then arrive in the requests).
Next stage: :mod:`rulesched.scheduler` reads the store's snapshots.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rulesched.cluster.store import ClusterStore
from rulesched.kube.api import KubeApi
from rulesched.kube.informer import Delta, Informer, Reachability, shared_reachability
from rulesched.kube.resources import (
    CSINODES,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    NAMESPACES,
    NODES,
    PDBS,
    PODS,
    PRIORITY_CLASSES,
    PVCS,
    PVS,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    Resource,
)
from rulesched.model import Node, Pod
from rulesched.model.decode import decode_namespace, decode_node, decode_pdb, decode_pod, decode_priority_class
from rulesched.model.decode_dra import (
    decode_device_class,
    decode_device_taint_rule,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.fields import Memo
from rulesched.model.groups import PodGroup, api_version, decode_composite_pod_group, decode_pod_group
from rulesched.model.workloads import CONTROLLER_KINDS, decode_controller, decode_service
from rulesched.scheduler.cluster_events import Event
from rulesched.semantics.dra_taint_rules import TaintedSlices

MEMO_LIMIT = 4096  # decoded parts remembered (bounded: a cluster's pods may all differ)
WORKLOADS = (SERVICES, REPLICA_SETS, STATEFUL_SETS, REPLICATION_CONTROLLERS)
STORAGE = (STORAGE_CLASSES, PVS, PVCS, CSINODES)
DRA = (DEVICE_CLASSES, DEVICE_TAINT_RULES, RESOURCE_SLICES, RESOURCE_CLAIM_TEMPLATES, RESOURCE_CLAIMS)
# Priority classes first: pods read them. Storage and DRA before pods: a pod's filters read them.
EVERYTHING = (PRIORITY_CLASSES, NAMESPACES, NODES, PDBS, *WORKLOADS, *STORAGE, *DRA, PODS)
# The extender's: kube-scheduler allocates DRA claims itself (its filters ran before asking);
# of DRA's objects only the DeviceClasses, for the extended resources they serve (KEP-5004: a
# pod's request the node's allocatable lacks is then not NodeResourcesFit's to refuse)
FOR_EXTENDER = tuple(r for r in EVERYTHING if r not in DRA or r is DEVICE_CLASSES)


@dataclass(frozen=True)
class Applied:
    """What one delta meant to a scheduler: a queue event to raise (parked pods may fit now), a
    pod that is pending (to queue, if it names this scheduler), or the key of a pod that is no
    longer pending (bound, finished or deleted)."""

    event: Event | None = None
    pending: Pod | None = None
    settled: str | None = None
    groups: tuple[PodGroup, ...] = ()  # pod groups that appeared or changed
    removed_groups: tuple[str, ...] = ()  # keys of pod groups deleted
    gone: Pod | None = None  # with POD_DELETED: the pod that left its node, as the store held it
    node: str | None = None  # with NODE_ADDED and NODE_CHANGED: the node's name
    before: Node | None = None  # with NODE_CHANGED: the Node as the store held it before


def relevant(old: Node | None, new: Node) -> bool:
    """Whether a node change can make a parked pod schedulable (not a status heartbeat)."""
    return old is None or (old.labels, old.taints, old.allocatable, old.unschedulable) != (
        new.labels,
        new.taints,
        new.allocatable,
        new.unschedulable,
    )


class Mirror:
    """Informers for ``resources`` feeding ``sink``; :meth:`apply` writes a delta to ``store``."""

    def __init__(
        self,
        api: KubeApi,
        store: ClusterStore,
        sink: Callable[[Delta], None],
        stop: threading.Event,
        resources: Iterable[Resource] = EVERYTHING,
        reachability: Reachability | None = None,
    ) -> None:
        self.store = store
        # One for all the informers on this API (shared_reachability): when no server answers,
        # they retry together, logged once per step (a one-shot command passes a quiet one and
        # says it in its own line).
        self.reachability = reachability or shared_reachability(api)
        # Equal parts of pods decoded earlier (a workload's pods share requests, tolerations,
        # affinity): decoding a pod takes 13 us instead of 19. Used on the applying thread only;
        # emptied when it grows past MEMO_LIMIT entries.
        self._memo: Memo = {}
        self.group_keys: dict[tuple[str, str], tuple[str, ...]] = {}  # (apiVersion kind, object key) -> its group
        self.tainted = TaintedSlices()  # the slices as published and the DeviceTaintRules
        self.informers = [Informer(api, resource, sink, stop, reachability=self.reachability) for resource in resources]

    def start(self) -> None:
        for informer in self.informers:
            informer.start()

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds in all for the informers to end (once ``stop`` is set;
        :meth:`rulesched.kube.api.KubeApi.close_watches` ends their blocked reads)."""
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            informer.join(max(0.0, deadline - time.monotonic()))

    @property
    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    def waiting(self) -> list[str]:
        """The resources whose first list has not arrived yet."""
        return [i.resource.plural for i in self.informers if not i.synced.is_set()]

    def decode_pod(self, obj: object, source: str) -> Pod:
        if len(self._memo) > MEMO_LIMIT:
            self._memo.clear()
        return decode_pod(obj, source, self.store.priority_classes, memo=self._memo)

    def apply(self, delta: Delta, any_waiting_on_pods: bool = True) -> Applied:
        store, kind, obj = self.store, delta.kind, delta.obj
        deleted = delta.type == "DELETED"
        if kind == "Pod":
            if deleted:
                gone = store.remove_pod(delta.key)
                return Applied(Event.POD_DELETED if gone is not None else None, settled=delta.key, gone=gone)
            return self.place(self.decode_pod(obj, "watch"), any_waiting_on_pods)
        if kind == "Node":
            if deleted:
                store.remove_node(delta.key)
                return Applied()
            node = decode_node(obj, "watch")
            view = store.node_view(node.name)
            # (read before the store takes the change: it updates a view no snapshot holds in place)
            before = view.node if view is not None else None
            store.add_node(node)
            if relevant(before, node):
                event = Event.NODE_ADDED if before is None else Event.NODE_CHANGED
                return Applied(event, node=node.name, before=before)
        elif kind == "PodDisruptionBudget":
            if deleted:
                store.remove_pdb(delta.key)
            else:
                store.set_pdb(decode_pdb(obj, "watch"))
        elif kind == "Namespace":
            if deleted:
                store.remove_namespace(delta.key)
            else:
                namespace = decode_namespace(obj, "watch")
                store.set_namespace(namespace.name, namespace.labels)
        elif kind == "Service" or kind in CONTROLLER_KINDS:
            self._workload(kind, delta, deleted)
        elif kind in _STORAGE_APPLY:
            _STORAGE_APPLY[kind](store, delta.key, None if deleted else obj)
            return Applied(Event.OTHER)  # a claim bound or a volume added may let a parked pod fit
        elif kind == "ResourceSlice" or kind == "DeviceTaintRule":
            # (slices reach the store with the DeviceTaintRules' taints on their devices)
            if kind == "ResourceSlice":
                patched = self.tainted.slice(delta.key, None if deleted else decode_resource_slice(obj, "watch"))
            else:
                patched = self.tainted.rule(delta.key, None if deleted else decode_device_taint_rule(obj, "watch"))
            for key, patched_slice in patched.items():
                store.dra.put("slices", key, patched_slice)
            return Applied(Event.OTHER)  # devices published, or tainted or not any more: a pod may fit
        elif kind in _DRA_APPLY:
            name, decode = _DRA_APPLY[kind]
            value = None if deleted else decode(obj, "watch")
            store.dra.put(name, delta.key, value)
            return Applied(Event.OTHER)  # a claim made or freed: a pod may fit
        elif kind in ("PodGroup", "CompositePodGroup"):
            return self._groups(kind, delta, deleted)
        elif kind == "PriorityClass":
            if deleted:
                store.remove_priority_class(delta.key)
            else:
                store.put_priority_class(decode_priority_class(obj, "watch"))
        return Applied()

    def _groups(self, kind: str, delta: Delta, deleted: bool) -> Applied:
        """A PodGroup (of either API) or a CompositePodGroup: the scheduler's pod groups (not
        the store's). A group's priority resolves from the priority classes, as a pod's does."""
        group_api = api_version(delta.obj).split("/")[0]
        before = self.group_keys.pop((f"{group_api} {kind}", delta.key), ())
        if deleted:
            return Applied(removed_groups=before)
        classes = self.store.priority_classes
        decode = decode_pod_group if kind == "PodGroup" else decode_composite_pod_group
        groups = (decode(delta.obj, "watch", classes),)
        self.group_keys[f"{group_api} {kind}", delta.key] = tuple(g.key for g in groups)
        kept = {g.key for g in groups}
        return Applied(Event.OTHER, groups=groups, removed_groups=tuple(k for k in before if k not in kept))

    def _workload(self, kind: str, delta: Delta, deleted: bool) -> None:
        """A Service or controller: its selector spreads pods by default. No queue event: it
        changes scores, never whether a pod fits."""
        store = self.store
        if kind == "Service":
            if deleted:
                store.remove_service(delta.key)
            else:
                store.set_service(decode_service(delta.obj, "watch"))
        elif deleted:
            store.remove_controller(kind, delta.key)
        else:
            store.set_controller(decode_controller(delta.obj, kind, "watch"))

    def place(self, pod: Pod, any_waiting_on_pods: bool = True) -> Applied:
        """A pod as the API now has it: bound or finished pods go into the store (finished ones
        free their node); a pending one is handed back."""
        if pod.node_name or pod.phase in ("Succeeded", "Failed"):
            self.store.upsert_pod(pod)
            if pod.phase in ("Succeeded", "Failed"):
                return Applied(Event.POD_DELETED, settled=pod.key, gone=pod if pod.node_name else None)
            return Applied(Event.POD_ADDED if any_waiting_on_pods else None, settled=pod.key)
        return Applied(pending=pod)


def _pv(store: ClusterStore, key: str, obj: object) -> None:
    pv = None if obj is None else decode_pv(obj, "watch")
    store.volumes.put("volumes", key if pv is None else pv.name, pv)


def _pvc(store: ClusterStore, key: str, obj: object) -> None:
    claim = None if obj is None else decode_pvc(obj, "watch")
    store.volumes.put("claims", key if claim is None else claim.key, claim)


def _storage_class(store: ClusterStore, key: str, obj: object) -> None:
    cls = None if obj is None else decode_storage_class(obj, "watch")
    store.volumes.put("classes", key if cls is None else cls.name, cls)


def _csinode(store: ClusterStore, key: str, obj: object) -> None:
    csinode = None if obj is None else decode_csinode(obj, "watch")
    store.volumes.put("csinodes", key if csinode is None else csinode.name, csinode)


_DRA_APPLY: dict[str, tuple[str, Callable[[object, str], object]]] = {
    "DeviceClass": ("classes", decode_device_class),
    "ResourceClaim": ("claims", decode_resource_claim),
    "ResourceClaimTemplate": ("templates", decode_resource_claim_template),
}

_STORAGE_APPLY: dict[str, Callable[[ClusterStore, str, object], None]] = {
    "PersistentVolume": _pv,
    "PersistentVolumeClaim": _pvc,
    "StorageClass": _storage_class,
    "CSINode": _csinode,
}
