"""One scheduling cycle for one pod: bind the rules, filter nodes, score the feasible ones, pick.

Filtering walks the nodes round-robin from where the previous cycle stopped and stops once
``num_feasible_nodes_to_find`` nodes fit (percentageOfNodesToScore). A pod with a nominated node
(set by an earlier preemption) tries that node first. Pods of an equivalence class walk their
class's :class:`rulesched.scheduler.table.NodeTable` (answers kept as arrays); a pod of its own
class walks a table made for the cycle; ``explain`` runs, which record every node's reasons and
scores, walk node by node. Nothing here changes the cluster: the
:class:`rulesched.scheduler.scheduler.Scheduler` assumes and binds what the cycle chose.
Next stage: :mod:`rulesched.scheduler.preemption` when no node fits.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import cachetools
import numpy as np

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.state import ClusterState
from rulesched.lang import BoundRules, RuleSet
from rulesched.model import Pod
from rulesched.scheduler.framework import (
    Code,
    CycleResult,
    SchedulerSettings,
    num_feasible_nodes_to_find,
)
from rulesched.scheduler.scoring import normalize, normalize_array, select_host
from rulesched.scheduler.table import ColumnStore, NodeTable, TableOverflow

TABLES = 64  # classes whose node tables are kept (each holds a row per node)


class Cycle:
    def __init__(self, rules: RuleSet, state: ClusterState, settings: SchedulerSettings) -> None:
        self.rules = rules
        self.state = state
        self.settings = settings
        self.rng = random.Random(settings.seed)
        self.next_start = 0
        self._tables: cachetools.LRUCache[int, NodeTable] = cachetools.LRUCache(TABLES)
        self._columns = ColumnStore(state)

    def run(self, pod: Pod) -> tuple[CycleResult, BoundRules]:
        state, explain = self.state, self.settings.explain
        bound = self.rules.bind(pod, state)
        nodes = state.nodes
        result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes))
        if explain:
            result.filtered, result.scores = {}, {}
        nominated = state.node_view(pod.nominated_node_name) if pod.nominated_node_name else None
        if nominated is not None and bound.first_failure(nominated) is None:
            result.code, result.node = Code.SCHEDULED, nominated.name
            return result, bound
        if not explain and nodes:
            start = self.next_start
            try:
                return self._run_table(bound, result), bound
            except TableOverflow:  # a score beyond int64: the per-node path computes with Python ints
                self.next_start = start
                result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes))
        feasible = self._filter(bound, nodes, result)
        if not feasible:
            return result, bound
        result.code = Code.SCHEDULED
        if len(feasible) == 1 and not explain:
            result.node = feasible[0].name
            return result, bound
        totals = self._score(bound, feasible, result)
        result.node = feasible[select_host(totals, self.rng)].name
        return result, bound

    def _run_table(self, bound: BoundRules, result: CycleResult) -> CycleResult:
        table = self._tables.get(id(bound)) if bound.cached else None
        if table is None or table.bound is not bound:
            table = NodeTable(bound, self.state, self._columns, self.settings.columns_from)
            if bound.cached:  # (else a pod of its own class, its rules read its name: this cycle only)
                self._tables[id(bound)] = table
        table.sync()
        count = len(self.state.nodes)
        wanted = num_feasible_nodes_to_find(count, self.settings.percentage_of_nodes_to_score)
        start = self.next_start % count
        rows, looked = table.feasible(start, wanted)
        self.next_start = (start + looked) % count
        if not len(rows):
            self._reasons(bound, result)
            return result
        result.code = Code.SCHEDULED
        if len(rows) == 1:
            result.node = table.node(int(rows[0])).name
            return result
        vectors = table.vectors(rows)
        totals = vectors[:, -1].copy()
        for index, s in enumerate(bound.scores):
            column = vectors[:, index]
            # A column of equal values normalises to one number: it cannot change the pick.
            if s.normalize != "none" and column.min() != column.max():
                totals += s.weight * normalize_array(s.normalize, column)
        ties = np.flatnonzero(totals == totals.max())
        pick = int(ties[0]) if len(ties) == 1 else int(ties[self.rng.randrange(len(ties))])
        result.node = table.node(int(rows[pick])).name
        return result

    def _reasons(self, bound: BoundRules, result: CycleResult) -> None:
        """Why each node failed, for the FitError message of a pod no node fits."""
        reasons = result.reasons
        for node in self.state.nodes:
            failure = bound.first_failure(node)
            if failure is not None:
                reasons.update(set(failure[1]))

    def _filter(self, bound: BoundRules, nodes: Sequence[NodeInfo], result: CycleResult) -> list[NodeInfo]:
        count = len(nodes)
        if count == 0:
            return []
        wanted = num_feasible_nodes_to_find(count, self.settings.percentage_of_nodes_to_score)
        reasons: Counter[str] = result.reasons
        filtered = result.filtered

        def failed(node: NodeInfo, why: tuple[str, ...]) -> None:
            reasons.update(set(why))
            if filtered is not None:
                filtered[node.name] = why

        start = self.next_start % count
        # Why nodes failed matters when no node fits (the FitError message) or when explaining;
        # otherwise the walk skips collecting it, and a fruitless walk is redone for the reasons
        # (from the memos it just filled).
        feasible, looked = bound.feasible(nodes, start, wanted, failed if filtered is not None else None)
        self.next_start = (start + looked) % count
        if not feasible and filtered is None:
            self._reasons(bound, result)
        return feasible

    def _score(self, bound: BoundRules, feasible: list[NodeInfo], result: CycleResult) -> list[int]:
        """Weighted sum of normalised scores per feasible node. Rules that are not normalised come
        pre-summed from the vectors' last element; a normalised column whose values are all equal
        normalises to one number, added once rather than per node."""
        bound.ctx.feasible = feasible
        vectors = bound.score_vectors(feasible)
        if result.scores is not None:
            return self._explain(bound, feasible, vectors, result.scores)
        totals = [v[-1] for v in vectors]
        offset = 0
        for index, s in enumerate(bound.scores):
            if s.normalize == "none":
                continue
            column = [v[index] for v in vectors]
            low, high = min(column), max(column)
            if low == high:
                offset += s.weight * normalize(s.normalize, [low])[0]
                continue
            weight = s.weight
            totals = [t + weight * v for t, v in zip(totals, normalize(s.normalize, column), strict=True)]
        return totals if not offset else [t + offset for t in totals]

    @staticmethod
    def _explain(bound: BoundRules, feasible: list[NodeInfo], vectors: list[tuple[int, ...]],
                 out: dict[str, dict[str, int]]) -> list[int]:
        """The same totals, computed rule by rule and recorded per node (``--explain``)."""
        totals = [0] * len(feasible)
        per_rule = []
        for index, s in enumerate(bound.scores):
            normalized = normalize(s.normalize, [v[index] for v in vectors])
            totals = [t + s.weight * v for t, v in zip(totals, normalized, strict=True)]
            per_rule.append((s.name, normalized))
        for i, node in enumerate(feasible):
            entry = {name: values[i] for name, values in per_rule}
            entry["total"] = totals[i]
            out[node.name] = entry
        return totals
