"""Preemption's potential victims (rulesched.scheduler.preemption): the pods of a node every
applicable ``preempt`` rule allows to be evicted, most important first (upstream's
MoreImportantPod), kept in the node's memo while the node is unchanged.
Next stage: :mod:`rulesched.scheduler.preemption`'s dry runs over them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rulesched.engine import NodeColumns
from rulesched.lang import NUMBER, BoundRules, ListOf, NodeMemos
from rulesched.model import Pod

PRIORITY_SETS = ListOf(NUMBER)  # (the column's type: object, a frozenset per node)


def started(pod: Pod) -> float:
    """GetPodStartTime: a pod without status.startTime (assumed, or bound but not started yet)
    counts as starting now, i.e. after every pod that has one."""
    return pod.start_time or math.inf


def importance(pod: Pod) -> tuple[int, float]:
    """Sort key, most important first (MoreImportantPod: higher priority, then started earlier)."""
    return (-pod.priority, started(pod))


def pod_priorities(node: Any) -> frozenset[int]:
    """The priorities of a node's pods (a node column: rulesched.engine.columns), one object per
    distinct set (a set of the column's values, per failing pod, then compares by identity)."""
    return _one_of(frozenset(p.priority for p in node.pods))


@functools.lru_cache(maxsize=256)
def _one_of(priorities: frozenset[int]) -> frozenset[int]:
    return priorities  # (the first set equal to it that was asked for)


_PRIORITIES = ("preemption", "priorities")  # a node memo key: its pods' priorities


class Potential:
    """The pods of a node every applicable preempt rule allows to be evicted. Rules that read
    the victim only through its priority (the default's ``victim.priority < pod.priority``) are
    asked once per priority, and a node whose pods' priorities (kept in the node's memo until it
    changes) are all refused is passed over without looking at its pods."""

    def __init__(
        self,
        bound: BoundRules,
        memos: NodeMemos,
        order: Callable[[Pod], tuple[Any, ...]] | None = None,
        spared: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self.rules = bound.preempts
        self.order = order
        # node name -> keys of pods there no preemption may choose (their eviction refused:
        # rulesched.scheduler.removals); rare, so left out of what the memos keep
        self.spared = spared or {}
        self.memos = memos  # (the rule set's node memos: the node's priorities and victims kept there)
        self.by_priority = all(rule.by_priority for rule in self.rules)
        self._allowed: dict[int, bool] = {}
        self._wanted: dict[frozenset[int], frozenset[int]] = {}  # a node's priorities -> those allowed

    def wanted_rows(self, nodes: Sequence[Any], columns: NodeColumns, rows: Any) -> Any:
        """Whether each row's node holds a pod of a priority the rules allow to evict."""
        values = columns.derived(pod_priorities, PRIORITY_SETS)[rows].tolist()
        verdict: dict[frozenset[int], bool] = {}
        for row, priorities in zip(rows.tolist(), values, strict=True):
            if priorities not in verdict:
                verdict[priorities] = bool(self._wanted_of(nodes[row], priorities))
        return np.array([verdict[p] for p in values], dtype=bool)

    def _wanted_of(self, node: Any, priorities: frozenset[int]) -> frozenset[int]:
        """Those of ``priorities`` (of the node's pods) the rules allow to evict."""
        wanted = self._wanted.get(priorities)
        if wanted is None:
            allowed, rules = self._allowed, self.rules
            for priority in priorities:
                if priority not in allowed:
                    example = next(p for p in node.pods if p.priority == priority)
                    allowed[priority] = all(rule.allows(node, example) for rule in rules)
            wanted = self._wanted[priorities] = frozenset(q for q in priorities if allowed[q])
        return wanted

    def victims(self, node: Any) -> list[Pod]:
        """The node's potential victims, most important first (a list not to be changed)."""
        spared = self.spared.get(node.name) if self.spared else None
        found = self._victims(node)
        return [p for p in found if p.key not in spared] if spared else found

    def spares(self, node: Any) -> bool:
        """Whether some pod of the node is spared (then a node without victims says so)."""
        return bool(self.spared) and node.name in self.spared

    def _victims(self, node: Any) -> list[Pod]:
        rules = self.rules
        if self.order is not None:  # (groups' units: not kept in the node's memo)
            return sorted((p for p in node.pods if all(rule.allows(node, p) for rule in rules)), key=self.order)
        if not self.by_priority:
            return sorted((p for p in node.pods if all(rule.allows(node, p) for rule in rules)), key=importance)
        memo = self.memos.values(node) or self.memos.start(node)
        priorities = memo.get(_PRIORITIES)
        if priorities is None:
            priorities = memo[_PRIORITIES] = frozenset(p.priority for p in node.pods)
        wanted = self._wanted.get(priorities)  # (known after a node or two: no call)
        if wanted is None:
            wanted = self._wanted_of(node, priorities)
        if not wanted:
            return []
        key = (_PRIORITIES, wanted)  # (the same pods for every pod allowed these)
        found: list[Pod] | None = memo.get(key)
        if found is None:
            found = memo[key] = sorted((p for p in node.pods if p.priority in wanted), key=importance)
        return found
