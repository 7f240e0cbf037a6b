"""VolumeBinding's PreBind: make a pod's volume choices in the cluster before its binding, and
take them back if the binding fails (``rulesched run``, and ``rulesched extender`` as binder).

In ``run`` the store recorded the choices when the pod was assumed
(:meth:`rulesched.cluster.store.ClusterStore.volume_decisions`); the scheduler's thread turns them
into :class:`VolumeWrite`\\ s (they need the claims' UIDs, read from the store there), and a binding
worker (:mod:`rulesched.run.workers`) applies them. The extender works the choices out at its bind
verb (:meth:`rulesched.extender.service.Extender.bind`). As kube-scheduler does: a claim to provision
gets the ``volume.kubernetes.io/selected-node`` annotation (the provisioner takes it from
there); a claim matched to an available volume gets the volume's ``spec.claimRef`` and its own
``spec.volumeName`` (the PV controller completes the binding). Each write carries its undo.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.errors import KubeError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import PVCS, PVS, Resource
from rulesched.model.storage import SELECTED_NODE, StorageState
from rulesched.semantics.volume_binding import Decision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VolumeWrite:
    """One merge patch to one object, and the patch that takes it back."""

    resource: Resource
    namespace: str | None
    name: str
    patch: dict[str, Any]
    undo: dict[str, Any]


def writes_for(decisions: Sequence[Decision], storage: StorageState, node: str) -> list[VolumeWrite]:
    """The API writes that carry out ``decisions`` for a pod bound to ``node``."""
    writes = []
    for decision in decisions:
        claim = storage.claims.get(decision.claim)
        if claim is None:  # (deleted since: the binding's own checks will fail it)
            continue
        if not decision.volume:
            writes.append(
                VolumeWrite(
                    PVCS,
                    claim.namespace,
                    claim.name,
                    {"metadata": {"annotations": {SELECTED_NODE: node}}},
                    {"metadata": {"annotations": {SELECTED_NODE: None}}},
                )
            )
            continue
        ref = {
            "kind": "PersistentVolumeClaim",
            "apiVersion": "v1",
            "namespace": claim.namespace,
            "name": claim.name,
            "uid": claim.uid,
        }
        writes.append(
            VolumeWrite(PVS, None, decision.volume, {"spec": {"claimRef": ref}}, {"spec": {"claimRef": None}})
        )
        writes.append(
            VolumeWrite(
                PVCS,
                claim.namespace,
                claim.name,
                {"spec": {"volumeName": decision.volume}},
                {"spec": {"volumeName": None}},
            )
        )
    return writes


def apply_writes(api: KubeApi, writes: Sequence[VolumeWrite], timeout: float | None = None) -> None:
    """Make every write; if one fails, take back the ones made and raise its error. ``timeout``
    bounds each API call (None: the adapter's own)."""
    done: list[VolumeWrite] = []
    for write in writes:
        try:
            api.patch(write.resource, write.namespace, write.name, write.patch, timeout=timeout)
        except KubeError:
            revert_writes(api, done, timeout)
            raise
        done.append(write)


def revert_writes(api: KubeApi, writes: Sequence[VolumeWrite], timeout: float | None = None) -> None:
    """Take writes back, newest first; a failure is logged (the object may be gone)."""
    for write in reversed(writes):
        try:
            api.patch(write.resource, write.namespace, write.name, write.undo, timeout=timeout)
        except KubeError as err:
            log.warning("could not undo a volume choice", extra={"object": write.name, "reason": str(err)})
