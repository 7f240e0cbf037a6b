"""What would make it fit: the smallest changes that let a pending pod (or a group of pods)
schedule, each checked by scheduling the changed cluster with the same rules before it is shown.

The candidates (:mod:`rulesched.scheduler.fix_candidates`: the changes each node proposes, on
the cluster, the pod or the rules) are ranked by size (:func:`size`) and checked in that order: each one's changes are made on a copy of the
cluster (the trial's store, undone after), the pods changed, and the one scheduler every face
runs schedules them (:class:`rulesched.scheduler.trial.Trials`: cycles, preemption, groups)
until it settles. A candidate is a fix only if every pod asked about is then bound.

The search is bounded by a static budget (:class:`FixBudget`): at most ``candidates``
candidates are made, at most ``trials`` trials run, and the search stops at ``fixes`` fixes; the
nodes whose evictions are worked out are the ``nodes`` nearest to fitting. What a fix was
checked against (the rules' digest, the cluster's size, the trial's placement and evictions) is
part of it.

The size of a fix: one for each object or field changed (a pod evicted, a taint removed, a node
labelled, a toleration added, ...), two for each node added, a request lowered counted as twice
the share it is lowered by (at least 0.1), a priority raised as one plus the pods its preemption
evicts, a filter put in audit mode or a score removed as two plus the other pending pods it
moves (when they were asked about), a preempt rule removed as two plus the pods then evicted
(and those it moves), a gang's minimum lowered by how much.
Next stage: :func:`fixes_json` (explain's answer), rendered by :mod:`rulesched.authoring.why`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.changes import (
    ALL,
    Change,
    apply,
    changed_group,
    changed_pod,
    changed_rules,
)
from rulesched.scheduler.reasons import ReasonCode
from rulesched.scheduler.trial import TrialOutcome, Trials

C = ReasonCode
CLUSTER, POD, GROUP, MIXED, RULES = "cluster", "pod", "group", "mixed", "rules"
_WHERE_ORDER = {CLUSTER: 0, POD: 1, GROUP: 2, MIXED: 3, RULES: 4}


@dataclass(frozen=True)
class FixBudget:
    candidates: int = 24  # candidates made (the smallest first)
    trials: int = 12  # trials run, the unchanged cluster's included
    fixes: int = 5  # fixes shown (the search stops once it has them)
    nodes: int = 40  # nodes nearest to fitting whose changes are worked out
    per_kind: int = 5  # of them, at most this many of each kind (what must change there)
    moves: int = 50  # other pending pods a rule fix's diff is asked about


BUDGET = FixBudget()


@dataclass(frozen=True)
class Fix:
    where: str  # cluster, pod, group or rules
    changes: tuple[Change, ...]
    size: float
    placed: Mapping[str, str]  # pod -> node, in the trial
    evicted: tuple[str, ...] = ()  # pods the trial evicted (preemption), beside the changes' own
    # a rule fix: the other pending pods asked about whose outcome the rule change moves
    moves: tuple[tuple[str, str | None, str | None], ...] = ()
    moves_asked: int = 0
    alike: int = 1  # nodes proposing the same changes (this fix is shown on one of them)

    @property
    def summary(self) -> str:
        if not self.changes:
            return "no change: the scheduler's preemption places it"
        return "; ".join(c.text for c in self.changes)


@dataclass(frozen=True)
class Candidate:
    where: str
    changes: tuple[Change, ...]
    size: float
    node: str = ""  # the node that proposed it (for the record)
    alike: int = 1  # candidates of its shape (the same changes on other nodes)

    @property
    def key(self) -> tuple[Change, ...]:
        return self.changes


@dataclass
class FixSearch:
    """A search's outcome: the fixes (smallest first), the candidates refuted by their trial
    (with what the trial found), what was checked against, and what it cost."""

    fixes: list[Fix] = field(default_factory=list)
    refuted: list[tuple[Candidate, str]] = field(default_factory=list)
    made: int = 0  # candidates made (after dropping duplicates)
    trials: int = 0
    seconds: float = 0.0
    checked: dict[str, Any] = field(default_factory=dict)
    baseline: str = ""  # what the unchanged cluster's trial found
    unfixable: list[str] = field(default_factory=list)  # why no candidate could be made, when none


# --- sizes and shapes ---------------------------------------------------------------------------


def size(changes: Sequence[Change], pods: Sequence[Pod]) -> float:
    """See the module docstring."""
    total = 0.0
    for c in changes:
        if c.op == "add-nodes":
            total += 2 * c.count
        elif c.op == "set-request":
            before = max((p.requests.get(c.key, 0) for p in pods if c.name in (ALL, p.key)), default=0)
            share = (before - c.amount) / before if before > 0 else 1.0
            total += max(0.1, 2 * share)
        elif c.op in ("audit-filter", "drop-preempt", "set-weight"):
            total += 2
        elif c.op == "set-min-count":
            total += max(1, c.amount)  # (amount: how much lower)
        elif c.op == "set-priority":
            total += 1 + c.count  # (count: the pods its preemption is expected to evict)
        else:
            total += 1
    return round(total, 3)


def by_size(found: Iterable[Candidate]) -> list[Candidate]:
    """Smallest first; among equals, the cluster's before the pod's before the rules'."""
    return sorted(found, key=lambda c: (c.size, _WHERE_ORDER[c.where], len(c.changes), c.node))


def shape(candidate: Candidate) -> tuple[Any, ...]:
    """A candidate's changes without the objects they name (an eviction by its count): two
    candidates of one shape are the same fix on different nodes."""
    parts: list[Any] = [candidate.where]
    evictions = sum(1 for c in candidate.changes if c.op == "evict")
    if evictions:
        parts.append(("evict", evictions))
    for c in candidate.changes:
        if c.op == "evict":
            continue
        on_node = c.kind == "Node"
        amount = c.amount if c.op != "set-request" else 0
        parts.append((c.op, c.key, c.value, c.effect, c.count, amount, "" if on_node else c.name))
    return tuple(parts)


# --- the search -----------------------------------------------------------------------------------


def search(
    pods: Sequence[Pod],
    trials: Trials,
    found: list[Candidate],
    budget: FixBudget = FixBudget(),
    groups: Sequence[PodGroup] = (),
    other_pending: Sequence[Pod] = (),
    placed: Callable[[TrialOutcome], bool] | None = None,
    baseline: TrialOutcome | None = None,
    follow_up: Callable[[Candidate, TrialOutcome], list[Candidate]] | None = None,
) -> FixSearch:
    """Check ``found`` (smallest first) by trials until ``budget`` says stop. ``placed`` says
    whether a trial's outcome places what was asked (default: every pod bound); ``baseline``:
    the unchanged cluster's trial, when the caller ran it already; ``follow_up``: the
    candidates a refuted one leads to (what its trial got part of the way), tried in their turn
    by size."""
    started = time.perf_counter()
    store = trials.store
    done = placed if placed is not None else (lambda outcome: outcome.all_placed(p.key for p in pods))
    out = FixSearch()
    out.made = len(found)
    out.checked = {
        "rules": trials.rules.digest,
        "nodes": len(store.nodes),
        "running_pods": sum(len(n.pods) for n in store.nodes),
        "pods": [p.key for p in pods],
    }
    if baseline is None:
        baseline = trials.run(pods, groups)
    out.trials += 1
    if done(baseline):
        evicted = tuple(p.key for p in baseline.evicted)
        out.fixes.append(Fix(CLUSTER, (), 0.0, dict(baseline.placed), evicted))
        out.baseline = "fits as it is" if not evicted else f"placed by preemption, evicting {', '.join(evicted)}"
    else:
        out.baseline = _trial_text(pods, baseline)
    verified: list[set[Any]] = []  # the shapes of the fixes found (less where they are)
    queue = list(found)
    seen = {c.key for c in queue}
    at = 0
    while at < len(queue):
        candidate = queue[at]
        at += 1
        if len(out.fixes) >= budget.fixes or out.trials >= budget.trials:
            break
        parts = set(shape(candidate)[1:])
        if any(parts >= done_parts for done_parts in verified):
            continue  # the same as a fix found, or that fix and more
        outcome = _try(trials, pods, groups, candidate.changes)
        out.trials += 1
        if not done(outcome):
            out.refuted.append((candidate, _trial_text(pods, outcome)))
            for more in follow_up(candidate, outcome) if follow_up is not None else ():
                if more.key not in seen:
                    seen.add(more.key)
                    out.made += 1
                    rest = queue[at:]
                    i = next((j for j, c in enumerate(rest) if c.size > more.size), len(rest))
                    queue[at:] = [*rest[:i], more, *rest[i:]]
            continue
        evicted = _evicted(outcome)
        measured = candidate.size
        if any(c.op in _PREEMPTING for c in candidate.changes):  # (its preemption's evictions, as found)
            measured = size([c for c in candidate.changes if c.op != "set-priority"], pods) + len(evicted)
            measured += 1 if any(c.op == "set-priority" for c in candidate.changes) else 0
        fix = Fix(candidate.where, candidate.changes, measured, dict(outcome.placed), evicted, alike=candidate.alike)
        out.fixes.append(fix)
        verified.append(set(shape(candidate)[1:]))
    rule_fixes = [f for f in out.fixes if f.where == RULES]
    if rule_fixes and other_pending:
        out.fixes = [
            _with_moves(f, trials, other_pending[: budget.moves]) if f.where == RULES else f for f in out.fixes
        ]
    out.fixes.sort(key=lambda f: (f.size, _WHERE_ORDER[f.where]))
    out.seconds = time.perf_counter() - started
    return out


_PREEMPTING = ("set-priority", "drop-preempt")  # changes whose size counts the pods preemption then evicts


def _evicted(outcome: TrialOutcome) -> tuple[str, ...]:
    return tuple(p.key for p in outcome.evicted)


def _try(trials: Trials, pods: Sequence[Pod], groups: Sequence[PodGroup], changes: Sequence[Change]) -> TrialOutcome:
    undo = apply(trials.store, changes)
    try:
        changed = [changed_pod(p, changes) for p in pods]
        changed_groups = [changed_group(g, changes) for g in groups]
        return trials.run(changed, changed_groups, changed_rules(trials.rules, changes))
    finally:
        undo()


def _trial_text(pods: Sequence[Pod], outcome: TrialOutcome) -> str:
    missing = [p for p in pods if p.key not in outcome.placed]
    if not missing:
        return "placed"
    last = outcome.last.get(missing[0].key)
    message = last.message if last is not None else "not attempted"
    placed = len(pods) - len(missing)
    return f"{placed} of {len(pods)} placed; {missing[0].key}: {message}" if len(pods) > 1 else message


def _with_moves(fix: Fix, trials: Trials, others: Sequence[Pod]) -> Fix:
    """A rule fix with what else it moves (``rulesched diff``'s question, on the pods asked
    about): the other pending pods, scheduled together under both sets (each run undone),
    whose node or schedulability differs."""
    old = trials.run(others)
    new = trials.run(others, rules=changed_rules(trials.rules, fix.changes))
    moves = tuple(
        (p.key, old.placed.get(p.key), new.placed.get(p.key))
        for p in others
        if old.placed.get(p.key) != new.placed.get(p.key)
    )
    return Fix(fix.where, fix.changes, fix.size + len(moves), fix.placed, fix.evicted, moves, len(others), fix.alike)


# --- JSON ------------------------------------------------------------------------------------------


def fix_json(fix: Fix) -> dict[str, Any]:
    out: dict[str, Any] = {
        "where": fix.where,
        "size": fix.size,
        "summary": fix.summary,
        "changes": [c.json() for c in fix.changes],
        "commands": [cmd for c in fix.changes if (cmd := c.command) is not None],
        "checked": {"placed": dict(fix.placed), "evicted": list(fix.evicted)},
        "alike": fix.alike,
    }
    if fix.where == RULES:
        out["moves"] = {
            "asked": fix.moves_asked,
            "pods": [{"pod": k, "old": a, "new": b} for k, a, b in fix.moves],
        }
    return out


def fixes_json(found: FixSearch) -> dict[str, Any]:
    return {
        "fixes": [fix_json(f) for f in found.fixes],
        "baseline": found.baseline,
        "refuted": [
            {"summary": "; ".join(c.text for c in cand.changes), "size": cand.size, "found": why}
            for cand, why in found.refuted
        ],
        "candidates": found.made,
        "trials": found.trials,
        "checked": found.checked,
        "unfixable": found.unfixable,
        "seconds": round(found.seconds, 4),
    }
