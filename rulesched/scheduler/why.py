"""Why a pod is pending (or where it would go): every node's verdict under every filter.

``rulesched explain`` (offline, against cluster files) and the live endpoint of ``run`` and
``extender`` (:mod:`rulesched.run.ops`, :mod:`rulesched.extender.server`) call
:func:`explain_pod` with a snapshot and a rule set. Unlike a scheduling cycle, which stops at a
node's first failing filter and at percentageOfNodesToScore's share of nodes, it evaluates every
applicable filter on every node (as columns where the rule allows, else node by node), so that:

- each filtered node lists *every* filter it fails, with that filter's reasons and whether
  preemption could fix it (``unresolvable``); the failures are also grouped by (filter, reason)
  with a node count, for clusters too big to list;
- the nodes detailed (the nearest to fitting first: fewest failing filters) get, for each
  failing filter, the failing sub-expressions with their operands' values and ``file:line:col``
  (:mod:`rulesched.lang.evaluation.blame`);
- counterfactuals: for each filter, how many nodes fail it alone (removing that one rule would
  let them pass), and the resource shortfall on the nodes nearest to fitting ("needs 1500m more
  cpu on n7");
- scores: the feasible nodes' best :data:`BEST` with each score rule's normalised value and the
  weighted total (the one totalling function the cycle uses);
- preemption, when no node fits: kube-scheduler's dry run
  (:func:`rulesched.scheduler.preemption.preempt`), its nominee and victims, or why it cannot help.

The ``message`` is kube-scheduler's, from each node's first failing filter as a cycle counts it.
Nothing here changes the snapshot or the scheduler's sessions: a private session is used, and
a private :class:`rulesched.scheduler.runtime.Framework` answers the every-filter verdicts (its
``filter`` verb with all failing rules).
Next stage: :func:`explanation_json` (the endpoint's answer), rendered by
:mod:`rulesched.authoring.why` as a table or an HTML page.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rulesched import engine
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.engine import NodeColumns
from rulesched.lang import Blame, Blamer, BoundRules, EvalContext, RuleSet, ScoreTerms, Session, Term, quantity_text
from rulesched.model import Pod, PriorityClass
from rulesched.scheduler.fix_candidates import NodeFailure, candidates, rule_candidates
from rulesched.scheduler.fixes import BUDGET, FixBudget, FixSearch, by_size, search
from rulesched.scheduler.framework import Code, Preemption, fit_error
from rulesched.scheduler.preemption import preempt
from rulesched.scheduler.reasons import Reason, Tally, node_reasons
from rulesched.scheduler.runtime import Framework
from rulesched.scheduler.scoring import Matrix, score_matrix, weighted_totals
from rulesched.scheduler.trial import Trials

BEST = 10  # scored nodes reported, best first
TERM_NODES = 3  # of them, those (scoring differently) whose scores' terms (the lets they read) are shown
DETAILED = 10  # filtered nodes reported with every failure and its blame
NAMED = 10  # node names listed per reason group and per blocker
SHORTFALLS = 5  # nearest nodes whose resource shortfall is reported
_RESOURCE_REASONS = ("Insufficient ", "Too many pods")


@dataclass(frozen=True)
class FilterFailure:
    """One filter failing on one node."""

    rule: str
    reasons: tuple[str, ...]
    unresolvable: bool
    blames: tuple[Blame, ...] = ()
    # The values on the node of the domain and cluster aggregates the filter reads
    # (``app_here = 3 in topology.kubernetes.io/zone=a``, ``app_fewest = 1``).
    values: tuple[str, ...] = ()
    codes: tuple[Reason, ...] = ()  # the reasons as codes, with the shortfall on this node


@dataclass(frozen=True)
class NodeVerdict:
    node: str
    failures: tuple[FilterFailure, ...]  # every failing filter, in rule order


@dataclass(frozen=True)
class ReasonCount:
    rule: str
    reason: str
    nodes: int
    unresolvable: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class Blocker:
    """A filter that alone keeps ``nodes`` nodes out: without it they would pass."""

    rule: str
    nodes: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class Shortfall:
    node: str
    missing: tuple[tuple[str, str], ...]  # (resource, amount more needed), as Kubernetes writes it


@dataclass(frozen=True)
class Scored:
    node: str
    values: tuple[int, ...]
    total: int
    # on the best TERM_NODES nodes that score differently: each score rule built from lets -> the lets it read there
    terms: Mapping[str, tuple[Term, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class PreemptionVerdict:
    tried: bool
    helps: bool
    nominated: str | None
    victims: tuple[str, ...]
    why: str
    message: str = ""  # kube-scheduler's "preemption: ..." part of the pod's message


@dataclass(frozen=True)
class PodExplanation:
    pod: str
    nodes: int
    feasible: int
    message: str
    digest: str
    skipped_filters: tuple[str, ...]  # filters whose `when` guard is false for the pod
    groups: tuple[ReasonCount, ...]
    blockers: tuple[Blocker, ...]
    shortfalls: tuple[Shortfall, ...]
    detailed: tuple[NodeVerdict, ...]
    score_rules: tuple[str, ...]
    weights: tuple[int, ...]
    best: tuple[Scored, ...]
    preemption: PreemptionVerdict
    seconds: float = 0.0
    shadow: tuple[ReasonCount, ...] = field(default=())  # audit-mode filters' would-be rejections
    shadow_feasible: int | None = None  # fitting nodes the audit-mode filters also pass (None: none)
    shadow_rules: tuple[str, ...] = ()
    # every failing (filter, reason) as a code, over every node: counts, the nearest shortfall
    codes: tuple[Reason, ...] = ()
    # every filtered node's failures (what the fix search reads; not in the JSON), and the
    # filters that compare the node's resources
    failures: Mapping[str, tuple[FilterFailure, ...]] = field(default_factory=dict, repr=False)
    resource_rules: frozenset[str] = frozenset()


@dataclass(frozen=True)
class WhySettings:
    detailed: int = DETAILED
    best: int = BEST
    nodes: tuple[str, ...] = ()  # nodes always detailed (``--node``)
    preemption: bool = True


def explain_pod(pod: Pod, snapshot: Snapshot, rules: RuleSet, settings: WhySettings = WhySettings()) -> PodExplanation:
    """The explanation of ``pod`` against ``snapshot`` under ``rules`` (see the module docstring)."""
    started = time.perf_counter()
    session = Session(rules)  # private: the scheduler's own sessions belong to its thread
    bound = session.bind(pod, snapshot)
    try:
        nodes: Sequence[NodeInfo] = snapshot.nodes
        framework = Framework()  # (the call's own: nothing is kept past it)
        verdicts, fits = _verdicts(framework, bound, snapshot)
        feasible = np.flatnonzero(fits)
        applied = {f.name for f in bound.filters}
        skipped = tuple(r.name for r in rules.filters if r.name not in applied)
        first_reasons: Counter[str] = Counter()
        for failures in verdicts.values():
            first_reasons.update(set(failures[0].reasons))
        groups = _groups(verdicts)
        codes = _codes(pod, snapshot, verdicts)
        blockers = _blockers(verdicts)
        blamer = Blamer(rules.checked)
        resource_rules = {f.name for f in bound.filters if blamer.about_resources(f.name)}
        shortfalls = _shortfalls(pod, nodes, verdicts, resource_rules)
        detailed = _detailed(pod, snapshot, bound, blamer, verdicts, settings)
        terms = ScoreTerms(rules.checked)
        shows_terms = any(terms.names(s.name) for s in bound.scores)
        best = _best(bound, nodes, feasible, settings.best, TERM_NODES if shows_terms else 0)
        best = _with_terms(best, bound, snapshot, terms)
        if len(feasible):
            message = f"{len(feasible)}/{len(nodes)} nodes are available"
            if best:
                message += f"; the best is {best[0].node}"
            verdict = PreemptionVerdict(False, False, None, (), "not needed: some node fits")
        else:
            message = fit_error(len(nodes), first_reasons)
            verdict = _preemption(pod, snapshot, session, verdicts, settings.preemption)
            if verdict.message:
                message += " " + verdict.message
        shadow, shadow_feasible = _shadow(pod, snapshot, rules, fits)
        return PodExplanation(
            pod=pod.key,
            nodes=len(nodes),
            feasible=len(feasible),
            message=message,
            digest=rules.digest,
            skipped_filters=skipped,
            groups=groups,
            blockers=blockers,
            shortfalls=shortfalls,
            detailed=detailed,
            score_rules=tuple(s.name for s in bound.scores),
            weights=tuple(s.weight for s in bound.scores),
            best=best,
            preemption=verdict,
            seconds=time.perf_counter() - started,
            shadow=shadow,
            shadow_feasible=shadow_feasible,
            shadow_rules=tuple(sorted(rules.shadow_filters)),
            codes=codes,
            failures=verdicts,
            resource_rules=frozenset(resource_rules),
        )
    finally:
        bound.release()


def fix_pod(
    pod: Pod,
    explanation: PodExplanation,
    store: ClusterStore,
    rules: RuleSet,
    classes: Sequence[PriorityClass] = (),
    budget: FixBudget = BUDGET,
    other_pending: Sequence[Pod] = (),
) -> FixSearch:
    """The smallest changes that would let ``pod`` schedule (:mod:`rulesched.scheduler.fixes`),
    each checked by a trial on ``store`` (the cluster ``explanation`` was made against; changed
    and put back). ``other_pending``: the pending pods a rule fix's diff asks about."""
    failures = {
        node: [NodeFailure(f.rule, f.reasons, f.unresolvable) for f in fails]
        for node, fails in explanation.failures.items()
    }
    found, why = candidates([pod], store.node_view, failures, set(explanation.resource_rules), classes, budget)
    evicts = any(candidate.changes and all(c.op == "evict" for c in candidate.changes) for candidate in found)
    found = by_size(found + rule_candidates(rules, preempt=evicts and pod.preemption_policy != "Never"))
    found = found[: budget.candidates]
    others = [p for p in other_pending if p.key != pod.key]
    result = search([pod], Trials(store, rules), found, budget, other_pending=others)
    if not result.fixes:
        result.unfixable = why
    return result


def _shadow(
    pod: Pod, snapshot: Snapshot, rules: RuleSet, fits: np.ndarray[Any, Any]
) -> tuple[tuple[ReasonCount, ...], int | None]:
    """The audit-mode filters' answers on every node: grouped as the enforced ones are, and how
    many of the fitting nodes they would leave."""
    if rules.shadow is None:
        return (), None
    bound = Session(rules.shadow).bind(pod, snapshot)
    try:
        verdicts, passing = _verdicts(Framework(), bound, snapshot)
        left = int((fits & passing).sum())
        return _groups(verdicts), left
    finally:
        bound.release()


def _verdicts(
    framework: Framework, bound: BoundRules, snapshot: Snapshot
) -> tuple[dict[str, tuple[FilterFailure, ...]], np.ndarray[Any, Any]]:
    """Every filtered node (in cluster order) -> each filter it fails, with reasons, in rule
    order; and whether each node fits (passes every applicable filter)."""
    rows = np.arange(len(snapshot.nodes), dtype=np.intp)
    answer = framework.filter(bound, snapshot, rows, all_failing=True)
    fits = np.zeros(len(rows), dtype=bool)
    fits[answer.passing] = True
    every = answer.every or {}
    verdicts = {
        name: tuple(FilterFailure(s.rule, s.reasons, s.unresolvable) for s in statuses)
        for name, statuses in every.items()
    }
    return verdicts, fits


def _groups(verdicts: dict[str, tuple[FilterFailure, ...]]) -> tuple[ReasonCount, ...]:
    counts: dict[tuple[str, str], list[Any]] = {}
    for node, failures in verdicts.items():
        for failure in failures:
            for reason in dict.fromkeys(failure.reasons or ("(no reason given)",)):
                entry = counts.setdefault((failure.rule, reason), [0, 0, []])
                entry[0] += 1
                entry[1] += failure.unresolvable
                if len(entry[2]) < NAMED:
                    entry[2].append(node)
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    return tuple(ReasonCount(rule, reason, n, u, tuple(names)) for (rule, reason), (n, u, names) in ranked)


def _codes(pod: Pod, snapshot: Snapshot, verdicts: dict[str, tuple[FilterFailure, ...]]) -> tuple[Reason, ...]:
    """Every failing (filter, reason) as a code, counted over the nodes (every failing filter
    of each), with the smallest shortfall among them and its node."""
    tally = Tally()
    view = snapshot.node_view
    for name, failures in verdicts.items():
        node = view(name)
        for f in failures:
            tally.add_node(f.rule, f.reasons, pod, node, f.unresolvable)
    return tally.reasons()


def _blockers(verdicts: dict[str, tuple[FilterFailure, ...]]) -> tuple[Blocker, ...]:
    alone: dict[str, list[str]] = {}
    for node, failures in verdicts.items():
        if len(failures) == 1:
            alone.setdefault(failures[0].rule, []).append(node)
    ranked = sorted(alone.items(), key=lambda item: (-len(item[1]), item[0]))
    return tuple(Blocker(rule, len(names), tuple(names[:NAMED])) for rule, names in ranked)


def _shortfalls(
    pod: Pod, nodes: Sequence[NodeInfo], verdicts: dict[str, tuple[FilterFailure, ...]], resource_rules: set[str]
) -> tuple[Shortfall, ...]:
    """The nodes that fail for resources only (every failing filter compares resources, or says
    "Insufficient ..."), nearest to fitting first (the smallest sum of shortfalls as shares of the
    node's allocatable), with what each lacks."""
    by_name = {n.name: n for n in nodes} if verdicts else {}
    ranked: list[tuple[float, str, tuple[tuple[str, str], ...]]] = []
    for name, failures in verdicts.items():
        if not all(
            f.rule in resource_rules or all(r.startswith(_RESOURCE_REASONS) for r in f.reasons) for f in failures
        ):
            continue  # some filter other than a resource comparison keeps it out too
        node = by_name[name]
        missing: list[tuple[str, str]] = []
        share = 0.0
        for resource, wanted in pod.requests.items():
            lack = wanted - node.free.get(resource, 0)
            if wanted > 0 and lack > 0:
                missing.append((resource, _amount(resource, lack)))
                share += lack / max(node.allocatable.get(resource, 0), 1)
        if any("Too many pods" in f.reasons for f in failures):
            missing.append(("pods", "1"))
            share += 1 / max(node.allocatable.get("pods", 0) // 1000, 1)
        if missing:
            ranked.append((share, name, tuple(missing)))
    ranked.sort()
    return tuple(Shortfall(name, missing) for _, name, missing in ranked[:SHORTFALLS])


def _amount(resource: str, milli: int) -> str:
    if resource == "cpu":
        return quantity_text(milli) if milli % 1000 else str(milli // 1000)
    return quantity_text(milli)


def _detailed(
    pod: Pod,
    snapshot: Snapshot,
    bound: BoundRules,
    blamer: Blamer,
    verdicts: dict[str, tuple[FilterFailure, ...]],
    settings: WhySettings,
) -> tuple[NodeVerdict, ...]:
    """The nodes asked for, then the nearest to fitting (fewest failing filters, then cluster
    order), up to ``settings.detailed``, each failure with its blames."""
    chosen = [n for n in settings.nodes if n in verdicts]
    ranked = sorted(verdicts, key=lambda n: len(verdicts[n]))  # stable: cluster order among equals
    for name in ranked:
        if len(chosen) >= max(settings.detailed, len(settings.nodes)):
            break
        if name not in chosen:
            chosen.append(name)
    ctx = EvalContext(pod, snapshot)
    out = []
    for name in chosen:
        node = snapshot.node_view(name)
        failures = tuple(
            FilterFailure(
                f.rule,
                f.reasons,
                f.unresolvable,
                blamer.blame(f.rule, ctx, node),
                bound.domain_values(f.rule, node),
                node_reasons(f.rule, f.reasons, pod, node, f.unresolvable),
            )
            for f in verdicts[name]
        )
        out.append(NodeVerdict(name, failures))
    return tuple(out)


def _best(
    bound: BoundRules, nodes: Sequence[NodeInfo], feasible: np.ndarray[Any, Any], count: int, distinct: int = 0
) -> tuple[Scored, ...]:
    """The ``count`` best scored nodes, best first; then, while fewer than ``distinct`` of them
    score differently (a big cluster's best are often twins), the next nodes that do, so that
    the score terms can show what beat them."""
    if not len(feasible) or not bound.scores:
        return tuple(Scored(nodes[i].name, (), 0) for i in feasible.tolist()[:count])
    picked = [nodes[i] for i in feasible.tolist()]
    bound.ctx.feasible = picked
    try:
        matrix: Matrix = engine.score_matrix(bound, NodeColumns(picked), np.arange(len(picked), dtype=np.intp))
    except OverflowError:
        matrix = score_matrix(bound.score_vectors(picked))
    per_rule: list[Matrix] = []
    totals = weighted_totals(bound.scores, matrix, per_rule).tolist()
    ranked = sorted(range(len(picked)), key=lambda i: (-totals[i], picked[i].name))
    order = ranked[:count]
    seen = {tuple(int(c[i]) for c in per_rule) for i in order}
    for i in ranked[count:]:
        if len(seen) >= distinct:
            break
        values = tuple(int(c[i]) for c in per_rule)
        if values not in seen:
            seen.add(values)
            order.append(i)
    return tuple(Scored(picked[i].name, tuple(int(c[i]) for c in per_rule), int(totals[i])) for i in order)


def _with_terms(
    best: tuple[Scored, ...], bound: BoundRules, snapshot: Snapshot, terms: ScoreTerms
) -> tuple[Scored, ...]:
    """The best nodes, the best and the next best that score differently (:data:`TERM_NODES` in
    all) with the terms of each score rule built from lets that depend on the node (rulesched.lang.evaluation.terms: the reference interpreter,
    one evaluation of the rule's lets per node)."""
    rules = [s.name for s in bound.scores if terms.names(s.name)]
    if not rules:
        return best
    out = list(best)
    seen: set[tuple[int, ...]] = set()
    for i, scored in enumerate(best):
        if len(seen) == TERM_NODES:
            break
        if scored.values in seen:  # scored alike: its terms would say nothing more
            continue
        seen.add(scored.values)
        node = snapshot.node_view(scored.node)
        shown = {rule: terms.terms(rule, bound.ctx, node) for rule in rules}
        out[i] = dataclasses.replace(scored, terms=shown)
    return tuple(out)


def _preemption(
    pod: Pod,
    snapshot: Snapshot,
    session: Session,
    verdicts: dict[str, tuple[FilterFailure, ...]],
    enabled: bool,
) -> PreemptionVerdict:
    if not enabled:
        return PreemptionVerdict(False, False, None, (), "not evaluated")
    statuses = {
        name: Code.UNSCHEDULABLE_AND_UNRESOLVABLE if any(f.unresolvable for f in failures) else Code.UNSCHEDULABLE
        for name, failures in verdicts.items()
    }
    outcome: Preemption = preempt(snapshot, session, pod, statuses)
    unresolvable = sum(1 for s in statuses.values() if s is Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    if outcome.nominated is not None:
        victims = tuple(v.key for v in outcome.victims)
        why = (
            f"evicting {len(victims)} pod(s) of lower priority on {outcome.nominated} "
            f"({', '.join(victims[:5])}{', ...' if len(victims) > 5 else ''}) would make room"
        )
        return PreemptionVerdict(True, True, outcome.nominated, victims, why)
    why = outcome.message
    if outcome.eligible and unresolvable:
        why += f" ({unresolvable} node(s) fail a filter marked unresolvable: evicting pods there cannot help)"
    return PreemptionVerdict(True, False, None, (), why, outcome.message)


# --- JSON (the live endpoint's answer, and `rulesched explain --output json`) ---------------------


def _code_parts(reason: Reason | None) -> dict[str, Any]:
    """A reason group's code and parts, beside its message."""
    if reason is None:
        return {}
    shown = reason.json()
    return {k: shown[k] for k in ("code", "plugin", "resource", "key", "value", "shortfall", "unit", "quantity")} | {
        "nearest": reason.nearest or None
    }


def _failure_json(f: FilterFailure) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "reasons": list(f.reasons),
        "unresolvable": f.unresolvable,
        "blame": [{"expression": b.text, "at": b.location} for b in f.blames],
        "values": list(f.values),
        "codes": [c.json() for c in f.codes],
    }


def _scored_json(s: Scored) -> dict[str, Any]:
    out: dict[str, Any] = {"node": s.node, "values": list(s.values), "total": s.total}
    if s.terms:  # rule -> the lets it read on the node
        out["terms"] = {
            rule: [{"let": t.name, "value": t.value, "at": t.location} for t in terms]
            for rule, terms in s.terms.items()
        }
    return out


def explanation_json(e: PodExplanation) -> dict[str, Any]:
    coded = {(c.rule, c.message): c for c in e.codes}
    return {
        "pod": e.pod,
        "nodes": e.nodes,
        "feasible": e.feasible,
        "message": e.message,
        "rules_digest": e.digest,
        "filters_not_applied": list(e.skipped_filters),
        "reasons": [
            {
                "rule": g.rule,
                "reason": g.reason,
                "nodes": g.nodes,
                "unresolvable": g.unresolvable,
                "names": list(g.names),
                **_code_parts(coded.get((g.rule, g.reason))),
            }
            for g in e.groups
        ],
        "codes": [c.summary_json() for c in e.codes],
        "blockers": [{"rule": b.rule, "nodes": b.nodes, "names": list(b.names)} for b in e.blockers],
        "shortfalls": [{"node": s.node, "needs": dict(s.missing)} for s in e.shortfalls],
        "detailed": [{"node": d.node, "failures": [_failure_json(f) for f in d.failures]} for d in e.detailed],
        "scores": {
            "rules": [{"rule": r, "weight": w} for r, w in zip(e.score_rules, e.weights, strict=True)],
            "best": [_scored_json(s) for s in e.best],
        },
        "preemption": {
            "tried": e.preemption.tried,
            "helps": e.preemption.helps,
            "nominated": e.preemption.nominated,
            "victims": list(e.preemption.victims),
            "why": e.preemption.why,
        },
        "shadow": {
            "rules": list(e.shadow_rules),
            "reasons": [
                {"rule": g.rule, "reason": g.reason, "nodes": g.nodes, "names": list(g.names)} for g in e.shadow
            ],
            "feasible": e.shadow_feasible,
        },
        "seconds": round(e.seconds, 4),
    }
