"""Preemption's dry runs for many nodes at once, as columns.

For each node preemption tries, :func:`rulesched.scheduler.preemption.select_victims` takes
every potential victim off, checks the pod fits, then puts them back one by one, most important
first (those whose eviction would violate a PodDisruptionBudget before the rest), keeping each
one the pod still fits beside. Done on a private overlay node by node, that is a dozen full
filter evaluations per node: at 5000 nodes, seconds per preemptor. When every filter's answer
on a node depends only on that node (its own pods through a few numbers: free and requested
resources, the pod count, host ports), the nodes' dry runs do not affect each other, so they can
run together: :class:`DryRunColumns` are the tried nodes' columns as they are with the pods
taken off so far (the snapshot's columns plus, per row, the sums of what is off), and each step
of every node's dry run is one column evaluation over all the nodes at that step.

Exactness: a filter qualifies only if everything it reads of a node is such a number, a field
no pod changes (labels, taints, allocatable), or the node passed whole to a built-in that reads
no pod-dependent field or whose answer, for this pod, no removal of running pods can change
(:data:`UNAFFECTED`). Anything else — a value the columns cannot hold exactly, a victim holding
host ports, a reason the columns cannot give — sends the node (or the whole preemption) back to
the node-by-node dry run, which gives the same answers. The columns, and which rules qualify:
:mod:`rulesched.engine.dryrun_columns`. A node the cycle's walk already judged (its first
failing filter) is not asked again the filters no pod changes (:class:`Known`).
Next stage: :func:`rulesched.scheduler.candidates.pick_candidate` over the candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.engine.arrays import Unsupported
from rulesched.engine.batch import columns_of
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.engine.dryrun_columns import UNAFFECTED, DryRunColumns, changing_filters, held_counted, node_local
from rulesched.engine.encoded import encode
from rulesched.engine.failures import as_reasons
from rulesched.lang import BoundRules
from rulesched.lang.evaluation.stages import NodeMemos
from rulesched.model import Pod

__all__ = [
    "UNAFFECTED",
    "DryRunColumns",
    "Failed",
    "Known",
    "Together",
    "changing_filters",
    "dry_runs_together",
    "failing_reasons",
    "failing_reasons_at",
    "held_counted",
    "node_local",
    "passing",
    "passing_as_is",
]


def _priority(pod: Pod) -> int:
    return pod.priority


def _started(pod: Pod) -> float:
    """GetPodStartTime as pick_candidate reads it: none counts as starting now (after all)."""
    return pod.start_time or np.inf


def passing(
    bound: BoundRules,
    cols: DryRunColumns,
    rows: Rows,
    filters: Sequence[int] | None = None,
    known: Known | None = None,
    failed: Failed | None = None,
) -> npt.NDArray[np.bool_]:
    """Whether each row's node (as ``cols`` has it now) passes every filter (or those of
    ``filters``, by index), and for nodes holding nominated pods with those added as well
    (RunFilterPluginsWithNominatedPods); raises Unsupported where the columns cannot say.
    ``known``: what the cycle found of the filters no pod changes, read instead of asked.
    ``failed``: where to note the filter each failing row failed first."""
    ok = passing_as_is(bound, cols, rows, filters, known, None if failed is None else failed.as_is)
    held = np.flatnonzero(ok & cols.has_held[rows])
    if len(held):
        # (a nominated pod added changes only what a pod put back would: the other filters
        # passed on these rows just now, and answer alike with the nominated pods added)
        changing = changing_filters(bound)
        again = changing if filters is None else [i for i in filters if i in changing]
        at = None if failed is None else np.full(len(held), -1, dtype=np.intp)
        cols.with_held = True
        try:
            ok[held] = passing_as_is(bound, cols, rows[held], again, failed=at)
        finally:
            cols.with_held = False
        if failed is not None and at is not None:
            failed.with_held[held] = at
    return ok


class Failed:
    """Per row of a :func:`passing` call, the filter (index) it failed first as the columns have
    it (``as_is``), or only with its nominated pods added (``with_held``); -1 where not."""

    __slots__ = ("as_is", "with_held")

    def __init__(self, rows: int) -> None:
        self.as_is = np.full(rows, -1, dtype=np.intp)
        self.with_held = np.full(rows, -1, dtype=np.intp)


class Known:
    """What the cycle's walk found of the nodes tried, as the snapshot has them (every pod on,
    no nominated pod added): per row of a :class:`DryRunColumns`, the index (in ``bound.filters``)
    of the first filter its node failed, -1 where it passed them all. A filter no pod changes
    (:func:`changing_filters`) answers the same with any of the node's pods off or nominated pods
    added, so for it a row's answer is known: it passes if the row failed a later filter first
    (or none), fails if it failed this one first, and is asked only if it failed an earlier
    (changing) one first."""

    __slots__ = ("first", "steady")

    def __init__(self, bound: BoundRules, first: npt.NDArray[np.intp]) -> None:
        self.first = first
        changing = set(changing_filters(bound))
        self.steady = frozenset(i for i in range(len(bound.filters)) if i not in changing)

    def answers(self, index: int, rows: Rows) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]] | None:
        """For filter ``index`` on ``rows``: (known, passes) per row (``passes`` meaningful where
        ``known``); None when nothing is known of it."""
        if index not in self.steady:
            return None
        first = self.first[rows]
        return ~((first >= 0) & (first < index)), (first < 0) | (first > index)


def _ask(bound: BoundRules, cols: DryRunColumns, rows: Rows, index: int, known: Known | None) -> npt.NDArray[np.bool_]:
    """Whether each row passes filter ``index``: what ``known`` says, the rest evaluated."""
    found = known.answers(index, rows) if known is not None else None
    if found is None:
        return _filter(bound, cols, rows, index)
    have, ok = found
    ask = np.flatnonzero(~have)
    if len(ask):
        ok[ask] = _filter(bound, cols, rows[ask], index)
    return ok


def passing_as_is(
    bound: BoundRules,
    cols: DryRunColumns,
    rows: Rows,
    filters: Sequence[int] | None,
    known: Known | None = None,
    failed: npt.NDArray[np.intp] | None = None,
) -> npt.NDArray[np.bool_]:
    """:func:`passing` as ``cols`` has the nodes now (nominated pods added only if
    ``cols.with_held``); ``failed[j]`` is set to the filter row j failed first."""
    alive = np.ones(len(rows), dtype=bool)
    for i in range(len(bound.filters)) if filters is None else filters:
        live = np.flatnonzero(alive)
        if not len(live):
            break
        dead = live[~_ask(bound, cols, rows[live], i, known)]
        alive[dead] = False
        if failed is not None:
            failed[dead] = i
    return alive


def failing_reasons_at(
    bound: BoundRules, cols: DryRunColumns, rows: Rows, at: npt.NDArray[np.intp], unknown: tuple[str, ...] | None = None
) -> list[tuple[str, ...] | None]:
    """For each of ``rows`` where ``at`` names a filter (index, >= 0), which the row fails first
    (as ``cols`` has it now): that filter's reasons there, as :func:`failing_reasons` gives them
    (with ``unknown``: it, for the rows of a filter whose reasons the columns cannot give); None
    where ``at`` is negative. Each filter's rows are asked together."""
    out: list[tuple[str, ...] | None] = [None] * len(rows)
    for index in sorted(set(at[at >= 0].tolist())):
        mine = np.flatnonzero(at == index)
        for j, why in zip(mine.tolist(), failing_reasons(bound, cols, rows[mine], index, unknown), strict=True):
            out[j] = why
    return out


def failing_reasons(
    bound: BoundRules, cols: DryRunColumns, rows: Rows, index: int, unknown: tuple[str, ...] | None = None
) -> list[tuple[str, ...]]:
    """The reasons of filter ``index`` on each of ``rows``, which fail it (as ``cols`` has them
    now); with ``unknown``, that for every row when the columns cannot give them (else
    Unsupported is raised)."""
    bodies = columns_of(bound)
    assert bodies is not None
    f = bound.filters[index]
    expr = bodies.filter_reasons[index]
    if expr is None:
        return [f.reasons(cols.nodes[int(rows[0])])] * len(rows)
    try:
        encoded = encode(bodies.evaluator, expr, bound.ctx, cols, rows, {})
    except Unsupported:
        if unknown is None:
            raise
        return [unknown] * len(rows)
    default = (f"node(s) didn't satisfy rule {f.name}",)
    table = [as_reasons(v, default) for v in encoded.values]
    return [table[c] for c in encoded.codes.tolist()]


def _filter(bound: BoundRules, cols: DryRunColumns, rows: Rows, index: int) -> npt.NDArray[np.bool_]:
    bodies = columns_of(bound)
    assert bodies is not None
    body = bodies.filters[index]
    if body is not None:
        return bodies.evaluator.filter(body, bound.ctx, cols, rows)
    fields = bodies.filter_fields[index]
    groups = cols.groups(fields) if fields is not None else None
    if groups is None:
        raise Unsupported("filter not evaluable over these rows")
    f = bound.filters[index]
    bound.watch.rule = f.name
    answers = np.array(bound.watch.each(f.passes, groups.representatives, cols.nodes), dtype=bool)
    return answers[groups.codes[rows]]


class Together:
    """What the dry runs of many nodes at once found, by index into the nodes tried: those the
    pod fits not even with every potential victim gone (``no_fit``; why: :meth:`no_fit_reasons`),
    and the budget violations of each candidate (``candidates``), whose victims :meth:`victims`
    gives and of which :meth:`choosable` says which pick_candidate may choose. Nodes in neither
    are left to the node-by-node dry run."""

    def __init__(self) -> None:
        self.no_fit: frozenset[int] = frozenset()
        self.candidates: dict[int, int] = {}
        self._reasons: dict[int, tuple[str, ...]] | None = None
        self._bound: BoundRules | None = None
        self._cols: DryRunColumns | None = None
        self._failed: Failed | None = None
        self._gone = np.zeros(0, dtype=bool)
        self._violations = np.zeros(0, dtype=np.int64)
        self._orders: Sequence[Sequence[Pod]] = ()
        self.violating: Sequence[int] = ()  # per node: how many of its pods put back first break a budget

    def no_fit_reasons(self) -> dict[int, tuple[str, ...]]:
        """Why the pod fits each ``no_fit`` node not even with every potential victim gone, as
        BoundRules.first_failure gives it; those the columns cannot give are missing (their dry
        run node by node says). Worked out when first asked: only a preemption that finds no
        candidate reports them (its FitError message), so most never are. The columns are as
        the dry runs left them; no step ever touched a ``no_fit`` node's rows, so its answers
        are those of the moment its fit was checked."""
        if self._reasons is None:
            self._reasons = {}
            rows = np.array(sorted(self.no_fit), dtype=np.intp)
            bound, cols, failed = self._bound, self._cols, self._failed
            if len(rows) and bound is not None and cols is not None and failed is not None:
                try:  # (each row's failing filter as the fit check found it: only its reasons asked)
                    self._reasons = _reasons_at(bound, cols, rows, failed)
                except Unsupported:  # (their reasons: node by node)
                    self._reasons = {}
        return self._reasons

    def victims(self, i: int) -> list[Pod]:
        """Candidate ``i``'s victims, in the order they were tried."""
        assert self._cols is not None
        s, n = int(self._cols.starts[i]), int(self._cols.lengths[i])
        return [p for p, g in zip(self._orders[i], self._gone[s : s + n].tolist(), strict=True) if g]

    def choosable(self, indices: Sequence[int], ties: bool = False) -> list[int]:
        """Of the candidates ``indices`` (in node order), those pick_candidate may choose among
        them: the first needing no victim, and the first of those best by its criteria (with
        ``ties``, every one of those best: pick_candidate then breaks the tie)."""
        if not indices:
            return []
        assert self._cols is not None
        done = np.asarray(indices, dtype=np.intp)
        found: list[int] = _choosable(self._cols, self._gone, self._violations, done, ties).tolist()
        return found


def dry_runs_together(
    bound: BoundRules,
    base: NodeColumns,
    nodes: Sequence[Any],
    rows: Rows,
    orders: Sequence[Sequence[Pod]],
    violating: Sequence[int],
    held: Sequence[Sequence[Pod]] = (),
    between: Callable[[], None] | None = None,
    memos: NodeMemos | None = None,
    first: npt.NDArray[np.intp] | None = None,
) -> Together:
    """SelectVictimsOnNode for each of ``nodes`` (rows ``rows`` of ``base``) at once: every pod of
    ``orders[i]`` off, then each put back in that order and kept if the pod still fits beside it;
    the first ``violating[i]`` of them would violate a budget if evicted. ``held[i]``: the pods
    nominated to node i the pod must fit beside as well. ``between`` is called before the first
    fit check and each step after (each a few column evaluations over the nodes still
    undecided): it may raise to give the dry runs up (nothing outside them has changed).
    ``first[i]``: the first filter node i failed in the cycle's walk, as :class:`Known` reads it
    (None: not known)."""
    out = Together()
    if between is not None:
        between()
    cols = DryRunColumns(nodes, base, rows, orders, held, memos)
    m = len(nodes)
    every = np.arange(m, dtype=np.intp)
    known = Known(bound, first) if first is not None else None
    failed = Failed(m)  # (which filter each node failed: its reasons asked later, if ever)
    fits = passing(bound, cols, every, known=known, failed=failed)
    out.no_fit = frozenset(every[~fits].tolist())  # (why: asked later, if ever; no step changes their rows)
    out._bound, out._failed = bound, failed
    # (each step asks only the filters a pod put back can change: every other one passed on
    # these nodes with all of their pods off, and answers alike with any put back)
    changing = changing_filters(bound)
    lengths, starts = cols.lengths, cols.starts
    gone = np.zeros(len(cols.flat), dtype=bool)
    finished = []
    active, k = every[fits], 0
    while len(active):
        finished.append(active[lengths[active] <= k])
        # (columns to the last node: finishing the last few node by node, as this did once
        # fewer than 8 were left, made a batch cost 3.0-4.2 ms against 2.2-2.5 on the live
        # preemption workload, whose nodes hold 5-13 pods; benchmarks/README.md, Run 29)
        step = active[lengths[active] > k]
        if not len(step):
            break
        if between is not None:
            between()
        at = starts[step] + k
        cols.put(at, step, 1)
        ok = passing(bound, cols, step, changing)
        if not ok.all():  # those that no longer fit with it back: it goes
            cols.put(at[~ok], step[~ok], -1)
            gone[at[~ok]] = True
        active, k = step, k + 1
    done = np.concatenate(finished) if finished else every[:0]
    position = np.arange(len(cols.flat)) - np.repeat(starts, lengths)
    breaks = gone & (position < np.repeat(np.asarray(violating, dtype=np.intp), lengths))
    violations = np.add.reduceat(breaks.astype(np.int64), starts) if m else np.zeros(0, np.int64)
    out.candidates = dict(zip(done.tolist(), violations[done].tolist(), strict=True))
    out._cols, out._gone, out._violations, out._orders = cols, gone, violations, orders
    out.violating = violating
    return out


def _reasons_at(bound: BoundRules, cols: DryRunColumns, rows: Rows, failed: Failed) -> dict[int, tuple[str, ...]]:
    """The reasons of each of ``rows`` (which failed the fit check) for the filter ``failed``
    says it failed first there, as BoundRules.first_failure gives them (with the node's
    nominated pods added where it failed only with them)."""
    out: dict[int, tuple[str, ...]] = {}
    for held, at in ((False, failed.as_is[rows]), (True, failed.with_held[rows])):
        cols.with_held = held
        try:
            found = failing_reasons_at(bound, cols, rows, at)
        finally:
            cols.with_held = False
        out.update((row, why) for row, why in zip(rows.tolist(), found, strict=True) if why is not None)
    if len(out) != len(rows):
        raise AssertionError("a row that failed the fit check has no failing filter")
    return out


def _choosable(
    cols: DryRunColumns,
    gone: npt.NDArray[np.bool_],
    violations: npt.NDArray[np.int64],
    done: Rows,
    ties: bool = False,
) -> Rows:
    """Of the ``done`` rows (in node order), those pick_candidate may choose: the first needing no
    victim, and the first of those best by its criteria (fewest budget violations, lowest
    highest victim priority, smallest priority sum, fewest victims, latest start of the highest
    priority victims: rulesched.scheduler.candidates.pick_candidate, without the rules' order),
    or with ``ties`` all of those best."""
    starts, lengths = cols.starts, cols.lengths
    offset = 2**31  # (as pick_candidate: upstream's MaxInt32 + 1)
    priority = cols.flat_values("priority", _priority, np.int64)
    started = cols.flat_values("started", _started, float)
    count = np.add.reduceat(gone.astype(np.int64), starts)
    total = np.add.reduceat(np.where(gone, priority + offset, 0), starts)
    top = np.maximum.reduceat(np.where(gone, priority, np.iinfo(np.int64).min), starts)
    highest = gone & (priority == np.repeat(top, lengths))
    earliest = np.minimum.reduceat(np.where(highest, started, np.inf), starts)
    keep = [done[count[done] == 0][:1]]
    remaining = done[count[done] > 0]
    if len(remaining):
        for criterion in (-violations, -top, -total, -count, earliest):
            values = criterion[remaining]
            remaining = remaining[values == values.max()]
            if len(remaining) == 1:
                break
        keep.append(remaining if ties else remaining[:1])
    return np.concatenate(keep)
