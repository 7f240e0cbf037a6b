"""Rules bound to one pod: filters, scores and preemption predicates as functions of a node.

:meth:`rulesched.lang.evaluation.ruleset.Session.bind` makes these; the scheduler calls them per
node. Guards were evaluated at bind time and pod-only parts are evaluated once, when a rule's
function is first made (kube-scheduler's PreFilter), so a filter is a plain ``node -> bool``. A :class:`BoundRules` belongs to one session (one thread):
its context and caches change from pod to pod of its class, never concurrently.

A binding shared by a class of equivalent pods (``cached``) keeps each node's filter outcome
and raw scores, stamped with the node info (and its generation) and with the version tokens of
the cluster-wide built-ins the rules call; a stamp that no longer matches means the entry is
recomputed. The caches hold one entry per node name, so they never outgrow the cluster, and go
with the binding when its session forgets the class. Evaluations report which rule they are in
to the session's ``watch``, which may stop them (:mod:`rulesched.lang.evaluation.watch`).
Next stage: the scheduler's cycle (rulesched.scheduler.cycle) walks nodes with these.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from rulesched.lang.builtins import BUILTINS
from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.evaluation.arrays import Unsupported
from rulesched.lang.evaluation.columns import NodeColumns, Rows
from rulesched.lang.evaluation.domain_values import DomainValues
from rulesched.lang.evaluation.sharing import Shared
from rulesched.lang.evaluation.timing import FILTER, SCORE, RuleTimer
from rulesched.lang.evaluation.vectorise import ColumnEvaluator, grouped
from rulesched.lang.evaluation.watch import CHECK_EVERY, RuleWatch
from rulesched.lang.frontend import ast
from rulesched.model import Pod


def never(node: Any) -> bool:
    """The unresolvable condition of a filter that has none."""
    return False


# A bound rule's node functions are made on first use (``make(attribute)``): a pod unlike any
# before it is mostly evaluated as columns, so most of its functions would never be called, and
# each made is a dozen closure objects that the garbage collector walks for as long as the
# class lives (on the `distinct` benchmark, 2 241 of 48 000 were ever called).
Make = Callable[[str], Callable[..., Any]]


class _Lazy:
    __slots__ = ()

    def __getattr__(self, attr: str) -> Any:  # called only while the slot is still empty
        make: Make | None = object.__getattribute__(self, "_make")
        if make is None or attr not in type(self)._made:  # type: ignore[attr-defined]
            raise AttributeError(attr)
        fn = make(attr)
        setattr(self, attr, fn)
        return fn


class BoundFilter(_Lazy):
    """A filter bound to one pod: ``passes(node)``, and for a node that fails, ``reasons(node)``
    and ``unresolvable(node)`` — whether preemption cannot fix it (kube-scheduler's
    UnschedulableAndUnresolvable rather than Unschedulable), asked only of failing nodes and
    only by those who need it (preemption, the extender, explain), never on the walk."""

    __slots__ = ("name", "_make", "passes", "reasons", "unresolvable")
    _made = frozenset({"passes", "reasons", "unresolvable"})
    passes: Callable[[Any], bool]
    reasons: Callable[[Any], tuple[str, ...]]
    unresolvable: Callable[[Any], bool]

    def __init__(
        self,
        name: str,
        passes: Callable[[Any], bool] | None = None,
        reasons: Callable[[Any], tuple[str, ...]] | None = None,
        unresolvable: Callable[[Any], bool] | None = None,
        make: Make | None = None,
    ) -> None:
        self.name, self._make = name, make
        if passes is not None:
            self.passes = passes
        if reasons is not None:
            self.reasons = reasons
        if unresolvable is not None or make is None:
            self.unresolvable = unresolvable or never

    def __repr__(self) -> str:
        return f"BoundFilter({self.name!r})"


class BoundScore(_Lazy):
    """A score bound to one pod: ``score(node)``, with the rule's weight and normalisation."""

    __slots__ = ("name", "weight", "normalize", "_make", "score")
    _made = frozenset({"score"})
    score: Callable[[Any], int]

    def __init__(
        self,
        name: str,
        weight: int,
        normalize: str,
        score: Callable[[Any], int] | None = None,
        make: Make | None = None,
    ) -> None:
        self.name, self.weight, self.normalize, self._make = name, weight, normalize, make
        if score is not None:
            self.score = score

    def __repr__(self) -> str:
        return f"BoundScore({self.name!r}, weight={self.weight})"


@dataclass(frozen=True)
class BoundPreempt:
    name: str
    allows: Callable[[Any, Pod], bool]  # (node, victim) -> may the victim be evicted?
    order: Callable[[Any], Any] | None  # node -> sort key, lowest preferred
    # The body reads the victim only as victim.priority and not the node: one answer per
    # priority (preemption asks once per priority, not once per running pod).
    by_priority: bool = False


Failure = tuple[BoundFilter, tuple[str, ...]]


class Filters(enum.Enum):
    """Which filters :meth:`BoundRules.filter_mask` evaluates."""

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
    # Each rule's share key (rulesched.lang.evaluation.sharing), None where not shareable; empty
    # for bindings that are not cached.
    filter_shares: tuple[Shared | None, ...] = ()
    score_shares: tuple[Shared | None, ...] = ()
    # Each filter's reason and unresolvable condition (None: the rule has none), for counting
    # why nodes fail as columns (rulesched.lang.evaluation.failures), and its body, vectorisable
    # or not (preemption's dry runs check what it reads).
    filter_reasons: tuple[ast.Expr | None, ...] = ()
    filter_unresolvable: tuple[ast.Expr | None, ...] = ()
    filter_bodies: tuple[ast.Expr, ...] = ()
    # Each filter's label keys when it reads the node only through them (columns.node_labels:
    # rules over topology domains), else None: evaluated once per group of nodes alike in them.
    filter_labels: tuple[tuple[str, ...] | None, ...] = ()


class SharedColumns(Protocol):
    """Answers of shared rules, one column per share key over the node list being evaluated,
    kept by the caller (rulesched.scheduler.shared) in step with the cluster."""

    # Fewer rows to compute than this are computed node by node: a column evaluation's set-up
    # costs more than a few dozen per-node calls.
    columns_from: int

    def column(self, shared: Shared, is_filter: bool) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
        """The key's answers per row and whether each is known (both written by the caller)."""
        ...


class BoundRules:
    """The rules that apply to one pod (guards already decided), as functions of a node.

    :meth:`first_failure` and :meth:`score_vector` are what the scheduler calls per node; with
    ``cached`` they keep their answers per node (see the module docstring).
    :meth:`filter_mask` and :meth:`score_matrix` give the same answers for many nodes at once,
    evaluated as columns (:mod:`rulesched.lang.evaluation.vectorise`) where the rule allows. Call
    :meth:`refresh` after the cluster changed within a cycle.
    """

    def __init__(
        self,
        ctx: EvalContext,
        filters: tuple[BoundFilter, ...],
        scores: tuple[BoundScore, ...],
        preempts: tuple[BoundPreempt, ...],
        uses: tuple[tuple[frozenset[str], ...], ...] = ((), ()),
        cached: bool = False,
        columns: ColumnBodies | None = None,
        watch: RuleWatch | None = None,
        domain_values: DomainValues | None = None,
    ) -> None:
        self.ctx = ctx
        self._domain_values = domain_values
        self.watch = watch if watch is not None else RuleWatch()
        self.columns = columns
        self.filters = filters
        self.scores = scores
        self.preempts = preempts
        self.cached = cached
        # The cluster-wide built-ins each filter and each score calls; which of them move with
        # (nearly) every change is decided again at each refresh.
        self._filter_uses, self._score_uses = uses
        self._names = sorted({n for names in (*self._filter_uses, *self._score_uses) for n in names})
        self._moving: frozenset[str] | None = None
        self._versions: tuple[Callable[[EvalContext], object], ...] = ()  # of the steady built-ins
        self._volatile: frozenset[int] = frozenset()  # indexes of scores never cached
        self._dynamic: tuple[int, ...] = ()  # indexes of filters evaluated afresh each time, in order
        self._dynamic_set: frozenset[int] = frozenset()
        # node name -> (node info, its generation, token, answer): one entry per node
        self._outcomes: dict[str, tuple[Any, int, object, tuple[int, Failure] | None]] = {}
        self._vectors: dict[str, tuple[Any, int, object, tuple[int, ...]]] = {}
        self._token: object = ()
        self.timer: RuleTimer | None = None  # set while a sampled cycle times the rules (timing.timed)
        self.refresh()

    def rebind(self, pod: Pod, cluster: ClusterView | None) -> None:
        """Use this binding for another pod of its class, in (a newer view of) the cluster."""
        ctx = self.ctx
        ctx.pod, ctx.cluster, ctx.feasible = pod, cluster, None
        self.refresh()

    def release(self) -> None:
        """Let go of the cluster view and what was computed from it (the caller is done with
        this pod): a snapshot nobody holds lets its store change in place again."""
        ctx = self.ctx
        ctx.cluster, ctx.feasible = None, None
        ctx.scratch.clear()

    def refresh(self) -> None:
        """Start afresh after a cluster change: per-pod precomputation and version stamps."""
        ctx = self.ctx
        ctx.scratch.clear()
        if self._names:
            moving = frozenset(n for n in self._names if _moves(n, ctx))
            if moving != self._moving:
                self._split(moving)
            # The moving set is part of the stamp: cached outcomes leave the dynamic filters out.
            # Stamps are compared by identity (per node, per pod), so an equal one is kept.
            token = (tuple(v(ctx) for v in self._versions), moving)
            if token != self._token:
                self._token = token

    def _split(self, moving: frozenset[str]) -> None:
        self._moving = moving
        self._dynamic = tuple(i for i, names in enumerate(self._filter_uses) if names & moving)
        self._dynamic_set = frozenset(self._dynamic)
        self._volatile = frozenset(i for i, names in enumerate(self._score_uses) if names & moving)
        steady = [n for n in self._names if n not in moving]
        self._versions = tuple(v for v in (BUILTINS[n].version for n in steady) if v is not None)

    def domain_values(self, name: str, node: Any) -> tuple[str, ...]:
        """The values on ``node`` of the domain and cluster aggregates filter ``name`` reads,
        as ``app_here = 3 in zone=a`` (explanations; empty for a filter that reads none)."""
        if self._domain_values is None:
            return ()
        return tuple(v.text() for v in self._domain_values.values(name, self.ctx, node))

    # --- for batch evaluation (rulesched.scheduler.table): the cached part and the rest --------
    @property
    def token(self) -> object:
        """The stamp answers of :meth:`static_failure` and :meth:`steady_vector` stay valid under
        while a node is unchanged; a new object after a refresh that changed anything."""
        return self._token

    def static_failure(self, node: Any) -> Failure | None:
        """The first failure among the filters that are not dynamic (uncached)."""
        found = self._static_failure(node)
        return None if found is None else found[1]

    @property
    def dynamic_filters(self) -> tuple[BoundFilter, ...]:
        """Filters evaluated afresh for every node, in rule order."""
        return tuple(self.filters[i] for i in self._dynamic)

    def steady_vector(self, node: Any) -> tuple[int, ...]:
        """:meth:`score_vector` with the volatile scores left at 0 (and out of the fixed sum)."""
        return self._vector(node, self._volatile)

    @property
    def volatile_scores(self) -> tuple[tuple[int, BoundScore], ...]:
        return tuple((i, self.scores[i]) for i in sorted(self._volatile))

    def _first_failure(self, node: Any) -> Failure | None:
        watch = self.watch
        for f in self.filters:
            watch.rule = f.name
            if not f.passes(node):
                return f, f.reasons(node)
        return None

    def _static_failure(self, node: Any) -> tuple[int, Failure] | None:
        """The first failing filter among those whose answers are cached, with its index."""
        dynamic, watch = self._dynamic_set, self.watch
        for i, f in enumerate(self.filters):
            if i not in dynamic:
                watch.rule = f.name
                if not f.passes(node):
                    return i, (f, f.reasons(node))
        return None

    def _with_dynamic(self, node: Any, static: tuple[int, Failure] | None) -> Failure | None:
        """Merge the cached outcome with the filters evaluated afresh, keeping rule order."""
        limit = static[0] if static is not None else len(self.filters)
        for i in self._dynamic:
            if i >= limit:
                break
            f = self.filters[i]
            self.watch.rule = f.name
            if not f.passes(node):
                return f, f.reasons(node)
        return static[1] if static is not None else None

    def _cached_static(self, node: Any) -> tuple[int, Failure] | None:
        hit = self._outcomes.get(node.name)
        if hit is not None and hit[0] is node and hit[1] == node.generation and hit[2] is self._token:
            return hit[3]
        static = self._static_failure(node)
        self._outcomes[node.name] = (node, node.generation, self._token, static)
        return static

    def _cached_outcome(self, node: Any) -> Failure | None:
        static = self._cached_static(node)
        if not self._dynamic:
            return static[1] if static is not None else None
        return self._with_dynamic(node, static)

    def first_failure(self, node: Any) -> Failure | None:
        """The first filter (in rule order) the node fails, with its reasons; None if it fits."""
        if not self.cached:
            return self._first_failure(node)
        return self._cached_outcome(node)

    def feasible(
        self,
        nodes: Sequence[Any],
        start: int,
        wanted: int,
        failed: Callable[[Any, Failure], None] | None = None,
    ) -> tuple[list[Any], int]:
        """Walk ``nodes`` round-robin from ``start`` until ``wanted`` fit; report each node that
        does not to ``failed``, with its failure (if given: reasons cost work a scheduled pod
        does not need).
        Returns the feasible nodes and how many nodes were looked at. (The loop of
        :meth:`first_failure`, inlined: it runs for hundreds of nodes per pod.)"""
        found: list[Any] = []
        append = found.append
        token, outcomes = self._token, self._outcomes
        evaluate = self._first_failure if not self.cached else self._cached_outcome if self._dynamic else None
        static_failure = self._static_failure
        looked, tick, left = 0, self.watch.tick, CHECK_EVERY
        for node in itertools.chain(nodes[start:], nodes[:start]):
            looked += 1
            left -= 1
            if not left:
                left = tick()
            if evaluate is None:  # the common case, inlined: one cache lookup per node
                name, generation = node.name, node.generation
                hit = outcomes.get(name)
                if hit is not None and hit[0] is node and hit[1] == generation and hit[2] is token:
                    static = hit[3]
                else:
                    static = static_failure(node)
                    outcomes[name] = (node, generation, token, static)
                if static is None:
                    append(node)
                    if len(found) >= wanted:
                        break
                elif failed is not None:
                    failed(node, static[1])
                continue
            outcome = evaluate(node)
            if outcome is None:
                append(node)
                if len(found) >= wanted:
                    break
            elif failed is not None:
                failed(node, outcome)
        return found, looked

    # --- many nodes at once (rulesched.lang.evaluation.columns) ----------------------------
    def filter_mask(
        self, cols: NodeColumns, rows: Rows, which: Filters = Filters.ALL, shared: SharedColumns | None = None
    ) -> npt.NDArray[np.bool_]:
        """Whether the node of each row (of ``cols.nodes``) passes every filter of ``which``.
        Filters that evaluate as columns run first, the rest node by node on the rows still
        passing: which filter fails first does not change whether a node fits, and no filter
        has effects. With ``shared``, shareable filters read (and fill) their key's column."""
        alive = np.ones(len(rows), dtype=bool)
        per_node = []
        shares = self.columns.filter_shares if shared is not None and self.columns is not None else ()
        watch = self.watch
        for i, f in enumerate(self.filters):
            if which is not Filters.ALL and (i in self._dynamic_set) == (which is Filters.STATIC):
                continue
            live = np.flatnonzero(alive)
            if not len(live):
                return alive
            share = shares[i] if shares else None
            ok: npt.NDArray[Any] | None
            if share is not None:
                assert shared is not None
                ok = self._shared(shared, share, cols, rows[live], i, True)
            else:
                ok = self._column(cols, rows[live], i, True)
            if ok is None:
                per_node.append(f)
            else:
                alive[live[~ok]] = False
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
        self, cols: NodeColumns, rows: Rows, index: int, shared: SharedColumns | None = None
    ) -> npt.NDArray[np.bool_]:
        """Whether the node of each row passes filter ``index``: from its shared column, as
        columns, or node by node."""
        bodies = self.columns
        share = bodies.filter_shares[index] if bodies is not None and bodies.filter_shares else None
        if shared is not None and share is not None:
            ok: npt.NDArray[Any] | None = self._shared(shared, share, cols, rows, index, True)
        else:
            ok = self._column(cols, rows, index, True)
        if ok is None:
            f = self.filters[index]
            self.watch.rule = f.name
            return np.array(self.watch.each(f.passes, rows.tolist(), cols.nodes), dtype=bool)
        return ok.astype(bool, copy=False)

    def _shared(
        self,
        shared: SharedColumns,
        share: Shared,
        cols: NodeColumns,
        rows: Rows,
        index: int,
        is_filter: bool,
    ) -> npt.NDArray[Any]:
        """A shareable rule's answers on ``rows`` from its key's column, computing (and keeping)
        those not known yet."""
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
                got = self._column(cols, missing, index, is_filter)
                if got is not None:
                    values[missing] = got
                    known[missing] = True
                    return values[rows]
        if len(need):
            got = self._column(cols, need, index, is_filter) if len(need) >= shared.columns_from else None
            if got is None:
                nodes = cols.nodes
                per_node = self._per_node(index, is_filter)
                answers = self.watch.each(per_node, need.tolist(), nodes)
                got = np.array([bool(a) for a in answers] if is_filter else answers, dtype=values.dtype)
            values[need] = got
            known[need] = True
        return values[rows]

    def _per_node(self, index: int, is_filter: bool) -> Callable[[Any], Any]:
        """The rule's node function (asked for only when needed: it is made on first use), the
        rule recorded as the one being evaluated."""
        rule = self.filters[index] if is_filter else self.scores[index]
        self.watch.rule = rule.name
        return rule.passes if is_filter else rule.score

    def _column(self, cols: NodeColumns, rows: Rows, index: int, is_filter: bool) -> npt.NDArray[Any] | None:
        """A filter's outcome or a score's value for each row, as columns or once per group of
        nodes equal in the fields the rule reads; None: evaluate it node by node."""
        bodies = self.columns
        if bodies is None:
            return None
        labels = bodies.filter_labels[index] if is_filter and bodies.filter_labels else None
        if labels is not None:
            found = self._by_labels(cols, rows, index, labels)
            if found is not None:
                return found
        return self._evaluate(cols, rows, index, is_filter)

    def _by_labels(
        self, cols: NodeColumns, rows: Rows, index: int, labels: tuple[str, ...]
    ) -> npt.NDArray[np.bool_] | None:
        """A filter that reads the node only through these labels, evaluated once per group of
        nodes alike in them (as columns over the groups' representatives, or node by node) and
        kept in the binding's scratch until the cluster changes (the next refresh): a walk's
        later steps, and a cycle's dynamic filters over several windows, only look the answers
        up. None: too many groups for it to pay."""
        groups = cols.label_groups(labels)
        if groups is None:
            return None
        scratch = self.ctx.scratch
        hit = scratch.get(("by labels", index))
        if hit is None or hit[0] is not groups:
            reps = groups.representatives
            if len(reps) > len(rows) and len(reps) * 4 > len(cols.nodes):
                return None  # (nearly one group per node: no sharing to gain)
            at = np.asarray(reps, dtype=np.intp)
            per_group = self._evaluate(cols, at, index, True)
            if per_group is None:
                self.watch.rule = self.filters[index].name
                per_group = np.array(self.watch.each(self.filters[index].passes, reps, cols.nodes), dtype=bool)
            hit = scratch["by labels", index] = (groups, per_group.astype(bool, copy=False))
        answers: npt.NDArray[np.bool_] = hit[1][groups.codes[rows]]
        return answers

    def _evaluate(self, cols: NodeColumns, rows: Rows, index: int, is_filter: bool) -> npt.NDArray[Any] | None:
        """:meth:`_column` without the grouping by labels."""
        bodies = self.columns
        assert bodies is not None
        self.watch.enter((self.filters if is_filter else self.scores)[index].name)
        body = (bodies.filters if is_filter else bodies.scores)[index]
        if body is not None:
            timer = self.timer
            started = time.perf_counter() if timer is not None else 0.0
            try:
                if is_filter:
                    return bodies.evaluator.filter(body, self.ctx, cols, rows)
                return bodies.evaluator.score(body, self.ctx, cols, rows)
            except Unsupported:
                pass  # planned: values numpy cannot hold exactly (see fallback's docstring)
            except Exception as error:  # noqa: BLE001 - a column bug must not stop scheduling; node by node is right
                rule = (self.filters if is_filter else self.scores)[index].name
                bodies.evaluator.fallbacks.record(rule, self.ctx.pod.key, error)
            finally:
                if timer is not None:
                    rule = (self.filters if is_filter else self.scores)[index].name
                    timer.add(FILTER if is_filter else SCORE, rule, time.perf_counter() - started)
        fields = (bodies.filter_fields if is_filter else bodies.score_fields)[index]
        groups = cols.groups(fields) if fields is not None else None
        if groups is None:
            return None
        nodes = cols.nodes
        per_node = self._per_node(index, is_filter)
        answers = self.watch.each(per_node, groups.representatives, nodes)
        per_group = np.array(answers, dtype=bool if is_filter else np.int64)
        return per_group[groups.codes[rows]]

    def filter_column(
        self, cols: NodeColumns, rows: Rows, index: int, shared: SharedColumns | None = None
    ) -> npt.NDArray[Any] | None:
        """One filter's outcome on the rows, as columns (its key's column when it is shared);
        None: evaluate it node by node. (Explanations: which filter fails first, per node.)"""
        shares = self.columns.filter_shares if shared is not None and self.columns is not None else ()
        share = shares[index] if shares else None
        if share is not None:
            assert shared is not None
            return self._shared(shared, share, cols, rows, index, True)
        return self._column(cols, rows, index, True)

    def dynamic_grouped(self, cols: NodeColumns) -> bool:
        """Whether every dynamic filter reads the cluster only through built-ins whose answer is
        one per group of nodes alike in a few labels (spreading by zone): evaluated as columns
        they then cost a call per group rather than per node. (Per node, a walk stops as soon as
        enough nodes fit, which is cheaper when every node needs its own call.)"""
        ctx = self.ctx
        return all(grouped(name, ctx, cols) for i in self._dynamic for name in self._filter_uses[i])

    def dynamic_by_labels(self, cols: NodeColumns) -> bool:
        """Whether every dynamic filter reads the node only through a few labels
        (columns.node_labels: rules over topology domains), nodes falling in at most a quarter
        as many groups as there are nodes: then their outcome on every node costs one evaluation
        per group and a lookup per node, cheaper than evaluating them window by window."""
        bodies = self.columns
        if not self._dynamic or bodies is None or not bodies.filter_labels:
            return False
        for i in self._dynamic:
            labels = bodies.filter_labels[i]
            groups = cols.label_groups(labels) if labels is not None else None
            if groups is None or len(groups.representatives) * 4 > len(cols.nodes):
                return False
        return True

    def volatile_grouped(self, cols: NodeColumns) -> bool:
        """:meth:`dynamic_grouped` for the volatile scores (spreading's, by zone)."""
        ctx = self.ctx
        return all(grouped(name, ctx, cols) for i in self._volatile for name in self._score_uses[i])

    def score_column(self, cols: NodeColumns, rows: Rows, index: int) -> npt.NDArray[Any] | None:
        """One score's values on the rows, evaluated as columns; None: evaluate it node by node."""
        return self._column(cols, rows, index, False)

    def score_matrix(
        self, cols: NodeColumns, rows: Rows, steady: bool = False, shared: SharedColumns | None = None
    ) -> npt.NDArray[np.int64]:
        """:meth:`score_vector` of each row's node, one row each (:meth:`steady_vector` with
        ``steady``). Raises OverflowError for a score or sum beyond int64. With ``shared``,
        shareable scores read (and fill) their key's column."""
        out = np.zeros((len(rows), len(self.scores) + 1), dtype=np.int64)
        skip = self._volatile if steady else frozenset()
        nodes = cols.nodes
        fixed_bound = 0
        shares = self.columns.score_shares if shared is not None and self.columns is not None else ()
        watch = self.watch
        for i, s in enumerate(self.scores):
            if i in skip:
                continue
            share = shares[i] if shares else None
            column: npt.NDArray[Any] | None
            if share is not None:
                assert shared is not None
                column = self._shared(shared, share, cols, rows, i, False)
            else:
                column = self._column(cols, rows, i, False)
            if column is None:
                watch.rule = s.name
                column = np.array(watch.each(s.score, rows.tolist(), nodes), dtype=np.int64)
            out[:, i] = column
            if s.normalize == "none" and len(column):
                fixed_bound += s.weight * max(int(column.max()), -int(column.min()))
                if fixed_bound >= 2**63:
                    raise OverflowError("the sum of unnormalised scores does not fit in int64")
                out[:, -1] += s.weight * column
        return out

    def score_vectors(self, nodes: Sequence[Any]) -> list[tuple[int, ...]]:
        """:meth:`score_vector` for many nodes, with the cache lookup inlined."""
        if not self.cached or self._volatile:
            return self.watch.each(self.score_vector, nodes)
        token, cache, compute = self._token, self._vectors, self._vector
        out = []
        tick, left = self.watch.tick, CHECK_EVERY
        for node in nodes:
            left -= 1
            if not left:
                left = tick()
            name, generation = node.name, node.generation
            hit = cache.get(name)
            if hit is not None and hit[0] is node and hit[1] == generation and hit[2] is token:
                out.append(hit[3])
            else:
                vector = compute(node, ())
                cache[name] = (node, generation, token, vector)
                out.append(vector)
        return out

    def score_vector(self, node: Any) -> tuple[int, ...]:
        """Every score rule's raw value for the node, in rule order, then one more element: the
        weighted sum of the rules that are not normalised (their share of the total is final)."""
        if not self.cached:
            return self._vector(node, ())
        hit = self._vectors.get(node.name)
        if hit is not None and hit[0] is node and hit[1] == node.generation and hit[2] is self._token:
            vector: tuple[int, ...] = hit[3]
        else:
            vector = self._vector(node, self._volatile)
            self._vectors[node.name] = (node, node.generation, self._token, vector)
        if self._volatile:
            vector = self._vector(node, (), vector)
        return vector

    def _vector(self, node: Any, skip: Collection[int], known: tuple[int, ...] = ()) -> tuple[int, ...]:
        """Raw scores (0 for ``skip``, reused from ``known`` unless volatile) and the fixed sum."""
        values = [
            0 if i in skip else known[i] if known and i not in self._volatile else s.score(node)
            for i, s in enumerate(self.scores)
        ]
        fixed = sum(s.weight * v for s, v in zip(self.scores, values, strict=True) if s.normalize == "none")
        return (*values, fixed)


def _moves(name: str, ctx: EvalContext) -> bool:
    """Whether, for this pod now, the built-in's answers move with (nearly) every cluster change."""
    builtin = BUILTINS[name]
    return builtin.version is None or (builtin.moves is not None and bool(builtin.moves(ctx)))
