"""The first-fit path's kept selector answers (``dra._Run._selectable_mask``): which of a node's
devices a request may select is worked out once per node's pools and kept there, under the
class's name and selectors, the request's selectors and the binding conditions' feature, for
every later run (the store shares the pools between allocators). A sequence of allocations
through one pools table, with classes redefined under one name, requests of other selectors,
selectors failing on some devices and the feature toggled, answers as fresh searches do; a key
missing any of those parts, or a kept answer standing where a selector failed, fails it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.model.dra import ClaimSpec, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim, ResourceSlice
from rulesched.semantics.dra import Allocator
from rulesched.semantics.dra_devices import allocated_state
from rulesched.semantics.dra_pools import ALL_FEATURES
from tests.helpers.dra_cases import CEL, CLASS, DRIVER, MODEL, NODES, Case, cases, outcome

# "gpu" as it was and as redefined (one name, other selectors), a class of model a, and one whose
# selector fails (a CEL runtime error) on devices of model b that are not on NUMA node 0
CLASSES = {
    "gpu": CLASS,
    "gpu-redefined": DeviceClass("gpu", (MODEL["b"],)),
    "model-a": DeviceClass("model-a", (MODEL["a"],)),
    "risky": DeviceClass(
        "risky",
        (
            f'device.attributes["{DRIVER}"].numa == 0 || device.attributes["{DRIVER}"].model == "a" || device.attributes["{DRIVER}"].nope == 1',
        ),
    ),
}
NO_BINDING_CONDITIONS = dataclasses.replace(ALL_FEATURES, binding_conditions=False)


def _with_binding_conditions(case: Case, which: list[bool]) -> tuple[ResourceSlice, ...]:
    """The case's slices, the devices ``which`` marks waiting on a binding condition (selectable
    only with the feature on)."""
    out, at = [], 0
    for s in case.slices:
        devices = []
        for d in s.devices:
            marked = which[at % len(which)] if which else False
            at += 1
            devices.append(dataclasses.replace(d, binding_conditions=("attached",)) if marked else d)
        out.append(dataclasses.replace(s, devices=tuple(devices)))
    return tuple(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases(),
    st.lists(st.booleans(), max_size=4),
    st.lists(
        st.tuples(
            st.sampled_from(NODES),
            st.sampled_from(sorted(CLASSES)),
            st.sampled_from(["", "a", "b"]),
            st.integers(1, 2),
            st.booleans(),
        ),
        min_size=2,
        max_size=8,
    ),
)
def test_kept_selector_answers_answer_as_the_search(
    case: Case, marked: list[bool], asks: list[tuple[str, str, str, int, bool]]
) -> None:
    slices = _with_binding_conditions(case, marked)
    pools: dict[str, Any] = {}  # (the store's: one table of node pools for every allocator)
    for node, class_key, model, count, conditions in asks:
        cls = CLASSES[class_key]
        selectors = (MODEL[model],) if model else ()
        request = DeviceRequest("r0", ExactRequest(cls.name, selectors, count=count))
        claim = ResourceClaim("c0", spec=ClaimSpec((request,)))
        features = ALL_FEATURES if conditions else NO_BINDING_CONDITIONS
        answers = []
        for first_fit, shared in ((True, pools), (False, None)):
            allocator = Allocator(
                list(slices),
                {cls.name: cls},
                allocated_state(list(case.held)),
                cel=CEL,
                features=features,
                share_id=lambda: "share",
                pools=shared,
                first_fit=first_fit,
            )
            answers.append(outcome(allocator, node, [claim], None))
        assert answers[0] == answers[1], (node, class_key, model, count, conditions)
