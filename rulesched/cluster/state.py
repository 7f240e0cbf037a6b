"""The cluster store: nodes with their pods, kept current as objects arrive, bind and leave.

One implementation feeds the simulator, the scheduler loop and the extender. It is also the
:class:`rulesched.lang.ClusterView` cluster-wide built-ins read, with the indexes they need kept
incrementally: image name -> number of nodes holding it, and the pods that carry (anti-)affinity
terms. Every pod added or removed is also written to a bounded journal, which the built-ins replay
into the per-domain counts they keep in ``indexes`` (rulesched.lang.builtins.indexes), so spreading and
inter-pod affinity need not rescan the cluster for every pod. A pod the scheduler has chosen a node for is *assumed* here before its binding finishes,
so the next cycle already sees its resources; :meth:`forget` rolls an assumption back.
Next stage: :mod:`rulesched.scheduler` reads this state each cycle.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import cachetools

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.errors import InputError
from rulesched.model import Node, Pod, PodDisruptionBudget
from rulesched.model.objects import EMPTY

JOURNAL_KEEP = 4096  # pod changes kept for replay; an index further behind is rebuilt
INDEX_CACHE_SIZE = 128  # derived indexes kept at once (least recently used go first)


def _has_affinity(pod: Pod) -> bool:
    return bool(pod.pod_affinity or pod.pod_anti_affinity or pod.preferred_pod_affinity
                or pod.preferred_pod_anti_affinity)


class ClusterState:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._order: list[NodeInfo] = []  # stable node order: the scheduler walks it round-robin
        self._where: dict[str, str] = {}  # pod key -> node name
        self._assumed: set[str] = set()
        self._images: Counter[str] = Counter()
        self._affinity: dict[str, Pod] = {}  # pod key -> pod, for pods with affinity terms
        self.pdbs: list[PodDisruptionBudget] = []
        self.namespaces: dict[str, Mapping[str, str]] = {}
        # Change counters (compiled rules key cached cluster-wide answers on them):
        self.generation = 0  # any change
        self.node_generation = 0  # nodes came, went or changed (or namespaces' labels)
        # Pod journal: (+1 | -1, pod, node) per change; _journal[0] is change number _journal_start.
        self._journal: list[tuple[int, Pod, NodeInfo]] = []
        self._journal_start = 0
        # Owned by cluster-wide built-ins (rulesched.lang.builtins.indexes); this class never reads it.
        self.indexes: cachetools.LRUCache[Any, Any] = cachetools.LRUCache(INDEX_CACHE_SIZE)

    # --- ClusterView ---------------------------------------------------------------------------
    def node_views(self) -> Sequence[NodeInfo]:
        return self._order

    def node_view(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.namespaces.get(namespace, EMPTY)

    def image_node_count(self, image: str) -> int:
        return self._images.get(image, 0)

    def affinity_pods(self) -> Iterator[tuple[Pod, NodeInfo]]:
        for key, pod in self._affinity.items():
            yield pod, self._nodes[self._where[key]]

    @property
    def pod_position(self) -> int:
        """How many pod changes there have been: the journal position of the next one."""
        return self._journal_start + len(self._journal)

    def pod_changes(self, since: int) -> Sequence[tuple[int, Pod, NodeInfo]] | None:
        """The pod changes from position ``since`` on; None if they are no longer kept."""
        if since < self._journal_start:
            return None
        return self._journal[since - self._journal_start:]

    def _log(self, sign: int, pod: Pod, info: NodeInfo) -> None:
        journal = self._journal
        journal.append((sign, pod, info))
        if len(journal) > 2 * JOURNAL_KEEP:
            del journal[:JOURNAL_KEEP]
            self._journal_start += JOURNAL_KEEP

    def set_namespaces(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        """Replace the namespaces' labels (affinity terms may select namespaces by label)."""
        self.namespaces = dict(namespaces)
        self._nodes_changed()

    # --- nodes ---------------------------------------------------------------------------------
    @property
    def nodes(self) -> Sequence[NodeInfo]:
        return self._order

    def add_node(self, node: Node) -> NodeInfo:
        if node.name in self._nodes:
            return self.update_node(node)
        info = NodeInfo(node)
        self._nodes[node.name] = info
        self._order.append(info)
        self._images.update(node.images.keys())
        self._nodes_changed()
        return info

    def update_node(self, node: Node) -> NodeInfo:
        info = self._nodes[node.name]
        self._images.subtract(info.images.keys())
        info.set_node(node)
        self._images.update(node.images.keys())
        self._images += Counter()  # drop zero counts
        self._nodes_changed()
        return info

    def remove_node(self, name: str) -> list[Pod]:
        """Remove a node; returns the pods that were on it (they are removed too)."""
        info = self._nodes.pop(name, None)
        if info is None:
            return []
        self._order.remove(info)
        self._images.subtract(info.images.keys())
        self._images += Counter()
        for pod in info.pods:
            self._where.pop(pod.key, None)
            self._assumed.discard(pod.key)
            self._affinity.pop(pod.key, None)
        self._nodes_changed()
        return list(info.pods)

    def _nodes_changed(self) -> None:
        self.generation += 1
        self.node_generation += 1

    # --- pods ----------------------------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        """Add a pod bound to ``pod.node_name`` (replacing an earlier version or assumption)."""
        info = self._nodes.get(pod.node_name)
        if info is None:
            raise InputError(f"Pod {pod.key}: spec.nodeName: node {pod.node_name!r} does not exist")
        if pod.key in self._where:
            self.remove_pod(pod.key)
        info.add_pod(pod)
        self._where[pod.key] = info.name
        self._log(1, pod, info)
        if _has_affinity(pod):
            self._affinity[pod.key] = pod
        self.generation += 1

    def remove_pod(self, key: str) -> Pod | None:
        name = self._where.pop(key, None)
        if name is None:
            return None
        info = self._nodes[name]
        namespace, _, pod_name = key.partition("/")
        removed = next((p for p in info.pods if p.name == pod_name and p.namespace == namespace), None)
        if removed is not None:
            info.remove_pod(removed)
            self._log(-1, removed, info)
        self._assumed.discard(key)
        self._affinity.pop(key, None)
        self.generation += 1
        return removed

    def pod_node(self, key: str) -> str | None:
        return self._where.get(key)

    def pods(self) -> Iterator[Pod]:
        for info in self._order:
            yield from info.pods

    def assume(self, pod: Pod, node_name: str) -> Pod:
        """Place a pod on a node before its binding completes; returns the placed pod."""
        placed = dataclasses.replace(pod, node_name=node_name, nominated_node_name="")
        self.add_pod(placed)
        self._assumed.add(placed.key)
        return placed

    def finish_binding(self, key: str) -> None:
        self._assumed.discard(key)

    def forget(self, key: str) -> None:
        """Undo an assumption whose binding failed."""
        if key in self._assumed:
            self.remove_pod(key)

    def is_assumed(self, key: str) -> bool:
        return key in self._assumed

    @classmethod
    def build(cls, nodes: Iterable[Node], pods: Iterable[Pod], pdbs: Iterable[PodDisruptionBudget] = (),
              namespaces: Mapping[str, Mapping[str, str]] | None = None) -> ClusterState:
        state = cls()
        for node in nodes:
            state.add_node(node)
        for pod in pods:
            state.add_pod(pod)
        state.pdbs = list(pdbs)
        state.set_namespaces(namespaces or {})
        return state
