"""The framework of one evaluating thread: the caches that make evaluation fast, and the verbs
every face asks the rules through.

kube-scheduler builds one framework per profile and runs its plugins through it; rulesched's
counterpart is a :class:`Framework` per evaluating thread (a scheduler profile's
:class:`rulesched.scheduler.cycle.Cycle`, the extender's request worker). It owns

* the node tables of recent pod classes (:class:`rulesched.engine.NodeTable`, kept as
  arrays and keyed by the class's binding), as many as :func:`tables_for` lets it keep;
* the column store those tables share (the snapshot's nodes as columns);
* the answers of nodes holding nominated pods, per class (:class:`ReservedCheck`'s memo);

and drops the first and the last when the rule set changes. It learns of a change by
notification: :meth:`Framework.follow` subscribes it to a
:class:`rulesched.lang.RulesHandle`, whose swap calls :meth:`Framework.rules_changed` (on the
reloading thread: it only marks the caches stale; the owning thread drops them at its next use,
so a table is never cleared under a walk). Nothing polls the rule set's identity.

The verbs answer over given nodes (rows of a snapshot), for one bound pod:

* :meth:`Framework.filter`: every node's verdict, a :class:`Status` of its first failing rule in
  rule order (or, ``all_failing``, of every rule it fails);
* :meth:`Framework.score`: each score rule's normalised values and the weighted totals;
* :meth:`Framework.preempt`: the dry run of evicting given victims on an overlay: the
  :class:`Status` the pod would still get there, or None.

Host selection (how many feasible nodes to find, where the round-robin walk starts) stays in the
cycle, which walks the framework's tables. Next stage: :mod:`rulesched.scheduler.cycle` (and the
extender's verbs, :mod:`rulesched.extender.service`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cachetools
import numpy as np

from rulesched.cluster.snapshot import ClusterOverlay, Snapshot
from rulesched.engine import ColumnStore, EngineSettings, NodeColumns, NodeTable, Rows, TableOverflow
from rulesched.lang import CHECK_EVERY, BoundRules, Failure, RuleSet, RulesHandle
from rulesched.model import Pod
from rulesched.scheduler.evaluate import score_nodes
from rulesched.scheduler.framework import Status
from rulesched.scheduler.scoring import Matrix, weighted_totals


def tables_for(nodes: int, shares: int = 1, engine: EngineSettings | None = None) -> int:
    """How many classes keep their node tables: as many as fit in ``engine.table_rows`` rows (300
    at 5000 nodes: a cluster's worth of Deployments interleaved reuse theirs), at least
    ``min_tables``, at most ``max_tables``; ``shares`` frameworks (a scheduler's profiles) split
    those rows between them."""
    engine = engine if engine is not None else EngineSettings()
    return max(engine.min_tables, min(engine.max_tables, engine.table_rows // max(1, nodes) // max(1, shares)))


# A node the table found failing that passes node by node (never expected): reported as the
# extender always reported it, "filtered"
_FILTERED = Status("", ("filtered",), False)


def status_of(failure: Failure, node: Any) -> Status:
    """The :class:`Status` of ``node`` failing as :meth:`BoundRules.first_failure` says (its
    ``unresolvable`` clause evaluated on ``node``)."""
    failed, reasons = failure
    return Status(failed.name, reasons, bool(failed.unresolvable(node)))


@dataclass(frozen=True)
class Verdicts:
    """:meth:`Framework.filter`'s answer: the rows that pass every filter (in the order given),
    and every other node's :class:`Status` by name (its first failing rule), in the order given;
    with ``all_failing``, ``every`` holds each failing node's statuses of every rule it fails,
    in rule order."""

    passing: Rows
    failed: dict[str, Status]
    every: dict[str, tuple[Status, ...]] | None = None


@dataclass(frozen=True)
class Scores:
    """:meth:`Framework.score`'s answer over the rows given: the weighted totals, and with
    ``per_rule`` each score rule's normalised values (rule name -> one value per row)."""

    totals: Matrix
    per_rule: dict[str, Matrix] | None = None


class Framework:
    """One evaluating thread's caches and verbs (see the module docstring). ``engine`` holds the
    budgets of its tables and columns (:class:`rulesched.engine.EngineSettings`: ``columns_from``
    and ``walk_chunk`` tune the walks); ``shares``: how many frameworks split the table budget (a
    scheduler's profiles)."""

    def __init__(self, engine: EngineSettings | None = None) -> None:
        self.engine = engine if engine is not None else EngineSettings()
        self.shares = 1
        # keyed by the class's binding itself (held here, so never confused with a later one)
        self._tables: cachetools.LRUCache[BoundRules, NodeTable] = cachetools.LRUCache(self.engine.max_tables)
        self.columns = ColumnStore(self.engine)
        # per class: reserved nodes' answers with their nominated pods added (ReservedCheck)
        self._reserved: cachetools.LRUCache[BoundRules, dict[str, Any]] = cachetools.LRUCache(self.engine.max_tables)
        self.ratio = 2.0  # the last walk's nodes looked at per feasible node (a new table's guess)
        self._stale = False  # a rule set was swapped in since the caches were filled
        self.resets = 0

    # --- the rule set's lifetime -------------------------------------------------------------
    def follow(self, handle: RulesHandle) -> None:
        """Be told when ``handle`` swaps its rule set (:meth:`rules_changed`)."""
        handle.subscribe(self.rules_changed)

    def rules_changed(self, rules: RuleSet) -> None:
        """A new rule set is active (called on the swapping thread): the caches belong to the old
        one. Only marked here; the owning thread drops them at its next use."""
        self._stale = True

    def _fresh(self) -> None:
        if self._stale:
            self._stale = False
            self._tables.clear()
            self._reserved.clear()
            self.resets += 1

    # --- caches ------------------------------------------------------------------------------
    @property
    def tables(self) -> Mapping[BoundRules, NodeTable]:
        """The node tables kept, by class (least recently used first)."""
        return self._tables

    def table(self, bound: BoundRules, snapshot: Snapshot) -> NodeTable:
        """The class's node table, brought up to ``snapshot``; the caller releases it."""
        self._fresh()
        table = self._tables.get(bound) if bound.cached else None
        if table is None:
            table = NodeTable(bound, self.columns, self.engine.columns_from, self.engine.walk_chunk, self.ratio)
            if bound.cached:  # (else a pod of its own class, its rules read its name: this cycle only)
                limit = tables_for(len(snapshot.nodes), self.shares, self.engine)
                while len(self._tables) >= limit:
                    self._tables.popitem()  # the least recently used
                self._tables[bound] = table
        table.sync(snapshot)
        return table

    def reserved_memo(self, bound: BoundRules, nominated: Collection[str]) -> dict[str, Any] | None:
        """The class's memo of reserved nodes' answers (None for a pod whose answers are never
        kept); pruned of the nodes no longer ``nominated`` once it holds far more than those."""
        self._fresh()
        if not bound.cached or bound.dynamic_filters:  # (answers evaluated afresh are never kept)
            return None
        memo = self._reserved.get(bound)
        if memo is None:
            memo = self._reserved[bound] = {}
        elif len(memo) > 2 * len(nominated) + 16:  # nominations gone: their answers too
            for name in [n for n in memo if n not in nominated]:
                del memo[name]
        return memo

    def current(self, snapshot: Snapshot) -> NodeColumns:
        """The snapshot's nodes as columns (the tables' own, brought up to ``snapshot``)."""
        return self.columns.current(snapshot)

    def rows_by_name(self, snapshot: Snapshot) -> dict[str, int]:
        return self.columns.rows_by_name(snapshot)

    def rows_of(self, snapshot: Snapshot, names: Sequence[str]) -> Rows:
        """The rows of the nodes named (names that are no node left out)."""
        row = self.columns.rows_by_name(snapshot)
        return np.array([row[n] for n in names if n in row], dtype=np.intp)

    # --- verbs -------------------------------------------------------------------------------
    def filter(self, bound: BoundRules, snapshot: Snapshot, rows: Rows, all_failing: bool = False) -> Verdicts:
        """Every node's verdict for the bound pod over ``rows`` (of ``snapshot``)."""
        table = self.table(bound, snapshot)
        try:
            passing = table.passing(rows)
            failed: dict[str, Status] = {}
            if len(passing) != len(rows):
                ok = np.zeros(len(snapshot.nodes), dtype=bool)
                ok[passing] = True
                failing = rows[~ok[rows]]
                if all_failing:  # (the first failing rule of each is the first of its list)
                    every = _every_failing(bound, table, failing)
                    for name, statuses in every.items():
                        failed[name] = statuses[0] if statuses else _FILTERED
                    return Verdicts(passing, failed, {n: s for n, s in every.items() if s})
                _first_failing(bound, table, failing, failed)
        finally:
            table.release()
        return Verdicts(passing, failed, {} if all_failing else None)

    def score(self, bound: BoundRules, snapshot: Snapshot, rows: Rows, per_rule: bool = False) -> Scores:
        """The score rules over ``rows`` (the feasible nodes: score built-ins read them as the
        cycle's PreScore set), totalled as a cycle totals them."""
        if not len(rows) or not bound.scores:
            zeros = np.zeros(len(rows), dtype=np.int64)
            return Scores(zeros, {s.name: zeros for s in bound.scores} if per_rule else None)
        table = self.table(bound, snapshot)
        try:
            nodes = None
            try:
                matrix = table.vectors(rows)
            except TableOverflow:  # a score beyond int64: node by node, with Python ints
                nodes = [table.node(i) for i in rows.tolist()]
        finally:
            table.release()
        if nodes is not None:
            scored = score_nodes(bound, nodes, explain=per_rule)
            if not per_rule or scored.per_node is None:
                return Scores(scored.totals)
            per_node = scored.per_node
            values = {s.name: np.array([per_node[n.name][s.name] for n in nodes], dtype=object) for s in bound.scores}
            return Scores(scored.totals, values)
        if not per_rule:
            return Scores(weighted_totals(bound.scores, matrix))
        columns: list[Matrix] = []
        totals = weighted_totals(bound.scores, matrix, columns)
        return Scores(totals, {s.name: c for s, c in zip(bound.scores, columns, strict=True)})

    @staticmethod
    def preempt(overlay: ClusterOverlay, bound: BoundRules, node: str, victims: Sequence[Pod]) -> Status | None:
        """The dry run of evicting ``victims`` from ``node`` (``bound`` is bound to ``overlay``):
        the pod's status there once they are gone, None if it then fits. The overlay is left as
        it was."""
        for victim in victims:
            overlay.remove_pod(victim)
        try:
            bound.refresh()  # cluster-wide precomputation is stale after a change
            info = overlay.node_view(node)
            failure = bound.first_failure(info) if info is not None else None
            return None if failure is None or info is None else status_of(failure, info)
        finally:
            for victim in victims:
                overlay.add_pod(victim)
            bound.refresh()


def _first_failing(bound: BoundRules, table: NodeTable, failing: Rows, out: dict[str, Status]) -> None:
    """Each failing row's first failing filter (one dynamic filter after passing the cached ones:
    that one, not re-run over the others)."""
    dynamic = bound.dynamic_filters
    node_of = table.node
    if len(dynamic) == 1:
        static_ok = table.static_passing(failing)
        only = dynamic[0]
        for i in failing[static_ok].tolist():
            node = node_of(i)
            out[node.name] = Status(only.name, only.reasons(node), bool(only.unresolvable(node)))
        failing = failing[~static_ok]
    watch, left = bound.watch, CHECK_EVERY
    for i in failing.tolist():
        left -= 1
        if not left:
            left = watch.tick()
        node = node_of(i)
        failure = bound.first_failure(node)
        out[node.name] = _FILTERED if failure is None else status_of(failure, node)


def _every_failing(bound: BoundRules, table: NodeTable, failing: Rows) -> dict[str, tuple[Status, ...]]:
    """Each failing row's statuses of every filter it fails, in rule order (kube-scheduler's
    RunFilterPlugins with runAllFilters); reasons and unresolvable clauses evaluated on the
    failing (node, filter) pairs only."""
    out: dict[str, tuple[Status, ...]] = {}
    passes = table.passes_each(failing)
    filters = bound.filters
    watch, left = bound.watch, CHECK_EVERY
    for at, i in enumerate(failing.tolist()):
        left -= 1
        if not left:
            left = watch.tick()
        node = table.node(i)
        found = []
        for index in np.flatnonzero(~passes[:, at]).tolist():
            f = filters[index]
            found.append(Status(f.name, f.reasons(node), bool(f.unresolvable(node))))
        out[node.name] = tuple(found)
    return out
