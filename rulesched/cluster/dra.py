"""The store's DRA cache: DeviceClasses, ResourceClaims, templates and ResourceSlices, the
devices their allocations hold, and the allocations assumed for pods whose binding is in flight.

A part of :class:`rulesched.cluster.store.ClusterStore` with its own state, copied on write while
a snapshot holds it (:mod:`rulesched.cluster.cow`); a snapshot sees it as one
:class:`~rulesched.model.dra.DraState` and the :class:`~rulesched.semantics.dra_devices.AllocatedState`
its claims hold (worked out once per change, not per cycle).

When the scheduler assumes a pod, the allocations it chose for the pod's claims are written into
the claims at once, with the pod in ``reservedFor`` (kube-scheduler's Reserve, its assume cache
and in-flight allocations): later cycles see the devices taken and never give them twice, and a
claim shared with a later pod is already allocated for it. A failed binding puts the claims back
(:meth:`DraCache.revert`). While an assumption stands, an informer's older view of the claim
(the same resourceVersion, without the allocation) does not replace it; any newer version of the
claim from the API server does.
Next stage: :mod:`rulesched.cluster.snapshot` carries them to the cycle.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from rulesched.cluster.cow import CopyOnWrite
from rulesched.model import Pod
from rulesched.model.dra import FINALIZER, Allocation, Consumer, DraState, NodeDevice, ResourceClaim
from rulesched.model.replaced import replaced
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_claims import claim_keys, consumer_uid
from rulesched.semantics.dra_devices import AllocatedState, DeviceID, NodePools, PooledMap, PooledSet
from rulesched.semantics.dra_extended import extended_view
from rulesched.semantics.dra_pod import RELEASABLE, pod_claims
from rulesched.semantics.dra_views import DeviceUse, node_devices, node_pools

DRA_KINDS = ("classes", "claims", "templates", "slices")


class _Held:
    """What the claims' allocations hold, counted as claims come and go, so that neither the
    allocator's AllocatedState nor node.devices' DeviceUse rescans every claim after a bind
    (semantics.dra.allocated_state and semantics.dra_views.device_use say the same from scratch)."""

    def __init__(self) -> None:
        self.whole: dict[DeviceID, int] = {}  # allocated whole, by how many claims
        self.consumed: dict[DeviceID, dict[str, int]] = {}
        self.holders: dict[DeviceID, int] = {}  # allocations naming the device (admin access too)
        # the same per pool (driver, pool): counts of the devices allocated whole and of the shares
        self._pool_whole: dict[tuple[str, str], dict[DeviceID, int]] = {}
        self._pool_shares: dict[tuple[str, str], dict[tuple[str, str, str, str], int]] = {}
        # ... and frozen: the devices allocated whole, the shares, the devices shared, the
        # capacity the shares consume (a pool's remade when a claim changes it)
        self._whole: dict[tuple[str, str], frozenset[DeviceID]] = {}
        self._shares: dict[tuple[str, str], frozenset[tuple[str, str, str, str]]] = {}
        self._shared_devices: dict[tuple[str, str], frozenset[DeviceID]] = {}
        self._consumed: dict[tuple[str, str], Mapping[DeviceID, Mapping[str, int]]] = {}
        # Those four tables an AllocatedState made since reads (allocated), by name, with the
        # view that reads each (weakly): copied before the next change to them while the view is
        # alive, else changed in place. A bind changes one pool in one or two of them (a whole
        # GPU: the devices allocated whole; a share: the shares'), and the cycle's views are
        # gone by then unless someone kept them (each table a pool per node: 1,213 entries on openb).
        self._lent: dict[str, weakref.ref[Any]] = {}

    def count(self, alloc: Allocation, sign: int) -> None:
        pools: set[tuple[str, str]] = set()
        for r in alloc.devices:
            device = r.device_id
            _bump(self.holders, device, sign)
            if r.admin_access:
                continue
            pool = (device[0], device[1])
            pools.add(pool)
            if r.share_id:
                _bump(self._pool_shares.setdefault(pool, {}), (*device, r.share_id), sign)
                if r.consumed_capacity:
                    used = self.consumed.setdefault(device, {})
                    for name, amount in r.consumed_capacity.items():
                        used[name] = used.get(name, 0) + sign * amount
                    if not any(used.values()):
                        del self.consumed[device]
            else:
                _bump(self.whole, device, sign)
                _bump(self._pool_whole.setdefault(pool, {}), device, sign)
        for pool in pools:
            self._freeze(pool)

    def _freeze(self, pool: tuple[str, str]) -> None:
        """Pool ``pool``'s frozen parts made again from its counts (a pool: a node's few devices)."""
        whole = self._pool_whole.get(pool)
        shares = self._pool_shares.get(pool)
        self._put("_whole", pool, frozenset(whole) if whole else None)
        self._put("_shares", pool, frozenset(shares) if shares else None)
        devices = {s[:3] for s in shares} if shares else set()
        self._put("_shared_devices", pool, frozenset(devices) if devices else None)
        consumed = {d: MappingProxyType(dict(self.consumed[d])) for d in devices if d in self.consumed}
        self._put("_consumed", pool, MappingProxyType(consumed) if consumed else None)

    def _put(self, name: str, pool: tuple[str, str], value: Any) -> None:
        """Table ``name``'s entry of ``pool`` set to ``value`` (None: none), unless it is equal
        already (the part kept: an AllocatedState holding the table sees no change), the table
        copied first while an AllocatedState holds it."""
        table: dict[tuple[str, str], Any] = getattr(self, name)
        if table.get(pool) == value:
            return
        lent = self._lent.pop(name, None)
        if lent is not None and lent() is not None:
            table = dict(table)
            setattr(self, name, table)
        _put(table, pool, value)

    def allocated(self) -> AllocatedState:
        """The allocator's view: the per-pool tables (one entry a pool) as they are now, not a
        copy of every device held (each pool's parts are frozen and remade when a claim changes
        it; a table is copied before it changes while the view holds it)."""
        whole, shares, shared = PooledSet(self._whole), PooledSet(self._shares), PooledSet(self._shared_devices)
        consumed = PooledMap(self._consumed)
        views = {"_whole": whole, "_shares": shares, "_consumed": consumed, "_shared_devices": shared}
        self._lent = {name: weakref.ref(view) for name, view in views.items()}
        return AllocatedState(whole, shares, consumed, shared)

    def use(self) -> DeviceUse:
        """What the claims hold now, read in place (valid until the next change: the store works
        node.devices out from it at once, see DraCache.refresh)."""
        return DeviceUse(self.holders, self.whole.keys(), self.consumed)


def _put(table: dict[Any, Any], key: Any, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _bump(counts: dict[Any, int], key: Any, sign: int) -> None:
    left = counts.get(key, 0) + sign
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


class DraCache:
    def __init__(self, cow: CopyOnWrite[Any], changed: Callable[[], None]) -> None:
        self._cow, self._changed = cow, changed
        self._maps: dict[str, dict[str, Any]] = {kind: {} for kind in DRA_KINDS}
        self._allocated: AllocatedState | None = None  # of the claims; None: work it out again
        self._state: DraState | None = None
        # pod key -> [(claim key, the claim before the assumption)]
        self._undo: dict[str, list[tuple[str, ResourceClaim | None]]] = {}
        # claim key -> (pod key, the resourceVersion the assumption was made on)
        self._assumed: dict[str, tuple[str, str]] = {}
        # compiled CEL selectors and their verdicts per device: the scheduler's, across cycles
        self.cel = CelCache()
        # node.devices: the nodes whose device views are to be worked out again (ALL: every one),
        # and those whose change came with a pod placed there (the pod journal says so)
        self.dirty: set[str] | None = set()
        self.covered: set[str] = set()
        self.classes_changed = False
        self._seen_on: dict[tuple[str, str, str], set[str]] = {}  # device -> nodes showing it
        self._use: DeviceUse | None = None  # what the claims hold of each device; None: work it out
        self._held = _Held()  # ... counted as claims come and go (both are made from it)
        # the allocator's per-node pools (while the slices stay) and Filter's shared verdicts and
        # allocations (rulesched.semantics.dra_pod, dra_after)
        self.pools: dict[str, NodePools] = {}
        self.memo: dict[tuple[Any, ...], Any] = {}
        self._mappings: dict[str, Any] = {}  # assumed pod key -> its extended claim's request mappings
        # the slices, those of each node and those naming none (node.devices' refresh; kept
        # until the slices change)
        self._slices: tuple[list[Any], dict[str, list[Any]], list[Any]] | None = None
        # ... and the pools each node reaches from them, with the Node they were gathered for (a
        # node's refresh after a bind remakes its devices' views, not its pools)
        self._node_pools: dict[str, tuple[Any, list[Any]]] = {}
        self.allocates = True  # False: kube-scheduler allocates (the extender; DraState.allocates)
        self._fixed: dict[Any, Any] = {}  # device id -> its views that change with the slice alone (node_devices)

    @property
    def state(self) -> DraState:
        if self._state is None:
            m = self._maps
            self._state = DraState(m["classes"], m["claims"], m["templates"], m["slices"], allocates=self.allocates)
        return self._state

    @property
    def allocated(self) -> AllocatedState:
        if self._allocated is None:
            self._allocated = self._held.allocated()
        return self._allocated

    @property
    def empty(self) -> bool:
        return not any(self._maps.values())

    def _map(self, kind: str) -> dict[str, Any]:
        current = self._maps[kind]
        if self._cow.must_copy(f"dra_{kind}"):
            current = self._maps[kind] = dict(current)
        return current

    def put(self, kind: str, key: str, value: Any) -> None:
        """Set (None: remove) one object of a kind: ``classes``, ``claims``, ``templates``,
        ``slices``; an informer's claim that an assumption outdates is ignored."""
        if kind == "claims":
            assumed = self._assumed.get(key)
            if assumed is not None:
                if value is not None and value.resource_version == assumed[1] and value.allocation is None:
                    return  # the informer's view from before the assumption
                if value is not None and value.allocation is None and not assumed[1]:
                    return  # a claim the scheduler made (extended resources'): created, not allocated yet
                del self._assumed[key]
            self._allocated = None
            self._use = None
            before = self._maps["claims"].get(key)
            self._touch(before)
            self._touch(value)
            if before is not None and before.allocation is not None:
                self._held.count(before.allocation, -1)
            if value is not None and value.allocation is not None:
                self._held.count(value.allocation, 1)
        elif kind == "classes":
            self.classes_changed = True  # (Filter's verdicts read the classes: every node's may move)
            # ... and the verdicts and allocations the memo keeps name a class, not its selectors
            self.memo.clear()
        elif kind == "slices":
            self.pools = {}
            self._slices = None
            self._node_pools = {}
            self._fixed = {}
            for s in (self._maps["slices"].get(key), value):
                if s is not None:
                    self.mark(s.node_name or None)
        target = self._map(kind)
        if value is None:
            if target.pop(key, None) is None:
                return
        else:
            target[key] = value
        self._state = None
        self._changed()

    def mark(self, node: str | None) -> None:
        """Node ``node``'s devices (None: every node's) are to be worked out again; what its
        pods' claims free if evicted, kept in the memo, goes (the claims there changed)."""
        if node is None:
            self.dirty = None
            self.memo.clear()
            return
        self.memo.pop((RELEASABLE, node), None)
        if self.dirty is not None:
            self.dirty.add(node)

    def _touch(self, claim: ResourceClaim | None) -> None:
        """The nodes showing the devices of ``claim``'s allocation are to be worked out again."""
        if claim is None or claim.allocation is None:
            return
        for r in claim.allocation.devices:
            for node in self._seen_on.get(r.device_id, ()):
                self.mark(node)

    def refresh(self, nodes: Mapping[str, Any]) -> dict[str, tuple[NodeDevice, ...]]:
        """node.devices afresh for the marked nodes (``nodes``: node name -> its NodeInfo, whose
        ``node`` is the Node)."""
        dirty = self.dirty
        names = list(nodes) if dirty is None else [n for n in dirty if n in nodes]
        self.dirty = set()
        if not names:
            return {}
        if self._slices is None:
            slices = list(self.state.slices.values())
            on_node: dict[str, list[Any]] = {}
            shared = []
            for s in slices:
                if s.node_name:
                    on_node.setdefault(s.node_name, []).append(s)
                else:
                    shared.append(s)
            self._slices = (slices, on_node, shared)
        slices, on_node, shared = self._slices
        if self._use is None:
            self._use = self._held.use()
        use = self._use
        out = {}
        for name in names:
            views: tuple[NodeDevice, ...] = ()
            if slices:
                node = nodes[name].node
                reached = on_node.get(name, []) + shared
                kept = self._node_pools.get(name)
                if kept is None or kept[0] is not node:
                    kept = self._node_pools[name] = (node, node_pools(node, reached, slices))
                views = node_devices(node, reached, slices, use, self._fixed, kept[1])
            for view in views:
                self._seen_on.setdefault(view.id, set()).add(name)
            out[name] = views
        return out

    def replace_all(self, state: DraState) -> None:
        """Replace every DRA object (a load from files)."""
        self.mark(None)
        self.pools = {}
        self._slices = None
        self._node_pools = {}
        for kind in DRA_KINDS:
            self._maps[kind] = dict(getattr(state, kind))
            self._cow.made_now(f"dra_{kind}")
        self._allocated = None
        self._use = None
        self._held = _Held()
        for claim in self._maps["claims"].values():
            if claim.allocation is not None:
                self._held.count(claim.allocation, 1)
        self._state = None
        self._changed()

    def contents(self) -> dict[str, Any]:
        return {f"dra_{kind}": dict(self._maps[kind]) for kind in DRA_KINDS}

    # --- the scheduler's assumptions ---------------------------------------------------------------
    def assume(
        self,
        pod: Pod,
        allocations: Mapping[str, Allocation],
        reserve: tuple[str, ...],
        made: tuple[ResourceClaim, Any] | None = None,
    ) -> None:
        """The pod is assumed: ``allocations`` (claim key -> allocation) are written into their
        claims, and every claim in ``reserve`` (keys) gets the pod in ``reservedFor``. ``made``:
        the claim made for the pod's DRA-served extended resources (put in first; its requests'
        mappings kept for the binding: :meth:`extended_mappings`)."""
        if not allocations and not reserve:
            return
        undo = self._undo.setdefault(pod.key, [])
        if made is not None:
            undo.append((made[0].key, None))
            self.put("claims", made[0].key, made[0])
            self._mappings[pod.key] = made[1]
        claims = self._maps["claims"]
        if pod.node_name:
            self.covered.add(pod.node_name)  # (its devices change with the pod placed there)
        consumer = Consumer("pods", pod.name, pod.uid or pod.key)
        for key in dict.fromkeys((*allocations, *reserve)):
            claim = claims.get(key)
            if claim is None:
                continue
            changed = claim
            if key in allocations:
                finalizers = claim.finalizers if FINALIZER in claim.finalizers else (*claim.finalizers, FINALIZER)
                changed = replaced(changed, allocation=allocations[key], finalizers=finalizers)
            if not any(c.uid == consumer.uid for c in changed.reserved_for):
                changed = replaced(changed, reserved_for=(*changed.reserved_for, consumer))
            undo.append((key, claim))
            self.put("claims", key, changed)
            self._assumed[key] = (pod.key, claim.resource_version)

    def reserve(self, pod: Pod, node: Any) -> tuple[bool, str]:
        """DynamicResources' Reserve for ``pod`` assumed on ``node``: its claims allocated there
        (as the cycle's Filter found them: the same state gives the same devices) and reserved
        for it, and the claim its DRA-served extended resources need made. ``(False, "")`` when
        they cannot be had there now (the binding must then fail); else True and the name of the
        claim made ("" if none)."""
        view = extended_view(pod, self.state.classes) if pod.extended_requests else pod
        if not view.resource_claims and not view.extended_dra:
            return True, ""
        found = pod_claims(view, self.state, self.allocated, self.cel, pools=self.pools)
        if node is None or found.filter(node):
            return False, ""
        made = found.made_claim(node)
        self.assume(pod, found.allocations(node), found.reserve(), made)
        return True, made[0].name if made is not None else ""

    def assumed_claims(self, pod_key: str) -> tuple[tuple[ResourceClaim, ...], frozenset[str]]:
        """The claims the pod's assumption changed, as the store has them now, and the keys of
        those it allocated (the others it only joined): what its binding writes."""
        claims, allocated, seen = [], set(), set()
        current = self._maps["claims"]
        for key, before in self._undo.get(pod_key, ()):
            claim = current.get(key)
            if claim is None or key in seen:  # (a claim made for the pod comes twice: made, allocated)
                continue
            seen.add(key)
            claims.append(claim)
            if before is None or before.allocation is None:
                allocated.add(key)
        return tuple(claims), frozenset(allocated)

    def settled(self, pod_key: str) -> None:
        """The pod's binding succeeded: its claims stay as assumed until the informer's newer
        versions (with the status the binder wrote) replace them."""
        self._undo.pop(pod_key, None)
        self._mappings.pop(pod_key, None)

    def revert(self, pod_key: str) -> None:
        """The binding failed: the claims are put back as they were (Unreserve)."""
        self._mappings.pop(pod_key, None)
        for key, before in reversed(self._undo.pop(pod_key, [])):
            self._assumed.pop(key, None)
            self.put("claims", key, before)

    def pod_gone(self, pod: Pod) -> list[str]:
        """The resourceclaim controller's part when ``pod`` is gone (the simulator's evictions):
        it leaves the ``reservedFor`` of its claims, and a claim left with no consumer is
        deallocated (its allocation and finalizer dropped; upstream's controller does so when
        the claim has the finalizer, which every claim a scheduler allocated has). The keys of the
        claims deallocated."""
        uid = consumer_uid(pod)
        claims = self._maps["claims"]
        freed = []
        for key in claim_keys(pod):
            claim = claims.get(key)
            if claim is None or not any(c.uid == uid for c in claim.reserved_for):
                continue
            remaining = tuple(c for c in claim.reserved_for if c.uid != uid)
            changed = dataclasses.replace(claim, reserved_for=remaining)
            if not remaining and claim.allocation is not None:
                finalizers = tuple(f for f in claim.finalizers if f != FINALIZER)
                changed = dataclasses.replace(changed, allocation=None, finalizers=finalizers)
                freed.append(key)
            self.put("claims", key, changed)
        return freed

    def extended_mappings(self, pod_key: str) -> Any:
        """The request mappings of the claim made for an assumed pod's extended resources (what
        its binding writes to ``status.extendedResourceClaimStatus``); None if it has none."""
        return self._mappings.get(pod_key)

    def in_flight(self) -> list[str]:
        """The assumed pods whose claims are held (to write, or to take back)."""
        return sorted(self._undo)
