"""A class's steady score vectors per node, kept as one array; shared by the classes whose scores
are all shared rules agreeing on the pod fields they read.

A node table (:mod:`rulesched.engine.table`) keeps its class's score vectors in a
:class:`ScoreRows`: one row per node, in the narrowest integer type that holds every score so
far, and whether each row is known. Classes of pods often differ only in fields no score reads
(FGD's rules read a pod's cpu and its claims, not its memory, which the filters read: on the openb
trace 151 classes, 91 score keys). When every score of a binding is shareable
(:mod:`rulesched.engine.sharing`: a :class:`rulesched.engine.sharing.Shared` key each), the
vectors are a function of those keys and the node, so the tables of every class with the same
keys read and fill one :class:`ScoreRows`, which :class:`SharedScores` keeps per key.

A shared one is brought up to date by itself (:meth:`ScoreRows.catch_up`): rows whose node
gained or lost pods since its own journal position go stale (its keys' rules may read node values
pods change), all of them after a node change; a table's own position says nothing of it, as
another class may have filled rows since. Shared score rules read no versioned cluster-wide
built-in (``by_fields`` built-ins are node-local and never move), so a binding's token, which
resets a table's own rows, does not touch them.
Next stage: :meth:`rulesched.engine.table.NodeTable.vectors` reads and fills them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import cachetools
import numpy as np
import numpy.typing as npt

from rulesched.cluster.snapshot import Snapshot
from rulesched.engine.columns import Rows
from rulesched.engine.shared import RowLog

ALIKE_LIMIT = 50_000  # vectors kept by their nodes' keys; past it, they start afresh

# The integer types vectors are kept in, narrowest first, with their ranges.
_WIDER: tuple[tuple[type[np.signedinteger[Any]], int, int], ...] = tuple(
    (t, int(np.iinfo(t).min), int(np.iinfo(t).max)) for t in (np.int16, np.int32, np.int64)
)


@dataclass(frozen=True)
class Alike:
    """Stale rows as :meth:`ScoreRows.from_alike` leaves them: those to compute, their nodes'
    keys (None: no key), and (row, a row to compute) for the rows alike to one of them."""

    rows: Rows
    keys: list[Hashable | None]
    copies: list[tuple[int, int]]


class ScoreRows:
    """Score vectors (each score, then the fixed sum) per row, and whether each row is known."""

    __slots__ = ("vectors", "scored", "low", "high", "history", "generation", "position", "alike")

    def __init__(self, rows: int, width: int, snapshot: Snapshot) -> None:
        # Kept in the narrowest integer type that holds every one computed so far (int16 first:
        # scores are mostly 0-100): at 100 000 nodes a table is then 1.9 MB, not 7.5, and the
        # tables of a few hundred interleaved classes fit (see cycle.tables_for).
        self.vectors: npt.NDArray[np.signedinteger[Any]] = np.zeros((rows, width), dtype=np.int16)
        self.scored = np.zeros(rows, dtype=bool)
        self.low, self.high = _WIDER[0][1:]  # what the kept type holds
        self.history, self.generation, self.position = snapshot.history, snapshot.node_generation, snapshot.pod_position
        # Vectors by the content of a node they were computed on (rulesched.engine.alike): a
        # stale row whose node is alike to one computed before reads it here.
        self.alike: dict[Hashable, tuple[int, ...]] = {}

    def holds(self, low: int, high: int) -> bool:
        return self.low <= low and high <= self.high

    def keep(self, rows: Rows, matrix: npt.NDArray[np.int64], low: int, high: int) -> None:
        """Store score vectors (``low`` .. ``high``: their smallest and largest value), widening
        the kept type first if one does not fit it."""
        if not self.holds(low, high):
            # (int64 always fits: the matrix is int64)
            dtype, self.low, self.high = next(w for w in _WIDER if w[1] <= low and high <= w[2])
            self.vectors = self.vectors.astype(dtype)
        self.vectors[rows] = matrix

    def from_alike(self, stale: Rows, key_of: Callable[[Any], Hashable | None], nodes: Sequence[Any]) -> Alike:
        """The stale rows whose node is alike to one scored before (``key_of`` its node: equal
        keys, equal vectors; rulesched.engine.alike) take its vector; of the rest, one row per
        key is to be computed (:attr:`Alike.rows`), the others copy it (:meth:`keep_alike`)."""
        alike = self.alike
        found_rows: list[int] = []
        found: list[tuple[int, ...]] = []
        todo: list[int] = []
        keys: list[Hashable | None] = []
        first: dict[Hashable, int] = {}  # a key to compute -> its row
        copies: list[tuple[int, int]] = []  # (row, the row computed for its key)
        for i in stale.tolist():
            key = key_of(nodes[i])
            try:
                vector = alike.get(key) if key is not None else None
            except TypeError:  # (a value no key can hold)
                key = vector = None
            if vector is not None:
                found_rows.append(i)
                found.append(vector)
            elif key is not None and key in first:  # (a node alike in this batch: computed once)
                copies.append((i, first[key]))
            else:
                todo.append(i)
                keys.append(key)
                if key is not None:
                    first[key] = i
        if found:
            matrix = np.array(found, dtype=np.int64)
            self.keep(np.array(found_rows, dtype=np.intp), matrix, int(matrix.min()), int(matrix.max()))
        rows = stale if len(todo) == len(stale) else np.array(todo, dtype=np.intp)
        return Alike(rows, keys, copies)

    def keep_alike(self, computed: Alike) -> None:
        """Keep the vectors of the rows computed by their nodes' keys, and copy them to the rows
        alike to them."""
        alike, vectors = self.alike, self.vectors
        if len(alike) > ALIKE_LIMIT:
            alike.clear()
        for i, key in zip(computed.rows.tolist(), computed.keys, strict=True):
            if key is not None:
                alike[key] = tuple(vectors[i].tolist())
        if computed.copies:
            to, source = zip(*computed.copies, strict=True)
            vectors[list(to)] = vectors[list(source)]

    def current(self, snapshot: Snapshot) -> bool:
        """Whether these rows are of ``snapshot``'s node list, at or before its position."""
        return (
            snapshot.history is self.history
            and snapshot.node_generation == self.generation
            and snapshot.pod_position >= self.position
        )

    def catch_up(self, snapshot: Snapshot, log: RowLog, row_of: Any) -> None:
        """Rows whose node gained or lost pods since this one's position go stale (a shared
        one's: the caller checked :meth:`current`)."""
        if snapshot.pod_position != self.position:
            stale = log.changed(snapshot, row_of, self.position)
            if stale is None:
                self.scored[:] = False
            else:
                self.scored[stale] = False
            self.position = snapshot.pod_position


class SharedScores:
    """Score rows per key (the tuple of a binding's score share keys) over one node list; least
    recently used keys go first."""

    def __init__(self, log: RowLog, limit: int) -> None:
        self._log = log
        self._kept: cachetools.LRUCache[Hashable, ScoreRows] = cachetools.LRUCache(limit)

    def rows(self, key: Hashable, width: int, snapshot: Snapshot, row_of: Any) -> ScoreRows:
        """The key's rows, brought up to ``snapshot`` (fresh ones after a node change)."""
        found = self._kept.get(key)
        if found is None or not found.current(snapshot) or found.vectors.shape[1] != width:
            found = self._kept[key] = ScoreRows(len(snapshot.nodes), width, snapshot)
        else:
            found.catch_up(snapshot, self._log, row_of)
        return found
