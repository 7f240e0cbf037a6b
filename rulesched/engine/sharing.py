"""Which rules give the same answers for pods of different classes: the pod values each reads.

Pods are one class when they agree on every pod field any rule reads. A single rule usually reads
far fewer: NodeResourcesFit's score only ``pod.nonzero_requests``, TaintToleration only
``pod.tolerations``. Two classes that agree on those give that rule the same answer on every
node, so a scheduler may compute a rule's answers once per *rule key* (the rule and the values
of the pod fields it reads) and let every class with that key read them
(:mod:`rulesched.engine.shared`).

That holds when the body depends on the pod only through ``pod.FIELD`` reads and calls no
context built-in (those read the cluster and the pod as a whole). :func:`rule_share` decides it
once per rule when the rules load, following lets, and also says whether the body reads node
values that change when pods come and go (``schema.NODE_POD_FIELDS``, or the node passed whole
to a built-in that does not say what it reads): only then do a node's answers go stale when a
pod is bound to it.
Next stage: :meth:`rulesched.lang.evaluation.ruleset.RuleSet.bind_new` turns each rule's share
into a :class:`Shared` key per binding.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations


@dataclass(frozen=True)
class RuleShare:
    """What one rule's body reads, when its answers can be shared between classes."""

    pod_fields: tuple[str, ...]  # the pod fields it reads, sorted
    pod_bound: bool  # whether it reads node values that change with the node's pods


@dataclass(frozen=True)
class Shared:
    """A bound rule's share key: equal keys, equal answers on every node."""

    key: Hashable
    pod_bound: bool


class _NotShareable(Exception):
    pass


def rule_share(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> RuleShare | None:
    """The pod fields ``expr`` reads and whether its node reads move with pods; None when its
    answers may depend on more than those fields and the node (the pod whole, a context
    built-in, another variable)."""
    pod_fields: set[str] = set()
    pod_bound = False
    seen: set[str] = set()

    def walk(e: ast.Expr, parent: ast.Expr | None) -> None:
        nonlocal pod_bound
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "let":
                if ref.name not in seen:
                    seen.add(ref.name)
                    walk(lets[ref.name].value, None)
            elif ref.kind == "bound":
                pass
            elif ref.name == schema.POD_VARIABLE:
                if not (isinstance(parent, ast.Attr) and _field(notes, parent)):
                    raise _NotShareable
                assert isinstance(parent, ast.Attr)
                pod_fields.add(parent.name)
            elif ref.name == schema.NODE_VARIABLE:
                read = _node_reads(notes, parent)
                pod_bound = pod_bound or read is None or bool(read & schema.NODE_POD_FIELDS)
            else:
                raise _NotShareable  # (victim: preemption rules are not shared)
            return
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            raise _NotShareable
        for child in ast.children(e):
            walk(child, e)

    try:
        walk(expr, None)
    except _NotShareable:
        return None
    return RuleShare(tuple(sorted(pod_fields)), pod_bound)


def _node_reads(notes: Annotations, parent: ast.Expr | None) -> frozenset[str] | None:
    """The node fields read where ``node`` appears under ``parent``; None: it is used whole
    (passed to a built-in that does not say what it reads, say), so it may read anything."""
    if isinstance(parent, ast.Attr) and _field(notes, parent):
        return frozenset((parent.name,))
    if isinstance(parent, ast.Call):
        return BUILTINS[parent.func].node_fields
    return None


def _field(notes: Annotations, attr: ast.Attr) -> bool:
    ref = notes.attrs.get(id(attr))
    return ref is not None and ref.field is not None
