"""A pod's resource requests, computed the way kube-scheduler computes them.

The scheduler never reads ``spec.containers[*].resources`` directly; it asks
``k8s.io/component-helpers/resource.PodRequests``, and a simulator that sums containers naively
disagrees with the real scheduler on every pod with an init container, a sidecar or an overhead.
This module follows that function:

* regular containers add up;
* a restartable init container (a *sidecar*, ``restartPolicy: Always``) keeps running, so it adds
  to that sum and to a running sidecar total;
* a plain init container runs alone beside the sidecars started before it, so it needs its own
  request plus that sidecar total, and the pod needs the largest such moment;
* the pod requests ``max(running sum, largest init moment)`` per resource, then pod-level
  ``spec.resources`` (where set) replaces cpu/memory/hugepages, then ``spec.overhead`` adds on.

Two API-server rules are applied first, because objects written by hand have not been through the
API server: a container with a limit but no request for a resource requests the limit, and
pod-level limits default pod-level requests. Pods resized in place (``status.containerStatuses``
with ``allocatedResources``/``resources``) count the larger of spec and status, each summed over
the containers before the larger is taken (component-helpers at v0.37.2, after kubernetes PR
#140047 of 1.37, which stopped taking the larger container by container), as upstream does with
the InPlacePodVerticalScaling gate on (GA); with the pod-level status maps set (1.36's
InPlacePodLevelResourcesVerticalScaling, beta, on) those stand for the containers' sums, and
pod-level requests count the larger of spec and status too.

``nonzero_requests`` repeats the computation with each container that names no cpu (memory)
request counted at 100m cpu (200Mi memory): kube-scheduler's ``NonZeroRequested``, used so that
scoring spreads best-effort pods instead of seeing them as free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from rulesched.model.fields import Where, get_map, get_maps, get_resources, get_str, memoized
from rulesched.model.objects import ContainerExtended
from rulesched.model.quantity import MILLI

# kube-scheduler's schedutil.DefaultMilliCPURequest and DefaultMemoryRequest, in milli-units.
DEFAULT_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 2**20 * MILLI

_CPU = "cpu"
_MEMORY = "memory"

Resources = dict[str, int]


def _add(into: Resources, more: Mapping[str, int]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, 0) + amount


def _max_into(into: Resources, other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if amount > into.get(name, -1):
            into[name] = amount


def _max_of(*lists: Mapping[str, int]) -> Resources:
    out: Resources = {}
    for one in lists:
        _max_into(out, one)
    return out


def _supported_at_pod_level(name: str) -> bool:
    return name in (_CPU, _MEMORY) or name.startswith("hugepages-")


class _Container:
    """One container's requests after limit defaulting, and whether it is a sidecar."""

    __slots__ = ("name", "requests", "sidecar")

    def __init__(self, name: str, requests: Resources, sidecar: bool) -> None:
        self.name = name
        self.requests = requests
        self.sidecar = sidecar


def _container_requests_of(c: Mapping[str, Any], where: Where, at: str) -> Resources:
    """One container's requests, with limits standing in for missing requests."""
    res = get_map(c, "resources", where, at)
    if not res:
        return {}

    def build() -> Resources:
        rat = f"{at}.resources"
        requests = get_resources(res, "requests", where, rat, named=True)
        for name, amount in get_resources(res, "limits", where, rat, named=True).items():
            requests.setdefault(name, amount)  # the API server's defaulting
        return requests

    # shared between containers with equal resources: never mutated after this
    return memoized(where, "resources", res, build)


def _containers(spec: Mapping[str, Any], key: str, where: Where) -> list[_Container]:
    init = key == "initContainers"
    return [
        _Container(
            get_str(c, "name", where, path),
            _container_requests_of(c, where, path),
            init and is_sidecar(c, where, path),
        )
        for path, c in get_maps(spec, key, where, "spec")
    ]


def _aggregate(
    regular: Iterable[Mapping[str, int]],
    init: Iterable[tuple[Mapping[str, int], bool]],
    non_missing: Mapping[str, int],
) -> Resources:
    """component-helpers' aggregateContainerResourcesByFn over already chosen request lists."""
    result: Resources = {}
    for requests in regular:
        _add(result, _fill(requests, non_missing))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for requests, sidecar in init:
        requests = _fill(requests, non_missing)
        if sidecar:
            _add(result, requests)
            _add(sidecars, requests)
            _max_into(init_peak, sidecars)
        else:
            moment = dict(requests)
            _add(moment, sidecars)
            _max_into(init_peak, moment)
    _max_into(result, init_peak)
    return result


def _fill(requests: Mapping[str, int], non_missing: Mapping[str, int]) -> Mapping[str, int]:
    """applyNonMissing: defaults for resources the container does not name (an explicit 0
    stays 0)."""
    if not non_missing or all(name in requests for name in non_missing):
        return requests
    filled = dict(requests)
    for name, amount in non_missing.items():
        filled.setdefault(name, amount)
    return filled


class _StatusRequests:
    """What the kubelet reports per container of a pod resized in place, and for the pod as a
    whole (``status.allocatedResources``, ``status.resources.requests``: 1.36's beta
    InPlacePodLevelResourcesVerticalScaling, on by default)."""

    __slots__ = ("allocated", "actual", "infeasible", "pod_allocated", "pod_actual")

    def __init__(
        self,
        allocated: dict[str, Resources],
        actual: dict[str, Resources],
        infeasible: bool,
        pod_allocated: Resources | None = None,
        pod_actual: Resources | None = None,
    ) -> None:
        self.allocated = allocated
        self.actual = actual
        self.infeasible = infeasible
        self.pod_allocated = pod_allocated
        self.pod_actual = pod_actual


def _status_requests(status: Mapping[str, Any], where: Where) -> _StatusRequests | None:
    allocated: dict[str, Resources] = {}
    actual: dict[str, Resources] = {}
    pod_allocated = pod_actual = None
    if status.get("allocatedResources") is not None:
        pod_allocated = get_resources(status, "allocatedResources", where, "status")
    pod_resources = get_map(status, "resources", where, "status")
    if pod_resources.get("requests") is not None:
        pod_actual = get_resources(pod_resources, "requests", where, "status.resources")
    for key in ("containerStatuses", "initContainerStatuses"):
        for path, cs in get_maps(status, key, where, "status"):
            if cs.get("allocatedResources") is None and cs.get("resources") is None:
                continue
            name = get_str(cs, "name", where, path)
            if cs.get("allocatedResources") is not None:
                allocated[name] = get_resources(cs, "allocatedResources", where, path)
            res = get_map(cs, "resources", where, path)
            if res.get("requests") is not None:
                actual[name] = get_resources(res, "requests", where, f"{path}.resources")
    if not allocated and not actual and pod_allocated is None and pod_actual is None:
        return None
    infeasible = False
    for path, cond in get_maps(status, "conditions", where, "status"):
        if get_str(cond, "type", where, path) == "PodResizePending":
            infeasible = get_str(cond, "reason", where, path) == "Infeasible"
            break
    return _StatusRequests(allocated, actual, infeasible, pod_allocated, pod_actual)


def _container_requests(
    regular: list[_Container],
    init: list[_Container],
    status: _StatusRequests | None,
    non_missing: Mapping[str, int],
) -> Resources:
    """AggregateContainerRequests: the spec, or with in-place resizes the larger of spec,
    allocated and actual (only the status ones when the resize is infeasible). With the pod-level
    status maps both set (the kubelet's aggregates) they stand for the containers' statuses."""
    spec = _aggregate((c.requests for c in regular), ((c.requests, c.sidecar) for c in init), non_missing)
    if status is None:
        return spec
    if status.pod_allocated is not None and status.pod_actual is not None:
        pod_sums = (status.pod_allocated, status.pod_actual)
        return _max_of(*pod_sums) if status.infeasible else _max_of(spec, *pod_sums)
    empty: Resources = {}
    fallback = {c.name: (empty if status.infeasible else c.requests) for c in (*regular, *init)}

    def allocated(c: _Container) -> Mapping[str, int]:
        return status.allocated.get(c.name, fallback[c.name])

    def actual(c: _Container) -> Mapping[str, int]:
        found = status.actual.get(c.name)
        return allocated(c) if found is None else found

    sums = [
        _aggregate(map(pick, regular), ((pick(c), c.sidecar) for c in init), non_missing)
        for pick in (allocated, actual)
    ]
    return _max_of(*sums) if status.infeasible else _max_of(spec, *sums)


def _effective_pod_level(pod_level: Resources, status: _StatusRequests | None) -> Resources:
    """PodRequests' pod-level requests with the pod-level status set (effectivePodLevelResources):
    the larger of spec (none when the resize is infeasible), status.resources.requests and
    status.allocatedResources, for the resources supported at pod level."""
    if not pod_level or status is None or status.pod_actual is None:
        return pod_level
    spec = {} if status.infeasible else pod_level
    merged = _max_of(spec, status.pod_actual, status.pod_allocated or {})
    return {k: v for k, v in merged.items() if _supported_at_pod_level(k)}


def _pod_level_requests(spec: Mapping[str, Any], containers: Resources, where: Where) -> Resources:
    """Pod-level ``spec.resources.requests`` after the API server's defaulting: a resource with a
    pod-level limit but no request takes the containers' total, or failing that the limit."""
    res = get_map(spec, "resources", where, "spec")
    if not res:
        return {}
    requests = get_resources(res, "requests", where, "spec.resources")
    for name, limit in get_resources(res, "limits", where, "spec.resources").items():
        if _supported_at_pod_level(name) and name not in requests:
            in_containers = name in (_CPU, _MEMORY) and name in containers
            requests[name] = containers[name] if in_containers else limit
    return {k: v for k, v in requests.items() if _supported_at_pod_level(k)}


def _pod_level_set(spec: Mapping[str, Any], where: Where) -> bool:
    """IsPodLevelResourcesSet: pod-level requests or limits name a supported resource."""
    res = get_map(spec, "resources", where, "spec")
    names = [*get_map(res, "requests", where, "spec.resources")]
    names += get_map(res, "limits", where, "spec.resources")
    return any(_supported_at_pod_level(str(n)) for n in names)


def pod_requests(spec: Mapping[str, Any], status: Mapping[str, Any], where: Where) -> tuple[Resources, Resources]:
    """``(requests, nonzero_requests)`` of a pod, in milli-units.

    ``requests`` holds every resource any container, the pod level or the overhead names (an
    explicit zero included); ``nonzero_requests`` holds just ``cpu`` and ``memory``. With a
    memo the pair may be shared with other pods: treat both as read-only.
    """
    if where.memo is None:
        return _pod_requests(spec, status, where)
    return memoized(where, "requests", _inputs(spec, status), lambda: _pod_requests(spec, status, where))


def _inputs(spec: Mapping[str, Any], status: Mapping[str, Any]) -> list[object] | None:
    """Everything :func:`pod_requests` reads, gathered unchecked to key the memo; ``None`` when a
    shape is wrong, so that the checked path runs and reports it."""
    inputs: list[object] = [spec.get("overhead"), spec.get("resources")]
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        if items is None:
            continue
        if type(items) is not list:
            return None
        for c in items:
            if type(c) is not dict:
                return None
            inputs.append((key, c.get("name"), c.get("resources"), c.get("restartPolicy")))
    resized = False
    if status.get("allocatedResources") is not None or status.get("resources") is not None:
        inputs.append(("pod", status.get("allocatedResources"), status.get("resources")))
        resized = True
    for key in ("containerStatuses", "initContainerStatuses"):
        items = status.get(key)
        if items is None:
            continue
        if type(items) is not list:
            return None
        for cs in items:
            if type(cs) is not dict:
                return None
            if cs.get("allocatedResources") is not None or cs.get("resources") is not None:
                inputs.append((cs.get("name"), cs.get("allocatedResources"), cs.get("resources")))
                resized = True
    if resized:  # conditions' types and reasons matter, their timestamps do not
        conditions = status.get("conditions")
        if conditions is not None and type(conditions) is not list:
            return None
        for cond in conditions or ():
            if type(cond) is not dict:
                return None
            inputs.append((cond.get("type"), cond.get("reason")))
    return inputs


def _pod_requests(spec: Mapping[str, Any], status: Mapping[str, Any], where: Where) -> tuple[Resources, Resources]:
    regular = _containers(spec, "containers", where)
    init = _containers(spec, "initContainers", where)
    resized = _status_requests(status, where) if status else None
    overhead = get_resources(spec, "overhead", where, "spec")
    spec_only = _aggregate((c.requests for c in regular), ((c.requests, c.sidecar) for c in init), {})
    pod_level = _effective_pod_level(_pod_level_requests(spec, spec_only, where), resized)

    def total(non_missing: Mapping[str, int], containers: Resources | None = None) -> Resources:
        if containers is None:
            containers = _container_requests(regular, init, resized, non_missing)
        containers.update(pod_level)
        _add(containers, overhead)
        return containers

    requests = total({}, spec_only if resized is None else None)
    defaults = {_CPU: DEFAULT_CPU_REQUEST, _MEMORY: DEFAULT_MEMORY_REQUEST}
    if spec.get("resources") and _pod_level_set(spec, where):
        # upstream's getNonMissingContainerRequests: with pod-level resources, default only what
        # neither the containers nor the pod level name
        defaults = {k: v for k, v in defaults.items() if k not in requests}
    named = resized is None and all(_CPU in c.requests and _MEMORY in c.requests for c in (*regular, *init))
    nonzero = total(defaults) if defaults and not named else requests
    return requests, {_CPU: nonzero.get(_CPU, 0), _MEMORY: nonzero.get(_MEMORY, 0)}


def is_sidecar(container: Mapping[str, Any], where: Where, at: str) -> bool:
    """An init container that keeps running beside the regular ones (``restartPolicy: Always``)."""
    return get_str(container, "restartPolicy", where, at) == "Always"


DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix


def is_extended(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName: an extended resource (a qualified name outside the
    ``kubernetes.io/`` domains, not ``requests.*``) or a device class's implicit one."""
    if name.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def extended_requests(spec: Mapping[str, Any], where: Where) -> tuple[ContainerExtended, ...]:
    """The containers (init containers first, as upstream indexes them) that request an
    extended resource, with what DRA-backed extended resources (KEP-5004) need of each: its
    index, whether it is a plain init container (short-lived), its request names sorted and the
    whole units it asks of each extended resource."""
    out = []
    index = 0
    for key in ("initContainers", "containers"):
        for c in _containers(spec, key, where):
            wanted = {n: v // MILLI for n, v in c.requests.items() if is_extended(n) and v > 0 and v % MILLI == 0}
            if wanted:
                short = key == "initContainers" and not c.sidecar
                out.append(ContainerExtended(index, c.name, short, tuple(sorted(c.requests)), MappingProxyType(wanted)))
            index += 1
    return tuple(out)
