"""The structured DRA allocator: which devices a pod's claims get on one node, as kube-scheduler's
DynamicResources plugin decides it (k8s.io/dynamic-resource-allocation/structured, the
"incubating" variant that kube-scheduler 1.37 runs with its default feature gates).

For one node, the pools it reaches are gathered (:mod:`rulesched.semantics.dra_pools`), then the
claims are allocated one after the other, each request's devices one after the other, each
device being the next candidate (pools sorted by driver and name, slices by name, devices in
slice order) that is not in use, matches the class's and the request's CEL selectors
(:mod:`rulesched.semantics.cel`), reaches the node, has counters left in its shared counter set
(partitionable devices), capacity left (consumable capacity), no untolerated taint, and keeps
the claim's ``matchAttribute``/``distinctAttribute`` constraints. When no candidate works the
search backtracks to the previous device: an exhaustive search that stops at the first full
solution, trying each request's combinations of devices, not their permutations. A request asks
for ``count`` devices (ExactCount) or every matching one (All, which fails while a pool is
incomplete), or for the first of its ``firstAvailable`` subrequests that can be allocated. A
claim gets at most 32 devices. Admin access takes devices in use by others.

Beyond upstream (which is first fit): a :data:`Ranking` may order each request's candidates
(the rules' ``device`` scores); the search, its backtracking and every constraint are the same,
only the order in which candidates are tried changes. Without one, the result is upstream's.

Errors are :class:`AllocationError`: ``on_node`` ones (invalid pools met) fail this node only;
others (a broken CEL selector, a class that does not exist, a request too large) fail the pod.

The stages: the pools (:mod:`~rulesched.semantics.dra_pools`), the vocabulary every stage
shares (:mod:`~rulesched.semantics.dra_devices`: device ids, what other claims hold, candidates,
taints), per-request bookkeeping and claim constraints
(:mod:`~rulesched.semantics.dra_requests`), shared counters
(:mod:`~rulesched.semantics.dra_counters`), the search itself, one run per ``allocate`` (with a
first-fit path for the common case of one request whose devices do not depend on each other:
:mod:`~rulesched.semantics.dra_search`), and the allocation results
(:mod:`~rulesched.semantics.dra_results`). This module is the allocator's face: the cluster
state it allocates against and the pools it keeps per node.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rulesched.model.dra import (
    Allocation,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_counters import PoolCounters
from rulesched.semantics.dra_devices import (
    NOTHING_ALLOCATED,
    AllocatedState,
    Candidate,
    NodePools,
    sole_capacity,
)
from rulesched.semantics.dra_pools import ALL_FEATURES, Features, Pool, gather_pools
from rulesched.semantics.dra_search import AllocationRun, Ranking

__all__ = ["Allocator", "Ranking", "share_ids"]


def share_ids() -> Callable[[], str]:
    """Fresh share IDs, each a version-4 UUID: one random UUID, then its last 48 bits counted up
    (a new uuid4 per share was a sixth of the allocator's time on the openb replay; Filter
    allocates on every node it asks, though the pod binds on one)."""
    base = uuid.uuid4()
    prefix, node = str(base)[:24], base.node
    count = itertools.count()
    return lambda: f"{prefix}{(node + next(count)) & 0xFFFFFFFFFFFF:012x}"


class Allocator:
    """One cluster state (classes, slices, what other claims hold), allocating on any node
    (upstream's structured.Allocator; thread-safe for reading, each allocate is its own)."""

    def __init__(
        self,
        slices: Sequence[ResourceSlice],
        classes: Mapping[str, DeviceClass],
        allocated: AllocatedState = NOTHING_ALLOCATED,
        cel: CelCache | None = None,
        features: Features = ALL_FEATURES,
        share_id: Callable[[], str] | None = None,
        pools: dict[str, NodePools] | None = None,
        first_fit: bool = True,
    ) -> None:
        self.features = features
        self.classes = classes
        self.allocated = allocated
        self.cel = cel or CelCache()
        self.share_id = share_id or share_ids()
        self.all_slices = slices
        # node name -> its slices, and the slices naming no node: worked out when first needed
        # (with the store's pools kept per node, an allocator of a pod seldom needs them)
        self._on_node: dict[str, list[ResourceSlice]] | None = None
        self._shared: list[ResourceSlice] = []
        self.counters = PoolCounters(allocated)
        self.steps = 0  # allocateOne calls, summed (upstream's NumAllocateOneInvocations)
        # the common case's path (see AllocationRun._first_fit); off: always the search (its test variant)
        self.first_fit = first_fit
        self.first_fits = 0  # allocations the first-fit path answered, summed
        # node name -> (its pools, their candidates in order): they depend on the slices and the
        # node only, so allocators of one slice set may share them (``pools``: the store's)
        self.pools: dict[str, NodePools] = pools if pools is not None else {}
        # claims' ids -> the claims and their checked requests (AllocationRun._requests): what does
        # not depend on the node, checked once for the many nodes a pod's allocator runs on
        self.plans: dict[tuple[int, ...], tuple[tuple[ResourceClaim, ...], dict[Any, Any]]] = {}

    def slices_for(self, node: Any) -> list[ResourceSlice]:
        """The node's own slices and those naming no node (the candidates of gather_pools)."""
        if self._on_node is None:
            self._on_node = {}
            for s in self.all_slices:
                if s.node_name:
                    self._on_node.setdefault(s.node_name, []).append(s)
                else:
                    self._shared.append(s)
        return self._on_node.get(node.name, []) + self._shared

    def pools_for(self, node: Any) -> tuple[list[Pool], list[Candidate]]:
        """The pools ``node`` reaches (gather_pools) and their devices in order (cached)."""
        found = self.pools.get(node.name)
        if found is None or found.labels is not node.labels:  # (labels: slices' node selectors read them)
            pools = gather_pools(self.slices_for(node), node, self.features, self.all_slices)
            candidates: list[Candidate] = []
            for pool in pools:
                if pool.incomplete or pool.invalid:
                    continue
                for s in pool.slices:
                    for d in s.devices:
                        candidates.append(Candidate(d, s, pool, len(candidates)))
            counters = any(c.device.consumes_counters for c in candidates)
            sole = tuple(sole_capacity(c.device.capacity) for c in candidates)
            found = self.pools[node.name] = NodePools(pools, candidates, node.labels, counters, sole_capacity=sole)
        return found.pools, found.candidates

    def allocate(
        self, node: Any, claims: Sequence[ResourceClaim], ranking: Ranking | None = None, results: bool = True
    ) -> list[Allocation] | None:
        """One allocation per claim (in order), or None when they cannot all be had on ``node``;
        :class:`AllocationError` when allocation cannot proceed. ``results`` off: an empty list
        stands for success (a Filter that needs only the verdict)."""
        run = AllocationRun(self, node, list(claims), ranking)
        return run.allocate(results)
