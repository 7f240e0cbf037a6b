"""The evaluation context of one pod: the pod, the cluster it is placed in, and scratch space.

Built once per pod per scheduling cycle (kube-scheduler's CycleState plays this part): built-ins
that read the whole cluster keep their per-pod precomputation in ``scratch``, and the per-domain
counts they keep between cycles in ``indexes`` (rulesched.lang.indexes), which belong to
the evaluating session (one per thread), not to the cluster: two threads reading two snapshots
never share one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import cachetools

from rulesched.lang.schema import NodeView
from rulesched.model import Pod
from rulesched.model.storage import StorageState
from rulesched.model.workloads import Workloads

INDEX_CACHE_SIZE = 2048  # derived indexes kept at once per session (least recently used go first)


class ClusterView(Protocol):
    """What cluster-wide built-ins may ask of the snapshot (implemented outside this package)."""

    def node_views(self) -> Sequence[NodeView]: ...

    def node_view(self, name: str) -> NodeView | None: ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str]: ...

    @property
    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Every namespace's labels (a value that does not change: a new one replaces it)."""
        ...

    def image_node_count(self, image: str) -> int:
        """How many nodes hold the image (by any of its names)."""
        ...

    @property
    def history(self) -> object:
        """Names the sequence of changes the counters below count (one per store): positions
        and generations of different histories are not comparable."""
        ...

    @property
    def generation(self) -> int:
        """Bumped by every change; with the one below, versions cached cluster-wide answers."""
        ...

    @property
    def node_generation(self) -> int:
        """Bumped when nodes come, go or change (their labels decide topology domains)."""
        ...

    @property
    def workloads(self) -> Workloads:
        """The Services and pod controllers (a value replaced on change: its identity versions
        answers computed from it); system default spreading reads their selectors."""
        ...

    def affinity_pods(self) -> Iterable[tuple[Pod, NodeView]]:
        """The pods that have any (anti-)affinity term, with their nodes: an index, so
        existing-pod anti-affinity need not scan every pod."""
        ...

    @property
    def storage(self) -> StorageState:
        """Volumes, claims, storage classes and CSINodes (rulesched.lang.builtins.volumes)."""
        ...

    def claim_users(self, claim: str) -> int:
        """How many placed pods mount the claim ``namespace/name``."""
        ...

    @property
    def pod_position(self) -> int:
        """How many pods have been added or removed so far."""
        ...

    def pod_changes(self, since: int) -> Sequence[tuple[int, Pod, Any]] | None:
        """Pods added (+1) and removed (-1), with the node (its ``name`` and ``labels``), from
        position ``since`` on; None if they are no longer kept. Node changes are not listed:
        they bump ``node_generation``."""
        ...


def new_index_store() -> MutableMapping[Any, Any]:
    """Where a session keeps the indexes cluster-wide built-ins maintain."""
    return cachetools.LRUCache(INDEX_CACHE_SIZE)


@dataclass
class EvalContext:
    """``feasible`` is set by the scheduler between filtering and scoring (kube-scheduler passes
    the filtered nodes to PreScore the same way); score built-ins may read it. ``indexes`` is the
    evaluating session's store of per-domain counts; a context made on its own gets a fresh one."""

    pod: Pod
    cluster: ClusterView | None = None
    scratch: dict[Any, Any] = field(default_factory=dict)
    feasible: Sequence[NodeView] | None = None
    indexes: MutableMapping[Any, Any] = field(default_factory=new_index_store)
