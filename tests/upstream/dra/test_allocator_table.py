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

from rulesched.model.decode import decode_node
from rulesched.model.decode_dra import allocation, decode_device_class, decode_resource_claim, decode_resource_slice
from rulesched.model.dra import Allocation
from rulesched.model.fields import Where
from rulesched.model.quantity import parse_quantity
from rulesched.semantics.dra import AllocatedState, AllocationError, Allocator
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


def _expected(raw: dict[str, Any]) -> Allocation:
    return allocation(raw, Where("upstream", "AllocationResult"), "")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_upstream_allocator_case(case: dict[str, Any]) -> None:
    if "skipped" in case:
        pytest.skip(f"needs alpha feature(s) off in kube-scheduler 1.37: {', '.join(case['skipped'])}")
    assert case["upstreamPassed"], "upstream's own assertions failed for this case"
    claims = [decode_resource_claim(c, "upstream", names=False) for c in case["claims"] or []]
    classes = {c.name: c for c in (decode_device_class(c, "upstream", names=False) for c in case["classes"] or [])}
    slices = [decode_resource_slice(s, "upstream", names=False) for s in case["slices"] or []]
    node = decode_node(case["node"], "upstream", names=False)
    allocator = Allocator(
        slices, classes, _allocated(case), features=Features.named(case["features"]), share_id=lambda: SHARE_ID
    )
    try:
        got = allocator.allocate(node, claims)
        error = None
    except AllocationError as err:
        got, error = None, err
    if case["error"] is not None:
        assert error is not None, f"upstream failed with {case['error']!r}; rulesched allocated {got}"
        assert error.on_node == case["failedOnNode"]
        assert str(error).replace(" default/", " ") == case["error"]
        return
    assert error is None, f"rulesched failed with {error}; upstream allocated"
    want = [_expected(r) for r in case["results"] or []]
    assert [_shape(a) for a in got or []] == [_shape(a) for a in want]
    if case.get("expectNumAllocateOne"):
        assert allocator.steps == case["numAllocateOne"]
