"""What rules can read: the record types (pod, node, taint, ...) and their fields.

Each field has a type and a getter that reads it from the run-time object. Pods are
:class:`rulesched.model.Pod` values; a rule's ``node`` is any object with the attributes of
:class:`NodeView` — the scheduler's snapshot supplies it (this package never imports it).
Names of the predeclared variables per rule kind are here too.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rulesched.lang.types import (
    BOOL,
    DURATION,
    NUMBER,
    RESOURCES,
    STRING,
    ListOf,
    MapOf,
    Record,
    TableRow,
    Type,
    zero,
)
from rulesched.model import (
    ContainerPort,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from rulesched.model.dra import DeviceRequest, ExactRequest, NodeDevice
from rulesched.model.objects import EMPTY, EMPTY_RESOURCES, PodClaim


class NodeView(Protocol):
    """A node as rules see it: the Node object's fields plus what its pods add up to.

    ``generation`` moves whenever the node or its pods change (a view that never changes may keep
    one): the engine's per-node caches hold an answer while the view is the same object at the
    same generation (:class:`rulesched.lang.evaluation.stages.NodeMemos`, the bound rules'
    per-node outcomes). The view itself keeps none of them.
    """

    @property
    def generation(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def labels(self) -> Mapping[str, str]: ...

    @property
    def annotations(self) -> Mapping[str, str]: ...

    @property
    def allocatable(self) -> Mapping[str, int]: ...

    @property
    def capacity(self) -> Mapping[str, int]: ...

    @property
    def requested(self) -> Mapping[str, int]: ...

    @property
    def nonzero_requested(self) -> Mapping[str, int]: ...

    @property
    def free(self) -> Mapping[str, int]: ...

    @property
    def unschedulable(self) -> bool: ...

    @property
    def taints(self) -> Sequence[Taint]: ...

    @property
    def pods(self) -> Sequence[Pod]: ...

    @property
    def images(self) -> Mapping[str, int]: ...

    @property
    def used_ports(self) -> Sequence[ContainerPort]: ...

    @property
    def usage(self) -> Mapping[str, int]: ...

    @property
    def metrics(self) -> Mapping[str, float]: ...

    @property
    def metrics_age(self) -> float: ...

    @property
    def devices(self) -> Sequence[Any]: ...


@dataclass(frozen=True)
class Field:
    type: Type
    get: Callable[[Any], Any]
    doc: str = ""


POD = Record("pod")
NODE = Record("node")
TAINT = Record("taint")
TOLERATION = Record("toleration")
PORT = Record("port")
NODE_SELECTOR_TERM = Record("node selector term")
PREFERRED_TERM = Record("preferred scheduling term")
LABEL_SELECTOR = Record("label selector")
POD_AFFINITY_TERM = Record("pod affinity term")
WEIGHTED_POD_AFFINITY_TERM = Record("weighted pod affinity term")
SPREAD_CONSTRAINT = Record("topology spread constraint")
DOMAIN = Record("domain")  # domain(node, KEY): rulesched.lang.builtins.domains
RESOURCE_CLAIM = Record("resource claim")  # pod.resource_claims: DRA claims (rulesched.model.dra)
DEVICE_REQUEST = Record("device request")
DEVICE = Record("device")  # node.devices
CLUSTER = Record("cluster")

STRINGS = MapOf(STRING)


def _attr(name: str) -> Callable[[Any], Any]:
    return operator.attrgetter(name)


def _fields(spec: dict[str, tuple[Type, str]]) -> dict[str, Field]:
    return {name: Field(t, _attr(name), doc) for name, (t, doc) in spec.items()}


def _exact(request: Any) -> Any:
    """A DRA request's exact part, or its first subrequest's."""
    return request.exactly if request.exactly is not None else request.first_available[0][1]


def _none_as_empty(name: str) -> Callable[[Any], Any]:
    def get(obj: Any) -> Any:
        value = getattr(obj, name)
        return () if value is None else value

    return get


RECORDS: dict[Record, dict[str, Field]] = {
    POD: {
        **_fields(
            {
                "name": (STRING, "metadata.name"),
                "namespace": (STRING, "metadata.namespace"),
                "uid": (STRING, "metadata.uid"),
                "labels": (STRINGS, "metadata.labels"),
                "annotations": (STRINGS, "metadata.annotations"),
                "owner": (STRING, "the controlling owner as Kind/name, or empty"),
                "priority": (NUMBER, "spec.priority, resolved from priorityClassName"),
                "preemption_policy": (STRING, "PreemptLowerPriority or Never"),
                "scheduler_name": (STRING, "spec.schedulerName"),
                "node_name": (STRING, "spec.nodeName: the node a pod runs on or asks for"),
                "nominated_node_name": (STRING, "status.nominatedNodeName"),
                "phase": (STRING, "status.phase"),
                "requests": (RESOURCES, "effective requests: containers, init containers, overhead"),
                "nonzero_requests": (RESOURCES, "requests with 100m cpu / 200Mi memory defaults"),
                "node_selector": (STRINGS, "spec.nodeSelector"),
                "preferred_node_affinity": (ListOf(PREFERRED_TERM), "preferred node affinity terms"),
                "pod_affinity": (ListOf(POD_AFFINITY_TERM), "required pod affinity terms"),
                "preferred_pod_affinity": (ListOf(WEIGHTED_POD_AFFINITY_TERM), "preferred pod affinity"),
                "pod_anti_affinity": (ListOf(POD_AFFINITY_TERM), "required pod anti-affinity terms"),
                "preferred_pod_anti_affinity": (ListOf(WEIGHTED_POD_AFFINITY_TERM), "preferred anti-affinity"),
                "tolerations": (ListOf(TOLERATION), "spec.tolerations"),
                "topology_spread_constraints": (ListOf(SPREAD_CONSTRAINT), "spec.topologySpreadConstraints"),
                "host_ports": (ListOf(PORT), "container ports with a hostPort"),
                "images": (ListOf(STRING), "container images"),
                "creation_timestamp": (NUMBER, "seconds since the epoch"),
                "start_time": (NUMBER, "status.startTime, seconds since the epoch"),
                "scheduling_group": (STRING, "spec.schedulingGroup.podGroupName: its workload API PodGroup, or empty"),
                "gang": (ListOf(NUMBER), "[min_count, members] of the pod's group being placed (read group.*)"),
                "domain": (STRINGS, "the topology domain its group's attempt tries (read group.domain)"),
                "required_features": (ListOf(STRING), "the node features it needs (NodeDeclaredFeatures)"),
            }
        ),
        "required_node_affinity": Field(
            ListOf(NODE_SELECTOR_TERM),
            _none_as_empty("required_node_affinity"),
            "required node affinity terms (ORed); empty when there is no requirement",
        ),
        "claims": Field(
            ListOf(STRING),
            lambda pod: pod.claims,
            "the PersistentVolumeClaims the pod mounts (generic ephemeral volumes' <pod>-<volume> included)",
        ),
        "volumes": Field(
            ListOf(STRING),
            lambda pod: tuple(v.name for v in pod.volumes),
            "the names of the volumes the volume filters read: claims and inline disks (GCE PD, EBS, iSCSI, RBD)",
        ),
        "has_required_node_affinity": Field(
            BOOL, lambda pod: pod.required_node_affinity is not None, "whether the pod has required node affinity"
        ),
        "resource_claims": Field(
            ListOf(RESOURCE_CLAIM),
            lambda pod: pod.resource_claims,
            "spec.resourceClaims: the pod's DRA claims with their requests (as the cluster has them)",
        ),
    },
    NODE: _fields(
        {
            "name": (STRING, "metadata.name"),
            "labels": (STRINGS, "metadata.labels"),
            "annotations": (STRINGS, "metadata.annotations"),
            "allocatable": (RESOURCES, "status.allocatable"),
            "capacity": (RESOURCES, "status.capacity"),
            "requested": (RESOURCES, "the sum of the requests of the pods on the node"),
            "nonzero_requested": (RESOURCES, "the same with 100m cpu / 200Mi memory defaults"),
            "free": (RESOURCES, "allocatable minus requested"),
            "unschedulable": (BOOL, "spec.unschedulable"),
            "taints": (ListOf(TAINT), "spec.taints"),
            "pods": (ListOf(POD), "the pods on the node, assumed ones included"),
            "images": (MapOf(NUMBER), "image name -> size in bytes"),
            "used_ports": (ListOf(PORT), "host ports used by the pods on the node"),
            "usage": (RESOURCES, "cpu and memory in use (metrics.k8s.io), plus just-placed pods' estimates"),
            "metrics": (MapOf(NUMBER), "named metrics (Prometheus queries) -> value, plus estimates"),
            "metrics_age": (DURATION, "seconds since the node's oldest value was taken (1e9: none)"),
            "devices": (ListOf(DEVICE), "the DRA devices the node reaches, with what claims hold of them"),
        }
    )
    | {
        "declared_features": Field(
            ListOf(STRING),
            lambda n: n.node.declared_features,
            "status.declaredFeatures: the gated features the node's kubelet declares (NodeDeclaredFeatures)",
        )
    },
    TAINT: _fields({"key": (STRING, ""), "value": (STRING, ""), "effect": (STRING, "")}),
    RESOURCE_CLAIM: {
        **_fields(
            {
                "name": (STRING, "the pod's name for it (spec.resourceClaims[].name)"),
                "claim": (STRING, "the ResourceClaim's name (empty while a template's is not made)"),
                "allocated": (BOOL, "whether the claim is allocated already (then it is shared, not allocated again)"),
            }
        ),
        "template": Field(STRING, _attr("template_name"), "the ResourceClaimTemplate named, if any"),
        "requests": Field(
            ListOf(DEVICE_REQUEST),
            lambda c: c.spec.requests if c.spec is not None else (),
            "the claim's requests (empty while the claim is not known)",
        ),
    },
    DEVICE_REQUEST: {
        "name": Field(STRING, _attr("name"), ""),
        "class_name": Field(
            STRING, lambda r: _exact(r).device_class_name, "deviceClassName (a firstAvailable request's first)"
        ),
        "mode": Field(STRING, lambda r: _exact(r).allocation_mode, "ExactCount or All"),
        "count": Field(
            NUMBER,
            lambda r: _exact(r).count if _exact(r).allocation_mode != "All" else 0,
            "devices asked (1 when the request leaves it out, the API's default; 0 for All)",
        ),
        "admin_access": Field(BOOL, lambda r: bool(_exact(r).admin_access), ""),
        "capacity": Field(
            RESOURCES, lambda r: _exact(r).capacity or {}, "capacity.requests: what it asks of a shared device"
        ),
        "first_available": Field(
            ListOf(STRING),
            lambda r: tuple(name for name, _ in r.first_available),
            "the names of its firstAvailable subrequests, in order (empty for an exact request)",
        ),
    },
    DEVICE: {
        **_fields(
            {
                "driver": (STRING, ""),
                "pool": (STRING, ""),
                "name": (STRING, ""),
                "attributes": (STRINGS, "every attribute as text, by its name (and driver/name for the driver's own)"),
                "numbers": (MapOf(NUMBER), "the integer attributes"),
                "capacity": (RESOURCES, "the device's capacities"),
                "consumed": (RESOURCES, "what shares of it consume (consumable capacity)"),
                "free": (RESOURCES, "capacity less consumed (nothing of a device allocated whole)"),
                "allocated": (BOOL, "held by some claim, whole or in part"),
                "shared": (BOOL, "allowMultipleAllocations: several claims may share it"),
                "claims": (NUMBER, "the allocations holding it"),
            }
        ),
        "taints": Field(ListOf(TAINT), _attr("taints"), "its taints (key, value, effect)"),
    },
    TOLERATION: {
        **_fields({"key": (STRING, ""), "operator": (STRING, ""), "value": (STRING, ""), "effect": (STRING, "")}),
        "toleration_seconds": Field(
            NUMBER,
            lambda t: -1 if t.toleration_seconds is None else t.toleration_seconds,
            "-1 when unset (tolerate forever)",
        ),
    },
    PORT: _fields({"host_port": (NUMBER, ""), "protocol": (STRING, ""), "host_ip": (STRING, "")}),
    NODE_SELECTOR_TERM: {},
    LABEL_SELECTOR: {},
    PREFERRED_TERM: _fields({"weight": (NUMBER, ""), "preference": (NODE_SELECTOR_TERM, "")}),
    POD_AFFINITY_TERM: {
        **_fields({"topology_key": (STRING, ""), "namespaces": (ListOf(STRING), "")}),
        "label_selector": Field(LABEL_SELECTOR, _attr("label_selector"), "None selects nothing"),
    },
    WEIGHTED_POD_AFFINITY_TERM: _fields({"weight": (NUMBER, ""), "term": (POD_AFFINITY_TERM, "")}),
    SPREAD_CONSTRAINT: _fields(
        {
            "max_skew": (NUMBER, ""),
            "topology_key": (STRING, ""),
            "when_unsatisfiable": (STRING, "DoNotSchedule or ScheduleAnyway"),
            "label_selector": (LABEL_SELECTOR, ""),
            "min_domains": (NUMBER, ""),
            "node_affinity_policy": (STRING, "Honor or Ignore"),
            "node_taints_policy": (STRING, "Honor or Ignore"),
        }
    ),
}


def _domain_fields() -> dict[str, Field]:
    """A domain's fields (the cluster has the same): read by ``DomainRef.field``, from indexes."""
    spec = {
        "nodes": (ListOf(NODE), "the nodes of the domain"),
        "pods": (ListOf(POD), "their pods, bound and assumed: aggregate over them (count, sum, any, all)"),
        "allocatable": (RESOURCES, "the sum of the nodes' allocatable"),
        "requested": (RESOURCES, "the sum of the requests of their pods"),
        "free": (RESOURCES, "allocatable minus requested"),
    }
    return {name: Field(t, operator.methodcaller("field", name), doc) for name, (t, doc) in spec.items()}


@functools.lru_cache(maxsize=256)
def table_fields(row: TableRow) -> dict[str, Field]:
    """A ``table(...)``'s row is a tuple, one cell per column: its fields by position."""
    return {name: Field(t, operator.itemgetter(i), "a column of the table") for i, (name, t) in enumerate(row.columns)}


RECORDS[DOMAIN] = _domain_fields()
RECORDS[CLUSTER] = _domain_fields()

# Node fields that change when pods are bound to or leave the node (the rest change only with the
# Node object itself): rules reading none of them keep their answers across binds.
# (usage and metrics: a placed pod adds its estimate to them until the values catch up.)
# (devices: what claims hold of them changes as pods bound there take them)
NODE_POD_FIELDS = frozenset(
    {"requested", "nonzero_requested", "free", "pods", "used_ports", "usage", "metrics", "devices"}
)
# Node fields from the load sources (rulesched.cluster.load): lint asks that reads of the first
# two be guarded by the third or by has() (stale or missing values read as 0).
NODE_LOAD_FIELDS = ("usage", "metrics", "metrics_age")

# What an out-of-range list index of records reads as: an empty record, so that reading its
# fields gives their zero values too (docs/language.md, "Missing values").
ZERO_RECORDS: dict[Record, Any] = {
    POD: Pod(""),
    TAINT: Taint(""),
    TOLERATION: Toleration(),
    PORT: ContainerPort(0),
    NODE_SELECTOR_TERM: NodeSelectorTerm(),
    PREFERRED_TERM: PreferredSchedulingTerm(0, NodeSelectorTerm()),
    POD_AFFINITY_TERM: PodAffinityTerm(""),
    WEIGHTED_POD_AFFINITY_TERM: WeightedPodAffinityTerm(0, PodAffinityTerm("")),
    SPREAD_CONSTRAINT: TopologySpreadConstraint(0, "", ""),
    RESOURCE_CLAIM: PodClaim(""),
    # no request at all, so not the API's defaults for a request that leaves them out (mode
    # ExactCount, count 1: the decoder applies those): a pod without claims asks no device
    DEVICE_REQUEST: DeviceRequest("", ExactRequest("", allocation_mode="", count=0)),
    DEVICE: NodeDevice(
        "", "", "", EMPTY, EMPTY_RESOURCES, EMPTY_RESOURCES, EMPTY_RESOURCES, EMPTY_RESOURCES, False, False, 0
    ),
}


def zero_value(t: Type) -> Any:
    """The type's zero value, records included (see :func:`rulesched.lang.types.zero`)."""
    if isinstance(t, Record):
        return ZERO_RECORDS.get(t)
    return zero(t)


# Attribute-style names for common resources: node.free.cpu is node.free["cpu"].
RESOURCE_ATTRIBUTES = {
    "cpu": "cpu",
    "memory": "memory",
    "pods": "pods",
    "ephemeral_storage": "ephemeral-storage",
}

# The variables each rule kind may use, and what they hold.
POD_VARIABLE = "pod"
NODE_VARIABLE = "node"
VICTIM_VARIABLE = "victim"
CLUSTER_VARIABLE = "cluster"  # every node: rulesched.lang.builtins.domains
DEVICE_VARIABLE = "device"  # a device score's candidate device (node.devices' record)
REQUEST_VARIABLE = "request"  # and the DRA request it would serve
DEVICE_SCORE = "device score"  # the variables key of `score NAME for device`
GUARD_VARIABLES: dict[str, Type] = {POD_VARIABLE: POD}
BODY_VARIABLES: dict[str, dict[str, Type]] = {
    "filter": {POD_VARIABLE: POD, NODE_VARIABLE: NODE, CLUSTER_VARIABLE: CLUSTER},
    "score": {POD_VARIABLE: POD, NODE_VARIABLE: NODE, CLUSTER_VARIABLE: CLUSTER},
    "preempt": {POD_VARIABLE: POD, NODE_VARIABLE: NODE, VICTIM_VARIABLE: POD, CLUSTER_VARIABLE: CLUSTER},
    DEVICE_SCORE: {
        POD_VARIABLE: POD,
        NODE_VARIABLE: NODE,
        DEVICE_VARIABLE: DEVICE,
        REQUEST_VARIABLE: DEVICE_REQUEST,
        CLUSTER_VARIABLE: CLUSTER,
    },
}
