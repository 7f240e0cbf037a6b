"""Kubernetes matching semantics: label selectors, node selector terms, tolerations, host ports.
Each function follows the upstream helper named in its docstring and is total: malformed input
matches nothing instead of raising.
Next stage: the built-ins of the same names (:mod:`rulesched.lang.builtins`) are these functions
with types; the rest of this package, the store's budgets and preemption match with them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.model import (
    ContainerPort,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, an empty selector everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        op = req.operator
        if op == "In":
            if not present or labels[req.key] not in req.values:
                return False
        elif op == "NotIn":
            if present and labels[req.key] in req.values:
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist":
            if present:
                return False
        else:
            return False
    return True


def _requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    op = req.operator
    present = req.key in values
    if op == "In":
        return present and values[req.key] in req.values
    if op == "NotIn":
        return not present or values[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            actual, bound = int(values[req.key]), int(req.values[0])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def node_selector_term_matches(term: NodeSelectorTerm, node: Any) -> bool:
    """A NodeSelectorTerm: every expression (on labels) and field (metadata.name) must hold.
    A term with neither matches nothing, as in component-helpers."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.labels
    for req in term.match_expressions:
        if not _requirement_matches(req, labels):
            return False
    if term.match_fields:
        fields = {"metadata.name": node.name}
        for req in term.match_fields:
            if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
                return False
            if not _requirement_matches(req, fields):
                return False
    return True


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint: effect (empty matches all), key (empty with Exists matches
    all keys), then Exists, or Equal on the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def subset(small: Mapping[str, str], big: Mapping[str, str]) -> bool:
    return all(big.get(k) == v for k, v in small.items())


def ports_conflict(wanted: Sequence[ContainerPort], used: Sequence[ContainerPort]) -> bool:
    """NodePorts: same port and protocol, and the host IPs overlap (0.0.0.0 overlaps all)."""
    for want in wanted:
        for have in used:
            if want.host_port != have.host_port or want.protocol != have.protocol:
                continue
            if want.host_ip == have.host_ip or "0.0.0.0" in (want.host_ip, have.host_ip):
                return True
    return False
