"""The VolumeBinding built-in: kube-scheduler's VolumeBinding plugin as a function from a node to
the reasons the pod's claims cannot be bound or provisioned there (empty: they can), and
:func:`plan_bindings`, the choice it makes at Reserve, which the store records when the pod is
assumed (:meth:`rulesched.cluster.store.ClusterStore.assume`) and ``rulesched run`` and the
extender write to the API before binding (:mod:`rulesched.kube.volumes`). The helpers it shares
with the other volume plugins are in :mod:`rulesched.lang.builtins.volumes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rulesched.lang.builtins.volumes import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    NOTHING,
    PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    claim_of,
    not_found,
    pod_plan,
    pv_fits_node,
    storage_of,
)
from rulesched.lang.context import EvalContext
from rulesched.model import Pod
from rulesched.model.storage import (
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageState,
)

__all__ = ["COLUMNS", "DOMAINS", "UNIFORM", "Decision", "plan_bindings", "sort_claims", "volume_binding"]


# --- VolumeBinding ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Claims:
    """GetPodVolumeClaims: the pod's claims sorted out, or the PreFilter failure."""

    error: str = ""
    bound: tuple[PersistentVolumeClaim, ...] = ()
    delayed: tuple[PersistentVolumeClaim, ...] = ()  # unbound, WaitForFirstConsumer
    # claim key -> (pre-bound to it?, volume) it might take (without a selected node)
    candidates: Mapping[str, tuple[tuple[bool, PersistentVolume], ...]] = field(default_factory=dict)
    # When no claim is bound and every delayed one can only be provisioned (no selected node,
    # no volume to match, its class found): those classes. The answer then hangs on each node's
    # labels against the classes' allowed topologies alone (the common StatefulSet case).
    provision_only: tuple[StorageClass, ...] | None = None


def _binding_plan(ctx: EvalContext) -> _Claims:
    return sort_claims(ctx.pod, storage_of(ctx))


def sort_claims(pod: Pod, storage: StorageState) -> _Claims:
    bound: list[PersistentVolumeClaim] = []
    delayed: list[PersistentVolumeClaim] = []
    immediate = False
    for volume in pod.volumes:
        if not volume.claim:
            continue
        claim = claim_of(storage, pod, volume.claim)
        if claim is None:
            if volume.ephemeral:
                return _Claims(
                    f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{volume.claim}"'
                )
            return _Claims(not_found(volume.claim))
        if claim.phase == "Lost":
            return _Claims(
                f'persistentvolumeclaim "{claim.name}" bound to non-existent persistentvolume "{claim.volume_name}"'
            )
        if claim.deleting:
            return _Claims(f'persistentvolumeclaim "{claim.name}" is being deleted')
        if claim.bound:
            bound.append(claim)
            continue
        cls = storage.classes.get(storage.claim_class(claim))
        if cls is not None and cls.binding_mode == WAIT_FOR_FIRST_CONSUMER and not claim.volume_name:
            delayed.append(claim)
        else:
            immediate = True
    if immediate:
        return _Claims(UNBOUND_IMMEDIATE)
    candidates = {c.key: _candidates(c, storage) for c in delayed if not c.selected_node}
    provision_only = None
    if not bound and not any(candidates.values()) and len(candidates) == len(delayed):
        classes = [storage.classes.get(storage.claim_class(c)) for c in delayed]
        if all(cls is not None and storage.claim_class(c) for c, cls in zip(delayed, classes, strict=True)):
            provision_only = tuple(cls for cls in classes if cls is not None)
    return _Claims("", tuple(bound), tuple(delayed), candidates, provision_only)


@dataclass(frozen=True)
class Decision:
    """What VolumeBinding decided for one claim on the chosen node: bind it to the volume
    ``volume`` (a static PV), or, ``volume`` empty, have it provisioned for the node."""

    claim: str  # namespace/name
    volume: str = ""


def _candidates(claim: PersistentVolumeClaim, storage: StorageState) -> tuple[tuple[bool, PersistentVolume], ...]:
    """The volumes FindMatchingVolume could give the claim on some node, with whether each is
    pre-bound to it (the node-independent checks, once per pod): its class, unbound or bound to
    this claim, big enough, of its volume mode, not being deleted, and, unless pre-bound,
    Available and offering every access mode the claim asks for."""
    out = []
    for pv in storage.open_volumes(storage.claim_class(claim)):
        bound_to_claim = pv.claim_key == claim.key and pv.claim_uid in ("", claim.uid)
        if (pv.claim_name and not bound_to_claim) or pv.capacity < claim.request:
            continue
        if pv.volume_mode != claim.volume_mode or pv.deleting:
            continue
        if not bound_to_claim and (
            pv.phase != "Available" or not all(m in pv.access_modes for m in claim.access_modes)
        ):
            continue
        out.append((bound_to_claim, pv))
    return tuple(out)


def _matching_volume(
    candidates: tuple[tuple[bool, PersistentVolume], ...], node: Any, chosen: set[str]
) -> PersistentVolume | None:
    """FindMatchingVolume on a node: a volume pre-bound to the claim decides alone (taken if it
    fits the node, else nothing); otherwise the smallest candidate that fits."""
    best: PersistentVolume | None = None
    for bound_to_claim, pv in candidates:
        if pv.name in chosen:
            continue
        fits = pv_fits_node(pv, node)
        if bound_to_claim:
            return pv if fits else None
        if fits and (best is None or pv.capacity < best.capacity):
            best = pv
    return best


def _topology_allows(cls: Any, node: Any) -> bool:
    """MatchTopologySelectorTerms: no terms allow every node; else one term's every key."""
    labels = node.labels
    return not cls.allowed_topologies or any(
        all(labels.get(r.key) in r.values for r in term) for term in cls.allowed_topologies
    )


def find_volumes(claims: _Claims, storage: StorageState, node: Any) -> tuple[list[str], list[Decision]]:
    """FindPodVolumes: the reasons the node does not fit, and the decisions if it does."""
    node_conflict = pv_missing = unbound_fails = False
    decisions: list[Decision] = []
    for claim in claims.bound:  # checkBoundClaims: the first failing claim decides
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            pv_missing = True
            break
        if not pv_fits_node(pv, node):
            node_conflict = True
            break
    error = ""
    if claims.delayed:  # (looked at even when a bound claim failed: the reasons add up)
        to_match: list[PersistentVolumeClaim] = []
        to_provision: list[PersistentVolumeClaim] = []
        for claim in claims.delayed:
            selected = claim.selected_node
            if selected and selected != node.name:
                unbound_fails = True
                break
            (to_provision if selected else to_match).append(claim)
        if not unbound_fails:
            chosen: set[str] = set()
            for claim in sorted(to_match, key=lambda c: c.request):
                pv = _matching_volume(claims.candidates.get(claim.key, ()), node, chosen)
                if pv is None:
                    to_provision.append(claim)
                else:
                    chosen.add(pv.name)
                    decisions.append(Decision(claim.key, pv.name))
            for claim in to_provision:
                name = storage.claim_class(claim)
                cls = storage.classes.get(name)
                if not name:
                    error = f'no class for claim "{claim.key}"'
                    break
                if cls is None:
                    error = f'failed to find storage class "{name}"'
                    break
                if cls.provisioner in ("", NO_PROVISIONER) or not _topology_allows(cls, node):
                    unbound_fails = True
                    break
                decisions.append(Decision(claim.key))
    if error:
        return [error], []
    reasons = []
    if node_conflict:
        reasons.append(NODE_CONFLICT)
    if unbound_fails:
        reasons.append(BIND_CONFLICT)
    if pv_missing:
        reasons.append(PV_NOT_EXIST)
    return reasons, decisions


def volume_binding(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeBinding: bound claims' volumes reachable from the node, delayed claims bindable
    or provisionable there."""
    claims: _Claims = pod_plan(ctx, "binding", _binding_plan)
    if claims.error:
        return [claims.error]
    if not claims.bound and not claims.delayed:
        return NOTHING
    if claims.provision_only is not None:  # (find_volumes' answer, without its bookkeeping)
        for cls in claims.provision_only:
            if cls.provisioner in ("", NO_PROVISIONER) or not _topology_allows(cls, node):
                return [BIND_CONFLICT]
        return NOTHING
    return find_volumes(claims, storage_of(ctx), node)[0]


def plan_bindings(pod: Pod, storage: StorageState, node: Any) -> list[Decision]:
    """The choices VolumeBinding makes for the pod on the node (empty when every claim is bound
    or the node does not fit)."""
    claims = sort_claims(pod, storage)
    if claims.error or not claims.delayed:
        return []
    reasons, decisions = find_volumes(claims, storage, node)
    return [] if reasons else decisions


# --- for column evaluation (see rulesched.lang.builtins.volumes) ----------------------------------


def _binding_everywhere(ctx: EvalContext) -> list[str] | None:
    claims: _Claims = pod_plan(ctx, "binding", _binding_plan)
    if claims.error:
        return [claims.error]
    if not claims.bound and not claims.delayed:
        return NOTHING
    if not claims.delayed:  # bound claims only: volumes that exist and name no node fit everywhere
        volumes = storage_of(ctx).volumes
        found = [volumes.get(c.volume_name) for c in claims.bound]
        if all(pv is not None and pv.node_affinity is None for pv in found):
            return NOTHING
    if claims.provision_only is not None and any(
        cls.provisioner in ("", NO_PROVISIONER) for cls in claims.provision_only
    ):
        return [BIND_CONFLICT]
    return None


def _binding_labels(ctx: EvalContext) -> tuple[str, ...] | None:
    """Claims only to provision: the answer reads the labels the classes' topologies name.
    Otherwise volumes' node affinity may name fields (the node's name): node by node."""
    claims: _Claims = pod_plan(ctx, "binding", _binding_plan)
    if claims.provision_only is None:
        return None
    keys = {r.key for cls in claims.provision_only for term in cls.allowed_topologies for r in term}
    return tuple(sorted(keys))


UNIFORM = {"volume_binding": _binding_everywhere}
DOMAINS = {"volume_binding": _binding_labels}
COLUMNS: dict[str, Any] = {}
