"""Consumable capacity (DRAConsumableCapacity): how much of a shareable device's capacity a request
takes, and whether it still fits (consumable_capacity.go in the structured allocator).

A device with ``allowMultipleAllocations`` can be given to many claims; each takes from every
capacity the device declares: what the request asks (``capacity.requests``), rounded up to the
capacity's ``requestPolicy`` (its valid values, or its range's min and step), or when it asks
nothing, the policy's default or else the whole capacity. Amounts are milli-units. Upstream's
integer path works in whole units (``Quantity.Value()``, rounded up) unless a range is
fractional (DRAFractionalCapacityRange), as here.
"""

from __future__ import annotations

from collections.abc import Mapping

from rulesched.model.dra import Capacity, RequestPolicy
from rulesched.model.quantity import format_quantity

MILLI = 1000
_INT64 = 2**63 - 1
_UNREPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


class CapacityError(Exception):
    """A request that cannot be represented (upstream aborts the allocation with it)."""


def _value(milli: int) -> int:
    """Quantity.Value(): whole units, rounded up."""
    return -(-milli // MILLI)


def _use_milli(policy: RequestPolicy, fractional: bool) -> bool:
    if not fractional:
        return False
    parts = [q for q in (policy.min, policy.max, policy.step) if q is not None]
    if not any(q % MILLI for q in parts):  # whole numbers: the integer path is the same
        return False
    return policy.step is None or policy.step >= 1


def _round_up_range(requested: int, policy: RequestPolicy, fractional: bool) -> int:
    assert policy.min is not None
    if requested < policy.min:
        return policy.min
    if policy.step is None:
        return requested
    if _use_milli(policy, fractional):
        step, low = policy.step, policy.min
        n = -(-(requested - low) // step)
        value = low + step * n
        if value > _INT64:
            raise CapacityError(
                f"{_UNREPRESENTABLE}: rounding request {format_quantity(requested)} up to the next step passes the milli-value range"
            )
        return value
    if requested > _INT64 * MILLI:
        raise CapacityError(f"{_UNREPRESENTABLE}: request {format_quantity(requested)} exceeds MaxInt64")
    req, step, low = _value(requested), _value(policy.step), _value(policy.min)
    if step == 0:
        return requested
    n = -(-(req - low) // step)
    if low >= 0 and low + step * n > _INT64:
        raise CapacityError(
            f"{_UNREPRESENTABLE}: rounding request {format_quantity(requested)} up to the next step passes MaxInt64"
        )
    return (low + step * n) * MILLI


def consumed(requested: int | None, capacity: Capacity, fractional: bool) -> int:
    """calculateConsumedCapacity: what a request takes from one capacity."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.has_range:
        return _round_up_range(requested, policy, fractional)
    if policy.valid_values:
        for valid in policy.valid_values:
            if requested <= valid:
                return valid
        return requested
    return requested


def _violates(value: int, policy: RequestPolicy | None, fractional: bool) -> bool:
    if policy is None:
        return False
    if policy.default is not None and value == policy.default:
        return False
    if policy.has_range:
        if policy.max is not None and value > policy.max:
            return True
        if policy.step is not None:
            assert policy.min is not None
            if _use_milli(policy, fractional):
                step, low, req = policy.step, policy.min, value
            else:
                step, low, req = _value(policy.step), _value(policy.min), _value(value)
            if step and (req - low) % step:
                return True
        return False
    if policy.valid_values:
        return value not in policy.valid_values
    return False


def fits(
    in_use: Mapping[str, int],
    requests: Mapping[str, int] | None,
    capacity: Mapping[str, Capacity],
    allocating: Mapping[str, int],
    fractional: bool,
) -> bool:
    """CmpRequestOverCapacity: whether the request (with what is ``in_use`` and what this
    allocation is ``allocating`` on the device) fits every capacity and its policy. A request
    for a capacity the device does not declare does not fit; an unrepresentable one raises."""
    if requests and any(name not in capacity for name in requests):
        return False
    taken = {}
    for name, cap in capacity.items():
        try:
            taken[name] = consumed(requests.get(name) if requests else None, cap, fractional)
        except CapacityError as err:
            raise CapacityError(f'capacity "{name}": {err}') from None
        if taken[name] < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
    for name, cap in capacity.items():
        amount = taken[name]
        if _violates(amount, cap.request_policy, fractional):
            return False
        if in_use.get(name, 0) + amount + allocating.get(name, 0) > cap.value:
            return False
    return True


def plain_fits(
    in_use: Mapping[str, int], requests: Mapping[str, int] | None, capacity: Mapping[str, Capacity]
) -> bool | None:
    """:func:`fits` for a device none of whose capacities has a request policy (the common case:
    what a request takes is what it asks, or the whole capacity), with nothing else being
    allocated on it; None where that does not hold or :func:`fits` would raise (ask it)."""
    if requests:
        for name in requests:  # (a loop, not any(): asked of every device a first fit tries)
            if name not in capacity:
                return False
    ok = True
    for name, cap in capacity.items():
        if cap.request_policy is not None:
            return None
        amount = requests.get(name) if requests else None
        if amount is None:
            amount = cap.value
        if amount < 0:
            return None
        if in_use.get(name, 0) + amount > cap.value:
            ok = False
    return ok


def consumed_all(
    requests: Mapping[str, int] | None, capacity: Mapping[str, Capacity], fractional: bool
) -> dict[str, int]:
    """GetConsumedCapacityFromRequest: what the request takes from each of the device's capacities."""
    return {name: consumed(requests.get(name) if requests else None, cap, fractional) for name, cap in capacity.items()}
