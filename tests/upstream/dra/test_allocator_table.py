"""Upstream's shared allocator test table, run against rulesched's allocator.

The cases are k8s.io/dynamic-resource-allocation v0.37.2's structured/internal/allocatortesting
(TestAllocator in allocator_testing.go, with lexicographical_testing.go's), each as its inputs
(claims, classes, slices, node, what is allocated already, the features it enables) and what
upstream's "incubating" allocator, the one kube-scheduler 1.37 runs by default, returned with
upstream's own assertions passing: allocator_cases.jsonl, written by regenerate.sh. Each test
is named after its upstream case; ``source`` in the file gives its line. Cases that need an alpha
feature kube-scheduler 1.37 leaves off (DRADerivedAttributes, DRAListTypeAttributes,
DRADeviceCompatibilityGroups, DRAOptionalNodeOperations) are skipped, as upstream's incubating
allocator skips them.

What is compared: the error (raised or not; fatal or this node's only; and its message, which
rulesched words as upstream does), every allocation's devices in order (request, driver, pool,
device, admin access, tolerations, share, consumed capacity, binding conditions), its
configurations and node selector; and where upstream counts its search steps
(expectNumAllocateOneInvocations) the same count, so the backtracking is upstream's too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rulesched.errors import ObjectError
from rulesched.model.decode import decode_node
from rulesched.model.decode_dra import allocation, decode_device_class, decode_resource_claim, decode_resource_slice
from rulesched.model.dra import Allocation, DeviceClass, ResourceClaim, ResourceSlice
from rulesched.model.fields import Where
from rulesched.model.objects import Node
from rulesched.model.quantity import parse_quantity
from rulesched.semantics.dra import Allocator
from rulesched.semantics.dra_devices import AllocatedState, AllocationError
from rulesched.semantics.dra_pools import Features

CASES_FILE = Path(__file__).with_name("allocator_cases.jsonl")
SHARE_ID = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def _cases() -> list[dict[str, Any]]:
    lines = CASES_FILE.read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


CASES = _cases()


def _allocated(case: dict[str, Any]) -> AllocatedState:
    devices = frozenset(tuple(d.split("/")) for d in case["allocatedDevices"])
    shared = frozenset(tuple(d.split("/")) for d in case["allocatedSharedDeviceIDs"])
    capacity = {
        tuple(k.split("/")): {n: parse_quantity(q) for n, q in v.items()} for k, v in case["allocatedCapacity"].items()
    }
    return AllocatedState(devices, shared, capacity)  # type: ignore[arg-type]


def _shape(alloc: Allocation) -> dict[str, Any]:
    """An allocation as plain values, for comparing and for readable diffs."""
    return {
        "devices": [
            {
                "request": d.request,
                "device": f"{d.driver}/{d.pool}/{d.device}",
                "admin": bool(d.admin_access),
                "tolerations": [(t.key, t.operator, t.value, t.effect) for t in d.tolerations],
                "share": d.share_id,
                "consumed": dict(d.consumed_capacity or {}),
                "binding": (d.binding_conditions, d.binding_failure_conditions),
            }
            for d in alloc.devices
        ],
        "config": [(c.source, c.requests, json.dumps(dict(c.config), sort_keys=True)) for c in alloc.config],
        "nodeSelector": None
        if alloc.node_selector is None
        else [
            (
                sorted((r.key, r.operator, tuple(sorted(r.values))) for r in t.match_expressions),
                sorted((r.key, r.operator, tuple(sorted(r.values))) for r in t.match_fields),
            )
            for t in alloc.node_selector
        ],
    }


def _decode(case: dict[str, Any]) -> tuple[list[ResourceClaim], dict[str, DeviceClass], list[ResourceSlice], Node]:
    claims = [decode_resource_claim(c, "upstream", names=False) for c in case["claims"] or []]
    classes = {c.name: c for c in (decode_device_class(c, "upstream", names=False) for c in case["classes"] or [])}
    slices = [decode_resource_slice(s, "upstream", names=False) for s in case["slices"] or []]
    return claims, classes, slices, decode_node(case["node"], "upstream", names=False)


def _expected(raw: dict[str, Any]) -> Allocation:
    return allocation(raw, Where("upstream", "AllocationResult"), "")


# Cases whose objects rulesched refuses when reading them, as the API server's validation does
# (upstream's table builds them in Go, past validation, to test the allocator's own guards), or
# with quantities beyond 2^63-1 units, which rulesched refuses everywhere (model/quantity.py).
REFUSED_WHEN_READ = {
    "consumable-capacity-negative-request-aborts": "a negative capacity request",
    "consumable-capacity-range-policy-request-above-int64-rejected": "a capacity request of 2^64",
    "consumable-capacity-range-policy-overflow-aborts-not-skip": "a capacity request of 2^64",
    "consumable-capacity-range-policy-allocation-mode-all-overflow-aborts": "a capacity request of 2^64",
    "consumable-capacity-requests-are-not-modified": "a device capacity of 10^21",
    "partitionable-devices-counter-quantities-are-not-modified": "a counter of 10E (10^19)",
    "empty-class": "a request without a device class name",
    "unknown-allocation-mode": "allocationMode 'future-mode'",
    "unknown-constraint": "a constraint with neither matchAttribute nor distinctAttribute",
    "unknown-selector": "a selector without a CEL expression",
    "with-distinct-constraints-unknown-type-attribute": "an attribute with no value",
}


def _upstream_message(message: str) -> str:
    """Upstream's error with cel-go's source excerpt (rulesched's errors are one line) and the
    test lister's not-found wording (a real lister's is the API server's) made rulesched's."""
    lines = [line for line in message.splitlines() if not line.lstrip().startswith("|")]
    message = " ".join(lines).replace("ERROR: <input>", "<input>")
    return message.replace('  "not found" not found', ' deviceclass.resource.k8s.io "{}" not found')


# The allocator's variants, every case through each: "search" always runs upstream's search;
# "first-fit" (the default) answers the common case (one request, devices independent of each
# other: see _Run._first_fit) without it. Where the first-fit path answered, upstream's count of
# search steps does not apply.
VARIANTS = {"search": False, "first-fit": True}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_upstream_allocator_case(case: dict[str, Any], variant: str) -> None:
    if "skipped" in case:
        pytest.skip(f"needs alpha feature(s) off in kube-scheduler 1.37: {', '.join(case['skipped'])}")
    assert case["upstreamPassed"], "upstream's own assertions failed for this case"
    if case["name"] in REFUSED_WHEN_READ:
        with pytest.raises(ObjectError):
            _decode(case)
        pytest.xfail(f"refused when read: {REFUSED_WHEN_READ[case['name']]}")
    claims, classes, slices, node = _decode(case)
    allocator = Allocator(
        slices,
        classes,
        _allocated(case),
        features=Features.named(case["features"]),
        share_id=lambda: SHARE_ID,
        first_fit=VARIANTS[variant],
    )
    try:
        got = allocator.allocate(node, claims)
        error = None
    except AllocationError as err:
        got, error = None, err
    if case["error"] is not None:
        assert error is not None, f"upstream failed with {case['error']!r}; rulesched allocated {got}"
        assert error.on_node == case["failedOnNode"]
        want = _upstream_message(case["error"])
        if "{}" in want:
            want = want.replace("{}", want.split("could not retrieve device class ")[1].split(":")[0])
        assert str(error).replace(" default/", " ") == want
        return
    assert error is None, f"rulesched failed with {error}; upstream allocated"
    want = [_expected(r) for r in case["results"] or []]
    assert [_shape(a) for a in got or []] == [_shape(a) for a in want]
    if case.get("expectNumAllocateOne") and not allocator.first_fits:
        assert allocator.steps == case["numAllocateOne"]


def test_the_first_fit_path_answers_a_share_of_the_table() -> None:
    """The first-fit variant above is only a test of it where it answers: count those cases."""
    answered = 0
    for case in CASES:
        if "skipped" in case or case["name"] in REFUSED_WHEN_READ:
            continue
        claims, classes, slices, node = _decode(case)
        allocator = Allocator(slices, classes, _allocated(case), features=Features.named(case["features"]))
        try:
            allocator.allocate(node, claims)
        except AllocationError:
            pass
        answered += allocator.first_fits
    assert answered >= 60, answered  # (69 of the table's cases at 1.37.2)
