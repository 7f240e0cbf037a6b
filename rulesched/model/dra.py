"""Dynamic Resource Allocation's objects (``resource.k8s.io/v1``) as frozen values: DeviceClasses,
ResourceClaims and their templates, ResourceSlices with their pools, devices, shared counters
and taints, and :class:`DraState`, all of them together at one moment.

Field names follow the API in snake_case; quantities are milli-units (:mod:`rulesched.model.quantity`).
Decoding from Kubernetes objects is :mod:`rulesched.model.decode_dra`; the allocator that reads
them is :mod:`rulesched.semantics.dra` (upstream's ``k8s.io/dynamic-resource-allocation/structured``).
A claim's allocation is part of the claim (``status.allocation``): allocating one in memory (the
scheduler's Reserve) is a new claim value in the store (:mod:`rulesched.cluster.dra`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rulesched.model.objects import EMPTY, NodeSelectorTerm
from rulesched.model.objects import PodClaim as PodClaim  # (defined beside the pod it belongs to)

# Upstream's limits and names (k8s.io/api/resource/v1).
ALLOCATION_RESULTS_MAX = 32  # AllocationResultsMaxSize: devices in one claim's allocation
FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize: subrequests of one request
SELECTOR_MAX_COST = 1_000_000  # CELSelectorExpressionMaxCost
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
EXACT_COUNT, ALL = "ExactCount", "All"

NO_ATTRIBUTES: Mapping[str, Attribute] = MappingProxyType({})
NO_CAPACITY: Mapping[str, Capacity] = MappingProxyType({})
NO_AMOUNTS: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Attribute:
    """One device attribute: ``kind`` is ``int``, ``bool``, ``string`` or ``version`` (a
    semantic version string), or the list kinds of DRAListTypeAttributes (``ints``, ``bools``,
    ``strings``, ``versions``, whose ``value`` is a tuple)."""

    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    """A capacity's requestPolicy (consumable capacity): the value a request without one takes,
    and either the valid values (ascending) or a range (min, optional max and step)."""

    default: int | None = None
    valid_values: tuple[int, ...] = ()
    min: int | None = None
    max: int | None = None
    step: int | None = None

    @property
    def has_range(self) -> bool:
        return self.min is not None


@dataclass(frozen=True, slots=True)
class Capacity:
    value: int
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | NoExecute | None


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """A DeviceTaintRule: its taint applies to the devices its selector picks (``driver``,
    ``pool``, ``device``: each None matches any); without a selector (``selects`` false) it
    applies to none."""

    name: str
    taint: DeviceTaint
    selects: bool = True
    driver: str | None = None
    pool: str | None = None
    device: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" tolerates every effect
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, int]  # counter name -> amount consumed


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, int]  # counter name -> amount available


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    attributes: Mapping[str, Attribute] = field(default_factory=lambda: NO_ATTRIBUTES)
    capacity: Mapping[str, Capacity] = field(default_factory=lambda: NO_CAPACITY)
    consumes_counters: tuple[CounterConsumption, ...] = ()
    # per-device node selection (the slice's perDeviceNodeSelection): exactly one of these
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None
    # alpha fields kube-scheduler 1.37 leaves off by default (DRADeviceCompatibilityGroups):
    # a device naming compatibility groups makes its slice ignored, as with the gate off
    compatibility_groups: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """One slice of a pool. Node selection is one of ``node_name``, ``node_selector`` (one
    term), ``all_nodes`` or ``per_device_node_selection``; a slice with ``shared_counters``
    holds no devices."""

    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    # DRAOptionalNodeOperations (alpha, off): devices of such a slice are never allocated
    skip_node_operations: tuple[str, ...] = ()

    @property
    def pool_id(self) -> tuple[str, str]:
        return (self.driver, self.pool)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions
    config: tuple[Mapping[str, Any], ...] = ()  # opaque driver configurations, as the API has them
    extended_resource_name: str = ""
    created: float = 0.0  # metadata.creationTimestamp (seconds): the newer class serves a shared name


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """An ExactDeviceRequest, or a DeviceSubRequest of a firstAvailable list (no admin access)."""

    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: Mapping[str, int] | None = None  # capacity.requests; None: none asked
    derived_attributes: bool = False  # DRADerivedAttributes (alpha, off): such a request fails


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A claim's request: ``exactly`` one kind of device, or the first of ``first_available``
    (named subrequests) that can be allocated."""

    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[tuple[str, ExactRequest], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()  # empty: every request of the claim
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    """A claim's opaque configuration for some of its requests (empty: all)."""

    requests: tuple[str, ...]
    config: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[ClaimConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device (a DeviceRequestAllocationResult)."""

    request: str  # the request, or "request/subrequest"
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    share_id: str = ""
    consumed_capacity: Mapping[str, int] | None = None
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()

    @property
    def device_id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class AllocationConfig:
    source: str  # FromClass | FromClaim
    requests: tuple[str, ...]
    config: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Allocation:
    """A claim's ``status.allocation``: the devices, their configurations and the nodes they
    can be used on (None: every node)."""

    devices: tuple[DeviceResult, ...] = ()
    config: tuple[AllocationConfig, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    """A ``status.reservedFor`` entry: the pod (or other object) using the claim."""

    resource: str
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str = "default"
    uid: str = ""
    resource_version: str = ""
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    owner: tuple[str, str, str] | None = None  # the controller: (kind, name, uid)
    finalizers: tuple[str, ...] = ()
    spec: ClaimSpec = ClaimSpec()
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    name: str
    namespace: str = "default"
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    spec: ClaimSpec = ClaimSpec()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


_NO_CLASSES: Mapping[str, DeviceClass] = MappingProxyType({})
_NO_CLAIMS: Mapping[str, ResourceClaim] = MappingProxyType({})
_NO_TEMPLATES: Mapping[str, ResourceClaimTemplate] = MappingProxyType({})
_NO_SLICES: Mapping[str, ResourceSlice] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class DraState:
    """Every DRA object of the cluster at one moment: classes and slices by name, claims and
    templates by ``namespace/name``."""

    classes: Mapping[str, DeviceClass] = field(default_factory=lambda: _NO_CLASSES)
    claims: Mapping[str, ResourceClaim] = field(default_factory=lambda: _NO_CLAIMS)
    templates: Mapping[str, ResourceClaimTemplate] = field(default_factory=lambda: _NO_TEMPLATES)
    slices: Mapping[str, ResourceSlice] = field(default_factory=lambda: _NO_SLICES)
    # False where another scheduler allocates the devices (the extender, which watches only
    # DeviceClasses: kube-scheduler's DynamicResources filter ran before it was asked). Filter
    # then checks only what a device plugin serves of the DRA-backed extended resources.
    allocates: bool = True

    @property
    def empty(self) -> bool:
        return not (self.classes or self.claims or self.templates or self.slices)


EMPTY_DRA = DraState()


@dataclass(frozen=True, slots=True)
class NodeDevice:
    """A device a node reaches, as rules see it (``node.devices``): where it is, its attributes
    (``attributes``: every one as text, by its name and, for the driver's own, ``driver/name``
    too; ``numbers``: the integer ones), its capacity, and what claims hold of it now."""

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, str]
    numbers: Mapping[str, int]
    capacity: Mapping[str, int]
    consumed: Mapping[str, int]  # by shares (consumable capacity)
    free: Mapping[str, int]  # capacity less consumed; nothing of a device allocated whole
    allocated: bool  # held by some claim, whole or in part
    shared: bool  # allowMultipleAllocations
    claims: int  # allocations holding it
    taints: tuple[DeviceTaint, ...] = ()

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)
