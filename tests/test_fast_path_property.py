"""Property: the fast path and the reference interpreter agree on generated clusters (default rules).

The fast path is what :meth:`RuleSet.bind` adds to plain evaluation: compiled closures with
pod-only parts hoisted, one binding per equivalence class of pods, per-node memos of filter
outcomes and score vectors stamped with cluster version tokens. The reference is
:class:`rulesched.lang.evaluation.interp.Interpreter` with a fresh :class:`EvalContext` over a
:class:`ClusterStore` rebuilt from the objects (so stale incremental aggregates would show too).

Pending pods come from a template and 1-2 variants of it (near-equal classes, several pods per
class); each is placed on a drawn feasible node. Between pods, running pods come and go and nodes
are added or replaced. At every step one pod of every template, and a never-placed pod rich in
pod (anti-)affinity and spreading, are checked too: a stale memo entry, a version token that
does not move, or a class key missing a field shows up as a disagreement. A second property
runs the real :class:`Scheduler` and checks every outcome against the reference.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import EngineSettings
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.values import as_score
from rulesched.model import Node, Pod
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.scoring import normalize
from tests.helpers.scenarios import (
    NAMESPACES,
    SETTINGS,
    Scenario,
    apply_events,
    reported_reasons,
    scenarios,
    schedule,
)
from tests.upstream.harness import default_rules

# --- the reference --------------------------------------------------------------------------------


@dataclass
class Outcome:
    # infeasible node -> (filter, reasons, whether unresolvable)
    failures: dict[str, tuple[str, tuple[str, ...], bool]]
    feasible: list[str]
    scores: list[tuple[str, int, str]]  # applicable score rules: name, weight, normalize
    raw: dict[str, dict[str, int]]  # rule -> node -> raw score
    normalized: dict[str, dict[str, int]]

    def totals(self) -> dict[str, int]:
        return {n: sum(w * self.normalized[r][n] for r, w, _ in self.scores) for n in self.feasible}


def reference(p: Pod, nodes: list[Node], pods: list[Pod]) -> Outcome:
    """The interpreter, a fresh context, and a cluster rebuilt from the objects alone."""
    checked = default_rules().checked
    interp = Interpreter(checked.notes, checked.lets)
    cluster = ClusterStore.build(nodes, pods, namespaces=NAMESPACES)
    ctx = EvalContext(p, cluster)
    rules = [r for r in checked.rules if interp.applies(r, ctx)]
    failures, feasible = {}, []
    for info in cluster.nodes:
        for r in rules:
            if r.kind is ast.RuleKind.FILTER and not interp.body(r, ctx, info):
                reasons = reported_reasons(interp.reason(r, ctx, info), r.name)
                failures[info.name] = (r.name, reasons, interp.unresolvable(r, ctx, info))
                break
        else:
            feasible.append(info)
    ctx.feasible = feasible
    scores = [r for r in rules if r.kind is ast.RuleKind.SCORE]
    names = [n.name for n in feasible]
    raw = {r.name: {n.name: as_score(interp.body(r, ctx, n)) for n in feasible} for r in scores}
    normalized = {
        r.name: dict(zip(names, normalize(r.normalize, [raw[r.name][n] for n in names]), strict=True)) for r in scores
    }
    return Outcome(failures, names, [(r.name, r.weight, r.normalize) for r in scores], raw, normalized)


# --- the fast path --------------------------------------------------------------------------------


def fast_path(p: Pod, state: ClusterStore, start: int, walk_first: bool) -> Outcome:
    """Per node and through the scheduler's batch calls (in drawn order: the second hits memos)."""
    bound = default_rules().bind(p, state)
    nodes = state.nodes
    walked: dict[str, tuple[str, ...]] = {}

    def walk() -> list[str]:
        found, looked = bound.feasible(
            nodes, start % len(nodes), len(nodes), lambda n, failure: walked.__setitem__(n.name, failure[1])
        )
        assert looked == len(nodes)
        return [n.name for n in found]

    via_walk = walk() if walk_first else []
    outcomes = {n.name: bound.first_failure(n) for n in nodes}
    if not walk_first:
        via_walk = walk()
    failures = {n.name: (f.name, why, f.unresolvable(n)) for n in nodes if (o := outcomes[n.name]) for f, why in [o]}
    feasible = [n for n in nodes if outcomes[n.name] is None]
    assert sorted(via_walk) == sorted(n.name for n in feasible)
    assert walked == {name: why for name, (_, why, _) in failures.items()}
    bound.ctx.feasible = feasible
    batch = bound.score_vectors(feasible) if walk_first else None
    vectors = [bound.score_vector(n) for n in feasible]
    assert vectors == (batch if batch is not None else bound.score_vectors(feasible))
    for vector in vectors:  # the last element: the weighted sum of the rules not normalised
        assert vector[-1] == sum(
            s.weight * v for s, v in zip(bound.scores, vector, strict=False) if s.normalize == "none"
        )
    names = [n.name for n in feasible]
    raw = {s.name: {n: v[i] for n, v in zip(names, vectors, strict=True)} for i, s in enumerate(bound.scores)}
    normalized = {
        s.name: dict(zip(names, normalize(s.normalize, [raw[s.name][n] for n in names]), strict=True))
        for s in bound.scores
    }
    return Outcome(failures, names, [(s.name, s.weight, s.normalize) for s in bound.scores], raw, normalized)


def snapshot(state: ClusterStore, without: str = "") -> tuple[list[Node], list[Pod]]:
    return [n.node for n in state.nodes], [p for p in state.pods() if p.key != without]


# --- properties -----------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.booleans())
def test_fast_path_agrees_with_the_interpreter(scenario: Scenario, walk_first: bool) -> None:
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    for i, (p, event) in enumerate(zip(scenario.pending, scenario.events, strict=True)):
        apply_events(state, event, i)
        for q in (*scenario.probes, p):  # the pending pod last: its outcome places it
            fast = fast_path(q, state, scenario.start + i, walk_first)
            assert fast == reference(q, *snapshot(state)), (q.key, i)  # feasible, reasons, scores
        if fast.feasible:  # the next pod of the class reuses the binding over a changed cluster
            target = fast.feasible[scenario.places[i] % len(fast.feasible)]
            state.finish_binding(state.assume(p, target).key)


@SETTINGS
@given(scenarios(), st.integers(0, 2**16), st.sampled_from(["explain", "tables", "columns"]))
def test_scheduler_places_pods_where_the_interpreter_would(scenario: Scenario, seed: int, mode: str) -> None:
    """Each cycle (all nodes scored) against the reference without the pod: an unschedulable pod
    fits nowhere; a placed one passes every filter and has the highest total. With ``explain`` the
    cycle's per-node reasons and normalised scores must be the reference's, too. Without, the
    cycle walks node tables, their stale rows evaluated node by node or (``columns``) as columns."""
    state = ClusterStore.build(scenario.nodes, scenario.running, namespaces=NAMESPACES)
    explain = mode == "explain"
    settings_ = SchedulerSettings(
        percentage_of_nodes_to_score=100,
        seed=seed,
        explain=explain,
        engine=EngineSettings(columns_from=1 if mode == "columns" else 0),
    )
    for result in schedule(scenario, state, settings_):
        key = result.pod.key
        ref = reference(result.pod, *snapshot(state, without=key))
        totals = ref.totals()
        if explain:
            assert result.filtered == {n: why for n, (_, why, _) in ref.failures.items()}, key
            assert result.unresolvable == {n for n, (_, _, unresolvable) in ref.failures.items() if unresolvable}, key
            assert result.scores == {
                n: {**{r: ref.normalized[r][n] for r, _, _ in ref.scores}, "total": total}
                for n, total in totals.items()
            }, key
        if result.code is not Code.SCHEDULED:
            assert result.code is Code.UNSCHEDULABLE and ref.feasible == [], (key, ref.feasible)
            assert result.preemption is None or result.preemption.nominated is None
            continue
        assert state.pod_node(key) == result.node
        assert result.node in ref.feasible, (key, result.node, ref.failures.get(result.node or ""))
        assert totals[result.node] == max(totals.values()), (key, result.node, totals)
