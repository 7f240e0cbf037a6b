"""Copy on write between the store and its snapshots: which of the store's containers (lists,
maps, node infos) a snapshot still alive holds, so the store copies them before changing them.

Each snapshot is taken at an epoch; a node info or a container made at epoch e is held by the live
snapshots taken at e or later, and copied before the store changes it. Only weak references to
snapshots are kept: once every reader has let go of them (the scheduler does at the end of each
cycle), the store changes its containers in place again.
Next stage: the store's parts (:mod:`rulesched.cluster.nodes`, :mod:`rulesched.cluster.placements`,
:mod:`rulesched.cluster.volumes`) ask :meth:`CopyOnWrite.must_copy` before each change.
"""

from __future__ import annotations

import weakref
from typing import Generic, TypeVar

SnapshotT = TypeVar("SnapshotT")


class CopyOnWrite(Generic[SnapshotT]):
    __slots__ = ("epoch", "_made", "_live", "_last")

    def __init__(self) -> None:
        self.epoch = 0  # the epoch the next snapshot is taken at; what the store makes now is of it
        self._made: dict[str, int] = {}  # container name -> epoch made (absent: 0)
        self._live: list[tuple[weakref.ref[SnapshotT], int]] = []  # (snapshot, epoch taken at)
        self._last: weakref.ref[SnapshotT] | None = None

    def latest(self) -> SnapshotT | None:
        """The snapshot taken since the last change, if anyone still holds it."""
        return self._last() if self._last is not None else None

    def taken(self, snapshot: SnapshotT) -> None:
        """A snapshot of the containers as they are now: they are held from here on."""
        ref = weakref.ref(snapshot)
        if self._live:
            self._live = [(r, taken) for r, taken in self._live if r() is not None]
        self._live.append((ref, self.epoch))
        self._last = ref
        self.epoch += 1

    def changed(self) -> None:
        """The store changed: the latest snapshot no longer shows it."""
        self._last = None

    def held(self) -> int:
        """The newest epoch a snapshot still alive was taken at; -1 when none is alive."""
        if not self._live:
            return -1
        newest = -1
        for ref, taken in self._live:
            if taken > newest and ref() is not None:
                newest = taken
        if newest < 0 and self._live:
            self._live = []
        return newest

    def must_copy(self, name: str) -> bool:
        """Whether container ``name`` must be copied before changing it (a live snapshot holds
        it); the caller makes the copy, which is the store's own from then on."""
        if self._made.get(name, 0) <= self.held():
            self._made[name] = self.epoch
            return True
        return False

    def made_now(self, name: str) -> None:
        """Container ``name`` was replaced by a new one, which no snapshot holds yet."""
        self._made[name] = self.epoch
