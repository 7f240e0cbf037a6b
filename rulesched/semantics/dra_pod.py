"""kube-scheduler's DynamicResources plugin for one pod: its PreFilter, Filter and Reserve
(pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go at v1.37), over one
cluster state.

PreFilter finds the pod's claims (a template's claim is the one the resourceclaim controller
made, named in the pod's status, and owned by the pod); a claim missing, being deleted or not
the pod's, or a request naming a class that does not exist, leaves the pod unschedulable on every
node. An allocated claim is usable where its allocation's node selector allows (a claim in use
by other pods is shared, never allocated again); the claims not allocated yet are allocated per
node by the structured allocator (:mod:`rulesched.semantics.dra`). Every failure is
UnschedulableAndUnresolvable, as upstream's, but one: devices short on a node where pods hold
claims that evicting them would free (:mod:`rulesched.semantics.dra_preemption`); in
preemption's dry run, the claims of the pods taken off are released before allocating. Reserve
takes the node's allocation: the claims it allocates and the claims the pod is to be in the
``reservedFor`` of.

Beyond upstream: :meth:`PodClaims.diagnose` says, for a node where allocation failed, which claim
and request failed and why (no device of the class, the selector false with the attribute
values, a constraint, capacity, a taint), for ``explain``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.model import Pod
from rulesched.model.dra import (
    Allocation,
    DeviceRequest,
    DraState,
    ExactRequest,
    NodeDevice,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.model.replaced import replaced
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra import Allocator, share_ids
from rulesched.semantics.dra_after import after_key, devices_after, shared_allocation
from rulesched.semantics.dra_claims import claim_keys, consumer_uid, holds_claims
from rulesched.semantics.dra_devices import (
    AllocatedState,
    AllocationError,
    DeviceID,
    NodePools,
    released,
)
from rulesched.semantics.dra_diagnose import diagnose
from rulesched.semantics.dra_extended import RequestMapping, claim_requests, earlier_claim, pod_claim, served
from rulesched.semantics.dra_pools import ALL_FEATURES, Features, node_matches
from rulesched.semantics.dra_preemption import gone_uids, local_devices, releasable

# A ranking of a request's candidates that also reads the node's view (its node.devices): the
# rules' device scores (rulesched.lang.evaluation.ruleset.device_ranking), called with node=VIEW.
NodeRanking = Callable[..., Sequence[Any]]

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
STALE_EXTENDED = "cannot schedule extended resource claim"  # (a claim an earlier attempt made: PostFilter deletes it)
PLUGIN = "DynamicResources"
# the store's memo key (with a node's name) of whether the node's pods hold claims evicting them frees
RELEASABLE = "releasable"


def claim_name_for(pod: Pod, name: str) -> tuple[str | None, str]:
    """resourceclaim.Name: the claim a pod's entry names (None: a template's claim not made
    yet, with the message), checking nothing else."""
    for entry in pod.resource_claims:
        if entry.name != name:
            continue
        if entry.claim_name:
            return entry.claim_name, ""
        if entry.generated is not None:
            return entry.generated, ""
        return None, f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
    return None, f"pod {pod.key} has no resource claim {name!r}"


def _owned_by(claim: ResourceClaim, pod: Pod) -> bool:
    if claim.owner is None or claim.owner[0] != "Pod" or claim.owner[1] != pod.name:
        return False
    return not (pod.uid and claim.owner[2] and claim.owner[2] != pod.uid)


def reserved_for(claim: ResourceClaim, pod: Pod) -> bool:
    uid = consumer_uid(pod)
    return any(c.uid == uid for c in claim.reserved_for)


@dataclass
class PodClaims:
    """PreFilter's findings for one pod over one cluster state, and Filter per node (cached)."""

    pod: Pod
    error: str = ""  # the pod cannot be scheduled anywhere now: the reason
    claims: list[ResourceClaim] = field(default_factory=list)
    allocator: Allocator | None = None
    ranking: NodeRanking | None = None
    # Filter's verdicts shared between pods asking the same of the same devices (the store's):
    # (claims' specs, node) -> (the node's devices as they were, the verdict); see _filter
    # ... and (claims' specs, node, ranking_key) -> the node's devices and Node as they were, the
    # allocation and the devices after it (see dra_after)
    memo: dict[tuple[Any, ...], Any] | None = None
    # what the ranking depends on when it is the same for every pod (the device scores that apply,
    # reading the devices alone): pods asking the same then share allocations; None: this pod's own
    ranking_key: Hashable | None = None
    # Filter works out the allocation with its verdict, where it is shared (the rules read it)
    keep_allocations: bool = False
    _nodes: dict[str, tuple[tuple[str, ...], list[Allocation] | None]] = field(default_factory=dict)
    _spec_key: str | None = None
    # allocated claims some node could not use (their allocation's node selector): PostFilter's
    unavailable: set[str] = field(default_factory=set)
    state: DraState | None = None  # the claims, for what evicting pods frees
    # preemption's dry run: the pods it has taken off a node (by node name), whose claims the
    # filter then releases (None: not a dry run)
    removed: Callable[[str], Sequence[Pod]] | None = None
    # ... and the nominated pods it put on a node (by node name), whose claims come first there
    added: Callable[[str], Sequence[Pod]] | None = None
    _trials: dict[tuple[str, frozenset[str], tuple[str, ...]], tuple[tuple[str, ...], list[Allocation] | None]] = field(
        default_factory=dict
    )
    _local: dict[str, frozenset[DeviceID]] = field(default_factory=dict)
    # DRA-backed extended resources (rulesched.semantics.dra_extended): resource -> whole units,
    # and per node the claim made for them there (None: all from a device plugin) with its
    # requests' mappings to containers
    extended: Mapping[str, int] = field(default_factory=dict)
    made: dict[str, tuple[ResourceClaim, tuple[RequestMapping, ...]] | None] = field(default_factory=dict)
    # ... and the claim an earlier attempt made for them, still there: PostFilter deletes it
    stale: ResourceClaim | None = None

    @property
    def to_allocate(self) -> list[ResourceClaim]:
        return [c for c in self.claims if c.allocation is None]

    def filter(self, node: Any) -> tuple[str, ...]:
        """Filter: the reasons the pod's claims cannot be had on ``node`` (empty: they can).
        Pods asking the same of a node whose devices have not changed share the verdict."""
        return self._on(node, results=False)[0]

    def passing(self, views: Sequence[Any]) -> list[bool]:
        """``[not self.filter(view) for view in views]``, for the common case without a call and
        a key made per node: the node's answer kept, or the allocation shared (dra_after)."""
        spec, ranking_key = self._spec_key, self.ranking_key
        if (
            self.memo is None
            or self.removed is not None
            or self.added is not None
            or spec is None
            or ranking_key is None
            or not self.keep_allocations
        ):
            return [not self._on(view, results=False)[0] for view in views]
        kept: dict[str, Any] = self._nodes
        out = []
        for view in views:
            node, devices = getattr(view, "node", view), getattr(view, "devices", None)
            found = kept.get(node.name)
            if found is None:
                if devices is None:
                    found = self._on(view, results=False)
                else:
                    found = kept[node.name] = shared_allocation(
                        self, node, devices, view, (spec, node.name, ranking_key)
                    )
            out.append(not found[0])
        return out

    def allocated(self, node: Any) -> Sequence[Allocation]:
        """``allocations(node).values()``, in order, without making the dict."""
        reasons, allocations = self._on(node)
        return () if reasons or allocations is None else allocations

    def allocations(self, node: Any) -> dict[str, Allocation]:
        """Reserve: the allocation, claim key -> allocation, for the claims allocated on ``node``."""
        reasons, allocations = self._on(node)
        if reasons or allocations is None:
            return {}
        claims = list(self.to_allocate)
        made = self.made.get(getattr(node, "node", node).name)
        if made is not None:
            claims.append(made[0])
        return {c.key: a for c, a in zip(claims, allocations, strict=True)}

    def made_claim(self, node: Any) -> tuple[ResourceClaim, tuple[RequestMapping, ...]] | None:
        """Reserve: the claim made for the pod's DRA-served extended resources on ``node`` (to
        create, allocated as :meth:`allocations` says) and its requests' mappings; None when
        there is none (no such resources, or a device plugin serves them there)."""
        return self.made.get(getattr(node, "node", node).name)

    def reserve(self) -> tuple[str, ...]:
        """The claims the pod is to be in the ``reservedFor`` of (those it is not in yet)."""
        return tuple(c.key for c in self.claims if not reserved_for(c, self.pod))

    def unresolvable(self, node: Any) -> bool:
        """Whether preemption cannot help on ``node`` (a failing one): anything but devices
        short, or devices short while no claim there is held only by the node's pods (so
        evicting pods frees none)."""
        reasons = self.filter(node)
        if reasons and all(r.startswith("Insufficient ") for r in reasons):  # (a device plugin's resource)
            allocatable = getattr(node, "allocatable", {})
            return any(units * 1000 > allocatable.get(r, 0) for r, units in self.extended.items())
        if reasons != (CANNOT_ALLOCATE,) or self.allocator is None or self.state is None:
            return True
        # Whether the node's pods hold a claim evicting them frees is the node's answer, whoever
        # asks, when the asker's own claims are all still to allocate (never freed): kept in the
        # store's memo for the node as it is (the store drops it when claims there change).
        view, memo = node, self.memo
        shared = memo is not None and self._spec_key is not None and self.removed is None and self.added is None
        generation = getattr(view, "generation", None)
        key = (RELEASABLE, getattr(node, "name", ""))
        if shared and generation is not None:
            assert memo is not None
            hit = memo.get(key)
            if hit is not None and hit[0] is view and hit[1] == generation:
                answer: bool = hit[2]
                return answer
        pods = [p for p in getattr(node, "pods", ()) if holds_claims(p)]
        answer = not pods or not self._releasable(getattr(node, "node", node), pods, gone_uids(pods, ()))
        if shared and generation is not None:
            assert memo is not None
            memo[key] = (view, generation, answer)
        return answer

    def _releasable(self, node: Any, holders: Sequence[Pod], gone: frozenset[str]) -> list[ResourceClaim]:
        assert self.allocator is not None and self.state is not None
        local = self._local.get(node.name)
        if local is None:
            local = self._local[node.name] = local_devices(node.name, self.allocator.pools_for(node)[1])
        return releasable(self.state.claims, holders, gone, local.__contains__, {c.key for c in self.claims})

    def _adjusted(self, node: Any, view: Any, results: bool) -> tuple[tuple[str, ...], list[Allocation] | None] | None:
        """The filter on an overlay's node that pods were taken off or put on (preemption's dry
        run, nominated pods): the claims the pods taken off free are released (KEP-5690's
        RemovePod), and the claims still to allocate of the pods put on (nominated there) are
        allocated first, before the pod's own, so the devices they need are left to them
        (its AddPod). None when neither changes anything (the node's verdict is then its own)."""
        if self.allocator is None or self.state is None or self.error:
            return None
        own = {c.key for c in self.claims}
        taken_off = [p for p in self.removed(node.name) if holds_claims(p)] if self.removed is not None else []
        freed = self._releasable(node, taken_off, gone_uids(taken_off, getattr(view, "pods", ()))) if taken_off else []
        first: list[ResourceClaim] = []
        if self.added is not None:
            claims = self.state.claims
            for pod in self.added(node.name):
                for claim_key in claim_keys(pod):
                    claim = claims.get(claim_key)
                    if claim is not None and claim.allocation is None and claim_key not in own and claim not in first:
                        first.append(claim)
                if pod.extended_requests and not pod.extended_claim:  # (its extended resources' claim to be)
                    made = self._extended_claim_of(pod, node, view)
                    if made is not None:
                        first.append(made)
        if not freed and not first:
            return None
        key = (node.name, frozenset(c.key for c in freed), tuple(c.key for c in first))
        found = self._trials.get(key)
        if found is None:
            base = self.allocator
            allocator = base
            if freed:
                allocated = released(base.allocated, [c.allocation for c in freed if c.allocation is not None])
                allocator = Allocator(
                    base.all_slices, base.classes, allocated, base.cel, base.features, pools=base.pools
                )
            reasons, allocations = self._filter(node, True, view, allocator, first)
            found = self._trials[key] = (reasons, allocations[len(first) :] if allocations is not None else None)
        return found

    def _on(self, node: Any, results: bool = True) -> tuple[tuple[str, ...], list[Allocation] | None]:
        view = node  # (what rules read: node.devices, for a ranking)
        devices = getattr(node, "devices", None)
        node = getattr(node, "node", node)
        if self.removed is not None or self.added is not None:
            adjusted = self._adjusted(node, view, results)
            if adjusted is not None:
                return adjusted
        found = self._nodes.get(node.name)
        if found is not None and (found[0] or not results or found[1]):  # (an empty list: verdict only)
            return found
        if found is not None and results and not found[0] and not self.to_allocate and not self.made.get(node.name):
            return found
        memo = self.memo
        if (results or self.keep_allocations) and devices is not None:
            key = self.shared_key(node)
            if key is not None:
                found = self._nodes[node.name] = shared_allocation(self, node, devices, view, key)
                return found
        if not results and memo is not None and devices is not None and self._spec_key is not None:
            key = (self._spec_key, node.name)
            hit = memo.get(key)
            if hit is not None and hit[0] is devices:
                found = self._nodes[node.name] = (hit[1], None if hit[1] else [])
                return found
            found = self._nodes[node.name] = self._filter(node, results=False, view=view)
            if len(memo) > 100_000:
                memo.clear()
            memo[key] = (devices, found[0])
            return found
        found = self._nodes[node.name] = self._filter(node, results, view)
        return found

    def shared_key(self, node: Any) -> tuple[Any, ...] | None:
        """The key under which pods asking what this one asks share ``node``'s allocation (the
        store's memo); None when they may not (another ranking, an overlay's node, an extended
        resources' claim, no store)."""
        if self.memo is None or self._spec_key is None or self.ranking_key is None:
            return None
        if self.removed is not None or self.added is not None:
            return None
        return (self._spec_key, node.name, self.ranking_key)

    def devices_after(self, view: Any) -> tuple[NodeDevice, ...]:
        """``view.devices`` once the claims are allocated on the node (see dra_after)."""
        return devices_after(self, view)

    def after_key(self, view: Any, positions: Mapping[tuple[str, str, str], int]) -> Hashable | None:
        """What :meth:`devices_after` changes of ``view.devices``, as a key (see dra_after)."""
        return after_key(self, view, positions)

    def _filter(
        self,
        node: Any,
        results: bool = True,
        view: Any = None,
        allocator: Allocator | None = None,
        first: Sequence[ResourceClaim] = (),
    ) -> tuple[tuple[str, ...], list[Allocation] | None]:
        if self.error:
            return (self.error,), None
        unavailable = [
            claim.key
            for claim in self.claims
            if claim.allocation is not None
            and claim.allocation.node_selector is not None
            and not node_matches(node, "", False, claim.allocation.node_selector)
        ]
        if unavailable:
            self.unavailable.update(unavailable)
            return (NOT_AVAILABLE,), None
        special: list[ResourceClaim] = []
        if self.extended:
            short = self._extended_on(node, view)
            if short:
                return short, None
            made = self.made.get(node.name)
            if made is not None:
                special.append(made[0])
        allocator = allocator or self.allocator
        if allocator is None:  # (nothing to allocate, or another scheduler allocates: DraState.allocates)
            return (), []
        ranking = functools.partial(self.ranking, node=view) if self.ranking is not None else None
        try:
            allocations = allocator.allocate(node, [*first, *self.to_allocate, *special], ranking, results)
        except AllocationError as err:
            return (str(err),), None
        if allocations is None:
            return (CANNOT_ALLOCATE,), None
        return (), allocations

    def _extended_claim_of(self, pod: Pod, node: Any, view: Any) -> ResourceClaim | None:
        """The claim a nominated pod's DRA-served extended resources would get on ``node``
        (those the node's allocatable lacks); None when it would need none."""
        assert self.state is not None
        allocatable = getattr(view, "allocatable", None) or getattr(node, "allocatable", {})
        wanted = [r for r in served(pod, self.state.classes) if allocatable.get(r, 0) <= 0]
        if not wanted:
            return None
        requests, _ = claim_requests(pod, wanted, self.state.classes)
        return pod_claim(pod, requests)

    def _extended_on(self, node: Any, view: Any) -> tuple[str, ...]:
        """filterExtendedResources and NodeResourcesFit's part for them: a resource the node's
        allocatable has is checked against its free amount ("Insufficient R"); the others are
        DRA's, in the claim made for the node (``made``). The reasons the node fails."""
        allocatable = getattr(view, "allocatable", None) or getattr(node, "allocatable", {})
        free = getattr(view, "free", None) or allocatable
        short = []
        dra = []
        for resource, units in self.extended.items():
            if allocatable.get(resource, 0) > 0:
                if units * 1000 > free.get(resource, 0):
                    short.append(f"Insufficient {resource}")
            else:
                dra.append(resource)
        if short:
            return tuple(short)
        made = None
        if dra and self.state is not None and self.state.allocates:
            requests, mappings = claim_requests(self.pod, dra, self.state.classes)
            made = (pod_claim(self.pod, requests), mappings)
        self.made[node.name] = made
        return ()

    def deallocatable(self) -> ResourceClaim | None:
        """PostFilter (no node fit): an allocated claim some node could not use, which no other
        pod uses (its reservedFor is empty or this pod alone), to deallocate so that the next
        attempt may allocate it elsewhere; None when there is none. Upstream picks one at random
        among them; here the first in the pod's order."""
        uid = consumer_uid(self.pod)
        for claim in self.claims:
            if claim.key not in self.unavailable:
                continue
            if not claim.reserved_for or (len(claim.reserved_for) == 1 and claim.reserved_for[0].uid == uid):
                return claim
        return None

    def to_delete(self) -> ResourceClaim | None:
        """PostFilter, when :meth:`deallocatable` finds nothing: the claim an earlier attempt
        made for the pod's extended resources (it has requests; Filter failed everywhere with
        "cannot schedule extended resource claim"), to delete so that the next attempt makes
        one afresh (deallocateOrDeletePodClaims); None when there is none."""
        return self.stale

    def diagnose(self, node: Any) -> list[str]:
        """Why allocation failed on ``node``, request by request (empty when it did not fail)."""
        node = getattr(node, "node", node)
        reasons, _ = self._on(node)
        if not reasons or self.allocator is None or reasons[0] != CANNOT_ALLOCATE:
            return list(reasons)
        return diagnose(self.allocator, node, self.to_allocate)


def pod_claims(
    pod: Pod,
    state: DraState,
    allocated: AllocatedState,
    cel: CelCache,
    features: Features = ALL_FEATURES,
    ranking: NodeRanking | None = None,
    pools: dict[str, NodePools] | None = None,
    memo: dict[tuple[Any, ...], Any] | None = None,
    removed: Callable[[str], Sequence[Pod]] | None = None,
    added: Callable[[str], Sequence[Pod]] | None = None,
    ranking_key: Hashable | None = None,
) -> PodClaims:
    """PreFilter: the pod's claims in ``state``; an allocator when some are to be allocated.
    ``pools`` and ``memo``: the store's caches (per node pools; verdicts and allocations shared
    between pods); ``ranking_key``: what ``ranking`` depends on, when not on the pod;
    ``removed``, ``added``: on an overlay (preemption's dry run, nominated pods), the pods taken
    off and put on a node (by node name)."""
    out = PodClaims(pod, ranking=ranking, memo=memo, state=state, removed=removed, added=added, ranking_key=ranking_key)
    if pod.extended_dra:
        out.extended = pod.extended_dra
        made = earlier_claim(pod, state.claims)
        if made is not None and made.spec.requests:  # (from an attempt that did not end in a binding)
            out.error = STALE_EXTENDED
            out.stale = made
            return out
    for entry in pod.resource_claims:
        name, problem = claim_name_for(pod, entry.name)
        if name is None:
            out.error = problem
            return out
        claim = state.claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            out.error = f'resourceclaim.resource.k8s.io "{name}" not found'
            return out
        if claim.deleting:
            out.error = f'resourceclaim "{name}" is being deleted'
            return out
        if entry.template_name and not _owned_by(claim, pod):
            out.error = f"ResourceClaim {claim.key} was not created for Pod {pod.key} (Pod is not owner)"
            return out
        out.claims.append(claim)
    pending = bool(out.extended)
    for claim in out.claims:
        if claim.allocation is not None:
            continue
        pending = True
        for request in claim.spec.requests:
            wanted = (
                [(request.name, request.exactly.device_class_name)]
                if request.exactly is not None
                else [(f"{request.name}/{sub}", spec.device_class_name) for sub, spec in request.first_available]
            )
            for shown, class_name in wanted:
                if class_name not in state.classes:
                    out.error = f"request {shown}: device class {class_name} does not exist"
                    return out
    if pending and state.allocates:
        shares = _kept(memo, _SHARE_IDS, share_ids) if memo is not None else None
        slices = _slice_list(memo, pools, state.slices)
        out.allocator = Allocator(slices, state.classes, allocated, cel, features, share_id=shares, pools=pools)
        if not out.extended and all(c.allocation is None for c in out.claims):  # (verdicts shareable)
            specs = [c.spec for c in out.claims]
            out._spec_key = repr(specs) if memo is None else _spec_key(memo, specs)
    return out


# The store's memo keys (objects: no other key equals them) of its source of share IDs, one for
# all pods (a uuid4 per pod's allocator was a tenth of the pod's DRA setup on the openb replay),
# of its specs' keys by the specs themselves (a template's claims share its spec object), and of
# the slices as a list (a list of every slice made per pod was 2% of the replay).
_SHARE_IDS = object()
_SPEC_KEYS = object()
_SLICE_LIST = object()


def _slice_list(
    memo: dict[Any, Any] | None, pools: dict[str, NodePools] | None, slices: Mapping[str, ResourceSlice]
) -> list[ResourceSlice]:
    """``list(slices.values())``, kept in the store's memo while ``pools`` (the store's per-node
    pools, a new table whenever a slice changes: rulesched.cluster.dra) and ``slices`` are the
    objects it was made with."""
    if memo is None or pools is None:
        return list(slices.values())
    hit = memo.get(_SLICE_LIST)
    if hit is not None and hit[0] is pools and hit[1] is slices:
        kept: list[ResourceSlice] = hit[2]
        return kept
    found = memo[_SLICE_LIST] = (pools, slices, list(slices.values()))
    return found[2]


def _kept(memo: dict[Any, Any], key: object, make: Callable[[], Any]) -> Any:
    found = memo.get(key)
    if found is None:
        found = memo[key] = make()
    return found


def _spec_key(memo: dict[Any, Any], specs: list[Any]) -> str:
    """``repr(specs)``, kept by the specs' identity (each spec held by its entry)."""
    kept: dict[tuple[int, ...], tuple[list[Any], str]] = _kept(memo, _SPEC_KEYS, dict)
    ids = tuple(map(id, specs))
    hit = kept.get(ids)
    if hit is not None and all(a is b for a, b in zip(hit[0], specs, strict=True)):
        return hit[1]
    if len(kept) > 1_000:
        kept.clear()
    found = repr(specs)
    kept[ids] = (specs, found)
    return found


def request_record(claim: ResourceClaim, name: str) -> DeviceRequest:
    """The request of ``claim`` named ``name`` (``request/subrequest``: that subrequest, as a
    request of that full name), what device scores read as ``request``."""
    base, _, sub = name.partition("/")
    for request in claim.spec.requests:
        if request.name != base:
            continue
        if not sub:
            return request
        for sub_name, spec in request.first_available:
            if sub_name == sub:
                return DeviceRequest(name, spec)
    return DeviceRequest(name, ExactRequest(""))


def with_claims(pod: Pod, state: DraState) -> Pod:
    """The pod with each claim entry's spec and allocation state as ``state`` has them (what
    rules read as ``pod.resource_claims``)."""
    entries = []
    for entry in pod.resource_claims:
        claim = state.claims.get(f"{pod.namespace}/{entry.claim}") if entry.claim else None
        if claim is None:
            entries.append(entry)
        else:
            entries.append(replaced(entry, spec=claim.spec, allocated=claim.allocation is not None))
    return replaced(pod, resource_claims=tuple(entries))
