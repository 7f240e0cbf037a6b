"""The cluster store: nodes with their pods, kept current as objects arrive, bind and leave.

One implementation feeds the simulator, the scheduler loop and the extender. It has one writer
(the thread that owns it) and any number of readers, who read :meth:`ClusterStore.snapshot`\\ s,
never the store itself. Writes come in as an informer delivers them, in any order: a pod bound to
a node the store does not know yet is kept aside until the node arrives (and goes aside again if
its node is deleted), deletes of unknown objects do nothing, repeated objects replace themselves.

The store is a coordinator over parts that each keep their own state: the nodes
(:mod:`~rulesched.cluster.nodes`: infos, round-robin order, image counts), where the pods are
(:mod:`~rulesched.cluster.placements`: their nodes, orphans, pods with affinity terms, claim
users), the pod journal (:mod:`~rulesched.cluster.journal`, which the engine's per-domain counts
replay), the assumptions (:mod:`~rulesched.cluster.assumed`) and the storage cache
(:mod:`~rulesched.cluster.volumes`), all copied on write while a snapshot holds them
(:mod:`~rulesched.cluster.cow`). Beside them it keeps PodDisruptionBudgets, namespace labels and
the Services and controllers system default spreading reads, and the change counters compiled
rules key their cached answers on.

A pod the scheduler has chosen a node for is *assumed* here before its binding finishes, so the
next cycle already sees its resources; :meth:`forget` rolls an assumption back. When the binding
call succeeds the assumption waits for the informer to report the pod bound; one that never
shows up expires (:meth:`expire_assumed`), as in kube-scheduler's cache. Kubernetes' own rules
(selectors, the volume planner, PDB arithmetic) come from :mod:`rulesched.semantics`.
Next stage: :mod:`rulesched.cluster.snapshot`, what every cycle reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from rulesched.cluster.assumed import ASSUMED_TTL_SECONDS, AssumedPods
from rulesched.cluster.cow import CopyOnWrite
from rulesched.cluster.dra import DraCache
from rulesched.cluster.journal import PodJournal
from rulesched.cluster.load import LoadState
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.nodes import NodeTable
from rulesched.cluster.placements import Placements
from rulesched.cluster.snapshot import Change, Snapshot
from rulesched.cluster.volumes import StorageCache
from rulesched.model import Node, Pod, PodDisruptionBudget, PriorityClass
from rulesched.model.dra import Allocation, DraState, ResourceClaim
from rulesched.model.load import LoadSnapshot
from rulesched.model.objects import EMPTY
from rulesched.model.replaced import replaced
from rulesched.model.storage import StorageState
from rulesched.model.workloads import NO_WORKLOADS, Controller, Service, Workloads
from rulesched.semantics.disruption import disruptions_allowed
from rulesched.semantics.volume_binding import Decision

FINISHED = ("Succeeded", "Failed")


# (not its resourceVersion, which every write changes: the binding's news would never confirm an
# assumption without a change)
_POD_FIELDS = tuple(f.name for f in dataclasses.fields(Pod) if f.name != "resource_version")


def same_pod(a: Pod, b: Pod) -> bool:
    """Whether two pods are equal in every field but their resourceVersion (Pod compares by
    identity)."""
    return all(getattr(a, name) == getattr(b, name) for name in _POD_FIELDS)


class _History:
    """Names one store's sequence of changes: journal positions and generation numbers mean
    something only within it (index entries and node tables check it)."""

    __slots__ = ()


class ClusterStore:
    def __init__(self, assumed_ttl: float | None = ASSUMED_TTL_SECONDS, provision: bool = False) -> None:
        """``provision``: a claim provisioned for a node is given a volume at once (the
        simulator, which has no provisioner); otherwise it is only marked with the node, and
        the cluster's provisioner does the rest."""
        self.history = _History()
        self._cow: CopyOnWrite[Snapshot] = CopyOnWrite()
        self._nodes = NodeTable(self._cow)
        self._pods = Placements(self._cow)
        self.journal = PodJournal()
        self._assumed = AssumedPods(assumed_ttl)
        self.volumes = StorageCache(self._cow, self._changed, provision)
        self.dra = DraCache(self._cow, self._changed)  # DRA's classes, claims, templates, slices
        self._pdbs: dict[str, PodDisruptionBudget] = {}
        self._pdb_tuple: tuple[PodDisruptionBudget, ...] = ()
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads = NO_WORKLOADS  # Services and controllers: immutable, replaced on change
        self.load = LoadState()  # node load: measured values and placed pods' estimates (cluster/load.py)
        # PriorityClasses by name, which decoding a pod resolves its priority from (the informer
        # cache writes them: put_priority_class, remove_priority_class)
        self.priority_classes: dict[str, PriorityClass] = {}
        # Change counters (compiled rules key cached cluster-wide answers on them):
        self.generation = 0  # any change
        self.node_generation = 0  # nodes came, went or changed (or namespaces' labels)

    # --- priority classes ----------------------------------------------------------------------
    def put_priority_class(self, priority_class: PriorityClass) -> None:
        """A PriorityClass was added or changed: pods decoded from now on resolve it."""
        self.priority_classes[priority_class.name] = priority_class

    def remove_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)

    # --- snapshots -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The cluster as it is now, for readers on any thread; the same object until the next
        change. It stays as it is for as long as anyone holds it."""
        last = self._cow.latest()
        if last is not None:
            return last
        if self.dra.dirty is None or self.dra.dirty or self.dra.classes_changed:
            self._refresh_devices()
        nodes, pods, journal = self._nodes, self._pods, self.journal
        snapshot = Snapshot(
            history=self.history,
            nodes=nodes.order,
            positions=nodes.positions,
            images=nodes.images,
            affinity=pods.affinity,
            pdbs=self._pdb_tuple,
            namespaces=self._namespaces,
            workloads=self._workloads,
            storage=self.volumes.storage,
            dra=self.dra.state,
            dra_allocated=self.dra.allocated,
            dra_cel=self.dra.cel,
            dra_pools=self.dra.pools,
            dra_memo=self.dra.memo,
            claim_users=pods.claim_users,
            generation=self.generation,
            node_generation=self.node_generation,
            journal=journal.entries,
            journal_start=journal.start,
            pod_position=journal.position,
        )
        self._cow.taken(snapshot)
        return snapshot

    def _changed(self) -> None:
        self.generation += 1
        self._cow.changed()

    def _refresh_devices(self) -> None:
        """node.devices of the nodes whose devices may have changed (DraCache.refresh). A change
        that came with a pod placed on the node is in the pod journal, which tells the engine's
        tables which rows to recompute; any other (slices, claims changed by others) counts as a
        change of the nodes, after which the engine starts afresh."""
        fresh = self.dra.refresh(self._nodes.by_name)
        covered, self.dra.covered = self.dra.covered, set()
        beyond, self.dra.classes_changed = self.dra.classes_changed, False
        for name, views in fresh.items():
            if views != self._nodes.by_name[name].devices:
                self._nodes.writable(name).set_devices(views)
                beyond = beyond or name not in covered
        if beyond:
            self._nodes_changed()

    def _nodes_changed(self) -> None:
        self._changed()
        self.node_generation += 1

    # --- reading (the writer's own view; other threads read snapshots) ----------------------
    @property
    def nodes(self) -> Sequence[NodeInfo]:
        return self._nodes.order

    def node_views(self) -> Sequence[NodeInfo]:
        return self._nodes.order

    def node_view(self, name: str) -> NodeInfo | None:
        return self._nodes.by_name.get(name)

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self._namespaces

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self._namespaces.get(namespace, EMPTY)

    def image_node_count(self, image: str) -> int:
        return self._nodes.images.get(image, 0)

    @property
    def workloads(self) -> Workloads:
        return self._workloads

    def affinity_pods(self) -> Iterator[tuple[Pod, NodeInfo]]:
        by_name = self._nodes.by_name
        for pod, node_name in self._pods.affinity.values():
            yield pod, by_name[node_name]

    @property
    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        return self._pdb_tuple

    @property
    def pod_position(self) -> int:
        """How many pod changes there have been: the journal position of the next one."""
        return self.journal.position

    def pod_changes(self, since: int) -> Sequence[Change] | None:
        """The pod changes from position ``since`` on; None if they are no longer kept."""
        return self.journal.since(since)

    def pods(self) -> Iterator[Pod]:
        """The pods on known nodes (assumed ones included), node by node."""
        for info in self._nodes.order:
            yield from info.pods

    def pod_node(self, key: str) -> str | None:
        return self._pods.where.get(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    @property
    def orphans(self) -> Mapping[str, Pod]:
        """Pods bound to nodes the store does not know (yet): they use no node's resources."""
        return self._pods.orphans

    @property
    def storage(self) -> StorageState:
        return self.volumes.storage

    def claim_users(self, claim: str) -> int:
        return self._pods.claim_users.get(claim, 0)

    def volume_decisions(self, pod_key: str) -> tuple[Decision, ...]:
        """VolumeBinding's choices for an assumed pod, for the binder to make in the cluster."""
        return self.volumes.decisions(pod_key)

    # --- nodes ---------------------------------------------------------------------------------
    def add_node(self, node: Node) -> NodeInfo:
        """A node was added or changed (an informer's add and update are the same here)."""
        if node.name in self._nodes.by_name:
            info = self._nodes.update(node)
            self._nodes_changed()
            return info
        info = self._nodes.add(node)
        self._load_changed(info)
        if not self.dra.empty:
            self.dra.mark(node.name)
        self._nodes_changed()
        for pod in self._pods.waiting_for(node.name):  # pods that arrived before their node
            self._place(pod, log=False)
        return info

    update_node = add_node

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it. They stay in the store, using no
        resources, until they are deleted or their node comes back (kube-scheduler keeps them
        the same way)."""
        info = self._nodes.remove(name)
        if info is None:
            return []
        for pod in info.pods:
            self._pods.orphaned(pod)
        self._nodes_changed()
        return list(info.pods)

    # --- pods ----------------------------------------------------------------------------------
    def upsert_pod(self, pod: Pod) -> None:
        """A pod as an informer reports it, in any state: bound pods use their node's
        resources; finished pods (Succeeded, Failed) free them; unbound pods are not the
        store's (they are the queue's), except that an assumption outlives the informer's
        older view of an assumed pod as still unbound."""
        if pod.phase in FINISHED:
            self.remove_pod(pod.key)
        elif pod.node_name:
            self.add_pod(pod)
        elif pod.key not in self._assumed:
            self.remove_pod(pod.key)

    def add_pod(self, pod: Pod) -> None:
        """Add a pod bound to ``pod.node_name``, replacing an earlier version or an assumption
        (which the informer thereby confirms: a pod found bound elsewhere is taken as bound
        there). The very object assumed coming back, or one equal to it field by field (the
        informer's news of the binding, usually), confirms it without a change: the rules'
        per-domain counts and the node's row in the cycle's tables stay as they are."""
        key = pod.key
        pods = self._pods
        if key in self._assumed:
            node_name = pods.where.get(key)
            placed = None if node_name is None else self._nodes.by_name[node_name].find_pod(key)
            self._assumed.discard(key)
            if placed is pod or (placed is not None and same_pod(placed, pod)):
                return
        if key in pods.where or key in pods.orphans:
            self.remove_pod(key, forget=False)
        if pod.node_name in self._nodes.by_name:
            self._place(pod)
        else:
            pods.orphans[key] = pod
            self._changed()

    def _place(self, pod: Pod, log: bool = True) -> None:
        info = self._nodes.writable(pod.node_name)
        info.add_pod(pod)
        self._load_changed(info)
        if log:
            self.journal.log(1, pod, info.node)
        self._pods.placed(pod, info.name)
        self._changed()

    def remove_pod(self, key: str, forget: bool = True) -> Pod | None:
        """Remove a pod (deleted, finished); None if the store does not hold it."""
        if forget:
            self._assumed.discard(key)
            self.load.unbound(key)
        pods = self._pods
        orphan = pods.orphans.pop(key, None)
        if orphan is not None:
            self._changed()
            return orphan
        name = pods.where.pop(key, None)
        if name is None:
            return None
        info = self._nodes.writable(name)
        removed = info.find_pod(key)
        if removed is not None:
            info.remove_pod(removed)
            self._load_changed(info)
            self.journal.log(-1, removed, info.node)
        pods.taken_off(key, removed)
        self._changed()
        return removed

    # --- the scheduler's assumptions -------------------------------------------------------------
    def assume(
        self,
        pod: Pod,
        node_name: str,
        allocations: Mapping[str, Allocation] | None = None,
        reserve: tuple[str, ...] = (),
        made: tuple[ResourceClaim, Any] | None = None,
    ) -> Pod:
        """Place a pod on a node before its binding completes; returns the placed pod.
        ``allocations`` (claim key -> allocation) and ``reserve`` (claim keys): DRA's Reserve,
        the devices chosen for its claims and the claims it uses (:class:`DraCache`); ``made``:
        the claim made for its DRA-served extended resources and its requests' mappings (the
        placed pod names it, as ``status.extendedResourceClaimStatus`` will)."""
        placed = replaced(pod, node_name=node_name, nominated_node_name="")
        if made is not None:
            placed = dataclasses.replace(placed, extended_claim=made[0].name)
        if pod.volumes:  # VolumeBinding's Reserve: the claims it chose are taken now
            self.volumes.assume(placed, self._nodes.by_name.get(node_name))
        if allocations or reserve:
            self.dra.assume(placed, allocations or {}, reserve, made)
        elif pod.resource_claims or pod.extended_requests:  # DynamicResources' Reserve: devices taken now
            _, made_name = self.dra.reserve(placed, self._nodes.by_name.get(node_name))
            if made_name:
                placed = dataclasses.replace(placed, extended_claim=made_name)
        self.load.bound(placed, node_name)  # (before placing it: its node shows the estimate at once)
        self.add_pod(placed)
        self._assumed.add(placed.key)
        return placed

    def finish_binding(self, key: str, now: float | None = None) -> None:
        """The binding call succeeded. Without ``now`` the binding is final (the simulator's
        binder is the cluster); with it, the assumption stands until the informer reports the
        pod bound, and expires ``assumed_ttl`` seconds after ``now`` if it never does."""
        if key not in self._assumed:
            return
        self.volumes.settled(key)
        self.dra.settled(key)
        self._assumed.bound(key, now)

    def forget(self, key: str) -> None:
        """Undo an assumption whose binding failed."""
        if key in self._assumed:
            self.remove_pod(key)
        self.volumes.revert(key)
        self.dra.revert(key)

    def expire_assumed(self, now: float) -> list[Pod]:
        """Drop assumptions whose binding finished long ago but which no informer confirmed."""
        return [p for p in (self.remove_pod(k) for k in self._assumed.expired(now)) if p is not None]

    # --- storage objects: the storage cache's own (``store.volumes.put``), all but a whole load --
    def set_storage(self, storage: StorageState) -> None:
        """Replace every storage object (a load from files)."""
        self.volumes.replace_all(storage)

    def set_load(self, load: LoadSnapshot) -> None:
        """New measured node load (from the load sources, or a file): the nodes whose values
        change are changed, as a Node update changes them; values of unknown nodes are ignored."""
        self.load.set_measured(load)
        changed = False
        for name in list(self._nodes.by_name):
            fields = self.load.fields(name)
            info = self._nodes.by_name[name]
            if (info.usage, info.metrics, info.metrics_age) != fields:
                changed = self._nodes.writable(name).set_load(*fields) or changed
        if changed:
            self._nodes_changed()

    def _load_changed(self, info: NodeInfo) -> None:
        """A pod came to or left ``info`` (writable): its estimate with it."""
        if self.load.enabled:
            info.set_load(*self.load.fields(info.name))

    # --- budgets and namespaces ------------------------------------------------------------------
    def set_pdb(self, pdb: PodDisruptionBudget) -> None:
        self._pdbs[pdb.key] = pdb
        self._pdb_tuple = tuple(self._pdbs.values())
        self._changed()

    def remove_pdb(self, key: str) -> None:
        if self._pdbs.pop(key, None) is not None:
            self._pdb_tuple = tuple(self._pdbs.values())
            self._changed()

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        """A namespace added or changed (affinity terms may select namespaces by label)."""
        if self._namespaces.get(name) == labels and name in self._namespaces:
            return
        if self._cow.must_copy("namespaces"):
            self._namespaces = dict(self._namespaces)
        self._namespaces[name] = labels
        self._nodes_changed()

    def remove_namespace(self, name: str) -> None:
        if name in self._namespaces:
            if self._cow.must_copy("namespaces"):
                self._namespaces = dict(self._namespaces)
            del self._namespaces[name]
            self._nodes_changed()

    def set_namespaces(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        """Replace every namespace's labels."""
        self._namespaces = dict(namespaces)
        self._cow.made_now("namespaces")
        self._nodes_changed()

    # --- Services and controllers (system default spreading's selectors) -----------------------
    def _set_workloads(self, workloads: Workloads) -> None:
        if workloads is not self._workloads:
            self._workloads = workloads
            self._changed()

    def set_service(self, service: Service) -> None:
        self._set_workloads(self._workloads.with_service(service))

    def remove_service(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        self._set_workloads(self._workloads.without_service(namespace, name))

    def set_controller(self, controller: Controller) -> None:
        self._set_workloads(self._workloads.with_controller(controller))

    def remove_controller(self, kind: str, key: str) -> None:
        namespace, _, name = key.partition("/")
        self._set_workloads(self._workloads.without_controller(kind, namespace, name))

    # --- comparing and building ------------------------------------------------------------------
    def contents(self) -> dict[str, Any]:
        """What the store holds, as plain values: equal for stores that hold the same objects
        however they got there (tests compare stores built by different event orders)."""
        return {
            "nodes": {n.name: n.node for n in self._nodes.order},
            "pods": {n.name: sorted(p.key for p in n.pods) for n in self._nodes.order},
            "requested": {n.name: dict(n.requested) for n in self._nodes.order},
            "orphans": sorted(self._pods.orphans),
            "assumed": sorted(self._assumed),
            "images": dict(self._nodes.images),
            "affinity": sorted(self._pods.affinity),
            "pdbs": dict(self._pdbs),
            "namespaces": dict(self._namespaces),
            "services": {ns: sorted(s.name for s in found) for ns, found in self._workloads.services.items()},
            "controllers": dict(self._workloads.controllers),
            **self.volumes.contents(),
            **self.dra.contents(),
            "claim_users": dict(self._pods.claim_users),
        }

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, provision: bool = True) -> ClusterStore:
        """A store holding what ``snapshot`` holds (its nodes with their pods and measured load,
        budgets, namespaces, Services and controllers, storage), to change apart from the store
        the snapshot came from (explain's trials of changed clusters)."""
        nodes = [info.node for info in snapshot.nodes]
        store = cls.build(
            nodes,
            list(snapshot.pods()),
            snapshot.pdbs,
            snapshot.namespaces,
            snapshot.workloads,
            snapshot.storage,
            provision=provision,
        )
        for info in snapshot.nodes:
            if info.usage or info.metrics:
                store._nodes.writable(info.name).set_load(info.usage, info.metrics, info.metrics_age)
        return store

    @classmethod
    def build(
        cls,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        pdbs: Iterable[PodDisruptionBudget] = (),
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        workloads: Workloads = NO_WORKLOADS,
        storage: StorageState | None = None,
        provision: bool = False,
        load: LoadSnapshot | None = None,
        dra: DraState | None = None,
    ) -> ClusterStore:
        store = cls(provision=provision)
        store._workloads = workloads
        if storage is not None:
            store.set_storage(storage)
        if dra is not None and not dra.empty:
            store.dra.replace_all(dra)
        for node in nodes:
            store.add_node(node)
        if load is not None:
            store.set_load(load)
        for pod in pods:
            store.add_pod(pod)
        pods = list(store.pods())
        for pdb in pdbs:
            if not pdb.status_known:  # as the disruption controller would have set it
                pdb = dataclasses.replace(pdb, disruptions_allowed=disruptions_allowed(pdb, pods))
            store.set_pdb(pdb)
        store.set_namespaces(namespaces or {})
        return store
