"""Storage objects and a pod's volumes, as ``kubectl get -o yaml`` prints them, turned into the
values of :mod:`rulesched.model.storage`.

Same conventions as :mod:`rulesched.model.decode`: every field read is type-checked, the API
server's defaults are applied (``volumeBindingMode: Immediate``, ``volumeMode: Filesystem``), and
every problem is one :class:`~rulesched.errors.ObjectError` line naming the file, the object and
the field. Next stage: the store (:mod:`rulesched.cluster.store`) holds them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rulesched.model.fields import (
    Where,
    get_bool,
    get_choice,
    get_map,
    get_maps,
    get_opt_int,
    get_str,
    get_str_list,
    get_str_map,
    join,
    object_metadata,
    quantity,
)
from rulesched.model.names import shown
from rulesched.model.objects import PodVolume
from rulesched.model.parts import node_selector_terms
from rulesched.model.storage import (
    DEFAULT_CLASS,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologyRequirement,
)

_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
_VOLUME_MODES = ("Filesystem", "Block")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
_PV_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
_PVC_PHASES = ("Pending", "Bound", "Lost")


def _access_modes(spec: Mapping[str, Any], where: Where, at: str) -> tuple[str, ...]:
    modes = get_str_list(spec, "accessModes", where, at)
    for i, mode in enumerate(modes):
        if mode not in _ACCESS_MODES:
            raise where.error(
                f"{shown(mode)} is not one of {', '.join(_ACCESS_MODES)}", f"{join(at, 'accessModes')}[{i}]"
            )
    return modes


def _storage(amounts: Mapping[str, Any], where: Where, at: str) -> int:
    value = amounts.get("storage")
    return 0 if value is None else quantity(value, where, join(at, "storage"))


def decode_pv(obj: object, source: str = "", *, names: bool = True) -> PersistentVolume:
    """A PersistentVolume: class, capacity, access modes, node affinity, claimRef, CSI source."""
    obj, meta, name, _, where = object_metadata(obj, "PersistentVolume", source, False, names=names)
    spec = get_map(obj, "spec", where, "")
    status = get_map(obj, "status", where, "")
    affinity = None
    node_affinity = get_map(spec, "nodeAffinity", where, "spec")
    if node_affinity.get("required") is not None:
        required = get_map(node_affinity, "required", where, "spec.nodeAffinity")
        affinity = node_selector_terms(required, where, "spec.nodeAffinity.required")
    ref = get_map(spec, "claimRef", where, "spec")
    csi = get_map(spec, "csi", where, "spec")
    return PersistentVolume(
        name=name,
        labels=get_str_map(meta, "labels", where, "metadata"),
        storage_class=get_str(spec, "storageClassName", where, "spec")
        or get_str_map(meta, "annotations", where, "metadata").get("volume.beta.kubernetes.io/storage-class", ""),
        capacity=_storage(get_map(spec, "capacity", where, "spec"), where, "spec.capacity"),
        access_modes=_access_modes(spec, where, "spec"),
        volume_mode=get_choice(spec, "volumeMode", where, "spec", _VOLUME_MODES, "Filesystem"),
        node_affinity=affinity,
        claim_namespace=get_str(ref, "namespace", where, "spec.claimRef") or ("default" if ref else ""),
        claim_name=get_str(ref, "name", where, "spec.claimRef"),
        claim_uid=get_str(ref, "uid", where, "spec.claimRef"),
        phase=get_choice(status, "phase", where, "status", _PV_PHASES, "Available"),
        csi_driver=get_str(csi, "driver", where, "spec.csi"),
        csi_handle=get_str(csi, "volumeHandle", where, "spec.csi"),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def decode_pvc(obj: object, source: str = "", *, names: bool = True) -> PersistentVolumeClaim:
    """A PersistentVolumeClaim; ``storage_class`` is None when ``storageClassName`` is absent
    (the default class then applies), ``""`` when it asks for no class."""
    obj, meta, name, namespace, where = object_metadata(obj, "PersistentVolumeClaim", source, True, names=names)
    spec = get_map(obj, "spec", where, "")
    status = get_map(obj, "status", where, "")
    requests = get_map(get_map(spec, "resources", where, "spec"), "requests", where, "spec.resources")
    return PersistentVolumeClaim(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", where, "metadata"),
        annotations=get_str_map(meta, "annotations", where, "metadata"),
        storage_class=get_str(spec, "storageClassName", where, "spec")
        if spec.get("storageClassName") is not None
        else None,
        volume_name=get_str(spec, "volumeName", where, "spec"),
        access_modes=_access_modes(spec, where, "spec"),
        request=_storage(requests, where, "spec.resources.requests"),
        volume_mode=get_choice(spec, "volumeMode", where, "spec", _VOLUME_MODES, "Filesystem"),
        phase=get_choice(status, "phase", where, "status", _PVC_PHASES, "Pending"),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def decode_storage_class(obj: object, source: str = "", *, names: bool = True) -> StorageClass:
    """A StorageClass (top-level fields, as the API has them) and whether it is the default."""
    obj, meta, name, _, where = object_metadata(obj, "StorageClass", source, False, names=names)
    terms = []
    for path, term in get_maps(obj, "allowedTopologies", where, ""):
        reqs = []
        for req_path, req in get_maps(term, "matchLabelExpressions", where, path):
            key = get_str(req, "key", where, req_path)
            if not key:
                raise where.error("missing", join(req_path, "key"))
            reqs.append(TopologyRequirement(key, get_str_list(req, "values", where, req_path)))
        terms.append(tuple(reqs))
    annotations = get_str_map(meta, "annotations", where, "metadata")
    default = annotations.get(DEFAULT_CLASS, annotations.get("storageclass.beta.kubernetes.io/is-default-class"))
    return StorageClass(
        name=name,
        provisioner=get_str(obj, "provisioner", where, ""),
        binding_mode=get_choice(obj, "volumeBindingMode", where, "", _BINDING_MODES, "Immediate"),
        allowed_topologies=tuple(terms),
        is_default=default == "true",
    )


def decode_csinode(obj: object, source: str = "", *, names: bool = True) -> CSINode:
    """A CSINode: each driver's ``allocatable.count``, the attach limit NodeVolumeLimits reads."""
    obj, _, name, _, where = object_metadata(obj, "CSINode", source, False, names=names)
    spec = get_map(obj, "spec", where, "")
    limits: dict[str, int] = {}
    for path, driver in get_maps(spec, "drivers", where, "spec"):
        driver_name = get_str(driver, "name", where, path)
        if not driver_name:
            raise where.error("missing", join(path, "name"))
        count = get_opt_int(get_map(driver, "allocatable", where, path), "count", where, f"{path}.allocatable")
        if count is not None:
            if count < 0:
                raise where.error(f"{count} is negative", f"{path}.allocatable.count")
            limits[driver_name] = count
    return CSINode(name, MappingProxyType(limits))


_DISKS = {
    "gcePersistentDisk": ("gce", ("pdName",)),
    "awsElasticBlockStore": ("aws", ("volumeID",)),
    "iscsi": ("iscsi", ("iqn",)),
    "rbd": ("rbd", ("pool", "image")),
}


def pod_volumes(spec: Mapping[str, Any], pod_name: str, where: Where) -> tuple[PodVolume, ...]:
    """The pod's volumes scheduling looks at: claims (``persistentVolumeClaim``, and generic
    ``ephemeral`` volumes, whose claim the controller names ``<pod>-<volume>``) and the inline
    disks VolumeRestrictions compares. Other volume types (configMap, secret, emptyDir,
    projected, ...) are left out: no volume filter reads them."""
    out = []
    for path, volume in get_maps(spec, "volumes", where, "spec"):
        name = get_str(volume, "name", where, path)
        if not name:
            raise where.error("missing", join(path, "name"))
        if volume.get("persistentVolumeClaim") is not None:
            source = get_map(volume, "persistentVolumeClaim", where, path)
            claim = get_str(source, "claimName", where, f"{path}.persistentVolumeClaim")
            if not claim:
                raise where.error("missing", f"{path}.persistentVolumeClaim.claimName")
            out.append(PodVolume(name, claim=claim, read_only=get_bool(source, "readOnly", where, path)))
        elif volume.get("ephemeral") is not None:
            out.append(PodVolume(name, claim=f"{pod_name}-{name}", ephemeral=True))
        else:
            for kind, (tag, keys) in _DISKS.items():
                if volume.get(kind) is None:
                    continue
                source = get_map(volume, kind, where, path)
                at = f"{path}.{kind}"
                ident = tuple(get_str(source, k, where, at) for k in keys)
                if kind == "rbd":
                    ident = (get_str(source, "pool", where, at) or "rbd", ident[1])
                monitors = get_str_list(source, "monitors", where, at) if kind == "rbd" else ()
                out.append(
                    PodVolume(
                        name, disk=(tag, *ident), read_only=get_bool(source, "readOnly", where, at), monitors=monitors
                    )
                )
                break
    return tuple(out)
