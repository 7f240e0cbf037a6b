"""The first-fit path's capacity check in line (a device of one capacity without a request
policy, asked that capacity: ``dra_search.AllocationRun._first_fit``) answers as the search's
``fits``, at every edge: what shares hold plus what is asked below, at and above the capacity,
a request asking another capacity, none or a negative amount, and devices with a policy or two
capacities (the path's other branch). ``>`` made ``>=`` in the check fails it."""

from __future__ import annotations

from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.model.dra import (
    Allocation,
    Capacity,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DeviceResult,
    ExactRequest,
    RequestPolicy,
    ResourceClaim,
    ResourceSlice,
)
from rulesched.model.objects import Node
from rulesched.semantics.dra import Allocator
from rulesched.semantics.dra_devices import AllocationError, allocated_state
from tests.helpers.profiles import examples

CLASS = DeviceClass("gpu")
_VALUE = st.sampled_from([0, 500])
_USED = st.sampled_from([None, None, 0, 250, 500])
_AMOUNT = st.sampled_from([-1, 0, 250, 500])
# mostly the in-line case (one capacity, no policy, asked by name), and each other branch
_CAPACITY: st.SearchStrategy[dict[str, Capacity]] = st.one_of(
    st.builds(lambda v: {"milli": Capacity(v)}, _VALUE),
    st.builds(lambda v: {"milli": Capacity(v)}, _VALUE),
    st.builds(lambda v: {"milli": Capacity(v, RequestPolicy(default=100))}, _VALUE),
    st.builds(lambda v: {"milli": Capacity(v), "mem": Capacity(v)}, _VALUE),
    st.just({}),
)
_ASKED: st.SearchStrategy[dict[str, int] | None] = st.one_of(
    st.builds(lambda a: {"milli": a}, _AMOUNT),
    st.builds(lambda a: {"milli": a}, _AMOUNT),
    st.builds(lambda a: {"mem": a}, _AMOUNT),
    st.just({}),
    st.none(),
)


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(_CAPACITY, _USED), min_size=1, max_size=3), _ASKED, st.integers(1, 2))
def test_the_capacity_check_in_line_answers_as_fits(
    devices: list[tuple[dict[str, Capacity], int | None]], asked: dict[str, int] | None, count: int
) -> None:
    shared = tuple(
        Device(f"gpu-{i}", capacity=MappingProxyType(cap), allow_multiple_allocations=True)
        for i, (cap, _) in enumerate(devices)
    )
    held = [
        Allocation((DeviceResult("x", "d", "n1", f"gpu-{i}", share_id="s", consumed_capacity={"milli": used}),))
        for i, (_, used) in enumerate(devices)
        if used is not None
    ]
    slices = [ResourceSlice("n1", "d", "n1", node_name="n1", devices=shared)]
    request = ExactRequest("gpu", count=count, capacity=MappingProxyType(asked) if asked is not None else None)
    claim = ResourceClaim("c", spec=ClaimSpec((DeviceRequest("r", request),)))
    answers: list[object] = []
    for first_fit in (True, False):
        allocator = Allocator(
            slices, {"gpu": CLASS}, allocated_state(held), share_id=lambda: "share", first_fit=first_fit
        )
        try:
            answers.append(allocator.allocate(Node("n1"), [claim]))
        except AllocationError as err:
            answers.append(str(err))
        assert allocator.first_fits == (1 if first_fit else 0)
    assert answers[0] == answers[1]
