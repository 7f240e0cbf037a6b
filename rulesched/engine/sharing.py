"""Which rules give the same answers for pods of different classes: the pod values each reads.

Pods are one class when they agree on every pod field any rule reads. A single rule usually reads
far fewer: NodeResourcesFit's score only ``pod.nonzero_requests``, TaintToleration only
``pod.tolerations``. Two classes that agree on those give that rule the same answer on every
node, so a scheduler may compute a rule's answers once per *rule key* (the rule and the values
of the pod fields it reads) and let every class with that key read them
(:mod:`rulesched.engine.shared`).

That holds when the body depends on the pod only through ``pod.FIELD`` reads and calls no
context built-in (those read the cluster and the pod as a whole) but those whose answer on a node
is a function of the node and pod fields they name (``Builtin.by_fields``: ``devices_after``, the
node's devices once the pod's claims are allocated there; their fields join the rule's, and the
caller decides whether their other inputs, the rule set's device scores, allow sharing: the
``calls`` noted). :func:`rule_share` decides it
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
from rulesched.lang.frontend.through_lets import DONE, INTO, Visit, through_lets
from rulesched.lang.types import MapOf, Record


@dataclass(frozen=True)
class RuleShare:
    """What one rule's body reads, when its answers can be shared between classes."""

    pod_fields: tuple[str, ...]  # the pod fields it reads, sorted
    pod_bound: bool  # whether it reads node values that change with the node's pods
    calls: frozenset[str] = frozenset()  # the context built-ins it calls (each ``by_fields``)
    # Entries of pod map fields it reads only by constant keys (``pod.requests.cpu``,
    # ``pod.labels["app"]``), as (field, key), sorted: not the whole map (a pod's memory then
    # does not split a key whose rules read its cpu alone).
    pod_keys: tuple[tuple[str, str], ...] = ()


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
    calls: set[str] = set()
    pod_keys: set[tuple[str, str]] = set()

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        nonlocal pod_bound
        entry = _pod_entry(notes, e)
        if entry is not None:
            pod_keys.add(entry)
            return DONE
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "bound":
                pass
            elif ref.name == schema.POD_VARIABLE:
                if not (isinstance(parent, ast.Attr) and is_field_read(notes, parent)):
                    raise _NotShareable
                assert isinstance(parent, ast.Attr)
                pod_fields.add(parent.name)
            elif ref.name == schema.NODE_VARIABLE:
                read = _node_reads(notes, parent)
                pod_bound = pod_bound or read is None or bool(read & schema.NODE_POD_FIELDS)
            else:
                raise _NotShareable  # (victim: preemption rules are not shared)
            return DONE
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            builtin = BUILTINS[e.func]
            if not builtin.by_fields:
                raise _NotShareable
            calls.add(e.func)
            pod_fields.update(builtin.pod_fields)  # (its node argument: read whole, below)
        return INTO

    try:
        through_lets(expr, notes, lets, visit)
    except _NotShareable:
        return None
    keys = tuple(sorted(k for k in pod_keys if k[0] not in pod_fields))  # (a map read whole: by all of it)
    return RuleShare(tuple(sorted(pod_fields)), pod_bound, frozenset(calls), keys)


def _pod_entry(notes: Annotations, e: ast.Expr) -> tuple[str, str] | None:
    """(field, key) where ``e`` reads one entry of a pod map field by a constant key:
    ``pod.F.KEY`` (a resource map) or ``pod.F["KEY"]``; else None."""
    entry = constant_entry(notes, e, schema.POD)
    if entry is None or not isinstance(entry[0].obj, ast.Name):
        return None
    var = notes.names.get(id(entry[0].obj))
    if var is None or var.kind in ("let", "bound") or var.name != schema.POD_VARIABLE:
        return None
    return entry[0].name, entry[1]


def constant_entry(notes: Annotations, e: ast.Expr, record: Record) -> tuple[ast.Attr, str] | None:
    """(the field's read, key) where ``e`` reads one entry of a map field of ``record`` by a
    constant key, ``X.F.KEY`` (a resource map) or ``X.F["KEY"]``, whatever X is; else None.
    (Shared with engine/alike.py, which asks it of ``node``.)"""
    if isinstance(e, ast.Attr):
        ref = notes.attrs.get(id(e))
        key = ref.resource if ref is not None else None
    elif isinstance(e, ast.Index) and isinstance(e.key, ast.Literal) and type(e.key.value) is str:
        key = e.key.value
    else:
        return None
    obj = e.obj
    if key is None or not isinstance(obj, ast.Attr) or not is_field_read(notes, obj):
        return None
    field = schema.RECORDS[record].get(obj.name)
    if field is None or not isinstance(field.type, MapOf):
        return None
    return obj, key


def _node_reads(notes: Annotations, parent: ast.Expr | None) -> frozenset[str] | None:
    """The node fields read where ``node`` appears under ``parent``; None: it is used whole
    (passed to a built-in that does not say what it reads, say), so it may read anything."""
    if isinstance(parent, ast.Attr) and is_field_read(notes, parent):
        return frozenset((parent.name,))
    if isinstance(parent, ast.Call):
        return BUILTINS[parent.func].node_fields
    return None


def is_field_read(notes: Annotations, attr: ast.Attr) -> bool:
    """Whether ``attr`` reads a record's field (not a resource of a map, say)."""
    ref = notes.attrs.get(id(attr))
    return ref is not None and ref.field is not None
