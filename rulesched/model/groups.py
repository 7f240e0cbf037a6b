"""Pod groups (gangs): which pods must be placed all together or not at all.

Two APIs name a group. scheduler-plugins' Coscheduling reads a ``PodGroup`` of
``scheduling.x-k8s.io/v1alpha1`` (``spec.minMember``, ``spec.scheduleTimeoutSeconds``) and a pod
joins it with the label ``scheduling.x-k8s.io/pod-group: <name>`` (same namespace). Upstream's
KEP-4671 (``scheduling.k8s.io/v1alpha1``, Kubernetes 1.35) names the group in the pod's
``spec.workloadRef`` (``name``, ``podGroup``, ``podGroupReplicaKey``) and its size in the
``Workload``'s ``spec.podGroups[].policy.gang.minCount`` (a ``basic`` policy is no gang). Both
become one value, :class:`PodGroup`, keyed as :func:`group_key` keys a pod, so the scheduler never
asks which API a group came from.
Next stage: :mod:`rulesched.scheduler.gang` places a group's members all or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.model.fields import Where, get_int, get_map, get_maps, get_opt_int, get_str, get_time, object_metadata
from rulesched.model.objects import Pod

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins' PodGroupLabel
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
WORKLOAD_API = "scheduling.k8s.io/v1alpha1"
# scheduler-plugins' Coscheduling waits this long (its permitWaitingTimeSeconds default) when a
# PodGroup sets no scheduleTimeoutSeconds.
DEFAULT_TIMEOUT_SECONDS = 60.0
WORKLOAD_PREFIX = "workload:"  # group keys from the Workload API (never a valid object name)


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A gang: at least ``min_member`` of its pods are placed together, or none is."""

    key: str  # the name pods join it by: "ns/name", or "workload:ns/workload/podGroup[/replica]"
    namespace: str
    name: str
    min_member: int
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    api: str = POD_GROUP_API
    created: float = 0.0  # metadata.creationTimestamp: older groups go first, as upstream sorts
    phase: str = ""  # a PodGroup's status.phase (its controller's; rulesched sets Scheduling)


def group_key(pod: Pod) -> str | None:
    """The key of the group the pod belongs to, if it names one."""
    name = pod.labels.get(POD_GROUP_LABEL)
    if name:
        return f"{pod.namespace}/{name}"
    ref = pod.workload_ref
    if ref:
        return f"{WORKLOAD_PREFIX}{pod.namespace}/{ref}"
    return None


def decode_pod_group(obj: object, source: str = "", *, names: bool = True) -> PodGroup:
    """scheduler-plugins' PodGroup: ``spec.minMember`` (0 and unset mean 1, as a PodGroup of one
    pod behaves), ``spec.scheduleTimeoutSeconds``."""
    obj, meta, name, namespace, where = object_metadata(obj, "PodGroup", source, True, names=names)
    spec = get_map(obj, "spec", where, "")
    minimum = get_int(spec, "minMember", where, "spec")
    if minimum < 0:
        raise where.error(f"{minimum} is negative", "spec.minMember")
    timeout = get_opt_int(spec, "scheduleTimeoutSeconds", where, "spec")
    if timeout is not None and timeout < 0:
        raise where.error(f"{timeout} is negative", "spec.scheduleTimeoutSeconds")
    return PodGroup(
        key=f"{namespace}/{name}",
        namespace=namespace,
        name=name,
        min_member=max(1, minimum),
        timeout_seconds=DEFAULT_TIMEOUT_SECONDS if not timeout else float(timeout),
        created=_created(meta, where),
        phase=get_str(get_map(obj, "status", where, ""), "phase", where, "status"),
    )


def decode_workload(obj: object, source: str = "", *, names: bool = True) -> tuple[PodGroup, ...]:
    """KEP-4671's Workload: one group per ``spec.podGroups`` entry with a ``gang`` policy
    (``minCount``, required, positive). A group with replicas is a gang per replica key: its
    key is the prefix ``replica_prefix`` finds (see :func:`workload_group`)."""
    obj, meta, name, namespace, where = object_metadata(obj, "Workload", source, True, names=names)
    spec = get_map(obj, "spec", where, "")
    groups = []
    for at, group in get_maps(spec, "podGroups", where, "spec"):
        group_name = get_str(group, "name", where, at)
        if not group_name:
            raise where.error("missing", f"{at}.name")
        policy = get_map(group, "policy", where, at)
        gang = policy.get("gang")
        if gang is None:
            continue  # a basic policy: its pods are scheduled one by one
        gang = get_map(policy, "gang", where, f"{at}.policy")
        minimum = get_opt_int(gang, "minCount", where, f"{at}.policy.gang")
        if minimum is None or minimum < 1:
            raise where.error("must be a positive integer", f"{at}.policy.gang.minCount")
        groups.append(
            PodGroup(
                key=f"{WORKLOAD_PREFIX}{namespace}/{name}/{group_name}",
                namespace=namespace,
                name=f"{name}/{group_name}",
                min_member=minimum,
                api=WORKLOAD_API,
                created=_created(meta, where),
            )
        )
    return tuple(groups)


def workload_ref(spec: Mapping[str, Any], where: Where) -> str:
    """A pod's ``spec.workloadRef`` as "workload/podGroup[/replicaKey]" ("" without one)."""
    ref = get_map(spec, "workloadRef", where, "spec")
    if not ref:
        return ""
    name = get_str(ref, "name", where, "spec.workloadRef")
    group = get_str(ref, "podGroup", where, "spec.workloadRef")
    if not name or not group:
        raise where.error("needs both name and podGroup", "spec.workloadRef")
    replica = get_str(ref, "podGroupReplicaKey", where, "spec.workloadRef")
    return f"{name}/{group}/{replica}" if replica else f"{name}/{group}"


def _created(meta: Mapping[str, Any], where: Where) -> float:
    return get_time(meta, "creationTimestamp", where, "metadata") if meta.get("creationTimestamp") else 0.0
