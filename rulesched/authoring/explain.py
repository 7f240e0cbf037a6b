"""Why a pod's outcome differs between two rule sets: the rules that made the difference.

``rulesched diff`` (:mod:`rulesched.authoring.diff`) finds the pending pods whose placement
changes between an old and a new rule set. For each of them (up to a limit), an
:class:`Explainer` binds the pod to both sets against one cluster state, the cluster before
scheduling, and compares the two sets on the nodes involved only: the old node and the new one
(one of them is missing for a pod that becomes, or stops being, unschedulable).

* Filters: every filter whose effect on one of those nodes differs, i.e. it rejects the node
  under one set and not under the other. A filter that passes, that does not apply to the pod
  (its ``when`` guard is false) or that is absent from the set lets the node through alike.
* Scores, for a pod that moved from A to B: every score rule whose weighted contribution to
  B's total minus A's changed, largest change first. Normalised rules are normalised over the two
  nodes compared (a cycle normalises over the nodes it scored), so the figures show the direction
  and size of each rule's pull, not the cycle's exact totals.

Only a rule that differs between the sets (:func:`rulesched.lang.rule_differences`) can answer
differently on the same state, so what is found is always one of those. The state first asked is
the cluster before scheduling; when no rule differs there (a filter ``count(...) < 2`` that only
bites once other pods have come), the cluster as each run left it is asked, the pod itself taken
out (:meth:`Explainer.explain`'s ``later``): a pod made unschedulable by a changed filter once the
nodes filled is attributed to it. When no rule differs in any of them, the change is a knock-on
effect: other pods placed differently before it filled or freed the nodes, or a tie was drawn
differently. Nothing is computed for pods that did not change, and two nodes per pod are
evaluated in each state whatever the size of the cluster. Both questions are the framework's verbs
(:class:`rulesched.scheduler.runtime.Framework`: ``filter`` with every failing rule, ``score``
with per-rule values), one framework per set.
Next stage: :mod:`rulesched.authoring.diff` prints them (as text or JSON, from the helpers at the end).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Snapshot
from rulesched.lang import BoundRules, RuleSet, Session
from rulesched.model import Pod
from rulesched.scheduler.explanation import load_text, shown_load
from rulesched.scheduler.framework import Status
from rulesched.scheduler.runtime import Framework

PASS, FAIL, NOT_APPLICABLE, ABSENT, APPLIES = "pass", "fail", "does not apply", "absent", "applies"


@dataclass(frozen=True)
class Verdict:
    """One filter's answer on one node: PASS, FAIL (with its reasons), NOT_APPLICABLE or ABSENT."""

    state: str
    reasons: tuple[str, ...] = ()
    values: tuple[str, ...] = ()  # the domain and cluster aggregates the filter read, on the node

    @property
    def rejects(self) -> bool:
        return self.state == FAIL


_ABSENT = Verdict(ABSENT)


@dataclass(frozen=True)
class FilterChange:
    """A filter that rejects ``node`` under one rule set and lets it through under the other."""

    rule: str
    node: str
    old: Verdict
    new: Verdict


@dataclass(frozen=True)
class ScoreSide:
    """One rule set's score rule in a move from one node to another."""

    state: str  # APPLIES, NOT_APPLICABLE or ABSENT
    weight: int | None  # None when absent
    scores: Mapping[str, int]  # node -> normalised score (empty unless the rule applies)
    difference: int  # weight x (score on the new node - score on the old node); 0 unless it applies


_NO_SCORE = ScoreSide(ABSENT, None, {}, 0)


@dataclass(frozen=True)
class ScoreChange:
    """A score rule whose weighted pull between the two nodes changed."""

    rule: str
    old: ScoreSide
    new: ScoreSide

    @property
    def change(self) -> int:
        return self.new.difference - self.old.difference


@dataclass(frozen=True)
class Explanation:
    """The rules that made the difference for one pod, on the nodes compared (the old node, then
    the new one; those that exist). ``totals`` is (old, new) total of the new node minus the old
    one, for a pod that moved."""

    nodes: tuple[str, ...]
    filters: tuple[FilterChange, ...]
    scores: tuple[ScoreChange, ...]
    totals: tuple[int, int] | None = None
    # node -> the measured load its rules read there, and its age (--node-metrics; before
    # scheduling, as everything here): only nodes that have some
    load: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # the cluster state the differences were found in: BEFORE, or a run's end (the label of
    # Explainer.explain's ``later``); the states asked when none were found
    state: str = ""
    asked: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.filters and not self.scores


@dataclass(frozen=True)
class _Answers:
    """One rule set's answers for one pod on the nodes compared."""

    filters: Mapping[str, Mapping[str, Verdict]]  # rule -> node -> verdict, every filter of the set
    scores: Mapping[str, ScoreSide]  # rule -> its side, every score of the set (moves only)
    total: int  # total of the new node minus the old one (moves only)


BEFORE = "in the cluster before scheduling"


class Explainer:
    """Explains changed pods against the cluster before scheduling, then, where nothing differs
    there, against the states ``later`` gives; with sessions of each rule set of its own for each
    state (the simulations' sessions belong to their stores, and a session's memos are kept by
    node generation, which two stores may share)."""

    def __init__(self, old: RuleSet, new: RuleSet, cluster: Snapshot) -> None:
        self._rules = (old, new)
        self._sessions: dict[str, tuple[Session, Session]] = {}
        self._frameworks = (Framework(), Framework())
        self._cluster = cluster

    def explain(
        self,
        pod: Pod,
        before: str | None,
        after: str | None,
        later: Sequence[tuple[str, Callable[[], Snapshot | None]]] = (),
    ) -> Explanation:
        """``later``: (label, state) of the runs' ends, asked in turn while nothing differs;
        ``state()`` may be None (no such state for this pod)."""
        found = self._explain(pod, before, after, BEFORE, self._cluster)
        asked = [BEFORE]
        for label, state in later:
            if not found.empty:
                break
            cluster = state()
            if cluster is None:
                continue
            asked.append(label)
            there = self._explain(pod, before, after, label, cluster)
            if not there.empty:
                found = dataclasses.replace(there, load=found.load)  # (the load shown is the measured one)
        return found if not found.empty else dataclasses.replace(found, asked=tuple(asked))

    def _explain(self, pod: Pod, before: str | None, after: str | None, label: str, cluster: Snapshot) -> Explanation:
        sessions = self._sessions.get(label)
        if sessions is None:
            sessions = self._sessions[label] = (Session(self._rules[0]), Session(self._rules[1]))
        found = (cluster.node_view(name) for name in (before, after) if name is not None)
        nodes = [node for node in found if node is not None]
        moved = before is not None and after is not None and len(nodes) == 2
        old = _answers(self._frameworks[0], sessions[0], pod, cluster, nodes, moved)
        new = _answers(self._frameworks[1], sessions[1], pod, cluster, nodes, moved)
        filters = []
        for node in nodes:
            for name in _union(old.filters, new.filters):
                was = old.filters.get(name, {}).get(node.name, _ABSENT)
                now = new.filters.get(name, {}).get(node.name, _ABSENT)
                if was.rejects != now.rejects:
                    filters.append(FilterChange(name, node.name, was, now))
        scores = []
        for name in _union(old.scores, new.scores):
            before_side, after_side = old.scores.get(name, _NO_SCORE), new.scores.get(name, _NO_SCORE)
            if before_side.difference != after_side.difference:
                scores.append(ScoreChange(name, before_side, after_side))
        scores.sort(key=lambda s: -abs(s.change))  # stable: rule order among equal changes
        totals = (old.total, new.total) if moved else None
        load = {n.name: shown for n in nodes if (shown := shown_load(n)) is not None}
        return Explanation(tuple(n.name for n in nodes), tuple(filters), tuple(scores), totals, load, label)


def _union(old: Mapping[str, object], new: Mapping[str, object]) -> list[str]:
    """Rule names of both sets: the old set's in its order, then those only the new one has."""
    return [*old, *(name for name in new if name not in old)]


def _verdict(
    bound: BoundRules, rule: str, applicable: Mapping[str, object], failed: Mapping[str, Status], node: NodeInfo
) -> Verdict:
    if rule not in applicable:
        return Verdict(NOT_APPLICABLE)
    values = bound.domain_values(rule, node)
    status = failed.get(rule)
    return Verdict(PASS, (), values) if status is None else Verdict(FAIL, status.reasons, values)


def _answers(
    framework: Framework, session: Session, pod: Pod, cluster: Snapshot, nodes: Sequence[NodeInfo], moved: bool
) -> _Answers:
    rules = session.rules
    bound = session.bind(pod, cluster)
    try:
        rows = framework.rows_of(cluster, [n.name for n in nodes])
        every = framework.filter(bound, cluster, rows, all_failing=True).every or {}
        applicable = {f.name: f for f in bound.filters}
        failing = {n.name: {s.rule: s for s in every.get(n.name, ())} for n in nodes}
        filters = {
            r.name: {n.name: _verdict(bound, r.name, applicable, failing[n.name], n) for n in nodes}
            for r in rules.filters
        }
        scores: dict[str, ScoreSide] = {}
        if not moved:
            return _Answers(filters, scores, 0)
        # Each rule's column rather than a per-node map (where a rule named "total" would meet the
        # total), normalised over the two nodes.
        scored = framework.score(bound, cluster, rows, per_rule=True)
        totals, per_rule = scored.totals, scored.per_rule or {}
        before, after = nodes[0].name, nodes[1].name
        columns = {s.name: (s.weight, per_rule[s.name]) for s in bound.scores}
        for rule in rules.scores:
            hit = columns.get(rule.name)
            if hit is None:
                scores[rule.name] = ScoreSide(NOT_APPLICABLE, rule.checked.weight, {}, 0)
                continue
            weight, column = hit
            a, b = int(column[0]), int(column[1])
            scores[rule.name] = ScoreSide(APPLIES, weight, {before: a, after: b}, weight * (b - a))
        return _Answers(filters, scores, int(totals[1]) - int(totals[0]))
    finally:
        bound.release()


# --- output (rulesched diff's text and JSON) -------------------------------------------------------


def _verdict_text(verdict: Verdict) -> str:
    text = f"{verdict.state} ({'; '.join(verdict.reasons)})" if verdict.reasons else verdict.state
    return f"{text} [{', '.join(verdict.values)}]" if verdict.values else text


def _weight_text(side: ScoreSide) -> str:
    if side.state == ABSENT:
        return "absent"
    return f"{side.weight} ({NOT_APPLICABLE})" if side.state == NOT_APPLICABLE else str(side.weight)


def explanation_lines(why: Explanation) -> list[str]:
    lines = [] if why.empty or why.state == BEFORE else [f"  {why.state}:"]
    lines += [f"  filter {f.rule} on {f.node}: {_verdict_text(f.old)} → {_verdict_text(f.new)}" for f in why.filters]
    if len(why.nodes) == 2:
        a, b = why.nodes
        for s in why.scores:
            old_weight, new_weight = _weight_text(s.old), _weight_text(s.new)
            weight = old_weight if old_weight == new_weight else f"{old_weight}→{new_weight}"
            lines.append(f"  score {s.rule}: weight {weight}, {b}−{a} {s.old.difference:+d} → {s.new.difference:+d}")
        if why.totals is not None:
            old_total, new_total = why.totals
            lines.append(f"  total {b}−{a}: {old_total:+d} → {new_total:+d} (normalised over these two nodes)")
    if why.empty:
        nodes = " or ".join(why.nodes) or "the nodes involved"
        if why.totals == (0, 0):
            cause = "they tie under both sets there, so a tie drawn differently or other pods placed differently"
        else:
            cause = "a knock-on effect of other pods placed or evicted differently, or of a tie drawn differently"
        where = BEFORE + "".join(f", nor {label.removeprefix('in the cluster ')}" for label in why.asked[1:])
        lines.append(f"  no rule differs on {nodes} {where}: {cause}")
    for node, load in why.load.items():
        shown = ", ".join(f"{key} {load_text(key, value)}" for key, value in load.items())
        lines.append(f"  load on {node} (measured, before scheduling): {shown}")
    return lines


def _verdict_json(verdict: Verdict) -> dict[str, object]:
    shown: dict[str, object] = {"verdict": verdict.state, "reasons": list(verdict.reasons)}
    if verdict.values:
        shown["values"] = list(verdict.values)
    return shown


def _side_json(side: ScoreSide) -> dict[str, object]:
    return {"state": side.state, "weight": side.weight, "scores": dict(side.scores), "difference": side.difference}


def explanation_json(why: Explanation) -> dict[str, object]:
    return {
        "nodes": list(why.nodes),
        "filters": [
            {"rule": f.rule, "node": f.node, "old": _verdict_json(f.old), "new": _verdict_json(f.new)}
            for f in why.filters
        ],
        "scores": [
            {"rule": s.rule, "old": _side_json(s.old), "new": _side_json(s.new), "change": s.change} for s in why.scores
        ],
        "totals": None if why.totals is None else {"old": why.totals[0], "new": why.totals[1]},
        "state": why.state,
        **({"load": {node: dict(load) for node, load in why.load.items()}} if why.load else {}),
    }
