"""Preemption for a pod that fits nowhere: kube-scheduler's DefaultPreemption, driven by rules.

Only nodes whose filter status is Unschedulable are tried: a node whose failure is
UnschedulableAndUnresolvable (its first failing filter's ``unresolvable`` clause holds there)
counts as "Preemption is not helpful for scheduling", as upstream's nodesWherePreemptionMightHelp
has it. Of the others, a bounded sample is tried, as DefaultPreemption samples them: from a random
offset (the cycle's seeded source), wrapping round, until one candidate violates no budget and
there are numCandidates (DefaultPreemptionArgs: :class:`Sampling`) in all; only those are
compared. For each node tried, the pods every applicable ``preempt`` rule allows to be evicted are the potential
victims. If the pod fits once all of them are gone, as many as possible are reprieved — those
whose eviction would violate a PodDisruptionBudget first, then the rest, most important first —
and the remaining ones are the node's victims. The node is then chosen by upstream's order:
fewest PDB violations, lowest highest-victim priority, smallest priority sum, fewest victims,
latest start time of the highest-priority victims; of candidates still equal (upstream takes
whichever its map yields first), one whose node holds no lower-priority pod's nomination.

The dry runs take pods off and put them back on a :class:`rulesched.cluster.snapshot.ClusterOverlay`
of the cycle's snapshot (cloned node infos, a private continuation of the pod journal, indexes
forked from the session's), as kube-scheduler simulates on cloned node infos: the snapshot and
the store are never touched. Every fit check there respects the node's nominated pods of the
preemptor's priority or higher (:mod:`rulesched.scheduler.nominator`): the preemptor must fit both
without them and with them added, as upstream's filters with nominated pods.

A pod nominated to a node where a lower-priority pod is terminating because a scheduler
preempted it (``DisruptionTarget`` condition, reason ``PreemptionByScheduler``; or rulesched's own
condition, since the Eviction API, through which rulesched evicts the victims a budget selects,
rewrites ``DisruptionTarget``: see
``Pod.preempted_by_scheduler``) waits for that pod to leave rather than preempt again
(upstream's PodEligibleToPreemptOthers).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rulesched.cluster.snapshot import ClusterOverlay, Snapshot
from rulesched.engine import NodeColumns, Together, Unsupported, dry_runs_together, node_local
from rulesched.lang import CHECK_EVERY, BoundRules, ForkedIndexes, NodeMemos, Session
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.scheduler.budgets import eviction_refused, put_back_orders, split_by_pdb
from rulesched.scheduler.candidates import Candidate, pick_candidate
from rulesched.scheduler.evaluate import NodeStatuses, node_statuses
from rulesched.scheduler.framework import (
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
    Code,
    Preemption,
    fit_error,
    num_candidates,
)
from rulesched.scheduler.nominator import Reserved
from rulesched.scheduler.potential import PRIORITY_SETS, Potential, importance, pod_priorities

NO_VICTIMS = "No preemption victims found for incoming pod"
# a node whose only potential victims are spared (rulesched.scheduler.removals): their eviction refused
REFUSED = "No preemption victims but pods whose eviction a PodDisruptionBudget refused"
# a node whose victims would violate a PodDisruptionBudget, where evictions keep budgets (the
# Eviction API refuses them: ``budgets_refuse``)
VIOLATES_BUDGET = "No preemption victims found without violating a PodDisruptionBudget"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NOT_ELIGIBLE_TERMINATING = "preemption: not eligible due to a terminating pod on the nominated node."
BATCH_FROM = 16  # nodes tried from which their dry runs go together, as columns
OUTRANK = True  # dry runs together hand pick_candidate only the candidates it may choose


@dataclass(frozen=True)
class NoFit:
    """The pod fits the node not even with every potential victim gone: why (the reasons of the
    first filter it still fails there, which upstream's dry run reports as the node's status)."""

    reasons: tuple[str, ...]


_LEFT = NoFit(())  # (a sentinel: a node left to the node-by-node dry run)


@dataclass(frozen=True)
class Sampling:
    """DefaultPreemptionArgs' minCandidateNodesPercentage and minCandidateNodesAbsolute."""

    percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE
    absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE


def preempt(
    snapshot: Snapshot,
    session: Session,
    pod: Pod,
    statuses: Mapping[str, Code] | None = None,
    reserved: Reserved | None = None,
    columns: NodeColumns | None = None,
    between: Callable[[], None] | None = None,
    sampling: Sampling = Sampling(),
    rng: random.Random | None = None,
    victim_order: Callable[[Pod], tuple[Any, ...]] | None = None,
    cycle_bound: BoundRules | None = None,
    spared: Mapping[str, frozenset[str]] | None = None,
    budgets_refuse: bool = False,
    displacing: frozenset[str] = frozenset(),
) -> Preemption:
    """Find the node and victims for ``pod``; the caller evicts and nominates. ``statuses`` are
    the cycle's filter statuses of the nodes (a node missing from them counts as unresolvable, as
    upstream's NodeToStatus has it, unless it holds nominated pods: the pod then failed there
    only with them added); without them they are computed here. ``reserved``: the nominated pods
    it must leave room for, per node. ``columns``: the snapshot's nodes as columns, for dry runs
    of many nodes at once (:mod:`rulesched.engine.dryrun`). ``between`` is called before each
    node's dry run and each step of the dry runs done together: it may raise to give preemption
    up (a cancelled cycle; nothing was changed). ``sampling`` bounds how many candidates are
    looked for, from an offset ``rng`` draws (None: the first potential node); see
    :func:`_find_candidates`. ``victim_order``: the victims' importance, most important first, when pod
    groups make it more than :func:`importance` (upstream's MoreImportantVictim: a group's pods
    before single pods of the same priority; :func:`rulesched.scheduler.victims.order_key`).
    ``cycle_bound``: the cycle's binding of ``pod`` (on ``snapshot``, which nothing here
    changes), for what reads the snapshot as it is: the preempt rules, the statuses, a check
    that needs no dry run (:func:`_nobody_to_evict`) and the dry runs done together, as columns
    (whose column bodies the walk has compiled already); the dry runs node by node, which take
    pods off and put them back, have a private binding on an overlay, made when first needed.
    ``spared``: node name -> keys of pods there that are no potential victims (their eviction
    was refused: :mod:`rulesched.scheduler.removals`); a node left without victims by them counts
    as :data:`REFUSED` in the message. ``budgets_refuse``: the victims a budget selects go through
    the Eviction API, which refuses an eviction that would violate the budget (``run
    --evict-victims`` budgeted or all): a candidate whose victims the store says would violate
    one is futile, so it is none (counted as :data:`VIOLATES_BUDGET`; see :func:`_find_candidates`).
    ``displacing``: the nodes a lower-priority pod is nominated to; of candidates upstream's
    order leaves equal, one elsewhere is chosen (:func:`pick_candidate`)."""
    if cycle_bound is not None and statuses is not None and columns is not None:
        nobody = _nobody_to_evict(
            snapshot, pod, cycle_bound, session.rules.node_memos, columns, statuses, reserved, rng
        )
        if nobody is not None:
            return nobody
    private = _Private(session, pod, snapshot)
    bound = cycle_bound if cycle_bound is not None else private.bound()
    if not bound.preempts:
        return Preemption(None, message="preemption: not eligible due to preemptionPolicy=Never.", eligible=False)
    if statuses is None:
        statuses = node_statuses(bound, snapshot.nodes)
    # PodEligibleToPreemptOthers: a nominated node that has become unresolvable is given up
    unresolvable = statuses.get(pod.nominated_node_name) is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    if not unresolvable and _victim_terminating(snapshot, bound, pod):
        return Preemption(None, message=NOT_ELIGIBLE_TERMINATING, eligible=False)
    held = reserved.nodes if reserved is not None else {}
    counts: Counter[str] = Counter()
    potential = Potential(bound, session.rules.node_memos, victim_order, spared)
    order, many = _rows_to_try(snapshot, statuses, held, potential, columns, counts, rng)
    wanted = num_candidates(many, sampling.percentage, sampling.absolute)
    first = _cycle_first(statuses, bound)
    candidates = _find_candidates(
        snapshot,
        private,
        bound,
        order,
        wanted,
        potential,
        columns,
        held,
        between,
        counts,
        first,
        budgets_refuse,
        displacing,
    )
    if not candidates:
        message = "preemption: " + fit_error(len(snapshot.nodes), counts)
        return Preemption(None, message=message, futile=VIOLATES_BUDGET in counts)
    chosen = pick_candidate(candidates, _rule_order(snapshot, bound), displacing)
    message = found_message(chosen.node, len(chosen.victims))
    return Preemption(chosen.node, chosen.victims, message=message, pdb_violations=chosen.pdb_violations)


def found_message(node: str, victims: int) -> str:
    """What 1.37's default preemption adds to the FailedScheduling event and the PodScheduled
    condition when it found a node (kubernetes PR #140180)."""
    return f"preemption: found a potential placement for pod on node {node}, preempting {victims} victims"


class _Private:
    """A private binding of the pod on an overlay of the snapshot (the dry runs node by node take
    pods off it and put them back), bound when first asked for."""

    def __init__(self, session: Session, pod: Pod, snapshot: Snapshot) -> None:
        self._session, self._pod, self._snapshot = session, pod, snapshot
        self._found: tuple[ClusterOverlay, BoundRules] | None = None

    def bound(self) -> BoundRules:
        return self.get()[1]

    def get(self) -> tuple[ClusterOverlay, BoundRules]:
        """The overlay and the binding on it."""
        if self._found is None:
            session, snapshot = self._session, self._snapshot
            overlay = ClusterOverlay(snapshot)
            self._found = (overlay, session.bind_private(self._pod, overlay, ForkedIndexes(session.indexes, snapshot)))
        return self._found


def _find_candidates(
    snapshot: Snapshot,
    private: _Private,
    bound: BoundRules,
    order: Sequence[int],
    wanted: int,
    potential: Potential,
    columns: NodeColumns | None,
    held: Mapping[str, Sequence[Pod]],
    between: Callable[[], None] | None,
    counts: Counter[str],
    first: npt.NDArray[np.intp] | None = None,
    budgets_refuse: bool = False,
    displacing: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """DryRunPreemption: the nodes of ``order`` (rows, from the offset on, wrapping) are
    dry-run in that order until at least one candidate would violate no PodDisruptionBudget and
    there are ``wanted`` candidates in all, as upstream stops, keeping the first ``wanted``
    violating ones (as upstream's lists hold no more); the candidates found, in node
    order (pick_candidate takes the first of equals). Upstream dry-runs the nodes in parallel,
    so which nodes past the stop it has also tried varies from run to run; here the walk is
    sequential, so the candidates are the same for the same offset (the same seed). Dry runs are
    done together as columns in chunks of the walk (as many nodes as candidates are still
    wanted, at least BATCH_FROM, and the rest of the walk too when fewer than BATCH_FROM would
    be left), whose answers past the stop are dropped: the same candidates
    as node by node. When none is found (every node was tried), why the pod fits none is
    counted for the message; else it is not worked out at all. ``bound`` evaluates the dry runs
    together (on the snapshot's columns), ``private`` those node by node (on its overlay).
    ``first``: per row, the first
    filter the cycle's walk found the node failing (:func:`_cycle_first`), for the dry runs
    together to read rather than ask again.

    ``budgets_refuse``: a candidate whose victims, evicted, would take some budget below zero
    (:func:`~rulesched.scheduler.budgets.eviction_refused`) is dropped, counted as :data:`VIOLATES_BUDGET`, yet still counts towards
    the stop as upstream's. Upstream's violation count (filterPodsWithPDBViolation over all the
    potential victims, those reprieved included) is kept for the order: a candidate it counts as
    violating may well be evicted, its budgets counted over its victims alone. So the pick is
    upstream's whenever upstream's pick is not refused (the best of all candidates is the best of
    those kept); where upstream would send an eviction the Eviction API refuses (its plain DELETE
    never meets one), the next best is taken, or, with none left, the pod stays unschedulable."""
    nodes = snapshot.nodes
    rank = OUTRANK and not any(p.order is not None for p in bound.preempts)
    together_ok = columns is not None and node_local(bound)
    found: list[tuple[int, Candidate]] = []
    safe = unsafe = 0  # candidates violating no budget, and those violating some
    # Upstream keeps at most numCandidates of each kind (newCandidateList): violating candidates
    # found past that many are dropped. (At least one: numCandidates 0, which only a percentage
    # rounding down to 0 with minCandidateNodesAbsolute 0 gives, would find none at all there.)
    room = max(wanted, 1)
    at, left = 0, CHECK_EVERY
    unfit: list[tuple[Together, int, str, list[Pod]]] = []  # nodes the dry runs together found no fit on
    while at < len(order) and not (safe and safe + unsafe >= wanted):
        size = max(wanted - safe - unsafe, 1)
        if together_ok:
            size = max(size, BATCH_FROM)
            if len(order) - at - size < BATCH_FROM:
                # (a tail shorter than a batch would go node by node, at several times a node's
                # cost together: it joins this chunk, whose answers past the stop are dropped)
                size = len(order) - at
        tried: list[tuple[int, Any, list[Pod]]] = []  # (row, node, its potential victims)
        while at < len(order) and len(tried) < size:
            row = order[at]
            at += 1
            node = nodes[row]
            left -= 1
            if not left:  # (the preempt rules' answers for each pod on the node: checked every few nodes)
                left = bound.watch.tick()
            allowed = potential.victims(node)
            if not allowed:
                counts[REFUSED if potential.spares(node) else NO_VICTIMS] += 1
                continue
            tried.append((row, node, allowed))
        together = (
            _dry_runs_together(bound, columns, tried, snapshot.pdbs, held, between, potential.memos, first)
            if together_ok
            else None
        )
        kept: list[int] = []  # the candidates found together, up to the stop
        for i, (row, node, victims) in enumerate(tried):
            if safe and safe + unsafe >= wanted:
                break
            outcome: Candidate | NoFit | int | None = together.candidates.get(i) if together is not None else None
            if outcome is None:
                if together is not None and i in together.no_fit:
                    unfit.append((together, i, node.name, victims))  # (why: asked only if no candidate is found)
                    continue
                if between is not None:
                    between()
                outcome = select_victims(*private.get(), node.name, victims, held.get(node.name, ()))
            if isinstance(outcome, NoFit):
                counts.update(set(outcome.reasons))
                continue
            violations = outcome if isinstance(outcome, int) else outcome.pdb_violations
            if violations and unsafe >= room:
                continue  # (upstream's list of violating candidates is full: dropped)
            if violations:
                unsafe += 1
                if budgets_refuse:
                    if isinstance(outcome, int):  # (its victims, to see whether evicting them is futile)
                        outcome = _together_candidate(node.name, together, i)  # type: ignore[arg-type]
                    if eviction_refused(outcome.victims, snapshot.pdbs):
                        counts[VIOLATES_BUDGET] += 1
                        continue
            else:
                safe += 1
            if isinstance(outcome, int):
                kept.append(i)
            else:
                found.append((row, outcome))
        if together is not None and kept:
            kept.sort(key=lambda i: tried[i][0])  # (node order, as pick_candidate takes them)
            for i in together.choosable(kept, ties=bool(displacing)) if rank else kept:
                found.append((tried[i][0], _together_candidate(tried[i][1].name, together, i)))
    if not found:  # (the FitError message counts why the pod fits none of them; else unused)
        alike: Counter[tuple[str, ...]] = Counter()  # (nodes mostly fail alike: each reason tuple once)
        reasons_of: dict[int, dict[int, tuple[str, ...]]] = {}  # (each dry run's, asked once)
        for together, i, name, victims in unfit:
            known = reasons_of.get(id(together))
            if known is None:
                known = reasons_of[id(together)] = together.no_fit_reasons()
            why = known.get(i)
            if why is None:  # (the columns cannot say: node by node)
                if between is not None:
                    between()
                outcome = select_victims(*private.get(), name, victims, held.get(name, ()))
                why = outcome.reasons if isinstance(outcome, NoFit) else ()
            alike[why] += 1
        for why, failing in alike.items():
            for reason in set(why):
                counts[reason] += failing
    found.sort(key=lambda c: c[0])
    return [c for _, c in found]


def _cycle_first(statuses: Mapping[str, Code], bound: BoundRules) -> npt.NDArray[np.intp] | None:
    """Per row, the first filter (index in ``bound.filters``) the cycle's walk found each node
    failing (-1: none), when the statuses carry it and the cycle's binding had the same filters
    in the same order as ``bound``; else None."""
    if not isinstance(statuses, NodeStatuses) or statuses.first is None:
        return None
    if statuses.filters != tuple(f.name for f in bound.filters):
        return None
    return statuses.first


def _rows_to_try(
    snapshot: Snapshot,
    statuses: Mapping[str, Code],
    held: Mapping[str, Any],
    potential: Potential,
    columns: NodeColumns | None,
    counts: Counter[str],
    rng: random.Random | None = None,
) -> tuple[list[int], int]:
    """The rows of the nodes preemption tries (status Unschedulable, or none where nominated
    pods are held: upstream's potential nodes) from an offset ``rng`` draws among them, wrapping
    round (GetOffsetAndNumCandidates), and how many potential nodes there are; the others are
    counted as not helpful, and (as arrays, when the statuses and the columns allow) those whose
    pods' priorities the rules all refuse are counted as having no victims and left out."""
    nodes = snapshot.nodes
    tried = _potential_rows(nodes, statuses, held, counts)
    many = len(tried)
    if not isinstance(tried, np.ndarray):
        offset = rng.randrange(many) if rng is not None and many else 0
        return tried[offset:] + tried[:offset], many
    if rng is not None and many:
        offset = rng.randrange(many)
        tried = np.concatenate((tried[offset:], tried[:offset]))
    if columns is not None and potential.by_priority and many:
        wanted = potential.wanted_rows(nodes, columns, tried)
        if not wanted.all():
            counts[NO_VICTIMS] += int(np.count_nonzero(~wanted))
            tried = tried[wanted]
    found: list[int] = tried.tolist()
    return found, many


def _potential_rows(
    nodes: Sequence[Any], statuses: Mapping[str, Code], held: Mapping[str, Any], counts: Counter[str]
) -> list[int] | npt.NDArray[np.intp]:
    """The rows of upstream's potential nodes (status Unschedulable, or none where nominated pods
    are held), in node order (an array when ``statuses`` is one); the others counted as not
    helpful."""
    if not isinstance(statuses, NodeStatuses):
        out = []
        for row, node in enumerate(nodes):
            if statuses.get(node.name, Code.UNSCHEDULABLE if node.name in held else None) is Code.UNSCHEDULABLE:
                out.append(row)
            else:
                counts[NOT_HELPFUL] += 1
        return out
    codes = statuses.codes
    if held:
        codes = codes.copy()
        for name in held:
            at = statuses.rows.get(name)
            if at is not None and codes[at] == 0:
                codes[at] = 1
    tried = np.flatnonzero(codes == 1)
    if len(nodes) > len(tried):
        counts[NOT_HELPFUL] += len(nodes) - len(tried)
    return tried


def _nobody_to_evict(
    snapshot: Snapshot,
    pod: Pod,
    bound: BoundRules,
    memos: NodeMemos,
    columns: NodeColumns,
    statuses: Mapping[str, Code],
    reserved: Reserved | None,
    rng: random.Random | None,
) -> Preemption | None:
    """What :func:`preempt` answers when no pod on a potential node (status Unschedulable, or
    holding nominated pods) is one the preempt rules allow to evict (every rule reads the victim
    only through its priority, not the node, and refuses every priority those pods have: a
    replay whose pods share one priority), found without a private binding or a dry run: every
    potential node has no victims, the offset is drawn as the dry runs would draw it; None when
    some pod may be a victim, the pod has a nominated node (whose terminating victims the search
    looks for) or no rule applies (not eligible), for the full search. ``bound``: the cycle's
    binding of the pod (the preempt rules' answers, one per priority, are a function of the pod
    and the victim's priority)."""
    if not bound.preempts or not all(rule.by_priority for rule in bound.preempts):
        return None
    if pod.nominated_node_name:  # (its node's terminating victims are looked for: the search)
        return None
    nodes = snapshot.nodes
    counts: Counter[str] = Counter()
    rows = _potential_rows(nodes, statuses, reserved.nodes if reserved is not None else {}, counts)
    many = len(rows)
    if many:  # (only the potential nodes' pods are looked at, in the search as here)
        potential = Potential(bound, memos)
        values = columns.derived(pod_priorities, PRIORITY_SETS)[rows].tolist()
        for priorities in set(values):  # (a node of each distinct set holds the example pods asked)
            if priorities and potential._wanted_of(nodes[rows[values.index(priorities)]], priorities):
                return None
    if rng is not None and many:
        rng.randrange(many)  # (where the dry runs would have started: the source moves on alike)
    if many:
        counts[NO_VICTIMS] += many
    return Preemption(None, message="preemption: " + fit_error(len(nodes), counts))


def _rule_order(snapshot: Snapshot, bound: BoundRules) -> Callable[[Candidate], tuple[float, ...]] | None:
    """The preempt rules' ``order`` expressions as one sort key; lower values are preferred."""
    orders = [p.order for p in bound.preempts if p.order is not None]
    if not orders:
        return None

    def key(candidate: Candidate) -> tuple[float, ...]:
        node = snapshot.node_view(candidate.node)
        return tuple(float(order(node)) for order in orders)

    return key


def _victim_terminating(snapshot: Snapshot, bound: BoundRules, pod: Pod) -> bool:
    """Whether a pod the preemptor could preempt is leaving its nominated node because a
    scheduler preempted it (the preemptor then waits for it rather than preempt again)."""
    node = snapshot.node_view(pod.nominated_node_name) if pod.nominated_node_name else None
    if node is None:
        return False
    return any(
        p.deleting and p.preempted_by_scheduler and all(rule.allows(node, p) for rule in bound.preempts)
        for p in node.pods
    )


def _failure(
    bound: BoundRules, overlay: ClusterOverlay, name: str, nominated: Sequence[Pod] = ()
) -> tuple[str, ...] | None:
    """Why the pod does not fit the node as the overlay has it now, or
    (RunFilterPluginsWithNominatedPods) with the node's ``nominated`` pods added as well; None
    when it fits both ways."""
    bound.refresh()  # cluster-wide precomputation is stale after a change
    node = overlay.node_view(name)
    if node is None:
        return ("node not found",)
    failure = bound.first_failure(node)
    if failure is not None or not nominated:
        return None if failure is None else failure[1]
    for p in nominated:
        overlay.add_pod(p)
    try:
        bound.refresh()
        node = overlay.node_view(name)
        failure = bound.first_failure(node) if node is not None else None
        return None if failure is None else failure[1]
    finally:
        for p in nominated:
            overlay.remove_pod(p)


def _fits(bound: BoundRules, overlay: ClusterOverlay, name: str, nominated: Sequence[Pod] = ()) -> bool:
    return _failure(bound, overlay, name, nominated) is None


def select_victims(
    overlay: ClusterOverlay, bound: BoundRules, name: str, potential: list[Pod], nominated: Sequence[Pod] = ()
) -> Candidate | NoFit:
    """SelectVictimsOnNode: remove every potential victim, then reprieve what still fits
    (with the node's ``nominated`` pods added as well as without them)."""
    off: set[str] = set()
    for victim in potential:
        overlay.remove_pod(victim)
        off.add(victim.key)
    try:
        still = _failure(bound, overlay, name, nominated)
        if still is not None:
            return NoFit(still)
        violating, safe = split_by_pdb(potential, overlay.pdbs)
        victims: list[Pod] = []
        violations = 0
        for group, violates in ((violating, True), (safe, False)):
            for candidate in group:
                overlay.add_pod(candidate)
                off.discard(candidate.key)
                if _fits(bound, overlay, name, nominated):
                    continue  # reprieved
                overlay.remove_pod(candidate)
                off.add(candidate.key)
                victims.append(candidate)
                violations += violates
        return Candidate(name, tuple(sorted(victims, key=importance)), violations)
    finally:
        for pod in potential:
            if pod.key in off:
                overlay.add_pod(pod)
        overlay.reset_node(name)


def _dry_runs_together(
    bound: BoundRules,
    base: NodeColumns | None,
    tried: list[tuple[int, Any, list[Pod]]],
    pdbs: Sequence[PodDisruptionBudget],
    held: Mapping[str, Sequence[Pod]],
    between: Callable[[], None] | None = None,
    memos: NodeMemos | None = None,
    first: npt.NDArray[np.intp] | None = None,
) -> Together | None:
    """:func:`select_victims` for many nodes at once, as columns (:mod:`rulesched.engine.dryrun`),
    by index into ``tried``; None when the columns cannot (every node is then left to the
    node-by-node dry run). The caller has checked ``node_local(bound)``."""
    if base is None or len(tried) < BATCH_FROM:
        return None
    orders, violating = put_back_orders(
        [potential for _, _, potential in tried], [node for _, node, _ in tried], pdbs, memos
    )
    nodes = [node for _, node, _ in tried]
    rows = np.array([row for row, _, _ in tried], dtype=np.intp)
    try:
        nominated = [held.get(node.name, ()) for node in nodes] if held else []
        known = first[rows] if first is not None else None
        return dry_runs_together(bound, base, nodes, rows, orders, violating, nominated, between, memos, known)
    except Unsupported:
        return None


def _together_candidate(name: str, together: Together, i: int) -> Candidate:
    """Candidate ``i`` of the dry runs done together, its victims most important first."""
    victims = together.victims(i)
    # (put back in importance order, unless budgets reordered them)
    chosen = tuple(sorted(victims, key=importance)) if together.violating[i] else tuple(victims)
    return Candidate(name, chosen, together.candidates[i])
