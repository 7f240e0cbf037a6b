"""One scheduling cycle for one pod: bind the rules, filter nodes, score the feasible ones, pick.

Filtering walks the nodes round-robin from where the previous cycle stopped and stops once
``num_feasible_nodes_to_find`` nodes fit (percentageOfNodesToScore). A pod with a nominated node
(set by an earlier preemption) tries that node first. Pods of an equivalence class walk their
class's :class:`rulesched.scheduler.table.NodeTable` (answers kept as arrays); a pod of its own
class walks a table made for the cycle; ``explain`` runs, which record every node's reasons and
scores, walk node by node (:mod:`rulesched.scheduler.evaluate`). Either way the totals come from
one function, :func:`rulesched.scheduler.scoring.weighted_totals`.

A cycle reads one snapshot and one rule set, both fixed for its duration, and changes nothing:
the :class:`rulesched.scheduler.scheduler.Scheduler` assumes and binds what the cycle chose.
Next stage: :mod:`rulesched.scheduler.preemption` when no node fits.
"""

from __future__ import annotations

import random

import cachetools

from rulesched.cluster.snapshot import Snapshot
from rulesched.lang import BoundRules, RuleSet, Session
from rulesched.model import Pod
from rulesched.scheduler.evaluate import failure_reasons, filter_nodes, score_nodes
from rulesched.scheduler.framework import (
    Code,
    CycleResult,
    SchedulerSettings,
    num_feasible_nodes_to_find,
)
from rulesched.scheduler.scoring import select_host, weighted_totals
from rulesched.scheduler.table import ColumnStore, NodeTable, TableOverflow

TABLE_ROWS = 3_000_000  # node-table rows kept over all classes (~75 bytes each): ~225 MB at most
MAX_TABLES = 512  # and never more tables than this (a session keeps as many classes bound)


def tables_for(nodes: int) -> int:
    """How many classes keep their node tables: as many as fit in TABLE_ROWS rows (300 at 5000
    nodes: a cluster's worth of Deployments interleaved reuse theirs), at least 16."""
    return max(16, min(MAX_TABLES, TABLE_ROWS // max(1, nodes)))


class Cycle:
    """The scheduling cycles of one scheduler (one thread): the round-robin start, the seeded
    tie-break, and the node tables of recent classes, which belong to the rule set they were
    computed with."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.next_start = 0
        self._rules: RuleSet | None = None
        # keyed by the class's binding itself (held here, so never confused with a later one)
        self._tables: cachetools.LRUCache[BoundRules, NodeTable] = cachetools.LRUCache(MAX_TABLES)
        self._columns = ColumnStore()

    def run(self, pod: Pod, snapshot: Snapshot, session: Session) -> tuple[CycleResult, BoundRules]:
        if session.rules is not self._rules:  # a reload: the old set's tables go with it
            self._rules = session.rules
            self._tables.clear()
        explain = self.settings.explain
        bound = session.bind(pod, snapshot)
        nodes = snapshot.nodes
        result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes))
        if explain:
            result.filtered, result.scores, result.unresolvable = {}, {}, set()
        nominated = snapshot.node_view(pod.nominated_node_name) if pod.nominated_node_name else None
        if nominated is not None and bound.first_failure(nominated) is None:
            result.code, result.node = Code.SCHEDULED, nominated.name
            return result, bound
        if not explain and nodes:
            start = self.next_start
            try:
                return self._run_table(bound, snapshot, result), bound
            except TableOverflow:  # a score beyond int64: the per-node path computes with Python ints
                self.next_start = start
                result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes))
        if not nodes:
            return result, bound
        count = len(nodes)
        wanted = num_feasible_nodes_to_find(count, self.settings.percentage_of_nodes_to_score)
        start = self.next_start % count
        filtered = filter_nodes(bound, nodes, start, wanted, explain=explain)
        self.next_start = (start + filtered.looked) % count
        result.reasons.update(filtered.reasons)
        if result.filtered is not None and filtered.failed is not None:
            result.filtered.update(filtered.failed)
        if result.unresolvable is not None and filtered.unresolvable is not None:
            result.unresolvable.update(filtered.unresolvable)
        feasible = filtered.feasible
        if not feasible:
            return result, bound
        result.code = Code.SCHEDULED
        if len(feasible) == 1 and not explain:
            result.node = feasible[0].name
            return result, bound
        scored = score_nodes(bound, feasible, explain=explain)
        if result.scores is not None and scored.per_node is not None:
            result.scores.update(scored.per_node)
        result.node = feasible[select_host(scored.totals, self.rng)].name
        return result, bound

    def _run_table(self, bound: BoundRules, snapshot: Snapshot, result: CycleResult) -> CycleResult:
        table = self._tables.get(bound) if bound.cached else None
        if table is None:
            table = NodeTable(bound, self._columns, self.settings.columns_from, self.settings.walk_chunk)
            if bound.cached:  # (else a pod of its own class, its rules read its name: this cycle only)
                limit = tables_for(len(snapshot.nodes))
                while len(self._tables) >= limit:
                    self._tables.popitem()  # the least recently used
                self._tables[bound] = table
        table.sync(snapshot)
        try:
            return self._walk(table, bound, snapshot, result)
        finally:
            table.release()

    def _walk(self, table: NodeTable, bound: BoundRules, snapshot: Snapshot, result: CycleResult) -> CycleResult:
        count = len(snapshot.nodes)
        wanted = num_feasible_nodes_to_find(count, self.settings.percentage_of_nodes_to_score)
        start = self.next_start % count
        rows, looked = table.feasible(start, wanted)
        self.next_start = (start + looked) % count
        if not len(rows):
            result.reasons.update(failure_reasons(bound, snapshot.nodes))
            return result
        result.code = Code.SCHEDULED
        if len(rows) == 1:
            result.node = table.node(int(rows[0])).name
            return result
        totals = weighted_totals(bound.scores, table.vectors(rows), ranking_only=True)
        result.node = table.node(int(rows[select_host(totals, self.rng)])).name
        return result
