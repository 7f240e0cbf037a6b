"""The batch half of a binding: a pod's rules over many nodes at once, as columns.

The language binds rules to a pod (:class:`rulesched.lang.BoundRules`: guards decided, per-node
functions); this module evaluates such a binding over the rows of a
:class:`rulesched.engine.columns.NodeColumns`. :class:`ColumnPlan` is what a rule set needs for
that, made once per set (the column evaluator, which rules it can evaluate, the node fields the
others read, each rule's share key); :class:`ColumnBodies` is the plan applied to one binding
(its rules, in its order, with its pod's share keys), made once per binding. Both are kept by the
set and the binding themselves (``memo``), so they go when a reload drops the set: the language
holds them without knowing what they are.

``filter_mask`` and ``score_matrix`` answer as the binding's ``first_failure`` / ``score_vector``
would node by node: filters that evaluate as columns first, then the rest node by node on the rows
still passing; scores as columns, once per group of nodes alike in the fields a rule reads, or
node by node. A column evaluation that raises anything but ``Unsupported`` is a bug: counted and
logged (:mod:`rulesched.engine.fallback`), and the rule is evaluated node by node.
Next stage: the class tables (:mod:`rulesched.engine.table`) and the scheduler's explanations.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rulesched.engine.alike import NodeReads, node_reads
from rulesched.engine.arrays import Unsupported
from rulesched.engine.column_calls import grouped
from rulesched.engine.columns import Groups, NodeColumns, Rows, node_fields, node_labels
from rulesched.engine.settings import EngineSettings
from rulesched.engine.sharing import RuleShare, Shared, rule_share
from rulesched.engine.vectorisable import vectorisable
from rulesched.engine.vectorise import ColumnEvaluator
from rulesched.lang import BoundRules, RuleSet
from rulesched.lang.evaluation.compile import CompiledRule
from rulesched.lang.evaluation.ruleset import pod_getter
from rulesched.lang.evaluation.timer import FILTER, SCORE
from rulesched.lang.evaluation.watch import CHECK_EVERY
from rulesched.lang.frontend import ast
from rulesched.model import Pod


class Filters(enum.Enum):
    """Which filters :func:`filter_mask` evaluates."""

    ALL = "all"
    STATIC = "static"  # those whose outcome is cached (static_failure's set)
    DYNAMIC = "dynamic"  # those evaluated afresh for every node (dynamic_filters)


@dataclass(frozen=True)
class ColumnBodies:
    """What column evaluation needs: the evaluator, and the body of each bound filter and score
    that it can evaluate (None: node by node only), in the binding's rule order."""

    evaluator: ColumnEvaluator
    filters: tuple[ast.Expr | None, ...]
    scores: tuple[ast.Expr | None, ...]
    # For rules evaluated node by node: the node fields each reads, when it reads the node only
    # through fields (then nodes equal in those fields share one evaluation), else None.
    filter_fields: tuple[tuple[str, ...] | None, ...]
    score_fields: tuple[tuple[str, ...] | None, ...]
    # Each rule's share key (rulesched.engine.sharing), None where not shareable; empty for
    # bindings that are not cached.
    filter_shares: tuple[Shared | None, ...] = ()
    score_shares: tuple[Shared | None, ...] = ()
    # Each filter's reason and unresolvable condition (None: the rule has none), for counting
    # why nodes fail as columns (rulesched.engine.failures), and its body, vectorisable or not
    # (preemption's dry runs check what it reads).
    filter_reasons: tuple[ast.Expr | None, ...] = ()
    filter_unresolvable: tuple[ast.Expr | None, ...] = ()
    filter_bodies: tuple[ast.Expr, ...] = ()
    # Each filter's label keys when it reads the node only through them (columns.node_labels:
    # rules over topology domains), else None: evaluated once per group of nodes alike in them.
    filter_labels: tuple[tuple[str, ...] | None, ...] = ()
    # What the steady scores read of the node, when it is only values a key holds
    # (rulesched.engine.alike: nodes alike in them share score vectors); None otherwise, and
    # for bindings that are not cached.
    score_reads: NodeReads | None = None


Getter = tuple[Callable[[Any], Any], bool]


class ColumnPlan:
    """A rule set's column evaluation: made once per set (:func:`plan_of`), read by every binding."""

    def __init__(self, rules: RuleSet) -> None:
        checked = rules.checked
        notes, lets = checked.notes, checked.lets
        # One plan per rule set, whichever face evaluates it: the unroll is the default settings'.
        self.evaluator = ColumnEvaluator(notes, lets, rules.domain_codes, EngineSettings().column_unroll)
        both = (*rules.filters, *rules.scores)
        self._vectorisable = {id(r): vectorisable(r.checked.rule.body, notes, lets) for r in both}
        self._fields = {id(r): node_fields(r.checked.rule.body, notes, lets) for r in both}
        self._labels = {id(r): node_labels(r.checked.rule.body, notes, lets) for r in rules.filters}
        self._reads = {id(r): node_reads(r.checked.rule.body, notes, lets) for r in rules.scores}
        # Per rule: the pod fields it alone reads, when classes agreeing on them may share its
        # answers (rulesched.engine.sharing); with the getters of those fields.
        self._share_token = object()  # in every key: another set's rule at the same position differs
        self._shares: dict[int, tuple[tuple[str, int], RuleShare, list[Getter]]] = {}
        if rules.class_fields is not None:  # (else no binding is cached, and none shares)
            for kind, compiled in (("filter", rules.filters), ("score", rules.scores)):
                for position, r in enumerate(compiled):
                    share = rule_share(r.checked.rule.body, notes, lets)
                    if share is not None and share.calls and not rules.ranks_devices_alike:
                        share = None  # (devices_after: each pod's allocation ranked its own way)
                    if share is not None:
                        getters = [pod_getter(f) for f in share.pod_fields]
                        getters += [(_entry(pod_getter(f)[0], key), False) for f, key in share.pod_keys]
                        self._shares[id(r)] = ((kind, position), share, getters)

    def _bodies(self, rules: tuple[CompiledRule, ...]) -> tuple[ast.Expr | None, ...]:
        return tuple(r.checked.rule.body if self._vectorisable[id(r)] else None for r in rules)

    def _shared(self, rules: tuple[CompiledRule, ...], pod: Pod) -> tuple[Shared | None, ...]:
        """Each rule's share key for this pod (None: not shareable)."""
        out: list[Shared | None] = []
        for r in rules:
            found = self._shares.get(id(r))
            if found is None:
                out.append(None)
                continue
            rule, share, getters = found
            values = tuple(frozenset(get(pod).items()) if is_map else get(pod) for get, is_map in getters)
            out.append(Shared((self._share_token, rule, values), share.pod_bound))
        return tuple(out)

    def _steady_reads(self, bound: BoundRules) -> NodeReads | None:
        """What the binding's steady scores read of the node, joined (None: more than a key holds)."""
        joined = NodeReads()
        volatile = bound.volatile_indexes
        for i, r in enumerate(bound.compiled[1]):
            if i in volatile:
                continue
            reads = self._reads.get(id(r))
            if reads is None:
                return None
            joined = joined.join(reads)
        return joined

    def bodies(self, bound: BoundRules) -> ColumnBodies:
        """The plan applied to one binding: its rules in its order, its pod's share keys."""
        filter_rules, score_rules = bound.compiled
        first = bound.prechecked  # (evaluated node by node, reading nothing: no column, no share)
        none = (None,) * first
        cache, pod = bound.cached, bound.ctx.pod
        return ColumnBodies(
            self.evaluator,
            (*none, *self._bodies(filter_rules)),
            self._bodies(score_rules),
            (*none, *(self._fields[id(r)] for r in filter_rules)),
            tuple(self._fields[id(r)] for r in score_rules),
            (*none, *self._shared(filter_rules, pod)) if cache else (),
            self._shared(score_rules, pod) if cache else (),
            # A precheck's failure is counted node by node (it is unresolvable everywhere, which
            # no rule's clause says): with prechecks, these stay empty, the per-node fallbacks.
            () if first else tuple(r.checked.rule.reason for r in filter_rules),
            () if first else tuple(r.checked.rule.unresolvable for r in filter_rules),
            () if first else tuple(r.checked.rule.body for r in filter_rules),
            (*none, *(self._labels[id(r)] for r in filter_rules)),
            self._steady_reads(bound) if cache else None,
        )


def _entry(get: Callable[[Any], Any], key: str) -> Callable[[Any], Any]:
    """One entry of a pod's map field (None where it has none), for a share key."""
    return lambda pod: get(pod).get(key)


def plan_of(rules: RuleSet) -> ColumnPlan:
    """The rule set's column plan (made on first use, kept by the set)."""
    return rules.memo(ColumnPlan)


def _bodies_of(bound: BoundRules) -> ColumnBodies | None:
    rules = bound.rule_set
    return plan_of(rules).bodies(bound) if isinstance(rules, RuleSet) else None


def columns_of(bound: BoundRules) -> ColumnBodies | None:
    """The binding's column bodies (made on first use, kept by the binding: a class's binding
    is reused pod after pod, and its share keys are its class's); None for a binding made by
    hand rather than by a rule set, evaluated node by node."""
    return bound.memo(_bodies_of)


class SharedColumns(Protocol):
    """Answers of shared rules, one column per share key over the node list being evaluated,
    kept by the caller (rulesched.engine.shared) in step with the cluster."""

    # Fewer rows to compute than this are computed node by node: a column evaluation's set-up
    # costs more than a few dozen per-node calls.
    columns_from: int

    def column(self, shared: Shared, is_filter: bool) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
        """The key's answers per row and whether each is known (both written by the caller)."""
        ...


def filter_mask(
    bound: BoundRules, cols: NodeColumns, rows: Rows, which: Filters = Filters.ALL, shared: SharedColumns | None = None
) -> npt.NDArray[np.bool_]:
    """Whether the node of each row (of ``cols.nodes``) passes every filter of ``which``.
    Filters that evaluate as columns run first, the rest node by node on the rows still
    passing: which filter fails first does not change whether a node fits, and no filter
    has effects. With ``shared``, shareable filters read (and fill) their key's column."""
    alive = np.ones(len(rows), dtype=bool)
    per_node = []
    bodies = columns_of(bound)
    shares = bodies.filter_shares if shared is not None and bodies is not None else ()
    dynamic = bound.dynamic_indexes
    watch = bound.watch
    for i, f in enumerate(bound.filters):
        if which is not Filters.ALL and (i in dynamic) == (which is Filters.STATIC):
            continue
        live = np.flatnonzero(alive)
        if not len(live):
            return alive
        share = shares[i] if shares else None
        ok: npt.NDArray[Any] | None
        if share is not None:
            assert shared is not None
            ok = _shared(bound, shared, share, cols, rows[live], i, True)
        else:
            ok = _column(bound, cols, rows[live], i, True)
        if ok is None:
            per_node.append(f)
        else:
            alive[live[~ok]] = False
    for f in [f for f in per_node if f.many is not None]:  # (many nodes in one call: the DRA precheck)
        assert f.many is not None
        live = np.flatnonzero(alive)
        watch.rule = f.name
        alive[live[~np.array(watch.each_many(f.many, rows[live].tolist(), cols.nodes), dtype=bool)]] = False
    per_node = [f for f in per_node if f.many is None]
    if per_node:
        nodes, left = cols.nodes, CHECK_EVERY
        for j in np.flatnonzero(alive).tolist():
            left -= 1
            if not left:
                left = watch.tick()
            node = nodes[rows[j]]
            for f in per_node:
                watch.rule = f.name
                if not f.passes(node):
                    alive[j] = False
                    break
    return alive


def filter_rows(
    bound: BoundRules, cols: NodeColumns, rows: Rows, index: int, shared: SharedColumns | None = None
) -> npt.NDArray[np.bool_]:
    """Whether the node of each row passes filter ``index``: from its shared column, as
    columns, or node by node."""
    bodies = columns_of(bound)
    share = bodies.filter_shares[index] if bodies is not None and bodies.filter_shares else None
    if shared is not None and share is not None:
        ok: npt.NDArray[Any] | None = _shared(bound, shared, share, cols, rows, index, True)
    else:
        ok = _column(bound, cols, rows, index, True)
    if ok is None:
        f = bound.filters[index]
        bound.watch.rule = f.name
        if f.many is not None:
            return np.array(bound.watch.each_many(f.many, rows.tolist(), cols.nodes), dtype=bool)
        return np.array(bound.watch.each(f.passes, rows.tolist(), cols.nodes), dtype=bool)
    return ok.astype(bool, copy=False)


def _shared(
    bound: BoundRules,
    shared: SharedColumns,
    share: Shared,
    cols: NodeColumns,
    rows: Rows,
    index: int,
    is_filter: bool,
    per_node: bool = True,
) -> npt.NDArray[Any] | None:
    """A shareable rule's answers on ``rows`` from its key's column, computing (and keeping)
    those not known yet; None when some are not known and could only be computed node by node
    and ``per_node`` is off (the caller computes them with its other rules)."""
    values, known = shared.column(share, is_filter)
    need = rows[~known[rows]]
    if len(need) >= shared.columns_from:
        # A column costs mostly per operation, hardly per row: once a key is used again, fill
        # every row it lacks, not just these. Walks start where the last one stopped, so the
        # next pod of any class with this key then finds its window known, but for the nodes
        # binds changed since (a few, node by node) instead of another column over a fresh
        # window. (A key's first use fills its window only: pods all unlike each other would
        # pay for whole columns nobody reads again.)
        missing = np.flatnonzero(~known)
        if len(need) < len(missing) < len(known):
            got = _column(bound, cols, missing, index, is_filter)
            if got is not None:
                values[missing] = got
                known[missing] = True
                return values[rows]
    if len(need):
        got = _column(bound, cols, need, index, is_filter) if len(need) >= shared.columns_from else None
        if got is None:
            if not per_node:
                return None
            nodes = cols.nodes
            answers = bound.watch.each(_per_node(bound, index, is_filter), need.tolist(), nodes)
            got = np.array([bool(a) for a in answers] if is_filter else answers, dtype=values.dtype)
        values[need] = got
        known[need] = True
    return values[rows]


def _per_node(bound: BoundRules, index: int, is_filter: bool) -> Callable[[Any], Any]:
    """The rule's node function (asked for only when needed: it is made on first use), the
    rule recorded as the one being evaluated."""
    if is_filter:
        f = bound.filters[index]
        bound.watch.rule = f.name
        return f.passes
    s = bound.scores[index]
    bound.watch.rule = s.name
    return s.score


def _column(bound: BoundRules, cols: NodeColumns, rows: Rows, index: int, is_filter: bool) -> npt.NDArray[Any] | None:
    """A filter's outcome or a score's value for each row, as columns or once per group of
    nodes equal in the fields (or, for a filter, the labels) the rule reads; None: evaluate it
    node by node."""
    bodies = columns_of(bound)
    if bodies is None:
        return None
    labels = bodies.filter_labels[index] if is_filter and bodies.filter_labels else None
    if labels is not None:
        found = _by_labels(bound, bodies, cols, rows, index, labels)
        if found is not None:
            return found
    return _evaluate(bound, bodies, cols, rows, index, is_filter)


def _by_labels(
    bound: BoundRules, bodies: ColumnBodies, cols: NodeColumns, rows: Rows, index: int, labels: tuple[str, ...]
) -> npt.NDArray[np.bool_] | None:
    """A filter that reads the node only through these labels, evaluated once per group of
    nodes alike in them (:func:`_group_answers`): a walk's later steps, and a cycle's dynamic
    filters over several windows, only look the answers up. None: too many groups for it to
    pay."""
    groups = cols.label_groups(labels)
    if groups is None:
        return None
    hit = bound.ctx.scratch.get(("by labels", index))
    if hit is None or hit[0] is not groups:
        reps = groups.representatives
        if len(reps) > len(rows) and len(reps) * 4 > len(cols.nodes):
            return None  # (nearly one group per node: no sharing to gain)
        per_group = _group_answers(bound, bodies, cols, index, groups)
    else:
        per_group = hit[1]
    answers: npt.NDArray[np.bool_] = per_group[groups.codes[rows]]
    return answers


# Groups of nodes up to which a label-grouped filter is evaluated node by node on their
# representatives rather than as columns: a rule over a node's zone costs a closure call of a few
# microseconds per zone, where its column evaluation costs a few microseconds per operation
# whatever the rows (~50 us for the zone-spreading rule of benchmarks/domain.rules over 3 zones,
# 5 us node by node; over 50 racks a count's column, 26 us, beats 47 us of closures).
FEW_GROUPS = 8


def _group_answers(
    bound: BoundRules, bodies: ColumnBodies, cols: NodeColumns, index: int, groups: Groups
) -> npt.NDArray[np.bool_]:
    """The filter's outcome on one node of each group (as columns over them, or node by node
    when they are few or the rule cannot be a column), kept in the binding's scratch until the
    cluster changes (the next refresh)."""
    reps = groups.representatives
    per_group = None
    if len(reps) > FEW_GROUPS:
        at = np.asarray(reps, dtype=np.intp)
        per_group = _evaluate(bound, bodies, cols, at, index, True)
    if per_group is None:
        f = bound.filters[index]
        bound.watch.rule = f.name
        per_group = np.array(bound.watch.each(f.passes, reps, cols.nodes), dtype=bool)
    answers = per_group.astype(bool, copy=False)
    bound.ctx.scratch["by labels", index] = (groups, answers)
    return answers


def dynamic_label_mask(bound: BoundRules, cols: NodeColumns) -> npt.NDArray[np.bool_] | None:
    """Every row's outcome (of ``cols.nodes``, in order) under the dynamic filters, when each
    reads the node only through a few labels (columns.node_labels: rules over topology domains)
    and the nodes fall in at most a quarter as many groups as there are nodes: one evaluation
    per group and a lookup per node, cheaper than evaluating them window by window. None when
    they do not."""
    bodies = columns_of(bound)
    dynamic = bound.dynamic_indexes
    if not dynamic or bodies is None or not bodies.filter_labels:
        return None
    found = []
    n = len(cols.nodes)
    for i in sorted(dynamic):
        labels = bodies.filter_labels[i]
        groups = cols.label_groups(labels) if labels is not None else None
        if groups is None or len(groups.representatives) * 4 > n:
            return None
        found.append((i, groups))
    bound.watch.check()
    scratch = bound.ctx.scratch
    mask: npt.NDArray[np.bool_] | None = None
    for i, groups in found:
        hit = scratch.get(("by labels", i))
        per_group = hit[1] if hit is not None and hit[0] is groups else _group_answers(bound, bodies, cols, i, groups)
        passing = int(np.count_nonzero(per_group))  # (one call, not all() and any())
        if passing == 0:
            return np.zeros(n, dtype=bool)
        if passing < len(per_group):
            mask = per_group[groups.codes] if mask is None else mask & per_group[groups.codes]
    return np.ones(n, dtype=bool) if mask is None else mask


def _evaluate(
    bound: BoundRules, bodies: ColumnBodies, cols: NodeColumns, rows: Rows, index: int, is_filter: bool
) -> npt.NDArray[Any] | None:
    """:func:`_column` without the grouping by labels."""
    name = (bound.filters[index] if is_filter else bound.scores[index]).name
    bound.watch.enter(name)
    body = (bodies.filters if is_filter else bodies.scores)[index]
    if body is not None:
        timer = bound.timer
        started = time.perf_counter() if timer is not None else 0.0
        try:
            if is_filter:
                return bodies.evaluator.filter(body, bound.ctx, cols, rows)
            return bodies.evaluator.score(body, bound.ctx, cols, rows)
        except Unsupported:
            pass  # planned: values numpy cannot hold exactly (see fallback's docstring)
        except Exception as error:  # noqa: BLE001 - a column bug must not stop scheduling; node by node is right
            bodies.evaluator.fallbacks.record(name, bound.ctx.pod.key, error)
        finally:
            if timer is not None:
                timer.add(FILTER if is_filter else SCORE, name, time.perf_counter() - started)
    fields = (bodies.filter_fields if is_filter else bodies.score_fields)[index]
    groups = cols.groups(fields) if fields is not None else None
    if groups is None:
        return None
    nodes = cols.nodes
    per_node = _per_node(bound, index, is_filter)
    answers = bound.watch.each(per_node, groups.representatives, nodes)
    per_group = np.array(answers, dtype=bool if is_filter else np.int64)
    return per_group[groups.codes[rows]]


def filter_column(
    bound: BoundRules, cols: NodeColumns, rows: Rows, index: int, shared: SharedColumns | None = None
) -> npt.NDArray[Any] | None:
    """One filter's outcome on the rows, as columns (its key's column when it is shared);
    None: evaluate it node by node. (Explanations: which filter fails first, per node.)"""
    bodies = columns_of(bound)
    shares = bodies.filter_shares if shared is not None and bodies is not None else ()
    share = shares[index] if shares else None
    if share is not None:
        assert shared is not None
        return _shared(bound, shared, share, cols, rows, index, True)
    return _column(bound, cols, rows, index, True)


def dynamic_grouped(bound: BoundRules, cols: NodeColumns) -> bool:
    """Whether every dynamic filter reads the cluster only through built-ins whose answer is
    one per group of nodes alike in a few labels (spreading by zone): evaluated as columns
    they then cost a call per group rather than per node. (Per node, a walk stops as soon as
    enough nodes fit, which is cheaper when every node needs its own call.)"""
    ctx, uses = bound.ctx, bound.filter_uses
    return all(grouped(name, ctx, cols) for i in sorted(bound.dynamic_indexes) for name in uses[i])


def volatile_grouped(bound: BoundRules, cols: NodeColumns) -> bool:
    """:func:`dynamic_grouped` for the volatile scores (spreading's, by zone)."""
    ctx, uses = bound.ctx, bound.score_uses
    return all(grouped(name, ctx, cols) for i in sorted(bound.volatile_indexes) for name in uses[i])


def score_column(bound: BoundRules, cols: NodeColumns, rows: Rows, index: int) -> npt.NDArray[Any] | None:
    """One score's values on the rows, evaluated as columns; None: evaluate it node by node."""
    return _column(bound, cols, rows, index, False)


def score_matrix(
    bound: BoundRules, cols: NodeColumns, rows: Rows, steady: bool = False, shared: SharedColumns | None = None
) -> npt.NDArray[np.int64]:
    """``bound.score_vector`` of each row's node, one row each (``steady_vector`` with
    ``steady``). Raises OverflowError for a score or sum beyond int64. With ``shared``,
    shareable scores read (and fill) their key's column."""
    out = np.zeros((len(rows), len(bound.scores) + 1), dtype=np.int64)
    skip = bound.volatile_indexes if steady else frozenset()
    nodes = cols.nodes
    fixed_bound = 0
    bodies = columns_of(bound)
    shares = bodies.score_shares if shared is not None and bodies is not None else ()
    columns: list[tuple[int, npt.NDArray[Any]]] = []
    by_node: list[int] = []  # scores no column evaluation answers: node by node, all of them per node
    # ... those of them shared: their key's column (values, known), filled from the node-by-node pass
    deferred: dict[int, tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]] = {}
    for i in range(len(bound.scores)):
        if i in skip:
            continue
        share = shares[i] if shares else None
        column: npt.NDArray[Any] | None
        if share is not None:
            assert shared is not None
            column = _shared(bound, shared, share, cols, rows, i, False, per_node=False)
            if column is None:
                deferred[i] = shared.column(share, False)
        else:
            column = _column(bound, cols, rows, i, False)
        if column is None:
            by_node.append(i)
        else:
            columns.append((i, column))
    if by_node:
        todo = rows
        if len(deferred) == len(by_node):  # (all shared: the rows any of them lacks)
            lacking = np.zeros(len(rows), dtype=bool)
            for _, known in deferred.values():
                lacking |= ~known[rows]
            todo = rows[lacking]
        matrix = _by_node(bound, nodes, todo, by_node)
        for k, i in enumerate(by_node):
            got = deferred.get(i)
            if got is None:
                columns.append((i, matrix[:, k]))
            else:
                values, known = got
                values[todo] = matrix[:, k]
                known[todo] = True
                columns.append((i, values[rows]))
    for i, column in sorted(columns, key=lambda c: c[0]):
        s = bound.scores[i]
        out[:, i] = column
        if s.normalize == "none" and len(column):
            fixed_bound += s.weight * max(int(column.max()), -int(column.min()))
            if fixed_bound >= 2**63:
                raise OverflowError("the sum of unnormalised scores does not fit in int64")
            out[:, -1] += s.weight * column
    return out


def _by_node(bound: BoundRules, nodes: Any, rows: Rows, indexes: list[int]) -> npt.NDArray[np.int64]:
    """Scores ``indexes`` on each row's node, one row each. One node's rules one after the
    other, as BoundRules.score_vector runs them: the lets they share are computed once per (pod,
    node) (kept in the pod's context, one node at a time), where a rule over every row, then the
    next, computed them again for each rule."""
    watch = bound.watch
    if len(indexes) == 1:
        s = bound.scores[indexes[0]]
        watch.rule = s.name
        return np.array(watch.each(s.score, rows.tolist(), nodes), dtype=np.int64).reshape(len(rows), 1)
    named = [(bound.scores[i].name, bound.scores[i].score) for i in indexes]

    def row(node: Any) -> list[int]:
        values = []
        for name, score in named:
            watch.rule = name
            values.append(score(node))
        return values

    return np.array(watch.each(row, rows.tolist(), nodes), dtype=np.int64).reshape(len(rows), len(indexes))
