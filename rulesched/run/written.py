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

from rulesched.model import Pod


@dataclass(frozen=True)
class Nomination:
    node: str  # "" when the write cleared it
    against: str  # the resourceVersion of the pod the write was decided on


class Written:
    def __init__(self) -> None:
        self._condition: dict[str, tuple[str, str]] = {}  # pod key -> PodScheduled=False (reason, message)
        self._gates: dict[str, str] = {}  # pod key -> the gates its SchedulingGated condition names
        self._nomination: dict[str, Nomination] = {}
        # pods whose last nomination write failed: the next is sent whatever the pod seen says
        # (the scheduler's copy of a pod carries its own book's nomination, written or not)
        self._unsure: set[str] = set()
        self._group_condition: dict[str, str] = {}  # workload API PodGroup key -> its condition's mark

    def group_condition_changes(self, key: str, mark: str) -> bool:
        """Whether a workload PodGroup's condition (``mark``: its uid, generation, status,
        reason and message) differs from the one last written; if so, recorded as written."""
        if self._group_condition.get(key) == mark:
            return False
        self._group_condition[key] = mark
        return True

    def condition_changes(self, key: str, reason: str, message: str) -> bool:
        """Whether a PodScheduled=False condition ``(reason, message)`` differs from the one last
        written to the pod (kube-scheduler's updatePod patches only a changed condition); if it
        does, it is recorded as written."""
        if self._condition.get(key) == (reason, message):
            return False
        self._condition[key] = (reason, message)
        return True

    def gates_change(self, key: str, gates: str, message: str) -> bool:
        """Whether the pod's SchedulingGated condition, naming ``gates``, is still to be written
        (once per pod and set of gates); if so, recorded as written."""
        if self._gates.get(key) == gates:
            return False
        self._gates[key] = gates
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
        holds = last.node if last is not None and last.against == pod.resource_version else pod.nominated_node_name
        if holds == node and pod.key not in self._unsure:
            return False
        self._unsure.discard(pod.key)
        self._nomination[pod.key] = Nomination(node, pod.resource_version)
        return True

    def nomination_failed(self, key: str, node: str) -> None:
        """The nomination was not written: the next one is sent."""
        last = self._nomination.get(key)
        if last is not None and last.node == node:
            del self._nomination[key]
            self._unsure.add(key)

    def forget(self, key: str) -> None:
        """The pod is bound or gone."""
        self._gates.pop(key, None)
        self._condition.pop(key, None)
        self._nomination.pop(key, None)
        self._unsure.discard(key)
