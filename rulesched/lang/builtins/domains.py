"""Topology domains and the cluster as rules see them: ``domain(node, KEY)`` and ``cluster``.

``domain(node, KEY)`` is the set of nodes whose label KEY has ``node``'s value; a node without
the label is in no domain, and its domain is empty (no nodes, no pods, zero sums). ``cluster``
is the domain of every node. Both evaluate to a :class:`DomainRef`; its fields (``nodes``,
``pods``, ``allocatable``, ``requested``, ``free``) and the aggregates over its ``pods`` and
``nodes`` that the checker found indexable (rulesched.lang.frontend.domain_check) are answered
from indexes kept in the evaluating session's store (:mod:`rulesched.lang.indexes`):

* per-domain node lists and allocatable sums, rebuilt when nodes change (their labels decide
  domains), never when pods do;
* per-domain requested sums and per-domain aggregate accumulators (:class:`DomainCounts`),
  brought up to date by replaying the pods added and removed since (``ClusterView.pod_changes``),
  so no evaluation rescans the cluster.

The pods counted are those of ``node.pods``: bound and assumed pods. Nominated pods count where
kube-scheduler counts them (PodTopologySpread and InterPodAffinity see them only in the second
filtering of RunFilterPluginsWithNominatedPods, which the scheduler runs on an overlay with them
added: rulesched.scheduler.nominator).

The ``brute_*`` functions recount from scratch; the reference interpreter uses them, and the
tests hold the indexes to them. Next stage: rulesched.lang.evaluation.compile calls
:func:`aggregate` for indexed aggregates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from fractions import Fraction
from typing import Any

from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.indexes import current
from rulesched.model import Pod

CLUSTER_VALUE = ""  # the one "domain value" of the cluster (key None)


class DomainRef:
    """What ``domain(node, KEY)`` (``key`` KEY, ``value`` the node's label value or None: no
    domain) and ``cluster`` (``key`` None) evaluate to. Holds the evaluation context, whose
    cluster view and index store its fields read."""

    __slots__ = ("ctx", "key", "value")

    def __init__(self, ctx: EvalContext, key: str | None, value: str | None) -> None:
        self.ctx, self.key, self.value = ctx, key, value

    def __repr__(self) -> str:
        return "cluster" if self.key is None else f"domain({self.key}={self.value})"

    def field(self, name: str) -> Any:
        """A field as compiled rules read it (from the indexes)."""
        return FIELDS[name](self)


def domain(ctx: EvalContext, node: Any, key: str) -> DomainRef:
    """``domain(node, KEY)``."""
    return DomainRef(ctx, key, node.labels.get(key) if node is not None else None)


def cluster_ref(ctx: EvalContext) -> DomainRef:
    return DomainRef(ctx, None, CLUSTER_VALUE)


def version(ctx: EvalContext) -> object:
    """Any change to the cluster may change a domain's answers."""
    cluster = ctx.cluster
    return None if cluster is None else (cluster.history, cluster.generation)


def value_of(key: str | None, node: Any) -> str | None:
    """The domain value of a node (its ``labels``) for ``key``; None: in no domain."""
    return CLUSTER_VALUE if key is None else node.labels.get(key)


def freeze(value: Any) -> Hashable:
    """A hashable stand-in for a pod-only value an index is keyed by (maps and lists)."""
    if isinstance(value, Mapping):
        return frozenset((k, freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value  # type: ignore[no-any-return]


# --- indexes --------------------------------------------------------------------------------
_BUILDS = itertools.count(1)
Contribute = Callable[[Any, "dict[Any, Any]", int], None]  # (element, per-domain sub-dict, sign)


class DomainCounts:
    """Per domain value, a dict of sub-keys to sums: what ``contribute`` adds for each element
    (pods, or with ``nodes`` set, nodes: those do not move with pods, so ``apply`` ignores pod
    changes and a node change rebuilds). Zero sums are dropped, so an empty domain reads as
    nothing counted."""

    def __init__(self, key: str | None, contribute: Contribute, nodes: bool = False) -> None:
        self.key, self._contribute, self._nodes = key, contribute, nodes
        self.per: dict[Any, dict[Any, Any]] = {}

    def build(self, cluster: ClusterView) -> None:
        for node in cluster.node_views():
            if self._nodes:
                self._add(1, node, node)
            else:
                for pod in node.pods:
                    self._add(1, pod, node)

    def apply(self, sign: int, pod: Pod, node: Any) -> None:
        if not self._nodes:
            self._add(sign, pod, node)

    def fork(self) -> DomainCounts:
        if self._nodes:
            return self  # never changed after its build
        twin = DomainCounts(self.key, self._contribute)
        twin.per = {v: dict(sub) for v, sub in self.per.items()}
        return twin

    def _add(self, sign: int, element: Any, node: Any) -> None:
        value = value_of(self.key, node)
        if value is None:
            return
        sub = self.per.get(value)
        if sub is None:
            sub = self.per[value] = {}
        self._contribute(element, sub, sign)
        if not sub:
            del self.per[value]


def add_to(sub: dict[Any, Any], key: Any, amount: Any) -> None:
    total = sub.get(key, 0) + amount
    if total:
        sub[key] = total
    else:
        sub.pop(key, None)


def _node_list(key: str | None) -> Callable[[], DomainCounts]:
    def contribute(node: Any, sub: dict[Any, Any], sign: int) -> None:
        sub.setdefault("nodes", []).append(node)

    return lambda: DomainCounts(key, contribute, nodes=True)


def _resources(key: str | None, field: str) -> Callable[[], DomainCounts]:
    """Per-domain sums of the nodes' allocatable (``nodes``) or of the pods' requests."""
    if field == "allocatable":

        def of_node(node: Any, sub: dict[Any, Any], sign: int) -> None:
            for name, amount in node.allocatable.items():
                add_to(sub, name, amount)

        return lambda: DomainCounts(key, of_node, nodes=True)

    def of_pod(pod: Pod, sub: dict[Any, Any], sign: int) -> None:
        for name, amount in pod.requests.items():
            add_to(sub, name, sign * amount)

    return lambda: DomainCounts(key, of_pod)


def _sub(ref: DomainRef, what: Hashable, make: Callable[[], DomainCounts]) -> dict[Any, Any]:
    if ref.value is None or ref.ctx.cluster is None:
        return {}
    index = current(ref.ctx, ("domain", what, ref.key), make)
    return index.per.get(ref.value) or {}


def nodes(ref: DomainRef) -> list[Any]:
    return _sub(ref, "nodes", _node_list(ref.key)).get("nodes", [])  # type: ignore[no-any-return]


def allocatable(ref: DomainRef) -> Mapping[str, int]:
    return _sub(ref, "allocatable", _resources(ref.key, "allocatable"))


def requested(ref: DomainRef) -> Mapping[str, int]:
    return _sub(ref, "requested", _resources(ref.key, "requested"))


def free(ref: DomainRef) -> Mapping[str, int]:
    return _free(allocatable(ref), requested(ref))


def _free(alloc: Mapping[str, int], req: Mapping[str, int]) -> dict[str, int]:
    return {k: alloc.get(k, 0) - req.get(k, 0) for k in alloc.keys() | req.keys()}


def pods(ref: DomainRef) -> list[Pod]:
    """The domain's pods as a list: a walk of its nodes (the checker lets rules reach it only
    through indexed aggregates; the reference interpreter iterates it)."""
    return [pod for node in brute_nodes(ref) for pod in node.pods]


# --- indexed aggregates ---------------------------------------------------------------------
Element = Callable[[Any], Any]  # the where condition or the value, for one element


def aggregate_index(
    kind: str, key: str | None, nodes_: bool, where: Element | None, value: Element | None
) -> Callable[[], DomainCounts]:
    """An index of one aggregate's per-domain accumulators: for count/any/all the elements the
    condition holds for (``True``) and the rest (``False``); for sum, the total (a Fraction
    once a float is added, so that the order pods come and go in cannot change the result)."""
    if kind == "sum":
        assert value is not None

        def summed(element: Any, sub: dict[Any, Any], sign: int) -> None:
            if where is None or where(element):
                amount = value(element)
                if isinstance(amount, float):
                    amount = Fraction(amount)
                add_to(sub, "sum", sign * amount)

        return lambda: DomainCounts(key, summed, nodes_)

    def counted(element: Any, sub: dict[Any, Any], sign: int) -> None:
        if where is None or where(element):
            add_to(sub, True, sign)
        elif kind == "all":  # (only all needs the elements the condition fails for)
            add_to(sub, False, sign)

    return lambda: DomainCounts(key, counted, nodes_)


class KeyedCounts(DomainCounts):
    """The counts of a keyed aggregate (:func:`keyed_index`) both ways round: ``per`` by domain
    value, then by the tuple of the element's values (one node's answer: two lookups), and
    ``by_values`` by that tuple, then domain value (one pod's answers over every domain: one
    dict, :func:`keyed_answers`)."""

    def __init__(self, key: str | None, keys: list[Element], value: Element | None, nodes: bool = False) -> None:
        super().__init__(key, _unused, nodes)
        self._keys, self._value = keys, value
        self.by_values: dict[Any, dict[Any, Any]] = {}

    def fork(self) -> KeyedCounts:
        if self._nodes:
            return self  # never changed after its build
        twin = KeyedCounts(self.key, self._keys, self._value)
        twin.per = {v: dict(sub) for v, sub in self.per.items()}
        twin.by_values = {v: dict(sub) for v, sub in self.by_values.items()}
        return twin

    def _add(self, sign: int, element: Any, node: Any) -> None:
        domain_value = value_of(self.key, node)
        if domain_value is None:
            return
        amount = 1 if self._value is None else self._value(element)
        if isinstance(amount, float):
            amount = Fraction(amount)
        amount = sign * amount
        values = tuple([k(element) for k in self._keys])
        for table, outer, inner in ((self.per, domain_value, values), (self.by_values, values, domain_value)):
            sub = table.get(outer)
            if sub is None:
                sub = table[outer] = {}
            add_to(sub, inner, amount)
            if not sub:
                del table[outer]


def _unused(element: Any, sub: dict[Any, Any], sign: int) -> None:
    raise AssertionError("KeyedCounts adds elements itself")


def keyed_index(
    kind: str, key: str | None, nodes_: bool, keys: list[Element], value: Element | None
) -> Callable[[], KeyedCounts]:
    """An index of an aggregate whose where is equalities between element values (``keys``) and
    pod-side ones: per domain, per tuple of the element's values, the count (or value sum)."""
    return lambda: KeyedCounts(key, keys, value, nodes_)


_NO_COUNTS = KeyedCounts(None, [], None)  # (never added to)


def keyed_counts(ref: DomainRef, token: Hashable, make: Callable[[], KeyedCounts]) -> KeyedCounts:
    """A keyed index, up to date (valid until the cluster changes)."""
    if ref.ctx.cluster is None:
        return _NO_COUNTS
    return current(ref.ctx, ("domain", token, ref.key), make)


def keyed_answer(kind: str, per: dict[Any, dict[Any, Any]], value: str | None, values: tuple[Any, ...]) -> Any:
    sub = per.get(value) if value is not None else None
    found = 0 if sub is None else sub.get(values, 0)
    if kind == "count":
        return found
    if kind == "any":
        return found > 0
    return float(found) if isinstance(found, Fraction) else found


def keyed_answers(
    kind: str,
    counts: KeyedCounts,
    key: str | None,
    nodes: list[Any],
    values: tuple[Any, ...],
    labels: list[Any] | None = None,
) -> list[Any]:
    """:func:`keyed_answer` in the domain of ``key`` of each node (``labels``: the nodes' values
    of it, when the caller knows them): one lookup per node in the pod's own dict of domains (a
    column of a zone's or a rack's representatives)."""
    if key is None:
        return [keyed_answer(kind, counts.per, CLUSTER_VALUE, values)] * len(nodes)
    if labels is None:
        labels = [n.labels.get(key) for n in nodes]
    column = counts.by_values.get(values)
    # (no None key there: a node without the label is in no domain, and finds nothing)
    found = [0] * len(labels) if column is None else [column.get(v, 0) for v in labels]
    if kind == "count":
        return found
    if kind == "any":
        return [f > 0 for f in found]
    return [float(f) if isinstance(f, Fraction) else f for f in found]


def answer(kind: str, sub: Mapping[Any, Any]) -> Any:
    """An aggregate's value from a domain's accumulators (its empty value for an empty domain)."""
    if kind == "sum":
        total = sub.get("sum", 0)
        return float(total) if isinstance(total, Fraction) else total
    hits = sub.get(True, 0)
    if kind == "count":
        return hits
    if kind == "any":
        return hits > 0
    return not sub.get(False, 0)  # all


def aggregate(ref: DomainRef, token: Hashable, kind: str, make: Callable[[], DomainCounts]) -> Any:
    """The value of an indexed aggregate (``token`` names it and the pod-only values it reads)."""
    return answer(kind, _sub(ref, token, make))


def representatives(ctx: EvalContext, token: Hashable, key: str, passes: Callable[[Any], bool]) -> list[Any]:
    """One node per value of label ``key`` (one for the nodes without it) among the nodes
    ``passes`` holds for: kept per node generation under ``token`` (which names the condition
    and the pod-only values it reads)."""
    if ctx.cluster is None:
        return []

    def contribute(node: Any, sub: dict[Any, Any], sign: int) -> None:
        if passes(node):
            sub.setdefault(node.labels.get(key, _NO_LABEL), node)

    index = current(ctx, ("domain", "representatives", token, key), lambda: DomainCounts(None, contribute, nodes=True))
    return list(index.per.get(CLUSTER_VALUE, {}).values())


_NO_LABEL = object()


def exact_sum(values: list[Any]) -> Any:
    """The reference's sum for aggregates over domains: exact (through Fractions) when a float is
    among the values, so that it does not depend on the order of the pods."""
    if any(isinstance(v, float) for v in values):
        return float(sum((Fraction(v) for v in values), Fraction(0)))
    return sum(values)


# --- brute force: the reference ---------------------------------------------------------------
def brute_nodes(ref: DomainRef) -> list[Any]:
    cluster = ref.ctx.cluster
    if ref.value is None or cluster is None:
        return []
    return [n for n in cluster.node_views() if value_of(ref.key, n) == ref.value]


def brute_field(ref: DomainRef, name: str) -> Any:
    members = brute_nodes(ref)
    if name == "nodes":
        return members
    if name == "pods":
        return [pod for node in members for pod in node.pods]
    alloc: dict[str, int] = {}
    req: dict[str, int] = {}
    for node in members:
        for k, v in node.allocatable.items():
            alloc[k] = alloc.get(k, 0) + v
        for pod in node.pods:
            for k, v in pod.requests.items():
                req[k] = req.get(k, 0) + v
    alloc = {k: v for k, v in alloc.items() if v}
    req = {k: v for k, v in req.items() if v}
    if name == "allocatable":
        return alloc
    if name == "requested":
        return req
    return _free(alloc, req)


FIELDS: dict[str, Callable[[DomainRef], Any]] = {
    "nodes": nodes,
    "pods": pods,
    "allocatable": allocatable,
    "requested": requested,
    "free": free,
}
