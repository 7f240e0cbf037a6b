"""The first-fit path's answers shared between nodes alike (rulesched.semantics.dra_first_fit).

A sequence of allocations through one store-like set of tables (the node pools, the table of
first-fit answers), over nodes of one machine type and one of another, states made as the store
makes them (each pool's frozen parts, remade only for the pools a step changes), requests of
every shape the cases draw and rankings that shuffle the candidates, answers as a fresh search
does on every step. A key missing what other claims hold, the capacity asked, the order tried or
the selectable mask fails it (each was checked by taking it out).
"""

from __future__ import annotations

import random
from types import MappingProxyType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.model.dra import (
    Attribute,
    Capacity,
    ClaimSpec,
    Device,
    DeviceRequest,
    DeviceToleration,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.model.objects import Node
from rulesched.semantics.dra import Allocator
from rulesched.semantics.dra_devices import AllocatedState, AllocationError, PooledMap, PooledSet
from rulesched.semantics.dra_first_fit import FirstFits
from tests.helpers.dra_cases import CEL, CLASS, DRIVER, MODEL, devices

ALIKE = ("m1", "m2", "m3")  # one machine type: the same devices, each node its own pool
OTHER = "o1"


class _Store:
    """What claims hold, per pool, as the store keeps it: frozen parts remade per changed pool."""

    def __init__(self) -> None:
        self.whole: dict[tuple[str, str], frozenset[Any]] = {}
        self.consumed: dict[tuple[str, str], Any] = {}

    def hold(self, node: str, whole: set[str], used: dict[str, int]) -> None:
        pool = (DRIVER, node)
        self.whole[pool] = frozenset((DRIVER, node, d) for d in whole)
        self.consumed[pool] = MappingProxyType(
            {(DRIVER, node, d): MappingProxyType({"mem": amount}) for d, amount in used.items()}
        )

    def state(self) -> AllocatedState:
        shared = {p: frozenset(m) for p, m in self.consumed.items()}
        shares = {p: frozenset((*d, "s") for d in m) for p, m in self.consumed.items()}
        return AllocatedState(
            PooledSet(dict(self.whole)), PooledSet(shares), PooledMap(dict(self.consumed)), PooledSet(shared)
        )


def _outcome(allocator: Allocator, node: str, claim: ResourceClaim, ranking: Any) -> object:
    try:
        return allocator.allocate(Node(node), [claim], ranking)
    except AllocationError as err:
        return (str(err), err.on_node)


# a request: its model selector, the capacity it asks, whether it tolerates the taint, its
# count, and the ranking (none, or a shuffle seeded so); a few per sequence, so that steps repeat
_REQUEST = st.tuples(
    st.sampled_from(["", "a", "b"]),
    st.sampled_from([None, 1000, 3000]),
    st.booleans(),
    st.integers(1, 3),
    st.sampled_from([None, 0, 1]),
)
_STEP = st.tuples(
    st.sampled_from((*ALIKE, ALIKE[0], OTHER)),
    st.booleans(),  # whether the step changes what claims hold on the node first
    st.sets(st.integers(0, 3), max_size=2),  # devices then held whole (by index)
    st.dictionaries(st.integers(0, 3), st.sampled_from([1000, 3000, 4000]), max_size=3),  # shares' use
    st.integers(0, 1),  # which request
)


def _claim(model: str, asked: int | None, tolerate: bool, count: int) -> ResourceClaim:
    request = ExactRequest(
        "gpu",
        (MODEL[model],) if model else (),
        count=count,
        tolerations=(DeviceToleration("bad", "Exists"),) if tolerate else (),
        capacity=MappingProxyType({"mem": asked}) if asked is not None else None,
    )
    return ResourceClaim("c0", spec=ClaimSpec((DeviceRequest("r0", request),)))


def _shuffle(seed: int) -> Any:
    def ranking(claim: ResourceClaim, name: str, found: Any) -> Any:
        order = list(found)
        random.Random(seed).shuffle(order)
        return order

    return ranking


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    devices("gpu", False),
    devices("gpu", False),
    st.lists(_REQUEST, min_size=2, max_size=2),
    st.lists(_STEP, min_size=2, max_size=16),
)
def test_shared_first_fit_answers_as_the_search(alike: Any, other: Any, requests: list[Any], steps: list[Any]) -> None:
    slices = [ResourceSlice(f"{n}-devices", DRIVER, n, node_name=n, devices=alike) for n in ALIKE]
    slices.append(ResourceSlice(f"{OTHER}-devices", DRIVER, OTHER, node_name=OTHER, devices=other))
    store, pools, table = _Store(), {}, FirstFits()  # type: ignore[var-annotated]
    for node, change, whole, used, which in steps:
        names = [d.name for d in (other if node == OTHER else alike)]
        if change:
            held = {names[i] for i in whole if i < len(names)}
            store.hold(node, held, {names[i]: v for i, v in used.items() if i < len(names)})
        *asks, seed = requests[which]
        claim, rank = _claim(*asks), None if seed is None else _shuffle(seed)
        state = store.state()
        kept = Allocator(slices, {"gpu": CLASS}, state, cel=CEL, share_id=lambda: "share", pools=pools, taken=table)
        fresh = Allocator(slices, {"gpu": CLASS}, state, cel=CEL, share_id=lambda: "share", first_fit=False)
        assert _outcome(kept, node, claim, rank) == _outcome(fresh, node, claim, rank), (node, requests[which])


def test_a_node_alike_is_answered_from_the_table() -> None:
    """Two nodes of one type, nothing held: the second node's allocation is the first's answer
    (no new entry), with its own devices and node."""
    capacity = MappingProxyType({"mem": Capacity(4000)})
    model = MappingProxyType({"model": Attribute("string", "a")})
    alike = tuple(
        Device(f"gpu-{i}", attributes=model, capacity=capacity, allow_multiple_allocations=True) for i in range(2)
    )
    slices = [ResourceSlice(f"{n}-devices", DRIVER, n, node_name=n, devices=alike) for n in ALIKE]
    table, pools, store = FirstFits(), {}, _Store()  # type: ignore[var-annotated]
    request = ExactRequest("gpu", count=2, capacity=MappingProxyType({"mem": 1000}))
    claim = ResourceClaim("c0", spec=ClaimSpec((DeviceRequest("r0", request),)))
    got = []
    for node in ALIKE[:2]:
        allocator = Allocator(slices, {"gpu": CLASS}, store.state(), cel=CEL, pools=pools, taken=table)
        found = allocator.allocate(Node(node), [claim])
        assert found is not None
        got.append(found[0])
    assert len(table.answers) == 1
    assert [(r.pool, r.device, r.consumed_capacity) for r in got[1].devices] == [
        (ALIKE[1], r.device, r.consumed_capacity) for r in got[0].devices
    ]
    assert got[1].node_selector != got[0].node_selector  # (each its own node)
    assert {r.share_id for r in got[0].devices}.isdisjoint(r.share_id for r in got[1].devices)
