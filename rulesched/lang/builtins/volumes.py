"""Volume built-ins: kube-scheduler's VolumeRestrictions, NodeVolumeLimits, VolumeBinding and
VolumeZone, each as one function from a node to the list of reasons it fails there (empty: fits);
VolumeBinding, the largest, is in :mod:`rulesched.lang.builtins.volume_binding`, which uses the
helpers here. What each plugin decides is Kubernetes' semantics (:mod:`rulesched.semantics.volumes`);
this module gives it the cluster, keeps each pod's plan and adds the column evaluation's hints.

They read the cluster's storage objects through :class:`rulesched.lang.context.ClusterView`
(``storage``, ``claim_users``). Upstream splits each plugin into PreFilter (claims missing,
unbound immediate claims: every node fails alike) and Filter (per node); here the pod-wide part
is worked out once per pod and cycle into ``ctx.scratch`` and reported on every node, so a
rule's reasons are upstream's exact messages either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang.context import EvalContext
from rulesched.lang.types import NUMBER
from rulesched.model import Pod
from rulesched.model.storage import EMPTY_STORAGE, StorageState
from rulesched.semantics.volumes import (
    ATTACH_LIMIT_PREFIX,
    DISK_CONFLICT,
    MAX_VOLUMES,
    RWOP_CONFLICT,
    ZONE_CONFLICT,
    ZONE_LABELS,
    bound_volume_zones,
    disk_conflict,
    exceeds_limits,
    restricted_claims,
    zone_conflict,
)
from rulesched.semantics.volumes import attachable as attachable_volumes

__all__ = [
    "COLUMNS",
    "DOMAINS",
    "UNIFORM",
    "volume_limits",
    "volume_restrictions",
    "volume_zone",
]

NOTHING: list[str] = []


def storage_of(ctx: EvalContext) -> StorageState:
    found = getattr(ctx.cluster, "storage", None)
    return found if isinstance(found, StorageState) else EMPTY_STORAGE


def pod_plan(ctx: EvalContext, name: str, build: Any) -> Any:
    """Per pod and cycle: what the plugin's PreFilter works out."""
    key = ("volumes", name)
    found = ctx.scratch.get(key)
    if found is None:
        found = ctx.scratch[key] = build(ctx)
    return found


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
    return restricted_claims(ctx.pod, storage_of(ctx), getattr(ctx.cluster, "claim_users", None))


def volume_restrictions(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeRestrictions: inline disks shared with the node's pods, and ReadWriteOncePod
    claims another pod already uses."""
    everywhere, disks, answer = pod_plan(ctx, "restrictions", _restrictions_plan)
    if everywhere is not None:
        return everywhere  # type: ignore[no-any-return]
    for volume in disks:
        if any(disk_conflict(volume, p) for p in node.pods):
            return [DISK_CONFLICT]
    return answer  # type: ignore[no-any-return]


# --- NodeVolumeLimits (CSI) ----------------------------------------------------------------------


def _limits_plan(ctx: EvalContext) -> tuple[str, dict[str, dict[str, str]]]:
    """(a claim-lookup failure; the pod's new volumes by driver)."""
    new = attachable_volumes(ctx.pod, storage_of(ctx), True)
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
    return [MAX_VOLUMES] if exceeds_limits(node, storage_of(ctx), by_driver) else NOTHING


# --- VolumeZone ----------------------------------------------------------------------------------


def _zone_plan(ctx: EvalContext) -> tuple[str, tuple[tuple[str, frozenset[str]], ...]]:
    """(a lookup failure, the bound volumes' zone labels as (key, allowed values))."""
    return bound_volume_zones(ctx.pod, storage_of(ctx))


def volume_zone(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeZone: the zone and region labels of the pod's bound volumes match the node's (a
    node without any such label takes any volume)."""
    error, zones = pod_plan(ctx, "zone", _zone_plan)
    if error:
        return [error]
    if not zones:
        return NOTHING
    return [ZONE_CONFLICT] if zone_conflict(zones, node.labels) else NOTHING


def claim_keys(pod: Pod) -> Sequence[str]:
    """``namespace/name`` of each claim the pod mounts (the store counts their users)."""
    return [f"{pod.namespace}/{c}" for c in pod.claims]


# --- for column evaluation (rulesched.engine.vectorise) ----------------------------------
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
