"""Cluster-wide built-ins: inter-pod affinity, topology spreading, image locality.

These read the whole cluster through :class:`rulesched.lang.context.ClusterView`, so they take the
evaluation context; what they precompute per pod (kube-scheduler's PreFilter / PreScore state)
is kept in ``ctx.scratch`` and reused for every node. Semantics follow kube-scheduler's
InterPodAffinity, PodTopologySpread and ImageLocality plugins; the comments name the upstream
function each piece mirrors.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang.context import EvalContext
from rulesched.lang.matching import (
    label_selector_matches,
    node_selector_term_matches,
    subset,
    tolerated,
)
from rulesched.model import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
    TopologySpreadConstraint,
)

HOSTNAME = "kubernetes.io/hostname"
HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight default
_MB = 1024 * 1024
_MIN_IMAGE = 23 * _MB  # ImageLocality minThreshold
_MAX_IMAGE_PER_CONTAINER = 1000 * _MB  # ImageLocality maxContainerThreshold
Pair = tuple[str, str]


# --- affinity terms ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    """An affinity term resolved for its owner pod (framework.AffinityTerm)."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    weight: int = 0

    def matches(self, pod: Pod, ctx: EvalContext) -> bool:
        """AffinityTerm.Matches: namespace (listed or selected), then labels."""
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None or ctx.cluster is None:
                return False
            if not label_selector_matches(self.namespace_selector, ctx.cluster.namespace_labels(pod.namespace)):
                return False
        return label_selector_matches(self.selector, pod.labels)


def _resolve(owner: Pod, term: PodAffinityTerm, weight: int = 0) -> _Term:
    namespaces = set(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces.add(owner.namespace)  # no namespaces and no selector: the owner's namespace
    selector = term.label_selector
    extra = [LabelSelectorRequirement(k, "In", (owner.labels[k],)) for k in term.match_label_keys if k in owner.labels]
    extra += [LabelSelectorRequirement(k, "NotIn", (owner.labels[k],)) for k in term.mismatch_label_keys
              if k in owner.labels]
    if extra and selector is not None:
        selector = LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))
    return _Term(term.topology_key, selector, frozenset(namespaces), term.namespace_selector, weight)


def _terms(pod: Pod, terms: Sequence[PodAffinityTerm]) -> list[_Term]:
    return [_resolve(pod, t) for t in terms]


def _matches_all(pod: Pod, terms: Sequence[_Term], ctx: EvalContext) -> bool:
    """podMatchesAllAffinityTerms: false for no terms."""
    return bool(terms) and all(t.matches(pod, ctx) for t in terms)


@dataclass(frozen=True)
class _AffinityState:
    """InterPodAffinity PreFilter state: topology pair -> count, three ways."""

    affinity_terms: list[_Term]
    anti_terms: list[_Term]
    affinity_counts: Counter[Pair]
    anti_counts: Counter[Pair]
    existing_anti_counts: Counter[Pair]


def _affinity_state(ctx: EvalContext) -> _AffinityState:
    state = ctx.scratch.get("interpod")
    if state is not None:
        return state  # type: ignore[no-any-return]
    pod, cluster = ctx.pod, ctx.cluster
    affinity_terms = _terms(pod, pod.pod_affinity)
    anti_terms = _terms(pod, pod.pod_anti_affinity)
    affinity: Counter[Pair] = Counter()
    anti: Counter[Pair] = Counter()
    existing: Counter[Pair] = Counter()
    if cluster is not None:
        for other, node in cluster.affinity_pods():  # existing pods' required anti-affinity
            for term in _terms(other, other.pod_anti_affinity):
                if term.topology_key in node.labels and term.matches(pod, ctx):
                    existing[(term.topology_key, node.labels[term.topology_key])] += 1
        if affinity_terms or anti_terms:
            for node in cluster.node_views():
                labels = node.labels
                for other in node.pods:
                    if _matches_all(other, affinity_terms, ctx):
                        for term in affinity_terms:
                            if term.topology_key in labels:
                                affinity[(term.topology_key, labels[term.topology_key])] += 1
                    for term in anti_terms:
                        if term.topology_key in labels and term.matches(other, ctx):
                            anti[(term.topology_key, labels[term.topology_key])] += 1
    state = _AffinityState(affinity_terms, anti_terms, affinity, anti, existing)
    ctx.scratch["interpod"] = state
    return state


def pod_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyPodAffinity, with the first-pod-of-a-group exception."""
    state = _affinity_state(ctx)
    pods_exist = True
    for term in state.affinity_terms:
        value = node.labels.get(term.topology_key)
        if value is None:
            return False
        if state.affinity_counts[(term.topology_key, value)] <= 0:
            pods_exist = False
    if pods_exist:
        return True
    return not state.affinity_counts and _matches_all(ctx.pod, state.affinity_terms, ctx)


def pod_anti_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyPodAntiAffinity."""
    state = _affinity_state(ctx)
    for term in state.anti_terms:
        value = node.labels.get(term.topology_key)
        if value is not None and state.anti_counts[(term.topology_key, value)] > 0:
            return False
    return True


def existing_anti_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyExistingPodsAntiAffinity."""
    counts = _affinity_state(ctx).existing_anti_counts
    if not counts:
        return True
    return not any(counts[pair] > 0 for pair in node.labels.items())


def _affinity_scores(ctx: EvalContext) -> dict[Pair, int]:
    """InterPodAffinity PreScore: topology pair -> summed weights."""
    scores = ctx.scratch.get("interpod-score")
    if scores is not None:
        return scores  # type: ignore[no-any-return]
    pod, cluster = ctx.pod, ctx.cluster
    preferred = [_resolve(pod, w.term, w.weight) for w in pod.preferred_pod_affinity]
    preferred_anti = [_resolve(pod, w.term, -w.weight) for w in pod.preferred_pod_anti_affinity]
    incoming = preferred + preferred_anti
    totals: Counter[Pair] = Counter()
    if cluster is not None:
        pairs = cluster.node_views() if incoming else (n for _, n in cluster.affinity_pods())
        seen: set[int] = set()
        for node in pairs:
            if id(node) in seen:
                continue
            seen.add(id(node))
            for other in node.pods:
                _score_pair(ctx, pod, other, node.labels, incoming, totals)
    ctx.scratch["interpod-score"] = totals
    return totals


def _score_pair(ctx: EvalContext, pod: Pod, other: Pod, labels: Mapping[str, str], incoming: list[_Term],
                totals: Counter[Pair]) -> None:
    def add(term: _Term, target: Pod, weight: int) -> None:
        if weight and term.topology_key in labels and term.matches(target, ctx):
            totals[(term.topology_key, labels[term.topology_key])] += weight

    for term in incoming:  # the incoming pod's preferences about existing pods
        add(term, other, term.weight)
    if HARD_POD_AFFINITY_WEIGHT > 0:  # existing pods' required affinity to the incoming pod
        for required in other.pod_affinity:
            add(_resolve(other, required), pod, HARD_POD_AFFINITY_WEIGHT)
    for w in other.preferred_pod_affinity:
        add(_resolve(other, w.term), pod, w.weight)
    for w in other.preferred_pod_anti_affinity:
        add(_resolve(other, w.term), pod, -w.weight)


def inter_pod_affinity_score(ctx: EvalContext, node: Any) -> int:
    totals = _affinity_scores(ctx)
    if not totals:
        return 0
    return sum(totals.get(pair, 0) for pair in node.labels.items())


# --- topology spread ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _constraints(pod: Pod, mode: str) -> list[_Constraint]:
    out = []
    for c in pod.topology_spread_constraints:
        if c.when_unsatisfiable != mode:
            continue
        out.append(_Constraint(c.max_skew, c.topology_key, _with_label_keys(pod, c), c.min_domains,
                               c.node_affinity_policy != "Ignore", c.node_taints_policy == "Honor"))
    return out


def _with_label_keys(pod: Pod, c: TopologySpreadConstraint) -> LabelSelector | None:
    selector = c.label_selector
    keys = [k for k in c.match_label_keys if k in pod.labels]
    if not keys or selector is None:
        return selector
    extra = tuple(LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys)
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))


def _included(pod: Pod, c: _Constraint, node: Any) -> bool:
    """matchNodeInclusionPolicies: the pod's node affinity/selector, and taints if honoured."""
    if c.honor_affinity:
        if not subset(pod.node_selector, node.labels):
            return False
        terms = pod.required_node_affinity
        if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
            return False
    if c.honor_taints:
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not tolerated(taint, pod.tolerations):
                return False
    return True


def _count_matching(pods: Sequence[Pod], selector: LabelSelector | None, namespace: str) -> int:
    """countPodsMatchSelector: same namespace, not terminating, labels selected."""
    return sum(1 for p in pods if p.namespace == namespace and not p.deleting
               and label_selector_matches(selector, p.labels))


@dataclass(frozen=True)
class _SpreadState:
    constraints: list[_Constraint]
    counts: Counter[Pair]
    domains: dict[str, int]
    minimum: dict[str, int]


def _spread_state(ctx: EvalContext) -> _SpreadState:
    """PodTopologySpread PreFilter: matching pods per domain, domains and the minimum per key."""
    state = ctx.scratch.get("spread")
    if state is not None:
        return state  # type: ignore[no-any-return]
    pod = ctx.pod
    constraints = _constraints(pod, "DoNotSchedule")
    counts: Counter[Pair] = Counter()
    if constraints and ctx.cluster is not None:
        for node in ctx.cluster.node_views():
            labels = node.labels
            if not all(c.topology_key in labels for c in constraints):
                continue
            for c in constraints:
                if _included(pod, c, node):
                    pair = (c.topology_key, labels[c.topology_key])
                    counts[pair] += _count_matching(node.pods, c.selector, pod.namespace)
    domains: Counter[str] = Counter(key for key, _ in counts)
    minimum: dict[str, int] = {}
    for (key, _), n in counts.items():
        minimum[key] = min(minimum.get(key, n), n)
    state = _SpreadState(constraints, counts, dict(domains), minimum)
    ctx.scratch["spread"] = state
    return state


def spread_ok(ctx: EvalContext, node: Any) -> bool:
    """PodTopologySpread Filter: for every hard constraint, skew <= maxSkew."""
    return _spread_failure(ctx, node) is None


def spread_missing_label(ctx: EvalContext, node: Any) -> bool:
    """Whether the first constraint the node fails, in order, fails for lack of its label (the
    "(missing required label)" reason) rather than for skew."""
    return _spread_failure(ctx, node) == "label"


def _spread_failure(ctx: EvalContext, node: Any) -> str | None:
    """PodTopologySpread Filter, constraint by constraint: None, "label" or "skew"."""
    state = _spread_state(ctx)
    pod = ctx.pod
    for c in state.constraints:
        value = node.labels.get(c.topology_key)
        if value is None:
            return "label"
        key = c.topology_key
        minimum = 0 if state.domains.get(key, 0) < c.min_domains else state.minimum.get(key, 0)
        self_match = 1 if label_selector_matches(c.selector, pod.labels) else 0
        if state.counts.get((key, value), 0) + self_match - minimum > c.max_skew:
            return "skew"
    return None


@dataclass(frozen=True)
class _SpreadScoreState:
    constraints: list[_Constraint]
    counts: dict[Pair, int]
    weights: list[float]
    ignored: frozenset[str]


def _spread_score_state(ctx: EvalContext) -> _SpreadScoreState:
    """PodTopologySpread PreScore over the feasible nodes."""
    state = ctx.scratch.get("spread-score")
    if state is not None:
        return state  # type: ignore[no-any-return]
    pod = ctx.pod
    constraints = _constraints(pod, "ScheduleAnyway")
    feasible = list(ctx.feasible or ())
    ignored: set[str] = set()
    counts: dict[Pair, int] = {}
    sizes = [0] * len(constraints)
    for node in feasible:
        if not all(c.topology_key in node.labels for c in constraints):
            ignored.add(node.name)
            continue
        for i, c in enumerate(constraints):
            if c.topology_key == HOSTNAME:
                continue
            pair = (c.topology_key, node.labels[c.topology_key])
            if pair not in counts:
                counts[pair] = 0
                sizes[i] += 1
    weights = []
    for i, c in enumerate(constraints):
        size = len(feasible) - len(ignored) if c.topology_key == HOSTNAME else sizes[i]
        weights.append(math.log(size + 2))
    if constraints and counts and ctx.cluster is not None:
        for node in ctx.cluster.node_views():
            labels = node.labels
            if not all(c.topology_key in labels for c in constraints):
                continue
            for c in constraints:
                pair = (c.topology_key, labels[c.topology_key])
                if pair in counts and _included(pod, c, node):
                    counts[pair] += _count_matching(node.pods, c.selector, pod.namespace)
    state = _SpreadScoreState(constraints, counts, weights, frozenset(ignored))
    ctx.scratch["spread-score"] = state
    return state


def spread_score(ctx: EvalContext, node: Any) -> int:
    """PodTopologySpread Score; -1 marks a node left out of normalisation (``normalize spread``)."""
    state = _spread_score_state(ctx)
    if node.name in state.ignored:
        return -1
    score = 0.0
    for c, weight in zip(state.constraints, state.weights, strict=True):
        value = node.labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == HOSTNAME:
            count = _count_matching(node.pods, c.selector, ctx.pod.namespace)
        else:
            count = state.counts.get((c.topology_key, value), 0)
        score += count * weight + (c.max_skew - 1)
    return int(math.floor(score + 0.5))  # math.Round: half away from zero (scores are >= 0)


# --- image locality ----------------------------------------------------------------------------


def normalized_image(name: str) -> str:
    """An image without a tag or digest means ``:latest`` (ImageLocality normalizedImageName)."""
    if "@" in name or ":" in name.rsplit("/", 1)[-1]:
        return name
    return f"{name}:latest"


def image_locality(ctx: EvalContext, node: Any) -> int:
    """ImageLocality Score: image sizes on the node, spread-scaled, between thresholds -> 0..100."""
    images = ctx.pod.images
    if not images or ctx.cluster is None:
        return 0
    total_nodes = len(ctx.cluster.node_views())
    total = 0
    for image in images:
        name = normalized_image(image)
        size = node.images.get(name)
        if size is not None and total_nodes:
            total += int(size * ctx.cluster.image_node_count(name) / total_nodes)
    upper = _MAX_IMAGE_PER_CONTAINER * len(images)
    total = min(max(total, _MIN_IMAGE), upper)
    return 100 * (total - _MIN_IMAGE) // (upper - _MIN_IMAGE)


# --- what the answers depend on ------------------------------------------------------------------
# Compiled rules cache results per node for equivalent pods (rulesched.lang.ruleset); a cluster-
# wide built-in's cached answer stays valid while its version token is unchanged. The tokens
# read counters the cluster view bumps: ``generation`` on any change, ``affinity_generation`` when
# pods with (anti-)affinity terms or node labels change, ``node_generation`` when nodes change.

POD_FIELDS = frozenset({
    "namespace", "labels", "pod_affinity", "pod_anti_affinity", "preferred_pod_affinity",
    "preferred_pod_anti_affinity", "topology_spread_constraints", "node_selector",
    "required_node_affinity", "tolerations", "images",
})


def _generation(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "generation", 0)


def _affinity_generation(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "affinity_generation", 0)


def _node_generation(ctx: EvalContext) -> object:
    return getattr(ctx.cluster, "node_generation", 0)


def _if(field: str, then: Any, otherwise: Any) -> Any:
    """The version of a built-in whose answer is fixed unless the pod has ``field``."""
    def version(ctx: EvalContext) -> object:
        return then(ctx) if getattr(ctx.pod, field) else otherwise(ctx)
    return version


def _constant(ctx: EvalContext) -> object:
    return 0


def _preferred_version(ctx: EvalContext) -> object:
    pod = ctx.pod
    if pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity:
        return _generation(ctx)
    return _affinity_generation(ctx)


def _has(*fields: str) -> Any:
    def moves(ctx: EvalContext) -> bool:
        return any(getattr(ctx.pod, f) for f in fields)
    return moves


def _always(ctx: EvalContext) -> bool:
    return True


def _never(ctx: EvalContext) -> bool:
    return False


# Whether, for this pod, a built-in's answer moves with (nearly) every change to the cluster:
# caching it per node would miss every time, so rules calling it are evaluated afresh and kept
# out of the cached per-node outcome (rulesched.lang.ruleset).
MOVES: dict[str, Any] = {
    "pod_affinity_ok": _has("pod_affinity"),
    "pod_anti_affinity_ok": _has("pod_anti_affinity"),
    "existing_anti_affinity_ok": _never,
    "inter_pod_affinity_score": _has("preferred_pod_affinity", "preferred_pod_anti_affinity"),
    "spread_missing_label": _always,
    "spread_ok": _always,
    "spread_score": _always,
    "image_locality": _never,
}

VERSIONS: dict[str, Any] = {
    "pod_affinity_ok": _if("pod_affinity", _generation, _constant),
    "pod_anti_affinity_ok": _if("pod_anti_affinity", _generation, _constant),
    "existing_anti_affinity_ok": _affinity_generation,
    "inter_pod_affinity_score": _preferred_version,
    "spread_missing_label": _generation,
    "spread_ok": _generation,
    "spread_score": None,  # depends on the feasible nodes of the cycle: never cached
    "image_locality": _node_generation,
}
