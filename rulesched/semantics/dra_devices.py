"""The structured allocator's vocabulary (k8s.io/dynamic-resource-allocation/structured): a
device's id, what other claims' allocations hold of the devices (upstream's AllocatedState, and
what releasing some claims leaves of it), a device a request may get on a node, the attribute
and taint rules every stage reads, and the allocator's error.

Next stage: :mod:`rulesched.semantics.dra_requests` (requests and claim constraints during the
search), then :mod:`rulesched.semantics.dra` (the search).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rulesched.model.dra import Allocation, Device, DeviceTaint, DeviceToleration, ResourceClaim, ResourceSlice
from rulesched.semantics.dra_pools import Pool

DeviceID = tuple[str, str, str]  # (driver, pool, device)


class AllocationError(Exception):
    """Allocation cannot proceed. ``on_node``: only this node's (upstream's
    ErrFailedAllocationOnNode); otherwise the pod's problem on every node."""

    def __init__(self, message: str, on_node: bool = False) -> None:
        super().__init__(message)
        self.on_node = on_node


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """What other claims hold (upstream's AllocatedState): devices allocated whole, the shares of
    shareable devices, and the capacity those shares consume, per device. ``shared_devices``: the
    devices some share holds (worked out from ``shared`` when not given), so that asking whether
    a device is in use does not walk every share in the cluster."""

    devices: AbstractSet[DeviceID] = frozenset()
    shared: AbstractSet[tuple[str, str, str, str]] = frozenset()
    capacity: Mapping[DeviceID, Mapping[str, int]] = field(default_factory=dict)
    shared_devices: AbstractSet[DeviceID] = frozenset()

    def __post_init__(self) -> None:
        if self.shared and not self.shared_devices:
            object.__setattr__(self, "shared_devices", frozenset(s[:3] for s in self.shared))

    def in_use(self, device: DeviceID) -> bool:
        """IsDeviceAllocated: allocated whole or in part."""
        return device in self.devices or device in self.capacity or device in self.shared_devices


class PooledSet(AbstractSet[Any]):
    """A set of device ids (or share ids: a device id and more) kept as one frozen set per pool
    (driver, pool): the store's counts of what claims hold change a pool at a time (a node's few
    devices), so a new state copies the table of pools, not every device held in the cluster
    (:mod:`rulesched.cluster.dra`). Set operations give plain frozensets."""

    __slots__ = ("_by_pool", "_len", "__weakref__")  # (the store copies a table only while one is alive)

    def __init__(self, by_pool: Mapping[tuple[str, str], AbstractSet[Any]]) -> None:
        self._by_pool = by_pool
        self._len = -1  # (counted when asked)

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> frozenset[Any]:
        return frozenset(it)

    def __contains__(self, item: object) -> bool:
        found = self._by_pool.get(item[:2]) if isinstance(item, tuple) else None
        return found is not None and item in found

    def __iter__(self) -> Iterator[Any]:
        for part in self._by_pool.values():
            yield from part

    def __len__(self) -> int:
        if self._len < 0:
            self._len = sum(len(s) for s in self._by_pool.values())
        return self._len

    def __bool__(self) -> bool:  # (whether any pool holds one: not a count over every pool)
        return self._len > 0 if self._len >= 0 else any(self._by_pool.values())

    def part(self, pool: tuple[str, str]) -> AbstractSet[Any]:
        """The ids of ``pool`` (driver, pool) this set holds (a loop over one pool's devices
        finds the pool once)."""
        return self._by_pool.get(pool, _NO_IDS)


class PooledMap(Mapping[DeviceID, Mapping[str, int]]):
    """A device id -> amounts map kept as one frozen map per pool (see :class:`PooledSet`)."""

    __slots__ = ("_by_pool", "_len", "__weakref__")  # (the store copies a table only while one is alive)

    def __init__(self, by_pool: Mapping[tuple[str, str], Mapping[DeviceID, Mapping[str, int]]]) -> None:
        self._by_pool = by_pool
        self._len = -1  # (counted when asked)

    def __getitem__(self, key: DeviceID) -> Mapping[str, int]:
        return self._by_pool[key[:2]][key]

    def __contains__(self, key: object) -> bool:
        found = self._by_pool.get(key[:2]) if isinstance(key, tuple) else None
        return found is not None and key in found

    def get(self, key: DeviceID, default: Any = None) -> Any:
        found = self._by_pool.get(key[:2])
        return default if found is None else found.get(key, default)

    def __iter__(self) -> Iterator[DeviceID]:
        for part in self._by_pool.values():
            yield from part

    def __len__(self) -> int:
        if self._len < 0:
            self._len = sum(len(m) for m in self._by_pool.values())
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0 if self._len >= 0 else any(self._by_pool.values())

    def part(self, pool: tuple[str, str]) -> Mapping[DeviceID, Mapping[str, int]]:
        """The entries of ``pool`` (driver, pool) (see :meth:`PooledSet.part`)."""
        return self._by_pool.get(pool, _NO_ENTRIES)


_NO_IDS: frozenset[Any] = frozenset()
_NO_ENTRIES: Mapping[DeviceID, Mapping[str, int]] = MappingProxyType({})


_POOLED = (PooledSet, PooledMap)


def pool_part(found: Any, pool: tuple[str, str]) -> Any:
    """What a pooled set or map holds of ``pool``'s devices; any other set or map whole (a
    released state's plain sets): the same answers for that pool's device ids."""
    return found.part(pool) if type(found) in _POOLED else found  # (not isinstance: ABCs' check is slow)


NOTHING_ALLOCATED = AllocatedState()


def allocated_state(claims: Sequence[ResourceClaim | Allocation]) -> AllocatedState:
    """The devices the allocations of ``claims`` hold (admin access holds none: such devices
    are shared with their users)."""
    devices: set[DeviceID] = set()
    shared: set[tuple[str, str, str, str]] = set()
    capacity: dict[DeviceID, dict[str, int]] = {}
    for item in claims:
        alloc = item.allocation if isinstance(item, ResourceClaim) else item
        if alloc is None:
            continue
        for r in alloc.devices:
            if r.admin_access:
                continue
            if r.share_id:
                shared.add((*r.device_id, r.share_id))
                if r.consumed_capacity:
                    used = capacity.setdefault(r.device_id, {})
                    for name, amount in r.consumed_capacity.items():
                        used[name] = used.get(name, 0) + amount
            else:
                devices.add(r.device_id)
    return AllocatedState(frozenset(devices), frozenset(shared), capacity)


def released(state: AllocatedState, allocations: Sequence[Allocation]) -> AllocatedState:
    """What ``state`` holds once ``allocations`` (of claims it counts) are let go: their devices
    allocated whole, their shares and the capacity those consume (preemption's trial: the
    victims' claims deallocated)."""
    if not allocations:
        return state
    gone = allocated_state(allocations)
    capacity: dict[DeviceID, dict[str, int]] = {}
    for device, used in state.capacity.items():
        freed = gone.capacity.get(device, {})
        left = {name: amount - freed.get(name, 0) for name, amount in used.items()}
        if any(left.values()):
            capacity[device] = left
    return AllocatedState(state.devices - gone.devices, state.shared - gone.shared, capacity)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device a request may get: where it is (its position in upstream's order is ``order``)."""

    device: Device
    slice: ResourceSlice
    pool: Pool
    order: int
    # (driver, pool, device): kept, not a property, as the allocator asks it of every candidate
    # it tries, in every run
    id: DeviceID = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", (self.slice.driver, self.slice.pool, self.device.name))


@dataclass(frozen=True, slots=True)
class NodePools:
    """The pools a node reaches and their devices in the allocator's order (see pools_for)."""

    pools: list[Pool]
    candidates: list[Candidate]
    labels: Any
    counters: bool = True  # whether any candidate consumes counters (the first-fit path's test)
    # (class name, class selectors, request selectors, binding conditions' feature) -> whether
    # each candidate (by its order) is selectable, or None when a selector fails on one: what the
    # first-fit path reads instead of asking each candidate in each run (dra_search.AllocationRun._selectable_mask)
    selectable: dict[tuple[Any, ...], tuple[bool, ...] | None] = field(default_factory=dict)
    # each candidate's capacity (by order) when it is one capacity without a request policy,
    # (its name, its value), else None: the first-fit path's capacity check without plain_fits
    sole_capacity: tuple[tuple[str, int] | None, ...] = ()


def lookup_attribute(device: Device, driver: str, name: str) -> Any:
    """A device's attribute by its fully qualified name (an unqualified attribute belongs to the
    driver's domain)."""
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


def tolerates(toleration: DeviceToleration, taint: DeviceTaint) -> bool:
    """ToleratesTaint for devices (resourceclaim/devicetoleration.go)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.value == taint.value


def sole_capacity(capacity: Mapping[str, Any]) -> tuple[str, int] | None:
    """(name, value) of a device's capacity that is one entry without a request policy (a GPU's
    milli), else None."""
    if len(capacity) != 1:
        return None
    ((name, cap),) = capacity.items()
    return None if cap.request_policy is not None else (name, cap.value)


def taint_blocks(device: Device, tolerations: Sequence[DeviceToleration]) -> DeviceTaint | None:
    """The first NoSchedule/NoExecute taint of the device no toleration tolerates."""
    for taint in device.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
