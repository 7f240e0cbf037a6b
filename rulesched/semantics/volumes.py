"""The volume plugins' checks, after kube-scheduler's VolumeRestrictions, NodeVolumeLimits and
VolumeZone: inline disks shared with a node's pods, ReadWriteOncePod claims in use, the CSI
volumes a pod attaches and a node's attach limits, the zone labels of bound volumes; a volume's
node affinity (CheckNodeAffinity); and the plugins' exact reasons. VolumeBinding's planner, which
uses these, is :mod:`rulesched.semantics.volume_binding`.

Functions of the pod, the cluster's storage objects (:class:`rulesched.model.storage.StorageState`)
and a node (anything with ``name``, ``labels``, ``allocatable``, ``pods``), total like the rest of
this package. Next stage: :mod:`rulesched.lang.builtins.volumes` answers per node with them, the
pod-wide part worked out once per pod and cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rulesched.model import Pod
from rulesched.model.storage import (
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageState,
)
from rulesched.semantics.matching import node_selector_term_matches

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

# A bound volume's zone label: (label key, the values it allows).
Zone = tuple[str, frozenset[str]]


def not_found(name: str) -> str:
    return f'persistentvolumeclaim "{name}" not found'


def claim_of(storage: StorageState, pod: Pod, name: str) -> PersistentVolumeClaim | None:
    return storage.claims.get(f"{pod.namespace}/{name}")


def pv_fits_node(pv: PersistentVolume, node: Any) -> bool:
    """CheckNodeAffinity: the volume's required node affinity (terms ORed) holds on the node."""
    terms = pv.node_affinity
    return terms is None or any(node_selector_term_matches(t, node) for t in terms)


# --- VolumeRestrictions ------------------------------------------------------------------------


def restricted_claims(pod: Pod, storage: StorageState, users: Callable[[str], int] | None) -> tuple[str, bool]:
    """VolumeRestrictions' PreFilter on claims: (a claim-lookup failure, whether a
    ReadWriteOncePod claim of the pod is in use); ``users`` counts a claim's placed pods."""
    in_use = False
    for volume in pod.volumes:
        if not volume.claim or volume.ephemeral:
            continue
        claim = claim_of(storage, pod, volume.claim)
        if claim is None:
            return not_found(volume.claim), False
        if READ_WRITE_ONCE_POD in claim.access_modes and users is not None and users(claim.key) > 0:
            in_use = True
    return "", in_use


def disk_conflict(wanted: Any, existing: Pod) -> bool:
    """isVolumeConflict: an inline disk of the pod (``wanted``) clashes with one of ``existing``."""
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


# --- NodeVolumeLimits (CSI) ----------------------------------------------------------------------


def attachable(pod: Pod, storage: StorageState, new: bool) -> dict[str, str] | str:
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


def attach_limit(node: Any, storage: StorageState, driver: str) -> int | None:
    """The node's attach limit for a driver: its CSINode's count, else the node's
    ``attachable-volumes-csi-DRIVER`` allocatable (milli-units), else none."""
    csinode = storage.csinodes.get(node.name)
    if csinode is not None:
        found = csinode.limits.get(driver)
        if found is not None:
            return found
    amount = node.allocatable.get(ATTACH_LIMIT_PREFIX + driver)
    return None if amount is None else amount // 1000


def exceeds_limits(node: Any, storage: StorageState, by_driver: Mapping[str, Mapping[str, str]]) -> bool:
    """NodeVolumeLimits' Filter: for some driver, the volumes attached to the node (its pods'
    volumes, counted once) and the pod's new ones (``by_driver``: driver -> unique volume
    names) are more than the node's limit."""
    attached: dict[str, str] | None = None
    for driver, new in by_driver.items():
        limit = attach_limit(node, storage, driver)
        if limit is None:
            continue
        if attached is None:  # the node's pods' volumes, counted once, when some limit applies
            attached = {}
            for existing in node.pods:
                if existing.volumes:
                    found = attachable(existing, storage, False)
                    assert isinstance(found, dict)
                    attached.update(found)
        in_use = sum(1 for d in attached.values() if d == driver)
        wanted = sum(1 for unique in new if unique not in attached)
        if in_use + wanted > limit:
            return True
    return False


# --- VolumeZone ----------------------------------------------------------------------------------


def bound_volume_zones(pod: Pod, storage: StorageState) -> tuple[str, tuple[Zone, ...]]:
    """VolumeZone's PreFilter: (a lookup failure, the bound volumes' zone labels)."""
    found: list[Zone] = []
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


def zone_conflict(zones: tuple[Zone, ...], labels: Mapping[str, str]) -> bool:
    """VolumeZone's Filter: a node with some zone or region label must carry each bound volume's
    value of it (a beta label may be matched by the GA one); a node without any takes any volume."""
    if not any(key in labels for key in ZONE_LABELS):
        return False
    for key, values in zones:
        value = labels.get(key)
        if value is None:
            value = labels.get(_GA.get(key, key))
        if value is None or value not in values:
            return True
    return False
