"""The structured allocator's vocabulary (k8s.io/dynamic-resource-allocation/structured): a
device's id, what other claims' allocations hold of the devices (upstream's AllocatedState, and
what releasing some claims leaves of it), a device a request may get on a node, the attribute
and taint rules every stage reads, and the allocator's error.

Next stage: :mod:`rulesched.semantics.dra_requests` (requests and claim constraints during the
search), then :mod:`rulesched.semantics.dra` (the search).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
    shareable devices, and the capacity those shares consume, per device."""

    devices: frozenset[DeviceID] = frozenset()
    shared: frozenset[tuple[str, str, str, str]] = frozenset()
    capacity: Mapping[DeviceID, Mapping[str, int]] = field(default_factory=dict)

    def in_use(self, device: DeviceID) -> bool:
        """IsDeviceAllocated: allocated whole or in part."""
        return device in self.devices or device in self.capacity or any(s[:3] == device for s in self.shared)


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

    @property
    def id(self) -> DeviceID:
        return (self.slice.driver, self.slice.pool, self.device.name)


@dataclass(frozen=True, slots=True)
class NodePools:
    """The pools a node reaches and their devices in the allocator's order (see pools_for)."""

    pools: list[Pool]
    candidates: list[Candidate]
    labels: Any


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


def taint_blocks(device: Device, tolerations: Sequence[DeviceToleration]) -> DeviceTaint | None:
    """The first NoSchedule/NoExecute taint of the device no toleration tolerates."""
    for taint in device.taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None
