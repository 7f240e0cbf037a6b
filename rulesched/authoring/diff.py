"""``rulesched diff``: what a rules change would do to a cluster's pending pods, before merging it.

::

    rulesched diff --old RULES --new RULES CLUSTER... [--output text|json|html] [--seed N]
                   [--percentage-of-nodes-to-score N] [--scheduler-name NAME] [--explain-limit N]

``--old`` and ``--new`` are repeatable and compose as ``rulesched simulate --rules`` does (files,
folders, ``default``; ``--old`` defaults to ``default``). Both sets are loaded first, so a set
that does not compile stops the command before any simulation (its ``file:line:col``, exit 2).
The cluster files are read once (:func:`rulesched.simulate.load.load_cluster`), then scheduled
twice by the simulator itself (:class:`rulesched.simulate.driver.Simulation`), once with each
set, with the same seed and settings, each on a store of its own.

Pending pods being deleted are never attempted (kube-scheduler skips them), under either set, so
they never differ; each run's summary counts them as ``terminating``.

Every pending pod whose outcome differs is reported, in input order: moved (A → B), newly
unschedulable (A → none, with the new failure message) or newly scheduled (none → B); running
pods evicted under one set only are listed too. For the first ``--explain-limit`` changed pods
(100; the rest are counted), :class:`rulesched.authoring.explain.Explainer` names the rules that
made the difference, evaluated against the cluster before scheduling, then, where none differs
there, against the cluster as each run left it.

Text output starts with a summary line (``3 pods moved, 1 newly unschedulable, 0 newly
scheduled (of N pending)``), then the rules that differ between the sets
(:func:`rulesched.lang.rule_differences`: only they can make a difference), then one block per
changed pod; ``--output json`` prints the same
as one document, ``--output html`` as one self-contained page (:mod:`rulesched.authoring.diff_html`);
the command line is :mod:`rulesched.authoring.diff_cli`.
Exit status: 0 when nothing changes, 1 when something does, 2 on errors.
Next stage: :mod:`rulesched.authoring.explain` names the rules behind each change.
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rulesched.authoring.explain import Explainer, Explanation, explanation_json, explanation_lines
from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.errors import ConfigError
from rulesched.lang import RuleDifference, RuleSet, load_rules, resolve_rules_path, rule_differences
from rulesched.model import Pod
from rulesched.model.load import LoadSnapshot
from rulesched.scheduler.audit import audit
from rulesched.scheduler.framework import (
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
    SchedulerSettings,
    check_percentage_of_nodes_to_score,
    check_sampling,
    skip_deleting,
)
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import ClusterObjects, load_cluster
from rulesched.simulate.node_metrics import read_node_metrics

MOVED, UNSCHEDULABLE, SCHEDULED = "moved", "newly unschedulable", "newly scheduled"
EXPLAIN_LIMIT = 100
_SHOWN_EVICTIONS = 10  # evicted pods named in text output, per side


@dataclass(frozen=True)
class DiffSettings:
    cluster: tuple[str, ...]
    old: tuple[str, ...]
    new: tuple[str, ...]
    output: str = "text"
    seed: int = 0
    percentage_of_nodes_to_score: int = 0
    scheduler_name: str | None = None
    explain_limit: int = EXPLAIN_LIMIT
    node_metrics: tuple[str, ...] = ()  # --node-metrics files: both runs read the same node load
    min_candidate_nodes_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE  # (DefaultPreemptionArgs)
    min_candidate_nodes_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE


@dataclass(frozen=True)
class Outcome:
    """Where one run put a pod (None: nowhere), and its last cycle's message."""

    node: str | None
    message: str


@dataclass(frozen=True)
class Run:
    """One rule set's simulation of the cluster."""

    rules: RuleSet
    outcomes: Mapping[str, Outcome]  # pending pod key -> outcome
    evicted: tuple[str, ...]
    seconds: float
    terminating: int = 0  # pending pods being deleted: never attempted (kube-scheduler skips them)
    # audit-mode filter -> the placements of this run it would have rejected (every one in the set)
    shadow: Mapping[str, int] = field(default_factory=dict)
    # the cluster as the run left it (the explanations' later state)
    store: ClusterStore | None = field(default=None, compare=False, repr=False)

    def summary(self) -> dict[str, object]:
        scheduled = sum(1 for o in self.outcomes.values() if o.node is not None)
        return {
            "rules": [str(f) for f in self.rules.files],
            "digest": self.rules.digest,
            "scheduled": scheduled,
            "unschedulable": len(self.outcomes) - scheduled - self.terminating,
            "terminating": self.terminating,
            "evicted": len(self.evicted),
            "scheduling_seconds": round(self.seconds, 6),
            "audit_mode_rejections": dict(self.shadow),
        }


@dataclass(frozen=True)
class PodChange:
    pod: str
    kind: str  # MOVED, UNSCHEDULABLE or SCHEDULED
    old: Outcome
    new: Outcome
    why: Explanation | None = None  # None beyond the explain limit


@dataclass(frozen=True)
class Diff:
    old: Run
    new: Run
    changes: tuple[PodChange, ...]
    evicted_only_old: tuple[str, ...]
    evicted_only_new: tuple[str, ...]
    seconds: Mapping[str, float]  # load, old, new, explain
    # running pods that pass every filter on their node under --old and fail one under --new
    newly_violating: tuple[str, ...] = ()
    # the rules that differ between the sets: what can make a difference (listed first)
    rules: tuple[RuleDifference, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.evicted_only_old or self.evicted_only_new or self.newly_violating)

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    @property
    def explained(self) -> int:
        return sum(1 for c in self.changes if c.why is not None)


# --- running ---------------------------------------------------------------------------------------


def diff(settings: DiffSettings) -> Diff:
    if settings.explain_limit < 0:
        raise ConfigError(f"--explain-limit must be 0 or more, not {settings.explain_limit}")
    check_percentage_of_nodes_to_score(settings.percentage_of_nodes_to_score)
    check_sampling(settings.min_candidate_nodes_percentage, settings.min_candidate_nodes_absolute)
    started = time.perf_counter()
    old_rules = load_rules([resolve_rules_path(r) for r in settings.old])
    new_rules = load_rules([resolve_rules_path(r) for r in settings.new])
    objects = load_cluster(settings.cluster)
    load = read_node_metrics(settings.node_metrics)
    pending = [
        p
        for p in objects.pending_pods
        if settings.scheduler_name is None or p.scheduler_name == settings.scheduler_name
    ]
    scheduler = SchedulerSettings(
        percentage_of_nodes_to_score=settings.percentage_of_nodes_to_score,
        seed=settings.seed,
        scheduler_name=settings.scheduler_name,
        min_candidate_nodes_percentage=settings.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=settings.min_candidate_nodes_absolute,
    )
    loaded = time.perf_counter()
    # The loaded cluster outlives both runs: keep the cyclic collector from walking it again at
    # every full collection (as `rulesched simulate` does), and let go of it afterwards.
    gc.collect()
    gc.freeze()
    try:
        old = _simulate(old_rules, objects, pending, scheduler, load)
        new = _simulate(new_rules, objects, pending, scheduler, load)
    finally:
        gc.unfreeze()
    explaining = time.perf_counter()
    changes = _changes(pending, old, new)
    before = objects.store(provision=True, load=load).snapshot()  # (the cluster before either run)
    if changes and settings.explain_limit:
        explainer = Explainer(old_rules, new_rules, before)
        by_key = {p.key: p for p in pending}
        explained = []
        for c in changes[: settings.explain_limit]:
            later = [
                (f"in the cluster as {label} left it", _left(run, c.pod))
                for label, run in (("--new", new), ("--old", old))
            ]
            why = explainer.explain(by_key[c.pod], c.old.node, c.new.node, later)
            explained.append(PodChange(c.pod, c.kind, c.old, c.new, why))
        changes[: settings.explain_limit] = explained
    running = [
        p
        for p in objects.running_pods
        if settings.scheduler_name is None or p.scheduler_name == settings.scheduler_name
    ]
    was = {p.pod for p in audit(before, old_rules, running).violating}
    newly = tuple(p.pod for p in audit(before, new_rules, running).violating if p.pod not in was)
    done = time.perf_counter()
    old_evicted, new_evicted = set(old.evicted), set(new.evicted)
    return Diff(
        old,
        new,
        tuple(changes),
        tuple(k for k in old.evicted if k not in new_evicted),
        tuple(k for k in new.evicted if k not in old_evicted),
        {"load": loaded - started, "old": old.seconds, "new": new.seconds, "explain": done - explaining},
        newly,
        rule_differences(old_rules.checked, new_rules.checked),
    )


def _left(run: Run, key: str) -> Callable[[], Snapshot | None]:
    """The cluster as ``run`` left it, without the pod ``key`` (which would count itself)."""

    def state() -> Snapshot | None:
        store = run.store
        if store is None:
            return None
        pod = store.remove_pod(key, forget=False) if store.pod_node(key) is not None else None
        try:
            return store.snapshot()
        finally:
            if pod is not None:
                store.add_pod(pod)

    return state


def _simulate(
    rules: RuleSet,
    objects: ClusterObjects,
    pending: Sequence[Pod],
    settings: SchedulerSettings,
    load: LoadSnapshot | None,
) -> Run:
    started = time.perf_counter()
    simulation = Simulation(rules, objects.store(provision=True, load=load), settings)
    for group in objects.groups:
        simulation.add_group(group)
    for pod in pending:
        simulation.add(pod)
    simulation.run()
    outcomes = {}
    shadow = dict.fromkeys(sorted(rules.shadow_filters), 0)
    for pod in pending:
        history = simulation.history[pod.key]
        last = history.last
        if last is not None and history.node is not None:
            for rule in last.shadow_rejected:
                shadow[rule] += 1
        if last is not None:
            message = last.message
        else:  # (a pending pod being deleted is never queued: Simulation.add)
            message = skip_deleting(pod) if pod.deleting else "not attempted"
        outcomes[pod.key] = Outcome(history.node, message)
    evicted = tuple(p.key for p in simulation.evicted)
    terminating = sum(1 for p in pending if p.deleting)
    return Run(rules, outcomes, evicted, time.perf_counter() - started, terminating, shadow, simulation.store)


def _changes(pending: Sequence[Pod], old: Run, new: Run) -> list[PodChange]:
    changes = []
    for pod in pending:
        before, after = old.outcomes[pod.key], new.outcomes[pod.key]
        if before.node == after.node:
            continue
        kind = MOVED if before.node and after.node else UNSCHEDULABLE if before.node else SCHEDULED
        changes.append(PodChange(pod.key, kind, before, after))
    return changes


# --- output ----------------------------------------------------------------------------------------


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def summary_line(result: Diff) -> str:
    return (
        f"{_plural(result.count(MOVED), 'pod', 'pods')} moved, {result.count(UNSCHEDULABLE)} newly unschedulable, "
        f"{result.count(SCHEDULED)} newly scheduled (of {len(result.old.outcomes)} pending)"
    )


def _names(keys: Sequence[str]) -> str:
    shown = ", ".join(keys[:_SHOWN_EVICTIONS])
    return f"{shown}, ... ({len(keys) - _SHOWN_EVICTIONS} more)" if len(keys) > _SHOWN_EVICTIONS else shown


def _shadow_lines(result: Diff) -> list[str]:
    """Audit-mode filters of either set: the placements each would have rejected."""
    lines = []
    for label, run in (("--old", result.old), ("--new", result.new)):
        for rule, count in run.shadow.items():
            lines.append(
                f"audit-mode filter {rule} ({label}): would reject {_plural(count, 'placement', 'placements')}"
            )
    return lines


def rule_lines(result: Diff) -> list[str]:
    """The rules that differ between the sets, one a line after a heading (or that none does)."""
    if not result.rules:
        return ["no rule differs between --old and --new"]
    return ["rules that differ (--old → --new):", *(f"  {r.text}" for r in result.rules)]


def render_text(result: Diff) -> str:
    lines = [summary_line(result), *rule_lines(result), *_shadow_lines(result)]
    if result.newly_violating:
        lines.append(
            f"{_plural(len(result.newly_violating), 'running pod', 'running pods')} would violate the new rules "
            f"on their nodes: {_names(list(result.newly_violating))} (rulesched audit --rules NEW says why)"
        )
    if result.evicted_only_old or result.evicted_only_new:
        lines.append(
            f"evictions differ: {len(result.evicted_only_new)} evicted only under --new"
            + (f" ({_names(result.evicted_only_new)})" if result.evicted_only_new else "")
            + f", {len(result.evicted_only_old)} only under --old"
            + (f" ({_names(result.evicted_only_old)})" if result.evicted_only_old else "")
        )
    for change in result.changes:
        lines.append("")
        lines.append(f"{change.pod}: {change.kind} {change.old.node or 'none'} → {change.new.node or 'none'}")
        if change.kind == UNSCHEDULABLE:
            lines.append(f"  {change.new.message}")
        elif change.kind == SCHEDULED:
            lines.append(f"  was: {change.old.message}")
        if change.why is not None:
            lines.extend(explanation_lines(change.why))
    left_out = len(result.changes) - result.explained
    if left_out:
        lines.append("")
        named = (
            f"for the first {_plural(result.explained, 'changed pod', 'changed pods')} only"
            if result.explained
            else "for no changed pod"
        )
        lines.append(f"rules named {named}; {left_out} left out (--explain-limit)")
    return "\n".join(lines)


def render_json(result: Diff) -> str:
    pods = [
        {
            "pod": c.pod,
            "change": c.kind,
            "old": {"node": c.old.node, "message": c.old.message},
            "new": {"node": c.new.node, "message": c.new.message},
            "explanation": None if c.why is None else explanation_json(c.why),
        }
        for c in result.changes
    ]
    summary = {
        "pending": len(result.old.outcomes),
        "moved": result.count(MOVED),
        "newly_unschedulable": result.count(UNSCHEDULABLE),
        "newly_scheduled": result.count(SCHEDULED),
        "explained": result.explained,
        "left_out": len(result.changes) - result.explained,
        "old": result.old.summary(),
        "new": result.new.summary(),
        "seconds": {k: round(v, 6) for k, v in result.seconds.items()},
    }
    summary["newly_violating"] = list(result.newly_violating)
    summary["rules"] = [
        {"kind": r.kind, "rule": r.name, "change": r.change, "aspects": list(r.aspects)} for r in result.rules
    ]
    evicted = {"only_old": list(result.evicted_only_old), "only_new": list(result.evicted_only_new)}
    return json.dumps({"summary": summary, "pods": pods, "evicted": evicted}, indent=2, ensure_ascii=False)
