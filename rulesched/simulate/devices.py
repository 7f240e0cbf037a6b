"""The DRA devices after a simulation, as every report shows them: per driver and model (or
another device attribute), how many devices, how many held whole or to the last unit, how many
in part, how much of each capacity is allocated, and how much free capacity is fragmented.

Fragmentation is :mod:`rulesched.semantics.fragmentation`'s (the FGD paper's measure) against the
input's own pods: their shapes (cpu and device requests) make the target workload, the commonest
covering 95% of them. A driver's devices are counted in the capacity they all have when there is
exactly one such (GPU ``milli`` in the openb trace), else in devices (a device free or not); a
total over drivers of different units leaves those figures out. Only a cluster with DRA devices
has this section. Next stage: :mod:`rulesched.simulate.report` renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.dra import ClaimSpec, Device, DraState, NodeDevice
from rulesched.semantics.cel import CelCache, CelError
from rulesched.semantics.fragmentation import Ask, Shape, Slot, mix, node_fragmentation, stranded

GROUP_BY = "model"  # the device attribute devices are grouped by, by default
DEVICES = "devices"  # the unit of a driver whose devices share no one capacity: the device itself
MIXED = ""  # the measure of a total over drivers of different units


@dataclass
class DeviceGroup:
    """One row: the devices of one driver with one value of the grouping attribute."""

    driver: str
    value: str  # "-": the devices have no such attribute
    measure: str = DEVICES  # the unit free, fragmented and stranded are in (the driver's)
    devices: int = 0
    full: int = 0  # held whole, or with none of any capacity left
    partly: int = 0  # held in part: some capacity left
    capacity: dict[str, list[int]] = field(default_factory=dict)  # name -> [allocated, total]
    fragmented: float = 0.0  # in the measure (a capacity: milli-units)
    stranded: int = 0
    free: int = 0

    @property
    def scale(self) -> int:
        return 1 if self.measure == DEVICES else 1000

    def add(self, other: DeviceGroup) -> None:
        self.devices += other.devices
        self.full += other.full
        self.partly += other.partly
        for name, (a, t) in other.capacity.items():
            row = self.capacity.setdefault(name, [0, 0])
            row[0] += a
            row[1] += t
        self.fragmented += other.fragmented
        self.stranded += other.stranded
        self.free += other.free

    def json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "driver": self.driver,
            "value": self.value,
            "devices": self.devices,
            "allocated": self.full,
            "partly_allocated": self.partly,
            "capacity": {n: {"allocated": _q(a), "total": _q(t)} for n, (a, t) in sorted(self.capacity.items())},
        }
        if self.measure != MIXED:
            out["measure"] = self.measure
            out["free"] = _q(self.free, self.scale)
            out["fragmented"] = round(self.fragmented / self.scale, 1)
            out["stranded"] = _q(self.stranded, self.scale)
        return out


@dataclass(frozen=True)
class DeviceReport:
    group_by: str
    groups: tuple[DeviceGroup, ...]
    shapes: int  # the target workload: this many shapes
    pods: int  # of this many pods

    @property
    def measure(self) -> str:
        """The one unit of every group (MIXED: drivers of different units)."""
        units = {g.measure for g in self.groups}
        return units.pop() if len(units) == 1 else MIXED

    @property
    def total(self) -> DeviceGroup:
        """Every group summed (free, fragmented and stranded only when they share a unit)."""
        out = DeviceGroup("", "total", self.measure)
        for g in self.groups:
            out.add(g)
        return out

    def by_measure(self) -> dict[str, DeviceGroup]:
        """The groups summed per unit."""
        out: dict[str, DeviceGroup] = {}
        for g in self.groups:
            out.setdefault(g.measure, DeviceGroup("", "total", g.measure)).add(g)
        return out

    def json(self) -> dict[str, object]:
        return {
            "group_by": self.group_by,
            "measure": self.measure or None,
            "target_workload": {"shapes": self.shapes, "pods": self.pods},
            "groups": [g.json() for g in self.groups],
            "total": self.total.json(),
        }


def _q(milli: int, scale: int = 1000) -> int | float:
    """A milli-unit quantity as its value (a whole number when it is one)."""
    return milli // scale if milli % scale == 0 else round(milli / scale, 3)


def device_report(state: ClusterStore, pods: Iterable[Pod], group_by: str = GROUP_BY) -> DeviceReport | None:
    """The devices section of a simulation's report (None: the cluster has no DRA devices).
    ``pods``: the input's pods beside those the cluster holds (the target workload's source)."""
    nodes = state.snapshot().nodes
    if not any(info.devices for info in nodes):
        return None
    dra = state.dra.state
    units = _units(d for info in nodes for d in info.devices)
    everyone = {p.key: p for p in state.pods()}
    everyone.update((p.key, p) for p in pods)
    asks: dict[tuple[int, ...], tuple[Ask, ...]] = {}  # (the pods of one template ask alike)
    target = mix(_shape(p, dra, asks) for p in everyone.values())
    models = {(s.driver, s.pool, d.name): d for s in dra.slices.values() for d in s.devices}
    accepts = _Accepts(models, target)
    groups: dict[tuple[str, str], DeviceGroup] = {}
    seen: set[tuple[str, str, str]] = set()  # a device shared by several nodes counts once
    # (nodes alike, the same free cpu and devices of the same kinds equally free, have the same
    # figures: worked out once, ~0.4 CPU s less on the openb trace's 1,213 nodes)
    figures: dict[tuple[object, ...], tuple[list[float], list[int]]] = {}
    for info in nodes:
        devices = info.devices
        if not devices:
            continue
        slots = tuple(_slot(d, units[d.driver]) for d in devices)
        cpu_free = info.free.get("cpu", 0)
        kinds = tuple(accepts.kind(d) for d in devices)
        alike = (cpu_free, slots, kinds)
        found = figures.get(alike)
        if found is None:
            tables = accepts.tables(kinds)
            found = figures[alike] = (
                node_fragmentation(target, cpu_free, slots, tables),
                stranded(target, cpu_free, slots, tables),
            )
        frag, lost = found
        for d, slot, f, s in zip(devices, slots, frag, lost, strict=True):
            if d.id in seen:
                continue
            seen.add(d.id)
            key = (d.driver, d.attributes.get(group_by, "-"))
            g = groups.get(key) or groups.setdefault(key, DeviceGroup(*key, slot.unit or DEVICES))
            _count(g, d)
            g.fragmented += f
            g.stranded += s
            g.free += slot.free
    return DeviceReport(group_by, tuple(groups[k] for k in sorted(groups)), len(target), len(everyone))


def _units(devices: Iterable[NodeDevice]) -> dict[str, str]:
    """Per driver, the one capacity all its devices have ("": none or several: counted as devices)."""
    names: dict[str, set[str]] = {}
    for d in devices:
        found = names.get(d.driver)
        names[d.driver] = set(d.capacity) if found is None else found & set(d.capacity)
    return {driver: next(iter(n)) if len(n) == 1 else "" for driver, n in names.items()}


def _slot(d: NodeDevice, unit: str) -> Slot:
    if not unit:
        return Slot(0 if d.allocated else 1, 1)
    return Slot(d.free.get(unit, 0), d.capacity[unit], unit)


def _count(g: DeviceGroup, d: NodeDevice) -> None:
    g.devices += 1
    whole = d.allocated and not d.free  # NodeDevice.free is empty for a device held whole
    if whole or (d.allocated and d.free and not any(d.free.values())):
        g.full += 1
    elif d.allocated:
        g.partly += 1
    for name, total in d.capacity.items():
        row = g.capacity.setdefault(name, [0, 0])
        row[0] += total if whole else d.consumed.get(name, 0)
        row[1] += total


def _specs(pod: Pod, dra: DraState) -> list[ClaimSpec]:
    """The specs of the pod's claims: its templates', or its claims'."""
    out = []
    for entry in pod.resource_claims:
        spec = None
        if entry.template_name:
            template = dra.templates.get(f"{pod.namespace}/{entry.template_name}")
            spec = template.spec if template is not None else None
        if spec is None and entry.claim:
            claim = dra.claims.get(f"{pod.namespace}/{entry.claim}")
            spec = claim.spec if claim is not None else None
        if spec is not None:
            out.append(spec)
    return out


def _shape(pod: Pod, dra: DraState, known: dict[tuple[int, ...], tuple[Ask, ...]]) -> Shape:
    """The pod's shape; ``known``: the asks worked out so far, by their specs' identities (the
    pods of one template share its spec; every spec lives in ``dra`` as long as ``known``)."""
    specs = _specs(pod, dra)
    key = tuple(map(id, specs))
    found = known.get(key)
    if found is None:
        asks = []
        for spec in specs:
            for request in spec.requests:
                # a prioritized list: its first choice stands for it
                r = request.exactly or (request.first_available[0][1] if request.first_available else None)
                if r is None or r.admin_access:
                    continue
                cls = dra.classes.get(r.device_class_name)
                selectors = (*(cls.selectors if cls is not None else ("false",)), *r.selectors)
                capacity = tuple(sorted((r.capacity or {}).items()))
                asks.append(Ask(0 if r.allocation_mode == "All" else r.count, capacity, selectors))
        found = known[key] = tuple(sorted(asks))
    return Shape(pod.requests.get("cpu", 0), found)


class _Accepts:
    """Which devices each request of each shape may have: the selectors, evaluated once per
    (selectors, device kind); a device's kind is its driver, attributes and capacity, all the
    selectors read."""

    def __init__(self, models: Mapping[tuple[str, str, str], Device], target: Sequence[tuple[float, Shape]]):
        self.models = models
        self.target = target
        self.cel = CelCache()
        self.verdicts: dict[tuple[object, ...], bool] = {}
        self.kinds: dict[tuple[str, str, str], tuple[object, ...]] = {}  # device id -> its kind
        self.first: dict[tuple[object, ...], Device | None] = {}  # a kind -> its first device's model
        self.of_kinds: dict[tuple[object, ...], list[list[list[bool]]]] = {}  # a node's kinds -> its tables

    def kind(self, d: NodeDevice) -> tuple[object, ...]:
        found = self.kinds.get(d.id)
        if found is None:
            found = self.kinds[d.id] = (
                d.driver,
                tuple(sorted(d.attributes.items())),
                tuple(sorted(d.capacity.items())),
            )
            self.first.setdefault(found, self.models.get(d.id))
        return found

    def tables(self, kinds: tuple[tuple[object, ...], ...]) -> list[list[list[bool]]]:
        """Per shape of the target, per request, per device of a node whose devices are of
        ``kinds``: whether the request may have the device (:func:`fits`' ``accepts``)."""
        found = self.of_kinds.get(kinds)
        if found is None:
            found = self.of_kinds[kinds] = [
                [[self._one(ask.selectors, kind) for kind in kinds] for ask in shape.asks] for _, shape in self.target
            ]
        return found

    def _one(self, selectors: tuple[str, ...], kind: tuple[object, ...]) -> bool:
        key = (selectors, kind)
        found = self.verdicts.get(key)
        if found is None:
            model = self.first[kind]
            try:
                found = model is not None and all(self.cel.matches(s, model, str(kind[0])) for s in selectors)
            except CelError:
                found = False
            self.verdicts[key] = found
        return found
