"""The resource pools a node can reach, as the structured allocator gathers them (GatherPools in
k8s.io/dynamic-resource-allocation/structured/internal/incubating/pools_incubating.go).

A pool (driver, pool name) is published as one or more ResourceSlices of one generation; the
newest generation replaces older ones. A pool is *incomplete* while fewer slices of its
generation exist than its ``resourceSliceCount`` (the driver is updating it): nothing is
allocated from it, and a request for all devices fails. It is *invalid* when two devices share a
name, or (partitionable devices) a counter set is named twice or a device consumes a counter
set or counter that does not exist. Pools are sorted by driver then name and slices by name, so
first-fit allocation is deterministic and drivers can steer it by naming (upstream's newest
order); pools with devices that have binding conditions come last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.model.dra import CounterSet, Device, ResourceSlice
from rulesched.model.objects import NodeSelectorTerm
from rulesched.semantics.matching import node_selector_term_matches


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator's optional behaviour (structured.Features), by default what kube-scheduler
    1.37 enables: every beta and GA feature (the "incubating" allocator). The alpha ones
    (DerivedAttributes, ListTypeAttributes, CompatibilityGroups, OptionalNodeOperations) are not
    implemented: requests or slices using them behave as with the feature off."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    binding_conditions: bool = True  # DeviceBindingAndStatus
    consumable_capacity: bool = True
    fractional_capacity_range: bool = True

    @classmethod
    def named(cls, names: Iterable[str]) -> Features:
        """The features upstream's Features.Set() names (its test table's per-case features)."""
        given = set(names)
        return cls(
            admin_access="DRAAdminAccess" in given,
            prioritized_list="DRAPrioritizedList" in given,
            partitionable_devices="DRAPartitionableDevices" in given,
            device_taints="DRADeviceTaints" in given,
            binding_conditions="DRADeviceBindingConditions+DRAResourceClaimDeviceStatus" in given,
            consumable_capacity="DRAConsumableCapacity" in given,
            fractional_capacity_range="DRAFractionalCapacityRange" in given,
        )


ALL_FEATURES = Features()


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)  # with devices, reaching the node
    other_slices: list[ResourceSlice] = field(default_factory=list)  # the pool's slices beyond the node
    counter_sets: Mapping[str, CounterSet] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(node: Any, node_name: str, all_nodes: bool, selector: Sequence[NodeSelectorTerm] | None) -> bool:
    """NodeMatches: a node name, all nodes, or a node selector (terms ORed)."""
    if node_name:
        return node is not None and node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node is not None and any(
            (t.match_expressions or t.match_fields) and node_selector_term_matches(t, node) for t in selector
        )
    return False


def _relevant(slice_: ResourceSlice, node: Any) -> bool | None:
    """Whether the slice has devices for the node (None: a slice of no known node selection)."""
    if slice_.node_name or slice_.all_nodes or slice_.node_selector is not None:
        return node_matches(node, slice_.node_name, slice_.all_nodes, slice_.node_selector)
    if slice_.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in slice_.devices)
    return None


def _uses_compatibility_groups(slice_: ResourceSlice) -> bool:
    return any(d.compatibility_groups for d in slice_.devices)


def gather_pools(
    for_node: Sequence[ResourceSlice], node: Any, features: Features, all_slices: Sequence[ResourceSlice]
) -> list[Pool]:
    """The pools with devices for ``node`` from its slices (``for_node``: the node's own and
    those naming no node), complete or not, sorted."""
    pools: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in for_node:
        if not features.partitionable_devices and (s.per_device_node_selection or s.shared_counters):
            continue
        if _uses_compatibility_groups(s):  # DRADeviceCompatibilityGroups is off: ignored
            continue
        relevant = _relevant(s, node)
        if not relevant:
            continue
        found = pools.get(s.pool_id)
        if found is None or s.generation > found[0].generation:
            pools[s.pool_id] = [s]
        elif s.generation == found[0].generation:
            found.append(s)
    result: list[Pool] = []
    with_conditions: list[Pool] = []
    for (driver, name), slices in pools.items():
        want = slices[0].slice_count
        everything: list[ResourceSlice] | None = None
        if len(slices) != want:
            obsolete, everything = _slices_in_pool(all_slices, driver, name, slices[0].generation)
            if obsolete:
                continue
            everything = [s for s in everything if not _uses_compatibility_groups(s)]
            if len(everything) != want:
                result.append(Pool(driver, name, incomplete=True))
                continue
        pool = _build(driver, name, slices, features, everything)
        (with_conditions if _has_binding_conditions(pool) else result).append(pool)
    result.sort(key=lambda p: (p.driver, p.name))
    with_conditions.sort(key=lambda p: (p.driver, p.name))
    return result + with_conditions


def _slices_in_pool(
    all_slices: Sequence[ResourceSlice], driver: str, name: str, generation: int
) -> tuple[bool, list[ResourceSlice]]:
    """checkSlicesInPool: whether a newer generation exists (the one seen is obsolete), and every
    slice of ``generation``."""
    out = []
    for s in all_slices:
        if s.driver != driver or s.pool != name:
            continue
        if s.generation == generation:
            out.append(s)
        elif s.generation > generation:
            return True, []
    return False, out


def _has_binding_conditions(pool: Pool) -> bool:
    return any(d.binding_conditions for s in pool.slices for d in s.devices)


def _build(
    driver: str, name: str, slices: list[ResourceSlice], features: Features, everything: list[ResourceSlice] | None
) -> Pool:
    slices = sorted(slices, key=lambda s: s.name)
    device_slices: list[ResourceSlice] = []
    counter_slices: list[ResourceSlice] = []
    others: list[ResourceSlice] = []
    for s in slices:
        (counter_slices if features.partitionable_devices and s.shared_counters else device_slices).append(s)
    if everything is not None and len(slices) < len(everything):
        seen = {s.name for s in slices}
        for s in everything:
            if s.name in seen:
                continue
            (counter_slices if features.partitionable_devices and s.shared_counters else others).append(s)
    names: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in names:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}")
            names.add(d.name)
    if not features.partitionable_devices:
        return Pool(driver, name, slices=device_slices)
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate counter set name {cs.name}")
            counter_sets[cs.name] = cs
    for group in (device_slices, others):
        problem = _consumption_problem(counter_sets, (d for s in group for d in s.devices))
        if problem:
            return Pool(driver, name, invalid=True, invalid_reason=problem)
    return Pool(driver, name, slices=device_slices, other_slices=others, counter_sets=counter_sets)


def _consumption_problem(counter_sets: Mapping[str, CounterSet], devices: Iterable[Device]) -> str:
    for d in devices:
        for consumption in d.consumes_counters:
            counter_set = counter_sets.get(consumption.counter_set)
            if counter_set is None:
                return f"counter set {consumption.counter_set} not found"
            for counter in consumption.counters:
                if counter not in counter_set.counters:
                    return f"counter {counter} not found in counter set {counter_set.name}"
    return ""
