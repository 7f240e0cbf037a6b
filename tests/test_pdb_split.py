"""Preemption's split of a node's pods by PodDisruptionBudget (filterPodsWithPDBViolation) finds
each pod's budgets through an index by label; the answers are those of trying every budget on
every pod, as upstream's loop does (the reference below), on any pods and budgets."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.model import LabelSelector, LabelSelectorRequirement, Pod, PodDisruptionBudget
from rulesched.scheduler.budgets import budgets_of, split_by_pdb
from rulesched.semantics.matching import label_selector_matches

NAMESPACES = ("a", "b")
KEYS = ("app", "tier")
VALUES = ("x", "y", "z")


def reference(pods: Sequence[Pod], pdbs: Sequence[PodDisruptionBudget]) -> tuple[list[str], list[str]]:
    """Every budget tried on every pod, in order (upstream's loop)."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating, safe = [], []
    for pod in pods:
        violated = False
        for i, pdb in enumerate(pdbs):
            s = pdb.selector
            if not pod.labels or pdb.namespace != pod.namespace or s is None:
                continue
            if not (s.match_labels or s.match_expressions) or not label_selector_matches(s, pod.labels):
                continue
            allowed[i] -= 1
            violated = violated or allowed[i] < 0
        (violating if violated else safe).append(pod.name)
    return violating, safe


labels = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2)
requirement = st.builds(
    LabelSelectorRequirement,
    key=st.sampled_from(KEYS),
    operator=st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Bogus")),
    values=st.lists(st.sampled_from(VALUES), max_size=2).map(tuple),
)
selector = st.none() | st.builds(
    LabelSelector,
    match_labels=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2).map(
        lambda d: tuple(d.items())
    ),
    match_expressions=st.lists(requirement, max_size=2).map(tuple),
)
budgets = st.lists(
    st.builds(
        PodDisruptionBudget,
        name=st.just("b"),
        namespace=st.sampled_from(NAMESPACES),
        selector=selector,
        disruptions_allowed=st.integers(0, 2),
    ),
    max_size=6,
)
pods = st.lists(st.tuples(st.sampled_from(NAMESPACES), labels), max_size=8).map(
    lambda specs: [Pod(name=f"p{i}", namespace=ns, labels=lab) for i, (ns, lab) in enumerate(specs)]
)


@settings(max_examples=400, deadline=None)
@given(pods, budgets)
def test_the_split_by_budget_equals_trying_every_budget_on_every_pod(
    pods: list[Pod], pdbs: list[PodDisruptionBudget]
) -> None:
    violating, safe = split_by_pdb(pods, pdbs)
    assert ([p.name for p in violating], [p.name for p in safe]) == reference(pods, pdbs)


@settings(max_examples=200, deadline=None)
@given(pods, budgets, st.lists(labels, min_size=8, max_size=8))
def test_the_index_kept_between_attempts_answers_as_a_new_one(
    pods: list[Pod], pdbs: list[PodDisruptionBudget], relabelled: list[dict[str, str]]
) -> None:
    """The index is kept while the store hands out the same budgets tuple (budgets_of), with what
    it found for each pod: the same pods asked again, or the same pods (by key) with new labels
    (an update), get the answers of trying every budget on every pod."""
    kept = tuple(pdbs)
    index = budgets_of(kept)
    assert budgets_of(kept) is index  # (reused: the same tuple)
    for _ in range(2):
        violating, safe = split_by_pdb(pods, kept, budgets_of(kept))
        assert ([p.name for p in violating], [p.name for p in safe]) == reference(pods, kept)
    updated = [dataclasses.replace(p, labels=lab) for p, lab in zip(pods, relabelled, strict=False)]
    violating, safe = split_by_pdb(updated, kept, budgets_of(kept))
    assert ([p.name for p in violating], [p.name for p in safe]) == reference(updated, kept)
    if pdbs:  # (another tuple, not the empty one Python keeps once: another index)
        assert budgets_of(tuple(pdbs)) is not index
