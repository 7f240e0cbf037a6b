"""The columns of preemption's dry runs (:mod:`rulesched.engine.dryrun`): the tried nodes as they
are with some of their pods taken off (and the pods nominated to them added), and which rules a
dry run may evaluate that way.

A filter qualifies (:func:`node_local`) only if everything it reads of a node is a number the
columns adjust (free and requested resources, the pod count, host ports), a field no pod
changes (labels, taints, allocatable), or the node passed whole to a built-in that reads no
pod-dependent field or whose answer, for this pod, no removal of running pods can change
(:data:`UNAFFECTED`); of those, the ones that read what a pod changes are
:func:`changing_filters`, the others answer alike whichever pods are on the node.
Next stage: :mod:`rulesched.engine.dryrun`, the dry runs over these columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Array, Unsupported
from rulesched.engine.batch import columns_of
from rulesched.engine.columns import NodeColumns, Path, Rows
from rulesched.lang import BUILTINS, BoundRules, RuleSet
from rulesched.lang.evaluation.stages import NodeMemos
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.through_lets import DONE, INTO, STOP, Visit, is_rule_variable, through_lets
from rulesched.lang.schema import NODE, NODE_POD_FIELDS, NODE_VARIABLE, RECORDS
from rulesched.lang.types import NUMBER, QUANTITY
from rulesched.model import Pod

# Cluster-wide built-ins whose answer, for this pod, no removal of running pods can change.
UNAFFECTED: dict[str, Callable[[Any], bool]] = {
    "pod_affinity_ok": lambda ctx: not ctx.pod.pod_affinity,
    "pod_anti_affinity_ok": lambda ctx: not ctx.pod.pod_anti_affinity,
    "existing_anti_affinity_ok": lambda ctx: _nothing_counted(ctx),
}


def _nothing_counted(ctx: Any) -> bool:
    """No running pod's required anti-affinity selects the pod: removing pods counts nothing either."""
    uniform = BUILTINS["existing_anti_affinity_ok"].uniform
    return uniform is not None and uniform(ctx) is True


_FIELD_OF = {id(f.get): name for name, f in RECORDS[NODE].items()}
_REQUESTED, _PODS = RECORDS[NODE]["requested"].get, RECORDS[NODE]["pods"].get
_RESOURCE_SUMS = {"free": 1, "requested": -1}  # field -> sign of what is off (non-zero requests: not kept)


def node_local(bound: BoundRules) -> bool:
    """Whether every filter of ``bound`` reads a node only as this module can adjust (see the
    module docstring), for this pod now."""
    bodies = columns_of(bound)
    if bodies is None or len(bodies.filter_bodies) != len(bound.filters) or not isinstance(bound.rule_set, RuleSet):
        return False
    notes, lets = bodies.evaluator.notes, bodies.evaluator.lets
    kept = bound.rule_set.memo(_LocalBodies).calls
    for i, body in enumerate(bodies.filter_bodies):
        calls = _local(kept, body, notes, lets)[0]
        if calls is None or not all(UNAFFECTED[name](bound.ctx) for name in calls):
            return False
        if bodies.filters[i] is None:  # not vectorisable: grouped by pod-independent fields only
            fields = bodies.filter_fields[i]
            if fields is None or NODE_POD_FIELDS.intersection(fields):
                return False
    return True


def changing_filters(bound: BoundRules) -> list[int]:
    """The indices of the filters of ``bound`` (node-local: :func:`node_local`) that read what a
    pod put back on a node changes (its pods, free or requested resources, host ports). The
    others' answers are the same with any of its pods off: a node that passed every filter with
    all of them off passes those with any put back."""
    bodies = columns_of(bound)
    assert bodies is not None and isinstance(bound.rule_set, RuleSet)
    notes, lets = bodies.evaluator.notes, bodies.evaluator.lets
    kept = bound.rule_set.memo(_LocalBodies).calls
    return [i for i, body in enumerate(bodies.filter_bodies) if _local(kept, body, notes, lets)[1]]


_Local = tuple[frozenset[str] | None, bool]  # (the context built-ins called, or None; whether pod fields are read)


class _LocalBodies:
    """Kept by a rule set: what :func:`_calls_if_local` found of each of its filter bodies (the
    rules' own expressions, the same in every binding), worked out once per body rather than
    once per preemption."""

    def __init__(self, rules: RuleSet) -> None:
        self.calls: dict[int, tuple[ast.Expr, _Local]] = {}


def _local(kept: dict[int, tuple[ast.Expr, _Local]], body: ast.Expr, notes: Any, lets: dict[str, ast.Let]) -> _Local:
    hit = kept.get(id(body))
    if hit is None or hit[0] is not body:
        hit = kept[id(body)] = (body, _calls_if_local(body, notes, lets))
    return hit[1]


def _calls_if_local(body: ast.Expr, notes: Any, lets: dict[str, ast.Let]) -> _Local:
    """The context built-ins ``body`` calls, if it reads the node only in ways a dry run's
    columns adjust (else None), and whether it reads a field of the node's pods."""
    calls: set[str] = set()
    reads_pods = False

    def visit(e: ast.Expr, parent: ast.Expr | None) -> Visit:
        nonlocal reads_pods
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            if e.func not in UNAFFECTED:
                return STOP
            calls.add(e.func)
            return INTO
        if isinstance(e, ast.Attr) and is_rule_variable(notes, e.obj, NODE_VARIABLE):  # node.FIELD
            field = e.name
            reads_pods = reads_pods or field in NODE_POD_FIELDS
            if field not in NODE_POD_FIELDS or field == "used_ports":  # (ports: checked per victim)
                return DONE
            if field == "pods":
                return DONE if isinstance(parent, ast.Call) and parent.func == "len" else STOP
            return DONE if isinstance(parent, ast.Attr | ast.Index) else STOP  # a resource of free/requested
        if isinstance(e, ast.Name):
            ref = notes.names[id(e)]
            if ref.kind == "bound" or ref.name != NODE_VARIABLE:
                return DONE
            if isinstance(parent, ast.Call):  # the node whole, to a built-in
                builtin = BUILTINS[parent.func]
                if builtin.context:
                    return DONE if parent.func in UNAFFECTED else STOP
                local = builtin.node_fields is not None and not (builtin.node_fields & NODE_POD_FIELDS)
                return DONE if local else STOP
            return STOP
        return INTO

    return (frozenset(calls) if through_lets(body, notes, lets, visit) else None), reads_pods


class DryRunColumns(NodeColumns):
    """The tried nodes (row i: ``nodes[i]``, row ``rows[i]`` of ``base``) as they are with the
    pods in ``off`` taken off. Columns of fields no pod changes come from ``base``; free,
    requested and non-zero requested resources and the pod count are ``base``'s adjusted by what
    is off; host ports are ``base``'s while no pod off holds one. Anything else read raises
    Unsupported."""

    def __init__(
        self,
        nodes: Sequence[Any],
        base: NodeColumns,
        rows: Rows,
        off: Sequence[Sequence[Pod]],
        held: Sequence[Sequence[Pod]] = (),
        memos: NodeMemos | None = None,
    ) -> None:
        super().__init__(nodes)
        # Per row, the values of its pods off kept so far (flat_values), from its node memo
        # when the rule set's node memos are given and the node holds them for these pods
        self._kept = _kept_values(nodes, off, memos)
        # Pods nominated to each row's node (held for the pod's priority or higher): counted as
        # on the node while ``with_held`` (the second of a nominated node's two fit checks).
        self.with_held = False
        self._held = held or [()] * len(off)
        if not all(held_counted(p) for pods in self._held for p in pods):
            raise Unsupported("a nominated pod counts beyond its requests")
        self.has_held = np.array([bool(pods) for pods in self._held], dtype=bool)
        self._held_count = np.array([len(pods) for pods in self._held], dtype=np.int64)
        self._held_sums: dict[str, npt.NDArray[np.int64]] = {}
        self._held_ports = any(p.host_ports for pods in self._held for p in pods)
        self._base, self._base_rows = base, rows
        self._fixed: dict[Path, Array] = {}
        # The columns and their bounds as the rows are now (with the nominated pods or not), as
        # read so far: a fit check's filters, reasons and unresolvable clauses read the same
        # ones (``put`` changes them: it forgets these)
        self._now: dict[tuple[Path, bool], Array] = {}
        self._bounds_now: dict[tuple[Path, bool], int | float | None] = {}
        # The pods taken off at first, flattened (row i's are flat[starts[i]:starts[i] + len(off[i])]),
        # which of them are back, and per row: how many are off, how many of those hold host
        # ports, and (made when a column first needs one) the sums of their requests of a resource.
        self.lengths = np.array([len(pods) for pods in off], dtype=np.intp)
        self.starts = np.zeros(len(off), dtype=np.intp)
        np.cumsum(self.lengths[:-1], out=self.starts[1:])
        self.flat = [p for pods in off for p in pods]
        self._off = off
        self._back = np.zeros(len(self.flat), dtype=bool)
        self.count = self.lengths.astype(np.int64)
        # per row, how many of its pods off hold host ports (which of them: when one is put back)
        self._ports = np.array(self._per_row("ports held", range(len(off)), _ports_held), dtype=np.int64)
        self._any_ports = bool(self._ports.any())
        self._holds_ports: npt.NDArray[np.bool_] | None = None  # per flat pod, made at the first put that needs it
        self._requests: dict[str, npt.NDArray[np.int64]] = {}  # resource -> per flat pod
        self._sums: dict[str, npt.NDArray[np.int64]] = {}

    def _sum(self, resource: str) -> npt.NDArray[np.int64]:
        """Requests of ``resource`` off, per row."""
        found = self._sums.get(resource)
        if found is None:
            # where every pod is off (the usual case) the node's own sum, read as a column
            requested = Path((("field", _REQUESTED), ("key", resource, 0)))
            column = self._base.column(requested, QUANTITY)
            if column.dtype != np.int64:
                raise Unsupported("requests beyond int64")
            found = column[self._base_rows]  # (a copy: fancy indexing)
            pods = self._base.column(Path((("field", _PODS), ("len",))), NUMBER)[self._base_rows]
            partial = np.flatnonzero(pods != self.lengths)
            if len(partial):  # the others: the sums of the pods off, kept per node
                found[partial] = self._kept_sums(resource, partial)
            if self._back.any():  # (a column first read after some were put back)
                found -= self._row_sums(np.where(self._back, self._amounts(resource), 0))
            self._sums[resource] = found
        return found

    def _row_sums(self, amounts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per row, the sum of ``amounts`` (one per pod taken off at first, as ``flat``)."""
        # (a 0 after the last pod: reduceat's starts must index the array, and a row with no
        # pods off, whose start is the next row's, would read that row's first: 0 there)
        sums = np.add.reduceat(np.append(amounts, 0), self.starts) if len(self.starts) else amounts[:0]
        return np.where(self.lengths > 0, sums, 0)

    def _kept_sums(self, resource: str, rows: Rows) -> npt.NDArray[np.int64]:
        """Per row of ``rows``, the requests of ``resource`` of its pods taken off at first."""
        sums = self._per_row(f"sum:{resource}", rows.tolist(), _Sum(resource))
        if sums and not -(2**62) < min(sums) <= max(sums) < 2**62:  # (the columns' int64, with room)
            raise Unsupported("requests beyond int64")
        return np.array(sums, dtype=np.int64)

    def _per_row(self, what: str, rows: Iterable[int], of: Callable[[Sequence[Pod]], int]) -> list[int]:
        """``of`` each of ``rows``' pods taken off at first, kept per node under ``what``
        (:func:`_kept_values`): the rows asked only, not a value per pod."""
        out = []
        for i in rows:
            kept = self._kept[i]
            found = kept.get(what)
            if found is None:
                found = kept[what] = of(self._off[i])
            out.append(found)
        return out

    def _amounts(self, resource: str) -> npt.NDArray[np.int64]:
        found = self._requests.get(resource)
        if found is None:
            found = self._requests[resource] = self.flat_values(f"requests:{resource}", _Request(resource), np.int64)
        return found

    def flat_values(self, what: str, value: Callable[[Pod], Any], dtype: Any) -> Array:
        """``value`` of every pod taken off at first, flattened as ``flat``. Per node the values
        are kept (:func:`_kept_values`) under ``what``, which names ``value``."""
        parts = []
        for kept, pods in zip(self._kept, self._off, strict=True):
            found = kept.get(what)
            if found is None:
                found = kept[what] = np.fromiter(map(value, pods), dtype=dtype, count=len(pods))
            parts.append(found)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def put(self, at: Rows, rows: Rows, sign: int) -> None:
        """Put the pods at flat positions ``at`` back on the nodes of ``rows`` (``sign`` 1), or
        take them off again (-1); each row at most once."""
        self._now.clear()
        self._bounds_now.clear()
        self.count[rows] -= sign
        self._back[at] = sign > 0
        for resource, column in self._sums.items():
            column[rows] -= sign * self._amounts(resource)[at]
        if self._any_ports:
            if self._holds_ports is None:  # (flattened once: a dry run puts pods back many times)
                self._holds_ports = self.flat_values("ports", _holds_ports, bool)
            held = self._holds_ports[at]
            self._ports[rows] -= sign * held.astype(np.int64)

    def column(self, path: Path, kind: Any) -> Array:
        key = (path, self.with_held)
        found = self._now.get(key)
        if found is None:
            found = self._now[key] = self._column(path, kind)
        return found

    def _column(self, path: Path, kind: Any) -> Array:
        steps = path.steps
        if not steps:
            raise Unsupported("whole nodes")  # (objects() serves built-ins taking the node)
        field = _FIELD_OF.get(id(steps[0][1])) if steps[0][0] == "field" else None
        if field is None:
            raise Unsupported("a derived column")
        base = self._fixed.get(path)
        if base is None:
            base = self._fixed[path] = self._base.column(path, kind)[self._base_rows]
        if field not in NODE_POD_FIELDS:
            return base
        held = self.with_held
        if field == "used_ports" and len(steps) == 1:
            if self._ports.any() or (held and self._held_ports):
                raise Unsupported("a pod taken off or nominated holds host ports")
            return base
        if field == "pods" and len(steps) == 2 and steps[1][0] == "len":
            return self._adjusted(base, (self._held_count if held else 0) - self.count)
        if field in _RESOURCE_SUMS and len(steps) == 2 and steps[1][0] == "key":
            off = self._sum(steps[1][1])
            if held:
                off = off - self._held_sum(steps[1][1])
            return self._adjusted(base, _RESOURCE_SUMS[field] * off)
        raise Unsupported(f"{field} read as a whole")

    def _held_sum(self, resource: str) -> npt.NDArray[np.int64]:
        found = self._held_sums.get(resource)
        if found is None:
            found = self._held_sums[resource] = np.array(
                [sum(p.requests.get(resource, 0) for p in pods) for pods in self._held], dtype=np.int64
            )
        return found

    @staticmethod
    def _adjusted(base: Array, delta: npt.NDArray[np.int64]) -> Array:
        if base.dtype != np.int64:
            raise Unsupported("not an int64 column")
        return base + delta  # (both far below 2**62: quantities in milli-units, pod counts)

    def bound(self, path: Path, kind: Any) -> int | float | None:
        key = (path, self.with_held)
        if key not in self._bounds_now:
            self._bounds_now[key] = self._bound(path, kind)
        return self._bounds_now[key]

    def _bound(self, path: Path, kind: Any) -> int | float | None:
        a = self.column(path, kind)
        if a.dtype == object or a.dtype == bool:
            return None
        if not len(a):
            return 0
        return float(np.max(np.abs(a))) if a.dtype.kind == "f" else int(max(int(a.max()), -int(a.min())))

    def derived(self, get: Callable[[Any], Any], kind: Any) -> Array:
        raise Unsupported("a derived column")

    def update(self, rows: Sequence[int], nodes: Sequence[Any] | None = None, pods_only: bool = False) -> None:
        raise AssertionError("dry-run columns do not follow the cluster")


_KEPT = ("dry-run",)  # the node memos' key of the values kept for a node's pods off


def _kept_values(nodes: Sequence[Any], off: Sequence[Sequence[Pod]], memos: NodeMemos | None) -> list[dict[str, Any]]:
    """Per node, what is known of its pods ``off`` so far, by name: values per pod
    (``flat_values``) and per node (``_per_row``: the sums of their requests, how many hold
    host ports). With ``memos``, the node's memo keeps them beside the list of pods they belong
    to (the potential victims a node memo keeps: the same list while the node is unchanged), so
    the dry runs of later preemptions read them again."""
    if memos is None:
        return [{} for _ in off]
    out: list[dict[str, Any]] = []
    for node, pods in zip(nodes, off, strict=True):
        memo = memos.values(node) or memos.start(node)
        hit = memo.get(_KEPT)
        if hit is None or hit[0] is not pods:
            hit = memo[_KEPT] = (pods, {})
        out.append(hit[1])
    return out


class _Request:
    """A pod's request of one resource (0 when it asks for none)."""

    __slots__ = ("resource",)

    def __init__(self, resource: str) -> None:
        self.resource = resource

    def __call__(self, pod: Pod) -> int:
        return pod.requests.get(self.resource, 0)


class _Sum:
    """The requests of one resource of some pods, summed."""

    __slots__ = ("resource",)

    def __init__(self, resource: str) -> None:
        self.resource = resource

    def __call__(self, pods: Sequence[Pod]) -> int:
        resource = self.resource
        return sum(p.requests.get(resource, 0) for p in pods)


def held_counted(pod: Pod) -> bool:
    """Whether a nominated pod added to a node changes this pod's filters only through what the
    columns add (its requests, its count, its host ports): not through its required
    anti-affinity (upstream's InterPodAffinity AddPod counts the terms that select the pod) or
    DRA claims."""
    return not (pod.pod_anti_affinity or pod.resource_claims or pod.extended_claim)


def _holds_ports(pod: Pod) -> bool:
    return bool(pod.host_ports)


def _ports_held(pods: Sequence[Pod]) -> int:
    """How many of ``pods`` hold host ports."""
    return sum(1 for p in pods if p.host_ports)
