"""Indexes over the cluster's pods that cluster-wide built-ins keep current between cycles.

kube-scheduler's PreFilter for inter-pod affinity and topology spreading counts matching pods per
topology domain by walking every node, for every pod. Here such counts are kept: an index is
built once by a walk, stored in the cluster view's ``indexes`` under a key naming what it counts
(the incoming pod's terms, namespace, ...), and brought up to date before each use by replaying
the pods added and removed since (``ClusterView.pod_changes``). Counts are sums over pods, so a
removal is the addition with sign -1. A change to nodes (their labels decide domains) or a replay
the journal no longer covers means a rebuild. The built-ins themselves are in
:mod:`rulesched.lang.builtins.affinity` and :mod:`rulesched.lang.builtins.spreading`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from rulesched.lang.context import ClusterView
from rulesched.lang.schema import NodeView
from rulesched.model import Pod


class PodIndex(Protocol):
    def build(self, cluster: ClusterView) -> None:
        """Count from scratch."""

    def apply(self, sign: int, pod: Pod, node: NodeView) -> None:
        """Count a pod added to (+1) or removed from (-1) a node."""


IndexT = TypeVar("IndexT", bound=PodIndex)


class _Entry(Generic[IndexT]):
    __slots__ = ("index", "node_generation", "position")

    def __init__(self, index: IndexT, node_generation: int, position: int) -> None:
        self.index, self.node_generation, self.position = index, node_generation, position


def current(cluster: ClusterView, key: Hashable, make: Callable[[], IndexT]) -> IndexT:
    """The index stored under ``key``, brought up to date; built by ``make()`` if there is none."""
    store = cluster.indexes
    entry: _Entry[IndexT] | None = store.get(key)
    generation, position = cluster.node_generation, cluster.pod_position
    if entry is not None and entry.node_generation == generation:
        if entry.position == position:
            return entry.index
        changes = cluster.pod_changes(entry.position)
        if changes is not None:
            apply = entry.index.apply
            for sign, pod, node in changes:
                apply(sign, pod, node)
            entry.position = position
            return entry.index
    index = make()
    index.build(cluster)
    store[key] = _Entry(index, generation, position)
    return index


_BUILDS = itertools.count(1)
Add = Callable[[Any, int], None]
Contribution = Callable[[Pod, NodeView, Add], None]


class PodSum:
    """Per-key sums of what each (pod, node) contributes (``contribute`` calls ``add(key, n)``),
    with zero sums dropped, so an empty index means "nothing counted" as upstream's maps do.
    ``affinity_only``: pods without (anti-)affinity terms contribute nothing, so a build walks
    only those that have some. ``version`` changes whenever the counts do (answers computed
    from them may be cached under it)."""

    def __init__(self, contribute: Contribution, affinity_only: bool = False) -> None:
        self.counts: dict[Any, int] = {}
        self._contribute = contribute
        self._affinity_only = affinity_only
        self._build = 0
        self._changes = 0

    @property
    def version(self) -> tuple[int, int]:
        return self._build, self._changes

    def build(self, cluster: ClusterView) -> None:
        counts, contribute = self.counts, self._contribute
        self._build = next(_BUILDS)

        def add(key: Any, n: int) -> None:
            counts[key] = counts.get(key, 0) + n

        if self._affinity_only:
            for pod, node in cluster.affinity_pods():
                contribute(pod, node, add)
        else:
            for node in cluster.node_views():
                for pod in node.pods:
                    contribute(pod, node, add)
        for key in [k for k, v in counts.items() if v == 0]:
            del counts[key]

    def apply(self, sign: int, pod: Pod, node: NodeView) -> None:
        counts = self.counts

        def add(key: Any, n: int) -> None:
            self._changes += 1
            total = counts.get(key, 0) + sign * n
            if total:
                counts[key] = total
            else:
                counts.pop(key, None)

        self._contribute(pod, node, add)
