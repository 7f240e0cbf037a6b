"""Indexes over the cluster's pods that cluster-wide built-ins keep current between cycles: the
engine's speed machinery, reading the store's pod journal through
:class:`rulesched.lang.context.ClusterView` (the store knows nothing of them).

kube-scheduler's PreFilter for inter-pod affinity and topology spreading counts matching pods per
topology domain by walking every node, for every pod. Here such counts are kept: an index is
built once by a walk, stored in the evaluating session's ``EvalContext.indexes`` under a key
naming what it counts
(the incoming pod's terms, namespace, ...), and brought up to date before each use by replaying
the pods added and removed since (``ClusterView.pod_changes``). Counts are sums over pods, so a
removal is the addition with sign -1. A change to nodes (their labels decide domains) or a replay
the journal no longer covers means a rebuild; so does a cluster of another history (entries
record which store's positions they are at). :class:`LabelCensus` counts pods by label per node,
so that indexes counting what a matchLabels selector picks are built from it rather than by a
walk over every pod. The built-ins themselves are in
:mod:`rulesched.lang.builtins.affinity` and :mod:`rulesched.lang.builtins.spreading`; preemption's dry runs and the
nominator fork them (:class:`ForkedIndexes`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator, MutableMapping
from typing import Any, Generic, Protocol, TypeVar

from rulesched.lang.context import ClusterView, EvalContext
from rulesched.model import Pod
from rulesched.semantics.affinity import has_affinity


class PodIndex(Protocol):
    def build(self, cluster: ClusterView) -> None:
        """Count from scratch."""

    def apply(self, sign: int, pod: Pod, node: Any) -> None:
        """Count a pod added to (+1) or removed from (-1) a node (its ``name`` and ``labels``)."""

    def fork(self) -> PodIndex:
        """A copy to apply further changes to, leaving this one as it is."""


IndexT = TypeVar("IndexT", bound=PodIndex)


class _Entry(Generic[IndexT]):
    __slots__ = ("history", "index", "node_generation", "position")

    def __init__(self, index: IndexT, history: object, node_generation: int, position: int) -> None:
        self.index, self.history = index, history
        self.node_generation, self.position = node_generation, position


def current(ctx: EvalContext, key: Hashable, make: Callable[[], IndexT]) -> IndexT:
    """The index stored under ``key`` in the context's index store, brought up to date with its
    cluster; built by ``make()`` if there is none (or none of this cluster's history)."""
    cluster = ctx.cluster
    assert cluster is not None
    store = ctx.indexes
    entry: _Entry[IndexT] | None = store.get(key)
    history, generation, position = cluster.history, cluster.node_generation, cluster.pod_position
    if entry is not None and entry.history is history and entry.node_generation == generation:
        if entry.position == position:
            return entry.index
        if entry.position < position:
            changes = cluster.pod_changes(entry.position)
            if changes is not None:
                apply = entry.index.apply
                for sign, pod, node in changes:
                    apply(sign, pod, node)
                entry.position = position
                return entry.index
    index = make()
    index.build(cluster)
    store[key] = _Entry(index, history, generation, position)
    return index


class ForkedIndexes(MutableMapping[Any, Any]):
    """An index store for a private continuation of a cluster's history (preemption's dry runs
    on a :class:`rulesched.cluster.snapshot.ClusterOverlay`): an index asked for is forked from
    the session's store, brought to the snapshot's position first, and the fork alone follows
    the overlay's changes. The session's store never sees the overlay's positions."""

    def __init__(self, base: MutableMapping[Any, Any], snapshot: ClusterView) -> None:
        self._base, self._snapshot = base, snapshot
        self._own: dict[Any, Any] = {}

    def __getitem__(self, key: Any) -> Any:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self._own:
            return self._own[key]
        entry = self._base.get(key)
        snapshot = self._snapshot
        if (
            entry is None
            or entry.history is not snapshot.history
            or entry.node_generation != snapshot.node_generation
            or entry.position > snapshot.pod_position
        ):
            return default
        if entry.position < snapshot.pod_position:
            changes = snapshot.pod_changes(entry.position)
            if changes is None:
                return default
            for sign, pod, node in changes:
                entry.index.apply(sign, pod, node)
            entry.position = snapshot.pod_position
        fork = self._own[key] = _Entry(entry.index.fork(), entry.history, entry.node_generation, entry.position)
        return fork

    def __setitem__(self, key: Any, value: Any) -> None:
        self._own[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._own[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._own)

    def __len__(self) -> int:
        return len(self._own)


_BUILDS = itertools.count(1)
Add = Callable[[Any, int], None]
Contribution = Callable[[Pod, Any, Add], None]  # (pod, its node: name and labels, add)


class PodSum:
    """Per-key sums of what each (pod, node) contributes (``contribute`` calls ``add(key, n)``),
    with zero sums dropped, so an empty index means "nothing counted" as upstream's maps do.
    ``affinity_only``: pods without (anti-)affinity terms contribute nothing, so a build walks
    only those that have some. ``version`` changes whenever the counts do (answers computed
    from them may be cached under it)."""

    def __init__(
        self,
        contribute: Contribution,
        affinity_only: bool = False,
        builder: Callable[[ClusterView, Callable[[Any, int], None]], None] | None = None,
    ) -> None:
        self.counts: dict[Any, int] = {}
        self._contribute = contribute
        self._affinity_only = affinity_only
        # Builds the sums another way than by a walk (the same sums: from other indexes, say).
        self._builder = builder
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

        if self._builder is not None:
            self._builder(cluster, add)
        elif self._affinity_only:
            for pod, node in cluster.affinity_pods():
                contribute(pod, node, add)
        else:
            for node in cluster.node_views():
                for pod in node.pods:
                    contribute(pod, node, add)
        for key in [k for k, v in counts.items() if v == 0]:
            del counts[key]

    def fork(self) -> PodSum:
        twin = PodSum(self._contribute, self._affinity_only)
        twin.counts = dict(self.counts)
        twin._build, twin._changes = next(_BUILDS), 0
        return twin

    def apply(self, sign: int, pod: Pod, node: Any) -> None:
        if self._affinity_only and not has_affinity(pod):
            return  # (as build: such sums count only the pods affinity_pods gives)
        counts = self.counts

        def add(key: Any, n: int) -> None:
            self._changes += 1
            total = counts.get(key, 0) + sign * n
            if total:
                counts[key] = total
            else:
                counts.pop(key, None)

        self._contribute(pod, node, add)


class LabelCensus:
    """The pods on each node by label: (namespace, label key, value) -> node name -> pods there
    carrying it, and the same for the terminating ones alone (countPodsMatchSelector leaves them
    out, affinity terms do not). Kept like any index (built once by a walk, then the pod changes
    replayed), so that counting the pods a matchLabels selector picks visits only the nodes
    holding such pods rather than every pod in the cluster. Also keeps, per set of topology
    keys, the domains of the nodes carrying them (the same while nodes are). A fork shares its
    parent's counts and keeps its own changes."""

    def __init__(self, parent: LabelCensus | None = None) -> None:
        self.counts: dict[tuple[str, str, str], dict[str, int]] = {}
        self.deleting: dict[tuple[str, str, str], dict[str, int]] = {}
        self._parent = parent
        self._domains: dict[tuple[Any, ...], list[str]] = {}

    def build(self, cluster: ClusterView) -> None:
        for node in cluster.node_views():
            for pod in node.pods:
                self.apply(1, pod, node)

    def apply(self, sign: int, pod: Pod, node: Any) -> None:
        name, namespace = node.name, pod.namespace
        for counts in (self.counts, self.deleting) if pod.deleting else (self.counts,):
            for key, value in pod.labels.items():
                nodes = counts.get((namespace, key, value))
                if nodes is None:
                    nodes = counts[(namespace, key, value)] = {}
                nodes[name] = nodes.get(name, 0) + sign

    def fork(self) -> LabelCensus:
        return LabelCensus(self)

    def nodes_with(self, namespace: str, key: str, value: str, live: bool = True) -> dict[str, int]:
        """Node name -> pods there in ``namespace`` labelled ``key=value`` (some may be 0);
        ``live``: terminating pods left out."""
        found = dict(self._pairs(self.counts, (namespace, key, value)))
        if live:
            for name, n in self._pairs(self.deleting, (namespace, key, value)).items():
                found[name] -= n
        return found

    def _pairs(self, which: dict[tuple[str, str, str], dict[str, int]], pair: tuple[str, str, str]) -> dict[str, int]:
        own = (self.counts if which is self.counts else self.deleting).get(pair, {})
        if self._parent is None:
            return own
        merged = dict(self._parent._pairs(self._parent.counts if which is self.counts else self._parent.deleting, pair))
        for name, n in own.items():
            merged[name] = merged.get(name, 0) + n
        return merged

    def domains(self, cluster: ClusterView, keys: tuple[str, ...], topology_key: str) -> list[str]:
        """The values of ``topology_key`` ("" where absent) over the nodes carrying every key of
        ``keys``, one per node (kept while the nodes are the same)."""
        memo = (cluster.history, cluster.node_generation, keys, topology_key)
        found = self._domains.get(memo)
        if found is None:
            if len(self._domains) > 64:
                self._domains.clear()
            found = self._domains[memo] = [
                n.labels.get(topology_key, "") for n in cluster.node_views() if all(k in n.labels for k in keys)
            ]
        return found
