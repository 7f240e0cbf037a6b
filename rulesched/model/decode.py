"""Kubernetes objects, as ``kubectl get -o yaml|json`` prints them, turned into model values.

The input is the plain ``dict`` tree that :mod:`json` or :mod:`yaml` (or the API client's
``sanitize_for_serialization``) produces; nothing here imports the Kubernetes client, so a
simulation from files needs no cluster. Each decoder reads only what scheduling looks at, checks
the type of everything it reads, and applies the defaults the API server would have applied to an
object written by hand (namespace ``default``, requests from limits, ``minDomains: 1``, ...), so
that a file and a live cluster give the same values.

Every problem raises :class:`~rulesched.errors.ObjectError`, whose ``str()`` is one line:
``cluster.yaml: Pod default/web-1: spec.containers[0].resources.requests.cpu: 'abc' is not a
quantity (expected e.g. 500m, 2Gi, 1.5)``. Nothing is deep-copied: string maps are copied
shallowly into read-only views, which is cheap and keeps later edits to the input from leaking in.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rulesched.model.decode_dra import pod_claims
from rulesched.model.decode_storage import pod_volumes
from rulesched.model.fields import (
    Memo,
    Where,
    check,
    describe,
    get_bool,
    get_choice,
    get_int,
    get_map,
    get_maps,
    get_opt_int,
    get_resources,
    get_str,
    get_str_list,
    get_str_map,
    get_time,
    object_metadata,
)
from rulesched.model.names import dns1123_label, dns1123_subdomain, shown
from rulesched.model.objects import (
    DISRUPTION_TARGET,
    EMPTY_RESOURCES,
    IF_HEALTHY_BUDGET,
    PREEMPTED_CONDITION,
    PREEMPTION_BY_SCHEDULER,
    UNHEALTHY_POD_EVICTION_POLICIES,
    LabelSelector,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
)
from rulesched.model.parts import (
    affinity,
    decode_label_selector,
    decode_node_selector_term,
    label_selector,
    normalized_image_name,
    ports_and_images,
    spread_constraints,
    taints,
    tolerations,
)
from rulesched.model.requests import extended_requests, is_extended, pod_requests

_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_INT32 = (-(2**31), 2**31 - 1)

# The API server creates these in every cluster, so pods may name them without a file saying so.
SYSTEM_PRIORITY_CLASSES: Mapping[str, PriorityClass] = MappingProxyType(
    {
        "system-cluster-critical": PriorityClass("system-cluster-critical", 2000000000),
        "system-node-critical": PriorityClass("system-node-critical", 2000001000),
    }
)


def _resources(amounts: dict[str, int]) -> Mapping[str, int]:
    return MappingProxyType(amounts) if amounts else EMPTY_RESOURCES


def _controller(meta: Mapping[str, Any], where: Where) -> str:
    for path, ref in get_maps(meta, "ownerReferences", where, "metadata"):
        if get_bool(ref, "controller", where, path):
            return f"{get_str(ref, 'kind', where, path)}/{get_str(ref, 'name', where, path)}"
    return ""


def _gates(spec: Mapping[str, Any], where: Where) -> tuple[str, ...]:
    """spec.schedulingGates[].name (the API requires a name and unique names)."""
    names = []
    for path, gate in get_maps(spec, "schedulingGates", where, "spec"):
        name = get_str(gate, "name", where, path)
        if not name:
            raise where.error("missing", f"{path}.name")
        names.append(name)
    return tuple(names)


def resolve_priority(
    spec: Mapping[str, Any], where: Where, classes: Mapping[str, PriorityClass] | None, group: bool = False
) -> tuple[int, str]:
    """Priority and preemption policy the way the Priority admission plugin sets them: the
    named class, else the global default class (the lowest-valued one if several), else 0.
    A ``spec.priority`` already set (every pod read back from the API has one) wins. For a
    PodGroup (``group``) an unset preemption policy stays "" (the workload API's default
    depends on the PodGroupPreemptionPolicy gate: :mod:`rulesched.scheduler.workloads`)."""
    classes = classes or {}
    explicit = get_opt_int(spec, "priority", where, "spec")
    name = get_str(spec, "priorityClassName", where, "spec")
    found: PriorityClass | None = None
    if name:
        found = classes.get(name) or SYSTEM_PRIORITY_CLASSES.get(name)
        if found is None and explicit is None:
            known = ", ".join(sorted(classes)) or "none loaded"
            raise where.error(f"no PriorityClass named {shown(name)} (known: {known})", "spec.priorityClassName")
    else:
        for pc in classes.values():
            if pc.global_default and (found is None or pc.value < found.value):
                found = pc
    if explicit is not None and not _INT32[0] <= explicit <= _INT32[1]:
        raise where.error(f"{explicit} does not fit in 32 bits", "spec.priority")
    priority = explicit if explicit is not None else (found.value if found else 0)
    default_policy = found.preemption_policy if found else "PreemptLowerPriority"
    if group and spec.get("preemptionPolicy") is None:
        return priority, ""
    policy = get_choice(spec, "preemptionPolicy", where, "spec", _PREEMPTION_POLICIES, default_policy)
    return priority, policy


# -- objects ---------------------------------------------------------------------------------


def decode_pod(
    obj: object,
    source: str = "",
    priority_classes: Mapping[str, PriorityClass] | None = None,
    *,
    memo: Memo | None = None,
    require_containers: bool = False,
    names: bool = True,
) -> Pod:
    """A Pod; ``priority_classes`` (by name) resolve ``spec.priorityClassName`` for pods that
    have no ``spec.priority`` yet, i.e. pods written by hand rather than read from the API.
    Passing one ``memo`` dict to many calls shares equal parts between them (faster loads).
    ``require_containers`` refuses a pod without containers, as the API server does; rule tests
    leave it off, for pods like upstream's test tables' (``containers: []``, which scoring's
    non-zero defaults treat unlike a container without requests). ``names`` off skips the checks
    of names' formats (:func:`~rulesched.model.fields.check`), for objects no API server saw."""
    obj, meta, name, namespace, where = object_metadata(obj, "Pod", source, True, memo, names=names)
    spec = get_map(obj, "spec", where, "")
    status = get_map(obj, "status", where, "")
    _check_pod_spec(spec, status, where, require_containers)
    requests, nonzero = pod_requests(spec, status, where)
    priority, policy = resolve_priority(spec, where, priority_classes)
    aff = affinity(spec, where)
    host_ports, images = ports_and_images(spec, where)
    return Pod(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", where, "metadata"),
        labels=get_str_map(meta, "labels", where, "metadata"),
        annotations=get_str_map(meta, "annotations", where, "metadata"),
        priority=priority,
        preemption_policy=policy,
        scheduler_name=get_str(spec, "schedulerName", where, "spec") or "default-scheduler",
        node_name=get_str(spec, "nodeName", where, "spec"),
        nominated_node_name=get_str(status, "nominatedNodeName", where, "status"),
        phase=get_choice(status, "phase", where, "status", _PHASES, "Pending"),
        requests=_resources(requests),
        nonzero_requests=MappingProxyType(nonzero),
        node_selector=get_str_map(spec, "nodeSelector", where, "spec"),
        required_node_affinity=aff.required_node,
        preferred_node_affinity=aff.preferred_node,
        pod_affinity=aff.pod_affinity,
        preferred_pod_affinity=aff.preferred_pod_affinity,
        pod_anti_affinity=aff.pod_anti_affinity,
        preferred_pod_anti_affinity=aff.preferred_pod_anti_affinity,
        tolerations=tolerations(spec, where),
        topology_spread_constraints=spread_constraints(spec, where),
        host_ports=host_ports,
        images=images,
        creation_timestamp=get_time(meta, "creationTimestamp", where, "metadata"),
        start_time=get_time(status, "startTime", where, "status"),
        deleting=meta.get("deletionTimestamp") is not None,
        preempted_by_scheduler=_preempted_by_scheduler(status, where),
        ready=_ready(status, where),
        owner=_controller(meta, where),
        scheduling_gates=_gates(spec, where),
        volumes=pod_volumes(spec, name, where) if spec.get("volumes") else (),
        resource_claims=pod_claims(spec, status, where) if spec.get("resourceClaims") else (),
        extended_requests=extended_requests(spec, where) if any(is_extended(r) for r in requests) else (),
        extended_claim=_extended_claim(status, where) if status.get("extendedResourceClaimStatus") else "",
        scheduling_group=_scheduling_group(spec, where) if spec.get("schedulingGroup") or "workloadRef" in spec else "",
        required_features=required_features(spec, where),
        resource_version=get_str(meta, "resourceVersion", where, "metadata"),
        generation=get_int(meta, "generation", where, "metadata"),
    )


def _extended_claim(status: Mapping[str, Any], where: Where) -> str:
    """status.extendedResourceClaimStatus.resourceClaimName: the claim the scheduler made for
    the pod's DRA-backed extended resources (KEP-5004)."""
    found = get_map(status, "extendedResourceClaimStatus", where, "status")
    return get_str(found, "resourceClaimName", where, "status.extendedResourceClaimStatus")


def _scheduling_group(spec: Mapping[str, Any], where: Where) -> str:
    """spec.schedulingGroup.podGroupName: the workload API's PodGroup the pod belongs to
    (rulesched.model.groups). 1.35's spec.workloadRef was removed by 1.36: refused, saying so."""
    if "workloadRef" in spec:
        raise where.error(
            "spec.workloadRef (Kubernetes 1.35) was removed in 1.36: name the PodGroup in "
            "spec.schedulingGroup.podGroupName",
            "spec.workloadRef",
        )
    group = get_map(spec, "schedulingGroup", where, "spec")
    name = get_str(group, "podGroupName", where, "spec.schedulingGroup")
    if not name:
        raise where.error("exactly one field must be set (podGroupName)", "spec.schedulingGroup")
    check(where, dns1123_subdomain, name, "spec.schedulingGroup.podGroupName")
    return name


def required_features(spec: Mapping[str, Any], where: Where) -> tuple[str, ...]:
    """The node features a pod needs, as component-helpers' nodedeclaredfeatures registry infers
    them for scheduling at v0.37.2 (InferForPodScheduling; every feature's MaxVersion is unset):
    containers' restartPolicyRules with action RestartAllContainers, hostNetwork with
    hostUsers: false, and volume mounts with bindMountOptions. The others (the in-place resize
    features, the DRA ones, ExtendWebSocketsToKubelet) are inferred for updates only."""
    found = []
    containers = [c for key in ("containers", "initContainers") for _, c in get_maps(spec, key, where, "spec")]
    if any(
        get_str(rule, "action", where, "restartPolicyRules") == "RestartAllContainers"
        for c in containers
        for _, rule in get_maps(c, "restartPolicyRules", where, "container")
    ):
        found.append("RestartAllContainersOnContainerExits")
    if get_bool(spec, "hostNetwork", where, "spec") and spec.get("hostUsers") is False:
        found.append("UserNamespacesHostNetworkSupport")
    mounting = [*containers, *(c for _, c in get_maps(spec, "ephemeralContainers", where, "spec"))]
    if any(m.get("bindMountOptions") for c in mounting for _, m in get_maps(c, "volumeMounts", where, "container")):
        found.append("VolumeBindMountOptions")
    return tuple(found)


def _check_pod_spec(spec: Mapping[str, Any], status: Mapping[str, Any], where: Where, containers: bool) -> None:
    """What the API server refuses in a pod that decoding would otherwise pass over: node names
    that are not DNS subdomains and (when asked) no container at all."""
    if containers and spec.get("containers") in (None, []):  # absent, null or empty alike
        raise where.error(
            "at least one container is required (the API server refuses a pod without)", "spec.containers"
        )
    for part, at, key in ((spec, "spec", "nodeName"), (status, "status", "nominatedNodeName")):
        node = get_str(part, key, where, at)
        if node:
            check(where, dns1123_subdomain, node, f"{at}.{key}")


def _ready(status: Mapping[str, Any], where: Where) -> bool:
    """podutil.IsPodReady: the first condition of type Ready says True. A Running pod whose
    status lists no conditions at all is taken as Ready: only a file written by hand has one
    (the API's Running pods carry the kubelet's conditions), and its author meant it up."""
    if not status.get("conditions"):
        return status.get("phase") == "Running"
    for path, cond in get_maps(status, "conditions", where, "status"):
        if get_str(cond, "type", where, path) == "Ready":
            return get_str(cond, "status", where, path) == "True"
    return False


def _preempted_by_scheduler(status: Mapping[str, Any], where: Where) -> bool:
    """The DisruptionTarget condition a scheduler sets on the pods it preempts (reason
    PreemptionByScheduler), or rulesched's own condition, which outlives the Eviction API's
    rewriting DisruptionTarget (reason EvictionByEvictionAPI)."""
    if not status.get("conditions"):
        return False
    found = False
    for path, cond in get_maps(status, "conditions", where, "status"):
        kind = get_str(cond, "type", where, path)
        if kind == PREEMPTED_CONDITION and get_str(cond, "status", where, path) == "True":
            return True
        if kind == DISRUPTION_TARGET and not found:  # the first of its type counts, as upstream reads it
            found = True
            if get_str(cond, "status", where, path) == "True" and (
                get_str(cond, "reason", where, path) == PREEMPTION_BY_SCHEDULER
            ):
                return True
    return False


def decode_node(obj: object, source: str = "", *, memo: Memo | None = None, names: bool = True) -> Node:
    """A Node; allocatable defaults to capacity (as the API server defaults it), and every name
    an image is known by maps to its size."""
    obj, meta, name, _, where = object_metadata(obj, "Node", source, False, memo, names=names)
    spec = get_map(obj, "spec", where, "")
    status = get_map(obj, "status", where, "")
    capacity = _resources(get_resources(status, "capacity", where, "status"))
    allocatable = capacity
    if status.get("allocatable") is not None:
        allocatable = _resources(get_resources(status, "allocatable", where, "status"))
    images: dict[str, int] = {}
    for path, image in get_maps(status, "images", where, "status"):
        size = get_int(image, "sizeBytes", where, path)
        for image_name in get_str_list(image, "names", where, path):
            images[image_name] = size
    return Node(
        name=name,
        labels=get_str_map(meta, "labels", where, "metadata"),
        annotations=get_str_map(meta, "annotations", where, "metadata"),
        allocatable=allocatable,
        capacity=capacity,
        unschedulable=get_bool(spec, "unschedulable", where, "spec"),
        taints=taints(spec, where),
        images=_resources(images),
        uid=get_str(meta, "uid", where, "metadata"),
        resource_version=get_str(meta, "resourceVersion", where, "metadata"),
        declared_features=get_str_list(status, "declaredFeatures", where, "status"),
    )


def decode_pdb(obj: object, source: str = "", *, names: bool = True) -> PodDisruptionBudget:
    """A PodDisruptionBudget with the disruptions its status allows now. Without a status
    (``status_known`` false) it allows 0 until :func:`rulesched.semantics.disruption.disruptions_allowed`
    computes it from the pods, as the disruption controller would."""
    obj, meta, name, namespace, where = object_metadata(obj, "PodDisruptionBudget", source, True, names=names)
    spec = get_map(obj, "spec", where, "")
    selector = label_selector(spec.get("selector"), where, "spec.selector")
    if obj.get("apiVersion") == "policy/v1beta1" and selector == LabelSelector():
        selector = None  # in v1beta1 an empty selector selected nothing; in v1, everything
    status = get_map(obj, "status", where, "")
    allowed = get_int(status, "disruptionsAllowed", where, "status")
    policy = get_str(spec, "unhealthyPodEvictionPolicy", where, "spec") or IF_HEALTHY_BUDGET
    if policy not in UNHEALTHY_POD_EVICTION_POLICIES:
        raise where.error(
            f"{policy!r}: expected one of {', '.join(UNHEALTHY_POD_EVICTION_POLICIES)}",
            "spec.unhealthyPodEvictionPolicy",
        )
    return PodDisruptionBudget(
        name,
        namespace,
        selector,
        allowed,
        min_available=_int_or_percent(spec, "minAvailable", where),
        max_unavailable=_int_or_percent(spec, "maxUnavailable", where),
        status_known="disruptionsAllowed" in status,
        disrupted_pods=frozenset(get_map(status, "disruptedPods", where, "status")),
        unhealthy_pod_eviction_policy=policy,
        current_healthy=get_int(status, "currentHealthy", where, "status"),
        desired_healthy=get_int(status, "desiredHealthy", where, "status"),
        generation_behind="observedGeneration" in status
        and get_int(status, "observedGeneration", where, "status") < get_int(meta, "generation", where, "metadata"),
    )


def _int_or_percent(spec: Mapping[str, Any], key: str, where: Where) -> int | str | None:
    """An IntOrString field: a non-negative count or "N%"."""
    value = spec.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        return value
    raise where.error(f"{describe(value)} is not a count or a percentage (say 2 or 50%)", f"spec.{key}")


def decode_priority_class(obj: object, source: str = "", *, names: bool = True) -> PriorityClass:
    """A PriorityClass; ``value`` is required and must fit in 32 bits, as in the API."""
    obj, _, name, _, where = object_metadata(obj, "PriorityClass", source, False, names=names)
    value = get_opt_int(obj, "value", where, "")
    if value is None:
        raise where.error("missing", "value")
    if not _INT32[0] <= value <= _INT32[1]:
        raise where.error(f"{value} does not fit in 32 bits", "value")
    return PriorityClass(
        name=name,
        value=value,
        global_default=get_bool(obj, "globalDefault", where, ""),
        preemption_policy=get_choice(obj, "preemptionPolicy", where, "", _PREEMPTION_POLICIES, "PreemptLowerPriority"),
    )


def decode_namespace(obj: object, source: str = "", *, names: bool = True) -> Namespace:
    """A Namespace, with the ``kubernetes.io/metadata.name`` label the API server always sets
    (namespace selectors match on it)."""
    _, meta, name, _, where = object_metadata(obj, "Namespace", source, False, name_format=dns1123_label, names=names)
    labels = get_str_map(meta, "labels", where, "metadata")
    if labels.get("kubernetes.io/metadata.name") != name:
        labels = MappingProxyType({**labels, "kubernetes.io/metadata.name": name})
    return Namespace(name, labels)


__all__ = [
    "SYSTEM_PRIORITY_CLASSES",
    "Memo",
    "decode_label_selector",
    "decode_namespace",
    "decode_node",
    "decode_node_selector_term",
    "decode_pdb",
    "decode_pod",
    "decode_priority_class",
    "normalized_image_name",
]
