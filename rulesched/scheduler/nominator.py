"""Nominated pods: pending pods that hold a place on a node they are expected to take.

A pod is nominated to a node when its preemption evicted pods there (the scheduler nominates
it), or when it arrives pending with ``status.nominatedNodeName`` set (a simulate dump, the live
API: another scheduler instance or an earlier run nominated it). Until its nomination ends, the
node's resources, ports and pod counts are reserved for it against pods of lower or equal
priority: kube-scheduler's RunFilterPluginsWithNominatedPods filters such a pod on that node
twice, once with the nominated pods of priority at least its own added to the node and once
without, and the node fits only if both pass (a nominated pod may yet land elsewhere, so neither
view alone is safe: extra pods make resources and anti-affinity harder, fewer pods make affinity
harder).

A nomination ends when the pod is bound (assumed), deleted, nominated elsewhere, when a cycle's
preemption finds no node for it, or when a higher-priority preemptor takes its node.

:class:`Nominator` is the scheduler's book of nominations; :class:`Reserved` is what one pod's
cycle must respect; :class:`ReservedCheck` runs the second filtering on a private
:class:`rulesched.cluster.snapshot.ClusterOverlay`, for nodes with such nominations only, so pods
in a cluster without nominations pay nothing.
Next stage: :mod:`rulesched.scheduler.cycle` and :mod:`rulesched.scheduler.preemption` consult a
:class:`ReservedCheck` for the nodes it names.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rulesched.cluster.snapshot import ClusterOverlay, Snapshot
from rulesched.engine import (
    HELD_LEFT,
    HELD_NOT_ASKED,
    HeldFailure,
    NodeColumns,
    Unsupported,
    held_failures,
    held_reasons,
)
from rulesched.lang import BoundRules, ForkedIndexes, Session
from rulesched.model import Pod
from rulesched.scheduler.framework import Status
from rulesched.scheduler.runtime import status_of


class Nominator:
    """Pod key -> nominated node, and node -> the pods nominated to it (each as if placed there,
    ``node_name`` set, ready to be added to a node in a dry run). Owned by the scheduler's thread."""

    def __init__(self) -> None:
        self._node_of: dict[str, str] = {}
        self._on: dict[str, dict[str, Pod]] = {}

    def __len__(self) -> int:
        return len(self._node_of)

    def nominate(self, pod: Pod, node: str) -> None:
        """Nominate ``pod`` to ``node`` (replacing any earlier nomination)."""
        self.remove(pod.key)
        if not node:
            return
        self._node_of[pod.key] = node
        self._on.setdefault(node, {})[pod.key] = dataclasses.replace(pod, node_name=node, nominated_node_name=node)

    def remove(self, key: str) -> str | None:
        """End the pod's nomination; the node it had, if any."""
        node = self._node_of.pop(key, None)
        if node is not None:
            pods = self._on[node]
            del pods[key]
            if not pods:
                del self._on[node]
        return node

    def node_of(self, key: str) -> str | None:
        return self._node_of.get(key)

    def pod_of(self, key: str) -> Pod | None:
        """The pod as nominated (placed on its node), if it is."""
        node = self._node_of.get(key)
        return None if node is None else self._on[node][key]

    def pods_on(self, node: str) -> list[Pod]:
        return list(self._on.get(node, {}).values())

    def lower_on(self, node: str, priority: int) -> list[Pod]:
        """The pods nominated to ``node`` with a priority below ``priority`` (a preemptor taking
        the node ends their nominations, as upstream's getLowerPriorityNominatedPods)."""
        return [p for p in self._on.get(node, {}).values() if p.priority < priority]

    def displaced_by(self, pod: Pod) -> frozenset[str]:
        """The nodes a pod of lower priority than ``pod`` is nominated to (:meth:`lower_on`)."""
        return frozenset(node for node in self._on if self.lower_on(node, pod.priority))

    def reserved_for(self, pod: Pod) -> Reserved | None:
        """What ``pod`` must leave alone: per node, the pods nominated there with a priority at
        least its own, other than itself. None when there are none (the common case)."""
        if not self._node_of:
            return None
        key, priority = pod.key, pod.priority
        nodes: dict[str, tuple[Pod, ...]] = {}
        for node, pods in self._on.items():
            held = tuple(p for k, p in pods.items() if k != key and p.priority >= priority)
            if held:
                nodes[node] = held
        return Reserved(nodes) if nodes else None


@dataclasses.dataclass(frozen=True)
class Reserved:
    """Node name -> the nominated pods (placed there) a pod must treat as running on it."""

    nodes: Mapping[str, tuple[Pod, ...]]


# The reasons of a status kept for a node that fails with its nominated pods added when only
# whether it fits was asked (ReservedCheck.judge with ``fitting``): the rule is the filter it
# failed first, its reasons and unresolvable clause are asked when wanted (_ask_why).
_NOT_ASKED = ("(why: not asked yet)",)


def _unasked(answer: Status | None) -> bool:
    return answer is not None and answer.reasons is _NOT_ASKED


@dataclasses.dataclass(frozen=True)
class AsColumns:
    """What checking many reserved nodes at once needs (:meth:`ReservedCheck.judge`): the
    cycle's binding of the pod, and the snapshot's nodes as columns with their rows by name
    (each made when first asked for)."""

    bound: BoundRules
    columns: Callable[[], NodeColumns]
    rows: Callable[[], Mapping[str, int]]


class ReservedCheck:
    """For one pod in one cycle: whether each reserved node still fits it with its nominated pods
    added (the first of upstream's two filter passes; the caller has run the second, without
    them). One private binding on one overlay of the snapshot serves the cycle: each node's
    nominated pods are put on, the node is judged, and they come off again, so cluster-wide
    answers (spreading, inter-pod affinity) count the nominated pods of that node only.

    ``memo`` (a class's, kept by the cycle across cycles) holds answers while the node, the
    class's ``token`` and the node's nominated pods stay the same objects, as the node tables'
    cached filter outcomes do; the cycle passes none for a pod whose filters are evaluated
    afresh every time."""

    def __init__(
        self,
        reserved: Reserved,
        snapshot: Snapshot,
        session: Session,
        pod: Pod,
        memo: dict[str, tuple[Any, int, object, tuple[Pod, ...], Status | None]] | None = None,
        token: object = None,
        together: AsColumns | None = None,
    ) -> None:
        self.reserved = reserved
        self._snapshot, self._session, self._pod = snapshot, session, pod
        self._memo, self._token = memo, token
        self._together = together  # (None once the columns could not say: node by node)
        self._answers: dict[str, Status | None] = {}
        self._overlay: ClusterOverlay | None = None
        self._bound: BoundRules | None = None

    def failure(self, node: str) -> Status | None:
        """The status of ``node`` with its nominated pods added (its first failing filter);
        None if it fits (or holds no nominations for this pod)."""
        answer = self._verdict(node)
        if not _unasked(answer):
            return answer
        self._ask_why()
        answer = self._answers[node]
        if _unasked(answer):  # (the columns could not say why: node by node)
            pods, info = self.reserved.nodes[node], self._snapshot.node_view(node)
            answer = self._judge(node, pods)
            self._keep(node, info, pods, answer)
            self._answers[node] = answer
        return answer

    def _verdict(self, node: str) -> Status | None:
        """:meth:`failure`, or an unasked status (:func:`_unasked`) for a node :meth:`judge` found
        failing without asking why."""
        if node in self._answers:
            return self._answers[node]
        pods = self.reserved.nodes.get(node)
        info = self._snapshot.node_view(node)
        answer: Status | None = None
        if pods and info is not None:
            found = self._kept(node, info, pods)
            if found is not None:
                answer = found[0]
            else:
                answer = self._judge(node, pods)
                self._keep(node, info, pods, answer)
        self._answers[node] = answer
        return answer

    def _ask_why(self) -> None:
        """The statuses of every node :meth:`judge` found failing without asking why, all at once:
        only the reasons and unresolvable clause of the filter each failed first, no filter
        asked again (those the columns cannot give stay unasked: :meth:`failure` asks them node
        by node). Each is as judged, on the node as it is now (a kept answer holds only while
        the node, the class's token and the nominated pods are the same)."""
        together = self._together
        unasked = [(name, a.rule) for name, a in self._answers.items() if a is not None and a.reasons is _NOT_ASKED]
        if together is None or not unasked:
            return
        bound = together.bound
        index_of: dict[str, int] = {}
        for i, f in enumerate(bound.filters):  # (a name twice: which one failed is not known)
            index_of[f.name] = -1 if f.name in index_of else i
        todo = [(name, self._snapshot.node_view(name), self.reserved.nodes[name]) for name, _ in unasked]
        first = [index_of.get(rule, -1) for _, rule in unasked]
        self._settle(todo, lambda b, cols, nodes, rows, held: held_reasons(b, cols, nodes, rows, held, first))

    def _settle(
        self,
        todo: list[tuple[str, Any, tuple[Pod, ...]]],
        ask: Callable[[BoundRules, NodeColumns, list[Any], Any, list[tuple[Pod, ...]]], list[HeldFailure]],
    ) -> bool:
        """Ask the nodes of ``todo`` (name, view, nominated pods) at once as columns, through
        ``ask`` (:func:`rulesched.engine.held_failures` or ``held_reasons``), and keep each
        answer given (a node the columns leave is asked node by node when wanted); False when
        the columns can say nothing."""
        together = self._together
        assert together is not None
        row = together.rows()
        rows = np.array([row[name] for name, _, _ in todo], dtype=np.intp)
        bound = together.bound
        try:
            failures = ask(bound, together.columns(), [i for _, i, _ in todo], rows, [p for _, _, p in todo])
        except Unsupported:
            return False
        for (name, info, pods), failure in zip(todo, failures, strict=True):
            if failure is HELD_LEFT:  # (checked node by node when asked)
                continue
            answer: Status | None = None
            if failure is not None:  # (reasons not asked: asked only if someone asks, all at once)
                why = _NOT_ASKED if failure[1] is HELD_NOT_ASKED else failure[1]
                answer = Status(bound.filters[failure[0]].name, why, failure[2])
            self._keep(name, info, pods, answer)
            self._answers[name] = answer
        return True

    def _kept(self, node: str, info: Any, pods: tuple[Pod, ...]) -> tuple[Status | None] | None:
        """The memo's answer for ``node`` (in a 1-tuple), if it still holds."""
        hit = self._memo.get(node) if self._memo is not None else None
        if hit is not None and hit[0] is info and hit[1] == info.generation and hit[2] is self._token:
            if hit[3] == pods:
                return (hit[4],)
        return None

    def _keep(self, node: str, info: Any, pods: tuple[Pod, ...], answer: Status | None) -> None:
        if self._memo is not None:
            self._memo[node] = (info, info.generation, self._token, pods, answer)

    def judge(self, names: Iterable[str], fitting: bool = False) -> None:
        """Check the reserved nodes among ``names`` not checked yet all at once, as columns
        (:func:`rulesched.engine.held_failures`), where the rules and the nominated pods allow:
        the same answers :meth:`failure` gives node by node, which it then reads. ``fitting``:
        the pod passes every filter on each of ``names`` without its nominated pods (the
        walk's feasible nodes), which spares asking the filters those pods cannot change; and
        only whether each fits is asked then (:meth:`passes`), a failing node's status when
        :meth:`failure` first asks for one (:meth:`_ask_why`)."""
        together = self._together
        if together is None:
            return
        todo: list[tuple[str, Any, tuple[Pod, ...]]] = []
        for name in names:
            pods = self.reserved.nodes.get(name)
            if name in self._answers or not pods:
                continue
            info = self._snapshot.node_view(name)
            if info is None:
                continue
            found = self._kept(name, info, pods)
            if found is not None:
                self._answers[name] = found[0]
                continue
            todo.append((name, info, pods))
        # (a walk keeping its feasible nodes needs only whether they fit: why, when asked)
        if todo and not self._settle(
            todo, lambda b, cols, nodes, rows, held: held_failures(b, cols, nodes, rows, held, fitting, not fitting)
        ):
            self._together = None

    def _judge(self, node: str, pods: tuple[Pod, ...]) -> Status | None:
        overlay, bound = self._overlay, self._bound
        if overlay is None or bound is None:
            overlay = self._overlay = ClusterOverlay(self._snapshot)
            indexes = ForkedIndexes(self._session.indexes, self._snapshot)
            bound = self._bound = self._session.bind_private(self._pod, overlay, indexes)
        for p in pods:
            overlay.add_pod(p)
        try:
            bound.refresh()  # cluster-wide precomputation follows the overlay's changes
            info = overlay.node_view(node)
            failure = None if info is None else bound.first_failure(info)
            return None if failure is None else status_of(failure, info)
        finally:
            for p in pods:
                overlay.remove_pod(p)
            overlay.reset_node(node)

    def release(self) -> None:
        """The cycle is over: let go of the overlay (and through it the snapshot)."""
        if self._bound is not None:
            self._bound.release()
        self._overlay = self._bound = None

    def passes(self, node: str) -> bool:
        return node not in self.reserved.nodes or self._verdict(node) is None

    def keep(self, nodes: Sequence[Any]) -> list[Any]:
        """Those of ``nodes`` (node infos) that pass."""
        return [n for n in nodes if self.passes(n.name)]
