"""A claim's allocation result once the search found its devices (the allocator's last stage,
upstream's allocator.createAllocationResult and createNodeSelector): one DeviceResult per device
taken, the configs of the classes and of the claim for the requests (or subrequests) chosen, and
the node selector the claim pins its pod to.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rulesched.model.dra import Allocation, AllocationConfig, DeviceResult, ResourceClaim
from rulesched.model.objects import NodeSelectorRequirement, NodeSelectorTerm
from rulesched.semantics.dra_devices import AllocationError, Candidate
from rulesched.semantics.dra_requests import RequestData

# A device the search took: for which request, which device, its share id (a shareable
# device's, else ""), the capacity the share consumes.
Taken = tuple[RequestData, Candidate, str, "dict[str, int] | None"]


def allocation_result(
    claim: ResourceClaim, chosen: Sequence[RequestData], taken: Sequence[Taken], node: Any, binding_conditions: bool
) -> Allocation:
    """The allocation of ``claim`` on ``node``: ``chosen`` is the request (or the subrequest
    picked) per request of the claim, ``taken`` the devices in the order they were taken."""
    devices = []
    for data, cand, share, consumed in taken:
        device = cand.device
        devices.append(
            DeviceResult(  # (positional: the allocator builds one per device it takes, in every run)
                data.full_name,  # request
                cand.slice.driver,
                cand.slice.pool,
                device.name,
                True if data.admin else None,  # admin_access
                data.spec.tolerations,
                share,  # share_id
                consumed or None,  # consumed_capacity
                device.binding_conditions if binding_conditions else (),
                device.binding_failure_conditions if binding_conditions else (),
            )
        )
    return Allocation(tuple(devices), _configs(claim, chosen), _node_selector(claim, taken, node))


def _configs(claim: ResourceClaim, chosen: Sequence[RequestData]) -> tuple[AllocationConfig, ...]:
    """The classes' configs (one entry per class, naming every request of it), then the
    claim's for the requests they name; a config naming every request names none."""
    if not claim.spec.config and not any(data.cls.config for data in chosen):
        return ()  # (the common case: nothing to configure, and the walk below costs)
    configs: list[AllocationConfig] = []
    ranges: dict[str, tuple[int, int]] = {}
    for data in chosen:
        found = ranges.get(data.cls.name)
        if found is not None:
            for i in range(*found):
                configs[i] = replace(configs[i], requests=(*configs[i].requests, data.full_name))
            continue
        first = len(configs)
        for opaque in data.cls.config:
            configs.append(AllocationConfig("FromClass", (data.full_name,), opaque))
        ranges[data.cls.name] = (first, len(configs))
    for claim_config in claim.spec.config:
        wanted = claim_config.requests
        if not wanted:
            configs.append(AllocationConfig("FromClaim", (), claim_config.config))
            continue
        for request, data in zip(claim.spec.requests, chosen, strict=True):
            if request.name in wanted or (data.parent and data.full_name in wanted):
                configs.append(AllocationConfig("FromClaim", wanted, claim_config.config))
                break
    names = [
        (request.name, data.full_name if data.parent else None)
        for request, data in zip(claim.spec.requests, chosen, strict=True)
    ]
    out = []
    for config in configs:
        if config.requests and all(n in config.requests or (s is not None and s in config.requests) for n, s in names):
            config = replace(config, requests=())
        out.append(config)
    return tuple(out)


def _node_selector(claim: ResourceClaim, taken: Sequence[Taken], node: Any) -> tuple[NodeSelectorTerm, ...] | None:
    """The node itself when a device is local to it (or binds to it), else the devices' node
    selectors merged into one term; None when every device reaches every node."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for _, cand, _, _ in taken:
        s, d = cand.slice, cand.device
        if s.per_device_node_selection:
            name, selector = d.node_name, d.node_selector
        else:
            name, selector = s.node_name, s.node_selector
        if name or d.binds_to_node:
            return _the_node(node.name)
        if selector:
            if len(selector) > 1:
                raise AllocationError(
                    f"create NodeSelector for claim {claim.name}: unsupported ResourceSlice.NodeSelector with {len(selector)} terms"
                )
            _merge(selector[0].match_fields, fields)
            _merge(selector[0].match_expressions, expressions)
    if fields or expressions:
        return (NodeSelectorTerm(match_expressions=tuple(expressions), match_fields=tuple(fields)),)
    return None


@functools.lru_cache(maxsize=1 << 16)
def _the_node(name: str) -> tuple[NodeSelectorTerm, ...]:
    """The node selector of a node-local device: that node by name (one value per node, made
    once: every allocation on a node with its own devices has it)."""
    return (NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (name,)),)),)


def _merge(source: Sequence[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for req in source:
        if not any(r.key == req.key and r.operator == req.operator and set(r.values) == set(req.values) for r in into):
            into.append(req)
