"""``node.devices``: the devices a node reaches, as rules see them (in the allocator's order,
with what the claims' allocations hold of each), made by the store for each node whose devices
or claims changed (rulesched.cluster.dra.DraCache.refresh)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from rulesched.model.dra import Attribute, NodeDevice, ResourceClaim, ResourceSlice
from rulesched.semantics.dra_devices import DeviceID
from rulesched.semantics.dra_pools import ALL_FEATURES, Pool, gather_pools, node_matches


@dataclass(frozen=True, slots=True)
class DeviceUse:
    """What the claims' allocations hold of each device: how many hold it, whether one holds
    it whole, and the capacity shares consume."""

    claims: Mapping[DeviceID, int]
    whole: AbstractSet[DeviceID]
    consumed: Mapping[DeviceID, Mapping[str, int]]


def device_use(claims: Iterable[ResourceClaim]) -> DeviceUse:
    counts: dict[DeviceID, int] = {}
    whole: set[DeviceID] = set()
    consumed: dict[DeviceID, dict[str, int]] = {}
    for claim in claims:
        if claim.allocation is None:
            continue
        for r in claim.allocation.devices:
            counts[r.device_id] = counts.get(r.device_id, 0) + 1
            if r.admin_access:
                continue
            if r.share_id:
                used = consumed.setdefault(r.device_id, {})
                for name, amount in (r.consumed_capacity or {}).items():
                    used[name] = used.get(name, 0) + amount
            else:
                whole.add(r.device_id)
    return DeviceUse(counts, frozenset(whole), consumed)


def _text(attr: Attribute) -> str:
    value = attr.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join("true" if v is True else "false" if v is False else str(v) for v in value)
    return str(value)


def node_devices(
    node: Any,
    slices: Sequence[ResourceSlice],
    all_slices: Sequence[ResourceSlice],
    use: DeviceUse,
    fixed: dict[DeviceID, tuple[Any, Any, Any, Any, Any]] | None = None,
    pools: Sequence[Pool] | None = None,
) -> tuple[NodeDevice, ...]:
    """The devices of the complete, valid pools ``node`` reaches (its slices: its own and those
    naming no node), in the allocator's order, with what claims hold of them. ``fixed``: each
    device's attributes, numbers and capacity as views, kept per device object (they change only
    with the slice: a node's refresh after a bind remakes what claims hold alone), and its last
    view with what claims held of it then: the same view again while they hold the same (a
    bind changes one or two of a node's devices; the others' views stay the objects they were).
    ``pools``: ``node_pools(node, slices, all_slices)``, when the caller keeps them."""
    out = []
    for pool in node_pools(node, slices, all_slices) if pools is None else pools:
        if pool.incomplete or pool.invalid:
            continue
        for s in pool.slices:
            for d in s.devices:
                if s.per_device_node_selection and not node_matches(node, d.node_name, d.all_nodes, d.node_selector):
                    continue
                device_id = (s.driver, s.pool, d.name)
                kept = fixed.get(device_id) if fixed is not None else None
                if kept is None or kept[0] is not d:
                    kept = (d, *_fixed_views(s.driver, d), None)
                    if fixed is not None:
                        fixed[device_id] = kept
                _, attributes, numbers, capacity, last = kept
                held = use.consumed.get(device_id)
                whole = device_id in use.whole
                claims = use.claims.get(device_id, 0)
                held_as = (whole, held is not None, claims, held or {})
                if last is not None and last[0] == held_as:
                    out.append(last[1])
                    continue
                consumed = dict(held or {})
                free = {} if whole else {name: value - consumed.get(name, 0) for name, value in capacity.items()}
                view = NodeDevice(
                    s.driver,
                    s.pool,
                    d.name,
                    attributes,
                    numbers,
                    capacity,
                    MappingProxyType(consumed),
                    MappingProxyType(free),
                    allocated=whole or held is not None or claims > 0,
                    shared=bool(d.allow_multiple_allocations),
                    claims=claims,
                    taints=d.taints,
                )
                out.append(view)
                if fixed is not None:  # (what claims held, copied: the use's own maps change in place)
                    fixed[device_id] = (*kept[:4], ((whole, held is not None, claims, consumed), view))
    return tuple(out)


def node_pools(node: Any, slices: Sequence[ResourceSlice], all_slices: Sequence[ResourceSlice]) -> list[Pool]:
    """The pools ``node`` reaches from its slices (its own and those naming no node), as
    :func:`node_devices` walks them: a function of the slices and the Node alone."""
    return gather_pools(slices, node, ALL_FEATURES, all_slices)


def _fixed_views(driver: str, d: Any) -> tuple[Any, Any, Any]:
    """A device's attributes (as text, by name and driver/name), integer attributes and capacity."""
    attributes: dict[str, str] = {}
    numbers: dict[str, int] = {}
    for name, attr in d.attributes.items():
        names = (name,) if "/" in name else (name, f"{driver}/{name}")
        for key in names:
            attributes[key] = _text(attr)
            if attr.kind == "int":
                numbers[key] = attr.value
    capacity = {name: cap.value for name, cap in d.capacity.items()}
    return MappingProxyType(attributes), MappingProxyType(numbers), MappingProxyType(capacity)
