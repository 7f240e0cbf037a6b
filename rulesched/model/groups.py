"""Pod groups (gangs): which pods must be placed together, and how.

Two APIs name a group, and both become one value, :class:`PodGroup`, keyed as :func:`group_key`
keys a pod, so the scheduler never asks which API a group came from:

- scheduler-plugins' Coscheduling (``scheduling.x-k8s.io/v1alpha1`` ``PodGroup``:
  ``spec.minMember``, ``spec.scheduleTimeoutSeconds``); a pod joins it with the label
  ``scheduling.x-k8s.io/pod-group: <name>`` (same namespace). Key ``namespace/name``.
- Kubernetes' own workload API (KEP-4671, KEP-5710, KEP-5732): a pod names its runtime group in
  ``spec.schedulingGroup.podGroupName`` (same namespace); the ``PodGroup`` (``scheduling.k8s.io``
  ``v1beta1`` in 1.37, ``v1alpha2`` in 1.36; ``v1alpha3`` carries the same kind) holds its
  ``schedulingPolicy`` (``basic``, or ``gang`` with ``minCount``), ``schedulingConstraints``
  (topology keys), ``disruptionMode``, ``priority`` and ``preemptionPolicy``; a ``PodGroup`` may
  name a parent ``CompositePodGroup`` (``v1alpha3``, 1.37 alpha) whose ``minGroupCount`` counts
  child groups. Keys ``pg:namespace/name`` and ``cpg:namespace/name``. A ``Workload`` is the
  template controllers copy PodGroups from; kube-scheduler reads only the PodGroups, and so does
  rulesched (:func:`decode_workload` checks a Workload's shape and keeps nothing).

The 1.35 shape (``scheduling.k8s.io/v1alpha1`` Workload, a pod's ``spec.workloadRef``) was
removed by Kubernetes 1.36 and is refused with a message saying so.
Next stage: :mod:`rulesched.scheduler.gang` (scheduler-plugins' groups) and
:mod:`rulesched.scheduler.workloads` (the workload API's) place a group's members.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.model.decode import resolve_priority
from rulesched.model.fields import (
    Where,
    get_int,
    get_map,
    get_maps,
    get_opt_int,
    get_str,
    get_time,
    object_metadata,
)
from rulesched.model.objects import Pod, PriorityClass

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"  # scheduler-plugins' PodGroupLabel
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
WORKLOAD_GROUP = "scheduling.k8s.io"
# The versions of the workload API a 1.36 or 1.37 API server serves, and which kinds each has.
WORKLOAD_VERSIONS: Mapping[str, tuple[str, ...]] = {
    "v1beta1": ("Workload", "PodGroup"),  # 1.37 (GenericWorkload, beta)
    "v1alpha3": ("Workload", "PodGroup", "CompositePodGroup"),  # 1.37 (CompositePodGroup, alpha)
    "v1alpha2": ("Workload", "PodGroup"),  # 1.36 (alpha); 1.37 no longer serves it
}
# scheduler-plugins' Coscheduling waits this long (its permitWaitingTimeSeconds default) when a
# PodGroup sets no scheduleTimeoutSeconds. The workload API's groups wait without end (upstream's
# PreEnqueue holds them until the rest arrive).
DEFAULT_TIMEOUT_SECONDS = 60.0
NATIVE_PREFIX = "pg:"  # keys of the workload API's PodGroups (never an object name: ':')
COMPOSITE_PREFIX = "cpg:"  # and of its CompositePodGroups
MAX_USER_PRIORITY = 1_000_000_000  # HighestUserDefinablePriority
# The condition kube-scheduler writes on a PodGroup: 1.37 renamed it (kubernetes PR #139743).
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
SCHEDULED_1_36 = "PodGroupScheduled"


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A group of pods placed together: at least ``min_member`` of them, or none (a gang); a
    basic group (``gang`` false) places each member alone, in one cycle. For a composite group
    ``min_member`` counts child groups (``minGroupCount``)."""

    key: str  # the name pods join it by: "ns/name" (scheduler-plugins), "pg:ns/name", "cpg:ns/name"
    namespace: str
    name: str
    min_member: int
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    api: str = POD_GROUP_API
    created: float = 0.0  # metadata.creationTimestamp: older groups go first, as upstream sorts
    phase: str = ""  # a scheduler-plugins PodGroup's status.phase (its controller's; rulesched sets Scheduling)
    # --- the workload API's fields ---
    kind: str = "PodGroup"  # or "CompositePodGroup"
    gang: bool = True  # schedulingPolicy.gang (False: basic)
    priority: int = 0  # spec.priority (resolved from priorityClassName as the admission plugin does)
    preemption_policy: str = ""  # spec.preemptionPolicy; "" when unset
    disruption_all: bool = False  # disruptionMode all (1.36: PodGroup): preempted only whole
    topology: tuple[str, ...] = ()  # schedulingConstraints.topology[].key: one domain of each
    parent: str = ""  # key of the parent CompositePodGroup ("" for a root)
    workload: str = ""  # workloadRef as "workload/template" (what controller made it; informative)
    scheduled: bool = False  # its scheduled condition is already True (never set back to False)
    generation: int = 0  # metadata.generation: the condition's observedGeneration
    uid: str = ""

    @property
    def native(self) -> bool:
        """From the workload API (scheduling.k8s.io), not scheduler-plugins."""
        return self.api.startswith(WORKLOAD_GROUP + "/")

    @property
    def composite(self) -> bool:
        return self.kind == "CompositePodGroup"

    @property
    def ref(self) -> str:
        """namespace/name, as upstream names objects in messages and logs."""
        return f"{self.namespace}/{self.name}"

    @property
    def condition_type(self) -> str:
        """The scheduled condition's type: 1.36's name for v1alpha2 objects, 1.37's otherwise."""
        return SCHEDULED_1_36 if self.api.endswith("/v1alpha2") else INITIALLY_SCHEDULED

    @property
    def wait_forever(self) -> bool:
        return math.isinf(self.timeout_seconds)


def native_key(namespace: str, name: str) -> str:
    return f"{NATIVE_PREFIX}{namespace}/{name}"


def composite_key(namespace: str, name: str) -> str:
    return f"{COMPOSITE_PREFIX}{namespace}/{name}"


def group_key(pod: Pod) -> str | None:
    """The key of the group the pod belongs to, if it names one. ``spec.schedulingGroup`` (what
    kube-scheduler reads) wins over scheduler-plugins' label."""
    if pod.scheduling_group:
        return native_key(pod.namespace, pod.scheduling_group)
    name = pod.labels.get(POD_GROUP_LABEL)
    if name:
        return f"{pod.namespace}/{name}"
    return None


# --- decoding --------------------------------------------------------------------------------


def api_version(obj: object) -> str:
    return str(obj.get("apiVersion", "")) if isinstance(obj, dict) else ""


def decode_pod_group(
    obj: object, source: str = "", classes: Mapping[str, PriorityClass] | None = None, *, names: bool = True
) -> PodGroup:
    """A PodGroup of either API, by its apiVersion (scheduler-plugins' when it has none)."""
    version = api_version(obj)
    if version.startswith(WORKLOAD_GROUP + "/"):
        return _decode_native(obj, "PodGroup", source, classes, names)
    obj, meta, name, namespace, where = object_metadata(obj, "PodGroup", source, True, names=names)
    if version not in ("", POD_GROUP_API):
        raise where.error(f"apiVersion {version!r} is not {POD_GROUP_API} nor {WORKLOAD_GROUP}/v1beta1", "apiVersion")
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
        min_member=max(1, minimum),  # 0 and unset mean 1, as a PodGroup of one pod behaves
        timeout_seconds=DEFAULT_TIMEOUT_SECONDS if not timeout else float(timeout),
        created=_created(meta, where),
        phase=get_str(get_map(obj, "status", where, ""), "phase", where, "status"),
    )


def decode_composite_pod_group(
    obj: object, source: str = "", classes: Mapping[str, PriorityClass] | None = None, *, names: bool = True
) -> PodGroup:
    """A CompositePodGroup (scheduling.k8s.io/v1alpha3): a group of groups."""
    return _decode_native(obj, "CompositePodGroup", source, classes, names)


def _version(obj: object, kind: str, where: Where) -> str:
    version = api_version(obj)
    served = version.split("/", 1)[1] if "/" in version else ""
    if served == "v1alpha1":
        raise where.error(
            f"{WORKLOAD_GROUP}/v1alpha1 was removed in Kubernetes 1.36: write {kind}s as {WORKLOAD_GROUP}/v1beta1",
            "apiVersion",
        )
    if kind not in WORKLOAD_VERSIONS.get(served, ()):
        versions = ", ".join(f"{WORKLOAD_GROUP}/{v}" for v, kinds in WORKLOAD_VERSIONS.items() if kind in kinds)
        raise where.error(f"{kind} is served as {versions}, not {version!r}", "apiVersion")
    return served


def _decode_native(
    obj: object, kind: str, source: str, classes: Mapping[str, PriorityClass] | None, names: bool
) -> PodGroup:
    obj, meta, name, namespace, where = object_metadata(obj, kind, source, True, names=names)
    served = _version(obj, kind, where)
    spec = get_map(obj, "spec", where, "")
    composite = kind == "CompositePodGroup"
    gang, minimum = _policy(spec, where, "spec.schedulingPolicy", "minGroupCount" if composite else "minCount")
    priority, policy = resolve_priority(spec, where, classes, group=True)
    if priority > MAX_USER_PRIORITY and not get_str(spec, "priorityClassName", where, "spec"):
        raise where.error(f"{priority} is above {MAX_USER_PRIORITY}", "spec.priority")
    parent = get_str(spec, "parentCompositePodGroupName", where, "spec")
    if parent and served == "v1alpha2":
        raise where.error("not a field of v1alpha2 (1.37 added it)", "spec.parentCompositePodGroupName")
    status = get_map(obj, "status", where, "")
    condition = SCHEDULED_1_36 if served == "v1alpha2" else INITIALLY_SCHEDULED
    scheduled = any(
        get_str(c, "type", where, at) == condition and get_str(c, "status", where, at) == "True"
        for at, c in get_maps(status, "conditions", where, "status")
    )
    return PodGroup(
        key=composite_key(namespace, name) if composite else native_key(namespace, name),
        namespace=namespace,
        name=name,
        min_member=minimum,
        timeout_seconds=math.inf,
        api=f"{WORKLOAD_GROUP}/{served}",
        created=_created(meta, where),
        kind=kind,
        gang=gang,
        priority=priority,
        preemption_policy=policy,
        disruption_all=_disruption_all(spec, where, served),
        topology=_topology(spec, where),
        parent=composite_key(namespace, parent) if parent else "",
        workload=_workload_ref(spec, where, served),
        scheduled=scheduled,
        generation=get_int(meta, "generation", where, "metadata"),
        uid=get_str(meta, "uid", where, "metadata"),
    )


def _policy(spec: Mapping[str, Any], where: Where, at: str, count: str) -> tuple[bool, int]:
    """schedulingPolicy: exactly one of basic and gang; (gang?, its minimum: 1 for basic)."""
    policy = get_map(spec, "schedulingPolicy", where, "spec")
    given = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(given) != 1:
        raise where.error("exactly one of basic and gang must be set", at)
    if given[0] == "basic":
        get_map(policy, "basic", where, at)
        return False, 1
    gang = get_map(policy, "gang", where, at)
    minimum = get_opt_int(gang, count, where, f"{at}.gang")
    if minimum is None or minimum < 1:
        raise where.error("must be a positive integer", f"{at}.gang.{count}")
    return True, minimum


def _disruption_all(spec: Mapping[str, Any], where: Where, served: str) -> bool:
    """disruptionMode: 1.37's union ({single: {}} or {all: {}}; single when unset), 1.36's
    string (Pod or PodGroup)."""
    value = spec.get("disruptionMode")
    if value is None:
        return False
    if served == "v1alpha2":
        mode = get_str(spec, "disruptionMode", where, "spec")
        if mode not in ("Pod", "PodGroup"):
            raise where.error(f"{mode!r} is not Pod or PodGroup", "spec.disruptionMode")
        return mode == "PodGroup"
    mode_map = get_map(spec, "disruptionMode", where, "spec")
    given = [k for k in ("single", "all") if mode_map.get(k) is not None]
    if len(given) != 1:
        raise where.error("exactly one of single and all must be set", "spec.disruptionMode")
    return given[0] == "all"


def _topology(spec: Mapping[str, Any], where: Where) -> tuple[str, ...]:
    constraints = get_map(spec, "schedulingConstraints", where, "spec")
    keys = []
    for at, item in get_maps(constraints, "topology", where, "spec.schedulingConstraints"):
        key = get_str(item, "key", where, at)
        if not key:
            raise where.error("missing", f"{at}.key")
        keys.append(key)
    if len(keys) > 1:
        raise where.error("at most one topology constraint (the API's maxItems)", "spec.schedulingConstraints.topology")
    return tuple(keys)


def _workload_ref(spec: Mapping[str, Any], where: Where, served: str) -> str:
    if served == "v1alpha2":
        ref = get_map(
            get_map(spec, "podGroupTemplateRef", where, "spec"), "workload", where, "spec.podGroupTemplateRef"
        )
        at, template = "spec.podGroupTemplateRef.workload", "podGroupTemplateName"
    else:
        ref, at, template = get_map(spec, "workloadRef", where, "spec"), "spec.workloadRef", "templateName"
    if not ref:
        return ""
    return f"{get_str(ref, 'workloadName', where, at)}/{get_str(ref, template, where, at)}"


def decode_workload(obj: object, source: str = "", *, names: bool = True) -> tuple[str, ...]:
    """A Workload (the template controllers make PodGroups from): its shape is checked and the
    names of its templates returned; kube-scheduler schedules by the PodGroups, never by this."""
    obj, _, _, _, where = object_metadata(obj, "Workload", source, True, names=names)
    served = _version(obj, "Workload", where)
    spec = get_map(obj, "spec", where, "")
    names_seen: list[str] = []
    priorities: set[tuple[str, object]] = set()  # (priorityClassName, priority) of every template

    def templates(container: Mapping[str, Any], at: str, composite: bool, depth: int) -> None:
        for key, is_composite in (("podGroupTemplates", False), ("compositePodGroupTemplates", True)):
            items = get_maps(container, key, where, at)
            if len(items) > 8:  # WorkloadMaxPodGroupTemplates
                raise where.error(f"{len(items)} templates; at most 8", f"{at}.{key}" if at else key)
            for item_at, item in items:
                name = get_str(item, "name", where, item_at)
                if not name:
                    raise where.error("missing", f"{item_at}.name")
                if name in names_seen:  # validateWorkloadTemplateNamesUniqueness: in the whole tree
                    raise where.error(f"duplicate template name {name!r}", f"{item_at}.name")
                if is_composite and depth >= 4:  # validateWorkloadTemplatesDepth (WorkloadMaxTemplateDepth)
                    raise where.error("maximum template hierarchy depth is 4", item_at)
                if is_composite and not item.get("podGroupTemplates") and not item.get("compositePodGroupTemplates"):
                    raise where.error(
                        "must have at least one child PodGroupTemplate or CompositePodGroupTemplate", item_at
                    )
                names_seen.append(name)
                priorities.add((get_str(item, "priorityClassName", where, item_at), item.get("priority")))
                _policy(item, where, f"{item_at}.schedulingPolicy", "minGroupCount" if is_composite else "minCount")
                _disruption_all(item, where, served)
                _topology(item, where)
                if is_composite:
                    templates(item, item_at, True, depth + 1)

    templates(spec, "spec", False, 1)
    if not names_seen:
        raise where.error("no podGroupTemplates", "spec.podGroupTemplates")
    if len(priorities) > 1:  # validateWorkloadPriority: one priority for the whole workload
        raise where.error(
            "all priority and priorityClassName values must be identical, detected multiple values", "spec"
        )
    return tuple(names_seen)


def _created(meta: Mapping[str, Any], where: Where) -> float:
    return get_time(meta, "creationTimestamp", where, "metadata") if meta.get("creationTimestamp") else 0.0
