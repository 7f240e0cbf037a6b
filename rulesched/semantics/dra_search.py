"""One allocation run of the structured DRA allocator (:mod:`rulesched.semantics.dra`): the search's
state for one node and one pod's claims, upstream's ``allocator`` struct and its ``allocateOne``
(an exhaustive search with backtracking that stops at the first full solution), with the
first-fit path for the common case of one request whose devices do not depend on each other,
and the checks each candidate device goes through (in use, selectors, capacity, taints,
counters, the claim's constraints). :class:`~rulesched.semantics.dra.Allocator` makes one per
``allocate`` call; nothing here outlives it except what it records in the allocator's kept
per-node pools.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rulesched.model.dra import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    Allocation,
    ExactRequest,
    ResourceClaim,
)
from rulesched.semantics.cel import CelCache, CelError
from rulesched.semantics.dra_capacity import CapacityError, consumed_all, fits, plain_fits
from rulesched.semantics.dra_counters import CounterUse
from rulesched.semantics.dra_devices import (
    AllocationError,
    Candidate,
    DeviceID,
    pool_part,
    taint_blocks,
)
from rulesched.semantics.dra_pools import Pool, node_matches
from rulesched.semantics.dra_requests import Constraint, RequestData
from rulesched.semantics.dra_results import allocation_result

if TYPE_CHECKING:
    from rulesched.semantics.dra import Allocator

# A ranking of one request's candidate devices: given the claim, the request's name and the
# candidates in upstream's order (pool, slice, device), the order to try them in.
Ranking = Callable[[ResourceClaim, str, Sequence[Candidate]], Sequence[Candidate]]
_NOTHING: Mapping[str, int] = {}  # (a device no share holds: nothing consumed; never written)


class _Stop(Exception):
    """The search cannot succeed (e.g. the 32-device limit, for every subrequest)."""


class _TooMany(Exception):
    """errAllocationResultMaxSizeExceeded: backtrack harder."""


def _claim_name(claim: ResourceClaim) -> str:
    return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name


class AllocationRun:
    """One Allocate call: the search's state (upstream's allocator struct)."""

    def __init__(self, owner: Allocator, node: Any, claims: list[ResourceClaim], ranking: Ranking | None) -> None:
        self.a = owner
        self.features = owner.features
        self.node = node
        self.claims = claims
        self.ranking = ranking
        self.requests: dict[tuple[int, int, int], RequestData] = {}
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}  # device -> the claims taking it whole
        self.allocating_capacity: dict[DeviceID, dict[str, int]] = {}
        self.counter_use = CounterUse(owner.counters)
        self.results: list[list[tuple[RequestData, Candidate, str, dict[str, int] | None]]] = [[] for _ in claims]
        self.pools: list[Pool] = []
        self.node_candidates: list[Candidate] = []
        self.any_counters = True  # whether a device of the node's pools consumes counters
        self.candidates: dict[tuple[int, int, int], list[Candidate]] = {}

    # --- the entry point --------------------------------------------------------------------------
    def allocate(self, results: bool = True) -> list[Allocation] | None:
        a = self.a
        self.pools, self.node_candidates = a.pools_for(self.node)
        self.any_counters = a.pools[self.node.name].counters
        self._requests()
        try:
            if a.first_fit and self._first_fit_applies():
                a.first_fits += 1
                done = self._first_fit()
            else:
                done = self._one(0, 0, 0, 0, False, 0)
        except _Stop:
            return None
        except _TooMany:
            done = False
        except CelError as err:  # (only raised with the claim or class named: see _selectable)
            raise AllocationError(str(err)) from None
        if not done:
            if any(p.invalid for p in self.pools):
                raise AllocationError("invalid resource pools were encountered", on_node=True)
            return None
        if not results:
            return []
        return [self._result(ci) for ci in range(len(self.claims))]

    def _requests(self) -> None:
        """The claims' requests checked, and each claim's constraints made afresh (they record
        the devices taken). Unless a request asks for All (its devices are the node's), none of
        the checking depends on the node: its requests are kept in the allocator, by the claims'
        identities, for its runs on other nodes (errors, the same on every node, are not kept)."""
        a = self.a
        key = tuple(map(id, self.claims))
        kept = a.plans.get(key)
        if kept is not None and all(map(operator.is_, kept[0], self.claims)):
            self.requests = kept[1]
        else:
            self._check_requests()
            if not any(d.spec.allocation_mode == ALL for d in self.requests.values()):
                a.plans[key] = (tuple(self.claims), self.requests)
        for claim in self.claims:
            self.constraints.append(
                [
                    Constraint(c.requests, c.match_attribute or c.distinct_attribute, bool(c.match_attribute))
                    for c in claim.spec.constraints
                ]
                if claim.spec.constraints
                else []
            )

    def _check_requests(self) -> None:
        for ci, claim in enumerate(self.claims):
            minimum = 0
            for ri, request in enumerate(claim.spec.requests):
                if request.first_available:
                    if not self.features.prioritized_list:
                        raise AllocationError(
                            f"claim {_claim_name(claim)}, request {request.name}: has subrequests, but the DRAPrioritizedList feature is disabled"
                        )
                    if not self.features.consumable_capacity:
                        for sub_name, sub in request.first_available:
                            if sub.capacity is not None:
                                raise AllocationError(
                                    f"claim {_claim_name(claim)}, subrequest {sub_name}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
                                )
                    least = None
                    for si, (sub_name, sub) in enumerate(request.first_available):
                        data = self._validate(ci, ri, si, sub_name, request.name, sub)
                        self.requests[ci, ri, si] = data
                        least = data.count if least is None else min(least, data.count)
                    per_request = least or 0
                else:
                    assert request.exactly is not None
                    if not self.features.consumable_capacity and request.exactly.capacity is not None:
                        raise AllocationError(
                            f"claim {_claim_name(claim)}, request {request.name}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
                        )
                    data = self._validate(ci, ri, 0, request.name, "", request.exactly)
                    self.requests[ci, ri, 0] = data
                    per_request = data.count
                if per_request > ALLOCATION_RESULTS_MAX - minimum:
                    raise AllocationError(
                        f"claim {_claim_name(claim)}, request {request.name}: adding {per_request} devices exceeds the claim limit of {ALLOCATION_RESULTS_MAX}, with {minimum} already accounted for"
                    )
                minimum += per_request

    def _validate(self, ci: int, ri: int, si: int, name: str, parent: str, spec: ExactRequest) -> RequestData:
        claim = self.claims[ci]
        if spec.derived_attributes:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: cannot handle request with derived attributes, the feature is disabled"
            )
        if not self.features.admin_access and spec.admin_access is not None:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: admin access is requested, but the feature is disabled"
            )
        if not spec.device_class_name:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: missing device class name (unsupported request type?)"
            )
        cls = self.a.classes.get(spec.device_class_name)
        if cls is None:
            raise AllocationError(
                f"claim {_claim_name(claim)}, request {name}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        data = RequestData(ci, ri, name, parent, spec, cls)
        if spec.allocation_mode != ALL:
            data.count = spec.count
            return data
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {_claim_name(claim)}, request {name}: asks for all devices, but resource pool {pool.id} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {_claim_name(claim)}, request {name}: asks for all devices, but resource pool {pool.id} is currently invalid"
                )
        for cand in self._all_candidates():
            if not self._selectable(data, si, cand):
                continue
            if self.features.consumable_capacity:
                try:
                    ok = fits({}, spec.capacity, cand.device.capacity, {}, self.features.fractional_capacity_range)
                except CapacityError as err:
                    raise AllocationError(
                        f"claim {_claim_name(claim)}, request {name}: checking capacity for device {cand.device.name}: {err}"
                    ) from None
                if not ok:
                    continue
            data.all_devices.append(cand)
        data.count = len(data.all_devices)
        return data

    def _all_candidates(self) -> list[Candidate]:
        return self.node_candidates

    # --- the search ---------------------------------------------------------------------------------
    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> bool:
        """allocateOne: allocate device ``di`` of request ``ri`` (subrequest ``si``) of claim
        ``ci`` and everything after it; True when all is allocated."""
        self.a.steps += 1
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.spec.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, 0)
            except _TooMany:
                return False
        data = self.requests[ci, ri, si]
        if not in_sub and data.parent:
            all_too_many = True
            sub = 0
            while (ci, ri, sub) in self.requests:
                try:
                    ok = self._one(ci, ri, sub, di, True, 0)
                except _TooMany:
                    sub += 1
                    continue
                all_too_many = False
                if ok:
                    self.selected_sub[ci, ri] = sub
                    return True
                sub += 1
            if all_too_many:
                raise _TooMany
            return False
        every = data.spec.allocation_mode == ALL
        if every and not data.all_devices:
            return False
        if di >= data.count:
            return self._one(ci, ri + 1, 0, 0, False, 0)
        if data.count - di > ALLOCATION_RESULTS_MAX - len(self.results[ci]):
            raise _TooMany
        if every:
            cand = data.all_devices[di]
            ok, undo = self._take(data, cand, must=True)
            if not ok:
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                assert undo is not None
                undo()
                raise
            if not done:
                assert undo is not None
                undo()
            return done
        candidates = self._candidates(data, si)
        for position in range(start, len(candidates)):
            cand = candidates[position]
            if data.admin:
                if ci in self.allocating.get(cand.id, ()):
                    continue
            elif self._in_use(cand.id):
                continue
            if not self._selectable(data, si, cand):
                continue
            if self.features.consumable_capacity and not self._capacity_fits(data, cand):
                continue
            ok, undo = self._take(data, cand, must=False)
            if not ok:
                continue
            assert undo is not None
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, position + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    # --- the common case: one request, devices independent of each other ------------------------
    def _first_fit_applies(self) -> bool:
        """One claim of one ExactCount request, without constraints or admin access, on a node
        where no device consumes counters: then taking a device changes nothing about whether
        another fits (each is taken once; its capacity, taints and selectors are its own), so
        the search's first solution is the first ``count`` candidates that fit on their own, and
        with fewer there is none (its backtracking only tries other subsets of the same ones)."""
        if len(self.claims) != 1 or self.any_counters:
            return False
        spec = self.claims[0].spec
        if len(spec.requests) != 1 or spec.constraints:
            return False
        data = self.requests[0, 0, 0]
        return not data.parent and data.spec.allocation_mode != ALL and not data.admin

    def _first_fit(self) -> bool:
        """What ``_one`` answers when ``_first_fit_applies``, with the same checks in the same
        order (so the same CEL or capacity error, if any), without the search's bookkeeping.
        tests/upstream/dra/test_allocator_table.py runs upstream's table through both."""
        data = self.requests[0, 0, 0]
        left = data.count
        if left <= 0:
            return True
        consumable, taints = self.features.consumable_capacity, self.features.device_taints
        fractional = self.features.fractional_capacity_range
        results = self.results[0]
        held, held_capacity, asked = self.a.allocated.devices, self.a.allocated.capacity, data.spec.capacity
        selectable = self._selectable_mask(data)
        # a request asking one capacity (a share's milli) of devices with that one capacity: the
        # check plain_fits makes, in line (amount >= 0: else plain_fits says ask fits)
        ask_name, ask_amount = "", -1
        if asked is not None and len(asked) == 1:
            ((ask_name, ask_amount),) = asked.items()
        sole = self.a.pools[self.node.name].sole_capacity
        tolerations = data.spec.tolerations
        pool: Pool | None = None
        for cand in self._candidates(data, 0):
            device, device_id = cand.device, cand.id
            if cand.pool is not pool:  # (what other claims hold there: the pool found once, not per device)
                pool = cand.pool
                in_pool, capacity_in_pool = pool_part(held, device_id[:2]), pool_part(held_capacity, device_id[:2])
            if device_id in in_pool:
                continue  # (self.allocating holds only devices taken here, each tried once)
            if selectable is None:
                if not self._selectable(data, 0, cand):
                    continue
            elif not selectable[cand.order]:
                continue
            if consumable and (device.capacity or asked is not None):
                one = sole[cand.order] if ask_amount >= 0 else None
                if one is not None and one[0] == ask_name:
                    used = capacity_in_pool.get(device_id)
                    if (used.get(ask_name, 0) if used else 0) + ask_amount > one[1]:
                        continue
                else:
                    ok = plain_fits(capacity_in_pool.get(device_id, _NOTHING), asked, device.capacity)
                    if not (self._capacity_fits(data, cand) if ok is None else ok):
                        continue
            if taints and device.taints and taint_blocks(device, tolerations) is not None:
                continue
            consumed: dict[str, int] | None = None
            share = ""
            if consumable and device.allow_multiple_allocations:
                consumed = consumed_all(asked, device.capacity, fractional)
                share = self.a.share_id()
                self.allocating_capacity[device_id] = dict(consumed)
            else:
                self.allocating[device_id] = {0}
            results.append((data, cand, share, consumed or None))
            left -= 1
            if not left:
                return True
        return False

    def _selectable_mask(self, data: RequestData) -> tuple[bool, ...] | None:
        """:meth:`_selectable` of each of the node's candidates (by ``order``) for the request,
        kept with the node's pools for every run: it reads the devices, the node's labels (a
        device's own node selector; new pools when they change), the class's and the request's
        selectors and the binding conditions' feature, which the key holds. None when a selector
        fails on some candidate: the path then asks one by one, in its order, for the same error."""
        pools = self.a.pools.get(self.node.name)
        if pools is None:
            return None
        key = (data.cls.name, data.cls.selectors, data.spec.selectors, self.features.binding_conditions)
        try:
            return pools.selectable[key]
        except KeyError:
            pass
        found: tuple[bool, ...] | None
        try:
            found = tuple(self._selectable(data, 0, cand) for cand in self.node_candidates)
        except AllocationError:
            found = None
        pools.selectable[key] = found
        return found

    def _candidates(self, data: RequestData, si: int) -> list[Candidate]:
        key = (data.claim, data.index, si)
        found = self.candidates.get(key)
        if found is None:
            found = self._all_candidates()
            if self.ranking is not None:
                found = list(self.ranking(self.claims[data.claim], data.full_name, found))
            self.candidates[key] = found
        return found

    def _in_use(self, device: DeviceID) -> bool:
        return device in self.a.allocated.devices or bool(self.allocating.get(device))

    def _capacity_in_use(self, device: DeviceID) -> bool:
        state = self.a.allocated
        if device in state.capacity or device in state.shared_devices:
            return True
        return device in self.allocating_capacity

    def _selectable(self, data: RequestData, si: int, cand: Candidate) -> bool:
        device = cand.device
        if not self.features.binding_conditions and device.binding_conditions:
            return False
        key = (cand.id, data.claim, data.index, si)
        found = self.matches.get(key)
        if found is not None:
            return found
        driver = cand.slice.driver
        cel = self.a.cel
        for i, expression in enumerate(data.cls.selectors):
            try:
                ok = cel.matches(expression, device, driver)
            except CelError as err:
                raise AllocationError(
                    f"class {data.cls.name}: selector #{i}{self._on(cel, expression, cand)}: {err}"
                ) from None
            if not ok:
                self.matches[key] = False
                return False
        for i, expression in enumerate(data.spec.selectors):
            try:
                ok = cel.matches(expression, device, driver)
            except CelError as err:
                claim = _claim_name(self.claims[data.claim])
                raise AllocationError(f"claim {claim}: selector #{i}{self._on(cel, expression, cand)}: {err}") from None
            if not ok:
                self.matches[key] = False
                return False
        if cand.slice.per_device_node_selection and not node_matches(
            self.node, device.node_name, device.all_nodes, device.node_selector
        ):
            self.matches[key] = False
            return False
        self.matches[key] = True
        return True

    @staticmethod
    def _on(cel: CelCache, expression: str, cand: Candidate) -> str:
        """`` on device D: CEL runtime error`` or ``: CEL compile error`` (upstream's wording)."""
        if cel.prepared(expression).error:
            return ": CEL compile error"
        return f" on device {'/'.join(cand.id)}: CEL runtime error"

    def _capacity_fits(self, data: RequestData, cand: Candidate) -> bool:
        if not cand.device.capacity and data.spec.capacity is None:
            return True  # (nothing to fit: the common case)
        device_id = cand.id
        try:
            return fits(
                self.a.allocated.capacity.get(device_id, {}),
                data.spec.capacity,
                cand.device.capacity,
                self.allocating_capacity.get(device_id, {}),
                self.features.fractional_capacity_range,
            )
        except CapacityError as err:
            claim = _claim_name(self.claims[data.claim])
            raise AllocationError(
                f"claim {claim}, request {data.name}: checking capacity for device {'/'.join(device_id)}: {err}"
            ) from None

    def _take(self, data: RequestData, cand: Candidate, must: bool) -> tuple[bool, Callable[[], None] | None]:
        """allocateDevice: check the candidate's availability, counters, taints and the claim's
        constraints; on success record it and return how to undo that."""
        ci = data.claim
        device, device_id = cand.device, cand.id
        multiple = self.features.consumable_capacity and bool(device.allow_multiple_allocations)
        if not multiple and data.admin and ci in self.allocating.get(device_id, ()):
            return False, None
        if not data.admin and self._in_use(device_id):
            return False, None
        if not self.features.partitionable_devices and device.consumes_counters:
            return False, None
        skip_counters = multiple and self._capacity_in_use(device_id)
        undo: list[Callable[[], None]] = []

        def rollback() -> None:
            for step in reversed(undo):
                step()

        if not skip_counters and device.consumes_counters:
            if not self.counter_use.take(cand):
                return False, None
            undo.append(lambda: self.counter_use.release(cand))
        if self.features.device_taints and taint_blocks(device, data.spec.tolerations) is not None:
            rollback()
            return False, None
        for constraint in self.constraints[ci]:
            if not constraint.add(data, cand):
                rollback()
                if must:
                    claim = _claim_name(self.claims[ci])
                    raise AllocationError(
                        f"claim {claim}, request {data.name}: cannot add device {'/'.join(device_id)} because a claim constraint would not be satisfied"
                    )
                return False, None
            undo.append(lambda c=constraint: c.remove(data))  # type: ignore[misc]
        if not multiple:
            self.allocating.setdefault(device_id, set()).add(ci)
            undo.append(lambda: self.allocating[device_id].discard(ci))
        consumed: dict[str, int] | None = None
        share = ""
        if self.features.consumable_capacity:
            if not self._capacity_fits(data, cand):
                rollback()
                return False, None
            if multiple:
                consumed = consumed_all(data.spec.capacity, device.capacity, self.features.fractional_capacity_range)
                share = self.a.share_id()
                existed = device_id in self.allocating_capacity
                entry = self.allocating_capacity.setdefault(device_id, {})
                for name, amount in consumed.items():
                    entry[name] = entry.get(name, 0) + amount
                taken = dict(consumed)

                def give_back() -> None:
                    left = self.allocating_capacity.get(device_id)
                    if left is None:
                        return
                    for name, amount in taken.items():
                        if name in left:
                            left[name] -= amount
                    if all(v == 0 for v in left.values()) and not existed:
                        del self.allocating_capacity[device_id]

                undo.append(give_back)
        results = self.results[ci]
        results.append((data, cand, share, consumed or None))
        undo.append(lambda: results.pop() and None)
        return True, rollback

    # --- the result ---------------------------------------------------------------------------------
    def _result(self, ci: int) -> Allocation:
        claim = self.claims[ci]
        chosen = [self.requests[ci, ri, self.selected_sub.get((ci, ri), 0)] for ri in range(len(claim.spec.requests))]
        return allocation_result(claim, chosen, self.results[ci], self.node, self.features.binding_conditions)
