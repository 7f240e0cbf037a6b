"""What every class's node table shares: which rows the pod journal changed, and rule columns.

A node table (:mod:`rulesched.scheduler.table`) is one class's answers; with 200 Deployments
interleaved, 200 tables each learn of every bind and each recompute the row it changed when a
walk next reaches it. Much of that work is the same for many classes:

- :class:`RowLog` turns the pod journal into the row of the node each entry changed, once for
  every table: a table catching up on 200 binds takes one array slice instead of a pass over the
  changes.
- :class:`RuleColumns` keeps, for each shareable rule and the pod values it reads (a
  :class:`rulesched.lang.evaluation.sharing.Shared` key), its answer on each node computed so far.
  Classes agreeing on those values read them instead of evaluating the rule again: a
  TaintToleration filter is computed once per set of tolerations, a LeastAllocated score once per
  request size. Rules that read only node values pods do not change (labels, taints) keep their
  answers until a node changes; the others lose a row's answer when a pod comes to or leaves
  that node, as a table's rows do.

Both are for one node list (a store's history and node generation) and start afresh after a
node change. Next stage: :meth:`rulesched.lang.BoundRules.filter_mask` and ``score_matrix``
read and fill the columns.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import cachetools
import numpy as np
import numpy.typing as npt

from rulesched.cluster.snapshot import Snapshot
from rulesched.lang.evaluation.columns import Rows
from rulesched.lang.evaluation.sharing import Shared

LOG_LIMIT = 1 << 20  # journal entries the row log keeps (8 MB); older positions mean "all stale"
COLUMN_ROWS = 6_000_000  # rule-column rows kept over all keys (9 bytes each: ~54 MB at most)
# ... but never fewer keys than this: mixed uses ~200 (request sizes x three resource rules,
# selectors, preferences), and an evicted key is refilled whole on its next uses, which at
# 100 000 nodes is most of a cycle (64 keys there cost 5x per pod). At most ~9 MB per 1000 nodes.
MIN_KEYS = 256


class RowLog:
    """The row of the node each pod journal entry changed, for positions from ``start`` on."""

    def __init__(self) -> None:
        self._key: tuple[object, int] | None = None
        self._rows: npt.NDArray[np.intp] = np.empty(1024, dtype=np.intp)
        self._start = 0  # the journal position of _rows[0]
        self._end = 0  # the position after the last entry logged

    def changed(self, snapshot: Snapshot, row_of: Mapping[str, int], since: int) -> Rows | None:
        """Rows (of ``snapshot.nodes``) whose node gained or lost a pod between journal position
        ``since`` and the snapshot's, a row once per change; None when that is not known (a
        node change, or ``since`` older than the log)."""
        position = snapshot.pod_position
        key = (snapshot.history, snapshot.node_generation)
        if key != self._key or position < self._start:
            self._key, self._start, self._end = key, position, position
        if position > self._end:
            changes = snapshot.pod_changes(self._end)
            if changes is None:
                self._start = self._end = position
            else:
                self._append([row_of[node.name] for _, _, node in changes])
        if since < self._start or since > position:
            return None
        return self._rows[since - self._start : position - self._start]

    def _append(self, rows: list[int]) -> None:
        used = self._end - self._start
        if used + len(rows) > LOG_LIMIT:  # forget the older half
            drop = max(used // 2, used + len(rows) - LOG_LIMIT)
            self._rows[: used - drop] = self._rows[drop:used]
            self._start += drop
            used -= drop
        if used + len(rows) > len(self._rows):
            grown = np.empty(max(2 * len(self._rows), used + len(rows)), dtype=np.intp)
            grown[:used] = self._rows[:used]
            self._rows = grown
        self._rows[used : used + len(rows)] = rows
        self._end += len(rows)


class _Column:
    __slots__ = ("values", "known", "position")

    def __init__(self, values: npt.NDArray[Any], position: int) -> None:
        self.values = values
        self.known = np.zeros(len(values), dtype=bool)
        self.position = position  # the journal position the known answers are current at


class RuleColumns:
    """Shared rules' answers per key over one node list. :meth:`use` gives the lookups for one
    snapshot (satisfying :class:`rulesched.lang.evaluation.bound.SharedColumns`); they are not
    kept here, so no snapshot outlives its walk (a live snapshot makes the store copy nodes
    before changing them). Least recently used keys go first."""

    def __init__(self, log: RowLog) -> None:
        self._log = log
        self._columns: cachetools.LRUCache[Hashable, _Column] = cachetools.LRUCache(64)
        self._key: tuple[object, int] | None = None

    def use(self, snapshot: Snapshot, row_of: Mapping[str, int], columns_from: int) -> Lookups:
        key = (snapshot.history, snapshot.node_generation)
        if key != self._key:
            self._key = key
            limit = max(MIN_KEYS, COLUMN_ROWS // max(1, len(snapshot.nodes)))
            self._columns = cachetools.LRUCache(limit)
        return Lookups(self._columns, self._log, snapshot, row_of, columns_from)

    def __len__(self) -> int:
        return len(self._columns)


class Lookups:
    """The shared columns as of one snapshot, for one evaluation."""

    __slots__ = ("_columns", "_log", "_snapshot", "_row_of", "columns_from")

    def __init__(
        self,
        columns: cachetools.LRUCache[Hashable, _Column],
        log: RowLog,
        snapshot: Snapshot,
        row_of: Mapping[str, int],
        columns_from: int,
    ) -> None:
        self._columns, self._log, self._snapshot, self._row_of = columns, log, snapshot, row_of
        self.columns_from = columns_from

    def column(self, shared: Shared, is_filter: bool) -> tuple[npt.NDArray[Any], npt.NDArray[np.bool_]]:
        snapshot = self._snapshot
        position = snapshot.pod_position
        column = self._columns.get(shared.key)
        if column is None or position < column.position:
            n = len(snapshot.nodes)
            column = _Column(np.zeros(n, dtype=bool if is_filter else np.int64), position)
            self._columns[shared.key] = column
        elif shared.pod_bound and position != column.position:
            stale = self._log.changed(snapshot, self._row_of, column.position)
            if stale is None:
                column.known[:] = False
            else:
                column.known[stale] = False
            column.position = position
        return column.values, column.known
