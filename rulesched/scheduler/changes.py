"""The changes explain's fixes are made of: to the cluster, to the pods asked about (and their
group), to the rules; each applied to the model for a trial, described for people, and given as
JSON that ``rulesched simulate --apply`` applies to the cluster's files.

A :class:`Change` is one operation from a closed set (:data:`OPS`) on one object:

==================  ===========  ==============================================================
op                  kind         what it does
==================  ===========  ==============================================================
evict               Pod          a running pod is deleted (evicted): its node's room is freed
untaint             Node         the node's taint ``key`` (with ``value``, ``effect``) is removed
uncordon            Node         ``spec.unschedulable`` is cleared
label               Node         the node gets label ``key``=``value``
add-nodes           Node         ``count`` new empty nodes like this one (labels, taints,
                                 allocatable; named ``<node>-new-<i>``)
set-request         Pod          the pod's total request of resource ``key`` becomes ``amount``
tolerate            Pod          a toleration of taint ``key``=``value``:``effect`` is added
drop-node-selector  Pod          ``spec.nodeSelector[key]`` is removed
drop-node-affinity  Pod          the required node affinity is removed
relax-spread        Pod          the DoNotSchedule spread constraint on ``key`` becomes ScheduleAnyway
drop-pod-affinity   Pod          the required pod affinity terms are removed
drop-anti-affinity  Pod          the required pod anti-affinity terms are removed
set-priority        Pod          the pod's priority becomes ``amount`` (PriorityClass ``value``)
set-min-count       PodGroup     the gang's minimum becomes ``count``
audit-filter        Rules        filter ``name`` is put in audit mode: evaluated, never rejecting
drop-preempt        Rules        preempt rule ``name`` is removed (``disable preempt NAME``)
set-weight          Rules        node score ``name`` gets weight ``amount`` (0: removed,
                                 ``disable score NAME``)
==================  ===========  ==============================================================

Pod changes name the pod they change, or ``*``: every pod asked about (a group's members, a
Job's pods: the template they share). The model is changed the way decoding the changed object
would make it (:func:`changed_pod`), and the store undone after a trial (:func:`apply`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, quantity_text
from rulesched.model import Node, Pod, Taint, Toleration
from rulesched.model.groups import PodGroup
from rulesched.model.quantity import QuantityError, parse_quantity

HOSTNAME = "kubernetes.io/hostname"
ALL = "*"  # a pod change's name: every pod asked about

NODE_OPS = ("evict", "untaint", "uncordon", "label", "add-nodes")
POD_OPS = (
    "set-request",
    "tolerate",
    "drop-node-selector",
    "drop-node-affinity",
    "relax-spread",
    "drop-pod-affinity",
    "drop-anti-affinity",
    "set-priority",
)
RULE_OPS = ("audit-filter", "drop-preempt", "set-weight")
OPS = (*NODE_OPS, *POD_OPS, "set-min-count", *RULE_OPS)


@dataclass(frozen=True)
class Change:
    op: str
    kind: str  # Node, Pod, PodGroup, Rules
    name: str  # node name, pod key (or ALL), group key, rule name
    key: str = ""
    value: str = ""
    effect: str = ""
    count: int = 0
    amount: int = 0  # set-request: milli-units; set-priority: the priority value

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "kind": self.kind, "name": self.name}
        if self.key:
            out["key"] = self.key
        if self.value or self.op in ("untaint", "label", "tolerate"):
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.count:
            out["count"] = self.count
        if self.op == "set-request":
            out["quantity"] = quantity_text(self.amount)
        elif self.op == "set-priority":
            out["priority"] = self.amount
        elif self.op == "set-weight":
            out["weight"] = self.amount
        return out

    @property
    def text(self) -> str:
        """The change as a sentence."""
        op, name = self.op, self.name
        who = "the pods" if name == ALL else f"pod {name}"
        taint = f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        return {
            "evict": f"evict pod {name}",
            "untaint": f"remove taint {taint} from node {name}",
            "uncordon": f"uncordon node {name}",
            "label": f"label node {name} {self.key}={self.value}",
            "add-nodes": f"add {self.count} node(s) like {name}",
            "set-request": f"lower {who}' {self.key} request to {quantity_text(self.amount)}"
            if name == ALL
            else f"lower {who}'s {self.key} request to {quantity_text(self.amount)}",
            "tolerate": f"{who}: tolerate taint {taint}",
            "drop-node-selector": f"{who}: drop nodeSelector {self.key}",
            "drop-node-affinity": f"{who}: drop the required node affinity",
            "relax-spread": f"{who}: spread over {self.key} with whenUnsatisfiable ScheduleAnyway",
            "drop-pod-affinity": f"{who}: drop the required pod affinity",
            "drop-anti-affinity": f"{who}: drop the required pod anti-affinity",
            "set-priority": f"{who}: priority {self.amount}"
            + (f" (PriorityClass {self.value})" if self.value else " (a PriorityClass of that value)"),
            "set-min-count": f"group {name}: minCount {self.count}",
            "audit-filter": f"rules: put filter {name} in audit mode (never rejecting), or delete it",
            "drop-preempt": f"rules: delete preempt rule {name} (disable preempt {name})",
            "set-weight": f"rules: delete score {name} (disable score {name})"
            if self.amount <= 0
            else f"rules: score {name} weight {self.amount} (override score {name} weight {self.amount})",
        }[op]

    @property
    def command(self) -> str | None:
        """A kubectl command making the change, where one does."""
        name = self.name
        if self.op == "evict":
            namespace, _, pod = name.partition("/")
            return f"kubectl delete pod -n {namespace} {pod}"
        if self.op == "untaint":
            value = f"={self.value}" if self.value else ""
            return f"kubectl taint nodes {name} {self.key}{value}:{self.effect}-"
        if self.op == "uncordon":
            return f"kubectl uncordon {name}"
        if self.op == "label":
            return f"kubectl label nodes {name} {self.key}={self.value}"
        return None


def change_from_json(obj: Any, where: str) -> Change:
    """A change as :meth:`Change.json` writes it (``simulate --apply``); ValueError naming
    ``where`` and the field when it is not one."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected an object")
    op = obj.get("op")
    if op not in OPS:
        raise ValueError(f"{where}.op: {op!r} is not one of {', '.join(OPS)}")
    for name in ("kind", "name"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            raise ValueError(f"{where}.{name}: expected a string")
    amount = 0
    if op == "set-request":
        try:
            amount = parse_quantity(obj.get("quantity", ""))
        except QuantityError as error:
            raise ValueError(f"{where}.quantity: {error}") from None
    elif op == "set-priority":
        priority = obj.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ValueError(f"{where}.priority: expected an integer")
        amount = priority
    elif op == "set-weight":
        weight = obj.get("weight")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            raise ValueError(f"{where}.weight: expected a whole number")
        amount = weight
    count = obj.get("count", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"{where}.count: expected a whole number")
    texts = {k: obj.get(k, "") for k in ("key", "value", "effect")}
    for k, v in texts.items():
        if not isinstance(v, str):
            raise ValueError(f"{where}.{k}: expected a string")
    return Change(op, obj["kind"], obj["name"], texts["key"], texts["value"], texts["effect"], count, amount)


# --- the model ------------------------------------------------------------------------------------


def copy_name(template: str, i: int) -> str:
    return f"{template}-new-{i}"


def node_copy(node: Node, name: str) -> Node:
    """An empty node like ``node``: its labels (its hostname label its own), taints, allocatable."""
    labels = dict(node.labels)
    if HOSTNAME in labels:
        labels[HOSTNAME] = name
    return Node(
        name=name,
        labels=labels,
        allocatable=node.allocatable,
        capacity=node.capacity,
        taints=node.taints,
        declared_features=node.declared_features,
    )


def apply(store: ClusterStore, changes: Iterable[Change]) -> Callable[[], None]:
    """Make the cluster changes on ``store``; returns what undoes them (in reverse order)."""
    undo: list[Callable[[], object]] = []
    for change in changes:
        op = change.op
        if op == "evict":
            removed = store.remove_pod(change.name)
            if removed is not None:
                undo.append(partial(store.add_pod, removed))
            continue
        if op not in ("untaint", "uncordon", "label", "add-nodes"):
            continue
        info = store.node_view(change.name)
        if info is None:
            continue
        node = info.node
        if op == "add-nodes":
            for i in range(1, change.count + 1):
                name = copy_name(node.name, i)
                store.add_node(node_copy(node, name))
                undo.append(partial(store.remove_node, name))
            continue
        if op == "untaint":
            new = dataclasses.replace(node, taints=tuple(t for t in node.taints if not _is(t, change)))
        elif op == "uncordon":
            new = dataclasses.replace(node, unschedulable=False)
        else:
            new = dataclasses.replace(node, labels={**node.labels, change.key: change.value})
        store.update_node(new)
        undo.append(partial(store.update_node, node))

    def undo_all() -> None:
        for step in reversed(undo):
            step()

    return undo_all


def _is(taint: Taint, change: Change) -> bool:
    return taint.key == change.key and taint.effect == change.effect and taint.value == change.value


def changed_pod(pod: Pod, changes: Iterable[Change]) -> Pod:
    """``pod`` as the pod changes naming it (or ALL) make it."""
    for change in changes:
        if change.kind != "Pod" or change.op == "evict" or change.name not in (ALL, pod.key):
            continue
        pod = _change_pod(pod, change)
    return pod


def _change_pod(pod: Pod, change: Change) -> Pod:
    op = change.op
    if op == "set-request":
        requests = {**pod.requests, change.key: change.amount}
        nonzero = dict(pod.nonzero_requests)
        if change.key in nonzero or change.key in ("cpu", "memory"):
            nonzero[change.key] = min(nonzero.get(change.key, change.amount), max(change.amount, 0)) or change.amount
        return dataclasses.replace(pod, requests=requests, nonzero_requests=nonzero)
    if op == "tolerate":
        operator = "Equal" if change.value else "Exists"
        toleration = Toleration(change.key, operator, change.value, change.effect)
        return dataclasses.replace(pod, tolerations=(*pod.tolerations, toleration))
    if op == "drop-node-selector":
        return dataclasses.replace(pod, node_selector={k: v for k, v in pod.node_selector.items() if k != change.key})
    if op == "drop-node-affinity":
        return dataclasses.replace(pod, required_node_affinity=None)
    if op == "relax-spread":
        constraints = tuple(
            dataclasses.replace(c, when_unsatisfiable="ScheduleAnyway") if c.topology_key == change.key else c
            for c in pod.topology_spread_constraints
        )
        return dataclasses.replace(pod, topology_spread_constraints=constraints)
    if op == "drop-pod-affinity":
        return dataclasses.replace(pod, pod_affinity=())
    if op == "drop-anti-affinity":
        return dataclasses.replace(pod, pod_anti_affinity=())
    if op == "set-priority":
        return dataclasses.replace(pod, priority=change.amount)
    raise ValueError(f"not a pod change: {op}")


def changed_group(group: PodGroup, changes: Iterable[Change]) -> PodGroup:
    for change in changes:
        if change.op == "set-min-count" and change.name in (ALL, group.key):
            group = dataclasses.replace(group, min_member=change.count)
    return group


def changed_rules(rules: RuleSet, changes: Iterable[Change]) -> RuleSet | None:
    """``rules`` with the rule changes among ``changes`` made (None: there are none);
    ValueError naming a rule the set does not have."""
    changes = [c for c in changes if c.op in RULE_OPS]
    if not changes:
        return None
    have = {
        "audit-filter": ({f.name for f in rules.filters} | rules.shadow_filters, "filter"),
        "drop-preempt": ({p.name for p in rules.preempts}, "preempt rule"),
        "set-weight": ({s.name for s in rules.scores}, "node score"),
    }
    for c in changes:
        names, what = have[c.op]
        if c.name not in names:
            raise ValueError(f"no {what} named {c.name} in the rules")
    return rules.adjusted(
        audit={c.name for c in changes if c.op == "audit-filter"},
        dropped={c.name for c in changes if c.op == "drop-preempt"},
        weights={c.name: c.amount for c in changes if c.op == "set-weight"},
    )


def json_changes(changes: Sequence[Change]) -> str:
    return json.dumps([c.json() for c in changes])


def node_lacks(pod: Pod, free: Mapping[str, int]) -> dict[str, int]:
    """Resource -> how much more of it the pod asks than ``free`` holds (milli-units)."""
    return {r: want - free.get(r, 0) for r, want in pod.requests.items() if want > 0 and want > free.get(r, 0)}
