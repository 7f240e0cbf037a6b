"""What might make it fit: the candidate changes each node proposes for a pod that does not fit
there, before any is checked (:mod:`rulesched.scheduler.fixes` checks them by trials).

From the explanation (every node's every failing filter, as reason codes) each node that fails
only for reasons a change can remove proposes the changes that remove them, on the cluster (free
room by evicting pods there, untaint, uncordon, label it, add nodes like it, evict the pods an
anti-affinity repels there), on the pod (lower a request to what the node has free, tolerate the
taint, drop the node selector or a required affinity, relax a spread constraint, a higher
priority) or on the rules (a policy's own filter in audit mode; its own preempt rules and
scores, :func:`rule_candidates`). The nodes nearest to fitting are worked out, a few of each kind
(what must change there), and the same change proposed by many nodes is counted once.
Next stage: :func:`rulesched.scheduler.fixes.search`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang import RuleSet, bundled_rules_dir
from rulesched.model import Pod, PriorityClass
from rulesched.scheduler.changes import ALL, HOSTNAME, Change, node_lacks
from rulesched.scheduler.fixes import (
    BUDGET,
    CLUSTER,
    MIXED,
    POD,
    RULES,
    Candidate,
    FixBudget,
    by_size,
    shape,
    size,
)
from rulesched.scheduler.reasons import PLUGINS, ReasonCode, classify
from rulesched.semantics.affinity import resolve_all

C = ReasonCode


@dataclass(frozen=True)
class NodeFailure:
    """One failing filter on one node, as the search reads it."""

    rule: str
    reasons: tuple[str, ...]
    unresolvable: bool


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
            if victims is None and len(pods) == 1:
                found += _shrunk(pod, node, keep, everyone)
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


def _shrunk(pod: Pod, node: NodeInfo, keep: Collection[str], everyone: str) -> list[tuple[str, tuple[Change, ...]]]:
    """For a pod bigger than ``node`` even empty: the request lowered to what the node holds, and
    the fewest evictions that make room for that (none when it has a resource the pod needs at
    nothing)."""
    if any(want > 0 and node.allocatable.get(r, 0) <= 0 for r, want in pod.requests.items()):
        return []
    capped = dataclasses.replace(
        pod, requests={r: min(want, node.allocatable.get(r, 0)) for r, want in pod.requests.items()}
    )
    victims = _victims(capped, node, keep)
    if victims is None:
        return []
    free = dict(node.free)
    for v in victims:
        for r, amount in v.requests.items():
            free[r] = free.get(r, 0) + amount
    lowered = [Change("set-request", "Pod", everyone, r, amount=free[r]) for r in sorted(node_lacks(pod, free))]
    return [(MIXED, (*(Change("evict", "Pod", v.key) for v in victims), *lowered))]


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
    budget: FixBudget = BUDGET,
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
