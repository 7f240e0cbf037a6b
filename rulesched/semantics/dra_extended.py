"""DRA-backed extended resources (KEP-5004; kube-scheduler 1.37's DRAExtendedResource, beta, on
by default): a pod's plain ``resources.requests`` of an extended resource (``nvidia.com/gpu: 1``)
served by the devices of a DeviceClass on nodes that do not offer the resource in their
allocatable (pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go and
noderesources/fit.go's shouldDelegateResourceToDRA, at v1.37.2).

- A DeviceClass serves the resource named in its ``spec.extendedResourceName`` (of two classes
  naming one resource, the newer; equal times, the lower name) and always its implicit
  ``deviceclass.resource.kubernetes.io/<class>`` (extendedresourcecache.go).
- On a node whose allocatable has the resource (a device plugin's), the request is checked
  against the node's free amount as NodeResourcesFit checks it; on a node without it, a class
  serving it makes it DRA's: the scheduler's own claim for the pod is allocated there, with one
  ExactCount request per container (``container-<i>-request-<j>``: the container's index among
  init containers then containers, the resource's among its sorted request names), plain init
  containers reusing the requests of the containers after them and sharing the largest of
  theirs (createRequestsAndMappings); sorted by name.
- That claim is the pod's ("<pod>-extended-resources-" and 5 characters, owned by the pod,
  annotated ``resource.kubernetes.io/extended-resource-claim: "true"``), made at Reserve with
  its allocation, and named in ``status.extendedResourceClaimStatus`` with the requests'
  mappings to containers.

Rules see the pod's requests without the resources a class serves (NodeResourcesFit's part for
them is the DynamicResources filter's here, device-plugin nodes included).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from rulesched.model import Pod
from rulesched.model.dra import EXACT_COUNT, ClaimSpec, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim
from rulesched.model.objects import ContainerExtended
from rulesched.model.requests import DEVICE_CLASS_PREFIX

EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IN_MEMORY_NAME = "<extended-resources>"  # upstream's specialClaimInMemName: no valid name
_MAX_BASE = 58  # the API server's generateName: base cut to 63 - 5 characters
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """A ContainerExtendedResourceRequest: which device request serves a container's resource."""

    container: str
    resource: str
    request: str


def class_for(resource: str, classes: Mapping[str, DeviceClass]) -> DeviceClass | None:
    """The DeviceClass serving ``resource``: implicitly by its name, or by its
    extendedResourceName (the newest class naming it; equal times, the lowest name)."""
    if resource.startswith(DEVICE_CLASS_PREFIX):
        return classes.get(resource[len(DEVICE_CLASS_PREFIX) :])
    best: DeviceClass | None = None
    for cls in classes.values():
        if cls.extended_resource_name != resource:
            continue
        if best is None or (cls.created, _reverse(cls.name)) > (best.created, _reverse(best.name)):
            best = cls
    return best


def _reverse(name: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in name) + (0,)


def served(pod: Pod, classes: Mapping[str, DeviceClass]) -> dict[str, int]:
    """The extended resources of ``pod`` a class serves, with the pod's request of each (whole
    units of its aggregate request: upstream's podScalarResources)."""
    if not pod.extended_requests or not classes:
        return {}
    names = {r for c in pod.extended_requests for r in c.extended}
    return {r: pod.requests.get(r, 0) // 1000 for r in sorted(names) if class_for(r, classes) is not None}


def extended_view(pod: Pod, classes: Mapping[str, DeviceClass]) -> Pod:
    """The pod as rules see it: without the requests a class serves (kept apart in
    ``extended_dra`` for the DynamicResources filter); the pod itself when there are none."""
    wanted = served(pod, classes)
    if not wanted:
        return pod
    requests = MappingProxyType({r: v for r, v in pod.requests.items() if r not in wanted})
    return dataclasses.replace(pod, requests=requests, extended_dra=MappingProxyType(wanted))


def claim_requests(
    pod: Pod, resources: Sequence[str], classes: Mapping[str, DeviceClass]
) -> tuple[tuple[DeviceRequest, ...], tuple[RequestMapping, ...]]:
    """createRequestsAndMappings: the device requests of the pod's claim for ``resources``
    (those DRA serves on the node) and which container each serves."""
    requests: list[DeviceRequest] = []
    mappings: list[RequestMapping] = []
    containers = pod.extended_requests
    for resource in sorted(resources):
        cls = class_for(resource, classes)
        if cls is None:
            continue
        long_lived: dict[int, DeviceRequest] = {}
        long_maps: list[RequestMapping] = []
        for c in containers:
            if not c.short_lived:
                request, found = _container_request(c, resource, cls.name, ())
                if request is not None:
                    long_lived[c.index] = request
                long_maps += found
        biggest: DeviceRequest | None = None
        short_names: set[str] = set()
        short_maps: list[RequestMapping] = []
        for c in containers:
            if c.short_lived:
                later = [r for i, r in sorted(long_lived.items()) if i >= c.index]
                request, found = _container_request(c, resource, cls.name, later)
                if request is not None:
                    short_names.add(request.name)
                    if biggest is None or _count(biggest) < _count(request):
                        biggest = request
                short_maps += found
        if biggest is not None and len(short_names) > 1:
            short_maps = [
                dataclasses.replace(m, request=biggest.name) if m.request in short_names else m for m in short_maps
            ]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for _, r in sorted(long_lived.items())]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: r.name)
    return tuple(requests), tuple(mappings)


def _count(request: DeviceRequest) -> int:
    assert request.exactly is not None
    return request.exactly.count


def _container_request(
    c: ContainerExtended, resource: str, class_name: str, reusable: Sequence[DeviceRequest]
) -> tuple[DeviceRequest | None, list[RequestMapping]]:
    """createResourceRequestAndMappings for one container: the requests after it it can reuse
    first (a plain init container), then its own for what is left."""
    wanted = c.extended.get(resource, 0)
    if not wanted:
        return None, []
    mappings = []
    total = 0
    for r in reusable:
        total += _count(r)
        mappings.append(RequestMapping(c.name, resource, r.name))
        if total >= wanted:
            return None, mappings
    name = f"container-{c.index}-request-{c.names.index(resource)}"
    request = DeviceRequest(name, ExactRequest(class_name, allocation_mode=EXACT_COUNT, count=wanted - total))
    mappings.append(RequestMapping(c.name, resource, name))
    return request, mappings


def claim_name(pod: Pod) -> str:
    """The name of the claim the scheduler makes for the pod's DRA-served extended resources:
    ``<pod>-extended-resources-`` cut as the API server cuts a generateName, and 5 characters
    derived from the pod (not random as the API server's: runs repeat, and a scheduler that
    restarts finds the claim it made before)."""
    base = f"{pod.name}-extended-resources-"[:_MAX_BASE]
    digest = hashlib.sha256(f"{pod.namespace}/{pod.name}/{pod.uid}/extended".encode()).digest()
    return base + "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def earlier_claim(pod: Pod, claims: Mapping[str, ResourceClaim]) -> ResourceClaim | None:
    """The claim an earlier attempt made for the pod's extended resources, if it is still there
    (findExtendedResourceClaim: annotated as such, its controller the pod). Looked up by the
    name the pod's status gives and by :func:`claim_name`, not by scanning every claim as
    upstream does: the schedulerName is immutable, so only this scheduler makes such claims
    for its pods, under that name."""
    for name in (pod.extended_claim, claim_name(pod)):
        claim = claims.get(f"{pod.namespace}/{name}") if name else None
        if (
            claim is not None
            and claim.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true"
            and claim.owner == ("Pod", pod.name, pod.uid)
        ):
            return claim
    return None


def pod_claim(pod: Pod, requests: tuple[DeviceRequest, ...]) -> ResourceClaim:
    """The claim the scheduler makes for the pod's DRA-served extended resources, named by
    :func:`claim_name` (``run`` creates it under that name)."""
    return ResourceClaim(
        name=claim_name(pod),
        namespace=pod.namespace,
        uid=f"{pod.uid or pod.key}/extended-resources",
        annotations=MappingProxyType({EXTENDED_CLAIM_ANNOTATION: "true"}),
        owner=("Pod", pod.name, pod.uid),
        spec=ClaimSpec(requests=requests),
    )
