"""One pod's scheduling cycle, timed phase by phase (bind, filter, score), per variant of
bench_rules.py: the compiled rules node by node, through the scheduler's calls, as columns, and
the hand-written twin; and the set-up between cycles (node memos saved and restored, the cache
of bindings dropped)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from rulesched import engine
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.engine import NodeColumns
from rulesched.lang import RuleSet
from rulesched.lang.context import EvalContext
from rulesched.model import Pod


class Twin:
    """The hand-written functions a rule set is compared with. ``with_ctx``: they also take the
    pod's evaluation context (the cluster-wide plugins of the default profile read it)."""

    def __init__(self, filter_fn: Any, scores_fn: Any, with_ctx: bool) -> None:
        self.filter, self.scores, self.with_ctx = filter_fn, scores_fn, with_ctx

    def for_pod(self, pod: Pod) -> tuple[Any, Any]:
        """(filter(node), scores(node)) for one pod, for the equivalence check."""
        if not self.with_ctx:
            return (lambda node: self.filter(pod, node)), (lambda node: self.scores(pod, node))
        ctx = EvalContext(pod)
        return (lambda node: self.filter(pod, node, ctx)), (lambda node: self.scores(pod, node, ctx))


class Phases:
    """Seconds spent in each phase, summed over pods."""

    def __init__(self, bind: float = 0.0, filter: float = 0.0, score: float = 0.0, feasible: int = 0) -> None:
        self.bind, self.filter, self.score, self.feasible = bind, filter, score, feasible

    @property
    def total(self) -> float:
        return self.bind + self.filter + self.score

    def add(self, other: Phases) -> None:
        self.bind += other.bind
        self.filter += other.filter
        self.score += other.score
        self.feasible += other.feasible


def cycle_dsl(rules: RuleSet, nodes: Sequence[NodeInfo], pod: Pod) -> Phases:
    """One pod's scheduling cycle with the compiled rules: bind, filter every node, score the
    feasible ones."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    passes = tuple(f.passes for f in bound.filters)
    score_fns = tuple(s.score for s in bound.scores)
    t1 = clock()
    feasible = []
    for node in nodes:
        for fits in passes:
            if not fits(node):
                break
        else:
            feasible.append(node)
    t2 = clock()
    scored = [(node, [score(node) for score in score_fns]) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


def cycle_scheduler_api(rules: RuleSet, nodes: Sequence[NodeInfo], pod: Pod) -> Phases | None:
    """The same cycle through the calls rulesched's scheduler makes: ``BoundRules.feasible``
    (which also computes the failing filter's reasons, and with a shared binding stamps each
    node's outcome into its memo) and ``score_vector``. None where the API is not there."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    if not hasattr(bound, "feasible") or not hasattr(bound, "score_vector"):
        return None
    reasons: Counter[str] = Counter()

    def failed(node: Any, why: tuple[str, ...]) -> None:
        reasons.update(why)

    t1 = clock()
    feasible, _ = bound.feasible(nodes, 0, len(nodes), failed)
    t2 = clock()
    scored = [(node, bound.score_vector(node)) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


def cycle_columns(rules: RuleSet, cols: NodeColumns, pod: Pod) -> Phases:
    """The same cycle evaluated as columns over every node at once (engine.filter_mask and
    score_matrix, what the scheduler's node tables use for many nodes): bind, the feasible
    mask, the raw score matrix of the feasible nodes."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    rows = np.arange(len(cols.nodes), dtype=np.intp)
    t1 = clock()
    feasible = rows[engine.filter_mask(bound, cols, rows)]
    t2 = clock()
    matrix = engine.score_matrix(bound, cols, feasible)
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(matrix))


def forget_bindings(rules: RuleSet) -> None:
    """Drop the rule set's cache of bindings by pod equivalence class (where it has one), so
    that the next bind is a first bind, as for a pod unlike any before it."""
    session = getattr(rules, "session", None)
    if session is not None:
        session().classes.clear()


def cycle_handwritten(nodes: Sequence[NodeInfo], pod: Pod, twin: Twin) -> Phases:
    """The same cycle with the hand-written functions (nothing to bind but, for the default
    profile, the evaluation context its cluster-wide plugins take)."""
    clock = time.perf_counter
    t0 = clock()
    fits, scores = twin.filter, twin.scores
    if twin.with_ctx:
        ctx = EvalContext(pod)
        t1 = clock()
        feasible = [node for node in nodes if fits(pod, node, ctx)]
        t2 = clock()
        scored = [(node, scores(pod, node, ctx)) for node in feasible]
    else:
        t1 = clock()
        feasible = [node for node in nodes if fits(pod, node)]
        t2 = clock()
        scored = [(node, scores(pod, node)) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


class Memos:
    """Saves the rule set's node memos once (after the equivalence pass has filled them) to start
    every warm run from the same, fully cached state; clears them for cold runs."""

    def __init__(self, rules: RuleSet) -> None:
        self.memos = rules.node_memos
        self.saved = {name: (n, g, dict(values)) for name, (n, g, values) in self.memos.entries.items()}

    def restore(self) -> None:
        entries = self.memos.entries
        entries.clear()
        entries.update({name: (n, g, dict(values)) for name, (n, g, values) in self.saved.items()})

    def clear(self) -> None:
        self.memos.entries.clear()
