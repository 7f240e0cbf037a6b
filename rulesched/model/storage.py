"""Storage objects scheduling reads: PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes, and :class:`StorageState`, all of them together as one value (the volumes a pod mounts
are part of the pod: :class:`rulesched.model.objects.PodVolume`).

Values are frozen; a change is a new value (the store replaces it, :mod:`rulesched.cluster.store`).
Capacities are milli-units, like every other resource amount (:mod:`rulesched.model.quantity`).
Decoding from Kubernetes objects is in :mod:`rulesched.model.decode_storage`; Kubernetes' rules over
them (the volume plugins' checks, VolumeBinding's planner) are :mod:`rulesched.semantics.volumes`
and :mod:`rulesched.semantics.volume_binding`; the built-ins of the same names wrap them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from rulesched.model.objects import EMPTY, NodeSelectorTerm

# Annotations the scheduler and the PV controller use to talk about a claim (upstream names).
SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    storage_class: str = ""
    capacity: int = 0  # spec.capacity.storage, milli-units
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # None: any node
    claim_namespace: str = ""  # spec.claimRef: empty when the volume is not bound (or pre-bound)
    claim_name: str = ""
    claim_uid: str = ""
    phase: str = "Available"
    csi_driver: str = ""
    csi_handle: str = ""
    deleting: bool = False

    @property
    def claim_key(self) -> str:
        return f"{self.claim_namespace}/{self.claim_name}" if self.claim_name else ""


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    name: str
    namespace: str = "default"
    uid: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    storage_class: str | None = None  # None: not set (the default class applies)
    volume_name: str = ""
    access_modes: tuple[str, ...] = ()
    request: int = 0  # spec.resources.requests.storage, milli-units
    volume_mode: str = "Filesystem"
    phase: str = "Pending"
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def class_name(self) -> str:
        """GetPersistentVolumeClaimClass: the beta annotation wins over the field."""
        beta = self.annotations.get(BETA_CLASS)
        if beta is not None:
            return beta
        return self.storage_class or ""

    @property
    def bound(self) -> bool:
        """Fully bound: a volume named and the binding completed (the PV controller's mark, or
        the Bound phase a file written by hand shows)."""
        return bool(self.volume_name) and (BIND_COMPLETED in self.annotations or self.phase == "Bound")

    @property
    def selected_node(self) -> str:
        return self.annotations.get(SELECTED_NODE, "")


@dataclass(frozen=True, slots=True)
class TopologyRequirement:
    """One matchLabelExpressions entry of a StorageClass's allowedTopologies."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str = ""
    binding_mode: str = "Immediate"
    allowed_topologies: tuple[tuple[TopologyRequirement, ...], ...] = ()  # terms ORed; empty: anywhere
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class CSINode:
    """Per-driver attach limits (``spec.drivers[].allocatable.count``); drivers without one
    have no limit."""

    name: str
    limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


_NO_PVS: Mapping[str, PersistentVolume] = MappingProxyType({})
_NO_PVCS: Mapping[str, PersistentVolumeClaim] = MappingProxyType({})
_NO_CLASSES: Mapping[str, StorageClass] = MappingProxyType({})
_NO_CSINODES: Mapping[str, CSINode] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class StorageState:
    """Every storage object of the cluster at one moment: volumes by name, claims by
    ``namespace/name``, classes by name, CSINodes by node name."""

    volumes: Mapping[str, PersistentVolume] = field(default_factory=lambda: _NO_PVS)
    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=lambda: _NO_PVCS)
    classes: Mapping[str, StorageClass] = field(default_factory=lambda: _NO_CLASSES)
    csinodes: Mapping[str, CSINode] = field(default_factory=lambda: _NO_CSINODES)
    # class name -> the volumes of the class a claim could still take (not bound); kept by the
    # store so that a pod's claims need not scan every volume. None: scan ``volumes``.
    by_class: Mapping[str, Mapping[str, PersistentVolume]] | None = None
    # driver -> the lowest attach limit any CSINode gives it (kept by the store, so that
    # NodeVolumeLimits can pass nodes far from every limit without looking at their pods). None:
    # not known, look at each node.
    attach_floor: Mapping[str, int] | None = None

    def open_volumes(self, class_name: str) -> Iterable[PersistentVolume]:
        """The volumes of a class that are not bound to a claim (pre-bound ones included)."""
        if self.by_class is not None:
            found = self.by_class.get(class_name)
            return () if found is None else found.values()
        return (v for v in self.volumes.values() if v.storage_class == class_name and is_open(v))

    def claim_class(self, claim: PersistentVolumeClaim) -> str:
        """The claim's class name, the default class standing in for one not set (what the
        DefaultStorageClass admission plugin writes into claims created without one)."""
        name = claim.class_name
        if name or claim.storage_class is not None or BETA_CLASS in claim.annotations:
            return name
        defaults = sorted(c.name for c in self.classes.values() if c.is_default)
        return defaults[0] if defaults else ""


def attach_floor(csinodes: Iterable[CSINode]) -> Mapping[str, int]:
    """Per driver, the lowest attach limit among the CSINodes (StorageState.attach_floor)."""
    floor: dict[str, int] = {}
    for csinode in csinodes:
        for driver, limit in csinode.limits.items():
            if limit < floor.get(driver, limit + 1):
                floor[driver] = limit
    return MappingProxyType(floor)


def is_open(pv: PersistentVolume) -> bool:
    """Whether a claim could still take the volume: not bound (a volume pre-bound to a claim,
    its claimRef set but not yet Bound, is open to that claim)."""
    return not (pv.claim_name and pv.phase == "Bound")


EMPTY_STORAGE = StorageState()
