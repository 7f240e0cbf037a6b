"""A pod's claims allocated on a node, shared between pods asking the same, and the node's
devices as that allocation leaves them (what ``devices_after(node)`` gives the rules).

The structured allocator's answer on a node depends on what the claims ask (their specs), the
node (its Node and its devices as the store has them, a new tuple after every change to what
claims hold there) and the order the rules' device scores rank candidates in. When those scores
read only the device and the request (not the pod, not the node beyond its devices), every pod
whose claims ask the same gets the same allocation on a node whose devices have not changed:
the store's memo keeps it, with the devices after it, under (specs, node, the scores that apply)
(:meth:`rulesched.semantics.dra_pod.PodClaims.shared_key`). FGD scores every node for each of a
hundred-odd pod classes, about forty of which ask the same GPU claim: on the openb trace seven
allocations in eight are found kept. An entry holds while the node's devices tuple and its Node
are the very objects it was made from (kept alive by the entry, so never another's identity).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from rulesched.model.dra import Allocation, DeviceResult, NodeDevice

if TYPE_CHECKING:
    from rulesched.semantics.dra_pod import PodClaims

MEMO_LIMIT = 100_000  # entries of the store's memo; past it, it starts afresh


def shared_allocation(
    claims: PodClaims, node: Any, devices: object, view: Any, key: tuple[Any, ...]
) -> tuple[tuple[str, ...], list[Allocation] | None]:
    """The filter's answer with the allocation on ``node`` (reasons, allocations), from the
    store's memo when a pod asking the same had it for the node as it is; ``devices`` and
    ``view``: the node's devices and the rules' view of it; ``key``: ``claims.shared_key(node)``
    (not None: the caller has it)."""
    memo = claims.memo
    assert memo is not None
    hit = memo.get(key)
    if hit is not None and hit[0] is devices and hit[1] is node:
        found: tuple[tuple[str, ...], list[Allocation] | None] = hit[2]
        return found
    found = claims._filter(node, True, view)
    if len(memo) > MEMO_LIMIT:
        memo.clear()
    memo[key] = (devices, node, found, None)
    return found


def devices_after(claims: PodClaims, view: Any) -> tuple[NodeDevice, ...]:
    """``view.devices`` once ``claims`` are allocated on the node: the devices the allocation
    takes hold one claim more, a device taken whole has nothing free, a share consumes its
    capacity; ``view.devices`` as they are where nothing is to be allocated or it cannot be."""
    devices: tuple[NodeDevice, ...] = getattr(view, "devices", ())
    if claims.error or not devices or not claims.to_allocate:
        return devices
    node = getattr(view, "node", view)
    key = claims.shared_key(node)
    memo = claims.memo
    if key is not None and memo is not None:
        hit = memo.get(key)
        if hit is not None and hit[0] is devices and hit[1] is node and hit[3] is not None:
            after: tuple[NodeDevice, ...] = hit[3]
            return after
    after = _after_allocations(devices, claims.allocations(view).values())
    if key is not None and memo is not None:
        hit = memo.get(key)
        if hit is not None and hit[0] is devices and hit[1] is node:
            memo[key] = (*hit[:3], after)
    return after


def after_key(claims: PodClaims, view: Any, positions: Mapping[tuple[str, str, str], int]) -> Hashable | None:
    """What :func:`devices_after` gives beyond ``view.devices``, as a key: for each device the
    allocation takes (as :func:`_after_allocations` does: admin access takes nothing), its
    position among ``view.devices`` (``positions``: device id -> position), whether it is taken
    whole, and what a share consumes. Equal keys on nodes whose devices are alike but for their
    pool, devices after alike but for their pool (tests/test_alike_scores.py holds it to
    devices_after). None where a device taken is not among them."""
    devices: tuple[NodeDevice, ...] = getattr(view, "devices", ())
    if claims.error or not devices or not claims.to_allocate:
        return ()
    taken: list[tuple[int, tuple[tuple[str, int], ...] | None]] = []
    for alloc in claims.allocated(view):
        for r in alloc.devices:
            if r.admin_access:
                continue
            at = positions.get(r.device_id)
            if at is None:
                return None
            # (whole: None; a share: what it consumes, as items: equal maps in another order key
            # apart, which costs a look-up, never a wrong answer)
            taken.append(
                (at, tuple(r.consumed_capacity.items()) if r.consumed_capacity else ()) if r.share_id else (at, None)
            )
    return tuple(taken)


def _after_allocations(devices: tuple[NodeDevice, ...], allocations: Any) -> tuple[NodeDevice, ...]:
    taken: dict[tuple[str, str, str], list[DeviceResult]] = {}
    for alloc in allocations:
        for r in alloc.devices:
            if not r.admin_access:
                taken.setdefault(r.device_id, []).append(r)
    if not taken:
        return devices
    return tuple(_after(d, taken[d.id]) if d.id in taken else d for d in devices)


def _after(device: NodeDevice, results: list[DeviceResult]) -> NodeDevice:
    consumed = dict(device.consumed)
    whole = device.allocated and not device.free and bool(device.capacity)  # (held whole: stays so)
    for r in results:
        if r.share_id:
            for name, amount in (r.consumed_capacity or {}).items():
                consumed[name] = consumed.get(name, 0) + amount
        else:
            whole = True
    free = {} if whole else {name: value - consumed.get(name, 0) for name, value in device.capacity.items()}
    # (the constructor, not dataclasses.replace: a third of the cost, and this runs for every
    # allocation worked out; tests/test_shared_allocations.py holds it to replace)
    return NodeDevice(
        device.driver,
        device.pool,
        device.name,
        device.attributes,
        device.numbers,
        device.capacity,
        consumed,
        free,
        True,
        device.shared,
        device.claims + len(results),
        device.taints,
    )
