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
    """v1.Toleration.ToleratesTaint (k8s.io/api v0.37.2): effect (empty matches all), key (empty
    with Exists matches all keys), then Exists, Equal on the value, or Gt / Lt comparing both
    values as decimal integers (KEP-5471, the TaintTolerationComparisonOperators gate: alpha and
    off in 1.37, but a pod carrying them was accepted by an API server with it on)."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    if toleration.operator in ("Gt", "Lt"):
        return compare_numeric(toleration.value, taint.value, toleration.operator)
    return False


def _decimal_integer(value: str) -> int | None:
    """content.IsDecimalInteger then ParseInt: an optional minus, no leading zero, no plus, in int64."""
    digits = value[1:] if value.startswith("-") else value
    if not digits or not digits.isascii() or not digits.isdigit() or (digits[0] == "0" and value != "0"):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def compare_numeric(toleration_value: str, taint_value: str, operator: str) -> bool:
    """compareNumericValues: Lt tolerates a taint value below the toleration's, Gt one above;
    a value that is no decimal integer tolerates nothing."""
    wanted, have = _decimal_integer(toleration_value), _decimal_integer(taint_value)
    if wanted is None or have is None:
        return False
    return have < wanted if operator == "Lt" else have > wanted


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
