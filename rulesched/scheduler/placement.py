"""Placements of a pod group (KEP-5732, topology-aware workload scheduling): which domains a
group is tried in, and which of the domains that fit it wins.

A group with a topology constraint (``schedulingConstraints.topology[0].key``) is tried in each
domain of that label among the nodes its parent's placement allows (upstream's
TopologyPlacementGenerator): one placement per distinct value, or only the value its members
already placed hold. Of the placements where the group fits, the best is chosen by upstream's
two placement scores, weight 1 each (the default profile's PlacementScore plugins):

- NodeResourcesFit's: the MostAllocated share of cpu and memory (weights 1 and 1) over the
  placement's nodes taken together, with the group's members added (requests with the
  non-zero defaults, as the scorer counts them);
- PodGroupPodsCount's: the group's pods placed (bound before, and by this placement),
  normalised to the best placement's count (100).

Upstream breaks equal totals at random; here the first placement in label-value order wins, so
a simulation is the same each run. Pure functions over node views and pods.
Next stage: :mod:`rulesched.scheduler.workload_placement` assumes the chosen placement's members.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.model import Pod

MAX_SCORE = 100
# NodeResourcesFit's placement scorer: MostAllocated over these resources, with these weights
# (NodeResourcesFitArgs' default scoringStrategy.resources).
PLACEMENT_RESOURCES = (("cpu", 1), ("memory", 1))


@dataclass(frozen=True)
class Placement:
    """One domain a group is tried in: the labels its nodes share (the parent's levels and this
    one), and its name (the label value, as upstream names placements)."""

    name: str
    domain: Mapping[str, str]


def within(node: Any, domain: Mapping[str, str]) -> bool:
    labels = node.labels
    return all(labels.get(k) == v for k, v in domain.items())


def placements(
    nodes: Sequence[Any], key: str, parent: Mapping[str, str], required: str | None = None
) -> list[Placement]:
    """The domains of label ``key`` among the nodes within ``parent``, in value order (only
    ``required`` when the group's placed members fix it)."""
    values = {n.labels[key] for n in nodes if key in n.labels and within(n, parent)}
    if required is not None:
        values &= {required}
    return [Placement(v, {**parent, key: v}) for v in sorted(values)]


def placed_domain(nodes_of_placed: Iterable[Any], key: str) -> tuple[str | None, str]:
    """The one value of ``key`` the group's placed members' nodes hold (None when none is
    placed), or an error message (upstream's getScheduledPodsTopologyDomain)."""
    found: str | None = None
    for node in nodes_of_placed:
        value = node.labels.get(key)
        if value is None:
            return (
                None,
                f"cannot determine domain for already scheduled pods: no topology domain found on node {node.name}",
            )
        if found is not None and found != value:
            return (
                None,
                f"cannot determine domain for already scheduled pods: more than 1 domain found for pod group: {found}, {value}",
            )
        found = value
    return found, ""


def fit_score(
    nodes: Sequence[Any],
    domain: Mapping[str, str],
    members: Sequence[Pod],
    resources: Sequence[tuple[str, int]] = PLACEMENT_RESOURCES,
) -> int:
    """NodeResourcesFit's placement score: MostAllocated over the placement's nodes together,
    the members' requests added (resource_allocation.go scorePlacement). cpu and memory count
    with the non-zero defaults; an extended resource only when some member requests it."""
    total = 0
    weights = 0
    for resource, weight in resources:
        base = resource in ("cpu", "memory")
        wanted = sum((p.nonzero_requests if base else p.requests).get(resource, 0) for p in members)
        if not base and resource != "ephemeral-storage" and not wanted:
            continue
        allocatable = requested = 0
        for node in nodes:
            if not within(node, domain):
                continue
            have = node.allocatable.get(resource, 0)
            if have:
                allocatable += have
                requested += (node.nonzero_requested if base else node.requested).get(resource, 0)
        if not allocatable:
            continue
        requested += wanted
        total += weight * (min(requested, allocatable) * MAX_SCORE // allocatable)
        weights += weight
    return total // weights if weights else 0


def normalized_counts(counts: Sequence[int]) -> list[int]:
    """PodGroupPodsCount's NormalizePlacementScore: each count over the largest, 0..100."""
    most = max(counts, default=0)
    if most == 0:
        raise ValueError("no pods from pod group are assigned to any of the candidate placements")
    return [count * MAX_SCORE // most for count in counts]


def best(candidates: Sequence[tuple[Placement, int, int]]) -> int:
    """The index of the winning placement among ``(placement, fit score, pods placed)``: the
    highest fit score plus the pods count normalised to the largest count; the first on ties."""
    counts = normalized_counts([count for _, _, count in candidates])
    totals = [fit + count for (_, fit, _), count in zip(candidates, counts, strict=True)]
    return totals.index(max(totals))
