"""Pods, nodes and the parts of them scheduling looks at, as frozen values.

Field names follow the Kubernetes API in snake_case. Absent optional fields take an empty value
(``""``, ``()``, an empty mapping) rather than ``None`` wherever the API itself treats "absent" and
"empty" alike, so that later stages need no ``None`` checks. Resource amounts are milli-units
(see :mod:`rulesched.model.quantity`).

``Pod`` and ``Node`` compare by identity: a changed object is a new value, and caches key on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

EMPTY: Mapping[str, str] = MappingProxyType({})
EMPTY_RESOURCES: Mapping[str, int] = MappingProxyType({})

# The pod condition a scheduler sets on the pods it preempts (kube-scheduler's prepareCandidate),
# with this reason; the Eviction API then rewrites it (reason EvictionByEvictionAPI) for the victims
# rulesched evicts (those a budget selects), so rulesched also sets a condition of its own, which
# no eviction touches, to know its victims by.
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
PREEMPTED_CONDITION = "rulesched.io/PreemptedByScheduler"
# spec.unhealthyPodEvictionPolicy of a PodDisruptionBudget (policy/v1)
IF_HEALTHY_BUDGET, ALWAYS_ALLOW = "IfHealthyBudget", "AlwaysAllow"
UNHEALTHY_POD_EVICTION_POLICIES = (IF_HEALTHY_BUDGET, ALWAYS_ALLOW)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = ""  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # "" matches every effect
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metav1.LabelSelector. ``None`` (where a field holds one) selects nothing; an empty
    selector selects everything, as in the API."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(frozen=True, slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule | ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"
    match_label_keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerPort:
    host_port: int
    protocol: str = "TCP"
    host_ip: str = "0.0.0.0"


@dataclass(frozen=True, slots=True)
class PodVolume:
    """One entry of ``spec.volumes`` that scheduling cares about. ``claim`` names the claim of a
    ``persistentVolumeClaim`` volume or of a generic ephemeral one (``<pod>-<volume>``, made by
    the ephemeral volume controller). ``disk`` identifies an inline disk two pods on one node
    may not share (VolumeRestrictions): ``("gce", pdName)``, ``("aws", volumeID)``,
    ``("iscsi", iqn)`` or ``("rbd", pool, image)`` with the Ceph ``monitors``."""

    name: str
    claim: str = ""
    ephemeral: bool = False
    disk: tuple[str, ...] = ()
    read_only: bool = False
    monitors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry: it names a ResourceClaim or a template (the claim made
    from a template is in the pod's ``status.resourceClaimStatuses``: ``generated``). While rules
    are bound to the pod, ``spec`` (a :class:`rulesched.model.dra.ClaimSpec`) and ``allocated``
    are the claim's as the cluster has it (:func:`rulesched.semantics.dra_pod.with_claims`)."""

    name: str
    claim_name: str = ""
    template_name: str = ""
    generated: str | None = None  # the claim made from the template; None: not made yet
    spec: Any = None  # the claim's ClaimSpec, when bound to a cluster (rules' pod.resource_claims)
    allocated: bool = False

    @property
    def claim(self) -> str:
        """The name of the claim this entry uses ("" while a template's is not made)."""
        return self.claim_name or self.generated or ""


@dataclass(frozen=True, slots=True)
class ContainerExtended:
    """A container asking for extended resources, as DRA-backed extended resources (KEP-5004)
    read it: its index among init containers then containers, its name, whether it is a plain
    init container (not a sidecar), the names of all its requests (sorted: a request's index
    among them names the device request made for it) and the whole units of each extended
    resource it asks for."""

    index: int
    name: str
    short_lived: bool
    names: tuple[str, ...]
    extended: Mapping[str, int]


@dataclass(frozen=True, slots=True, eq=False)
class Pod:
    name: str
    namespace: str = "default"
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    priority: int = 0
    preemption_policy: str = "PreemptLowerPriority"
    scheduler_name: str = "default-scheduler"
    node_name: str = ""  # spec.nodeName: set on running pods and on pods that ask for a node
    nominated_node_name: str = ""
    phase: str = "Pending"
    # resources, per resource name, in milli-units (see rulesched.model.quantity)
    requests: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    # requests with kube-scheduler's non-zero defaults (100m cpu, 200Mi memory) for scoring
    nonzero_requests: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # None: no requirement
    preferred_node_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    host_ports: tuple[ContainerPort, ...] = ()
    images: tuple[str, ...] = ()
    creation_timestamp: float = 0.0  # seconds since the epoch
    start_time: float = 0.0
    deleting: bool = False
    # a scheduler preempted it: condition DisruptionTarget=True with reason PreemptionByScheduler,
    # or rulesched's own PREEMPTED_CONDITION=True (kept when an eviction rewrites DisruptionTarget)
    preempted_by_scheduler: bool = False
    ready: bool = False  # condition Ready=True (podutil.IsPodReady): what the Eviction API calls healthy
    # spec.resourceClaims (Dynamic Resource Allocation), with the claims made from templates
    resource_claims: tuple[PodClaim, ...] = ()
    # the containers asking for extended resources, which a DeviceClass may serve (KEP-5004),
    # and status.extendedResourceClaimStatus.resourceClaimName (the claim made for them)
    extended_requests: tuple[ContainerExtended, ...] = ()
    extended_claim: str = ""
    # while rules are bound to it: the extended resources a DeviceClass serves, taken out of
    # ``requests`` (whole units; rulesched.semantics.dra_extended.extended_view)
    extended_dra: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    owner: str = ""  # "Kind/name" of the controlling owner, if any
    scheduling_gates: tuple[str, ...] = ()  # spec.schedulingGates names: not scheduled while any
    # spec.volumes that scheduling reads (claims, inline disks)
    volumes: tuple[PodVolume, ...] = ()
    # spec.schedulingGroup.podGroupName: the workload API's PodGroup it belongs to (rulesched.model.groups)
    scheduling_group: str = ""
    # the node features it needs (NodeDeclaredFeatures: component-helpers' InferForPodScheduling)
    required_features: tuple[str, ...] = ()
    # (min_count, members) of its group, set for a group attempt (rulesched.scheduler.gang): rules read group.*
    gang: tuple[int, int] = (0, 0)
    # the topology domain a group attempt tries (label key -> value; rulesched.scheduler.workloads):
    # rules read it as group.domain
    domain: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    # metadata.resourceVersion: part of the identity of an event about the pod (rulesched.run.event_series)
    resource_version: str = ""
    # metadata.generation: the observedGeneration of the conditions a scheduler writes on it (1.37,
    # PodObservedGenerationTracking: CalculatePodConditionObservedGeneration)
    generation: int = 0

    @property
    def claims(self) -> tuple[str, ...]:
        """The names of the claims the pod mounts (generic ephemeral volumes' included)."""
        if not self.volumes:  # most pods: read for every pod's class key, keep it cheap
            return ()
        return tuple(v.claim for v in self.volumes if v.claim)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def running(self) -> bool:
        return bool(self.node_name) and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    allocatable: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    capacity: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    # image name (every name the image is known by) -> size in bytes
    images: Mapping[str, int] = field(default_factory=lambda: EMPTY_RESOURCES)
    uid: str = ""
    resource_version: str = ""
    # status.declaredFeatures (NodeDeclaredFeatures, GA in 1.37): the gated features the kubelet has
    declared_features: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    name: str
    namespace: str
    selector: LabelSelector | None
    disruptions_allowed: int
    # The spec, for a budget whose status is not known yet (a file written by hand, a dump taken
    # before the disruption controller ran): disruptions_allowed is then computed from the pods.
    min_available: int | str | None = None  # a count or "N%"
    max_unavailable: int | str | None = None
    status_known: bool = True
    # What the Eviction API reads besides disruptions_allowed (v1.37.2 eviction.go): the pods
    # whose eviction it let through and the controller has not seen go yet (status.disruptedPods,
    # names; the scheduler's victim choice does not count them down again either), the policy for
    # pods not Ready (spec.unhealthyPodEvictionPolicy), status.currentHealthy and desiredHealthy,
    # and whether the controller has not yet seen the spec (status.observedGeneration behind
    # metadata.generation: every eviction refused until it has)
    disrupted_pods: frozenset[str] = frozenset()
    unhealthy_pod_eviction_policy: str = "IfHealthyBudget"
    current_healthy: int = 0
    desired_healthy: int = 0
    generation_behind: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY)
