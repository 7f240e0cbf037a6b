"""The pod journal: every pod the store places on a node or takes off one, in order, as
``(+1 | -1, pod, Node)``.

A change's position is its number since the store began; the journal keeps the last few thousand
(at least :data:`JOURNAL_KEEP`) for the engine's per-domain counts (:mod:`rulesched.lang.indexes`)
to replay, so spreading and inter-pod affinity need not rescan the cluster for every pod. An index
further behind is rebuilt. Snapshots slice the same list up to their own position.
Next stage: :mod:`rulesched.cluster.snapshot` (``pod_changes``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rulesched.cluster.snapshot import Change
from rulesched.model import Node, Pod

JOURNAL_KEEP = 4096  # pod changes kept for replay; an index further behind is rebuilt


class PodJournal:
    __slots__ = ("entries", "start")

    def __init__(self) -> None:
        self.entries: list[Change] = []  # entries[0] is change number ``start``
        self.start = 0

    @property
    def position(self) -> int:
        """How many pod changes there have been: the position of the next one."""
        return self.start + len(self.entries)

    def log(self, sign: int, pod: Pod, node: Node) -> None:
        entries = self.entries
        entries.append((sign, pod, node))
        if len(entries) > 2 * JOURNAL_KEEP:
            # A new list rather than a deletion: snapshots slice the old one.
            self.entries = entries[JOURNAL_KEEP:]
            self.start += JOURNAL_KEEP

    def since(self, position: int) -> Sequence[Change] | None:
        """The changes from ``position`` on; None if they are no longer kept."""
        if position < self.start:
            return None
        return self.entries[position - self.start :]
