"""``rulesched simulate --apply FIX.json``: the changes of one of explain's fixes made on the
cluster files' objects, as they are read and before they are decoded, so that the simulation
schedules the changed cluster (and a rules change, a filter in audit mode, a preempt rule or a
score removed, a score's weight, on the rules).

FIX.json is a fix as ``explain --output json`` prints it (``fixes.fixes[i]``: its ``changes``;
the pods a change naming ``*`` stands for are the fix's ``checked.placed`` pods, or ``pods``),
or a bare list of changes (:mod:`rulesched.scheduler.changes` lists the operations). These are
the objects a user would change: a pod's requests are lowered in its containers (the largest
request first, limits of extended resources with them, init containers capped), a toleration
added to ``spec.tolerations``, a node's taint taken out of ``spec.taints``, nodes added as
copies of the node named (empty, schedulable, ``<node>-new-<i>``). Explain checks its fixes on
the model (its trials change decoded pods and the store); this applies them to the YAML, a
second way to the same cluster, which the soundness figure (benchmarks/bench_fixes.py) compares.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulesched.errors import InputError
from rulesched.model.quantity import QuantityError, parse_quantity
from rulesched.scheduler.changes import ALL, HOSTNAME, RULE_OPS, Change, change_from_json, copy_name

_OWN_SHARE = ("cpu", "memory", "ephemeral-storage")  # (and hugepages-*): requests may be below limits


@dataclass(frozen=True)
class Edits:
    """Changes to make while loading: by the kind and name of the object they change."""

    changes: tuple[Change, ...]
    pods: frozenset[str]  # the pods a change naming ALL stands for

    @property
    def rule_changes(self) -> tuple[Change, ...]:
        """The changes to the rules (a filter in audit mode, a preempt rule or a score gone, a
        score's weight): made on the rules, not the objects."""
        return tuple(c for c in self.changes if c.op in RULE_OPS)

    def edit(self, kind: str, obj: Any) -> list[Any]:
        """The objects ``obj`` becomes: none (evicted), itself changed, or itself and copies."""
        if not isinstance(obj, dict):
            return [obj]
        found = obj.get("metadata")
        meta: dict[str, Any] = found if isinstance(found, dict) else {}
        name = str(meta.get("name", ""))
        key = f"{meta.get('namespace') or 'default'}/{name}"
        out = [obj]
        for change in self.changes:
            if kind == "Pod" and change.kind == "Pod" and _names(change, key, self.pods):
                if change.op == "evict":
                    return []
                out[0] = _pod(out[0], change)
            elif kind == "Node" and change.kind == "Node" and change.name == name:
                if change.op == "add-nodes":
                    out += [_node_copy(out[0], copy_name(name, i)) for i in range(1, change.count + 1)]
                else:
                    out[0] = _node(out[0], change)
            elif kind == "PodGroup" and change.op == "set-min-count" and _group_names(change, obj, key):
                out[0] = _min_count(out[0], change.count)
        return out


def read_edits(path: str) -> Edits:
    """FIX.json (see the module docstring); InputError naming the file and the field."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    except ValueError as error:
        raise InputError(f"{path}: not JSON: {error}") from None
    pods: Iterable[str] = ()
    if isinstance(data, dict):
        checked = data.get("checked")
        pods = data.get("pods") or (checked.get("placed", {}) if isinstance(checked, dict) else {})
        data = data.get("changes")
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a fix (with 'changes') or a list of changes")
    try:
        changes = tuple(change_from_json(c, f"changes[{i}]") for i, c in enumerate(data))
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return Edits(changes, frozenset(str(p) for p in pods))


def _names(change: Change, key: str, pods: frozenset[str]) -> bool:
    return change.name == key or (change.name == ALL and key in pods)


def _group_names(change: Change, obj: dict[str, Any], key: str) -> bool:
    if change.name == ALL:
        return True
    api = str(obj.get("apiVersion", ""))
    return change.name in (key, f"pg:{key}") if api.startswith("scheduling.k8s.io/") else change.name == key


def _spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


def _node(obj: dict[str, Any], change: Change) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    spec = _spec(obj)
    if change.op == "untaint":
        spec["taints"] = [
            t
            for t in spec.get("taints") or []
            if not (
                t.get("key") == change.key
                and (t.get("value") or "") == change.value
                and t.get("effect") == change.effect
            )
        ]
    elif change.op == "uncordon":
        spec.pop("unschedulable", None)
    elif change.op == "label":
        obj.setdefault("metadata", {}).setdefault("labels", {})[change.key] = change.value
    return obj


def _node_copy(obj: dict[str, Any], name: str) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    meta = new.setdefault("metadata", {})
    for key in ("uid", "resourceVersion", "creationTimestamp", "annotations"):
        meta.pop(key, None)
    meta["name"] = name
    labels = meta.get("labels")
    if isinstance(labels, dict) and HOSTNAME in labels:
        labels[HOSTNAME] = name
    _spec(new).pop("unschedulable", None)
    status = new.get("status")
    if isinstance(status, dict):
        status.pop("images", None)
    return new


def _pod(obj: dict[str, Any], change: Change) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    spec = _spec(obj)
    op = change.op
    if op == "set-request":
        _lower(spec, change.key, change.amount)
    elif op == "tolerate":
        toleration: dict[str, Any] = {"key": change.key, "effect": change.effect}
        toleration.update({"operator": "Equal", "value": change.value} if change.value else {"operator": "Exists"})
        spec["tolerations"] = [*(spec.get("tolerations") or []), toleration]
    elif op == "drop-node-selector":
        selector = spec.get("nodeSelector")
        if isinstance(selector, dict):
            selector.pop(change.key, None)
    elif op in ("drop-node-affinity", "drop-pod-affinity", "drop-anti-affinity"):
        part = {"drop-node-affinity": "nodeAffinity", "drop-pod-affinity": "podAffinity"}.get(op, "podAntiAffinity")
        found = (spec.get("affinity") or {}).get(part)
        if isinstance(found, dict):
            found.pop("requiredDuringSchedulingIgnoredDuringExecution", None)
    elif op == "relax-spread":
        for c in spec.get("topologySpreadConstraints") or []:
            if isinstance(c, dict) and c.get("topologyKey") == change.key:
                c["whenUnsatisfiable"] = "ScheduleAnyway"
    elif op == "set-priority":
        spec["priority"] = change.amount
        if change.value:
            spec["priorityClassName"] = change.value
        else:
            spec.pop("priorityClassName", None)
    return obj


def _quantity(value: Any) -> int:
    try:
        return parse_quantity(value)
    except QuantityError:
        return 0


def _lower(spec: dict[str, Any], resource: str, target: int) -> None:
    """Lower the pod's request of ``resource`` to ``target`` (milli-units) in total: pod-level
    ``spec.resources`` where it sets one; else the containers' requests, the largest first,
    with the pod's overhead left as it is; init containers capped at what the rest may use."""
    level = (spec.get("resources") or {}).get("requests")
    if isinstance(level, dict) and resource in level:
        level[resource] = _text(target)
        limits = spec["resources"].get("limits")
        if isinstance(limits, dict) and resource in limits and _quantity(limits[resource]) < target:
            limits[resource] = _text(target)
        return
    target -= _quantity((spec.get("overhead") or {}).get(resource, 0))
    running = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    sidecars = [
        c for c in spec.get("initContainers") or [] if isinstance(c, dict) and c.get("restartPolicy") == "Always"
    ]
    plain = [c for c in spec.get("initContainers") or [] if isinstance(c, dict) and c not in sidecars]
    together = running + sidecars
    excess = sum(_request(c, resource) for c in together) - max(target, 0)
    for container in sorted(together, key=lambda c: -_request(c, resource)):
        if excess <= 0:
            break
        have = _request(container, resource)
        cut = min(have, excess)
        _set_request(container, resource, have - cut)
        excess -= cut
    for container in plain:
        if _request(container, resource) > target:
            _set_request(container, resource, max(target, 0))


def _request(container: dict[str, Any], resource: str) -> int:
    resources = container.get("resources") or {}
    requests = resources.get("requests") or {}
    if resource in requests:
        return _quantity(requests[resource])
    return _quantity((resources.get("limits") or {}).get(resource, 0))  # (a limit alone is the request)


def _set_request(container: dict[str, Any], resource: str, milli: int) -> None:
    resources = container.setdefault("resources", {})
    resources.setdefault("requests", {})[resource] = _text(milli)
    limits = resources.get("limits")
    if isinstance(limits, dict) and resource in limits:
        own = resource in _OWN_SHARE or resource.startswith("hugepages-")
        if not own or _quantity(limits[resource]) < milli:  # (extended resources: limit = request)
            limits[resource] = _text(milli)


def _text(milli: int) -> str:
    return f"{milli}m" if milli % 1000 else str(milli // 1000)


def _min_count(obj: dict[str, Any], count: int) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    spec = _spec(obj)
    if str(obj.get("apiVersion", "")).startswith("scheduling.k8s.io/"):
        spec.setdefault("schedulingPolicy", {}).setdefault("gang", {})["minCount"] = count
    else:
        spec["minMember"] = count
    return obj


def apply_to(objects: Sequence[tuple[str, Any]], edits: Edits) -> list[tuple[str, Any]]:
    """(kind, object) pairs as the edits leave them."""
    out = []
    for kind, obj in objects:
        out += [(kind, o) for o in edits.edit(kind, obj)]
    return out
