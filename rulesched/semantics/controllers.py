"""Objects not yet created, as the pods their controllers would create (and the PodGroups they
make for them): what ``rulesched explain -f job.yaml`` schedules before submission. Pure: objects
in, objects out (decoded by the caller).

Each controller's own rules at Kubernetes 1.37 (pkg/controller/*, and JobSet's controller and
webhook for JobSets), as far as scheduling sees them:

- **Job** (batch/v1): ``min(parallelism, completions)`` pods (parallelism 1 when unset; none when
  ``suspend``), named ``<job>-<5 characters>`` (Indexed: ``<job>-<index>-<5>``, with the
  completion index annotation and label, hostname ``<job>-<index>``), labelled
  ``batch.kubernetes.io/job-name``, ``job-name`` and the controller-uid labels, owned by the Job.
  A Job with ``spec.scheduling`` (1.37's WorkloadWithJob, alpha) gets the PodGroup the Job
  controller makes for it (``scheduling.k8s.io/v1beta1``: its schedulingPolicy, ``gang.minCount``
  defaulting to the parallelism, its schedulingConstraints and disruptionMode) and its pods name
  it in ``spec.schedulingGroup``, as job_scheduling_manager.go and job_controller.go do.
- **JobSet** (jobset.x-k8s.io/v1alpha2): each replicated job's ``replicas`` Jobs, named
  ``<jobset>-<replicatedJob>-<i>``, their pods labelled ``jobset.sigs.k8s.io/jobset-name``,
  ``replicatedjob-name``, ``job-index`` and ``job-key``; with the
  ``alpha.jobset.sigs.k8s.io/exclusive-topology`` annotation each Job's pods get the required
  pod affinity (their own job-key) and anti-affinity (every other job-key) on that topology,
  as JobSet's pod webhook adds them.
- **Deployment** (apps/v1): ``replicas`` (1 when unset) pods of its ReplicaSet
  ``<deployment>-<pod-template-hash>``, named ``<replicaset>-<5>``, labelled
  ``pod-template-hash``; a **ReplicaSet**: its ``replicas`` pods likewise.
- **StatefulSet** (apps/v1): ``replicas`` pods ``<name>-0`` .. ``<name>-<n-1>``, labelled
  ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``, hostname their
  name, subdomain ``serviceName``. Its volumeClaimTemplates' claims are not made (the pods are
  explained without those volumes: say so).

Generated suffixes are drawn from the alphabet Kubernetes uses (``bcdfghjklmnpqrstvwxz2456789``),
deterministically from the object's name, so an explanation is reproducible.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

from rulesched.errors import InputError

ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
JOBSET = "jobset.sigs.k8s.io/"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
WORKLOAD_VERSION = "scheduling.k8s.io/v1beta1"
MAX_PODS = 10_000  # pods one object may expand to (a typo'd replicas must not exhaust memory)


def suffix(seed: str, length: int = 5) -> str:
    """``length`` characters of Kubernetes' random alphabet, from ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:length])


def pods_of(kind: str, obj: Any, source: str) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]] | None:
    """(what it is, its pods as objects, the pod groups made for them as objects)."""
    if not isinstance(obj, dict):
        return None
    found = obj.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    name = meta.get("name")
    if kind not in ("Job", "JobSet", "Deployment", "ReplicaSet", "StatefulSet"):
        return None
    if not isinstance(name, str) or not name:
        raise InputError(f"{source}: {kind}: metadata.name: required")
    namespace = str(meta.get("namespace") or "default")
    spec = _map(obj, "spec", source, kind)
    label = f"{kind} {namespace}/{name}"
    if kind == "Job":
        pods, groups = _job(name, namespace, spec, source, {}, meta)
    elif kind == "JobSet":
        pods, groups = _jobset(name, namespace, spec, meta, source)
    elif kind == "Deployment":
        template = _template(spec, source, kind)
        rs = f"{name}-{suffix(name + repr(template), 10)}"
        pods = _replicas(
            rs, namespace, spec, template, "ReplicaSet", source, kind, {"pod-template-hash": rs[len(name) + 1 :]}
        )
        groups = []
    elif kind == "ReplicaSet":
        pods = _replicas(name, namespace, spec, _template(spec, source, kind), "ReplicaSet", source, kind, {})
        groups = []
    else:
        pods, groups = _statefulset(name, namespace, spec, source), []
    return label, pods, groups


def _map(obj: Mapping[str, Any], key: str, source: str, where: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{source}: {where}.{key}: expected an object")
    return value


def _count(spec: Mapping[str, Any], key: str, default: int, source: str, where: str) -> int:
    value = spec.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(f"{source}: {where}.spec.{key}: expected a whole number, 0 or more")
    if value > MAX_PODS:
        raise InputError(f"{source}: {where}.spec.{key}: {value} is more than explain expands ({MAX_PODS})")
    return value


def _template(spec: Mapping[str, Any], source: str, where: str) -> dict[str, Any]:
    template = _map(spec, "template", source, f"{where}.spec")
    if not isinstance(template.get("spec"), dict):
        raise InputError(f"{source}: {where}.spec.template.spec: required")
    return template


def _pod(
    name: str,
    namespace: str,
    template: Mapping[str, Any],
    owner: tuple[str, str, str],
    labels: Mapping[str, str],
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod from ``template`` as a controller creates it: its labels and annotations added,
    owned (as controller) by ``owner`` (apiVersion, kind, name)."""
    meta = copy.deepcopy(template.get("metadata") or {})
    meta["name"] = name
    meta["namespace"] = namespace
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    api, kind, owner_name = owner
    meta["ownerReferences"] = [
        {"apiVersion": api, "kind": kind, "name": owner_name, "uid": f"uid-{owner_name}", "controller": True}
    ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template["spec"])}


def _replicas(
    owner: str,
    namespace: str,
    spec: Mapping[str, Any],
    template: Mapping[str, Any],
    owner_kind: str,
    source: str,
    where: str,
    labels: Mapping[str, str],
) -> list[dict[str, Any]]:
    count = _count(spec, "replicas", 1, source, where)
    return [
        _pod(f"{owner}-{suffix(f'{owner}/{i}')}", namespace, template, ("apps/v1", owner_kind, owner), labels)
        for i in range(count)
    ]


def _statefulset(name: str, namespace: str, spec: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    template = _template(spec, source, "StatefulSet")
    count = _count(spec, "replicas", 1, source, "StatefulSet")
    service = spec.get("serviceName")
    pods = []
    for i in range(count):
        pod_name = f"{name}-{i}"
        labels = {"statefulset.kubernetes.io/pod-name": pod_name, "apps.kubernetes.io/pod-index": str(i)}
        pod = _pod(pod_name, namespace, template, ("apps/v1", "StatefulSet", name), labels)
        pod["spec"]["hostname"] = pod_name
        if isinstance(service, str) and service:
            pod["spec"]["subdomain"] = service
        pods.append(pod)
    return pods


def _job(
    name: str,
    namespace: str,
    spec: Mapping[str, Any],
    source: str,
    extra_labels: Mapping[str, str],
    meta: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    template = _template(spec, source, "Job")
    if spec.get("suspend") is True:
        return [], []
    parallelism = _count(spec, "parallelism", 1, source, "Job")
    completions = spec.get("completions")
    count = parallelism if completions is None else min(parallelism, _count(spec, "completions", 1, source, "Job"))
    indexed = spec.get("completionMode") == "Indexed"
    uid = f"uid-{name}"
    base = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
        **extra_labels,
    }
    groups: list[dict[str, Any]] = []
    scheduling = spec.get("scheduling")
    group_name = ""
    if isinstance(scheduling, dict) and (template.get("spec") or {}).get("schedulingGroup") is None:
        group_name = f"{name}-pg-{suffix(name, 5)}"  # (upstream: <workload>-<template>-<hash>)
        groups.append(_job_group(group_name, namespace, scheduling, parallelism, template))
    pods = []
    for i in range(count):
        labels = dict(base)
        annotations: dict[str, str] = {}
        pod_name = f"{name}-{suffix(f'{name}/{i}')}"
        if indexed:
            labels["batch.kubernetes.io/job-completion-index"] = str(i)
            annotations["batch.kubernetes.io/job-completion-index"] = str(i)
            pod_name = f"{name}-{i}-{suffix(f'{name}/{i}')}"
        pod = _pod(pod_name, namespace, template, ("batch/v1", "Job", name), labels, annotations)
        if indexed:
            pod["spec"]["hostname"] = f"{name}-{i}"
        if group_name:
            pod["spec"]["schedulingGroup"] = {"podGroupName": group_name}
        pods.append(pod)
    return pods, groups


def _job_group(
    name: str, namespace: str, scheduling: Mapping[str, Any], parallelism: int, template: Mapping[str, Any]
) -> dict[str, Any]:
    """The runtime PodGroup the Job controller makes from ``spec.scheduling`` (gang minCount
    defaults to the parallelism, at least 1; basic when no policy is given)."""
    policy = copy.deepcopy(scheduling.get("schedulingPolicy") or {"basic": {}})
    gang = policy.get("gang")
    if isinstance(gang, dict) and gang.get("minCount") is None:
        gang["minCount"] = max(1, parallelism)
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    for key in ("schedulingConstraints", "disruptionMode"):
        if scheduling.get(key) is not None:
            spec[key] = copy.deepcopy(scheduling[key])
    priority = (template.get("spec") or {}).get("priorityClassName")
    if priority:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": WORKLOAD_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _jobset(
    name: str, namespace: str, spec: Mapping[str, Any], meta: Mapping[str, Any], source: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    jobs = spec.get("replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        raise InputError(f"{source}: JobSet.spec.replicatedJobs: expected a list of replicated jobs")
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    exclusive = annotations.get(EXCLUSIVE) if isinstance(annotations, dict) else None
    pods: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    keys: list[str] = []
    per_job: list[list[dict[str, Any]]] = []
    for r, rjob in enumerate(jobs):
        if not isinstance(rjob, dict) or not isinstance(rjob.get("name"), str):
            raise InputError(f"{source}: JobSet.spec.replicatedJobs[{r}].name: required")
        replicas = _count(rjob, "replicas", 1, source, f"JobSet.spec.replicatedJobs[{r}]")
        job_spec = _map(_map(rjob, "template", source, f"JobSet.spec.replicatedJobs[{r}]"), "spec", source, "template")
        for i in range(replicas):
            job_name = f"{name}-{rjob['name']}-{i}"
            key = hashlib.sha1(f"{namespace}/{job_name}".encode()).hexdigest()  # (JobSet's job-key)
            labels = {
                f"{JOBSET}jobset-name": name,
                f"{JOBSET}replicatedjob-name": rjob["name"],
                f"{JOBSET}job-index": str(i),
                f"{JOBSET}job-key": key,
            }
            made, made_groups = _job(job_name, namespace, job_spec, source, labels, {})
            keys.append(key)
            per_job.append(made)
            groups += made_groups
    if isinstance(exclusive, str) and exclusive:
        for key, made in zip(keys, per_job, strict=True):
            for pod in made:
                _exclusive(pod, key, exclusive)
    for made in per_job:
        pods += made
    return pods, groups


def _exclusive(pod: dict[str, Any], key: str, topology: str) -> None:
    """JobSet's exclusive placement: the job's pods together in one domain of ``topology``, and
    no other job's pods there (its pod webhook's affinity and anti-affinity)."""
    affinity = pod["spec"].setdefault("affinity", {})
    together = {
        "labelSelector": {"matchExpressions": [{"key": f"{JOBSET}job-key", "operator": "In", "values": [key]}]},
        "topologyKey": topology,
    }
    apart = {
        "labelSelector": {
            "matchExpressions": [
                {"key": f"{JOBSET}job-key", "operator": "Exists"},
                {"key": f"{JOBSET}job-key", "operator": "NotIn", "values": [key]},
            ]
        },
        "topologyKey": topology,
    }
    affinity.setdefault("podAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        together
    )
    affinity.setdefault("podAntiAffinity", {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(
        apart
    )
