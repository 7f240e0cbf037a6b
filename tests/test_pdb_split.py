"""Preemption's split of a node's pods by PodDisruptionBudget (filterPodsWithPDBViolation) finds
each pod's budgets through an index by label; the answers are those of trying every budget on
every pod, as upstream's loop does (the reference below), on any pods and budgets."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.model import LabelSelector, LabelSelectorRequirement, Pod, PodDisruptionBudget
from rulesched.scheduler.preemption import _split_by_pdb
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
    violating, safe = _split_by_pdb(pods, pdbs)
    assert ([p.name for p in violating], [p.name for p in safe]) == reference(pods, pdbs)
