"""The last good rule set from a ConfigMap, kept across restarts in a ConfigMap of its own.

When the rules come from ``--rules-configmap NS/NAME``, the replica that may write (the leader;
every replica when there is no leader election, as in the extender) copies the ConfigMap whose
rules it accepted into ``NS/NAME-last-good``: the same ``data`` and ``binaryData``, and
annotations naming the digest of the set they compiled to, the source ConfigMap and its
resourceVersion, when and by whom. A replica that starts while the live ConfigMap does not
compile (or is gone) starts from this copy instead of not starting at all.

Writes use optimistic concurrency as every Kubernetes controller does: a create fails with 409
when the record exists, a replace carries the resourceVersion it read and fails with 409 when
someone wrote in between; then the record is read again and written only if it still differs.
The record is found by name and has no ownerReference (deleting the rules ConfigMap must not
take the last good copy with it).
Next stage: :mod:`rulesched.reload` reads it at start and has it written after each accepted set.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rulesched.errors import ConflictError, NotFoundError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import CONFIGMAPS

log = logging.getLogger(__name__)

SUFFIX = "-last-good"
DIGEST = "rulesched.io/rules-digest"
SOURCE = "rulesched.io/source"
SOURCE_VERSION = "rulesched.io/source-resource-version"
RECORDED_AT = "rulesched.io/recorded-at"
RECORDED_BY = "rulesched.io/recorded-by"
MAX_NAME = 253  # a ConfigMap's name is a DNS subdomain
ATTEMPTS = 3


def record_name(configmap: str) -> str:
    return f"{configmap}{SUFFIX}"


@dataclass(frozen=True)
class Recorded:
    """What the record holds: the accepted ConfigMap's entries, and what they compiled to."""

    configmap: dict[str, Any]  # the record object itself (its data and binaryData are the rules)
    digest: str
    source_version: str
    recorded_at: str


class LastGoodRecord:
    def __init__(self, api: KubeApi, namespace: str, configmap: str, controller: str = "rulesched") -> None:
        self.api, self.namespace = api, namespace
        self.source = f"{namespace}/{configmap}"
        self.name = record_name(configmap)
        self.identity = f"{controller}/{socket.gethostname()}"

    @property
    def usable(self) -> bool:
        return len(self.name) <= MAX_NAME

    def read(self) -> Recorded | None:
        """The record, or None when there is none (KubeError when the API does not answer)."""
        try:
            obj = self.api.get(CONFIGMAPS, self.namespace, self.name)
        except NotFoundError:
            return None
        notes = (obj.get("metadata") or {}).get("annotations") or {}
        return Recorded(
            obj,
            str(notes.get(DIGEST) or ""),
            str(notes.get(SOURCE_VERSION) or ""),
            str(notes.get(RECORDED_AT) or ""),
        )

    def write(self, accepted: dict[str, Any], digest: str) -> bool:
        """Record ``accepted`` (the live ConfigMap whose rules compiled to ``digest``); False
        when other writers kept winning. KubeError (403, the API down) is the caller's to retry."""
        meta = accepted.get("metadata") or {}
        entries = {key: accepted[key] for key in ("data", "binaryData") if accepted.get(key)}
        annotations = {
            DIGEST: digest,
            SOURCE: self.source,
            SOURCE_VERSION: str(meta.get("resourceVersion") or ""),
            RECORDED_AT: datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            RECORDED_BY: self.identity,
        }
        for _ in range(ATTEMPTS):
            try:
                current: dict[str, Any] | None = self.api.get(CONFIGMAPS, self.namespace, self.name)
            except NotFoundError:
                current = None
            if current is not None and _holds(current, entries, digest):
                return True  # already there (another replica, or this one before a restart)
            body: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    "labels": {"app.kubernetes.io/managed-by": "rulesched"},
                    "annotations": annotations,
                },
                **entries,
            }
            try:
                if current is None:
                    self.api.create(CONFIGMAPS, self.namespace, body)
                else:
                    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    self.api.replace(CONFIGMAPS, self.namespace, self.name, body)
                return True
            except ConflictError:
                continue  # written in between: read it again
        log.info("last good rules %s/%s: other writers kept winning", self.namespace, self.name)
        return False


def _holds(record: dict[str, Any], entries: dict[str, Any], digest: str) -> bool:
    notes = (record.get("metadata") or {}).get("annotations") or {}
    held = {key: record[key] for key in ("data", "binaryData") if record.get(key)}
    return notes.get(DIGEST) == digest and held == entries
