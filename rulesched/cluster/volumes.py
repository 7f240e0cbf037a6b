"""The store's storage cache: volumes, claims, storage classes, CSINodes, the open volumes by
class, and VolumeBinding's choices recorded when a pod is assumed.

A part of :class:`rulesched.cluster.store.ClusterStore` with its own state: the maps are copied on
write while a snapshot holds them (:mod:`rulesched.cluster.cow`), like the store's other
containers, and a snapshot sees them as one :class:`~rulesched.model.storage.StorageState` value.
Every change calls the store's ``changed`` (its ``generation``, which the volume built-ins
version their answers on).

When the scheduler assumes a pod, the claims it will use are taken at once, as kube-scheduler's
Reserve does in its assume cache: VolumeBinding's plan (:func:`rulesched.semantics.volume_binding.plan_bindings`)
binds a chosen volume to its claim, and a claim to be provisioned is marked with the node
(``volume.kubernetes.io/selected-node``) or, in the simulator (``provision``), given a new volume
on the node's topology. Later pods of the cycle see them. A failed binding puts the objects back
(:meth:`StorageCache.revert`).
Next stage: :mod:`rulesched.cluster.snapshot` carries them to the cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from rulesched.cluster.cow import CopyOnWrite
from rulesched.model import NodeSelectorRequirement, NodeSelectorTerm, Pod
from rulesched.model.storage import (
    BIND_COMPLETED,
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageState,
    attach_floor,
    is_open,
)
from rulesched.semantics.volume_binding import Decision, plan_bindings

STORAGE_KINDS = ("volumes", "claims", "classes", "csinodes")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

# An undo entry: (map name, key, the object before, or None if there was none).
_Undo = tuple[str, str, Any]


class StorageCache:
    def __init__(self, cow: CopyOnWrite[Any], changed: Callable[[], None], provision: bool) -> None:
        self._cow, self._changed, self._provision = cow, changed, provision
        self._maps: dict[str, dict[str, Any]] = {kind: {} for kind in STORAGE_KINDS}
        self._open_volumes: dict[str, dict[str, PersistentVolume]] = {}  # class -> name -> open volume
        self._undo: dict[str, list[_Undo]] = {}  # pod key -> what its assumption changed
        self._decisions: dict[str, tuple[Decision, ...]] = {}
        self._attach_floor: Mapping[str, int] | None = None  # of the CSINodes; None: work it out again

    @property
    def storage(self) -> StorageState:
        floor = self._attach_floor
        maps = self._maps
        if floor is None:
            floor = self._attach_floor = attach_floor(maps["csinodes"].values())
        return StorageState(
            maps["volumes"], maps["claims"], maps["classes"], maps["csinodes"], self._open_volumes, floor
        )

    def decisions(self, pod_key: str) -> tuple[Decision, ...]:
        """VolumeBinding's choices for an assumed pod, for the binder to make in the cluster."""
        return self._decisions.get(pod_key, ())

    def in_flight(self) -> list[str]:
        """The assumed pods whose volume choices are kept (to write, or to take back)."""
        return sorted(self._undo.keys() | self._decisions.keys())

    # --- objects from files and informers ---------------------------------------------------------
    def _map(self, kind: str) -> dict[str, Any]:
        """The named map, copied first if a snapshot holds it."""
        current = self._maps[kind]
        if self._cow.must_copy(kind):
            current = self._maps[kind] = dict(current)
        return current

    def put(self, kind: str, key: str, value: Any) -> None:
        """Set (None: remove) one object of a kind: ``volumes``, ``claims``, ``classes``, ``csinodes``."""
        if kind == "volumes":
            self._index_volume(self._maps["volumes"].get(key), value)
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
        if self._cow.must_copy("open_volumes"):
            self._open_volumes = {k: dict(v) for k, v in self._open_volumes.items()}
        if old is not None:
            self._open_volumes.get(old.storage_class, {}).pop(old.name, None)
        if new is not None and is_open(new):
            self._open_volumes.setdefault(new.storage_class, {})[new.name] = new

    def replace_all(self, storage: StorageState) -> None:
        """Replace every storage object (a load from files)."""
        for kind in STORAGE_KINDS:
            self._maps[kind] = dict(getattr(storage, kind))
            self._cow.made_now(kind)
        self._open_volumes = {}
        self._attach_floor = None
        self._cow.made_now("open_volumes")
        for pv in self._maps["volumes"].values():
            if is_open(pv):
                self._open_volumes.setdefault(pv.storage_class, {})[pv.name] = pv
        self._changed()

    def contents(self) -> dict[str, Any]:
        return {kind: dict(self._maps[kind]) for kind in STORAGE_KINDS}

    # --- the scheduler's assumptions ------------------------------------------------------------------
    def assume(self, pod: Pod, node: Any) -> None:
        """VolumeBinding's Reserve for a pod assumed on ``node``: its claims are taken now."""
        if node is None or not pod.claims:
            return
        decisions = plan_bindings(pod, self.storage, node)
        if not decisions:
            return
        undo: list[_Undo] = []
        maps = self._maps
        for decision in decisions:
            claim = maps["claims"][decision.claim]
            if decision.volume:
                self._bind(claim, maps["volumes"][decision.volume], undo)
            elif self._provision:
                self._bind(claim, self._provisioned(claim, node), undo)
            else:
                annotations = MappingProxyType({**claim.annotations, SELECTED_NODE: node.name})
                self._replace("claims", claim.key, dataclasses.replace(claim, annotations=annotations), undo)
        self._undo[pod.key] = undo
        self._decisions[pod.key] = tuple(decisions)

    def _replace(self, kind: str, key: str, value: Any, undo: list[_Undo]) -> None:
        undo.append((kind, key, self._maps[kind].get(key)))
        self.put(kind, key, value)

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

    def settled(self, pod_key: str) -> None:
        """The pod's binding succeeded: its choices stand (nothing to take back)."""
        self._undo.pop(pod_key, None)
        self._decisions.pop(pod_key, None)

    def revert(self, pod_key: str) -> None:
        """Put back what the pod's assumption changed (a provisioned volume goes away)."""
        self._decisions.pop(pod_key, None)
        for kind, key, before in reversed(self._undo.pop(pod_key, [])):
            self.put(kind, key, before)
