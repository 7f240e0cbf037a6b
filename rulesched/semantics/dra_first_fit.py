"""What the structured allocator's first-fit path took, shared between nodes alike.

The first-fit path (:meth:`rulesched.semantics.dra_search.AllocationRun._first_fit`: one claim of
one ExactCount request, no constraint, no admin access, no counters on the node) tries the
node's candidates in the ranking's order and takes the first ``count`` that fit on their own.
Whether a candidate fits reads, of the candidate, only: whether another claim holds it whole,
the capacity other claims' shares consume of it, its own capacities and taints, and whether the
request may select it (the kept selectable mask, which holds the selectors, the node's labels
for per-device node selection and the binding conditions); of the request: its count, the
capacity it asks, its tolerations; and the capacity, taint and fractional-range features.
Given those, and the order the candidates are tried in, the candidates taken are the same on
every node: by their positions among the node's candidates. Device names, pools and the node's
name enter only the result, which each node builds from its own candidates.

On the openb replay FGD's pods ask the allocator 62,651 times, of only ~20,100 distinct such
inputs (nodes of one machine type holding alike shares): the rest are answered here, from
:class:`FirstFits`, the store's table of them. What is kept is the positions taken (or that
none would do); each run still draws its own share IDs and builds its own allocation, so the
answers are the same as without the table (tests/test_dra_first_fits.py holds the path with a
table to the search, across nodes alike, changing states and rankings).

A node's state is numbered once per state: the store gives each pool's part of what claims hold
as a frozen object, made anew when it changes, so those objects' identity says the state has
not changed (a state not the store's, a released one in preemption's trial, is not keyed).
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

from rulesched.semantics.dra_devices import PooledMap, PooledSet

if TYPE_CHECKING:
    from rulesched.semantics.dra_requests import RequestData
    from rulesched.semantics.dra_search import AllocationRun

LIMIT = 200_000  # answers (and node states) kept; past it, the table starts afresh
_NOTHING: Mapping[str, int] = {}


class FirstFits:
    """The store's table: node states numbered by content, and per (request, selectable mask,
    node state, order tried) the positions the first-fit path took (None: it failed)."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.states: dict[Hashable, int] = {}
        self.answers: dict[tuple[Any, ...], tuple[int, ...] | None] = {}
        # numbers given after a restart, or by another table (the store's memo, where the table
        # is kept, may start afresh), are not these: a node's kept number holds while it was
        # given by this table (its token) in this epoch
        self.epoch = 0
        self.token = object()

    def number(self, state: Hashable) -> int:
        """The state's number (a new one for a state not seen in this epoch)."""
        if len(self.states) >= self.limit:
            self._restart()
        return self.states.setdefault(state, len(self.states))

    def remember(self, key: tuple[Any, ...], taken: tuple[int, ...] | None) -> None:
        """Keep an answer, unless the table is full: it then starts afresh, without it (its key
        holds a number of the epoch before)."""
        if len(self.answers) >= self.limit:
            self._restart()
            return
        self.answers[key] = taken

    def _restart(self) -> None:
        self.states.clear()
        self.answers.clear()
        self.epoch += 1


def key(
    run: AllocationRun, table: FirstFits, data: RequestData, mask: tuple[bool, ...], order: Any
) -> tuple[Any, ...] | None:
    """The first-fit path's inputs on ``run``'s node for ``data`` (see the module), tried in
    ``order`` (the ranked candidates, or the node's own order); None where the node's state is
    not the store's."""
    state = node_state(run, table)
    if state is None:
        return None
    features = run.features
    asked = data.spec.capacity
    return (
        data.count,
        tuple(asked.items()) if asked is not None else None,
        data.spec.tolerations,
        features.consumable_capacity,
        features.device_taints,
        features.fractional_capacity_range,
        mask,
        state,
        None if order is run.node_candidates else tuple(c.order for c in order),
    )


def node_state(run: AllocationRun, table: FirstFits) -> int | None:
    """The number of the node's state as the first-fit path reads it: each candidate's
    capacities and taints, whether another claim holds it whole and what shares consume of it.
    Kept with the node's pools while what claims hold in its pools are the same objects."""
    pools = run.a.pools.get(run.node.name)
    held, consumed = run.a.allocated.devices, run.a.allocated.capacity
    if pools is None or type(held) is not PooledSet or type(consumed) is not PooledMap:
        return None
    parts = tuple(part for p in pools.pool_ids for part in (held.part(p), consumed.part(p)))
    kept = pools.state
    if kept and kept[0] is table.token and kept[1] == table.epoch and all(map(operator.is_, kept[2], parts)):
        number: int = kept[3]
        return number
    state = (
        pools.content,
        tuple((c.id in held, tuple(consumed.get(c.id, _NOTHING).items())) for c in pools.candidates),
    )
    number = table.number(state)
    kept[:] = [table.token, table.epoch, parts, number]
    return number
