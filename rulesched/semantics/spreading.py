"""Topology spread constraints, after kube-scheduler's PodTopologySpread plugin: a pod's
constraints of one mode with matchLabelKeys folded into their selectors, the node inclusion
policies (nodeAffinityPolicy, nodeTaintsPolicy), which pods a constraint counts
(countPodsMatchSelector), the skew limit of the filter and the weights of the score, and the
system default constraints (:mod:`rulesched.semantics.spread_defaults`).

Next stage: :mod:`rulesched.lang.builtins.spreading` counts the selected pods per domain (with the
engine's indexes) and answers the filter and the score per node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from rulesched.model import LabelSelector, LabelSelectorRequirement, Pod, TopologySpreadConstraint
from rulesched.model.workloads import Workloads
from rulesched.semantics.matching import label_selector_matches, node_selector_term_matches, subset, tolerated
from rulesched.semantics.spread_defaults import SYSTEM_DEFAULTS, default_selector


@dataclass(frozen=True)
class Constraint:
    """One constraint as the plugin keeps it (topologySpreadConstraint in its state)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int
    honor_affinity: bool  # nodeAffinityPolicy Honor (the default)
    honor_taints: bool  # nodeTaintsPolicy Honor (Ignore by default)


def constraints(pod: Pod, mode: str) -> tuple[Constraint, ...]:
    """The pod's constraints whose whenUnsatisfiable is ``mode`` (DoNotSchedule, ScheduleAnyway)."""
    return tuple(
        Constraint(
            c.max_skew,
            c.topology_key,
            with_label_keys(pod, c),
            c.min_domains,
            c.node_affinity_policy != "Ignore",
            c.node_taints_policy == "Honor",
        )
        for c in pod.topology_spread_constraints
        if c.when_unsatisfiable == mode
    )


def with_label_keys(pod: Pod, c: TopologySpreadConstraint) -> LabelSelector | None:
    """The constraint's selector with ``key In (the pod's value)`` for each matchLabelKey the pod has."""
    selector = c.label_selector
    keys = [k for k in c.match_label_keys if k in pod.labels]
    if not keys or selector is None:
        return selector
    extra = tuple(LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in keys)
    return LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))


def default_constraints(pod: Pod, workloads: Workloads) -> tuple[Constraint, ...]:
    """The system defaults for a pod without constraints of its own: empty when no Service or
    controller selects it."""
    selector = default_selector(pod, workloads)
    if selector is None:
        return ()
    return tuple(Constraint(skew, key, selector, 1, True, False) for key, skew in SYSTEM_DEFAULTS)


def included(pod: Pod, c: Constraint, node: Any) -> bool:
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


def selected(pod: Pod, selector: LabelSelector | None, namespace: str) -> bool:
    """countPodsMatchSelector, for one pod: same namespace, not terminating, labels selected."""
    return pod.namespace == namespace and not pod.deleting and label_selector_matches(selector, pod.labels)


def count_matching(pods: Sequence[Pod], selector: LabelSelector | None, namespace: str) -> int:
    """countPodsMatchSelector."""
    return count_selected(pods, partial(label_selector_matches, selector), namespace)


def count_selected(pods: Sequence[Pod], matches: Callable[[Mapping[str, str]], bool], namespace: str) -> int:
    """countPodsMatchSelector over some pods, ``matches`` testing their labels (see
    :func:`selector_test`)."""
    n = 0
    for p in pods:
        if p.namespace == namespace and not p.deleting and matches(p.labels):
            n += 1
    return n


def selector_test(selector: LabelSelector | None) -> Callable[[Mapping[str, str]], bool]:
    """:func:`label_selector_matches` for one selector, as a function of the labels: a
    matchLabels-only selector is a subset test of the label items."""
    if selector is None or selector.match_expressions:
        return partial(label_selector_matches, selector)
    wanted = dict(selector.match_labels).items()
    return lambda labels: wanted <= labels.items()


def skew_limit(c: Constraint, domains: Mapping[str, int], self_match: bool) -> int:
    """The Filter's bound on a domain's count: maxSkew + the global minimum (0 while fewer
    domains than minDomains are eligible) - 1 if the pod matches its own selector."""
    minimum = 0 if len(domains) < c.min_domains else min(domains.values(), default=0)
    return c.max_skew + minimum - (1 if self_match else 0)


def score_weight(domains: int) -> float:
    """The Score's weight of a constraint over ``domains`` topology values: log(domains + 2)."""
    return math.log(domains + 2)
