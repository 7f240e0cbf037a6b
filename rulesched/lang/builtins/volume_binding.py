"""The VolumeBinding built-in: kube-scheduler's VolumeBinding plugin as a function from a node to
the reasons the pod's claims cannot be bound or provisioned there (empty: they can).

What the plugin decides (the claims sorted out, the volumes matched, the planner the store and
the binders use) is Kubernetes' semantics, in :mod:`rulesched.semantics.volume_binding`; here the
sorted claims are kept once per pod and cycle (``ctx.scratch``), the common StatefulSet case
(claims only to provision) is answered from the node's labels alone, and the column evaluation
gets its hints. The helpers it shares with the other volume plugins are in
:mod:`rulesched.lang.builtins.volumes`.
"""

from __future__ import annotations

from typing import Any

from rulesched.lang.builtins.volumes import NOTHING, pod_plan, storage_of
from rulesched.lang.context import EvalContext
from rulesched.model.storage import NO_PROVISIONER
from rulesched.semantics.volume_binding import Claims, find_volumes, sort_claims, topology_allows
from rulesched.semantics.volumes import BIND_CONFLICT

__all__ = ["COLUMNS", "DOMAINS", "UNIFORM", "volume_binding"]


def _binding_plan(ctx: EvalContext) -> Claims:
    return sort_claims(ctx.pod, storage_of(ctx))


def volume_binding(ctx: EvalContext, node: Any) -> list[str]:
    """VolumeBinding: bound claims' volumes reachable from the node, delayed claims bindable
    or provisionable there."""
    claims: Claims = pod_plan(ctx, "binding", _binding_plan)
    if claims.error:
        return [claims.error]
    if not claims.bound and not claims.delayed:
        return NOTHING
    if claims.provision_only is not None:  # (find_volumes' answer, without its bookkeeping)
        for cls in claims.provision_only:
            if cls.provisioner in ("", NO_PROVISIONER) or not topology_allows(cls, node):
                return [BIND_CONFLICT]
        return NOTHING
    return find_volumes(claims, storage_of(ctx), node)[0]


# --- for column evaluation (see rulesched.lang.builtins.volumes) ----------------------------------


def _binding_everywhere(ctx: EvalContext) -> list[str] | None:
    claims: Claims = pod_plan(ctx, "binding", _binding_plan)
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
    claims: Claims = pod_plan(ctx, "binding", _binding_plan)
    if claims.provision_only is None:
        return None
    keys = {r.key for cls in claims.provision_only for term in cls.allowed_topologies for r in term}
    return tuple(sorted(keys))


UNIFORM = {"volume_binding": _binding_everywhere}
DOMAINS = {"volume_binding": _binding_labels}
COLUMNS: dict[str, Any] = {}
