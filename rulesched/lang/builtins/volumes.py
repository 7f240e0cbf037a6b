"""Volume built-ins: kube-scheduler's VolumeRestrictions, NodeVolumeLimits, VolumeBinding and
VolumeZone, each as one function from a node to the list of reasons it fails there (empty: fits);
VolumeBinding, the largest, is in :mod:`rulesched.lang.builtins.volume_binding`, which uses the
helpers here.

They read the cluster's storage objects through :class:`rulesched.lang.context.ClusterView`
(``storage``, ``claim_users``). Upstream splits each plugin into PreFilter (claims missing,
unbound immediate claims: every node fails alike) and Filter (per node); here the pod-wide part
is worked out once per pod and cycle into ``ctx.scratch`` and reported on every node, so a
rule's reasons are upstream's exact messages either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang.builtins.matching import node_selector_term_matches
from rulesched.lang.context import EvalContext
from rulesched.lang.types import NUMBER
from rulesched.model import Pod
from rulesched.model.storage import (
    EMPTY_STORAGE,
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageState,
)

__all__ = [
    "COLUMNS",
    "DOMAINS",
    "UNIFORM",
    "pv_fits_node",
    "volume_limits",
    "volume_restrictions",
    "volume_zone",
]

DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
MAX_VOLUMES = "node(s) exceed max volume count"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
ZONE_CONFLICT = "node(s) had no available volume zone"
ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"  # node allocatable keys of old (GetCSIAttachLimitKey)
# The labels VolumeZone compares, and the GA label a beta one may be matched against.
ZONE_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
_GA = {ZONE_LABELS[0]: ZONE_LABELS[2], ZONE_LABELS[1]: ZONE_LABELS[3]}
NOTHING: list[str] = []


def not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def storage_of(ctx: EvalContext) -> StorageState:
    found = getattr(ctx.cluster, "storage", None)
    return found if isinstance(found, StorageState) else EMPTY_STORAGE


def claim_of(storage: StorageState, pod: Pod, name: str) -> PersistentVolumeClaim | None:
    return storage.claims.get(f"{pod.namespace}/{name}")


def pod_plan(ctx: EvalContext, name: str, build: Any) -> Any:
    """Per pod and cycle: what the plugin's PreFilter works out."""
    key = ("volumes", name)
    found = ctx.scratch.get(key)
    if found is None:
        found = ctx.scratch[key] = build(ctx)
    return found


def pv_fits_node(pv: PersistentVolume, node: Any) -> bool:
    """CheckNodeAffinity: the volume's required node affinity (terms ORed) holds on the node."""
    terms = pv.node_affinity
    return terms is None or any(node_selector_term_matches(t, node) for t in terms)


# --- VolumeRestrictions ------------------------------------------------------------------------


def _restrictions_plan(ctx: EvalContext) -> tuple[list[str] | None, tuple[Any, ...], list[str]]:
    """(the answer on every node, if it is node-independent; the pod's inline disks; the answer
    where no disk conflicts)."""
    error, in_use = _restrictions_claims(ctx)
    if error:
        return [error], (), [error]
    disks = tuple(v for v in ctx.pod.volumes if v.disk)
    answer = [RWOP_CONFLICT] if in_use else NOTHING
    return (None if disks else answer), disks, answer


def _restrictions_claims(ctx: EvalContext) -> tuple[str, bool]:
    """(a claim-lookup failure, whether a ReadWriteOncePod claim of the pod is in use)."""
    pod, storage = ctx.pod, storage_of(ctx)
    in_use = False
    users = getattr(ctx.cluster, "claim_users", None)
    for volume in pod.volumes:
        if not volume.claim or volume.ephemeral:
            continue
        claim = claim_of(storage, pod, volume.claim)
        if claim is None:
            return not_found(volume.claim), False
        if READ_WRITE_ONCE_POD in claim.access_modes and users is not None and users(claim.key) > 0:
            in_use = True
    return "", in_use


def _disk_conflict(wanted: Any, existing: Pod) -> bool:
    for other in existing.volumes:
        if not other.disk or other.disk[0] != wanted.disk[0]:
            continue
        kind = wanted.disk[0]
        both_read_only = wanted.read_only and other.read_only
        if kind == "aws" and other.disk == wanted.disk:
            return True
        if kind in ("gce", "iscsi") and other.disk == wanted.disk and not both_read_only:
            return True
        if (
            kind == "rbd"
            and other.disk == wanted.disk
            and set(wanted.monitors) & set(other.monitors)
            and not both_read_only
        ):
            return True
    return False


def volume_restrictions(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeRestrictions: inline disks shared with the node's pods, and ReadWriteOncePod
    claims another pod already uses."""
    everywhere, disks, answer = pod_plan(ctx, "restrictions", _restrictions_plan)
    if everywhere is not None:
        return everywhere  # type: ignore[no-any-return]
    for volume in disks:
        if any(_disk_conflict(volume, p) for p in node.pods):
            return [DISK_CONFLICT]
    return answer  # type: ignore[no-any-return]


# --- NodeVolumeLimits (CSI) ----------------------------------------------------------------------


def _attachable(pod: Pod, storage: StorageState, new: bool) -> dict[str, str] | str:
    """Unique volume name -> CSI driver for the pod's claims (filterAttachableVolumes); for the
    pod being scheduled, a missing claim is the error message instead."""
    out: dict[str, str] = {}
    for volume in pod.volumes:
        if not volume.claim:
            continue
        claim = claim_of(storage, pod, volume.claim)
        if claim is None:
            if new:
                return f"looking up PVC {pod.namespace}/{volume.claim}: {not_found(volume.claim)}"
            continue
        driver, handle = "", ""
        pv = storage.volumes.get(claim.volume_name) if claim.volume_name else None
        if pv is not None:
            driver, handle = pv.csi_driver, pv.csi_handle
        else:  # not bound yet (or its volume is gone): the class's provisioner will attach it
            cls = storage.classes.get(storage.claim_class(claim))
            if cls is not None and storage.claim_class(claim):
                driver, handle = cls.provisioner, f"\0{claim.key}"  # (upstream: a random prefix)
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    return out


def _limit(node: Any, storage: StorageState, driver: str) -> int | None:
    """The node's attach limit for a driver: its CSINode's count, else the node's
    ``attachable-volumes-csi-DRIVER`` allocatable (milli-units), else none."""
    csinode = storage.csinodes.get(node.name)
    if csinode is not None:
        found = csinode.limits.get(driver)
        if found is not None:
            return found
    amount = node.allocatable.get(ATTACH_LIMIT_PREFIX + driver)
    return None if amount is None else amount // 1000


def _limits_plan(ctx: EvalContext) -> tuple[str, dict[str, dict[str, str]]]:
    """(a claim-lookup failure; the pod's new volumes by driver)."""
    new = _attachable(ctx.pod, storage_of(ctx), True)
    if isinstance(new, str):
        return new, {}
    by_driver: dict[str, dict[str, str]] = {}
    for unique, driver in new.items():
        by_driver.setdefault(driver, {})[unique] = driver
    return "", by_driver


def volume_limits(ctx: EvalContext, node: Any) -> list[str]:
    """NodeVolumeLimits: the CSI volumes attached to the node, per driver, within its limit."""
    error, by_driver = pod_plan(ctx, "limits", _limits_plan)
    if error:
        return [error]
    if not by_driver:
        return NOTHING
    storage = storage_of(ctx)
    attached: dict[str, str] | None = None
    for driver, new in by_driver.items():
        limit = _limit(node, storage, driver)
        if limit is None:
            continue
        if attached is None:  # the node's pods' volumes, counted once, when some limit applies
            attached = {}
            for existing in node.pods:
                if existing.volumes:
                    found = _attachable(existing, storage, False)
                    assert isinstance(found, dict)
                    attached.update(found)
        in_use = sum(1 for d in attached.values() if d == driver)
        wanted = sum(1 for unique in new if unique not in attached)
        if in_use + wanted > limit:
            return [MAX_VOLUMES]
    return NOTHING


# --- VolumeZone ----------------------------------------------------------------------------------


def _zone_plan(ctx: EvalContext) -> tuple[str, tuple[tuple[str, frozenset[str]], ...]]:
    """(a lookup failure, the bound volumes' zone labels as (key, allowed values))."""
    pod, storage = ctx.pod, storage_of(ctx)
    found: list[tuple[str, frozenset[str]]] = []
    for volume in pod.volumes:
        if not volume.claim or volume.ephemeral:
            continue
        claim = claim_of(storage, pod, volume.claim)
        if claim is None:
            return not_found(volume.claim), ()
        if not claim.volume_name:
            name = storage.claim_class(claim)
            if not name:
                return "PersistentVolumeClaim had no pv name and storageClass name", ()
            cls = storage.classes.get(name)
            if cls is None:
                return f'storageclass.storage.k8s.io "{name}" not found', ()
            if cls.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return "PersistentVolume had no name", ()
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return f'persistentvolume "{claim.volume_name}" not found', ()
        for key in ZONE_LABELS:
            value = pv.labels.get(key)
            if value is not None:
                found.append((key, frozenset(v.strip() for v in value.split("__"))))
    return "", tuple(found)


def volume_zone(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeZone: the zone and region labels of the pod's bound volumes match the node's (a
    node without any such label takes any volume)."""
    error, zones = pod_plan(ctx, "zone", _zone_plan)
    if error:
        return [error]
    if not zones:
        return NOTHING
    labels: Mapping[str, str] = node.labels
    if not any(key in labels for key in ZONE_LABELS):
        return NOTHING
    for key, values in zones:
        value = labels.get(key)
        if value is None:
            value = labels.get(_GA.get(key, key))
        if value is None or value not in values:
            return [ZONE_CONFLICT]
    return NOTHING


def claim_keys(pod: Pod) -> Sequence[str]:
    """``namespace/name`` of each claim the pod mounts (the store counts their users)."""
    return [f"{pod.namespace}/{c}" for c in pod.claims]


# --- for column evaluation (rulesched.lang.evaluation.vectorise) ----------------------------------
# A walk evaluates the volume filters on every node it looks at, for every pod with claims; for
# the common pods their answers are one value everywhere (no inline disk, nothing to attach),
# one per group of nodes alike in a few labels (claims only to provision: the classes' allowed
# topologies; bound volumes: their zone labels), or a comparison of per-node counts (attach
# limits). These hooks say which, per pod, from the plan each built-in keeps in ctx.scratch.


def _restrictions_everywhere(ctx: EvalContext) -> list[str] | None:
    everywhere: list[str] | None = pod_plan(ctx, "restrictions", _restrictions_plan)[0]
    return everywhere


def _limits_everywhere(ctx: EvalContext) -> list[str] | None:
    error, by_driver = pod_plan(ctx, "limits", _limits_plan)
    if error:
        return [error]
    return NOTHING if not by_driver else None


def _zone_everywhere(ctx: EvalContext) -> list[str] | None:
    error, zones = pod_plan(ctx, "zone", _zone_plan)
    if error:
        return [error]
    return NOTHING if not zones else None


def _zone_labels(ctx: EvalContext) -> tuple[str, ...]:
    return ZONE_LABELS


def claim_mounts(node: Any) -> int:
    """How many claim volumes the node's pods mount (kept by the node info as pods come and go;
    a node view without the count is counted here)."""
    found = getattr(node, "claim_mounts", None)
    if found is None:
        return sum(len(p.claims) for p in node.pods)
    return int(found)


@dataclass(frozen=True)
class _AttachAllocatable:
    """A node's ``attachable-volumes-csi-DRIVER`` allocatable (milli-units), -1 without one; equal
    for equal drivers, so the columns keep one array per driver."""

    driver: str

    def __call__(self, node: Any) -> int:
        found = node.allocatable.get(ATTACH_LIMIT_PREFIX + self.driver)
        return -1 if found is None else int(found)


def _limits_columns(ctx: EvalContext, cols: Any, rows: Any) -> list[list[str]]:
    """volume_limits on many rows: a node whose pods mount no more claims than its lowest possible
    limit allows, with the pod's new volumes added, fits without looking at its pods (the
    volumes attached there are at most its claim mounts, the limit is its CSINode's or its
    allocatable's); the others are evaluated one by one."""
    everywhere = _limits_everywhere(ctx)
    if everywhere is not None:
        return [everywhere] * len(rows)
    _, by_driver = pod_plan(ctx, "limits", _limits_plan)
    floor = storage_of(ctx).attach_floor
    nodes = cols.nodes
    if floor is None:
        return [volume_limits(ctx, nodes[r]) for r in rows.tolist()]
    mounts = cols.derived(claim_mounts, NUMBER)[rows]
    sure: Any = None  # (boolean arrays over the rows, from the columns: this layer imports no numpy)
    for driver, new in by_driver.items():
        allowed = mounts + len(new)
        allocatable = cols.derived(_AttachAllocatable(driver), NUMBER)[rows]
        # (absent: -1, no limit from it; else milli-units, the limit in whole ones)
        ok = (allocatable < 0) | (allowed <= allocatable // 1000)
        lowest = floor.get(driver)
        if lowest is not None:
            ok &= allowed <= lowest
        sure = ok if sure is None else sure & ok
    out: list[list[str]] = [NOTHING] * len(rows)
    for j in (~sure).nonzero()[0].tolist():
        out[j] = volume_limits(ctx, nodes[int(rows[j])])
    return out


UNIFORM = {
    "volume_restrictions": _restrictions_everywhere,
    "volume_limits": _limits_everywhere,
    "volume_zone": _zone_everywhere,
}
DOMAINS = {"volume_zone": _zone_labels}
COLUMNS = {"volume_limits": _limits_columns}
