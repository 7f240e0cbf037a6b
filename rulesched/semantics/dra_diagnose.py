"""Why a pod's claims cannot be allocated on a node, request by request (beyond upstream, for
explain): :func:`diagnose`, which :meth:`rulesched.semantics.dra_pod.PodClaims.diagnose` calls
where the allocator found nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rulesched.model.dra import ResourceClaim
from rulesched.semantics.cel import CelError
from rulesched.semantics.dra import Allocator
from rulesched.semantics.dra_devices import taint_blocks
from rulesched.semantics.dra_pools import gather_pools, node_matches


def diagnose(allocator: Allocator, node: Any, claims: Sequence[ResourceClaim]) -> list[str]:
    """For each request of ``claims``, what ruled out the node's devices for it (beyond
    upstream, for explain): the devices of its class there, those its selectors refuse (with the
    attributes the selectors read), tainted ones, those in use; and if every request alone
    has devices enough, the claims' constraints or shared counters and capacity together."""
    pools = gather_pools(allocator.slices_for(node), node, allocator.features, allocator.all_slices)
    lines: list[str] = []
    incomplete = [p.id for p in pools if p.incomplete]
    invalid = [f"{p.id} ({p.invalid_reason})" for p in pools if p.invalid]
    if incomplete:
        lines.append(f"pool(s) {', '.join(incomplete)} being updated (fewer slices than resourceSliceCount): not used")
    if invalid:
        lines.append(f"invalid pool(s): {', '.join(invalid)}")
    devices = [(p, s, d) for p in pools if not (p.incomplete or p.invalid) for s in p.slices for d in s.devices]
    every_request_alone = True
    for claim in claims:
        for request in claim.spec.requests:
            subs = (
                [(request.name, request.exactly)]
                if request.exactly
                else [(f"{request.name}/{n}", r) for n, r in request.first_available]
            )
            best = ""
            ok_any = False
            for shown, spec in subs:
                assert spec is not None
                cls = allocator.classes.get(spec.device_class_name)
                if cls is None:
                    best = best or f"claim {claim.key}, request {shown}: class {spec.device_class_name} does not exist"
                    continue
                counts = {"class": 0, "selector": 0, "taint": 0, "in use": 0, "free": 0}
                refused: list[str] = []
                for _, s, d in devices:
                    if s.per_device_node_selection and not node_matches(
                        node, d.node_name, d.all_nodes, d.node_selector
                    ):
                        continue
                    try:
                        if not all(allocator.cel.matches(e, d, s.driver) for e in cls.selectors):
                            continue
                        counts["class"] += 1
                        failed = next((e for e in spec.selectors if not allocator.cel.matches(e, d, s.driver)), None)
                    except CelError as err:
                        refused.append(f"{d.name}: {err}")
                        continue
                    if failed is not None:
                        counts["selector"] += 1
                        if len(refused) < 3:
                            refused.append(f"{d.name} ({_attributes_read(failed, d, s.driver)})")
                        continue
                    if allocator.features.device_taints and taint_blocks(d, spec.tolerations) is not None:
                        counts["taint"] += 1
                        continue
                    if not spec.admin_access and (s.driver, s.pool, d.name) in allocator.allocated.devices:
                        counts["in use"] += 1
                        continue
                    counts["free"] += 1
                need = spec.count if spec.allocation_mode != "All" else max(1, counts["free"])
                prefix = f"claim {claim.key}, request {shown}"
                if counts["class"] == 0:
                    why = f"{prefix}: no device of class {cls.name} on the node"
                elif counts["free"] >= need:
                    ok_any = True
                    break
                else:
                    parts = [f"{counts['class']} device(s) of class {cls.name}"]
                    if counts["selector"]:
                        parts.append(f"{counts['selector']} refused by its selectors: {', '.join(refused)}")
                    if counts["taint"]:
                        parts.append(f"{counts['taint']} with a taint it does not tolerate")
                    if counts["in use"]:
                        parts.append(f"{counts['in use']} in use by other claims")
                    why = f"{prefix}: needs {need}, {counts['free']} usable ({'; '.join(parts)})"
                best = best or why
            if not ok_any:
                every_request_alone = False
                lines.append(best)
    if every_request_alone:
        constrained = [c.key for c in claims if c.spec.constraints]
        what = (
            "the claims' constraints (matchAttribute/distinctAttribute)"
            if constrained
            else "shared counters or consumable capacity"
        )
        lines.append(f"each request alone has devices on the node, but not all together: {what}")
    return lines


def _attributes_read(expression: str, device: Any, driver: str) -> str:
    """The device's attributes an expression names (``model=A100``), to show why it refused it."""
    shown = []
    for name, attr in sorted(device.attributes.items()):
        ident = name.rpartition("/")[2]
        if ident in expression:
            shown.append(f"{ident}={attr.value}")
    for name, cap in sorted(device.capacity.items()):
        ident = name.rpartition("/")[2]
        if ident in expression:
            shown.append(f"{ident}={cap.value // 1000}")
    return ", ".join(shown) or f"selector {expression!r} false"
