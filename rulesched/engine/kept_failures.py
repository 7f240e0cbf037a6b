"""What a class's node table keeps of why its nodes fail the pod, row by row, until a row's node
changes: its first failing filter and that filter's reasons (issue 38's speed work).

A replay that fills the cluster fails many pods of a class in a row, one node changed between
them; each failure needs every node's first failing filter and its reasons (the FitError
histogram, the diagnosis). Kept only where no filter is dynamic (every filter's outcome is then
kept per row too, under the same invalidation: the row's node changed, or the binding's token
moved). Reasons are kept as codes into the table's distinct reason tuples, so a group's
:class:`~rulesched.engine.failures.GroupReasons` is a few array operations, not a dict look-up
per row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rulesched.engine.batch import SharedColumns
from rulesched.engine.columns import NodeColumns, Rows
from rulesched.engine.failures import FailedRows, GroupReasons, first_failures, group_reasons
from rulesched.lang import BoundRules

# distinct reason tuples a table keeps codes for; past it, it forgets them all and starts afresh
# (reasons naming amounts could make them many)
MOST_REASONS = 4096


class KeptFailures:
    """Per row: the first failing filter (-1: none, -2: not known) and its reasons' code (-1:
    not known)."""

    __slots__ = ("first", "codes", "_values", "_index")

    def __init__(self, rows: int) -> None:
        self.first = np.full(rows, -2, dtype=np.int16)
        self.codes = np.full(rows, -1, dtype=np.int32)
        self._values: list[tuple[str, ...]] = []
        self._index: dict[tuple[str, ...], int] = {}

    def _code(self, reasons: tuple[str, ...]) -> int:
        found = self._index.get(reasons)
        if found is None:
            found = self._index[reasons] = len(self._values)
            self._values.append(reasons)
        return found

    def _room(self, new: int) -> bool:
        """Make room for ``new`` more tuples (forgetting every code when there is too little);
        whether the codes kept still hold."""
        if len(self._values) + new <= MOST_REASONS:
            return True
        self.codes[:] = -1
        self._values.clear()
        self._index.clear()
        return False

    def keep(self, row: int, index: int, reasons: tuple[str, ...] | None) -> None:
        """Row ``row`` fails filter ``index`` first (-1: none), with ``reasons`` (None: not asked)."""
        self.first[row] = index
        if reasons is not None:
            self._room(1)
            self.codes[row] = self._code(reasons)

    def forget(self, stale: Rows | list[int] | None) -> None:
        """The rows ``stale`` (None: every row) changed: nothing kept of them holds."""
        if stale is None:
            self.first[:] = -2
            self.codes[:] = -1
        else:
            self.first[stale] = -2
            self.codes[stale] = -1

    def failures(
        self, bound: BoundRules, cols: NodeColumns, rows: Rows, shared: SharedColumns | None
    ) -> list[FailedRows]:
        """Every row's first failing filter, by filter (first_failures' answer), asking only the
        rows not known."""
        first = self.first
        todo = rows[first == -2]
        if len(todo):
            first[todo] = -1
            for group in first_failures(bound, cols, todo, shared):
                first[group.rows] = group.index
        failing = first >= 0
        if not failing.any():
            return []
        return [
            FailedRows(i, bound.filters[i], np.flatnonzero(first == i)) for i in sorted(set(first[failing].tolist()))
        ]

    def group_reasons(self, bound: BoundRules, cols: NodeColumns, group: FailedRows) -> GroupReasons:
        """group_reasons of a group :meth:`failures` gave, asking only the rows not known."""
        codes = self.codes[group.rows]  # (a copy: fancy indexing)
        todo = codes < 0
        missing = int(np.count_nonzero(todo))
        if missing:
            if not self._room(missing):  # (every row's reasons asked again)
                codes[:] = -1
                todo[:] = True
            asked = FailedRows(group.index, group.filter, group.rows[todo])
            found = group_reasons(bound, cols, asked)
            mine = np.array([self._code(why) for why in found.reasons], dtype=np.int32)
            codes[todo] = mine[found.codes]
            self.codes[asked.rows] = codes[todo]
        return first_seen(codes, self._values)


def first_seen(codes: npt.NDArray[np.int32], values: list[tuple[str, ...]]) -> GroupReasons:
    """Rows' reasons given as codes into ``values``, as GroupReasons has them: codes into their
    distinct tuples, in the order their first row has them."""
    # (np.unique with its index and inverse sorted the group's codes for every failing pod. On
    # the openb replay half the groups are most nodes failing for one reason, the other half a
    # few rows of two or three: the one reason is told by the codes' bounds, in C, and a few
    # rows' distinct codes in their order by dict.fromkeys.)
    if len(codes) > _FEW_ROWS:
        low = int(codes.min())
        if low == int(codes.max()):
            return GroupReasons(np.zeros(len(codes), dtype=np.intp), [values[low]])
    distinct = list(dict.fromkeys(codes.tolist()))
    if not distinct:
        return GroupReasons(np.zeros(0, dtype=np.intp), [])
    rank = np.empty(max(distinct) + 1, dtype=np.intp)
    rank[distinct] = np.arange(len(distinct), dtype=np.intp)
    return GroupReasons(rank[codes], [values[c] for c in distinct])


_FEW_ROWS = 64  # a group of more rows is first asked whether it has one reason alone
