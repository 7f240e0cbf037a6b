"""What would make it fit: the smallest changes that let a pending pod (or a group of pods)
schedule, each checked by scheduling the changed cluster with the same rules before it is shown.

From the explanation (every node's every failing filter, as reason codes) each node that fails
only for reasons a change can remove proposes the changes that remove them, on the cluster (free
room by evicting pods there, untaint, uncordon, label it, add nodes like it), on the pod (lower a
request to what the node has free, tolerate the taint, drop the node selector or a required
affinity, relax a spread constraint, a higher priority) or on the rules (a policy's own filter
in audit mode). Candidates are ranked by size (:func:`size`), the same change proposed by many
nodes counted once, and checked in that order: each one's changes are made on a copy of the
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
evicts, a filter put in audit mode as two plus the other pending pods it moves (when they were
asked about), a gang's minimum lowered by how much.
Next stage: :func:`fixes_json` (explain's answer), rendered by :mod:`rulesched.authoring.why`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang import RuleSet, bundled_rules_dir
from rulesched.model import Pod, PriorityClass
from rulesched.model.groups import PodGroup
from rulesched.scheduler.changes import (
    ALL,
    HOSTNAME,
    Change,
    apply,
    changed_group,
    changed_pod,
    changed_rules,
    node_lacks,
)
from rulesched.scheduler.reasons import PLUGINS, ReasonCode, classify
from rulesched.scheduler.trial import TrialOutcome, Trials
from rulesched.semantics.affinity import resolve_all

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


# --- candidates -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeFailure:
    """One failing filter on one node, as the search reads it."""

    rule: str
    reasons: tuple[str, ...]
    unresolvable: bool


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


def families_of(
    pod: Pod, node: NodeInfo, failures: Sequence[NodeFailure], resource_rules: set[str]
) -> dict[str, list[Any]] | None:
    """What must change on ``node`` for ``pod``, as families: room (resources), taint (each
    untolerated taint), cordon, affinity, spread, pod-affinity, anti-affinity, ports, rule
    (a policy's own filter); None when some failure has no change that can remove it here."""
    families: dict[str, list[Any]] = {}
    for f in failures:
        for message in f.reasons or (f"node(s) didn't satisfy rule {f.rule}",):
            code = classify(f.rule, message).code
            if code in (C.INSUFFICIENT_RESOURCE, C.TOO_MANY_PODS):
                families.setdefault("room", [])
            elif code is C.TAINT_NOT_TOLERATED:
                families.setdefault("taint", [])
            elif code is C.NODE_UNSCHEDULABLE:
                families["cordon"] = []
            elif code is C.NODE_AFFINITY_MISMATCH:
                families["affinity"] = []
            elif code is C.TOPOLOGY_SPREAD_SKEW:
                families["spread"] = []
            elif code is C.POD_AFFINITY_MISMATCH:
                families["pod-affinity"] = []
            elif code is C.POD_ANTI_AFFINITY_CONFLICT:
                families["anti-affinity"] = []
            elif code is C.HOST_PORT_CONFLICT:
                families["ports"] = []
            elif code is C.RULE_REJECTED and f.rule and f.rule not in PLUGINS:
                if f.rule in resource_rules and node_lacks(pod, node.free):
                    families.setdefault("room", [])  # (a rule of one's own about resources: room)
                else:
                    families.setdefault("rule", []).append(f.rule)
            else:
                return None
    if "taint" in families:
        families["taint"] = [
            t for t in node.taints if t.effect in ("NoSchedule", "NoExecute") and not _tolerates(pod, t)
        ]
        if not families["taint"]:
            return None
    return families


def _tolerates(pod: Pod, taint: Any) -> bool:
    for t in pod.tolerations:
        if t.effect and t.effect != taint.effect:
            continue
        if t.operator == "Exists":
            if not t.key or t.key == taint.key:
                return True
        elif t.key == taint.key and t.value == taint.value:
            return True
    return False


def _victims(pod: Pod, node: NodeInfo, keep: Collection[str] = ()) -> list[Pod] | None:
    """The fewest pods to evict from ``node`` for ``pod`` to have room, lowest priority first
    among equals (greedy: each step the pod covering most of what is still lacking), never one
    of ``keep``; None when even an empty node is too small."""
    need = pod.requests
    lack = node_lacks(pod, node.free)
    slots = len(node.pods) + 1 - node.allocatable.get("pods", 0) // 1000
    if any(want > node.allocatable.get(r, 0) for r, want in need.items() if want > 0):
        return None
    chosen: list[Pod] = []
    left = [p for p in node.pods if p.key not in keep]
    while (any(v > 0 for v in lack.values()) or slots > 0) and left:
        best = max(left, key=partial(_gain, lack=lack, slots=slots))
        if _gain(best, lack, slots)[0] <= 0:
            return None
        left.remove(best)
        chosen.append(best)
        slots -= 1
        for r in lack:
            lack[r] -= best.requests.get(r, 0)
    if any(v > 0 for v in lack.values()) or slots > 0:
        return None
    return chosen


def _gain(p: Pod, lack: Mapping[str, int], slots: int) -> tuple[float, int, str]:
    """How much of what is lacking evicting ``p`` covers (a pod slot counts one), then lower
    priority first, then by name."""
    covered = sum(min(p.requests.get(r, 0), v) / v for r, v in lack.items() if v > 0)
    return (covered + (1.0 if slots > 0 else 0.0), -p.priority, p.key)


def _repelling(pod: Pod, node: NodeInfo) -> list[Pod]:
    """The pods on ``node`` the pod's required anti-affinity selects, when every term is per
    node (topologyKey the hostname: evicting them here is enough); else none."""
    terms = resolve_all(pod, pod.pod_anti_affinity)
    if not terms or any(t.topology_key != HOSTNAME for t in terms):
        return []
    return [p for p in node.pods if any(t.matches(p, None) for t in terms)]


def _port_holders(pod: Pod, node: NodeInfo) -> list[Pod]:
    wanted = {(p.host_port, p.protocol) for p in pod.host_ports}
    return [p for p in node.pods if any((h.host_port, h.protocol) in wanted for h in p.host_ports)]


def node_options(
    pod: Pod,
    pods: Sequence[Pod],
    node: NodeInfo,
    families: Mapping[str, list[Any]],
    classes: Sequence[PriorityClass],
    keep: Collection[str] = (),
) -> list[Candidate]:
    """The candidates ``node`` proposes. Each family has its ways (a cluster-side change, a
    pod-side one, a rule's); a candidate takes one way per family: the smallest ways together,
    the cluster's ways together, the pod's together. A node failing for room alone also proposes
    nodes like it, some evictions with the request lowered to what they free, and a priority
    whose preemption evicts for it. The pods of ``keep`` (a group's members) are never evicted."""
    everyone = ALL if len(pods) > 1 else pod.key
    ways: list[list[tuple[str, tuple[Change, ...]]]] = []  # per family: (where, changes) each
    more: list[Candidate] = []
    alone = len(families) == 1 and len(pods) == 1
    for family, items in families.items():
        if family == "room":
            found: list[tuple[str, tuple[Change, ...]]] = []
            victims = _victims(pod, node, keep)
            if victims is not None:
                found.append((CLUSTER, tuple(Change("evict", "Pod", v.key) for v in victims)))
            lacks = node_lacks(pod, node.free)
            # (a request lowered to nothing is not that request lowered: the pod would need none)
            if (
                lacks
                and len(pods) == 1
                and len(node.pods) < node.allocatable.get("pods", 0) // 1000
                and all(node.free.get(r, 0) > 0 for r in lacks)
            ):
                lowered = tuple(
                    Change("set-request", "Pod", everyone, r, amount=node.free.get(r, 0)) for r in sorted(lacks)
                )
                found.append((POD, lowered))
            if victims and len(pods) == 1:
                found += [(MIXED, c.changes) for c in _partly(pod, node, victims, everyone)]
            ways.append(found)
            if victims and alone:
                top = max(v.priority for v in victims)
                if pod.priority <= top and pod.preemption_policy != "Never":
                    higher = sorted((c for c in classes if c.value > top), key=lambda c: c.value)
                    name, value = (higher[0].name, higher[0].value) if higher else ("", top + 1)
                    raise_to = Change("set-priority", "Pod", everyone, value=name, count=len(victims), amount=value)
                    more.append(Candidate(POD, (raise_to,), 0, node.name))
        elif family == "taint":
            for t in items:
                ways.append(
                    [
                        (CLUSTER, (Change("untaint", "Node", node.name, t.key, t.value, t.effect),)),
                        (POD, (Change("tolerate", "Pod", everyone, t.key, t.value, t.effect),)),
                    ]
                )
        elif family == "cordon":
            ways.append([(CLUSTER, (Change("uncordon", "Node", node.name),))])
        elif family == "affinity":
            labels = [(k, v) for k, v in pod.node_selector.items() if node.labels.get(k) != v]
            found = []
            if pod.required_node_affinity is None and labels:
                found.append((CLUSTER, tuple(Change("label", "Node", node.name, k, v) for k, v in labels)))
            dropped = [Change("drop-node-selector", "Pod", everyone, k) for k, _ in labels]
            if pod.required_node_affinity is not None:
                dropped.append(Change("drop-node-affinity", "Pod", everyone))
            found.append((POD, tuple(dropped)))
            ways.append(found)
        elif family == "spread":
            relaxed = tuple(
                Change("relax-spread", "Pod", everyone, c.topology_key)
                for c in pod.topology_spread_constraints
                if c.when_unsatisfiable == "DoNotSchedule"
            )
            ways.append([(POD, relaxed)] if relaxed else [])
        elif family == "pod-affinity":
            ways.append([(POD, (Change("drop-pod-affinity", "Pod", everyone),))])
        elif family == "anti-affinity":
            found = [(POD, (Change("drop-anti-affinity", "Pod", everyone),))]
            repelling = _repelling(pod, node)
            if repelling:  # (the pods it repels on this node evicted)
                found.insert(0, (CLUSTER, tuple(Change("evict", "Pod", p.key) for p in repelling)))
            ways.append(found)
        elif family == "ports":
            ways.append([(CLUSTER, tuple(Change("evict", "Pod", h.key) for h in _port_holders(pod, node)))])
        elif family == "rule":
            ways.append([(RULES, tuple(Change("audit-filter", "Rules", r) for r in dict.fromkeys(items)))])
    out = list(more)
    # Nodes like this one: empty and schedulable, with its labels and taints (which the other
    # ways may change first: the copies take them). What an empty node lacks is gone there:
    # room, the cordon, the pods holding a port or repelling the pod on the node's own hostname
    # (elsewhere the trial says whether the copy's domain still holds them).
    kinds = [family for family, items in families.items() for _ in (items if family == "taint" else [None])]
    gone = {"room", "cordon", "ports", "anti-affinity"}
    if len(pods) == 1 and set(families) <= gone | {"taint", "affinity"} and gone & set(families):
        fits = all(w <= node.allocatable.get(r, 0) for r, w in pod.requests.items() if w > 0)
        rest = [found for kind, found in zip(kinds, ways, strict=True) if kind not in gone]
        if fits and per_node(pod, node) and all(rest):
            picked = [min(found, key=lambda w: size(w[1], pods)) for found in rest]
            added = Change("add-nodes", "Node", node.name, count=1)
            where = CLUSTER if all(w[0] == CLUSTER for w in picked) else MIXED
            out.append(Candidate(where, (*(c for w in picked for c in w[1]), added), 0, node.name))
    if all(ways):
        Way = tuple[str, tuple[Change, ...]]
        picks: list[list[Way | None]] = [
            [min(found, key=lambda w: size(w[1], pods)) for found in ways],  # the smallest ways
            [next((w for w in found if w[0] == CLUSTER), None) for found in ways],
            [next((w for w in found if w[0] == POD), None) for found in ways],
        ]
        for pick in picks:
            if any(w is None for w in pick):
                continue
            changes = tuple(dict.fromkeys(c for w in pick if w is not None for c in w[1]))
            wheres = {w[0] for w in pick if w is not None}
            where = wheres.pop() if len(wheres) == 1 else MIXED
            out.append(Candidate(where, changes, 0, node.name))
    return out


def _partly(pod: Pod, node: NodeInfo, victims: Sequence[Pod], everyone: str) -> list[Candidate]:
    """Some of the victims evicted (the first j, in the order chosen) and the request lowered to
    what the node then has free: smaller than either alone when the last victims free little
    more than the pod lacks."""
    out = []
    free = dict(node.free)
    for j, victim in enumerate(victims[:-1], 1):
        for r, v in victim.requests.items():
            free[r] = free.get(r, 0) + v
        lacks = node_lacks(pod, free)
        if not lacks or not all(free.get(r, 0) > 0 for r in lacks):
            continue
        changes = [Change("evict", "Pod", v.key) for v in victims[:j]]
        changes += [Change("set-request", "Pod", everyone, r, amount=free[r]) for r in sorted(lacks)]
        out.append(Candidate(MIXED, tuple(changes), 0, node.name))
    return out


def per_node(pod: Pod, node: NodeInfo) -> int:
    """How many pods like ``pod`` an empty node like ``node`` holds."""
    counts = [node.allocatable.get(r, 0) // want for r, want in pod.requests.items() if want > 0]
    counts.append(node.allocatable.get("pods", 0) // 1000)
    return max(0, min(counts))


def candidates(
    pods: Sequence[Pod],
    nodes: Callable[[str], NodeInfo | None],
    failures: Mapping[str, Sequence[NodeFailure]],
    resource_rules: set[str],
    classes: Sequence[PriorityClass] = (),
    budget: FixBudget = FixBudget(),
) -> tuple[list[Candidate], list[str]]:
    """The candidates for ``pods`` (the first stands for them all: a group's members alike),
    smallest first, at most ``budget.candidates``; and, when none, why."""
    pod = pods[0]
    ranked: list[tuple[float, str, list[NodeFailure], frozenset[str]]] = []
    hard: dict[str, int] = {}
    for name, fails in failures.items():
        info = nodes(name)
        if info is None:
            continue
        families = families_of(pod, info, fails, resource_rules)
        if families is None:
            for f in fails:
                hard[f.rule] = hard.get(f.rule, 0) + 1
            continue
        ranked.append((nearness(pod, info, families), name, list(fails), frozenset(families)))
    ranked.sort(key=lambda r: (r[0], r[1]))
    # the nearest nodes of each kind (what must change there: room, a taint, ...), so that
    # every kind of fix is proposed, not only the nearest kind's
    kinds: dict[frozenset[str], int] = {}
    chosen = []
    for entry in ranked:
        if kinds.get(entry[3], 0) < budget.per_kind:
            kinds[entry[3]] = kinds.get(entry[3], 0) + 1
            chosen.append(entry)
            if len(chosen) >= budget.nodes:
                break
    found: dict[tuple[Change, ...], Candidate] = {}
    for _, name, fails, _ in chosen:
        info = nodes(name)
        assert info is not None
        families = families_of(pod, info, fails, resource_rules)
        assert families is not None
        for c in node_options(pod, pods, info, families, classes):
            scored = Candidate(c.where, c.changes, size(c.changes, pods), c.node)
            seen = found.get(scored.key)
            if seen is None or scored.size < seen.size:
                found[scored.key] = scored
    ranked_found = by_size(found.values())
    # The same change on another node is an alternative, not another fix: each shape (the
    # changes less the node or pod they name) is tried on its two smallest proposers, and the
    # fix shown counts the nodes that proposed it.
    shapes: dict[tuple[Any, ...], list[Candidate]] = {}
    for c in ranked_found:
        shapes.setdefault(shape(c), []).append(c)
    out = []
    for c in ranked_found:
        same = shapes[shape(c)]
        if c in same[:2]:
            out.append(Candidate(c.where, c.changes, c.size, c.node, len(same)))
    why = [] if out else [f"{rule} on {n} node(s)" for rule, n in sorted(hard.items(), key=lambda i: -i[1])]
    return out[: budget.candidates], why


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


def nearness(pod: Pod, node: NodeInfo, families: Mapping[str, Any]) -> float:
    """How near ``node`` is to fitting: families to change, and the share of its allocatable the
    pod lacks there."""
    share = 0.0
    if "room" in families:
        for r, lack in node_lacks(pod, node.free).items():
            share += lack / max(node.allocatable.get(r, 0), 1)
        if len(node.pods) >= node.allocatable.get("pods", 0) // 1000:
            share += 0.5
    return len(families) + share


def rule_candidates(rules: RuleSet, preempt: bool, scores: int = 0) -> list[Candidate]:
    """Changes to the policy's own rules (not the default profile's, which stand for
    kube-scheduler's plugins), as candidates: with ``preempt`` (some node lacks only room, and
    has pods to evict), each own preempt rule removed (one may veto the victims the scheduler's
    preemption would take; DefaultPreemption, even overridden, is kept: without it nothing
    preempts); and up to ``scores`` own node scores removed, the heaviest first (where several
    pods are placed in turn, a score may send the first ones where the last ones needed to go)."""
    out = []
    if preempt:
        for p in rules.preempts:
            if p.name != "DefaultPreemption" and _own(p.checked.rule):
                changes = (Change("drop-preempt", "Rules", p.name),)
                out.append(Candidate(RULES, changes, size(changes, ()), ""))
    own = sorted((r for r in rules.scores if _own(r.checked.rule)), key=lambda r: (-r.checked.weight, r.name))
    for r in own[:scores]:
        changes = (Change("set-weight", "Rules", r.name, amount=0),)
        out.append(Candidate(RULES, changes, size(changes, ()), ""))
    return out


def _own(rule: Any) -> bool:
    """Whether ``rule`` (an ast.Rule) is written in a file other than the bundled default profile."""
    path = rule.span.source.path
    return not (path.endswith("default.rules") and Path(path).resolve() == _DEFAULT_RULES)


_DEFAULT_RULES = (bundled_rules_dir() / "default.rules").resolve()


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
