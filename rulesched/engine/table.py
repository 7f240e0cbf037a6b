"""Filtering and scoring for one class of equivalent pods, kept as arrays over the cluster's nodes.

A cycle walks hundreds of nodes round-robin. For pods of one equivalence class (a ReplicaSet's,
say) every node's outcome of the cached filters and its steady scores do not change until the
node does, or until a cluster-wide answer the rules read moves (the binding's ``token``). So a
:class:`NodeTable` keeps them in arrays, one row per node in the cluster's order, marks rows stale
from the cluster's pod journal (a bind changes one node) and recomputes stale rows only when a
walk reaches them. A walk is then a few array operations per pod rather than Python work per
node; filters evaluated afresh for every node (spreading, the pod's own affinity) still run per
node, on the rows the cached filters let through. Answers and their order are those of
:meth:`rulesched.lang.BoundRules.feasible` and ``score_vector``.

Many stale rows at once (the first walk of a new class, every row after a node change) are
evaluated as columns over those rows (``engine.filter_mask`` / ``score_matrix``) from a
:class:`ColumnStore` every table shares: node values as arrays, kept in step with the same
journal.
Next stage: :mod:`rulesched.scheduler.cycle` normalises the columns and picks the host.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Snapshot
from rulesched.engine.alike import DeviceKeys, keyer
from rulesched.engine.batch import (
    Filters,
    columns_of,
    dynamic_grouped,
    dynamic_label_mask,
    filter_column,
    filter_mask,
    score_column,
    score_matrix,
    volatile_grouped,
)
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.engine.failures import FailedRows, GroupReasons, first_failures, group_reasons
from rulesched.engine.kept_failures import KeptFailures
from rulesched.engine.score_rows import ScoreRows, SharedScores
from rulesched.engine.settings import EngineSettings
from rulesched.engine.shared import Lookups, RowLog, RuleColumns
from rulesched.lang import BoundFilter, BoundRules
from rulesched.lang.evaluation.watch import CHECK_EVERY

FEW_CHANGES = 8  # pod changes a table reads from the journal itself; more: from the shared row log


class TableOverflow(Exception):
    """A score does not fit in int64 (kube-scheduler's score type): use the per-node path."""


class ColumnStore:
    """The cluster's nodes as columns (:class:`rulesched.engine.columns.NodeColumns`),
    kept in step with the snapshots a scheduler reads: rows re-read where the pod journal says
    nodes changed, everything rebuilt after a node change."""

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self._settings = settings = settings if settings is not None else EngineSettings()
        self._columns: NodeColumns | None = None
        self._history: object = None
        self._generation = -1
        self._position = -1
        self._rows_key: tuple[object, int] | None = None
        self._rows_by_name: dict[str, int] = {}
        self._numbers_key: tuple[object, int] | None = None
        self._numbers: Rows = np.arange(0, dtype=np.intp)
        self._log = RowLog(settings.log_limit)
        self._shared = RuleColumns(self._log, settings)
        self._scores = SharedScores(self._log, settings.max_tables)
        self.device_keys = DeviceKeys()  # (every table's alike keys number devices alike)

    def rows_by_name(self, snapshot: Snapshot) -> dict[str, int]:
        """Node name -> row in ``snapshot.nodes``: one dict for every table of this node list."""
        key = (snapshot.history, snapshot.node_generation)
        if key != self._rows_key:
            self._rows_by_name = {node.name: i for i, node in enumerate(snapshot.nodes)}
            self._rows_key = key
        return self._rows_by_name

    def row_numbers(self, snapshot: Snapshot) -> Rows:
        """0 .. len(snapshot.nodes) - 1, one array for every table of this node list (read only)."""
        key = (snapshot.history, snapshot.node_generation)
        if key != self._numbers_key:
            self._numbers = np.arange(len(snapshot.nodes), dtype=np.intp)
            self._numbers.flags.writeable = False
            self._numbers_key = key
        return self._numbers

    def changed_rows(self, snapshot: Snapshot, since: int) -> Rows | None:
        """Rows whose node gained or lost pods since journal position ``since`` (repeats
        possible); None when not known: treat every row as changed."""
        return self._log.changed(snapshot, self.rows_by_name(snapshot), since)

    def shared(self, snapshot: Snapshot, columns_from: int) -> Lookups:
        """Shareable rules' answers, for lookups against ``snapshot`` (fewer than
        ``columns_from`` missing rows are computed node by node)."""
        return self._shared.use(snapshot, self.rows_by_name(snapshot), columns_from)

    def score_rows(self, key: Hashable, width: int, snapshot: Snapshot) -> ScoreRows:
        """The score vectors every class whose scores have share keys ``key`` keeps
        (:mod:`rulesched.engine.score_rows`), brought up to ``snapshot``."""
        return self._scores.rows(key, width, snapshot, self.rows_by_name(snapshot))

    def current(self, snapshot: Snapshot) -> NodeColumns:
        columns = self._columns
        if (
            columns is None
            or snapshot.history is not self._history
            or snapshot.node_generation != self._generation
            or snapshot.pod_position < self._position
        ):
            columns = self._columns = NodeColumns(snapshot.nodes, self._settings)
            self._history, self._generation = snapshot.history, snapshot.node_generation
        elif snapshot.pod_position != self._position:
            changed = self.changed_rows(snapshot, self._position)
            if changed is None:
                columns.clear()
                columns.nodes = snapshot.nodes
            else:
                # (a bind or two since: set and sort cost less than numpy's unique)
                rows = sorted(set(changed.tolist())) if len(changed) <= 64 else np.unique(changed).tolist()
                columns.update(rows, snapshot.nodes, pods_only=True)
        self._position = snapshot.pod_position
        return columns


class NodeTable:
    def __init__(
        self,
        bound: BoundRules,
        store: ColumnStore | None = None,
        columns_from: int = 0,
        chunk: int = 0,
        ratio: float = 2.0,
    ) -> None:
        self.bound = bound
        self._store = store
        self._columns_from = columns_from if store is not None else 0
        # Nodes looked at per feasible node found, last time: sizes the next chunk (a new table
        # starts from the caller's guess: the last walk of any class, in a cluster filling up).
        self.ratio = ratio
        self._chunk = chunk or 2**62  # the most nodes one step of a walk takes
        self._ahead_ratio = 1.0  # rows checked per feasible node found, when dynamic outcomes are known ahead
        self._history: object = None
        self._snapshot: Snapshot | None = None
        # Its score vectors' key when classes share them (every score a shared rule), else None.
        self._score_key = _score_key(bound) if store is not None else None
        # A node's key by what the steady scores read of it, when that is all they read
        # (rulesched.engine.alike: rows of nodes alike share vectors), else None.
        self._alike = _alike_keyer(bound, store) if store is not None else None

    def _reset(self, snapshot: Snapshot) -> None:
        bound = self.bound
        self._nodes: Sequence[NodeInfo] = snapshot.nodes
        n = len(self._nodes)
        if self._store is not None:
            self._row = self._store.rows_by_name(snapshot)
        else:
            self._row = {node.name: i for i, node in enumerate(self._nodes)}
        # (one arange for every table of this node list: 8 bytes a row saved per class)
        self._rows: Rows = self._store.row_numbers(snapshot) if self._store is not None else np.arange(n, dtype=np.intp)
        self._checked = np.zeros(n, dtype=bool)  # the cached filters' outcome is known
        self._fits = np.zeros(n, dtype=bool)  # ... and it is a pass
        # per cached filter (its index): each row's ``unresolvable`` answer where the node fails
        # it first (-1: not known), for the statuses preemption reads after a walk found no node
        # (a replay that fills the cluster fails many pods of a class, one node changed between)
        self._unresolvable: dict[int, npt.NDArray[np.int8]] = {}
        # ... and, kept alike where no filter is dynamic, each row's first failing filter and
        # its reasons (rulesched.engine.kept_failures)
        self._kept = KeptFailures(n)
        self._scores = self._score_rows(snapshot)  # the steady score vectors
        self._history = snapshot.history
        self._generation = snapshot.node_generation
        self._position = snapshot.pod_position
        self._token = bound.token

    def sync(self, snapshot: Snapshot) -> None:
        """Walk ``snapshot`` from now on. Marks stale what changed since the last walk: every
        row after a node change or a new token, else the rows of the nodes that gained or lost
        pods."""
        self._snapshot = snapshot
        bound = self.bound
        if (
            snapshot.history is not self._history
            or snapshot.node_generation != self._generation
            or snapshot.pod_position < self._position
        ):
            self._reset(snapshot)
            return
        self._nodes = snapshot.nodes
        if self._score_key is not None:  # (shared: brought up to date by itself)
            self._scores = self._score_rows(snapshot)
        if bound.token is not self._token:
            self._token = bound.token
            self._checked[:] = False
            if self._score_key is None:
                self._scores.scored[:] = False
                self._scores.alike.clear()
            self._unresolvable.clear()
            self._kept.forget(None)
        if snapshot.pod_position != self._position:
            stale: Rows | list[int] | None
            if self._store is not None and snapshot.pod_position - self._position > FEW_CHANGES:
                stale = self._store.changed_rows(snapshot, self._position)
            else:  # (a bind or two since the last walk, the usual case for one class: directly)
                changes = snapshot.pod_changes(self._position)
                stale = None if changes is None else list({self._row[node.name] for _, _, node in changes})
            scored = self._scores.scored if self._score_key is None else None
            if stale is None:
                self._checked[:] = False
                if scored is not None:
                    scored[:] = False
                self._unresolvable.clear()
            else:
                self._checked[stale] = False
                if scored is not None:
                    scored[stale] = False
                for known in self._unresolvable.values():
                    known[stale] = -1
            self._kept.forget(stale)
            self._position = snapshot.pod_position

    def _score_rows(self, snapshot: Snapshot) -> ScoreRows:
        width = len(self.bound.scores) + 1
        if self._score_key is None:
            return ScoreRows(len(snapshot.nodes), width, snapshot)
        assert self._store is not None
        return self._store.score_rows(self._score_key, width, snapshot)

    def release(self) -> None:
        """The walk is over: let go of its snapshot (the rows stay)."""
        self._snapshot = None

    def _columns(self) -> NodeColumns:
        assert self._snapshot is not None
        assert self._store is not None
        return self._store.current(self._snapshot)

    def _shared(self) -> Lookups:
        assert self._snapshot is not None
        assert self._store is not None
        return self._store.shared(self._snapshot, self._columns_from)

    def feasible(
        self, start: int, wanted: int, limit: int | None = None, between: Callable[[], None] | None = None
    ) -> tuple[Rows, int]:
        """Rows of the first ``wanted`` feasible nodes walking round-robin from ``start``, in
        walk order, and how many nodes were looked at (all of them, or ``limit``, if fewer fit).
        ``between`` is called before each step of the walk (at most ``chunk`` nodes): it may
        raise to give the walk up (a cancelled cycle); the rows checked so far stay valid."""
        n = len(self._nodes)
        most = n if limit is None else min(limit, n)
        found: list[Rows] = []
        need, looked, pos = wanted, 0, start
        dynamic = self.bound.dynamic_filters
        # Dynamic filters over topology domains: their outcome on every node at once (one
        # evaluation per zone or rack), so the cached filters are checked only on the nodes they
        # let through. The same nodes are found, in the same order, and ``looked`` is the same.
        ahead = self._dynamic_ahead() if dynamic else None
        if ahead is not None:
            return self._feasible_ahead(ahead, start, wanted, most, between)
        while need > 0 and looked < most:
            if between is not None:
                between()
            size = min(most - looked, int(need * self.ratio) + 32, self._chunk)
            rows = self._window(pos, size)
            self._check(rows)
            fit = rows[self._fits[rows]]
            if dynamic:
                fit = self._dynamic(fit, dynamic, need)
            if len(fit) >= need:
                fit = fit[:need]
                size = (int(fit[-1]) - pos) % n + 1
            found.append(fit)
            need -= len(fit)
            looked += size
            pos = (pos + size) % n
        rows = np.concatenate(found) if len(found) != 1 else found[0]
        if len(rows):
            self.ratio = max(1.0, looked / len(rows))
        return rows, looked

    def _feasible_ahead(
        self,
        ahead: npt.NDArray[np.bool_],
        start: int,
        wanted: int,
        most: int,
        between: Callable[[], None] | None,
    ) -> tuple[Rows, int]:
        """:meth:`feasible` when every row's dynamic outcome is known (``ahead``): the walk takes
        the rows passing them, round-robin from ``start`` within ``most`` nodes, and checks the
        cached filters on those alone. ``looked`` counts nodes, as the walk does: up to the last
        node found, or ``most`` when fewer than ``wanted`` fit."""
        n = len(self._nodes)
        passing = np.flatnonzero(ahead)
        cut = int(np.searchsorted(passing, start))
        order = np.concatenate((passing[cut:], passing[:cut])) if cut else passing
        if most < n:
            order = order[(order - start) % n < most]
        found: list[Rows] = []
        need, at = wanted, 0
        while need > 0 and at < len(order):
            if between is not None:
                between()
            size = min(len(order) - at, int(need * self._ahead_ratio) + 32, self._chunk)
            rows = order[at : at + size]
            self._check(rows)
            fit = rows[self._fits[rows]]
            if len(fit) >= need:
                fit = fit[:need]
            found.append(fit)
            need -= len(fit)
            at += size
        if not found:  # (no node passes the dynamic filters)
            return np.empty(0, dtype=np.intp), most
        rows = np.concatenate(found) if len(found) != 1 else found[0]
        looked = (int(rows[-1]) - start) % n + 1 if need <= 0 and len(rows) else most
        if len(rows):
            self.ratio = max(1.0, looked / len(rows))
            self._ahead_ratio = max(1.0, at / len(rows))
        return rows, looked

    def _dynamic_ahead(self) -> npt.NDArray[np.bool_] | None:
        """Every row's outcome under the dynamic filters when they read the node only through a
        few labels (rulesched.engine.batch.dynamic_label_mask); else None."""
        if self._store is None or self._columns_from <= 0:
            return None
        return dynamic_label_mask(self.bound, self._columns())

    def passing(self, rows: Rows) -> Rows:
        """Those of ``rows`` whose node passes every filter, in the order given (the extender's
        filter: every node asked about, not the first ones that fit), ``chunk`` rows at a time,
        checking the binding's watch before each."""
        if len(rows) > self._chunk:
            watch, size = self.bound.watch, self._chunk
            parts = []
            for at in range(0, len(rows), size):
                watch.check()
                parts.append(self.passing(rows[at : at + size]))
            return np.concatenate(parts)
        self._check(rows)
        fit = rows[self._fits[rows]]
        dynamic = self.bound.dynamic_filters
        if dynamic and len(fit):
            fit = self._dynamic(fit, dynamic, len(fit))
        return fit

    def static_passing(self, rows: Rows) -> npt.NDArray[np.bool_]:
        """Whether each row's node passes the cached (not dynamic) filters."""
        self._check(rows)
        return self._fits[rows]

    def vectors(self, rows: Rows) -> npt.NDArray[np.int64]:
        """Score vectors (as ``BoundRules.score_vector``) of the rows, one per row."""
        scores = self._scores
        stale = rows[~scores.scored[rows]]
        watch = self.bound.watch
        if len(stale):
            nodes, steady = self._nodes, self.bound.steady_vector
            computing, alike = stale, None
            if self._alike is not None:
                alike = scores.from_alike(stale, self._alike, nodes)
                computing = alike.rows
            try:
                if not len(computing):
                    matrix = None
                elif self._many(computing):
                    matrix = score_matrix(self.bound, self._columns(), computing, True, self._shared())
                    low, high = int(matrix.min()), int(matrix.max())
                else:
                    left, computed = CHECK_EVERY, []
                    for i in computing.tolist():
                        left -= 1
                        if not left:
                            left = watch.tick()
                        computed.append(steady(nodes[i]))
                    # (a bind's row or two: Python's min and max cost less than numpy's)
                    low, high = min(map(min, computed)), max(map(max, computed))
                    if scores.holds(low, high) and len(computed) <= 2:
                        vectors = scores.vectors  # (the kept type holds them: no int64 matrix needed)
                        for i, vector in zip(computing.tolist(), computed, strict=True):
                            vectors[i] = vector
                        matrix = None
                    else:
                        matrix = np.array(computed, dtype=np.int64)
            except OverflowError as e:
                raise TableOverflow(str(e)) from None
            if matrix is not None:
                scores.keep(computing, matrix, low, high)
            if alike is not None:
                scores.keep_alike(alike)
            scores.scored[stale] = True
        out = scores.vectors[rows].astype(np.int64, copy=False)
        volatile = self.bound.volatile_scores
        if volatile:
            nodes = [self._nodes[i] for i in rows.tolist()]
            self.bound.ctx.feasible = nodes
            # As columns where that is one call per zone (spreading), say; else node by node.
            columns = self._columns() if self._many(rows) else None
            if columns is not None and not volatile_grouped(self.bound, columns):
                columns = None
            for index, score in volatile:
                found = None if columns is None else score_column(self.bound, columns, rows, index)
                if found is not None:
                    column = found.astype(np.int64, copy=False)
                else:
                    watch.rule = score.name
                    column = np.array(watch.each(score.score, nodes), dtype=np.int64)
                out[:, index] = column
                if score.normalize == "none":
                    out[:, -1] += score.weight * column
        return out

    def node(self, row: int) -> NodeInfo:
        return self._nodes[row]

    def failures(self) -> list[FailedRows] | None:
        """Every node's first failing filter, by filter (a walk found no node: the FitError
        message and preemption need them), as columns; None for a table without columns. Kept
        per row, as the filters' outcomes are, when no filter is dynamic: a class failing again
        asks only the nodes that changed."""
        if self._store is None:
            return None
        if self.bound.dynamic_filters:
            return first_failures(self.bound, self._columns(), self._rows, self._shared())
        return self._kept.failures(self.bound, self._columns(), self._rows, self._shared())

    def group_reasons(self, group: FailedRows) -> GroupReasons:
        """:func:`rulesched.engine.failures.group_reasons` of a group :meth:`failures` gave,
        kept per row as the first failures are."""
        if self.bound.dynamic_filters:
            return group_reasons(self.bound, self._columns(), group)
        return self._kept.group_reasons(self.bound, self._columns(), group)

    def unresolvable_memo(self, index: int, snapshot: Snapshot) -> npt.NDArray[np.int8] | None:
        """Filter ``index``'s kept ``unresolvable`` answers, one per row (-1: not known; the
        caller fills in what it works out on ``snapshot``'s nodes); None when the table is no
        longer synced to ``snapshot`` (a later walk moved it on) or for a dynamic filter
        (evaluated afresh for every node)."""
        if (
            snapshot.history is not self._history
            or snapshot.node_generation != self._generation
            or snapshot.pod_position != self._position
            or self.bound.token is not self._token
            or index in self.bound.dynamic_indices
        ):
            return None
        found = self._unresolvable.get(index)
        if found is None:
            found = self._unresolvable[index] = np.full(len(self._nodes), -1, dtype=np.int8)
        return found

    def first_failing(self, rows: Rows) -> npt.NDArray[np.intp]:
        """For each row, the index (in ``bound.filters``) of the first filter its node fails,
        -1 where it passes them all: :meth:`rulesched.lang.BoundRules.first_failure`'s filter,
        for many rows at once (explanations; answers the walk already knows are read, not redone)."""
        bound, nodes = self.bound, self._nodes
        first = np.full(len(rows), -1, dtype=np.intp)
        live = np.arange(len(rows), dtype=np.intp)  # positions still passing every filter so far
        for index, f in enumerate(bound.filters):
            if not len(live):
                break
            at = rows[live]
            ok = filter_column(bound, self._columns(), at, index, self._shared()) if self._many(at) else None
            if ok is None:
                passes = f.passes
                ok = np.array([bool(passes(nodes[r])) for r in at.tolist()], dtype=bool)
            ok = ok.astype(bool, copy=False)
            first[live[~ok]] = index
            live = live[ok]
        return first

    def passes_each(self, rows: Rows) -> npt.NDArray[np.bool_]:
        """filters x rows: whether each row's node passes each filter, every filter evaluated
        (kube-scheduler's runAllFilters: explanations that list every failing rule), as columns
        where there are enough rows."""
        bound, nodes = self.bound, self._nodes
        out = np.ones((len(bound.filters), len(rows)), dtype=bool)
        if not len(rows):
            return out
        many = self._many(rows)
        watch = bound.watch
        for index, f in enumerate(bound.filters):
            watch.check()
            ok = filter_column(bound, self._columns(), rows, index, self._shared()) if many else None
            if ok is None:
                watch.rule = f.name
                ok = np.array(watch.each(f.passes, [nodes[r] for r in rows.tolist()]), dtype=bool)
            out[index] = ok.astype(bool, copy=False)
        return out

    def _window(self, pos: int, size: int) -> Rows:
        n = len(self._nodes)
        if pos + size <= n:
            return self._rows[pos : pos + size]
        return np.concatenate((self._rows[pos:], self._rows[: pos + size - n]))

    def _check(self, rows: Rows) -> None:
        stale = rows[~self._checked[rows]]
        if len(stale):
            nodes, fits, failure = self._nodes, self._fits, self.bound.static_failure
            if self._many(stale):
                fits[stale] = filter_mask(self.bound, self._columns(), stale, Filters.STATIC, self._shared())
            else:
                watch, left = self.bound.watch, CHECK_EVERY
                # A node's first failing filter and its reasons found here are what failures()
                # would ask again of each of these rows when the walk finds no node: kept as it
                # keeps them (no filter dynamic: the static failure is the first)
                keep = not self.bound.dynamic_indices
                kept = self._kept
                at = {id(f): index for index, f in enumerate(self.bound.filters)} if keep else {}
                for i in stale.tolist():
                    left -= 1
                    if not left:
                        left = watch.tick()
                    found = failure(nodes[i])
                    fits[i] = found is None
                    if not keep:
                        continue
                    if found is None:
                        kept.keep(i, -1, None)
                    else:
                        kept.keep(i, at[id(found[0])], found[1])
            self._checked[stale] = True

    def _many(self, stale: Rows) -> bool:
        """Enough stale rows that evaluating them as columns pays for its per-call set-up."""
        return 0 < self._columns_from <= len(stale)

    def _dynamic(self, fit: Rows, filters: Sequence[BoundFilter], need: int) -> Rows:
        """The rows whose node passes every dynamic filter too, up to ``need`` of them (checking
        the binding's watch every CHECK_EVERY nodes)."""
        if self._many(fit):  # as columns where that is one call per zone (spreading), say
            columns = self._columns()
            if dynamic_grouped(self.bound, columns):
                return fit[filter_mask(self.bound, columns, fit, Filters.DYNAMIC)][:need]
        nodes, kept = self._nodes, list[int]()
        append = kept.append
        watch, left = self.bound.watch, CHECK_EVERY
        if len(filters) == 1:  # the usual case (spreading, or the pod's own affinity): no inner loop
            passes_one = filters[0].passes
            watch.rule = filters[0].name
            for i in fit.tolist():
                left -= 1
                if not left:
                    left = watch.tick()
                if passes_one(nodes[i]):
                    append(i)
                    if len(kept) == need:
                        break
        else:
            for i in fit.tolist():
                left -= 1
                if not left:
                    left = watch.tick()
                node = nodes[i]
                for f in filters:
                    watch.rule = f.name
                    if not f.passes(node):
                        break
                else:
                    append(i)
                    if len(kept) == need:
                        break
        return np.array(kept, dtype=np.intp)


def _alike_keyer(bound: BoundRules, store: ColumnStore) -> Callable[[NodeInfo], Hashable | None] | None:
    bodies = columns_of(bound)
    reads = bodies.score_reads if bodies is not None else None
    return None if reads is None else keyer(reads, bound.ctx, store.device_keys)


def _score_key(bound: BoundRules) -> Hashable | None:
    """The key of a cached binding's score vectors when every score of it is a shared rule (the
    tuple of their share keys: rulesched.engine.sharing), else None."""
    if not bound.cached or not bound.scores:
        return None
    bodies = columns_of(bound)
    shares = bodies.score_shares if bodies is not None else ()
    if len(shares) != len(bound.scores) or any(s is None for s in shares):
        return None
    return tuple(s.key for s in shares if s is not None)
