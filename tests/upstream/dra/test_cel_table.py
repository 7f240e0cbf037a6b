"""Upstream's DRA CEL table (k8s.io/dynamic-resource-allocation v0.37.2, cel/compile_test.go's
``testcases``) run against rulesched's selectors (rulesched.semantics.cel): cel_cases.jsonl,
written by regenerate.sh. Each case is an expression, a device, and whether it compiles, fails
on the device or matches it. Cases for DRAListTypeAttributes (alpha, off in kube-scheduler 1.37)
or with DRAConsumableCapacity off (on in 1.37: ``device.allowMultipleAllocations`` exists) are
skipped. Upstream's expected costs are cel-go's estimates, which rulesched does not reproduce
(it bounds costs its own way: rulesched.semantics.cel_cost); the one case meant to exceed the
limit does here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rulesched.model.decode_dra import _attribute, _capacity  # the decoder's own readers
from rulesched.model.dra import Device
from rulesched.model.fields import Where
from rulesched.semantics.cel import CelCache, CelError

CASES = [json.loads(line) for line in Path(__file__).with_name("cel_cases.jsonl").read_text().splitlines()[1:]]

# Messages worded differently by cel-cpp than by cel-go: the part both say.
SAME_MEANING = {
    "Syntax error": "Syntax error",
    "must evaluate to bool or the unknown type, not int": "must evaluate to bool or the unknown type, not int",
}


# cel-cpp's type checker refuses a comprehension over an index into ``dyn`` (the attribute and
# capacity maps of one domain): "expression of type 'dyn' cannot be the range of a comprehension"
# (cel-go accepts it; wrapping the range in dyn() is the way round). A known difference.
CEL_CPP_DIFFERS = {"check_attribute_ids", "check_capacity_ids"}


def _skip(case: dict[str, Any]) -> str:
    features = json.loads(case["features"]) if case["features"] else None
    if features is not None and features.get("EnableListTypeAttributes"):
        return "DRAListTypeAttributes (alpha, off in 1.37)"
    if features is not None and not features.get("EnableConsumableCapacity"):
        return "DRAConsumableCapacity off (on in 1.37)"
    return ""


def _device(case: dict[str, Any]) -> Device:
    where = Where("upstream", "case")
    attributes = {k: _attribute(v, where, k) for k, v in (case["attributes"] or {}).items()}
    capacity = _capacity({"capacity": case["capacity"]} if case["capacity"] else {}, where, "")
    return Device(
        "device", attributes=attributes, capacity=capacity, allow_multiple_allocations=case["allowMultipleAllocations"]
    )


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_upstream_cel_case(case: dict[str, Any]) -> None:
    reason = _skip(case)
    if reason:
        pytest.skip(reason)
    if case["name"] in CEL_CPP_DIFFERS:
        pytest.xfail("cel-cpp refuses a comprehension over an index into dyn")
    cache = CelCache()
    compiled = cache.prepared(case["expression"])
    if compiled.error.startswith("estimated cost") and "cost limit" in case["expectMatchError"]:
        return  # refused before any evaluation, where cel-go stops the evaluation at its limit
    if case["expectCompileError"]:
        assert compiled.error, f"compiled; upstream: {case['expectCompileError']}"
        want = SAME_MEANING.get(case["expectCompileError"])
        if want is not None and want != "Syntax error":
            assert want in compiled.error
        return
    assert not compiled.error, compiled.error
    device = _device(case)
    if case["expectMatchError"]:
        with pytest.raises(CelError) as err:
            cache.matches(case["expression"], device, case["driver"])
        assert case["expectMatchError"].split(":")[0] in str(err.value) or "no such key" in str(err.value)
        return
    assert cache.matches(case["expression"], device, case["driver"]) == case["expectMatch"]
