"""The store's storage objects: volumes, claims, storage classes, CSINodes, the placed pods'
claim users, and VolumeBinding's choices recorded when a pod is assumed.

A part of :class:`rulesched.cluster.store.ClusterStore` kept apart for length. The maps are the
store's own and copied on write while a snapshot holds them, like its other containers; a
snapshot sees them as one :class:`~rulesched.model.storage.StorageState` value. Every change
bumps the store's ``generation``, which the volume built-ins version their answers on.

When the scheduler assumes a pod, the claims it will use are taken at once, as kube-scheduler's
Reserve does in its assume cache: a volume chosen for a claim is bound to it, and a claim to be
provisioned is marked with the node (``volume.kubernetes.io/selected-node``) or, in the
simulator (``provision``), given a new volume on the node's topology. Later pods of the cycle
see them. A failed binding puts the objects back (:meth:`StorageMixin._revert_volumes`).
Next stage: :mod:`rulesched.cluster.snapshot` carries them to the cycle.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rulesched.model import NodeSelectorRequirement, NodeSelectorTerm, Pod
from rulesched.model.storage import (
    BIND_COMPLETED,
    SELECTED_NODE,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageState,
    attach_floor,
    is_open,
)
from rulesched.semantics.volume_binding import Decision, plan_bindings

STORAGE_KINDS = ("volumes", "claims", "classes", "csinodes")
STORAGE_CONTAINERS = (*STORAGE_KINDS, "open_volumes")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

# An undo entry: (map name, key, the object before, or None if there was none).
_Undo = tuple[str, str, Any]


class StorageMixin:
    if TYPE_CHECKING:
        _made: dict[str, int]

        def _own(self, name: str) -> bool: ...

        def _changed(self) -> None: ...

    def _init_storage(self, provision: bool) -> None:
        self._provision = provision
        self._volumes: dict[str, PersistentVolume] = {}
        self._claims: dict[str, PersistentVolumeClaim] = {}
        self._classes: dict[str, StorageClass] = {}
        self._csinodes: dict[str, CSINode] = {}
        self._open_volumes: dict[str, dict[str, PersistentVolume]] = {}  # class -> name -> open volume
        self._claim_users: Counter[str] = Counter()
        self._volume_undo: dict[str, list[_Undo]] = {}  # pod key -> what its assumption changed
        self._volume_decisions: dict[str, tuple[Decision, ...]] = {}
        self._attach_floor: Mapping[str, int] | None = None  # of _csinodes; None: work it out again

    @property
    def storage(self) -> StorageState:
        floor = self._attach_floor
        if floor is None:
            floor = self._attach_floor = attach_floor(self._csinodes.values())
        return StorageState(self._volumes, self._claims, self._classes, self._csinodes, self._open_volumes, floor)

    def claim_users(self, claim: str) -> int:
        return self._claim_users.get(claim, 0)

    def volume_decisions(self, pod_key: str) -> tuple[Decision, ...]:
        """VolumeBinding's choices for an assumed pod, for the binder to make in the cluster."""
        return self._volume_decisions.get(pod_key, ())

    # --- objects from files and informers ---------------------------------------------------------
    def _map(self, kind: str) -> dict[str, Any]:
        """The named map, copied first if a snapshot holds it."""
        attr = f"_{kind}"
        current: dict[str, Any] = getattr(self, attr)
        if self._own(kind):
            current = dict(current)
            setattr(self, attr, current)
        return current

    def _put(self, kind: str, key: str, value: Any) -> None:
        if kind == "volumes":
            self._index_volume(self._volumes.get(key), value)
        elif kind == "csinodes":
            self._attach_floor = None
        target = self._map(kind)
        if value is None:
            if target.pop(key, None) is None:
                return
        else:
            target[key] = value
        self._changed()

    def _index_volume(self, old: PersistentVolume | None, new: PersistentVolume | None) -> None:
        """Keep the open volumes by class (rulesched.model.storage.StorageState.open_volumes)."""
        if self._own("open_volumes"):
            self._open_volumes = {k: dict(v) for k, v in self._open_volumes.items()}
        if old is not None:
            self._open_volumes.get(old.storage_class, {}).pop(old.name, None)
        if new is not None and is_open(new):
            self._open_volumes.setdefault(new.storage_class, {})[new.name] = new

    def set_pv(self, pv: PersistentVolume) -> None:
        self._put("volumes", pv.name, pv)

    def remove_pv(self, name: str) -> None:
        self._put("volumes", name, None)

    def set_pvc(self, claim: PersistentVolumeClaim) -> None:
        self._put("claims", claim.key, claim)

    def remove_pvc(self, key: str) -> None:
        self._put("claims", key, None)

    def set_storage_class(self, cls: StorageClass) -> None:
        self._put("classes", cls.name, cls)

    def remove_storage_class(self, name: str) -> None:
        self._put("classes", name, None)

    def set_csinode(self, csinode: CSINode) -> None:
        self._put("csinodes", csinode.name, csinode)

    def remove_csinode(self, name: str) -> None:
        self._put("csinodes", name, None)

    def set_storage(self, storage: StorageState) -> None:
        """Replace every storage object (a load from files)."""
        for kind in STORAGE_KINDS:
            setattr(self, f"_{kind}", dict(getattr(storage, kind)))
            self._made[kind] = getattr(self, "_epoch", 0)
        self._open_volumes = {}
        self._attach_floor = None
        self._made["open_volumes"] = getattr(self, "_epoch", 0)
        for pv in self._volumes.values():
            if is_open(pv):
                self._open_volumes.setdefault(pv.storage_class, {})[pv.name] = pv
        self._changed()

    def _count_claims(self, pod: Pod, sign: int) -> None:
        users = self._claim_users
        if self._own("claim_users"):
            users = self._claim_users = Counter(users)
        for claim in pod.claims:
            key = f"{pod.namespace}/{claim}"
            left = users[key] + sign
            if left > 0:
                users[key] = left
            else:
                del users[key]

    def _storage_contents(self) -> dict[str, Any]:
        return {
            "volumes": dict(self._volumes),
            "claims": dict(self._claims),
            "classes": dict(self._classes),
            "csinodes": dict(self._csinodes),
            "claim_users": dict(self._claim_users),
        }

    # --- the scheduler's assumptions ------------------------------------------------------------------
    def _assume_volumes(self, pod: Pod, node: Any) -> None:
        if node is None or not pod.claims:
            return
        decisions = plan_bindings(pod, self.storage, node)
        if not decisions:
            return
        undo: list[_Undo] = []
        for decision in decisions:
            claim = self._claims[decision.claim]
            if decision.volume:
                self._bind(claim, self._volumes[decision.volume], undo)
            elif self._provision:
                self._bind(claim, self._provisioned(claim, node), undo)
            else:
                annotations = MappingProxyType({**claim.annotations, SELECTED_NODE: node.name})
                self._replace("claims", claim.key, dataclasses.replace(claim, annotations=annotations), undo)
        self._volume_undo[pod.key] = undo
        self._volume_decisions[pod.key] = tuple(decisions)

    def _replace(self, kind: str, key: str, value: Any, undo: list[_Undo]) -> None:
        undo.append((kind, key, getattr(self, f"_{kind}").get(key)))
        self._put(kind, key, value)

    def _bind(self, claim: PersistentVolumeClaim, pv: PersistentVolume, undo: list[_Undo]) -> None:
        """Bind claim and volume both (what the PV controller completes after the scheduler
        sets the volume's claimRef)."""
        bound_pv = dataclasses.replace(
            pv, claim_namespace=claim.namespace, claim_name=claim.name, claim_uid=claim.uid, phase="Bound"
        )
        annotations = MappingProxyType({**claim.annotations, BIND_COMPLETED: "yes"})
        bound_claim = dataclasses.replace(claim, volume_name=pv.name, phase="Bound", annotations=annotations)
        self._replace("volumes", pv.name, bound_pv, undo)
        self._replace("claims", claim.key, bound_claim, undo)

    def _provisioned(self, claim: PersistentVolumeClaim, node: Any) -> PersistentVolume:
        """The volume a provisioner would make for the claim on the node: the claim's size,
        modes and class, reachable from the node's zone (or, without one, the node alone), or
        from the labels the class's allowed topologies name."""
        storage = self.storage
        class_name = storage.claim_class(claim)
        cls = storage.classes.get(class_name)
        keys = sorted({r.key for term in cls.allowed_topologies for r in term}) if cls is not None else []
        if not keys:
            keys = [ZONE] if ZONE in node.labels else [HOSTNAME]
        labels: Mapping[str, str] = node.labels
        requirements = tuple(
            NodeSelectorRequirement(k, "In", (labels.get(k, node.name if k == HOSTNAME else ""),)) for k in keys
        )
        return PersistentVolume(
            name=f"pvc-{claim.uid or claim.namespace + '-' + claim.name}",
            storage_class=class_name,
            capacity=claim.request,
            access_modes=claim.access_modes,
            volume_mode=claim.volume_mode,
            node_affinity=(NodeSelectorTerm(requirements),),
            phase="Available",
            csi_driver=cls.provisioner if cls is not None else "",
            csi_handle=f"{claim.namespace}/{claim.name}",
        )

    def _volumes_settled(self, pod_key: str) -> None:
        self._volume_undo.pop(pod_key, None)
        self._volume_decisions.pop(pod_key, None)

    def _revert_volumes(self, pod_key: str) -> None:
        """Put back what the pod's assumption changed (a provisioned volume goes away)."""
        self._volume_decisions.pop(pod_key, None)
        for kind, key, before in reversed(self._volume_undo.pop(pod_key, [])):
            self._put(kind, key, before)
