"""What ``rulesched explain`` is asked about: one pod, or a group of pods explained together.

- ``NS/POD``: a pod of the cluster files (a member of a PodGroup the files hold brings its
  group's pending members along: the group is what must fit);
- ``KIND/NS/NAME``: the pending pods of a PodGroup (``podgroup/``), or those a controller made
  (``job/``, ``jobset/``, ``deployment/``, ``replicaset/``, ``statefulset/``);
- ``-f FILE`` (repeatable): objects not yet created: Pods and PodGroups as they are, and
  Jobs, JobSets, Deployments, ReplicaSets and StatefulSets as the pods their controllers would
  create (:mod:`rulesched.authoring.expand`); one pod alone is explained as a pod, anything more
  as a group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rulesched.errors import InputError
from rulesched.model import Pod, PriorityClass
from rulesched.model.decode import decode_pod
from rulesched.model.groups import (
    PodGroup,
    decode_composite_pod_group,
    decode_pod_group,
    group_key,
)
from rulesched.scheduler.group_fixes import members_of
from rulesched.semantics.controllers import pods_of
from rulesched.simulate.documents import read_file
from rulesched.simulate.load import ClusterObjects

KINDS = ("podgroup", "job", "jobset", "deployment", "replicaset", "statefulset")
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


@dataclass(frozen=True)
class Subject:
    pods: tuple[Pod, ...]  # pending, the first explained node by node
    groups: tuple[PodGroup, ...]  # every pod group known (the files' and -f's)
    name: str  # what they are: "pod ns/x", "PodGroup ns/g", "Job ns/train", "3 pods"
    group: bool  # explained as a group
    created: tuple[str, ...] = ()  # what -f made them from ("Job ns/train: 4 pods")


def _key(text: str) -> str:
    return text if "/" in text else f"default/{text}"


def subject(pod: str | None, filenames: Sequence[str], objects: ClusterObjects) -> Subject:
    if filenames:
        return _from_files(filenames, objects)
    assert pod is not None
    parts = pod.split("/")
    if len(parts) == 3 and parts[0].lower() in KINDS:
        return _of_kind(parts[0].lower(), parts[1], parts[2], objects)
    if len(parts) == 3:
        raise InputError(f"{pod}: expected NS/POD or KIND/NS/NAME with KIND one of {', '.join(KINDS)}")
    key = _key(pod)
    match = [p for p in (*objects.pods, *objects.skipped_pods) if p.key == key]
    if not match:
        raise InputError(f"pod {key} is not in the cluster files")
    found = _unbound(match[0])
    gk = group_key(found)
    known = {g.key for g in objects.groups}
    if gk is not None and gk in known:
        members = members_of(objects.pending_pods, objects.groups, found)
        group = next(g for g in objects.groups if g.key == gk)
        return Subject(tuple(members), objects.groups, f"{group.kind} {group.ref}", True)
    return Subject((found,), objects.groups, f"pod {found.key}", False)


def _unbound(pod: Pod) -> Pod:
    """A running pod explained as if it were not placed."""
    return dataclasses.replace(pod, node_name="") if pod.node_name else pod


def _of_kind(kind: str, namespace: str, name: str, objects: ClusterObjects) -> Subject:
    pending = [p for p in objects.pending_pods if p.namespace == namespace]
    if kind == "podgroup":
        keys = {f"{namespace}/{name}", f"pg:{namespace}/{name}", f"cpg:{namespace}/{name}"}
        known = [g for g in objects.groups if g.key in keys]
        if not known:
            raise InputError(f"PodGroup {namespace}/{name} is not in the cluster files")
        tree = {g.key for g in objects.groups if g.key in keys or g.parent in keys}
        pods = [p for p in pending if group_key(p) in tree]
        label = f"{known[0].kind} {known[0].ref}"
    elif kind == "jobset":
        pods = [p for p in pending if p.labels.get(JOBSET_NAME) == name]
        label = f"JobSet {namespace}/{name}"
    else:
        owner = {"job": "Job", "deployment": "ReplicaSet", "replicaset": "ReplicaSet", "statefulset": "StatefulSet"}[
            kind
        ]
        if kind == "deployment":  # (its ReplicaSets are named <deployment>-<pod-template-hash>)
            pods = [p for p in pending if p.owner.startswith(f"ReplicaSet/{name}-")]
        else:
            pods = [p for p in pending if p.owner == f"{owner}/{name}"]
        label = f"{kind.capitalize() if kind != 'statefulset' else 'StatefulSet'} {namespace}/{name}"
        if kind == "replicaset":
            label = f"ReplicaSet {namespace}/{name}"
    if not pods:
        raise InputError(f"{label}: no pending pods of it in the cluster files")
    return Subject(tuple(pods), objects.groups, label, True)


def _from_files(filenames: Sequence[str], objects: ClusterObjects) -> Subject:
    pods: list[Pod] = []
    groups: list[PodGroup] = []
    created: list[str] = []
    for filename in filenames:
        for _, kind, obj in read_file(Path(filename), filename):
            if kind == "Pod":
                pods.append(_unbound(decode_pod(obj, filename, objects.priority_classes)))
            elif kind == "PodGroup":
                groups.append(decode_pod_group(obj, filename, objects.priority_classes))
            elif kind == "CompositePodGroup":
                groups.append(decode_composite_pod_group(obj, filename, objects.priority_classes))
            else:
                made = expand(kind, obj, filename, objects.priority_classes)
                if made is None:
                    continue
                label, new, made_groups = made
                pods += new
                groups += made_groups
                created.append(
                    f"{label}: {len(new)} pod(s)" + (f", PodGroup {made_groups[0].ref}" if made_groups else "")
                )
    if not pods:
        raise InputError(f"{', '.join(filenames)}: no Pod, and nothing that makes pods (Job, JobSet, Deployment, ...)")
    keys = [p.key for p in pods]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError(f"{', '.join(filenames)}: pod {dup} given twice")
    every = (*objects.groups, *groups)
    if len(pods) == 1 and not groups:
        return Subject((pods[0],), every, f"pod {pods[0].key}", False, tuple(created))
    roots = [g for g in groups if not g.parent]
    name = (
        f"{roots[0].kind} {roots[0].ref}"
        if len(roots) == 1
        else (created[0].split(":")[0] if len(created) == 1 else f"{len(pods)} pods")
    )
    return Subject(tuple(pods), every, name, True, tuple(created))


def expand(
    kind: str, obj: object, source: str, classes: Mapping[str, PriorityClass]
) -> tuple[str, list[Pod], list[PodGroup]] | None:
    """(what it is, its pods, the pod groups made for them) as its controller would create them
    (:mod:`rulesched.semantics.controllers`), decoded; None when ``kind`` makes no pods."""
    made = pods_of(kind, obj, source)
    if made is None:
        return None
    label, pods, groups = made
    where = f"{source} ({label})"
    return label, [decode_pod(p, where, classes) for p in pods], [decode_pod_group(g, where, classes) for g in groups]
