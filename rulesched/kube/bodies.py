"""The request bodies of the scheduler's hot writes, built without the client's models: a
pods/binding Binding and an events.k8s.io/v1 Event (sent by :class:`rulesched.kube.api.KubeApi`
and by the binding process's pipeline, in protobuf where :mod:`rulesched.kube.protobuf` can)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from rulesched.model import Pod


def binding_body(namespace: str, name: str, uid: str, node: str) -> dict[str, Any]:
    """A pods/binding request's Binding (the uid: only that pod, not one recreated under its name)."""
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def event_body(
    regarding: dict[str, str],
    type_: str,
    reason: str,
    action: str,
    note: str,
    by: str,
    related: dict[str, str] | None = None,
) -> dict[str, Any]:
    """An events.k8s.io/v1 Event (see :meth:`KubeApi.post_event`); POST it to EVENTS in
    ``["metadata"]["namespace"]``."""
    namespace = regarding.get("namespace") or "default"
    name = regarding.get("name") or "object"
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": event_name(name), "namespace": namespace},
        "eventTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "reportingController": by,
        "reportingInstance": by,
        "action": action,
        "reason": reason,
        "type": type_,
        "note": note[:1024],
        "regarding": regarding,
    }
    if related is not None:
        body["related"] = related
    return body


def event_name(regarding: str) -> str:
    """client-go's event name (GenerateEventName): the object's name, a dot, the time in
    nanoseconds in hex; a UUID when that is too long for a name. (A ``generateName`` ending in
    a dot, as this once sent, is refused by the real API server: not a DNS subdomain prefix.)"""
    name = f"{regarding}.{time.time_ns():x}"
    return name if len(name) <= 253 else str(uuid.uuid4())


def observed_generation(pod: Pod) -> dict[str, int]:
    """A condition's ``observedGeneration`` as kube-scheduler 1.37 writes it on the PodScheduled
    and DisruptionTarget conditions it sets (CalculatePodConditionObservedGeneration, with
    PodObservedGenerationTracking on: the pod's metadata.generation); none for a pod read without
    one."""
    return {"observedGeneration": pod.generation} if pod.generation else {}
