"""Giving up a scheduling cycle under way: a token the cycle checks at points where it may stop.

Until it assumes its pod (or nominates it and evicts victims) a cycle only reads: a snapshot, a
rule set, its node tables. So it can stop anywhere before that and leave nothing behind: the pod
goes back to the queue and nothing stays assumed. A :class:`Cancellation` says when to stop:

* its ``stop`` event is set (the live scheduler shares its shutdown event: SIGTERM abandons the
  cycle under way rather than finishing it and binding a pod after the signal);
* or its ``deadline`` (a ``clock`` time, per cycle) has passed: a cycle deadline.

The cycle calls :meth:`Cancellation.check` between the steps of its node walk (one step is
``SchedulerSettings.walk_chunk`` nodes), before each node preemption tries, and before it
assumes, nominates or evicts: one flag test (and a clock read while a deadline is set) per step,
nothing per node. :meth:`check` raises :class:`CycleCancelled`, which the
:class:`rulesched.scheduler.scheduler.Scheduler` catches.
Next stage: :mod:`rulesched.scheduler.cycle` and :mod:`rulesched.scheduler.preemption` check it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class CycleCancelled(Exception):
    """The cycle under way was given up (``reason`` says why); it changed nothing."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Cancellation:
    """When cycles must stop: ``stop`` set (for good), or the current cycle's ``deadline`` past."""

    def __init__(self, stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stop = stop if stop is not None else threading.Event()
        self.clock = clock
        self.deadline: float | None = None  # a clock time; None: no deadline

    def cancel(self) -> None:
        """Stop every cycle from now on (thread-safe)."""
        self.stop.set()

    def limit(self, seconds: float | None) -> None:
        """Give the cycle about to start ``seconds`` (None: no limit)."""
        self.deadline = None if seconds is None else self.clock() + seconds

    @property
    def cancelled(self) -> bool:
        deadline = self.deadline
        return self.stop.is_set() or (deadline is not None and self.clock() >= deadline)

    def check(self) -> None:
        """Raise :class:`CycleCancelled` if the cycle under way must stop."""
        if self.stop.is_set():
            raise CycleCancelled("stopping")
        deadline = self.deadline
        if deadline is not None and self.clock() >= deadline:
            raise CycleCancelled("past the cycle's deadline")
