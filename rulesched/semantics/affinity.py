"""Inter-pod affinity terms, after kube-scheduler's InterPodAffinity plugin and its framework
types: a pod's term resolved for its owner (namespaces defaulted, matchLabelKeys and
mismatchLabelKeys folded into the selector) and whether a term selects a pod.

Next stage: :mod:`rulesched.lang.builtins.affinity` counts the pods the terms select per
topology domain (with the engine's indexes) and answers the plugin's filter and score per node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rulesched.model import LabelSelector, LabelSelectorRequirement, Pod, PodAffinityTerm
from rulesched.model.objects import EMPTY
from rulesched.semantics.matching import label_selector_matches

HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight default
Namespaces = Mapping[str, Mapping[str, str]]  # namespace -> its labels


@dataclass(frozen=True)
class Term:
    """An affinity term resolved for its owner pod (framework.AffinityTerm)."""

    topology_key: str
    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    weight: int = 0

    def matches(self, pod: Pod, namespaces: Namespaces | None) -> bool:
        """AffinityTerm.Matches: namespace (listed or selected by its labels; None: no cluster
        to know them from), then labels."""
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None or namespaces is None:
                return False
            if not label_selector_matches(self.namespace_selector, namespaces.get(pod.namespace, EMPTY)):
                return False
        return label_selector_matches(self.selector, pod.labels)


def resolve(owner: Pod, term: PodAffinityTerm, weight: int = 0) -> Term:
    """framework.newAffinityTerm: no namespaces and no namespace selector mean the owner's
    namespace; matchLabelKeys (In) and mismatchLabelKeys (NotIn) add the owner's values of those
    labels to the selector."""
    namespaces = set(term.namespaces)
    if not namespaces and term.namespace_selector is None:
        namespaces.add(owner.namespace)  # no namespaces and no selector: the owner's namespace
    selector = term.label_selector
    extra = [LabelSelectorRequirement(k, "In", (owner.labels[k],)) for k in term.match_label_keys if k in owner.labels]
    extra += [
        LabelSelectorRequirement(k, "NotIn", (owner.labels[k],)) for k in term.mismatch_label_keys if k in owner.labels
    ]
    if extra and selector is not None:
        selector = LabelSelector(selector.match_labels, (*selector.match_expressions, *extra))
    return Term(term.topology_key, selector, frozenset(namespaces), term.namespace_selector, weight)


def resolve_all(pod: Pod, terms: Sequence[PodAffinityTerm]) -> tuple[Term, ...]:
    return tuple(resolve(pod, t) for t in terms)


def matches_all(pod: Pod, terms: Sequence[Term], namespaces: Namespaces | None) -> bool:
    """podMatchesAllAffinityTerms: false for no terms."""
    return bool(terms) and all(t.matches(pod, namespaces) for t in terms)


def has_affinity(pod: Pod) -> bool:
    """Whether the pod carries any inter-pod (anti-)affinity term, required or preferred."""
    return bool(
        pod.pod_affinity or pod.pod_anti_affinity or pod.preferred_pod_affinity or pod.preferred_pod_anti_affinity
    )
