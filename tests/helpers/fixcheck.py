"""Checking explain's fixes from outside: generated clusters where a pod does not fit, each fix
made on the cluster's objects and simulated (``simulate --apply``'s path, not the trial's), and
a brute-force search for the least change to compare the smallest fix with.

Used by tests/test_fixes_property.py (a property) and benchmarks/bench_fixes.py (the figures).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulesched.authoring.why import ExplainSettings, explain
from rulesched.lang import RuleSet, load_rules, resolve_rules_path
from rulesched.scheduler.changes import ALL, Change, apply, changed_group, changed_pod, changed_rules
from rulesched.scheduler.fixes import size
from rulesched.scheduler.reasons import PLUGINS
from rulesched.scheduler.trial import Trials
from rulesched.simulate.apply import Edits
from rulesched.simulate.load import load_cluster
from rulesched.simulate.run import SimulateSettings, simulate

ZONES = ("z1", "z2")
TAINTS = (("dedicated", "gpu"), ("team", "batch"))
LABELS = (("disk", "ssd"), ("disk", "hdd"))


def _node(name: str, rng: random.Random) -> dict[str, Any]:
    cpu = rng.choice(["1", "2", "4"])
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": rng.choice(ZONES)}
    if rng.random() < 0.5:
        key, value = rng.choice(LABELS)
        labels[key] = value
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        key, value = rng.choice(TAINTS)
        spec["taints"] = [{"key": key, "value": value, "effect": "NoSchedule"}]
    if rng.random() < 0.15:
        spec["unschedulable"] = True
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": rng.choice(["110", "110", "3"])}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def _pod(name: str, cpu: str, node: str = "", priority: int = 0, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
        "priority": priority,
        **spec,
    }
    if node:
        body["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name.rstrip("0123456789-")}},
        "spec": body,
        "status": {"phase": "Running" if node else "Pending"},
    }


# A policy of one's own beside the default profile: a filter a fix may put in audit mode, a
# preempt rule a fix may remove.
POLICY = """extends "default"

# pods of the batch tier stay off zone z1
filter batch_off_z1 when has(pod.labels, "tier"):
    pod.labels["tier"] != "batch" or node.labels["topology.kubernetes.io/zone"] != "z1"
    else "batch pods stay off z1"

# pods labelled keep are never preempted
preempt keep_kept:
    not has(victim.labels, "keep")
"""


def generate(seed: int, nodes: int = 4, running: int = 5, rich: bool = False) -> list[dict[str, Any]]:
    """A small cluster and a pending pod ``default/wanted`` (it may fit: callers check).
    ``rich``: the pod may also spread over zones (DoNotSchedule), repel the running pods
    (anti-affinity on the hostname) or be of the batch tier, and running pods may be labelled
    keep (see :data:`POLICY`)."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}
    ]
    names = [f"n{i}" for i in range(nodes)]
    items += [_node(n, rng) for n in names]
    for i in range(running):
        items.append(_pod(f"run-{i}", rng.choice(["250m", "500m", "1"]), rng.choice(names), rng.choice([0, 10])))
        if rich and rng.random() < 0.3:
            items[-1]["metadata"]["labels"]["keep"] = "true"  # (see POLICY's keep_kept)
    spec: dict[str, Any] = {}
    if rng.random() < 0.4:
        key, value = rng.choice(LABELS)
        spec["nodeSelector"] = {key: value}
    if rng.random() < 0.2:
        key, value = rng.choice(TAINTS)
        spec["tolerations"] = [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
    if rich and rng.random() < 0.3:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "run"}},
            }
        ]
    if rich and rng.random() < 0.25:
        term = {"labelSelector": {"matchLabels": {"app": "run"}}, "topologyKey": "kubernetes.io/hostname"}
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    wanted = _pod("wanted", rng.choice(["1", "1500m", "2", "3"]), **spec)
    if rich and rng.random() < 0.3:
        wanted["metadata"]["labels"]["tier"] = "batch"
    items.append(wanted)
    return items


def write(items: Sequence[dict[str, Any]], path: Path) -> str:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return str(path)


@dataclass(frozen=True)
class Checked:
    fix: dict[str, Any]
    placed: str | None  # where simulate --apply's path placed the pod (None: it did not)


def explain_fixes(path: str, pod: str = "default/wanted", rules: Sequence[str] = ("default",)) -> dict[str, Any]:
    return explain(ExplainSettings(pod=pod, cluster=(path,), rules=tuple(rules)))


def check(
    path: str, answer: dict[str, Any], pod: str = "default/wanted", rules: Sequence[str] = ("default",)
) -> list[Checked]:
    """Each fix of ``answer`` made on the cluster file's objects (as ``simulate --apply`` makes
    it) and simulated: where the pod went."""
    out = []
    for fix in answer.get("fixes", {}).get("fixes", []):
        edits = Edits(tuple(_change(c) for c in fix["changes"]), frozenset(fix["checked"]["placed"]))
        objects = load_cluster([path], edit=edits.edit)
        report = simulate(
            objects, SimulateSettings(cluster=(path,), rules=tuple(rules)), rule_changes=edits.rule_changes
        )
        history = report.history.get(pod)
        out.append(Checked(fix, history.node if history is not None else None))
    return out


def _change(obj: dict[str, Any]) -> Change:
    from rulesched.scheduler.changes import change_from_json

    return change_from_json(obj, "fix")


# --- brute force -------------------------------------------------------------------------------------


def universe(
    path: str, pod: str = "default/wanted", audited: Sequence[str] = (), dropped: Sequence[str] = ()
) -> list[Change]:
    """Every single change of the kinds explain proposes, on every node and the pod: untaint,
    uncordon, label with the pod's selector, one node added like each, each running pod
    evicted; tolerate each taint, drop each selector key, the request lowered to each node's
    free amount, the priority raised to each class."""
    objects = load_cluster([path])
    (wanted,) = [p for p in objects.pending_pods if p.key == pod]
    store = objects.store()
    out: list[Change] = []
    for info in store.nodes:
        for t in info.node.taints:
            out.append(Change("untaint", "Node", info.name, t.key, t.value, t.effect))
            out.append(Change("tolerate", "Pod", pod, t.key, t.value, t.effect))
        if info.unschedulable:
            out.append(Change("uncordon", "Node", info.name))
        for k, v in wanted.node_selector.items():
            if info.labels.get(k) != v:
                out.append(Change("label", "Node", info.name, k, v))
        out.append(Change("add-nodes", "Node", info.name, count=1))
        for p in info.pods:
            out.append(Change("evict", "Pod", p.key))
        for r, want in wanted.requests.items():
            free = info.free.get(r, 0)
            if 0 < free < want:
                out.append(Change("set-request", "Pod", pod, r, amount=free))
    for k in wanted.node_selector:
        out.append(Change("drop-node-selector", "Pod", pod, k))
    for c in wanted.topology_spread_constraints:
        out.append(Change("relax-spread", "Pod", pod, c.topology_key))
    if wanted.pod_anti_affinity:
        out.append(Change("drop-anti-affinity", "Pod", pod))
    for name in audited:
        out.append(Change("audit-filter", "Rules", name))
    for name in dropped:
        out.append(Change("drop-preempt", "Rules", name))
    for c in objects.priority_classes.values():
        if c.value > wanted.priority:
            out.append(Change("set-priority", "Pod", pod, value=c.name, amount=c.value))
    return list(dict.fromkeys(out))


def least_change(
    path: str, pod: str = "default/wanted", limit: float = 3.0, rules: RuleSet | None = None
) -> float | None:
    """The size of the smallest set of changes from :func:`universe` that schedules the pod
    (each set tried as explain tries its candidates: on the store, with the same rules), by
    increasing size up to ``limit``; None when none within it does."""
    objects = load_cluster([path])
    (wanted,) = [p for p in objects.pending_pods if p.key == pod]
    store = objects.store()
    rules = rules if rules is not None else load_rules([resolve_rules_path("default")])
    trials = Trials(store, rules)
    own = [f.name for f in rules.filters if f.name not in PLUGINS and f.name != "PodGroupTopology"]
    dropped = [p.name for p in rules.preempts if p.name not in PLUGINS and p.name != "DefaultPreemption"]
    single = universe(path, pod, own, dropped)
    sets: list[tuple[float, tuple[Change, ...]]] = []
    for k in range(1, 4):
        for combo in itertools.combinations(single, k):
            requests = [c.key for c in combo if c.op == "set-request"]
            if len(requests) != len(set(requests)) or sum(c.op == "set-priority" for c in combo) > 1:
                continue  # (one request lowered once, one priority)
            sized = size(combo, [wanted])
            if sized <= limit + 1e-9:
                sets.append((sized, combo))
    sets.sort(key=lambda s: s[0])
    best: float | None = None
    for sized, combo in sets:
        if best is not None and sized >= best - 1e-9:
            break
        found = _schedules(trials, wanted, combo)
        if found is not None:
            # a priority raised or a preempt rule dropped counts the pods its preemption evicted
            # (as explain measures it)
            actual = sized + found if any(c.op in ("set-priority", "drop-preempt") for c in combo) else sized
            best = actual if best is None else min(best, actual)
    return None if best is None or best > limit + 1e-9 else round(best, 3)


def _schedules(trials: Trials, pod: Any, changes: Iterable[Change]) -> int | None:
    """None when the changes do not schedule the pod; else how many pods the trial evicted."""
    changes = tuple(changes)
    undo = apply(trials.store, changes)
    try:
        rules = changed_rules(trials.rules, changes)
        outcome = trials.run([changed_pod(pod, [c for c in changes if c.name in (ALL, pod.key)])], rules=rules)
        return len(outcome.evicted) if pod.key in outcome.placed else None
    finally:
        undo()


# --- groups ------------------------------------------------------------------------------------------


def generate_group(seed: int, nodes: int = 4) -> tuple[list[dict[str, Any]], str, int]:
    """A small cluster of two racks and a workload API gang of 2-5 members (minCount 2-5, one
    rack for all of it now and then) that may not fit: (items, the group's ``podgroup/NS/NAME``,
    its minimum)."""
    rng = random.Random(seed)
    items: list[dict[str, Any]] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}
    ]
    names = [f"n{i}" for i in range(nodes)]
    for i, name in enumerate(names):
        node = _node(name, rng)
        node["metadata"]["labels"]["rack"] = f"r{i % 2}"
        items.append(node)
    for i in range(rng.randint(1, 4)):
        items.append(_pod(f"run-{i}", rng.choice(["500m", "1", "2"]), rng.choice(names), rng.choice([0, 10])))
    members = rng.randint(2, 5)
    minimum = rng.randint(2, members)
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": minimum}}}
    if rng.random() < 0.4:
        spec["schedulingConstraints"] = {"topology": [{"key": "rack"}]}
    items.append(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "gang", "namespace": "default"},
            "spec": spec,
        }
    )
    cpu = rng.choice(["1", "1500m", "2"])
    extra: dict[str, Any] = {}
    if rng.random() < 0.2:
        key, value = rng.choice(TAINTS)
        extra["tolerations"] = [{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]
    for i in range(members):
        items.append(_pod(f"m{i}", cpu, schedulingGroup={"podGroupName": "gang"}, **extra))
    return items, "podgroup/default/gang", minimum


@dataclass(frozen=True)
class GroupChecked:
    fix: dict[str, Any]
    placed: int  # members the simulation bound
    needed: int


def explain_group_fixes(path: str, target: str) -> dict[str, Any]:
    return explain(ExplainSettings(pod=target, cluster=(path,)))


def check_group(path: str, answer: dict[str, Any], members: Sequence[str], minimum: int) -> list[GroupChecked]:
    """Each group fix made on the cluster file's objects and simulated: how many members the
    simulation bound (the group fits when at least its minimum, the fix lowering it included)."""
    out = []
    group = answer["group_explanation"]
    for fix in (group["fixes"] or {}).get("fixes", []):
        edits = Edits(tuple(_change(c) for c in fix["changes"]), frozenset(members))
        objects = load_cluster([path], edit=edits.edit)
        report = simulate(objects, SimulateSettings(cluster=(path,)), rule_changes=edits.rule_changes)
        placed = sum(1 for m in members if (h := report.history.get(m)) is not None and h.node is not None)
        lowered = [c["count"] for c in fix["changes"] if c["op"] == "set-min-count"]
        out.append(GroupChecked(fix, placed, lowered[0] if lowered else minimum))
    return out


def least_group_change(path: str, target: str, limit: float, most: int = 2) -> float | None:
    """The size of the smallest set of at most ``most`` changes that places the gang of
    :func:`generate_group` (its minimum bound, in a trial like explain's), up to ``limit``:
    each node untainted, uncordoned, copied (as many copies as the gang has members), each
    running pod evicted; every member tolerating each taint, its request lowered to each
    node's free amount; the minimum lowered to each smaller count. None when none within it."""
    objects = load_cluster([path])
    namespace, name = target.split("/")[1:]
    (gang,) = [g for g in objects.groups if g.key.endswith(f"{namespace}/{name}")]
    members = [p for p in objects.pending_pods if p.scheduling_group]
    store = objects.store()
    trials = Trials(store, load_rules([resolve_rules_path("default")]))
    template = members[0]
    single: list[Change] = []
    for info in store.nodes:
        for t in info.node.taints:
            single.append(Change("untaint", "Node", info.name, t.key, t.value, t.effect))
            single.append(Change("tolerate", "Pod", ALL, t.key, t.value, t.effect))
        if info.unschedulable:
            single.append(Change("uncordon", "Node", info.name))
        single += [Change("add-nodes", "Node", info.name, count=k) for k in range(1, len(members) + 1)]
        single += [Change("evict", "Pod", p.key) for p in info.pods]
        for r, want in template.requests.items():
            free = info.free.get(r, 0)
            if 0 < free < want:
                single.append(Change("set-request", "Pod", ALL, r, amount=free))
    for count in range(1, gang.min_member):
        single.append(Change("set-min-count", "PodGroup", gang.key, count=count, amount=gang.min_member - count))
    single = list(dict.fromkeys(single))
    sets: list[tuple[float, tuple[Change, ...]]] = []
    for k in range(1, most + 1):
        for combo in itertools.combinations(single, k):
            ops = [c.op for c in combo]
            if ops.count("set-request") > 1 or ops.count("set-min-count") > 1:
                continue
            sized = size(combo, members)
            if sized < limit - 1e-9:
                sets.append((sized, combo))
    sets.sort(key=lambda s: s[0])
    for sized, combo in sets:
        undo = apply(trials.store, combo)
        try:
            changed = [changed_pod(m, combo) for m in members]
            groups = [changed_group(g, combo) for g in objects.groups]
            outcome = trials.run(changed, groups)
        finally:
            undo()
        if gang.key in outcome.placed_groups:
            return round(sized, 3)
    return None
