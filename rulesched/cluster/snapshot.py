"""An immutable view of the cluster for one scheduling cycle or one extender request.

kube-scheduler takes a snapshot of its cache at the start of every cycle; so does rulesched.
A :class:`Snapshot` holds the store's node infos, indexes and pod journal as they were when it
was taken. The store never changes anything a snapshot holds (it copies a node info, a list or
a map before its first change after a snapshot), so a snapshot may be read from any thread, for
as long as its reader likes, while the store moves on. Taking one costs a few references; the
copies are paid by the store's next change.

Preemption's dry runs need the cluster with some pods removed: a :class:`ClusterOverlay` is a
private, changeable layer over a snapshot (cloned node infos, its own continuation of the pod
journal); the snapshot and the store are never touched.
Next stage: :mod:`rulesched.scheduler.cycle` filters and scores against a snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.model import Node, Pod, PodDisruptionBudget
from rulesched.model.dra import EMPTY_DRA, DraState
from rulesched.model.objects import EMPTY
from rulesched.model.storage import StorageState
from rulesched.model.workloads import Workloads
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_devices import NOTHING_ALLOCATED, AllocatedState

# A pod journal entry: +1 (added) or -1 (removed), the pod, and the Node it was on (the Node
# object, whose labels the indexes read, rather than a node info with a copy of its pods).
Change = tuple[int, Pod, Node]


class Snapshot:
    """What the cluster looked like at one moment; satisfies
    :class:`rulesched.lang.context.ClusterView`."""

    __slots__ = (
        "history",
        "nodes",
        "_positions",
        "_images",
        "_affinity",
        "pdbs",
        "namespaces",
        "workloads",
        "storage",
        "dra",
        "dra_allocated",
        "dra_cel",
        "dra_pools",
        "dra_memo",
        "_claim_users",
        "generation",
        "node_generation",
        "pod_position",
        "_journal",
        "_journal_start",
        "__weakref__",
    )

    def __init__(
        self,
        *,
        history: object,
        nodes: Sequence[NodeInfo],
        positions: Mapping[str, int],
        images: Mapping[str, int],
        affinity: Mapping[str, tuple[Pod, str]],
        pdbs: tuple[PodDisruptionBudget, ...],
        namespaces: Mapping[str, Mapping[str, str]],
        workloads: Workloads,
        storage: StorageState,
        claim_users: Mapping[str, int],
        dra: DraState = EMPTY_DRA,
        dra_allocated: AllocatedState = NOTHING_ALLOCATED,
        dra_cel: CelCache | None = None,
        dra_pools: dict[str, Any] | None = None,
        dra_memo: dict[Any, Any] | None = None,
        generation: int,
        node_generation: int,
        journal: Sequence[Change],
        journal_start: int,
        pod_position: int,
    ) -> None:
        self.history = history  # the store this came from: positions and generations are its own
        self.nodes = nodes
        self._positions = positions
        self._images = images
        self._affinity = affinity  # pod key -> (pod, node name), for pods with affinity terms
        self.pdbs = pdbs
        self.namespaces = namespaces
        self.workloads = workloads  # Services and controllers, for system default spreading
        self.storage = storage  # volumes, claims, classes, CSINodes (rulesched.model.storage)
        self.dra = dra  # DRA's classes, claims, templates, slices (rulesched.model.dra)
        self.dra_allocated = dra_allocated  # the devices the claims' allocations hold
        self.dra_cel = dra_cel or CelCache()  # the store's compiled selectors and their verdicts
        self.dra_pools = dra_pools  # the store's per-node pools for the allocator
        self.dra_memo = dra_memo  # Filter's verdicts shared between pods (rulesched.semantics.dra_pod)
        self._claim_users = claim_users  # claim key -> how many placed pods mount it
        self.generation = generation
        self.node_generation = node_generation
        self._journal = journal
        self._journal_start = journal_start
        self.pod_position = pod_position

    # --- ClusterView ---------------------------------------------------------------------------
    def node_views(self) -> Sequence[NodeInfo]:
        return self.nodes

    def node_view(self, name: str) -> NodeInfo | None:
        position = self._positions.get(name)
        return None if position is None else self.nodes[position]

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, EMPTY)

    def image_node_count(self, image: str) -> int:
        return self._images.get(image, 0)

    def claim_users(self, claim: str) -> int:
        return self._claim_users.get(claim, 0)

    def affinity_pods(self) -> Iterator[tuple[Pod, NodeInfo]]:
        nodes, positions = self.nodes, self._positions
        for pod, node_name in self._affinity.values():
            yield pod, nodes[positions[node_name]]

    def pod_changes(self, since: int) -> Sequence[Change] | None:
        """The pod changes from position ``since`` up to this snapshot; None if no longer kept."""
        if since < self._journal_start or since > self.pod_position:
            return None
        # (the store appends to the same list after this snapshot: stop at its position)
        return self._journal[since - self._journal_start : self.pod_position - self._journal_start]

    # --- reading ---------------------------------------------------------------------------------
    def pods(self) -> Iterator[Pod]:
        for info in self.nodes:
            yield from info.pods


class ClusterOverlay:
    """A snapshot with pods taken off and put back, for preemption's dry runs. Changes clone
    the node info they touch and continue the snapshot's journal privately; positions and
    generations go on from the snapshot's, so indexes forked from the snapshot's can replay
    them (:class:`rulesched.lang.indexes.ForkedIndexes`). Single-threaded, short-lived."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self.history = base.history
        self.pdbs = base.pdbs
        self.workloads = base.workloads
        self.storage = base.storage
        self.dra = base.dra
        self.dra_allocated = base.dra_allocated
        self.dra_cel = base.dra_cel
        self.dra_pools = base.dra_pools
        self.dra_memo = None  # (a dry run's nodes are not the store's: no shared verdicts)
        self.node_generation = base.node_generation
        self._changed: dict[str, NodeInfo] = {}  # node name -> its changed clone
        self._removed: dict[str, str] = {}  # pod key -> node name, for pods taken off
        # DRA pods only (the DynamicResources filter reads them): node name -> its pods taken
        # off, and the pods put on it that it did not hold (nominated pods), by key
        self._off: dict[str, dict[str, Pod]] = {}
        self._on: dict[str, dict[str, Pod]] = {}
        self._claims: dict[str, int] = {}  # claim key -> users added (+) or taken off (-) here
        self._added: dict[str, tuple[Pod, str]] = {}  # pods put back (or on), by key
        self._journal: list[Change] = []
        self._nodes: list[NodeInfo] | None = None

    @property
    def generation(self) -> int:
        return self.base.generation + len(self._journal)

    @property
    def pod_position(self) -> int:
        return self.base.pod_position + len(self._journal)

    def node_views(self) -> Sequence[NodeInfo]:
        if not self._changed:
            return self.base.nodes
        if self._nodes is None:
            changed = self._changed
            self._nodes = [changed.get(info.name, info) for info in self.base.nodes]
        return self._nodes

    @property
    def nodes(self) -> Sequence[NodeInfo]:
        return self.node_views()

    def node_view(self, name: str) -> NodeInfo | None:
        return self._changed.get(name) or self.base.node_view(name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.base.namespace_labels(namespace)

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        return self.base.namespaces

    def image_node_count(self, image: str) -> int:
        return self.base.image_node_count(image)

    def claim_users(self, claim: str) -> int:
        return self.base.claim_users(claim) + self._claims.get(claim, 0)

    def dra_removed(self, name: str) -> Sequence[Pod]:
        """The DRA pods taken off node ``name`` (the DynamicResources filter releases the claims
        their going frees: rulesched.semantics.dra_preemption)."""
        off = self._off.get(name)
        return tuple(off.values()) if off else ()

    def dra_added(self, name: str) -> Sequence[Pod]:
        """The DRA pods put on node ``name`` that it did not hold (nominated pods: the
        DynamicResources filter leaves their devices to them)."""
        on = self._on.get(name)
        return tuple(on.values()) if on else ()

    def _count_claims(self, pod: Pod, sign: int) -> None:
        for claim in pod.claims:
            key = f"{pod.namespace}/{claim}"
            self._claims[key] = self._claims.get(key, 0) + sign

    def affinity_pods(self) -> Iterator[tuple[Pod, NodeInfo]]:
        for pod, info in self.base.affinity_pods():
            key = pod.key
            if key not in self._removed and key not in self._added:
                yield pod, self.node_view(info.name) or info
        for pod, node_name in self._added.values():
            if (
                pod.pod_affinity
                or pod.pod_anti_affinity
                or pod.preferred_pod_affinity
                or pod.preferred_pod_anti_affinity
            ):
                placed = self.node_view(node_name)
                if placed is not None:
                    yield pod, placed

    def pod_changes(self, since: int) -> Sequence[Change] | None:
        base = self.base.pod_position
        if since >= base:
            return self._journal[since - base :] if since <= self.pod_position else None
        earlier = self.base.pod_changes(since)
        return None if earlier is None else [*earlier, *self._journal]

    # --- the dry run's changes -----------------------------------------------------------------
    def _writable(self, name: str) -> NodeInfo:
        changed = self._changed.get(name)
        if changed is not None:
            return changed
        base = self.base.node_view(name)
        assert base is not None, name
        info = self._changed[name] = base.clone(epoch=-1)
        self._nodes = None
        return info

    def remove_pod(self, pod: Pod) -> None:
        info = self._writable(pod.node_name)
        if info.remove_pod(pod):
            self._journal.append((-1, pod, info.node))
            if pod.volumes:
                self._count_claims(pod, -1)
            self._added.pop(pod.key, None)
            self._removed[pod.key] = info.name
            if pod.resource_claims or pod.extended_claim or pod.extended_requests:
                if self._on.get(info.name, {}).pop(pod.key, None) is None:
                    self._off.setdefault(info.name, {})[pod.key] = pod

    def add_pod(self, pod: Pod) -> None:
        info = self._writable(pod.node_name)
        info.add_pod(pod)
        self._journal.append((1, pod, info.node))
        if pod.volumes:
            self._count_claims(pod, 1)
        self._removed.pop(pod.key, None)
        if (pod.resource_claims or pod.extended_claim or pod.extended_requests) and self._off.get(info.name, {}).pop(
            pod.key, None
        ) is None:
            self._on.setdefault(info.name, {})[pod.key] = pod
        self._added[pod.key] = (pod, info.name)

    def reset_node(self, name: str) -> None:
        """Forget the clone of a node whose pods are all back (its base info is equal again)."""
        self._off.pop(name, None)
        self._on.pop(name, None)
        if self._changed.pop(name, None) is not None:
            self._nodes = None
            self._added = {k: v for k, v in self._added.items() if v[1] != name}
