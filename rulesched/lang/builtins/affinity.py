"""Inter-pod affinity built-ins: required affinity and anti-affinity (both ways) and the preferred
terms' score, after kube-scheduler's InterPodAffinity plugin.

The terms themselves (resolved for their owner, matched against a pod) are Kubernetes'
semantics (:mod:`rulesched.semantics.affinity`). PreFilter / PreScore state — matching pods per topology pair — comes from indexes kept current
between cycles (:mod:`rulesched.lang.indexes`), keyed by what the incoming pod brings: its
resolved terms, and, for the terms of pods already running, which of those terms select it (a
registry of the running pods' distinct terms says; pods alike in that share an index). The per-pod
state is kept in ``ctx.scratch``; per node each built-in is a few dictionary lookups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.indexes import Add, LabelCensus, PodSum, current
from rulesched.model import Pod
from rulesched.semantics.affinity import (
    HARD_POD_AFFINITY_WEIGHT,
    Namespaces,
    Term,
    matches_all,
    resolve,
    resolve_all,
)

Pair = tuple[str, str]
_NOTHING: dict[Any, int] = {}


def _namespaces(cluster: ClusterView | None) -> Namespaces | None:
    """The namespaces' labels, which the indexes' counting functions keep (not the cluster view:
    an index outlives the snapshot it was built from; namespace changes rebuild it)."""
    return cluster.namespaces if cluster is not None else None


# --- filter ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AffinityState:
    """InterPodAffinity PreFilter state: topology pair -> count, three ways."""

    affinity_terms: tuple[Term, ...]
    anti_terms: tuple[Term, ...]
    affinity_counts: Mapping[Pair, int]
    anti_counts: Mapping[Pair, int]
    existing_anti_counts: Mapping[Pair, int]


def existing_anti_index(ctx: EvalContext) -> PodSum | None:
    """Pairs where running pods' required anti-affinity terms select the incoming pod."""
    index = ctx.scratch.get("existing-anti")
    if index is None and ctx.cluster is not None:
        index = ctx.scratch["existing-anti"] = _existing_anti_index(ctx, ctx.cluster.namespaces)
    return index


def _existing_anti_index(ctx: EvalContext, namespaces: Namespaces) -> PodSum:
    pod = ctx.pod
    # Which running pods' required anti-affinity terms select this pod: pods alike in that share
    # the index (a class of its own per pod, keyed by its labels, would walk the cluster each time).
    selecting = frozenset(k for k in existing_terms(ctx) if k[0] == ANTI and k[1].matches(pod, namespaces))

    def contribute(other: Pod, node: Any, add: Add) -> None:
        if other.pod_anti_affinity:
            for term in resolve_all(other, other.pod_anti_affinity):
                value = node.labels.get(term.topology_key)
                if value is not None and (ANTI, term, 0) in selecting:
                    add((term.topology_key, value), 1)

    return current(ctx, ("existing-anti", selecting), lambda: PodSum(contribute, affinity_only=True))


# Roles of running pods' terms in the registry of distinct terms (existing_terms).
AFFINITY, PREFERRED, ANTI = "affinity", "preferred", "anti"
TermKey = tuple[str, Term, int]  # (role, resolved term, weight: negative for preferred anti-affinity)


def existing_terms(ctx: EvalContext) -> Mapping[TermKey, int]:
    """Every distinct (anti-)affinity term of the running pods, resolved for its owner, with
    how many pods carry it. What the running pods think of an incoming pod is decided by which
    of these select it: two pods that the same terms select get the same per-pair sums."""

    def contribute(other: Pod, node: Any, add: Add) -> None:
        for t in other.pod_affinity:
            add((AFFINITY, resolve(other, t), HARD_POD_AFFINITY_WEIGHT), 1)
        for w in other.preferred_pod_affinity:
            add((PREFERRED, resolve(other, w.term), w.weight), 1)
        for w in other.preferred_pod_anti_affinity:
            add((PREFERRED, resolve(other, w.term), -w.weight), 1)
        for t in other.pod_anti_affinity:
            add((ANTI, resolve(other, t), 0), 1)

    return current(ctx, ("existing-terms",), lambda: PodSum(contribute, affinity_only=True)).counts


def _affinity_counts(ctx: EvalContext, terms: tuple[Term, ...], namespaces: Namespaces) -> Mapping[Pair, int]:
    """Pairs of the terms' keys on nodes running pods that match every term."""

    def contribute(other: Pod, node: Any, add: Add) -> None:
        if matches_all(other, terms, namespaces):
            labels = node.labels
            for term in terms:
                value = labels.get(term.topology_key)
                if value is not None:
                    add((term.topology_key, value), 1)

    return current(ctx, ("affinity", terms), lambda: PodSum(contribute)).counts


def _anti_counts(ctx: EvalContext, terms: tuple[Term, ...], namespaces: Namespaces) -> Mapping[Pair, int]:
    """Pairs of each term's key on nodes running pods that term matches."""

    def contribute(other: Pod, node: Any, add: Add) -> None:
        labels = node.labels
        for term in terms:
            value = labels.get(term.topology_key)
            if value is not None and term.matches(other, namespaces):
                add((term.topology_key, value), 1)

    return current(ctx, ("anti", terms), lambda: PodSum(contribute)).counts


def _affinity_state(ctx: EvalContext) -> _AffinityState:
    state = ctx.scratch.get("interpod")
    if state is not None:
        return state  # type: ignore[no-any-return]
    pod, cluster = ctx.pod, ctx.cluster
    affinity_terms = resolve_all(pod, pod.pod_affinity)
    anti_terms = resolve_all(pod, pod.pod_anti_affinity)
    existing = existing_anti_index(ctx)
    if cluster is None or existing is None:
        state = _AffinityState(affinity_terms, anti_terms, _NOTHING, _NOTHING, _NOTHING)
    else:
        state = _AffinityState(
            affinity_terms,
            anti_terms,
            _affinity_counts(ctx, affinity_terms, cluster.namespaces) if affinity_terms else _NOTHING,
            _anti_counts(ctx, anti_terms, cluster.namespaces) if anti_terms else _NOTHING,
            existing.counts,
        )
    ctx.scratch["interpod"] = state
    return state


def pod_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyPodAffinity, with the first-pod-of-a-group exception."""
    state = ctx.scratch.get("interpod") or _affinity_state(ctx)  # per node: skip the call
    pods_exist = True
    counts = state.affinity_counts
    for term in state.affinity_terms:
        value = node.labels.get(term.topology_key)
        if value is None:
            return False
        if counts.get((term.topology_key, value), 0) <= 0:
            pods_exist = False
    if pods_exist:
        return True
    return not counts and matches_all(ctx.pod, state.affinity_terms, _namespaces(ctx.cluster))


def affinity_keys(ctx: EvalContext) -> tuple[str, ...]:
    """The labels :func:`pod_affinity_ok` reads of a node: its terms' topology keys."""
    return tuple(term.topology_key for term in _affinity_state(ctx).affinity_terms)


def anti_affinity_keys(ctx: EvalContext) -> tuple[str, ...]:
    """The labels :func:`pod_anti_affinity_ok` reads of a node."""
    return tuple(term.topology_key for term in _affinity_state(ctx).anti_terms)


def pod_anti_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyPodAntiAffinity."""
    state = ctx.scratch.get("interpod") or _affinity_state(ctx)  # per node: skip the call
    counts = state.anti_counts
    if not counts:
        return True
    for term in state.anti_terms:
        value = node.labels.get(term.topology_key)
        if value is not None and counts.get((term.topology_key, value), 0) > 0:
            return False
    return True


def existing_anti_affinity_ok(ctx: EvalContext, node: Any) -> bool:
    """satisfyExistingPodsAntiAffinity."""
    counts = (ctx.scratch.get("interpod") or _affinity_state(ctx)).existing_anti_counts
    if not counts:
        return True
    return not any(counts.get(pair, 0) > 0 for pair in node.labels.items())


def existing_anti_affinity_columns(ctx: EvalContext, cols: Any, rows: Any) -> Any:
    """:func:`existing_anti_affinity_ok` of many rows (of the NodeColumns ``cols``): a node fails
    where one of its labels is a (key, value) some existing pod's anti-affinity counts."""
    counts = (ctx.scratch.get("interpod") or _affinity_state(ctx)).existing_anti_counts
    by_key: dict[str, set[str]] = {}
    for (key, value), n in counts.items():
        if n > 0:
            by_key.setdefault(key, set()).add(value)
    bad: Any = None
    for key, values in by_key.items():
        hit = cols.label_in(key, values, rows)
        bad = hit if bad is None else bad | hit
    return [True] * len(rows) if bad is None else (~bad).tolist()


# --- score -------------------------------------------------------------------------------------


def score_index(ctx: EvalContext) -> PodSum | None:
    """InterPodAffinity PreScore: topology pair -> summed weights, both ways."""
    index = ctx.scratch.get("interpod-score")
    if index is not None or ctx.cluster is None:
        return index
    pod, namespaces = ctx.pod, ctx.cluster.namespaces
    preferred = [resolve(pod, w.term, w.weight) for w in pod.preferred_pod_affinity]
    preferred_anti = [resolve(pod, w.term, -w.weight) for w in pod.preferred_pod_anti_affinity]
    incoming = tuple(preferred + preferred_anti)
    # The running pods' terms that select this pod (see existing_terms): with its own terms, all
    # the sums depend on. Pods alike in both share one index.
    selecting = frozenset(
        k
        for k in existing_terms(ctx)
        if k[0] != ANTI
        and k[2]
        and (k[0] == PREFERRED or HARD_POD_AFFINITY_WEIGHT > 0)
        and k[1].matches(pod, namespaces)
    )

    def contribute(other: Pod, node: Any, add: Add) -> None:
        _score_pair(other, node.labels, incoming, selecting, add, namespaces)

    key = ("interpod-score", selecting, incoming)
    builder = None
    if incoming and all(_countable(t) for t in incoming):  # the pods the terms select: from the census
        census = current(ctx, ("label-census",), LabelCensus)

        def builder(cluster: Any, add: Add) -> None:
            _score_from_census(cluster, census, incoming, selecting, add, namespaces)

    index = current(ctx, key, lambda: PodSum(contribute, affinity_only=not incoming, builder=builder))
    ctx.scratch["interpod-score"] = index
    return index


def _countable(term: Term) -> bool:
    """A term whose pods a :class:`LabelCensus` counts: listed namespaces, matchLabels only."""
    selector = term.selector
    return (
        term.namespace_selector is None
        and selector is not None
        and not selector.match_expressions
        and bool(selector.match_labels)
    )


def _score_from_census(
    cluster: Any,
    census: LabelCensus,
    incoming: Sequence[Term],
    selecting: frozenset[TermKey],
    add: Add,
    namespaces: Namespaces,
) -> None:
    """score_index's sums without a walk over every pod: the running pods' terms from the pods
    that have some, the incoming pod's terms from the nodes holding the pods they select."""
    if selecting:
        for other, node in cluster.affinity_pods():
            _score_pair(other, node.labels, (), selecting, add, namespaces)
    for term in incoming:
        if not term.weight:
            continue
        assert term.selector is not None
        pairs = term.selector.match_labels
        for namespace in term.namespaces:
            for name, n in census.nodes_with(namespace, *pairs[0], live=False).items():
                node = cluster.node_view(name) if n > 0 else None
                if node is None or term.topology_key not in node.labels:
                    continue
                if len(pairs) > 1:
                    n = sum(1 for p in node.pods if p.namespace == namespace and term.matches(p, namespaces))
                if n:
                    add((term.topology_key, node.labels[term.topology_key]), term.weight * n)


def _score_pair(
    other: Pod,
    labels: Mapping[str, str],
    incoming: Sequence[Term],
    selecting: frozenset[TermKey],
    add: Add,
    namespaces: Namespaces,
) -> None:
    for term in incoming:  # the incoming pod's preferences about existing pods
        if term.weight and term.topology_key in labels and term.matches(other, namespaces):
            add((term.topology_key, labels[term.topology_key]), term.weight)
    if not selecting:
        return

    def count(key: TermKey) -> None:  # an existing pod's term, if it selects the incoming pod
        term = key[1]
        if term.topology_key in labels and key in selecting:
            add((term.topology_key, labels[term.topology_key]), key[2])

    if HARD_POD_AFFINITY_WEIGHT > 0:  # existing pods' required affinity to the incoming pod
        for required in other.pod_affinity:
            count((AFFINITY, resolve(other, required), HARD_POD_AFFINITY_WEIGHT))
    for w in other.preferred_pod_affinity:
        count((PREFERRED, resolve(other, w.term), w.weight))
    for w in other.preferred_pod_anti_affinity:
        count((PREFERRED, resolve(other, w.term), -w.weight))


def inter_pod_affinity_score(ctx: EvalContext, node: Any) -> int:
    index = score_index(ctx)
    if index is None or not index.counts:
        return 0
    totals = index.counts
    return sum(totals.get(pair, 0) for pair in node.labels.items())


def inter_pod_affinity_score_columns(ctx: EvalContext, cols: Any, rows: Any) -> list[int]:
    """:func:`inter_pod_affinity_score` of many rows (of the NodeColumns ``cols``): per topology
    key the index counts, one dictionary lookup per row, instead of one per label of each node
    (this score is evaluated afresh every cycle, on every feasible node: 5000 of them per cycle
    at 100 000 nodes)."""
    index = score_index(ctx)
    if index is None or not index.counts:
        return [0] * len(rows)
    by_key: dict[str, dict[str, int]] = {}
    for (key, value), n in index.counts.items():
        by_key.setdefault(key, {})[value] = n
    totals: list[int] | None = None
    for key, counts in by_key.items():  # a node has one value per key: one lookup each
        get = counts.get
        found = [get(v, 0) if v is not None else 0 for v in cols.label_values(key, rows)]
        totals = found if totals is None else [a + b for a, b in zip(totals, found, strict=True)]
    assert totals is not None
    return totals
