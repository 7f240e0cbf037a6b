"""Rule test files (``*.test.yaml``): their format, read and checked into the values of
:mod:`rulesched.authoring.testcase` (which also reads ``expect``) for
:mod:`rulesched.authoring.ruletest`.

A test file sits next to the rules it tests. Each case is one scheduling cycle of one pod on a
small cluster, and what should come of it. Pods and nodes are ordinary Kubernetes YAML (what
``kubectl get -o yaml`` prints, or what you would ``kubectl apply``; ``kind`` and ``apiVersion``
may be left out) and get the defaults the simulator's decoder gives them::

    rules: [default, ../site.rules]   # optional; default: the .rules files in this file's folder
    nodes:                            # optional: the nodes of every case that has none of its own
      - metadata: {name: small}
        status: {allocatable: {cpu: "2", memory: 8Gi, pods: "110"}}
      - metadata: {name: large}
        status: {allocatable: {cpu: "8", memory: 8Gi, pods: "110"}}
    cases:
      - name: a 4-cpu pod fits only the large node
        pod:
          metadata: {name: big}
          spec:
            containers: [{name: c, resources: {requests: {cpu: "4"}}}]
        pods: []                      # running pods (spec.nodeName set), optional
        expect:
          feasible: [large]
          winner: large
          reasons: {small: [Insufficient cpu]}
          scores: {large: {NodeResourcesFit: 73}}

Top-level keys: ``rules`` (a path or a list of paths relative to the file, folders meaning their
``.rules`` files; ``default`` is the bundled rule set), ``cases``, and shared objects: ``nodes``,
``pods``, ``pdbs``, ``namespaces``, ``priorityClasses``, and ``services``, ``replicaSets``,
``statefulSets`` and ``replicationControllers`` (their selectors spread pods without constraints
of their own: system default spreading), the storage objects ``persistentVolumes``,
``persistentVolumeClaims``, ``storageClasses`` and ``csiNodes``, and Dynamic Resource
Allocation's ``deviceClasses``, ``resourceClaims``, ``resourceClaimTemplates`` and
``resourceSlices`` (the pending pods' template claims, a group's members' too, are made as the resourceclaim controller makes them). A case has ``name`` (unique in the
file), ``pod``, ``expect``, and any of the object keys; its own list replaces the file's. YAML
anchors share other lists (``nodes: &zones [...]``, later ``nodes: *zones``), and a list inside
an object list is spliced in, so ``pods: [*running, {metadata: ...}]`` adds one pod to a shared
list. ``expect`` holds any of:

- ``feasible: [NODE...]`` — exactly the nodes that pass every filter (in any order);
- ``winner: NODE`` — the node with the highest total; ``winner: [A, B]`` — exactly these nodes
  tie for the highest total (the scheduler draws one of them at random);
- ``unschedulable: true|false`` — no node passes the filters (or some does);
- ``reasons: {NODE: [REASON...]}`` — the reasons of the first filter the node fails, in order
  (``[]``: it passes every filter; a single string stands for a list of one);
- ``unresolvable: [NODE...]`` — exactly the filtered nodes whose failure the failing filter marks
  ``unresolvable`` (preemption skips them);
- ``scores: {NODE: {RULE: N, total: N}}`` — normalised per-rule scores and the weighted total,
  as ``rulesched simulate --explain`` shows them, for any subset of rules (``RULE: null``: the
  rule does not apply to this pod);
- ``message`` — the scheduler's message (``0/3 nodes are available: ...``, preemption's
  outcome included);
- ``nominated: NODE|null`` and ``victims: [NAMESPACE/NAME...]`` — what preemption does when no
  node fits.

A group case (:mod:`rulesched.authoring.gangcase`) has ``group`` and ``members`` instead of
``pod``, and expects ``group: {placed: true|false, message: PART}`` and ``members: {NAME: NODE or
null}``. ``group`` is one PodGroup (scheduler-plugins' when it has no ``apiVersion``; the
workload API's with ``apiVersion: scheduling.k8s.io/v1beta1``), or a list of the workload API's
groups: CompositePodGroups and the PodGroups under them (the first without a parent is the
root the expectations speak of). ``members`` are the pending pods; one that names no group
joins the first PodGroup listed (scheduler-plugins' label, or ``spec.schedulingGroup``).

Every problem is a :class:`RuleTestError` naming the file and the field (``policy.test.yaml: case
'big pod': expect.winner: ...``; ``cases[2]`` before the case has a name); objects that do not
decode raise the decoder's own error with the same prefix. Node names in ``expect`` must be the
case's nodes, and victims its running pods, so a typo is an error rather than a test that cannot
pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import yaml

from rulesched.authoring.testcase import Case, CaseFile, Cluster, RuleTestError, check_keys, read_expect
from rulesched.errors import ObjectError
from rulesched.lang import bundled_rules_dir, resolve_rules_path
from rulesched.model import Pod
from rulesched.model.decode import decode_namespace, decode_node, decode_pdb, decode_pod, decode_priority_class
from rulesched.model.decode_dra import (
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from rulesched.model.decode_load import decode_load_document
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.dra import DraState
from rulesched.model.fields import Memo, describe
from rulesched.model.groups import (
    POD_GROUP_LABEL,
    PodGroup,
    decode_composite_pod_group,
    decode_pod_group,
    group_key,
)
from rulesched.model.load import LoadSnapshot
from rulesched.model.storage import StorageState
from rulesched.model.workloads import NO_WORKLOADS, Controller, Service, Workloads, decode_controller, decode_service
from rulesched.semantics.dra_claims import claims_from_templates
from rulesched.yamlreader import safe_load

RULES_SUFFIX = ".rules"
WORKLOAD_KEYS = {
    "services": "Service",
    "replicaSets": "ReplicaSet",
    "statefulSets": "StatefulSet",
    "replicationControllers": "ReplicationController",
}
STORAGE_KEYS = ("persistentVolumes", "persistentVolumeClaims", "storageClasses", "csiNodes")
DRA_KEYS = ("deviceClasses", "resourceClaims", "resourceClaimTemplates", "resourceSlices")
OBJECT_KEYS = ("nodes", "pods", "pdbs", "namespaces", "priorityClasses", *WORKLOAD_KEYS, *STORAGE_KEYS, *DRA_KEYS)
NODE_METRICS = "nodeMetrics"  # node load: a NodeMetricsList or the simple format (decode_load)
FILE_KEYS = ("rules", "cases", NODE_METRICS, *OBJECT_KEYS)
CASE_KEYS = ("name", "pod", "group", "members", "expect", NODE_METRICS, *OBJECT_KEYS)
_KINDS = {
    "nodes": "Node",
    "pods": "Pod",
    "pdbs": "PodDisruptionBudget",
    "namespaces": "Namespace",
    "priorityClasses": "PriorityClass",
    **WORKLOAD_KEYS,
    "persistentVolumes": "PersistentVolume",
    "persistentVolumeClaims": "PersistentVolumeClaim",
    "storageClasses": "StorageClass",
    "csiNodes": "CSINode",
    "deviceClasses": "DeviceClass",
    "resourceClaims": "ResourceClaim",
    "resourceClaimTemplates": "ResourceClaimTemplate",
    "resourceSlices": "ResourceSlice",
}

T = TypeVar("T")


def read_case_file(path: Path) -> CaseFile:
    """Read, check and decode one test file, or raise :class:`RuleTestError` (or the decoder's
    :class:`ObjectError`) naming the file and field."""
    doc = _load_yaml(path)
    if not isinstance(doc, dict):
        raise RuleTestError(path, "", f"expected a mapping with 'cases:', got {describe(doc)}")
    check_keys(doc, FILE_KEYS, path, str)
    rules = _rules(doc["rules"], path) if "rules" in doc else _folder_rules(path)
    raw_cases = doc.get("cases")
    if not isinstance(raw_cases, list) or not raw_cases:
        got = "nothing" if raw_cases is None else describe(raw_cases)
        raise RuleTestError(path, "cases", f"expected a list of cases, got {got}")
    shared = {key: (doc[key], key) for key in (*OBJECT_KEYS, NODE_METRICS) if key in doc}
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_cases):
        case = _case(raw, f"cases[{i}]", path, shared)
        if case.name in seen:
            raise RuleTestError(path, f"cases[{i}].name", f"{case.name!r} names another case too")
        seen.add(case.name)
        cases.append(case)
    return CaseFile(path, rules, tuple(cases))


def _load_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise RuleTestError(path, "", f"cannot read: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise RuleTestError(path, "", f"not UTF-8 text (byte {err.start} is invalid)") from None
    try:
        return safe_load(text)  # yaml.safe_load, with aliases' expansion bounded
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = (err.problem or "malformed").splitlines()[0]
        raise RuleTestError(where, "", f"invalid YAML: {problem}") from None
    except (yaml.YAMLError, RecursionError) as err:
        raise RuleTestError(
            path, "", f"invalid YAML: {str(err).splitlines()[0] if str(err) else 'malformed'}"
        ) from None


# --- the rule set --------------------------------------------------------------------------------


def _rules(raw: Any, path: Path) -> tuple[Path, ...]:
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list) or not entries or not all(isinstance(e, str) and e for e in entries):
        raise RuleTestError(path, "rules", f"expected a path or a list of paths, got {describe(raw)}")
    return tuple(_rule_path(entry, path) for entry in entries)


def _rule_path(entry: str, path: Path) -> Path:
    """Relative to the test file's folder; else a bundled rule set (``default``)."""
    near = path.parent / entry
    if near.exists():
        return near
    bundled = resolve_rules_path(entry)
    if bundled.is_file() and bundled.parent.resolve() == bundled_rules_dir().resolve():
        return bundled
    raise RuleTestError(path, "rules", f"{entry!r}: no such file or folder next to the test file, nor a bundled set")


def _folder_rules(path: Path) -> tuple[Path, ...]:
    folder = path.parent
    if not any(p.suffix == RULES_SUFFIX and p.is_file() for p in folder.iterdir()):
        raise RuleTestError(path, "rules", f"no {RULES_SUFFIX} files next to the test file; name them with 'rules:'")
    return (folder,)


# --- cases -----------------------------------------------------------------------------------------


def _case(raw: Any, label: str, path: Path, shared: Mapping[str, tuple[Any, str]]) -> Case:
    if not isinstance(raw, dict):
        raise RuleTestError(path, label, f"expected a case (a mapping with name, pod, expect), got {describe(raw)}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RuleTestError(path, f"{label}.name", f"expected the case's name, got {describe(name)}")
    label = f"case {name!r}"  # fields below are named "case 'big pod': nodes[0]"

    def at(key: str) -> str:
        return f"{label}: {key}"

    check_keys(raw, CASE_KEYS, path, at)
    for key in ("expect",) if "group" in raw else ("pod", "expect"):
        if key not in raw:
            raise RuleTestError(path, at(key), "missing")

    def given(key: str) -> list[tuple[Any, str]]:
        """The case's own list for ``key``, else the file's: items with their field labels."""
        value, where = (raw[key], at(key)) if key in raw else shared.get(key, (None, key))
        if value is None:
            return []
        if not isinstance(value, list):
            raise RuleTestError(path, where, f"expected a list of {_KINDS[key]} objects, got {describe(value)}")
        items = list(_flatten(value, where))
        for item, item_label in items:
            kind = item.get("kind") if isinstance(item, dict) else None
            if kind is not None and kind != _KINDS[key]:
                raise RuleTestError(path, f"{item_label}.kind", f"expected {_KINDS[key]}, got {describe(kind)}")
        return items

    memo: Memo = {}

    def decode(key: str, decoder: Callable[[Any, str], T]) -> list[tuple[T, str]]:
        return [(decoder(item, f"{path}: {item_label}"), item_label) for item, item_label in given(key)]

    classes = {pc.name: pc for pc, _ in decode("priorityClasses", decode_priority_class)}
    namespaces = decode("namespaces", decode_namespace)
    if "nodes" not in raw and "nodes" not in shared:
        raise RuleTestError(path, at("nodes"), "missing (give the case's nodes, or nodes for the whole file)")
    nodes = decode("nodes", lambda obj, source: decode_node(obj, source, memo=memo))
    pdbs = decode("pdbs", decode_pdb)
    pods = decode("pods", lambda obj, source: decode_pod(obj, source, classes, memo=memo))
    node_names = _unique([(n.name, where) for n, where in nodes], path, "Node")
    pod_keys = _unique([(p.key, where) for p, where in pods], path, "Pod")
    _unique([(p.key, where) for p, where in pdbs], path, "PodDisruptionBudget")
    _unique([(ns.name, where) for ns, where in namespaces], path, "Namespace")
    services = decode("services", decode_service)
    _unique([(svc.key, where) for svc, where in services], path, "Service")
    controllers: list[Controller] = []
    for key, kind in WORKLOAD_KEYS.items():
        if kind != "Service":
            found = decode(key, _controller_decoder(kind))
            _unique([(c.key, where) for c, where in found], path, kind)
            controllers += [c for c, _ in found]
    for pod, where in pods:
        if pod.node_name not in node_names:
            problem = (
                f"node {pod.node_name!r} is not one of this case's nodes"
                if pod.node_name
                else "missing: a running pod names its node (the pod under test goes in 'pod')"
            )
            raise ObjectError(problem, source=f"{path}: {where}", obj=f"Pod {pod.key}", field="spec.nodeName")
    groups, members = _group_case(raw, path, at, classes)
    group = next((g for g in groups if not g.parent), None)
    dra = DraState(
        {c.name: c for c, _ in decode("deviceClasses", decode_device_class)},
        {c.key: c for c, _ in decode("resourceClaims", decode_resource_claim)},
        {t.key: t for t, _ in decode("resourceClaimTemplates", decode_resource_claim_template)},
        {s.name: s for s, _ in decode("resourceSlices", decode_resource_slice)},
    )
    pending = list(members) or [decode_pod(raw["pod"], f"{path}: {at('pod')}", classes, memo=memo)]
    for i, pending_pod in enumerate(pending):  # (the resourceclaim controller's part: every pending pod)
        if pending_pod.resource_claims and not pending_pod.node_name:
            pending[i], made = claims_from_templates(pending_pod, dra.templates, dra.claims)
            if made:
                dra = dataclasses.replace(dra, claims={**dra.claims, **{c.key: c for c in made}})
    pod = pending[0]
    members = tuple(pending) if members else ()
    expect = read_expect(raw["expect"], path, at("expect"), node_names, pod_keys, [m.name for m in members])
    cluster = Cluster(
        tuple(n for n, _ in nodes),
        tuple(p for p, _ in pods if p.phase not in ("Succeeded", "Failed")),  # finished pods hold nothing
        tuple(pdb for pdb, _ in pdbs),
        tuple(ns for ns, _ in namespaces),
        _workloads([svc for svc, _ in services], controllers),
        StorageState(
            {v.name: v for v, _ in decode("persistentVolumes", decode_pv)},
            {c.key: c for c, _ in decode("persistentVolumeClaims", decode_pvc)},
            {c.name: c for c, _ in decode("storageClasses", decode_storage_class)},
            {c.name: c for c, _ in decode("csiNodes", decode_csinode)},
        ),
        _node_metrics(raw, shared, path, at),
        dra,
    )
    return Case(name, pod, cluster, expect, group, members, groups)


def _group_case(
    raw: Mapping[str, Any], path: Path, at: Callable[[str], str], classes: Mapping[str, Any]
) -> tuple[tuple[PodGroup, ...], tuple[Pod, ...]]:
    """A group case's groups (one PodGroup, ``kind`` and ``apiVersion`` optional, or a list of
    the workload API's groups) and its pending members (one naming no group joins the first
    PodGroup listed)."""
    if "group" not in raw:
        if "members" in raw:
            raise RuleTestError(path, at("members"), "members go with a group (give 'group')")
        return (), ()
    if "pod" in raw:
        raise RuleTestError(path, at("pod"), "a group case places its 'members', not one 'pod'")
    listed_groups = raw["group"] if isinstance(raw["group"], list) else [raw["group"]]
    if not listed_groups:
        raise RuleTestError(path, at("group"), "expected a PodGroup or a list of groups, got an empty list")
    groups = []
    for i, obj in enumerate(listed_groups):
        where = f"{path}: {at('group' if len(listed_groups) == 1 and not isinstance(raw['group'], list) else f'group[{i}]')}"
        kind = obj.get("kind", "PodGroup") if isinstance(obj, dict) else "PodGroup"
        decode = decode_composite_pod_group if kind == "CompositePodGroup" else decode_pod_group
        groups.append(decode(obj, where, classes))
    _unique([(g.key, at("group")) for g in groups], path, "pod group")
    keys = {g.key for g in groups}
    for g in groups:
        if g.parent and g.parent not in keys:
            raise RuleTestError(path, at("group"), f"{g.kind} {g.ref} names a parent that is not listed")
    first = next((g for g in groups if not g.composite), None)
    if first is None:
        raise RuleTestError(path, at("group"), "no PodGroup listed (members join PodGroups)")
    listed = raw.get("members")
    if not isinstance(listed, list) or not listed:
        raise RuleTestError(path, at("members"), f"expected a list of the group's pending pods, got {describe(listed)}")
    members = []
    for i, obj in enumerate(listed):
        member = decode_pod(obj, f"{path}: {at(f'members[{i}]')}", classes)
        if group_key(member) is None:
            if first.native:
                member = dataclasses.replace(member, scheduling_group=first.name)
            else:
                labels = {**member.labels, POD_GROUP_LABEL: first.name}
                member = dataclasses.replace(member, labels=MappingProxyType(labels))
        if group_key(member) not in keys:
            raise RuleTestError(
                path, at(f"members[{i}]"), f"not a member of the groups listed ({', '.join(sorted(keys))})"
            )
        members.append(member)
    _unique([(m.key, at(f"members[{i}]")) for i, m in enumerate(members)], path, "Pod")
    return tuple(groups), tuple(members)


def _node_metrics(
    raw: Mapping[str, Any], shared: Mapping[str, tuple[Any, str]], path: Path, at: Callable[[str], str]
) -> LoadSnapshot | None:
    """The case's ``nodeMetrics``, else the file's; None when neither gives any."""
    value, where = (
        (raw[NODE_METRICS], at(NODE_METRICS)) if NODE_METRICS in raw else shared.get(NODE_METRICS, (None, ""))
    )
    if value is None:
        return None
    return decode_load_document(value, f"{path}: {where}")


def _controller_decoder(kind: str) -> Callable[[Any, str], Controller]:
    return lambda obj, source: decode_controller(obj, kind, source)


def _workloads(services: list[Service], controllers: list[Controller]) -> Workloads:
    return Workloads.of(services, controllers) if services or controllers else NO_WORKLOADS


def _flatten(items: list[Any], label: str) -> Iterator[tuple[Any, str]]:
    """The objects of a list with their labels; a list inside is spliced in (``- *shared``)."""
    for i, item in enumerate(items):
        if isinstance(item, list):
            yield from _flatten(item, f"{label}[{i}]")
        else:
            yield item, f"{label}[{i}]"


def _unique(names: list[tuple[str, str]], path: Path, kind: str) -> list[str]:
    """The names, each with its field label; the second of two equal names is an error."""
    seen: set[str] = set()
    for name, where in names:
        if name in seen:
            raise RuleTestError(path, where, f"duplicate {kind} {name}")
        seen.add(name)
    return [name for name, _ in names]
