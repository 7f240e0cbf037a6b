"""DynamicResources' PreBind: the claims' allocations and reservations written before the binding,
and released if the binding fails (``rulesched run``).

The store took the devices when the pod was assumed (:mod:`rulesched.cluster.dra`); the
scheduler's thread turns the claims it assumed into :class:`ClaimWrite`\\ s, and a binding worker
(:mod:`rulesched.run.workers`) makes them, as kube-scheduler's bindClaim does: the claim read
afresh; refused if it is being deleted, or (for one to allocate) allocated elsewhere in the
meantime; the finalizer ``resource.kubernetes.io/delete-protection`` added with an update of the
claim (a status update keeps no metadata); then ``status.allocation`` (with its
``allocationTimestamp``) and the pod in ``status.reservedFor`` in one status update; a conflict
(someone else changed the claim) is retried with the claim read again, up to five times. A
binding that fails afterwards takes the pod out of ``reservedFor`` again (upstream's Unreserve);
the allocation stays, as upstream leaves it, for the next attempt or the resourceclaim
controller to undo.

The claim made for a pod's DRA-served extended resources (KEP-5004) is created first (upstream's
createExtendedResourceClaimInAPI; rulesched gives the name the store has rather than asking for
a generated one), then allocated and reserved as the others, then named with its request
mappings in the pod's ``status.extendedResourceClaimStatus`` (patchPodExtendedResourceClaimStatus);
a binding that fails deletes it again (unreserveExtendedResourceClaim).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rulesched.errors import ConflictError, KubeError, NotFoundError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import RESOURCE_CLAIMS
from rulesched.model.dra import FINALIZER, Allocation, DeviceToleration, ResourceClaim
from rulesched.model.objects import NodeSelectorTerm
from rulesched.model.quantity import format_quantity

log = logging.getLogger(__name__)
ATTEMPTS = 5  # client-go's retry.DefaultRetry: 5 steps


@dataclass(frozen=True)
class ClaimWrite:
    """One claim's PreBind: the allocation to write (None: the claim is allocated already, the
    pod only joins its ``reservedFor``) and the consumer entry for the pod."""

    namespace: str
    name: str
    allocation: dict[str, Any] | None
    consumer: dict[str, str]
    create: dict[str, Any] | None = None  # the claim to create first (the extended resources')
    mappings: tuple[dict[str, str], ...] = ()  # ... and its requests' mappings, for the pod's status


def claim_writes(
    claims: Sequence[ResourceClaim], allocated: frozenset[str], pod: Any, extended: Sequence[Any] = ()
) -> list[ClaimWrite]:
    """The writes for ``pod``'s assumed ``claims``; ``allocated``: the keys of those whose
    allocation the scheduler made (the others are only reserved); ``extended``: the request
    mappings of the claim made for its extended resources (``pod.extended_claim``: created first)."""
    consumer = {"resource": "pods", "name": pod.name, "uid": pod.uid}
    out = []
    for claim in claims:
        alloc = allocation_body(claim.allocation) if claim.key in allocated and claim.allocation else None
        if pod.extended_claim and claim.name == pod.extended_claim:
            mappings = tuple(
                {"containerName": m.container, "resourceName": m.resource, "requestName": m.request} for m in extended
            )
            out.append(ClaimWrite(claim.namespace, claim.name, alloc, consumer, claim_body(claim), mappings))
        else:
            out.append(ClaimWrite(claim.namespace, claim.name, alloc, consumer))
    return out


def claim_body(claim: ResourceClaim) -> dict[str, Any]:
    """A claim made by the scheduler, as created: owned by its pod, its annotations, its
    requests (ExactCount requests of a class: what extended resources' claims hold)."""
    requests = []
    for request in claim.spec.requests:
        assert request.exactly is not None
        exactly = request.exactly
        body = {"deviceClassName": exactly.device_class_name, "allocationMode": exactly.allocation_mode}
        body["count"] = exactly.count  # type: ignore[assignment]
        requests.append({"name": request.name, "exactly": body})
    meta: dict[str, Any] = {"name": claim.name, "namespace": claim.namespace, "annotations": dict(claim.annotations)}
    if claim.owner is not None:
        kind, name, uid = claim.owner
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": True}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": requests}},
    }


def write_claims(api: KubeApi, writes: Sequence[ClaimWrite], timeout: float | None = None) -> None:
    """Make every write; if one fails, release the ones made and raise its error."""
    done: list[ClaimWrite] = []
    for write in writes:
        try:
            _write(api, write, timeout)
        except KubeError:
            release_claims(api, [*done, write] if write.create is not None else done, timeout)
            raise
        done.append(write)


def _write(api: KubeApi, write: ClaimWrite, timeout: float | None) -> None:
    if write.create is not None:
        api.create(RESOURCE_CLAIMS, write.namespace, write.create)
    _allocate(api, write, timeout)
    if write.mappings:
        status = {"resourceClaimName": write.name, "requestMappings": list(write.mappings)}
        api.patch_pod_status(
            write.namespace, write.consumer["name"], {"status": {"extendedResourceClaimStatus": status}}
        )


def _allocate(api: KubeApi, write: ClaimWrite, timeout: float | None) -> None:
    for attempt in range(ATTEMPTS):
        claim = api.get(RESOURCE_CLAIMS, write.namespace, write.name, timeout=timeout)
        meta = claim.setdefault("metadata", {})
        if claim.get("status") is None:
            claim["status"] = {}
        status = claim["status"]
        if meta.get("deletionTimestamp"):
            raise KubeError(f"claim {write.namespace}/{write.name} got deleted in the meantime")
        try:
            if write.allocation is not None:
                if status.get("allocation"):
                    raise KubeError(f"claim {write.namespace}/{write.name} got allocated elsewhere in the meantime")
                finalizers = meta.get("finalizers") or []
                if FINALIZER not in finalizers:
                    meta["finalizers"] = [*finalizers, FINALIZER]
                    claim = api.replace(RESOURCE_CLAIMS, write.namespace, write.name, claim, timeout=timeout)
                    status = claim.setdefault("status", {})
                status["allocation"] = write.allocation
            elif not status.get("allocation"):
                raise KubeError(f"claim {write.namespace}/{write.name} got deallocated elsewhere in the meantime")
            allocation = status["allocation"]
            if not allocation.get("allocationTimestamp"):  # (DRADeviceBindingConditions, on in 1.37)
                allocation["allocationTimestamp"] = _now()
            reserved = status.get("reservedFor") or []
            if not any(r.get("uid") == write.consumer["uid"] for r in reserved):
                status["reservedFor"] = [*reserved, write.consumer]
            api.replace_status(RESOURCE_CLAIMS, write.namespace, write.name, claim, timeout=timeout)
            return
        except ConflictError:
            if attempt == ATTEMPTS - 1:
                raise
            time.sleep(0.01 * (attempt + 1))


def release_claims(api: KubeApi, writes: Sequence[ClaimWrite], timeout: float | None = None) -> None:
    """The pod out of the claims' ``reservedFor`` again, newest first; a failure is logged (the
    claim may be gone; the resourceclaim controller cleans up after pods that never ran)."""
    for write in reversed(writes):
        if write.create is not None:  # (the scheduler's own claim: deleted, its finalizer first)
            delete_claim(api, write.namespace, write.name, timeout)
            continue
        for _ in range(ATTEMPTS):
            try:
                claim = api.get(RESOURCE_CLAIMS, write.namespace, write.name, timeout=timeout)
                status = claim.get("status") or {}
                reserved = status.get("reservedFor") or []
                kept = [r for r in reserved if r.get("uid") != write.consumer["uid"]]
                if len(kept) == len(reserved):
                    break
                status["reservedFor"] = kept or None
                claim["status"] = status
                api.replace_status(RESOURCE_CLAIMS, write.namespace, write.name, claim, timeout=timeout)
                break
            except ConflictError:
                continue
            except KubeError as err:
                log.warning("could not release a claim", extra={"object": write.name, "reason": str(err)})
                break


def delete_claim(api: KubeApi, namespace: str, name: str, timeout: float | None = None) -> None:
    """deleteClaim: the finalizer removed, then the claim deleted; a failure is logged (a claim
    already gone is not one)."""
    try:
        for _ in range(ATTEMPTS):
            claim = api.get(RESOURCE_CLAIMS, namespace, name, timeout=timeout)
            meta = claim.setdefault("metadata", {})
            finalizers = meta.get("finalizers") or []
            if FINALIZER not in finalizers:
                break
            meta["finalizers"] = [f for f in finalizers if f != FINALIZER]
            try:
                api.replace(RESOURCE_CLAIMS, namespace, name, claim, timeout=timeout)
                break
            except ConflictError:
                continue
        api.delete(RESOURCE_CLAIMS, namespace, name)
    except NotFoundError:
        return
    except KubeError as err:
        log.warning("could not delete a claim", extra={"object": f"{namespace}/{name}", "reason": str(err)})


def deallocate_claim(api: KubeApi, namespace: str, name: str, pod_uid: str, timeout: float | None = None) -> None:
    """PostFilter's deallocation: the claim's allocation, reservations and device statuses
    cleared in one status update, if no pod but this one (``pod_uid``) uses it; a conflict or a
    change in the meantime leaves it (the next attempt looks again)."""
    claim = api.get(RESOURCE_CLAIMS, namespace, name, timeout=timeout)
    status = claim.get("status") or {}
    reserved = status.get("reservedFor") or []
    if not status.get("allocation") or any(r.get("uid") != pod_uid for r in reserved):
        return
    for key in ("allocation", "reservedFor", "devices"):
        status.pop(key, None)
    claim["status"] = status
    api.replace_status(RESOURCE_CLAIMS, namespace, name, claim, timeout=timeout)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the model's allocation as the API has it --------------------------------------------------------


def allocation_body(alloc: Allocation) -> dict[str, Any]:
    """``status.allocation`` for the API (resource.k8s.io/v1)."""
    results = []
    for r in alloc.devices:
        entry: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
        if r.admin_access is not None:
            entry["adminAccess"] = r.admin_access
        if r.tolerations:
            entry["tolerations"] = [_toleration(t) for t in r.tolerations]
        if r.share_id:
            entry["shareID"] = r.share_id
        if r.consumed_capacity:
            entry["consumedCapacity"] = {k: format_quantity(v) for k, v in r.consumed_capacity.items()}
        if r.binding_conditions:
            entry["bindingConditions"] = list(r.binding_conditions)
        if r.binding_failure_conditions:
            entry["bindingFailureConditions"] = list(r.binding_failure_conditions)
        results.append(entry)
    devices: dict[str, Any] = {"results": results}
    if alloc.config:
        devices["config"] = [
            {"source": c.source, **({"requests": list(c.requests)} if c.requests else {}), "opaque": dict(c.config)}
            for c in alloc.config
        ]
    body: dict[str, Any] = {"devices": devices}
    if alloc.node_selector is not None:
        body["nodeSelector"] = {"nodeSelectorTerms": [_term(t) for t in alloc.node_selector]}
    return body


def _toleration(t: DeviceToleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _term(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, reqs in (("matchExpressions", term.match_expressions), ("matchFields", term.match_fields)):
        if reqs:
            out[key] = [
                {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})} for r in reqs
            ]
    return out
