"""Which aggregates over a topology domain or the cluster are kept as indexes.

``count(p in domain(node, "zone").pods where p.labels["app"] == pod.labels["app"])`` must not
walk the zone's pods for every node and every pod: it is answered from per-domain counts kept as
pods come and go (rulesched.lang.builtins.domains). That is possible when the ``where`` and the
value read only the element and values fixed for the pod being placed: then the counts depend
on the domain and on those pod-only values alone, and are keyed by both. This module decides it
for one aggregate, once the checker has typed it, and names the pod-only parts (the "holes": the
largest sub-expressions reading only the pod, or the victim) whose values key the index.

An aggregate over a domain's ``pods`` that is not indexable is refused with the reason; one over
its ``nodes`` is evaluated as a loop and bounded by the cost model (a domain may hold
``DOMAIN_NODES`` nodes: rulesched.lang.frontend.cost). Next stage: the checker records the
decision in ``Annotations.domain_aggregates`` for the compiler and the cost model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.source import Diagnostic, error
from rulesched.lang.types import ListOf, MapOf, Prim, Record, Type

INDEXED_KINDS = ("count", "any", "all", "sum")
# What the where and value may read besides the element: values fixed for one evaluation (in a
# preempt rule the victim is fixed too: its values join the index key at each call).
_FIXED = frozenset({schema.POD_VARIABLE, schema.VICTIM_VARIABLE})
DOMAIN_RECORDS = (schema.DOMAIN, schema.CLUSTER)


@dataclass(frozen=True)
class DomainAggregate:
    """An indexable aggregate: over ``pods`` or ``nodes`` of the domain ``source`` (the
    iterable's object), keyed by the values of ``holes``."""

    elements: str
    source: ast.Expr
    holes: tuple[ast.Expr, ...]


@dataclass(frozen=True)
class OverDomains:
    """``min|max(AGG for n in cluster.nodes where COND)`` where AGG is an indexed aggregate over
    ``domain(n, KEY)``: the extreme over the domains of KEY (kube-scheduler's PodTopologySpread
    minimum over domains). Its value depends on the pod and the cluster, not on the node being
    evaluated: computed once per pod and cluster change, from one representative node per
    domain value among the nodes COND holds for (COND reads only ``n``'s fields that do not move
    with pods, and the pod), then a lookup per domain."""

    inner: ast.Quantifier | ast.Aggregate
    key: ast.Expr
    holes: tuple[ast.Expr, ...]


@dataclass(frozen=True)
class Refusal:
    message: str
    at: ast.Expr
    suggestion: str = ""


def domain_source(iterable: ast.Expr, types: dict[int, Type]) -> tuple[ast.Expr, str] | None:
    """``(D, "pods" | "nodes")`` when ``iterable`` is ``D.pods`` or ``D.nodes`` of a domain."""
    if isinstance(iterable, ast.Attr) and iterable.name in ("pods", "nodes"):
        if types.get(id(iterable.obj)) in DOMAIN_RECORDS:
            return iterable.obj, iterable.name
    return None


class Analysis:
    """``reads`` gives the names an expression reads, as the checker resolved them: rule
    variables (``pod``, ``node``, ``victim``, ``cluster``), ``@bound:NAME`` for aggregate
    variables it does not bind itself, ``@ctx`` for a built-in reading the cluster."""

    def __init__(
        self,
        names: Mapping[int, object],
        types: dict[int, Type],
        let_needs: Callable[[str], frozenset[str]],
        decided: Mapping[int, object],
    ) -> None:
        self.names, self.types, self.let_needs, self.decided = names, types, let_needs, decided
        self._memo: dict[int, frozenset[str]] = {}

    def reads(self, e: ast.Expr) -> frozenset[str]:
        key = id(e)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        found: frozenset[str]
        if isinstance(e, ast.Name):
            ref = self.names.get(key)
            kind, name = (getattr(ref, "kind", ""), getattr(ref, "name", e.id))
            if kind == "bound":
                found = frozenset({f"@bound:{name}"})
            elif kind == "let":
                found = self.let_needs(name)
            elif kind == "var":
                found = frozenset({name})
            else:
                found = frozenset()
        else:
            found = frozenset().union(*(self.reads(c) for c in ast.children(e)))
            if isinstance(e, ast.Call) and e.func in BUILTINS and BUILTINS[e.func].context:
                found |= {"@ctx"}
            if isinstance(e, (ast.Quantifier, ast.Aggregate)):
                found -= {f"@bound:{e.var}"}
        self._memo[key] = found
        return found

    def record(
        self, expr: ast.Quantifier | ast.Aggregate, decided: dict[int, Any], pods_reads: dict[int, ast.Attr]
    ) -> list[Diagnostic]:
        """Decide for one aggregate as the checker types it: an indexed one goes into
        ``decided``; a refusal is an error when the list is a domain's pods (``pods_reads``, the
        reads of ``D.pods`` not yet seen as an aggregate's list; this one is taken out)."""
        found = self.decide(expr)
        out = []
        if isinstance(found, (DomainAggregate, OverDomains)):
            decided[id(expr)] = found
        elif isinstance(found, Refusal) and id(expr.iterable) in pods_reads:
            out.append(error("not-indexable", found.message, found.at.span, found.suggestion))
        pods_reads.pop(id(expr.iterable), None)
        return out

    def over_domains(self, expr: ast.Quantifier | ast.Aggregate) -> OverDomains | None:
        """The :class:`OverDomains` shape, or None."""
        if not (isinstance(expr, ast.Aggregate) and expr.kind in ("min", "max")):
            return None
        if not (isinstance(expr.iterable, ast.Attr) and expr.iterable.name == "nodes"):
            return None
        if self.types.get(id(expr.iterable.obj)) != schema.CLUSTER:
            return None
        inner = expr.value
        if not isinstance(inner, (ast.Quantifier, ast.Aggregate)) or id(inner) not in self.decided:
            return None
        found = domain_source(inner.iterable, self.types)
        source = found[0] if found is not None else None
        if not (isinstance(source, ast.Call) and source.func == "domain" and len(source.args) == 2):
            return None
        subject, key = source.args
        element = f"@bound:{expr.var}"
        if not (isinstance(subject, ast.Name) and self.reads(subject) == {element}) or self.reads(key) - _FIXED:
            return None
        # (the inner aggregate's where and value read only its element and fixed values: indexed)
        holes: list[ast.Expr] = [key] if self.reads(key) else []
        if expr.where is not None:
            if self._first_bad(expr.where, element) or self._moving_node_read(expr.where, expr.var):
                return None
            if self._holes(expr.where, holes) is not None:
                return None
        return OverDomains(inner, key, tuple(holes))

    def decide(self, expr: ast.Quantifier | ast.Aggregate) -> DomainAggregate | OverDomains | Refusal | None:
        """None: not over a domain; a refusal for a domain's pods that cannot be indexed, or
        for a domain's nodes (those are looped over instead)."""
        over = self.over_domains(expr)
        if over is not None:
            return over
        found = domain_source(expr.iterable, self.types)
        if found is None:
            return None
        source, elements = found
        parts = [p for p in (expr.where, expr.value if isinstance(expr, ast.Aggregate) else None) if p is not None]
        what = f"{expr.kind} over {_text(expr.iterable)}"
        if expr.kind not in INDEXED_KINDS:
            return Refusal(
                f"{what} is not kept as an index (only count, any, all and sum are)",
                expr,
                "count or sum over the domain instead",
            )
        element = f"@bound:{expr.var}"
        for part in parts:
            bad = self._first_bad(part, element)
            if bad is not None:
                return Refusal(
                    f"{what} is kept as per-domain counts, so its where and value may read only "
                    f"'{expr.var}' and the pod being placed (or the victim); this reads {bad[1]}",
                    bad[0],
                    "compare the element with pod-only values (pod.labels[...], pod.namespace, constants)",
                )
            if elements == "nodes":
                moving = self._moving_node_read(part, expr.var)
                if moving is not None:
                    return Refusal(
                        f"{what}: '{expr.var}.{moving.name}' changes as pods come and go; "
                        f"read the domain's requested or free instead",
                        moving,
                    )
        holes: list[ast.Expr] = []
        for part in parts:
            refusal = self._holes(part, holes)
            if refusal is not None:
                return refusal
        return DomainAggregate(elements, source, tuple(holes))

    def _first_bad(self, e: ast.Expr, element: str) -> tuple[ast.Expr, str] | None:
        reads = self.reads(e) - {element} - _FIXED
        if not reads:
            return None
        for child in ast.children(e):
            found = self._first_bad(child, element)
            if found is not None:
                return found
        first = sorted(reads)[0]
        if first == "@ctx":
            return e, "the cluster through a built-in"
        if first.startswith("@bound:"):
            return e, f"'{first[7:]}', a variable of an enclosing aggregate"
        return e, f"'{first}'"

    def _moving_node_read(self, e: ast.Expr, var: str) -> ast.Attr | None:
        """A read of a node field that moves with pods (``n.free``, ``n.pods``) from the element,
        or the element used whole (then anything may be read: reported at it)."""
        for child in ast.children(e):
            if isinstance(child, ast.Name) and self.reads(child) == {f"@bound:{var}"}:
                if not (isinstance(e, ast.Attr) and e.name not in schema.NODE_POD_FIELDS):
                    return e if isinstance(e, ast.Attr) else ast.Attr(child, "(whole)", span=child.span)
            found = self._moving_node_read(child, var)
            if found is not None:
                return found
        return None

    def _holes(self, e: ast.Expr, out: list[ast.Expr]) -> Refusal | None:
        reads = self.reads(e)
        if not reads & _FIXED:
            return None
        if reads <= _FIXED:
            if not _keyable(self.types.get(id(e))):
                return Refusal(
                    f"{_text(e)} is {self.types.get(id(e))}, which an index cannot be keyed by",
                    e,
                    "read the pod's fields (pod.labels[...], pod.namespace) instead",
                )
            out.append(e)
            return None
        for child in ast.children(e):
            refusal = self._holes(child, out)
            if refusal is not None:
                return refusal
        return None


def _keyable(t: Type | None) -> bool:
    if isinstance(t, Prim):
        return True
    if isinstance(t, ListOf):
        return _keyable(t.elem)
    if isinstance(t, MapOf):
        return _keyable(t.value)
    return not isinstance(t, Record) and t is not None


def _text(e: ast.Expr) -> str:
    span = e.span
    text = " ".join(span.source.text[span.start : span.end].split())
    return text if len(text) <= 40 else text[:37] + "..."


def unaggregated(reads: Iterable[ast.Attr]) -> list[Diagnostic]:
    """Errors for reads of a domain's ``pods`` that are not the list of an indexed aggregate."""
    return [
        error(
            "not-indexable",
            f"{_text(attr)} can only be aggregated over: count, any, all or sum(... for p in "
            f"{_text(attr)} where ...), kept as per-domain counts",
            attr.span,
        )
        for attr in reads
    ]
