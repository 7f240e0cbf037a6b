"""The resourceclaim controller's part: a pod's claims made from its ResourceClaimTemplates
(pkg/controller/resourceclaim/controller.go at v1.37, handleClaim).

For each ``spec.resourceClaims`` entry naming a template, the controller creates a claim owned by
the pod (its controller reference), with the template's labels, annotations and spec, the
annotation ``resource.kubernetes.io/pod-claim-name`` naming the entry, and a generated name:
``<pod>-<entry>-`` (both cut in proportion to fit 57 characters) and 5 random characters; then
it records the name in the pod's ``status.resourceClaimStatuses``. rulesched makes the same
claims for the pending pods of cluster files (a dump taken before the controller ran, a file
written by hand), with the 5 characters derived from the pod and entry so that runs repeat.
``run`` makes none: it waits for the controller's, as kube-scheduler does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from types import MappingProxyType

from rulesched.model import Pod
from rulesched.model.dra import POD_CLAIM_ANNOTATION, ResourceClaim, ResourceClaimTemplate
from rulesched.model.objects import PodClaim
from rulesched.model.replaced import replaced

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String
_MAX_BASE = 57


def generate_name(pod_name: str, claim_name: str) -> str:
    """The controller's generateName for a pod's claim entry."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) > _MAX_BASE:
        base = (
            pod_name[: len(pod_name) * _MAX_BASE // len(base)]
            + "-"
            + claim_name[: len(claim_name) * _MAX_BASE // len(base)]
        )
    return base


def _suffix(pod: Pod, entry: str) -> str:
    digest = hashlib.sha256(f"{pod.namespace}/{pod.name}/{pod.uid}/{entry}".encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def claims_from_templates(
    pod: Pod, templates: Mapping[str, ResourceClaimTemplate], claims: Mapping[str, ResourceClaim]
) -> tuple[Pod, list[ResourceClaim]]:
    """The pod with its template entries' claims named in its status, and the claims made
    (entries already named, or whose template does not exist, are left as they are: the
    scheduler then reports the claim missing, as it would in a cluster)."""
    made: list[ResourceClaim] = []
    entries = []
    for entry in pod.resource_claims:
        if not entry.template_name or entry.generated is not None:
            entries.append(entry)
            continue
        template = templates.get(f"{pod.namespace}/{entry.template_name}")
        if template is None:
            entries.append(entry)
            continue
        name = generate_name(pod.name, entry.name) + _suffix(pod, entry.name)
        if f"{pod.namespace}/{name}" in claims:
            entries.append(replaced(entry, generated=name))
            continue
        annotations = dict(template.annotations)
        annotations[POD_CLAIM_ANNOTATION] = entry.name
        made.append(
            ResourceClaim(
                name=name,
                namespace=pod.namespace,
                uid=f"{pod.uid or pod.key}/{entry.name}",
                annotations=MappingProxyType(annotations),
                labels=template.labels,
                owner=("Pod", pod.name, pod.uid),
                spec=template.spec,
            )
        )
        entries.append(PodClaim(entry.name, "", entry.template_name, name))
    if not made:
        return pod, []
    return replaced(pod, resource_claims=tuple(entries)), made


def consumer_uid(pod: Pod) -> str:
    """The uid a pod is known by in a claim's ``reservedFor`` (its key, for a pod without one:
    files)."""
    return pod.uid or pod.key


def claim_keys(pod: Pod) -> list[str]:
    """The keys (namespace/name) of the claims a pod's entries name (a template's entry: the
    claim made for it, once made), and of the claim made for its DRA-served extended resources."""
    keys = [f"{pod.namespace}/{entry.claim}" for entry in pod.resource_claims if entry.claim]
    if pod.extended_claim:
        keys.append(f"{pod.namespace}/{pod.extended_claim}")
    return keys


def holds_claims(pod: Pod) -> bool:
    """Whether the pod uses DRA claims (its own, or one made for its extended resources)."""
    return bool(pod.resource_claims or pod.extended_claim)
