"""The DRA built-ins. ``devices_after(node)``: the node's devices as they would be once the pod's
claims are allocated there, as the DynamicResources filter would allocate them (the rules' device
scores ranking the candidates; :mod:`rulesched.semantics.dra_after`): the devices the allocation
takes hold one claim more, a device taken whole has nothing free, a share consumes its capacity.
node.devices where the pod has no claim to allocate or they cannot be allocated on the node. What
a policy reads to weigh the state a placement leaves (GPU fragmentation:
rules/gpu-fragmentation.rules).

The DynamicResources built-in: kube-scheduler's DynamicResources Score as a function of a
node, ``dra_score(node)``: for each of the pod's claims, each request with ``firstAvailable``
subrequests scores 8 minus the index of the subrequest its allocation on the node uses (the
first alternative scores most), summed (dynamicresources.go Score, computeScore). Allocated
claims count their allocation; the others the allocation the node would give them (the same
allocator as the filter, :mod:`rulesched.semantics.dra_pod`, kept once per pod and cycle in
``ctx.scratch``). 0 where they cannot be allocated (the filter rejects such nodes anyway).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from rulesched.lang.context import EvalContext
from rulesched.model.dra import EMPTY_DRA, FIRST_AVAILABLE_MAX, NodeDevice
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_devices import NOTHING_ALLOCATED
from rulesched.semantics.dra_pod import PodClaims, pod_claims

_SCRATCH = "dra_score:claims"
# The pod's claims as the DynamicResources filter has them, device scores' ranking included
# (rulesched.lang.evaluation.ruleset puts them here when it binds the pod).
BOUND_CLAIMS = "dra:bound-claims"


def _claims(ctx: EvalContext) -> PodClaims:
    found: PodClaims | None = ctx.scratch.get(BOUND_CLAIMS) or ctx.scratch.get(_SCRATCH)
    if found is None:
        cluster = ctx.cluster
        found = ctx.scratch[_SCRATCH] = pod_claims(
            ctx.pod,
            getattr(cluster, "dra", EMPTY_DRA),
            getattr(cluster, "dra_allocated", NOTHING_ALLOCATED),
            getattr(cluster, "dra_cel", None) or CelCache(),
            pools=getattr(cluster, "dra_pools", None),
        )
    return found


def dra_score(ctx: EvalContext, node: Any) -> int:
    """DynamicResources' Score on ``node`` (see the module's docstring)."""
    found = _claims(ctx)
    if found.error:
        return 0
    fresh = found.allocations(node)
    if found.to_allocate and not fresh:
        return 0
    score = 0
    for claim in found.claims:
        alloc = claim.allocation if claim.allocation is not None else fresh.get(claim.key)
        if alloc is None:
            continue
        used = {r.request for r in alloc.devices if "/" in r.request}
        for request in claim.spec.requests:
            for i, (sub, _) in enumerate(request.first_available):
                if f"{request.name}/{sub}" in used:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def devices_after(ctx: EvalContext, node: Any) -> tuple[NodeDevice, ...]:
    """``node.devices`` once the pod's claims are allocated on ``node`` (see the module's docstring)."""
    devices: tuple[NodeDevice, ...] = getattr(node, "devices", ())
    if not ctx.pod.resource_claims or not devices:
        return devices
    return _claims(ctx).devices_after(node)


def devices_after_key(ctx: EvalContext, node: Any, positions: Mapping[tuple[str, str, str], int]) -> Hashable | None:
    """What ``devices_after(node)`` changes of ``node.devices`` (the devices the allocation takes,
    by their position in ``positions``, and how), as a key: nodes whose devices are alike but for
    their pool and equal in this key have devices after alike but for their pool
    (rulesched.engine.alike); None when it cannot say."""
    if not ctx.pod.resource_claims or not getattr(node, "devices", ()):
        return ()
    return _claims(ctx).after_key(node, positions)
