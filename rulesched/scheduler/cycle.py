"""One scheduling cycle for one pod: bind the rules, filter nodes, score the feasible ones, pick.

Filtering walks the nodes round-robin from where the previous cycle stopped and stops once
``num_feasible_nodes_to_find`` nodes fit (percentageOfNodesToScore), or the first one when the
rule set has no score rule; the next cycle starts after the last node looked at (upstream's
findNodesThatPassFilters and nextStartNodeIndex, as with one filter goroutine). A pod with a
nominated node (set by an earlier preemption) tries that node first; when it fails there,
upstream counts it among the nodes processed, and so does the start of the next walk. Pods of an equivalence class walk their
class's :class:`rulesched.engine.NodeTable` (answers kept as arrays), which the cycle's
:class:`rulesched.scheduler.runtime.Framework` keeps (and drops when the rules change); a pod of
its own class walks a table made for the cycle; ``explain`` runs, which record every node's reasons and
scores, walk node by node (:mod:`rulesched.scheduler.evaluate`). Either way the totals come from
one function, :func:`rulesched.scheduler.scoring.weighted_totals`. A report's explanation
(``settings.explanation``) is read from the table walk after the pick, timed apart
(:mod:`rulesched.scheduler.explanation`): the walk and the pick are those of an unexplained cycle.

Nodes holding nominated pods of the pod's priority or higher (:mod:`rulesched.scheduler.nominator`)
must also fit it with those pods added; only those nodes pay for that second look, and a cycle
without such nominations runs exactly as before.

A cycle reads one snapshot and one rule set, both fixed for its duration, and changes nothing:
the :class:`rulesched.scheduler.scheduler.Scheduler` assumes and binds what the cycle chose. So
it may be given up anywhere (:mod:`rulesched.scheduler.cancel`): the walk checks its
:class:`Cancellation` before each step of at most ``walk_chunk`` nodes, and the evaluation within
a step between rules and every few nodes (:mod:`rulesched.lang.evaluation.watch`).
Next stage: :mod:`rulesched.scheduler.preemption` when no node fits.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Snapshot
from rulesched.engine import (
    GroupReasons,
    KnownFailures,
    NodeColumns,
    NodeTable,
    Rows,
    TableOverflow,
    reason_counts,
)
from rulesched.lang import BoundRules, RuleTimer, Session, timed
from rulesched.model import Pod
from rulesched.scheduler.cancel import Cancellation
from rulesched.scheduler.evaluate import (
    Filtered,
    NodeStatuses,
    failure_reasons,
    filter_nodes,
    node_statuses,
    score_nodes,
)
from rulesched.scheduler.explanation import explain_nodes, explain_walk
from rulesched.scheduler.framework import (
    EXPLAIN_FULL,
    FILTER,
    PRE_FILTER,
    SCORE,
    Code,
    CycleResult,
    CycleTiming,
    SchedulerSettings,
    num_feasible_nodes_to_find,
)
from rulesched.scheduler.nominator import AsColumns, Reserved, ReservedCheck
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.scoring import Matrix, select_host, weighted_totals


class Cycle:
    """The scheduling cycles of one scheduler (one thread): the round-robin start and the seeded
    tie-break; the node tables of recent classes are its :attr:`framework`'s (which drops them
    when told the rules changed: :meth:`rulesched.scheduler.runtime.Framework.follow`)."""

    def __init__(
        self, settings: SchedulerSettings, cancel: Cancellation | None = None, framework: Framework | None = None
    ) -> None:
        self.settings = settings
        self.engine = settings.engine  # the batch engine's budgets (tables, walk steps, columns)
        self.cancel = cancel if cancel is not None else Cancellation()
        self.rng = random.Random(settings.seed)
        # Preemption's offsets (GetOffsetAndNumCandidates) from a stream of their own, seeded from
        # the same seed: a preemption does not move the tie-breaks of the cycles after it.
        self.preemption_rng = random.Random(f"preemption:{settings.seed}")
        self.next_start = 0
        self.framework = framework if framework is not None else Framework(settings.engine)
        self._scoring = True  # the rule set has score rules: else the first feasible node is taken
        # What the last cycle's table walk learned of its failing rows, when it found no node:
        # (binding, the snapshot's history, pod position, node generation, what it learned)
        self._failed: tuple[BoundRules, object, int, int, KnownFailures] | None = None

    def run(
        self,
        pod: Pod,
        snapshot: Snapshot,
        session: Session,
        reserved: Reserved | None = None,
        timer: RuleTimer | None = None,
    ) -> tuple[CycleResult, BoundRules]:
        """``reserved``: the nominated pods this pod must leave room for (see
        :meth:`rulesched.scheduler.nominator.Nominator.reserved_for`). ``timer``: time each rule
        this cycle (a sampled cycle: ``result.timing.rule_seconds``, with ``settings.timings``).
        Raises :class:`rulesched.scheduler.cancel.CycleCancelled` when :attr:`cancel` says to
        stop (the binding is then released: the caller has nothing to let go of)."""
        self._scoring = bool(session.rules.scores)
        self._failed = None
        timing = CycleTiming(time.perf_counter()) if self.settings.timings else None
        bound = session.bind(pod, snapshot)
        try:
            if timing is not None:
                timing.phase(PRE_FILTER, timing.started)
            if timer is None:
                result = self._checked(pod, snapshot, session, bound, reserved, timing)
            else:
                with timed(bound, timer):
                    result = self._checked(pod, snapshot, session, bound, reserved, timing)
                if timing is not None:
                    timing.rule_seconds = timer.seconds
            if self.settings.explanation and result.explanation is None and result.filtered is not None:
                _explain_maps(result, bound, self.settings)
        except BaseException:
            bound.release()
            raise
        return result, bound

    def _checked(
        self,
        pod: Pod,
        snapshot: Snapshot,
        session: Session,
        bound: BoundRules,
        reserved: Reserved | None,
        timing: CycleTiming | None,
    ) -> CycleResult:
        if reserved is None:
            return self._run(pod, snapshot, bound, None, timing)
        memo = self.framework.reserved_memo(bound, reserved.nodes)
        framework = self.framework
        together = AsColumns(bound, lambda: framework.current(snapshot), lambda: framework.rows_by_name(snapshot))
        check = ReservedCheck(reserved, snapshot, session, pod, memo, bound.token, together)
        try:
            return self._run(pod, snapshot, bound, check, timing)
        finally:
            check.release()

    def _run(
        self, pod: Pod, snapshot: Snapshot, bound: BoundRules, check: ReservedCheck | None, timing: CycleTiming | None
    ) -> CycleResult:
        started = time.perf_counter() if timing is not None else 0.0
        explain = self.settings.explain
        nodes = snapshot.nodes
        result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes), timing=timing)
        if explain:
            result.filtered, result.scores, result.unresolvable = {}, {}, set()
        nominated = snapshot.node_view(pod.nominated_node_name) if pod.nominated_node_name else None
        missed = None  # the nominated node, when it does not fit
        if nominated is not None:
            if bound.first_failure(nominated) is None and (check is None or check.passes(nominated.name)):
                result.code, result.node = Code.SCHEDULED, nominated.name
                _phase(result, FILTER, started)
                result.evaluated = result.feasible = 1
                return result
            missed = nominated.name
        if not explain and nodes:
            start = self.next_start
            try:
                return self._run_table(bound, snapshot, result, check, started, missed)
            except TableOverflow:  # a score beyond int64: the per-node path computes with Python ints
                self.next_start = start
                if timing is not None:
                    del timing.phases[1:]  # (the walk's Filter: the per-node path times its own)
                result = CycleResult(pod, Code.UNSCHEDULABLE, num_nodes=len(nodes), timing=timing)
                if self.settings.explanation:  # explained from the answers the per-node walk keeps
                    explain = True
                    result.filtered, result.scores, result.unresolvable = {}, {}, set()
        if not nodes:  # (upstream's ErrNoNodesAvailable: no Filter ran)
            return result
        count = len(nodes)
        scoring = self._scoring
        # (an explain run without score rules still looks as far as the percentage says, for
        # the record, but takes the first node that fits and counts up to it, as the walk does)
        wanted = self._wanted(count, scoring or explain)
        start = self.next_start % count
        self.cancel.check()  # (node by node: explain runs and the int64 fallback, checked per stage)
        filtered = filter_nodes(bound, nodes, start, wanted, explain=explain)
        if check is not None:
            filtered = _respect_reserved(check, bound, nodes, start, wanted, filtered, explain)
        feasible = filtered.feasible
        looked = filtered.looked
        if not scoring and feasible:
            looked = _walked_to(nodes, start, feasible[0])
        looked = self._processed(snapshot, start, looked, missed)
        self.next_start = (start + looked) % count
        result.reasons.update(filtered.reasons)
        if filtered.rejected_by:
            result.rejected_by = frozenset(filtered.rejected_by)
        if result.filtered is not None and filtered.failed is not None:
            result.filtered.update(filtered.failed)
        if result.unresolvable is not None and filtered.unresolvable is not None:
            result.unresolvable.update(filtered.unresolvable)
        filtering_done = _phase(result, FILTER, started)
        result.evaluated, result.feasible = looked, len(feasible) if scoring else min(1, len(feasible))
        if not feasible:
            return result
        result.code = Code.SCHEDULED
        if len(feasible) == 1 and not explain:
            result.node = feasible[0].name
            return result
        self.cancel.check()
        scored = score_nodes(bound, feasible, explain=explain)
        if result.scores is not None and scored.per_node is not None:
            result.scores.update(scored.per_node)
        # (no score rule: every total is 0 and no tie is drawn; the first node that fit is taken)
        result.node = feasible[select_host(scored.totals, self.rng) if scoring else 0].name
        _phase(result, SCORE, filtering_done)
        return result

    def _wanted(self, count: int, scoring: bool | None = None) -> int:
        """How many feasible nodes end a walk over ``count`` nodes: upstream's
        numFeasibleNodesToFind; or 1 when the rule set has no score rule (findNodesThatPassFilters:
        without Score plugins or extenders any feasible node will do)."""
        if not (self._scoring if scoring is None else scoring):
            return 1
        return num_feasible_nodes_to_find(count, self.settings.percentage_of_nodes_to_score)

    def _processed(self, snapshot: Snapshot, start: int, looked: int, missed: str | None) -> int:
        """Upstream's processedNodes, which moves the next walk's start: the nodes the walk looked
        at, and the nominated node that did not fit (``missed``) if the walk did not reach it
        (its status is in the cycle's diagnosis already: findNodesThatFitPod)."""
        if missed is None:
            return looked
        row = self.framework.rows_by_name(snapshot).get(missed)
        if row is None or (row - start) % len(snapshot.nodes) < looked:
            return looked
        return looked + 1

    def _run_table(
        self,
        bound: BoundRules,
        snapshot: Snapshot,
        result: CycleResult,
        check: ReservedCheck | None,
        started: float,
        missed: str | None,
    ) -> CycleResult:
        table = self.framework.table(bound, snapshot)
        try:
            return self._walk(table, bound, snapshot, result, check, started, missed)
        finally:
            table.release()
            self.framework.ratio = table.ratio

    def _walk(
        self,
        table: NodeTable,
        bound: BoundRules,
        snapshot: Snapshot,
        result: CycleResult,
        check: ReservedCheck | None,
        started: float,
        missed: str | None,
    ) -> CycleResult:
        count = len(snapshot.nodes)
        wanted = self._wanted(count)
        start = self.next_start % count
        between = self.cancel.check
        rows, looked = table.feasible(start, wanted, between=between)
        dropped: list[int] = []  # rows that fit on their own, not with their nominated pods
        if check is not None:
            held = self.framework.rows_by_name(snapshot)
            held_rows = np.array([held[n] for n in check.reserved.nodes if n in held], dtype=np.intp)
            rows, looked = _reserved_rows(check, table, rows, looked, start, wanted, count, held_rows, between, dropped)
        looked = self._processed(snapshot, start, looked, missed)
        self.next_start = (start + looked) % count
        result.evaluated, result.feasible = looked, len(rows)
        if not len(rows):
            rejected_by: set[str] = set()
            failed = table.failures()
            known = None
            if failed is None:
                result.reasons.update(failure_reasons(bound, snapshot.nodes, rejected_by))
            else:
                cols = self.framework.current(snapshot)
                kept: list[GroupReasons] = []
                reasons, rejected_by = reason_counts(bound, cols, failed, kept, table.group_reasons)
                result.reasons.update(reasons)
                known = KnownFailures(bound, cols, failed, kept, lambda i: table.unresolvable_memo(i, snapshot))
                self._failed = (bound, snapshot.history, snapshot.pod_position, snapshot.node_generation, known)
            if check is not None:  # (no row left: the walk looked at every node, so ``dropped`` are all there are)
                result.reasons.update(_reserved_reasons(check, [table.node(r).name for r in dropped], rejected_by))
            result.rejected_by = frozenset(rejected_by)
            _phase(result, FILTER, started)
            self._explain(result, table, start, looked, rows, None, check, known)
            return result
        scoring = _phase(result, FILTER, started)
        result.code = Code.SCHEDULED
        if len(rows) == 1:
            result.node = table.node(int(rows[0])).name
            self._explain(result, table, start, looked, rows, None, check)
            return result
        between()
        matrix = table.vectors(rows)
        totals = weighted_totals(bound.scores, matrix, ranking_only=True)
        result.node = table.node(int(rows[select_host(totals, self.rng)])).name
        _phase(result, SCORE, scoring)
        self._explain(result, table, start, looked, rows, matrix, check)
        return result

    def columns(self, snapshot: Snapshot) -> NodeColumns:
        """The snapshot's nodes as columns (the tables' own, brought up to ``snapshot``)."""
        return self.framework.current(snapshot)

    def statuses(self, bound: BoundRules, snapshot: Snapshot) -> Mapping[str, Code]:
        """:func:`rulesched.scheduler.evaluate.node_statuses` of the last cycle's pod (its
        binding, its snapshot): from the rows its walk found failing, when it had them (then
        as an array over the nodes, :class:`NodeStatuses`)."""
        kept = self._failed
        now = (snapshot.history, snapshot.pod_position, snapshot.node_generation)
        if kept is None or kept[0] is not bound or kept[1:4] != now:
            return node_statuses(bound, snapshot.nodes)
        known = kept[4]
        codes = np.zeros(len(snapshot.nodes), dtype=np.int8)
        first = np.full(len(snapshot.nodes), -1, dtype=np.intp)  # (the walk looked at every node)
        for i, group in enumerate(known.failed):  # (the unresolvable answers the diagnosis asked, kept)
            codes[group.rows] = 1 + known.unresolvable(i).astype(np.int8)
            first[group.rows] = group.index
        names = tuple(f.name for f in bound.filters)
        return NodeStatuses(codes, snapshot.nodes, self.framework.rows_by_name(snapshot), first, names)

    def _explain(
        self,
        result: CycleResult,
        table: NodeTable,
        start: int,
        looked: int,
        rows: Rows,
        matrix: Matrix | None,
        check: ReservedCheck | None,
        known: KnownFailures | None = None,
    ) -> None:
        """With ``settings.explanation``: explain the walk just done, after its pick and timed
        apart (:mod:`rulesched.scheduler.explanation`); ``known``: what a walk that found no node
        learned of its failing rows (read, not asked again)."""
        if not self.settings.explanation and not (self.settings.diagnose and not len(rows)):
            return
        began = time.perf_counter()
        window = (start + np.arange(looked, dtype=np.intp)) % result.num_nodes
        full = self.settings.explanation == EXPLAIN_FULL
        codes_only = not self.settings.explanation  # (a diagnosis: its codes are what is read)
        result.explanation = explain_walk(table, window, rows, matrix, result.node, check, full, known, codes_only)
        result.explain_seconds += time.perf_counter() - began


def _explain_maps(result: CycleResult, bound: BoundRules, settings: SchedulerSettings) -> None:
    """The explanation of a node-by-node walk, from the maps it kept (those go unless
    ``settings.explain`` asked for them)."""
    began = time.perf_counter()
    filtered, scores, unresolvable = result.filtered or {}, result.scores or {}, result.unresolvable or set()
    rules = tuple(s.name for s in bound.scores)
    full = settings.explanation == EXPLAIN_FULL
    result.explanation = explain_nodes(
        filtered,
        unresolvable,
        scores,
        result.evaluated,
        rules,
        result.node,
        full,
        bound.ctx.pod,
        None if bound.ctx.cluster is None else bound.ctx.cluster.node_view,
    )
    if not settings.explain:
        result.filtered = result.scores = result.unresolvable = None
    result.explain_seconds += time.perf_counter() - began


def _walked_to(nodes: Sequence[NodeInfo], start: int, node: NodeInfo) -> int:
    """How many nodes a walk from ``start`` looks at to reach ``node`` (it included)."""
    count = len(nodes)
    for i in range(count):
        if nodes[(start + i) % count] is node:
            return i + 1
    return count


def _phase(result: CycleResult, point: str, since: float) -> float:
    """Record an extension point that began at ``since`` and ends now (when the cycle is timed);
    returns now."""
    timing = result.timing
    return 0.0 if timing is None else timing.phase(point, since)


# --- nodes holding nominated pods (rulesched.scheduler.nominator) -------------------------------


def _reserved_rows(
    check: ReservedCheck,
    table: NodeTable,
    rows: Rows,
    looked: int,
    start: int,
    wanted: int,
    count: int,
    held: Rows,
    between: Callable[[], None] | None,
    dropped: list[int],
) -> tuple[Rows, int]:
    """The table walk's rows without the nodes that do not fit once their nominated pods are
    added (``held``: the rows of nodes holding nominations), which go into ``dropped``; the walk
    goes on past them (never past its start) until ``wanted`` fit."""

    holding = np.zeros(count, dtype=bool)  # (a mask over the rows: np.isin sorted both sides each time)
    holding[held] = True

    def keep(rows: Rows) -> Rows:
        at = holding[rows]
        if not at.any():
            return rows
        names = [table.node(r).name for r in rows[at].tolist()]
        check.judge(names, fitting=True)  # (all at once where the columns can; the walk's feasible rows)
        fails = np.array([not check.passes(name) for name in names], dtype=bool)
        if not fails.any():
            return rows
        at[at] = fails  # (now the rows dropped)
        dropped.extend(rows[at].tolist())
        return rows[~at]

    kept = keep(rows)
    if len(kept) == len(rows):
        return rows, looked
    found = [kept]
    have = len(kept)
    while have < wanted and looked < count:
        more, extra = table.feasible((start + looked) % count, wanted - have, limit=count - looked, between=between)
        looked += extra
        more = keep(more)
        found.append(more)
        have += len(more)
    return np.concatenate(found), looked


def _respect_reserved(
    check: ReservedCheck,
    bound: BoundRules,
    nodes: Sequence[NodeInfo],
    start: int,
    wanted: int,
    filtered: Filtered,
    explain: bool,
) -> Filtered:
    """:func:`_reserved_rows` for the node-by-node walk; with ``explain`` (or when nothing fits)
    the nodes dropped are reported with the reasons they fail for with their nominated pods."""
    count = len(nodes)
    feasible, looked = check.keep(filtered.feasible), filtered.looked
    dropped = [n for n in filtered.feasible if not check.passes(n.name)]
    rotated = [*nodes[start:], *nodes[:start]]
    while len(feasible) < wanted and looked < count and dropped:
        more = filter_nodes(bound, rotated[looked:], 0, wanted - len(feasible), explain=explain)
        looked += more.looked
        if explain:
            filtered.reasons.update(more.reasons)
        if filtered.failed is not None and more.failed is not None:
            filtered.failed.update(more.failed)
        feasible += check.keep(more.feasible)
        dropped += [n for n in more.feasible if not check.passes(n.name)]
    if not feasible and not explain and dropped:  # the FitError message: every node's reasons
        filtered.reasons = failure_reasons(bound, nodes, filtered.rejected_by)
    for node in dropped:
        status = check.failure(node.name)
        assert status is not None
        if explain or not feasible:
            filtered.reasons.update(set(status.reasons))
            filtered.rejected_by.add(status.rule)
        if filtered.failed is not None:
            filtered.failed[node.name] = status.reasons
    filtered.feasible, filtered.looked = feasible, looked
    return filtered


def _reserved_reasons(check: ReservedCheck, fitting: Sequence[str], rejected_by: set[str]) -> Counter[str]:
    """Reasons of the reserved nodes ``fitting``, which pass every filter on their own but not
    with their nominated pods (the walk judged them so: the other nodes' reasons come from
    :func:`failure_reasons`; asking the filters again node by node here cost a failing cycle
    ~1 ms on the live preemption workload); the failing filters' names go into ``rejected_by``."""
    reasons: Counter[str] = Counter()
    for name in fitting:
        status = check.failure(name)
        if status is not None:
            reasons.update(set(status.reasons))
            rejected_by.add(status.rule)
    return reasons
