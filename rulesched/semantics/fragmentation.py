"""Device fragmentation against a target workload: the measure of the FGD paper (Weng et al.,
"Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent",
USENIX ATC 2023, §3; its simulator's ``pkg/utils/frag.go``), on DRA devices.

The target workload is a *mix*: pod shapes with their shares. A shape is what a pod asks that
fragmentation looks at: its cpu and its device requests (devices each, and how much capacity
per device, or the device whole). Memory is not part of it, as in the paper. Each device is
measured in one unit (a capacity such as GPU ``milli``, or the device itself), and its free
amount is what is counted, in its unit.
For one shape ``m`` and one node, the free capacity ``m`` cannot use is fragmented:

- all of the node's free capacity when ``m`` asks no device, or does not fit the node (too little
  cpu, or fewer usable devices than one of its requests counts);
- else the free capacity of the devices no request of ``m`` could take (too little free, or the
  request's selectors refuse the device).

A node's fragmentation is the sum over the mix of ``share(m) x`` that; the cluster's, the sum over
nodes. ``stranded`` is the plainer figure: all the free capacity of a node no shape asking
devices fits. Requests of one shape are checked apart (as the paper's one-request pods are).

Everything here is pure: values in, values out. :mod:`rulesched.simulate.devices` builds them
from a cluster; ``benchmarks/fgd_reference.py`` is the same measure over the trace's own records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

POPULARITY = 0.95  # the paper's target workload: the commonest shapes covering 95% of the pods


@dataclass(frozen=True, order=True)
class Ask:
    """One device request of a shape: ``count`` devices (0: allocationMode All, every device
    its selectors accept), each with ``capacity`` free (by capacity name; a device measured in a
    capacity the request does not name is taken whole: nothing of it may be held)."""

    count: int
    capacity: tuple[tuple[str, int], ...] = ()
    selectors: tuple[str, ...] = ()  # the class's and the request's, to tell shapes apart

    def amount(self, unit: str) -> int | None:
        """What it asks of a device measured in ``unit`` (None: the device whole)."""
        for name, value in self.capacity:
            if name == unit:
                return value
        return None


@dataclass(frozen=True, order=True)
class Shape:
    cpu: int
    asks: tuple[Ask, ...] = ()


@dataclass(frozen=True)
class Slot:
    """One device as fragmentation sees it: its free and total capacity in ``unit`` (a capacity
    name; "": the device itself, 1 when nothing holds it, else 0)."""

    free: int
    total: int
    unit: str = ""


def mix(shapes: Iterable[Shape], popularity: float = POPULARITY) -> list[tuple[float, Shape]]:
    """The target workload of a list of pods' shapes (``utils.GetTypicalPods``): the shapes by
    decreasing count (equal counts: the larger shape first), taken until they cover
    ``popularity`` of the pods, each with its share of those covered."""
    counts: dict[Shape, int] = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], _rank(kv[0])), reverse=True)
    total = sum(counts.values())
    taken: list[tuple[Shape, int]] = []
    covered = 0
    for shape, count in ranked:
        if covered >= popularity * total:
            break
        taken.append((shape, count))
        covered += count
    return [(count / covered, shape) for shape, count in taken]


def _rank(shape: Shape) -> tuple[object, ...]:
    # the paper's tie order: cpu, then milli per GPU, then GPUs, then models
    return (shape.cpu, tuple((a.capacity, a.count, a.selectors) for a in shape.asks))


def usable(ask: Ask, slot: Slot) -> bool:
    amount = ask.amount(slot.unit) if slot.unit else None
    if amount is None:
        return slot.total > 0 and slot.free == slot.total
    return slot.free >= amount and slot.free > 0


def fits(shape: Shape, cpu_free: int, slots: Sequence[Slot], accepts: Sequence[Sequence[bool]] | None = None) -> bool:
    """Whether ``shape`` fits a node with ``cpu_free`` and these devices (``accepts[r][d]``:
    request ``r`` may have device ``d``; None: every request may have every device)."""
    if cpu_free < shape.cpu:
        return False
    for r, ask in enumerate(shape.asks):
        ok = [accepts is None or accepts[r][d] for d in range(len(slots))]
        can = sum(1 for d, slot in enumerate(slots) if ok[d] and usable(ask, slot))
        if ask.count == 0:  # All: every accepted device, and at least one
            if not any(ok) or can < sum(ok):
                return False
        elif can < ask.count:
            return False
    return True


def fragmented(
    shape: Shape, cpu_free: int, slots: Sequence[Slot], accepts: Sequence[Sequence[bool]] | None = None
) -> list[int]:
    """Per device, the free capacity ``shape`` leaves unusable on this node."""
    if not shape.asks or not fits(shape, cpu_free, slots, accepts):
        return [slot.free for slot in slots]
    return [
        0
        if any((accepts is None or accepts[r][d]) and usable(ask, slot) for r, ask in enumerate(shape.asks))
        else slot.free
        for d, slot in enumerate(slots)
    ]


def node_fragmentation(
    target: Sequence[tuple[float, Shape]],
    cpu_free: int,
    slots: Sequence[Slot],
    accepts: Sequence[Sequence[Sequence[bool]] | None] | None = None,
) -> list[float]:
    """Per device, its expected fragmentation against the mix ``target`` (``accepts[i]``: shape
    ``i``'s requests against the devices, as :func:`fits` reads it)."""
    out = [0.0] * len(slots)
    if not any(slot.free for slot in slots):
        return out
    for i, (share, shape) in enumerate(target):
        for d, amount in enumerate(fragmented(shape, cpu_free, slots, accepts[i] if accepts is not None else None)):
            out[d] += share * amount
    return out


def stranded(
    target: Sequence[tuple[float, Shape]],
    cpu_free: int,
    slots: Sequence[Slot],
    accepts: Sequence[Sequence[Sequence[bool]] | None] | None = None,
) -> list[int]:
    """Per device, its free capacity when no shape of ``target`` that asks devices fits the node."""
    for i, (_, shape) in enumerate(target):
        if shape.asks and fits(shape, cpu_free, slots, accepts[i] if accepts is not None else None):
            return [0] * len(slots)
    return [slot.free for slot in slots]
