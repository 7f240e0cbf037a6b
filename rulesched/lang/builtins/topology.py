"""Cluster-wide built-ins — inter-pod affinity, topology spreading, image locality — and what
their answers depend on.

These read the whole cluster through :class:`rulesched.lang.context.ClusterView`, so they take the
evaluation context. Inter-pod affinity is in :mod:`rulesched.lang.builtins.affinity`, spreading in
:mod:`rulesched.lang.builtins.spreading` (both count pods per topology domain with the indexes of
:mod:`rulesched.lang.indexes`); image locality is here. ``VERSIONS`` and ``MOVES`` below tell the
compiled rule set (rulesched.lang.evaluation.ruleset) when a cached answer of each may be reused.
"""

from __future__ import annotations

from typing import Any

from rulesched.lang.builtins.affinity import (
    affinity_keys,
    anti_affinity_keys,
    existing_anti_affinity_columns,
    existing_anti_affinity_ok,
    existing_anti_index,
    inter_pod_affinity_score,
    inter_pod_affinity_score_columns,
    pod_affinity_ok,
    pod_anti_affinity_ok,
    score_index,
)
from rulesched.lang.builtins.spreading import (
    soft_constraints,
    spread_defaulted,
    spread_keys,
    spread_missing_label,
    spread_ok,
    spread_score,
    spread_score_columns,
    spread_score_keys,
)
from rulesched.lang.context import ClusterView, EvalContext

__all__ = [
    "DOMAINS",
    "MOVES",
    "POD_FIELDS",
    "VERSIONS",
    "existing_anti_affinity_ok",
    "image_locality",
    "inter_pod_affinity_score",
    "normalized_image",
    "pod_affinity_ok",
    "pod_anti_affinity_ok",
    "spread_defaulted",
    "spread_missing_label",
    "spread_ok",
    "spread_score",
]

_MB = 1024 * 1024
_MIN_IMAGE = 23 * _MB  # ImageLocality minThreshold
_MAX_IMAGE_PER_CONTAINER = 1000 * _MB  # ImageLocality maxContainerThreshold


# --- image locality ----------------------------------------------------------------------------


def normalized_image(name: str) -> str:
    """An image without a tag or digest means ``:latest`` (ImageLocality normalizedImageName)."""
    if "@" in name or ":" in name.rsplit("/", 1)[-1]:
        return name
    return f"{name}:latest"


def image_locality(ctx: EvalContext, node: Any) -> int:
    """ImageLocality Score: image sizes on the node, spread-scaled, between thresholds -> 0..100."""
    plan = ctx.scratch.get("images")
    if plan is None:
        plan = ctx.scratch["images"] = _image_plan(ctx)
    if not plan:
        return 0
    held = node.images
    names, total_nodes, upper = plan
    total = 0
    for name, count in names:
        size = held.get(name)
        if size is not None:
            total += int(size * count / total_nodes)
    if not total:  # (the common case: none of the pod's images here) clamped to the minimum: 0
        return 0
    total = min(max(total, _MIN_IMAGE), upper)
    return 100 * (total - _MIN_IMAGE) // (upper - _MIN_IMAGE)


def _image_plan(ctx: EvalContext) -> tuple[tuple[tuple[str, int], ...], int, int] | tuple[()]:
    """Once per pod and cluster view: each image's normalised name with how many nodes hold it,
    the number of nodes, and the upper threshold. Empty: the score is 0 everywhere."""
    images = ctx.pod.images
    cluster = ctx.cluster
    if not images or cluster is None:
        return ()
    total_nodes = len(cluster.node_views())
    if not total_nodes:
        return ()
    names = tuple(normalized_image(i) for i in images)
    counts = tuple((n, cluster.image_node_count(n)) for n in names)
    return counts, total_nodes, _MAX_IMAGE_PER_CONTAINER * len(images)


# --- what the answers depend on ------------------------------------------------------------------
# Compiled rules cache results per node for equivalent pods (rulesched.lang.evaluation.ruleset); a cluster-
# wide built-in's cached answer stays valid while its version token is unchanged. The tokens
# read counters the cluster view bumps (``generation`` on any change, ``node_generation`` when
# nodes change) or the version of the index the answer is computed from, which moves only when
# the counts that matter to this pod do.

POD_FIELDS = frozenset(
    {
        "namespace",
        "labels",
        "pod_affinity",
        "pod_anti_affinity",
        "preferred_pod_affinity",
        "preferred_pod_anti_affinity",
        "topology_spread_constraints",
        "node_selector",
        "required_node_affinity",
        "tolerations",
        "images",
        "owner",  # system default spreading: the controller whose selector spreads the pod
    }
)


def _generation(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "generation", 0)


def _node_generation(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "node_generation", 0)


def _if(field: str, then: Any, otherwise: Any) -> Any:
    """The version of a built-in whose answer is fixed unless the pod has ``field``."""

    def version(ctx: EvalContext) -> object:
        return then(ctx) if getattr(ctx.pod, field) else otherwise(ctx)

    return version


def _constant(ctx: EvalContext) -> object:
    return 0


def _version_of(index: Any) -> Any:
    def version(ctx: EvalContext) -> object:
        found = index(ctx)
        return None if found is None else found.version

    return version


def _counts_something(index: Any) -> Any:
    """Moves while the index counts anything for this pod: the answer then differs from node to
    node and each change may shift it, but it is a lookup, cheap to evaluate afresh."""

    def moves(ctx: EvalContext) -> bool:
        found = index(ctx)
        return found is not None and bool(found.counts)

    return moves


def _has(*fields: str) -> Any:
    def moves(ctx: EvalContext) -> bool:
        return any(getattr(ctx.pod, f) for f in fields)

    return moves


def _scores_spreading(ctx: EvalContext) -> bool:
    """Whether PodTopologySpread scores this pod at all: then its answer depends on the feasible
    nodes of the cycle. A pod it skips (no soft constraints of its own, nothing selecting it for
    the system defaults) gets -1 everywhere until the Services or controllers change."""
    return bool(soft_constraints(ctx)[0])


def _workloads(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "workloads", None)


def _always(ctx: EvalContext) -> bool:
    return True


def _never(ctx: EvalContext) -> bool:
    return False


# Whether, for this pod, a built-in's answer moves with (nearly) every change to the cluster:
# caching it per node would miss every time, so rules calling it are evaluated afresh and kept
# out of the cached per-node outcome (rulesched.lang.evaluation.ruleset).
MOVES: dict[str, Any] = {
    "pod_affinity_ok": _has("pod_affinity"),
    "pod_anti_affinity_ok": _has("pod_anti_affinity"),
    "existing_anti_affinity_ok": _counts_something(existing_anti_index),
    "inter_pod_affinity_score": _counts_something(score_index),
    "spread_missing_label": _always,
    "spread_ok": _always,
    "spread_score": _scores_spreading,
    "spread_defaulted": _never,
    "image_locality": _never,
}

VERSIONS: dict[str, Any] = {
    "pod_affinity_ok": _if("pod_affinity", _generation, _constant),
    "pod_anti_affinity_ok": _if("pod_anti_affinity", _generation, _constant),
    "existing_anti_affinity_ok": _version_of(existing_anti_index),
    "inter_pod_affinity_score": _version_of(score_index),
    "spread_missing_label": _generation,
    "spread_ok": _generation,
    # Scored pods depend on the feasible nodes of the cycle (it moves: never cached); for the
    # others the answer is fixed while the Services and controllers are.
    "spread_score": _workloads,
    "spread_defaulted": _workloads,
    "image_locality": _node_generation,
}


def _when_nothing_counted(index: Any, value: Any) -> Any:
    def uniform(ctx: EvalContext) -> Any:
        found = index(ctx)
        return value if found is None or not found.counts else None

    return uniform


def _no_images(ctx: EvalContext) -> int | None:
    """0 everywhere when the pod has no images or no node holds any of them."""
    plan = ctx.scratch.get("images")
    if plan is None:
        plan = ctx.scratch["images"] = _image_plan(ctx)
    return 0 if not plan or not any(count for _, count in plan[0]) else None


def _spread_skipped(ctx: EvalContext) -> int | None:
    """-1 everywhere (left out of normalisation: 0) when PodTopologySpread skips the pod."""
    return None if soft_constraints(ctx)[0] else -1


# Built-ins evaluated for many nodes at once from node columns (rulesched.engine.vectorise).
COLUMNS: dict[str, Any] = {
    "spread_score": spread_score_columns,
    "existing_anti_affinity_ok": existing_anti_affinity_columns,
    "inter_pod_affinity_score": inter_pod_affinity_score_columns,
}

UNIFORM: dict[str, Any] = {
    "existing_anti_affinity_ok": _when_nothing_counted(existing_anti_index, True),
    "inter_pod_affinity_score": _when_nothing_counted(score_index, 0),
    "image_locality": _no_images,
    "spread_score": _spread_skipped,
}


def _cluster_workloads(cluster: ClusterView | None) -> object:
    return getattr(cluster, "workloads", None)


# Built-ins whose answer, called once per pod (in a guard), depends on more of the cluster than
# the pod's own fields: a token of that part of the cluster, which keys the pod's equivalence
# class beside its fields (rulesched.lang.evaluation.ruleset), so a guard decided by an older
# token is never reused.
CLASS_TOKENS: dict[str, Any] = {"spread_defaulted": _cluster_workloads}

# The node labels each filter's answer reads (the topology keys of the pod's terms or
# constraints): nodes alike in them are evaluated once per cycle (rulesched.engine.vectorise).
DOMAINS: dict[str, Any] = {
    "pod_affinity_ok": affinity_keys,
    "pod_anti_affinity_ok": anti_affinity_keys,
    "spread_ok": spread_keys,
    "spread_missing_label": spread_keys,
    "spread_score": spread_score_keys,
}
