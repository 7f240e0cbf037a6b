"""When a pod that failed may be tried again: backoff as kube-scheduler 1.37.2's queue computes it
(pkg/scheduler/backend/queue/backoff_queue.go, with SchedulerPopFromBackoffQ on, its default since
1.33).

A pod's backoff runs from its last failed attempt (``Timestamp``), not from whatever later moved
it out of the unschedulable pool: ``initial * 2**(count - 1)`` capped at ``maximum``, where
``count`` is its consecutive errors if the last attempt was an error (a failed binding, a cycle
given up) and else its unschedulable attempts; no attempt yet, or ``maximum`` 0, is no backoff.
The expiry is truncated to the backoff queue's one-second ordering window, and a pod is still
backing off while its expiry is not before the window ``now`` is in: upstream flushes the backoff
queue on whole-second ticks, so a pod whose expiry falls in window ``w`` goes active at ``w + 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ORDERING_WINDOW = 1.0  # backoffQOrderingWindowDuration (and the backoff queue's flush period)
_MAX_SHIFT = 1000  # (doubling this often exceeds any maximum; and a float holds 2**1000)


@dataclass(frozen=True)
class Attempts:
    """A queued pod's QueueingParams as the backoff reads them: when it entered the queue or last
    failed, and its unschedulable and consecutive error counts."""

    timestamp: float
    unschedulable: int = 0
    errors: int = 0

    def failed(self, now: float, error: bool) -> Attempts:
        """After a failed attempt (AddUnschedulablePodIfNotPresent): an error counts apart and
        an unschedulable result clears the errors; either way the backoff runs from ``now``."""
        if error:
            return Attempts(now, self.unschedulable, self.errors + 1)
        return Attempts(now, self.unschedulable + 1, 0)

    @property
    def last_was_error(self) -> bool:
        """Its last attempt failed by an error (no plugin rejected it): it backs off in the
        error backoff queue, which a scheduler with nothing active does not pop from early."""
        return self.errors > 0


def backoff_duration(count: int, initial: float, maximum: float) -> float:
    """calculateBackoffDuration for a single pod."""
    if count <= 0 or initial <= 0:
        return 0.0
    shift = count - 1
    # (upstream's ``initial > maximum >> shift`` on integer nanoseconds; compared exactly here)
    if shift >= _MAX_SHIFT or initial * 2**shift > maximum:
        return maximum
    return float(initial * 2**shift)


def align(t: float) -> float:
    """The start of the ordering window ``t`` is in (alignToWindow)."""
    return math.floor(t / ORDERING_WINDOW) * ORDERING_WINDOW


def expiry(attempts: Attempts, initial: float, maximum: float) -> float | None:
    """getBackoffTime: when the pod's backoff ends (window-aligned), or None when it has none."""
    if maximum == 0:
        return None
    count = attempts.errors if attempts.errors > 0 else attempts.unschedulable
    if count == 0:
        return None
    return align(attempts.timestamp + backoff_duration(count, initial, maximum))


def backing_off(ends: float | None, now: float) -> bool:
    """isEntityBackingoff: an expiry in the current window (or later) is still backing off."""
    return ends is not None and ends >= align(now)


def ready_at(ends: float) -> float:
    """The first moment a pod with this expiry is no longer backing off (the next flush tick)."""
    return ends + ORDERING_WINDOW
