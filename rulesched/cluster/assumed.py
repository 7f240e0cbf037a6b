"""The scheduler's assumptions: pods placed on their chosen node before their binding finishes,
so the next cycle already sees their resources, as in kube-scheduler's cache.

An assumption is in flight until the binding call returns; when it succeeds the assumption waits
for the informer to report the pod bound, and one that never shows up expires
(``assumed_ttl`` seconds later). The store places and removes the pods; this keeps which are
assumed and until when.
Next stage: :mod:`rulesched.cluster.store` (``assume``, ``finish_binding``, ``forget``,
``expire_assumed``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

ASSUMED_TTL_SECONDS = 30.0  # kube-scheduler's durationToExpireAssumedPod of old


class AssumedPods:
    __slots__ = ("_ttl", "_deadlines")

    def __init__(self, ttl: float | None = ASSUMED_TTL_SECONDS) -> None:
        self._ttl = ttl
        # pod key -> when an assumption whose binding call succeeded expires (None: in flight)
        self._deadlines: dict[str, float | None] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._deadlines

    def __iter__(self) -> Iterator[str]:
        return iter(self._deadlines)

    def add(self, key: str) -> None:
        """A pod assumed; its binding is in flight."""
        self._deadlines[key] = None

    def discard(self, key: str) -> None:
        """No longer assumed (confirmed by the informer, removed, or forgotten)."""
        self._deadlines.pop(key, None)

    def bound(self, key: str, now: float | None) -> None:
        """The binding call succeeded: without ``now`` the assumption ends (the binding is
        final); with it, it expires ``ttl`` seconds after ``now`` unless confirmed first."""
        if now is None:
            del self._deadlines[key]
        else:
            ttl = self._ttl
            self._deadlines[key] = now + ttl if ttl else math.inf

    def expired(self, now: float) -> list[str]:
        """The assumptions whose binding finished long ago but which no informer confirmed."""
        return [k for k, deadline in self._deadlines.items() if deadline is not None and deadline <= now]
