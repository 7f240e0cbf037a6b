"""What this process last wrote into each pod's status (and each workload PodGroup's
condition), so that a write which would change nothing is not sent.

kube-scheduler sends a status patch only when it changes the pod (its API dispatcher's
``PodStatusPatchCall`` applies the condition and the nomination to the pod's cached status and
skips the call when neither changed: ``syncStatus`` in pkg/scheduler/framework/api_calls). The
cached pod lags our own writes, though: a nomination cleared by one attempt still shows on the pod
the next attempt sees until the informer brings the patched pod back, and clearing it again would
send the same body twice. So each record also keeps the resourceVersion of the pod it was written
against: while the pod seen is still that version, our write is what the server holds; once a newer
version is seen, the pod says what the server holds.

Not thread-safe: :class:`rulesched.run.workers.Workers` calls it under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from rulesched.model import Pod

V = TypeVar("V")


@dataclass(frozen=True)
class Nomination:
    # "" when the write cleared it; None when the write failed: what the server holds is not
    # known, and the next write goes whatever the pod seen says (the scheduler's copy of a pod
    # carries its own book's nomination, written or not)
    node: str | None
    against: str  # the resourceVersion of the pod the write was decided on


def _changes(record: dict[str, V], key: str, value: V) -> bool:
    """Whether ``value`` differs from the one ``record`` holds for ``key``; if so, recorded."""
    if record.get(key) == value:
        return False
    record[key] = value
    return True


class Written:
    def __init__(self) -> None:
        self._condition: dict[str, tuple[str, str]] = {}  # pod key -> PodScheduled=False (reason, message)
        self._gates: dict[str, str] = {}  # pod key -> the gates its SchedulingGated condition names
        self._nomination: dict[str, Nomination] = {}
        self._group_condition: dict[str, str] = {}  # workload API PodGroup key -> its condition's mark

    def group_condition_changes(self, key: str, mark: str) -> bool:
        """Whether a workload PodGroup's condition (``mark``: its uid, generation, status,
        reason and message) differs from the one last written; if so, recorded as written."""
        return _changes(self._group_condition, key, mark)

    def condition_changes(self, key: str, reason: str, message: str) -> bool:
        """Whether a PodScheduled=False condition ``(reason, message)`` differs from the one last
        written to the pod (kube-scheduler's updatePod patches only a changed condition); if it
        does, it is recorded as written."""
        return _changes(self._condition, key, (reason, message))

    def gates_change(self, key: str, gates: str, message: str) -> bool:
        """Whether the pod's SchedulingGated condition, naming ``gates``, is still to be written
        (once per pod and set of gates); if so, recorded as written."""
        if not _changes(self._gates, key, gates):
            return False
        self._condition[key] = ("SchedulingGated", message)
        return True

    def condition_failed(self, key: str, reason: str, message: str) -> None:
        """The condition was not written: the next attempt writes it again."""
        if self._condition.get(key) == (reason, message):
            del self._condition[key]

    def nomination_changes(self, pod: Pod, node: str) -> bool:
        """Whether setting the pod's nominatedNodeName to ``node`` ("" clears it) changes what the
        server holds: what this process last wrote while ``pod`` is the version it wrote against,
        else what ``pod`` says. If it does, it is recorded as written."""
        last = self._nomination.get(pod.key)
        if last is None or (last.node is not None and last.against != pod.resource_version):
            holds: str | None = pod.nominated_node_name
        else:
            holds = last.node
        if holds == node:
            return False
        self._nomination[pod.key] = Nomination(node, pod.resource_version)
        return True

    def nomination_failed(self, key: str, node: str) -> None:
        """The nomination was not written: the next one is sent."""
        last = self._nomination.get(key)
        if last is not None and last.node == node:
            self._nomination[key] = Nomination(None, last.against)

    def forget(self, key: str) -> None:
        """The pod is bound or gone."""
        self._gates.pop(key, None)
        self._condition.pop(key, None)
        self._nomination.pop(key, None)
