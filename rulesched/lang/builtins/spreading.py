"""Topology spreading built-ins, after kube-scheduler's PodTopologySpread plugin: the filter for
DoNotSchedule constraints and the score for ScheduleAnyway ones — a pod's own, or, for a pod
without constraints, the system defaults. The constraints themselves, their inclusion policies,
which pods they count and the skew arithmetic are Kubernetes' semantics
(:mod:`rulesched.semantics.spreading`); this module counts and answers per node.

Matching pods per domain, per constraint, are kept in an index current between cycles
(:mod:`rulesched.lang.indexes`) keyed by the incoming pod's constraints, namespace and — where a
node inclusion policy is honoured — its node selector, node affinity and tolerations. Each pod's
PreFilter state (the minimum per constraint, whether the pod matches itself) is derived from it
once, in ``ctx.scratch``; per node the filter is a dictionary lookup per constraint.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.indexes import LabelCensus, current
from rulesched.lang.types import BOOL, NUMBER, STRING
from rulesched.model import LabelSelector, Pod
from rulesched.model.workloads import NO_WORKLOADS
from rulesched.semantics.matching import label_selector_matches
from rulesched.semantics.spread_defaults import HOSTNAME
from rulesched.semantics.spreading import (
    Constraint,
    count_matching,
    count_selected,
    default_constraints,
    included,
    score_weight,
    selected,
    selector_test,
    skew_limit,
)
from rulesched.semantics.spreading import constraints as pod_constraints


def _census_counts(selector: LabelSelector | None) -> bool:
    """Whether a constraint's selector can be counted from a :class:`LabelCensus`: matchLabels
    only, at least one."""
    return selector is not None and not selector.match_expressions and bool(selector.match_labels)


class _DomainCounts:
    """Per constraint: topology value -> pods the constraint selects, over the nodes that carry
    every constraint's key (with ``require_all``; else a missing key counts as the value "") and
    that the constraint includes (its inclusion policies). A domain with no such pod is present
    with 0: it still counts for the minimum and for minDomains."""

    def __init__(
        self,
        owner: Pod,
        constraints: tuple[Constraint, ...],
        require_all: bool = True,
        census: LabelCensus | None = None,
    ) -> None:
        self.counts: list[dict[str, int]] = [{} for _ in constraints]
        self._owner, self._constraints = owner, constraints
        self._keys = tuple(c.topology_key for c in constraints) if require_all else ()
        self._require_all = require_all
        self._partial: dict[str, tuple[bool, ...]] = {}  # nodes some constraint leaves out
        self._census = census  # (given only when every constraint can be counted from it)

    def build(self, cluster: ClusterView) -> None:
        if self._census is not None:
            self._build_from(self._census, cluster)
        else:
            self._walk(cluster)

    def _build_from(self, census: LabelCensus, cluster: ClusterView) -> None:
        """The walk's counts from the census: every domain present with 0, then the pods of the
        selector's first label counted on the nodes that hold some (all its labels checked on
        those nodes' pods when it has more than one)."""
        namespace, keys = self._owner.namespace, self._keys
        for c, domains in zip(self._constraints, self.counts, strict=True):
            domains.update(dict.fromkeys(census.domains(cluster, keys, c.topology_key), 0))
            assert c.selector is not None
            pairs = c.selector.match_labels
            test = selector_test(c.selector)
            for name, n in census.nodes_with(namespace, *pairs[0]).items():
                node = cluster.node_view(name) if n > 0 else None
                if node is None or not all(k in node.labels for k in keys):
                    continue
                if len(pairs) > 1:
                    n = count_selected(node.pods, test, namespace)
                value = node.labels.get(c.topology_key, "")
                domains[value] = domains.get(value, 0) + n

    def _walk(self, cluster: ClusterView) -> None:
        # A walk over every pod (kube-scheduler's PreFilter does it for every pod; here once per
        # selector), so its inner loop is kept to plain comparisons: a constraint that includes
        # every node (no node selector or affinity of the owner to honour, taints ignored) is
        # not asked per node, and a matchLabels-only selector is one subset test.
        owner, constraints, counts, keys = self._owner, self._constraints, self.counts, self._keys
        namespace = owner.namespace
        unconstrained = not owner.node_selector and owner.required_node_affinity is None
        everywhere = [not c.honor_taints and (unconstrained or not c.honor_affinity) for c in constraints]
        tests = [selector_test(c.selector) for c in constraints]
        parts = list(zip(constraints, everywhere, tests, counts, strict=True))
        for node in cluster.node_views():
            labels = node.labels
            if not all(k in labels for k in keys):
                continue
            inclusion = tuple(True if every else included(owner, c, node) for c, every, _, _ in parts)
            if not all(inclusion):
                self._partial[node.name] = inclusion
            for (c, _, test, domains), inc in zip(parts, inclusion, strict=True):
                if inc:
                    value = labels.get(c.topology_key, "")
                    domains[value] = domains.get(value, 0) + count_selected(node.pods, test, namespace)

    def fork(self) -> _DomainCounts:
        twin = _DomainCounts(self._owner, self._constraints, self._require_all, self._census)
        twin.counts = [dict(domains) for domains in self.counts]
        twin._partial = self._partial  # which nodes a constraint leaves out: unchanged by pods
        return twin

    def apply(self, sign: int, pod: Pod, node: Any) -> None:
        labels = node.labels
        if pod.namespace != self._owner.namespace or not all(k in labels for k in self._keys):
            return
        inclusion = self._partial.get(node.name)
        for i, (c, domains) in enumerate(zip(self._constraints, self.counts, strict=True)):
            if (inclusion is None or inclusion[i]) and selected(pod, c.selector, pod.namespace):
                value = labels.get(c.topology_key, "")
                domains[value] = domains.get(value, 0) + sign


def _domain_counts(
    ctx: EvalContext, mode: str, constraints: tuple[Constraint, ...], require_all: bool = True
) -> list[dict[str, int]]:
    pod = ctx.pod
    affinity = any(c.honor_affinity for c in constraints)
    key: Hashable = (
        "spread",
        mode,
        require_all,
        pod.namespace,
        constraints,
        (frozenset(pod.node_selector.items()), pod.required_node_affinity) if affinity else None,
        pod.tolerations if any(c.honor_taints for c in constraints) else None,
    )
    census = None
    unconstrained = not pod.node_selector and pod.required_node_affinity is None
    if all(not c.honor_taints and (unconstrained or not c.honor_affinity) for c in constraints) and all(
        _census_counts(c.selector) for c in constraints
    ):  # every node included and matchLabels selectors: counted from the census, not a walk
        census = current(ctx, ("label-census",), LabelCensus)
    return current(ctx, key, lambda: _DomainCounts(pod, constraints, require_all, census)).counts


# --- filter ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Check:
    """One DoNotSchedule constraint, ready for the per-node test."""

    topology_key: str
    counts: Mapping[str, int]
    limit: int  # the largest count a node's domain may have: maxSkew + minimum - selfMatch


def _spread_checks(ctx: EvalContext) -> tuple[_Check, ...]:
    """PodTopologySpread PreFilter: per constraint, the domain counts and the skew limit."""
    checks = ctx.scratch.get("spread")
    if checks is not None:
        return checks  # type: ignore[no-any-return]
    pod = ctx.pod
    constraints = pod_constraints(pod, "DoNotSchedule")
    if not constraints:
        checks = ()
    else:
        counts = (
            _domain_counts(ctx, "DoNotSchedule", constraints) if ctx.cluster is not None else [{} for _ in constraints]
        )
        out = []
        for c, domains in zip(constraints, counts, strict=True):
            self_match = label_selector_matches(c.selector, pod.labels)
            out.append(_Check(c.topology_key, domains, skew_limit(c, domains, self_match)))
        checks = tuple(out)
    ctx.scratch["spread"] = checks
    return checks


def _spread_failure(ctx: EvalContext, node: Any) -> str | None:
    """PodTopologySpread Filter, constraint by constraint: None, "label" or "skew"."""
    labels = node.labels
    for check in _spread_checks(ctx):
        value = labels.get(check.topology_key)
        if value is None:
            return "label"
        if check.counts.get(value, 0) > check.limit:
            return "skew"
    return None


def spread_ok(ctx: EvalContext, node: Any) -> bool:
    """PodTopologySpread Filter: for every hard constraint, skew <= maxSkew. (_spread_failure
    without the reason: this runs for every node of every cycle.)"""
    checks = ctx.scratch.get("spread")
    if checks is None:
        checks = _spread_checks(ctx)
    labels = node.labels
    for check in checks:
        value = labels.get(check.topology_key)
        if value is None or check.counts.get(value, 0) > check.limit:
            return False
    return True


def spread_keys(ctx: EvalContext) -> tuple[str, ...]:
    """The labels :func:`spread_ok` reads of a node: the hard constraints' topology keys."""
    return tuple(check.topology_key for check in _spread_checks(ctx))


def spread_missing_label(ctx: EvalContext, node: Any) -> bool:
    """Whether the first constraint the node fails, in order, fails for lack of its label (the
    "(missing required label)" reason) rather than for skew."""
    return _spread_failure(ctx, node) == "label"


# --- score -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SpreadScoreState:
    constraints: tuple[Constraint, ...]
    counts: list[dict[str, int]]  # per constraint, the domains of the feasible nodes only
    weights: list[float]
    ignored: frozenset[str]  # the feasible nodes left out (upstream's IgnoredNodes)
    require_all: bool  # a node without every constraint's key is left out of scoring


def soft_constraints(ctx: EvalContext) -> tuple[tuple[Constraint, ...], bool]:
    """The constraints PodTopologySpread scores the pod by, and whether a node must carry all
    their keys to be scored: the pod's own ScheduleAnyway constraints (all keys required), or,
    for a pod without constraints, the system defaults (not required: a node without a zone
    label is still spread by hostname). Empty: the plugin skips the pod."""
    found: tuple[tuple[Constraint, ...], bool] | None = ctx.scratch.get("spread-soft")
    if found is None:
        pod = ctx.pod
        if pod.topology_spread_constraints:
            found = (pod_constraints(pod, "ScheduleAnyway"), True)
        else:
            workloads = ctx.cluster.workloads if ctx.cluster is not None else NO_WORKLOADS
            found = (default_constraints(pod, workloads), False)
        ctx.scratch["spread-soft"] = found
    return found


def spread_defaulted(ctx: EvalContext) -> bool:
    """Whether the system defaults spread the pod: it has no constraints of its own and a
    Service or its controller selects it (else PodTopologySpread skips it). Decided at bind
    time, by the cluster's Services and controllers (see ``class_token``)."""
    return not ctx.pod.topology_spread_constraints and bool(soft_constraints(ctx)[0])


def _spread_score_state(ctx: EvalContext) -> _SpreadScoreState:
    """PodTopologySpread PreScore over the feasible nodes."""
    state = ctx.scratch.get("spread-score")
    if state is not None:
        return state  # type: ignore[no-any-return]
    constraints, require_all = soft_constraints(ctx)
    feasible = list(ctx.feasible or ()) if constraints else []
    kept = feasible
    if require_all:  # nodes without every key are left out
        keys = [c.topology_key for c in constraints]
        kept = [n for n in feasible if all(k in n.labels for k in keys)]
    ignored = {n.name for n in feasible} - {n.name for n in kept} if len(kept) < len(feasible) else set()
    # (one comprehension per constraint: this runs over the feasible nodes of every cycle)
    counts: list[dict[str, int]] = [
        dict.fromkeys((n.labels.get(c.topology_key, "") for n in kept), 0) if c.topology_key != HOSTNAME else {}
        for c in constraints
    ]
    weights = []
    for c, domains in zip(constraints, counts, strict=True):
        size = len(feasible) - len(ignored) if c.topology_key == HOSTNAME else len(domains)
        weights.append(score_weight(size))
    if any(counts) and ctx.cluster is not None:
        everywhere = _domain_counts(ctx, "ScheduleAnyway", constraints, require_all)
        for domains, known in zip(counts, everywhere, strict=True):
            for value in domains:
                domains[value] = known.get(value, 0)
    state = _SpreadScoreState(constraints, counts, weights, frozenset(ignored), require_all)
    ctx.scratch["spread-score"] = state
    return state


@dataclass(frozen=True)
class _Label:
    """A node's value of one label (None when absent): a node column, one per key."""

    key: str

    def __call__(self, node: Any) -> str | None:
        return node.labels.get(self.key)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _HasLabel:
    """Whether a node carries one label: a node column, one per key."""

    key: str

    def __call__(self, node: Any) -> bool:
        return self.key in node.labels


@dataclass(frozen=True)
class _HostCount:
    """How many of a node's pods a hostname constraint counts (its selector, in a namespace): a
    node-only fact for given selector and namespace, so a node column kept current as pods come
    and go (rulesched.engine.columns), one per selector the cycles ask about."""

    selector: LabelSelector | None
    namespace: str

    def __call__(self, node: Any) -> int:
        return count_matching(node.pods, self.selector, self.namespace)


def spread_score_columns(ctx: EvalContext, cols: Any, rows: Any) -> Any:
    """:func:`spread_score` of many rows (of the NodeColumns ``cols``): whether nodes carry each
    key and the hostname constraints' counts are node columns, each zone's count is written to
    the rows of that zone; the same arithmetic, in the same order, on float64 as Python's
    floats. (The columns' own arrays and operators: the built-ins import no numpy.)"""
    state = _spread_score_state(ctx)
    if not state.constraints:
        return [-1] * len(rows)
    present: Any = None
    score: Any = None
    for c, weight, domains in zip(state.constraints, state.weights, state.counts, strict=True):
        has = cols.derived(_HasLabel(c.topology_key), BOOL)[rows]
        present = has if present is None else present & has
        if c.topology_key == HOSTNAME:
            count = cols.derived(_HostCount(c.selector, ctx.pod.namespace), NUMBER)[rows]
        else:
            values = cols.derived(_Label(c.topology_key), STRING)[rows]
            count = has * 0  # (an int64 column of zeros: a count for each value present)
            for value in set(values.tolist()) - {None}:
                count[values == value] = domains.get(value, 0)
        term = count * weight + (c.max_skew - 1)
        score = term * has if score is None else score + term * has  # (+ 0.0 where the key is missing)
    out = ((score + 0.5) // 1).astype("int64")  # math.floor(score + 0.5)
    if state.require_all:
        out[~present] = -1
    return out.tolist()


def spread_score_keys(ctx: EvalContext) -> tuple[str, ...] | None:
    """The labels :func:`spread_score` reads of a node (the soft constraints' topology keys), or
    None when one is the hostname: that constraint counts the node's own pods."""
    keys = tuple(c.topology_key for c in soft_constraints(ctx)[0])
    return None if HOSTNAME in keys else keys


def spread_score(ctx: EvalContext, node: Any) -> int:
    """PodTopologySpread Score; -1 marks a node left out of normalisation (``normalize spread``),
    and every node is left out when the pod has no soft constraints (the plugin skips it)."""
    state = _spread_score_state(ctx)
    if not state.constraints:
        return -1
    labels = node.labels
    # A node missing a key is left out: decided by its labels alone, so that nodes alike in them
    # share one answer (spread_score_keys), feasible or not.
    if state.require_all and not all(c.topology_key in labels for c in state.constraints):
        return -1
    score = 0.0
    for c, weight, domains in zip(state.constraints, state.weights, state.counts, strict=True):
        value = labels.get(c.topology_key)
        if value is None:
            continue
        if c.topology_key == HOSTNAME:
            count = count_matching(node.pods, c.selector, ctx.pod.namespace)
        else:
            count = domains.get(value, 0)
        score += count * weight + (c.max_skew - 1)
    return int(math.floor(score + 0.5))  # math.Round: half away from zero (scores are >= 0)
