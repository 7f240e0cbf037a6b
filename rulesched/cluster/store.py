"""The cluster store: nodes with their pods, kept current as objects arrive, bind and leave.

One implementation feeds the simulator, the scheduler loop and the extender. It has one writer
(the thread that owns it) and any number of readers, who read :meth:`ClusterStore.snapshot`\\ s,
never the store itself. Writes come in as an informer delivers them, in any order: a pod bound to
a node the store does not know yet is kept aside until the node arrives (and goes aside again if
its node is deleted), deletes of unknown objects do nothing, repeated objects replace themselves.

Beside the nodes it keeps the indexes cluster-wide built-ins read (image name -> number of nodes
holding it, the pods that carry (anti-)affinity terms), PodDisruptionBudgets and namespace
labels, and a bounded journal of pod adds and removes, which the built-ins replay into the
per-domain counts they keep (rulesched.lang.builtins.indexes), so spreading and inter-pod
affinity need not rescan the cluster for every pod.

A pod the scheduler has chosen a node for is *assumed* here before its binding finishes, so the
next cycle already sees its resources; :meth:`forget` rolls an assumption back. When the binding
call succeeds the assumption waits for the informer to report the pod bound; one that never
shows up expires (:meth:`expire_assumed`), as in kube-scheduler's cache.
Next stage: :mod:`rulesched.cluster.snapshot`, what every cycle reads.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from rulesched.cluster.load import LoadState
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Change, Snapshot
from rulesched.cluster.volumes import STORAGE_CONTAINERS, StorageMixin
from rulesched.lang.builtins.matching import label_selector_matches
from rulesched.model import Node, Pod, PodDisruptionBudget
from rulesched.model.load import LoadSnapshot
from rulesched.model.objects import EMPTY
from rulesched.model.storage import StorageState
from rulesched.model.workloads import NO_WORKLOADS, Controller, Service, Workloads

_CONTAINERS = ("order", "positions", "images", "affinity", "namespaces", "claim_users", *STORAGE_CONTAINERS)
JOURNAL_KEEP = 4096  # pod changes kept for replay; an index further behind is rebuilt
ASSUMED_TTL_SECONDS = 30.0  # kube-scheduler's durationToExpireAssumedPod of old
FINISHED = ("Succeeded", "Failed")


_POD_FIELDS = tuple(f.name for f in dataclasses.fields(Pod))


def same_pod(a: Pod, b: Pod) -> bool:
    """Whether two pods are equal in every field (Pod compares by identity)."""
    return all(getattr(a, name) == getattr(b, name) for name in _POD_FIELDS)


def _has_affinity(pod: Pod) -> bool:
    return bool(
        pod.pod_affinity or pod.pod_anti_affinity or pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity
    )


class _History:
    """Names one store's sequence of changes: journal positions and generation numbers mean
    something only within it (index entries and node tables check it)."""

    __slots__ = ()


class ClusterStore(StorageMixin):
    def __init__(self, assumed_ttl: float | None = ASSUMED_TTL_SECONDS, provision: bool = False) -> None:
        """``provision``: a claim provisioned for a node is given a volume at once (the
        simulator, which has no provisioner); otherwise it is only marked with the node, and
        the cluster's provisioner does the rest."""
        self.history = _History()
        self._init_storage(provision)
        self._assumed_ttl = assumed_ttl
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[NodeInfo] = []  # stable node order: the scheduler walks it round-robin
        self._positions: dict[str, int] = {}  # node name -> index in _order
        self._where: dict[str, str] = {}  # pod key -> node name, for pods on known nodes
        self._orphans: dict[str, Pod] = {}  # pod key -> pod bound to a node not (or no longer) known
        # pod key -> when an assumption whose binding call succeeded expires (None: in flight)
        self._assumed: dict[str, float | None] = {}
        self._images: Counter[str] = Counter()
        self._affinity: dict[str, tuple[Pod, str]] = {}  # pod key -> (pod, node), pods with terms
        self._pdbs: dict[str, PodDisruptionBudget] = {}
        self._pdb_tuple: tuple[PodDisruptionBudget, ...] = ()
        self._namespaces: dict[str, Mapping[str, str]] = {}
        self._workloads = NO_WORKLOADS  # Services and controllers: immutable, replaced on change
        self.load = LoadState()  # node load: measured values and placed pods' estimates (cluster/load.py)
        # Change counters (compiled rules key cached cluster-wide answers on them):
        self.generation = 0  # any change
        self.node_generation = 0  # nodes came, went or changed (or namespaces' labels)
        # Pod journal: (+1 | -1, pod, node) per change; _journal[0] is change number _journal_start.
        self._journal: list[Change] = []
        self._journal_start = 0
        # Copy on write, while someone holds a snapshot. Each snapshot is taken at an epoch; a
        # node info or a container made at epoch e is held by the live snapshots taken at e or
        # later, and copied before the store changes it. The store itself only keeps weak
        # references to snapshots: once every reader has let go of them (the scheduler does at
        # the end of each cycle), the store changes in place again.
        self._epoch = 0
        self._made: dict[str, int] = dict.fromkeys(_CONTAINERS, 0)  # container -> epoch made
        self._live: list[tuple[weakref.ref[Snapshot], int]] = []  # (snapshot, epoch taken at)
        self._last: weakref.ref[Snapshot] | None = None

    # --- snapshots -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The cluster as it is now, for readers on any thread; the same object until the next
        change. It stays as it is for as long as anyone holds it."""
        last = self._last() if self._last is not None else None
        if last is not None:
            return last
        snapshot = Snapshot(
            history=self.history,
            nodes=self._order,
            positions=self._positions,
            images=self._images,
            affinity=self._affinity,
            pdbs=self._pdb_tuple,
            namespaces=self._namespaces,
            workloads=self._workloads,
            storage=self.storage,
            claim_users=self._claim_users,
            generation=self.generation,
            node_generation=self.node_generation,
            journal=self._journal,
            journal_start=self._journal_start,
            pod_position=self.pod_position,
        )
        ref = weakref.ref(snapshot)
        if self._live:
            self._live = [(r, taken) for r, taken in self._live if r() is not None]
        self._live.append((ref, self._epoch))
        self._last = ref
        self._epoch += 1
        return snapshot

    def _held(self) -> int:
        """The newest epoch a snapshot still alive was taken at; -1 when none is alive."""
        if not self._live:
            return -1
        newest = -1
        for ref, taken in self._live:
            if taken > newest and ref() is not None:
                newest = taken
        if newest < 0 and self._live:
            self._live = []
        return newest

    def _own(self, name: str) -> bool:
        """Whether container ``name`` must be copied before changing it (a live snapshot holds
        it); the caller makes the copy, which is the store's own."""
        if self._made[name] <= self._held():
            self._made[name] = self._epoch
            return True
        return False

    def _changed(self) -> None:
        self.generation += 1
        self._last = None

    # --- reading (the writer's own view; other threads read snapshots) ----------------------
    @property
    def nodes(self) -> Sequence[NodeInfo]:
        return self._order

    def node_views(self) -> Sequence[NodeInfo]:
        return self._order

    def node_view(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self._namespaces

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self._namespaces.get(namespace, EMPTY)

    def image_node_count(self, image: str) -> int:
        return self._images.get(image, 0)

    @property
    def workloads(self) -> Workloads:
        return self._workloads

    def affinity_pods(self) -> Iterator[tuple[Pod, NodeInfo]]:
        for pod, node_name in self._affinity.values():
            yield pod, self._nodes[node_name]

    @property
    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        return self._pdb_tuple

    @property
    def pod_position(self) -> int:
        """How many pod changes there have been: the journal position of the next one."""
        return self._journal_start + len(self._journal)

    def pod_changes(self, since: int) -> Sequence[Change] | None:
        """The pod changes from position ``since`` on; None if they are no longer kept."""
        if since < self._journal_start:
            return None
        return self._journal[since - self._journal_start :]

    def pods(self) -> Iterator[Pod]:
        """The pods on known nodes (assumed ones included), node by node."""
        for info in self._order:
            yield from info.pods

    def pod_node(self, key: str) -> str | None:
        return self._where.get(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    @property
    def orphans(self) -> Mapping[str, Pod]:
        """Pods bound to nodes the store does not know (yet): they use no node's resources."""
        return self._orphans

    # --- nodes ---------------------------------------------------------------------------------
    def add_node(self, node: Node) -> NodeInfo:
        """A node was added or changed (an informer's add and update are the same here)."""
        info = self._nodes.get(node.name)
        if info is not None:
            return self._update_node(info, node)
        info = NodeInfo(node, epoch=self._epoch)
        self._load_changed(info)
        if self._own("order"):
            self._order = list(self._order)
        if self._own("positions"):
            self._positions = dict(self._positions)
        self._nodes[node.name] = info
        self._positions[node.name] = len(self._order)
        self._order.append(info)
        self._count_images(node.images.keys(), 1)
        self._nodes_changed()
        waiting = [p for p in self._orphans.values() if p.node_name == node.name]
        for pod in waiting:  # pods that arrived before their node
            del self._orphans[pod.key]
            self._place(pod, log=False)
        return info

    update_node = add_node

    def _update_node(self, info: NodeInfo, node: Node) -> NodeInfo:
        images = info.images
        info = self._writable(node.name)
        info.set_node(node)
        if images is not node.images:
            self._count_images(images.keys(), -1)
            self._count_images(node.images.keys(), 1)
        self._nodes_changed()
        return info

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it. They stay in the store, using no
        resources, until they are deleted or their node comes back (kube-scheduler keeps them
        the same way)."""
        info = self._nodes.pop(name, None)
        if info is None:
            return []
        if self._own("order"):
            self._order = list(self._order)
        if self._own("positions"):
            self._positions = dict(self._positions)
        del self._order[self._positions.pop(name)]
        for i, later in enumerate(self._order):
            self._positions[later.name] = i
        self._count_images(info.images.keys(), -1)
        for pod in info.pods:
            key = pod.key
            if pod.volumes:
                self._count_claims(pod, -1)
            self._where.pop(key, None)
            self._orphans[key] = pod
            if key in self._affinity:
                self._drop_affinity(key)
        self._nodes_changed()
        return list(info.pods)

    def _count_images(self, names: Iterable[str], sign: int) -> None:
        if self._own("images"):
            self._images = Counter(self._images)
        images = self._images
        for name in names:
            left = images[name] + sign
            if left > 0:
                images[name] = left
            else:
                del images[name]

    def _nodes_changed(self) -> None:
        self._changed()
        self.node_generation += 1

    def _writable(self, name: str) -> NodeInfo:
        """The node's info, cloned first if a snapshot holds it."""
        info = self._nodes[name]
        if info.epoch <= self._held():
            info = info.clone(self._epoch)
            self._nodes[name] = info
            if self._own("order"):
                self._order = list(self._order)
            self._order[self._positions[name]] = info
        return info

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
        if key in self._assumed:
            node_name = self._where.get(key)
            placed = None if node_name is None else self._nodes[node_name].find_pod(key)
            del self._assumed[key]
            if placed is pod or (placed is not None and same_pod(placed, pod)):
                return
        if key in self._where or key in self._orphans:
            self.remove_pod(key, forget=False)
        if pod.node_name in self._nodes:
            self._place(pod)
        else:
            self._orphans[key] = pod
            self._changed()

    def _place(self, pod: Pod, log: bool = True) -> None:
        info = self._writable(pod.node_name)
        info.add_pod(pod)
        self._load_changed(info)
        key = pod.key
        self._where[key] = info.name
        if log:
            self._log(1, pod, info.node)
        if _has_affinity(pod):
            if self._own("affinity"):
                self._affinity = dict(self._affinity)
            self._affinity[key] = (pod, info.name)
        if pod.volumes:
            self._count_claims(pod, 1)
        self._changed()

    def remove_pod(self, key: str, forget: bool = True) -> Pod | None:
        """Remove a pod (deleted, finished); None if the store does not hold it."""
        if forget:
            self._assumed.pop(key, None)
            self.load.unbound(key)
        orphan = self._orphans.pop(key, None)
        if orphan is not None:
            self._changed()
            return orphan
        name = self._where.pop(key, None)
        if name is None:
            return None
        info = self._writable(name)
        removed = info.find_pod(key)
        if removed is not None:
            info.remove_pod(removed)
            self._load_changed(info)
            self._log(-1, removed, info.node)
            if removed.volumes:
                self._count_claims(removed, -1)
        if key in self._affinity:
            self._drop_affinity(key)
        self._changed()
        return removed

    def _drop_affinity(self, key: str) -> None:
        if self._own("affinity"):
            self._affinity = dict(self._affinity)
        del self._affinity[key]

    def _log(self, sign: int, pod: Pod, node: Node) -> None:
        journal = self._journal
        journal.append((sign, pod, node))
        if len(journal) > 2 * JOURNAL_KEEP:
            # A new list rather than a deletion: snapshots slice the old one.
            self._journal = journal[JOURNAL_KEEP:]
            self._journal_start += JOURNAL_KEEP

    # --- the scheduler's assumptions -------------------------------------------------------------
    def assume(self, pod: Pod, node_name: str) -> Pod:
        """Place a pod on a node before its binding completes; returns the placed pod."""
        placed = dataclasses.replace(pod, node_name=node_name, nominated_node_name="")
        if pod.volumes:  # VolumeBinding's Reserve: the claims it chose are taken now
            self._assume_volumes(placed, self._nodes.get(node_name))
        self.load.bound(placed, node_name)  # (before placing it: its node shows the estimate at once)
        self.add_pod(placed)
        self._assumed[placed.key] = None
        return placed

    def finish_binding(self, key: str, now: float | None = None) -> None:
        """The binding call succeeded. Without ``now`` the binding is final (the simulator's
        binder is the cluster); with it, the assumption stands until the informer reports the
        pod bound, and expires ``assumed_ttl`` seconds after ``now`` if it never does."""
        if key not in self._assumed:
            return
        self._volumes_settled(key)
        if now is None:
            del self._assumed[key]
        else:
            ttl = self._assumed_ttl
            self._assumed[key] = now + ttl if ttl else math.inf

    def forget(self, key: str) -> None:
        """Undo an assumption whose binding failed."""
        if key in self._assumed:
            self.remove_pod(key)
        self._revert_volumes(key)

    def expire_assumed(self, now: float) -> list[Pod]:
        """Drop assumptions whose binding finished long ago but which no informer confirmed."""
        expired = [k for k, deadline in self._assumed.items() if deadline is not None and deadline <= now]
        return [p for p in (self.remove_pod(k) for k in expired) if p is not None]

    def set_load(self, load: LoadSnapshot) -> None:
        """New measured node load (from the load sources, or a file): the nodes whose values
        change are changed, as a Node update changes them; values of unknown nodes are ignored."""
        self.load.set_measured(load)
        changed = False
        for name in list(self._nodes):
            fields = self.load.fields(name)
            info = self._nodes[name]
            if (info.usage, info.metrics, info.metrics_age) != fields:
                changed = self._writable(name).set_load(*fields) or changed
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
        if self._own("namespaces"):
            self._namespaces = dict(self._namespaces)
        self._namespaces[name] = labels
        self._nodes_changed()

    def remove_namespace(self, name: str) -> None:
        if name in self._namespaces:
            if self._own("namespaces"):
                self._namespaces = dict(self._namespaces)
            del self._namespaces[name]
            self._nodes_changed()

    def set_namespaces(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        """Replace every namespace's labels."""
        self._namespaces = dict(namespaces)
        self._made["namespaces"] = self._epoch
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
            "nodes": {n.name: n.node for n in self._order},
            "pods": {n.name: sorted(p.key for p in n.pods) for n in self._order},
            "requested": {n.name: dict(n.requested) for n in self._order},
            "orphans": sorted(self._orphans),
            "assumed": sorted(self._assumed),
            "images": dict(self._images),
            "affinity": sorted(self._affinity),
            "pdbs": dict(self._pdbs),
            "namespaces": dict(self._namespaces),
            "services": {ns: sorted(s.name for s in found) for ns, found in self._workloads.services.items()},
            "controllers": dict(self._workloads.controllers),
            **self._storage_contents(),
        }

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
    ) -> ClusterStore:
        store = cls(provision=provision)
        store._workloads = workloads
        if storage is not None:
            store.set_storage(storage)
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


def disruptions_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """What the disruption controller puts in ``status.disruptionsAllowed``: healthy pods the
    budget selects (running, not terminating), less the healthy pods it wants: ``minAvailable``
    (a count, or a percentage of the selected pods rounded up), or the selected pods less
    ``maxUnavailable`` (likewise); 0 at least. (The controller counts the expected pods from
    their controllers' scale; here, the pods selected.)"""
    selected = [
        p
        for p in pods
        if p.namespace == pdb.namespace
        and pdb.selector is not None  # (v1beta1's empty selector: nothing)
        and label_selector_matches(pdb.selector, p.labels)
    ]
    healthy = sum(1 for p in selected if p.phase == "Running" and not p.deleting)
    expected = len(selected)
    desired = 0
    if pdb.max_unavailable is not None:
        desired = max(0, expected - _scaled(pdb.max_unavailable, expected))
    elif pdb.min_available is not None:
        desired = _scaled(pdb.min_available, expected)
    return max(0, healthy - desired)


def _scaled(value: int | str, total: int) -> int:
    """An IntOrString against ``total``: a count as is, a percentage rounded up."""
    if isinstance(value, int):
        return value
    return -(-int(value[:-1]) * total // 100)
