"""Random DRA cases for the allocator's properties (hypothesis): two nodes' slices of a few
devices (shareable with a capacity or not, consuming shared counters or not, some tainted,
of model a or b on NUMA node 0 or 1), one to three claims of one or two requests (ExactCount
or All, a model selector, a capacity, a toleration, a count) with a match or distinct
constraint, and allocations other claims already hold."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from hypothesis import strategies as st

from rulesched.model.dra import (
    ALL,
    EXACT_COUNT,
    Allocation,
    Attribute,
    Capacity,
    ClaimSpec,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.model.objects import Node
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra import Allocator, Ranking
from rulesched.semantics.dra_devices import AllocationError

DRIVER = "d.example.com"
NODES = ("n1", "n2")
CEL = CelCache()  # (compiled once for the whole run: the selectors are few)
CLASS = DeviceClass("gpu", (f'device.driver == "{DRIVER}"',))
MODEL = {m: f'device.attributes["{DRIVER}"].model == "{m}"' for m in ("a", "b")}


@dataclass(frozen=True)
class Case:
    slices: tuple[ResourceSlice, ...]
    claims: tuple[ResourceClaim, ...]
    held: tuple[Allocation, ...]  # allocations other claims already have


@st.composite
def devices(draw: st.DrawFn, prefix: str, counters: bool) -> tuple[Device, ...]:
    out = []
    for i in range(draw(st.integers(1, 4))):
        shared = draw(st.booleans())
        capacity = (
            MappingProxyType({"mem": Capacity(draw(st.sampled_from([4000, 8000])))}) if shared else MappingProxyType({})
        )
        consumes = (
            (CounterConsumption("set", MappingProxyType({"c": draw(st.sampled_from([1000, 2000]))})),)
            if counters and draw(st.booleans())
            else ()
        )
        taints = (DeviceTaint("bad", "", "NoSchedule"),) if draw(st.integers(0, 5)) == 0 else ()
        out.append(
            Device(
                f"{prefix}-{i}",
                attributes=MappingProxyType(
                    {
                        "model": Attribute("string", draw(st.sampled_from("ab"))),
                        "numa": Attribute("int", draw(st.integers(0, 1))),
                    }
                ),
                capacity=capacity,
                consumes_counters=consumes,
                taints=taints,
                allow_multiple_allocations=True if shared else None,
            )
        )
    return tuple(out)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    slices = []
    for node in NODES:
        counters = draw(st.booleans())
        slices.append(
            ResourceSlice(
                f"{node}-devices",
                DRIVER,
                node,
                slice_count=2 if counters else 1,
                node_name=node,
                devices=draw(devices(node, counters)),
            )
        )
        if counters:
            total = draw(st.sampled_from([1000, 2000, 3000]))
            slices.append(
                ResourceSlice(
                    f"{node}-counters",
                    DRIVER,
                    node,
                    slice_count=2,
                    node_name=node,
                    shared_counters=(CounterSet("set", MappingProxyType({"c": total})),),
                )
            )
    claims = []
    for c in range(draw(st.integers(1, 3))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            mode = draw(st.sampled_from([EXACT_COUNT, EXACT_COUNT, ALL]))
            selectors = (MODEL[draw(st.sampled_from("ab"))],) if draw(st.booleans()) else ()
            capacity = MappingProxyType({"mem": draw(st.sampled_from([1000, 3000]))}) if draw(st.booleans()) else None
            tolerations = (DeviceToleration("bad", "Exists"),) if draw(st.booleans()) else ()
            requests.append(
                DeviceRequest(
                    f"r{r}",
                    ExactRequest("gpu", selectors, mode, draw(st.integers(1, 2)), None, tolerations, capacity),
                )
            )
        constraints = ()
        if len(requests) > 1 or requests[0].exactly.count > 1:  # type: ignore[union-attr]
            kind = draw(st.sampled_from(["", "match", "distinct"]))
            if kind:
                constraints = (
                    DeviceConstraint(
                        (), f"{DRIVER}/numa" if kind == "match" else "", f"{DRIVER}/numa" if kind == "distinct" else ""
                    ),
                )
        claims.append(ResourceClaim(f"c{c}", spec=ClaimSpec(tuple(requests), constraints)))
    held = []
    for node in NODES:
        if draw(st.booleans()):
            found = [d for s in slices if s.node_name == node for d in s.devices]
            device = draw(st.sampled_from(found))
            consumed = MappingProxyType({"mem": 1000}) if device.allow_multiple_allocations else None
            held.append(
                Allocation(
                    (
                        DeviceResult(
                            "x", DRIVER, node, device.name, share_id="s" if consumed else "", consumed_capacity=consumed
                        ),
                    )
                )
            )
    return Case(tuple(slices), tuple(claims), tuple(held))


def outcome(allocator: Allocator, node: str, claims: list[ResourceClaim], ranking: Ranking | None) -> object:
    """The allocation on ``node``, or the error's message and whether it is the node's alone."""
    try:
        return allocator.allocate(Node(node), claims, ranking)
    except AllocationError as err:
        return (str(err), err.on_node)
