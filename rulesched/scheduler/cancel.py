"""Giving up a scheduling cycle under way: a token the cycle checks at points where it may stop.

Until it assumes its pod (or nominates it and evicts victims) a cycle only reads: a snapshot, a
rule set, its node tables. So it can stop anywhere before that and leave nothing behind: the pod
goes back to the queue and nothing stays assumed. A :class:`Cancellation` says when to stop, and
:class:`CycleCancelled` why (its ``kind``):

* ``stopping``: its ``stop`` event is set (the live scheduler shares its shutdown event: SIGTERM
  abandons the cycle under way rather than finishing it and binding a pod after the signal);
* ``deadline``: the cycle's ``deadline`` (a ``clock`` time) has passed (``rulesched run``'s
  ``--cycle-deadline``): the pod is retried with backoff and told why, naming the rule that was
  being evaluated;
* ``superseded``: the rule set the cycle reads is no longer the active one (a reload swapped
  another in: the handle tells the :class:`Cancellation`, which :meth:`Cancellation.begin`
  subscribed to it), so its decision would be the old rules'; the pod is retried at once, with
  the new ones. A reload thus never waits for a cycle to end.

The cycle calls :meth:`Cancellation.check` between the steps of its node walk (one step is
``EngineSettings.walk_chunk`` nodes), before each node preemption tries, and before it
assumes, nominates or evicts; and, through the session's
:class:`rulesched.lang.evaluation.watch.RuleWatch` it arms with it, before each rule evaluated
over a batch of nodes and every few nodes evaluated one by one. Each check is two flag tests and
a clock read while a deadline is set. :meth:`check` raises
:class:`CycleCancelled`, which the :class:`rulesched.scheduler.scheduler.Scheduler` catches.
Next stage: :mod:`rulesched.scheduler.cycle` and :mod:`rulesched.scheduler.preemption` check it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

from rulesched.lang import RuleSet, RulesHandle

STOPPING, DEADLINE, SUPERSEDED = "stopping", "deadline", "superseded"


class CycleCancelled(Exception):
    """The cycle under way was given up (``reason`` says why, ``kind`` is one of STOPPING,
    DEADLINE, SUPERSEDED); it changed nothing. ``rule``: the rule being evaluated then, or the
    last one evaluated ("" if none was), filled in by the scheduler."""

    def __init__(self, reason: str, kind: str = STOPPING) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.rule = ""


class Cancellation:
    """When cycles must stop: ``stop`` set (for good), the current cycle's ``deadline`` past, or
    the rules it follows replaced."""

    def __init__(self, stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.stop = stop if stop is not None else threading.Event()
        self.clock = clock
        self.deadline: float | None = None  # a clock time; None: no deadline
        self.seconds: float | None = None  # the deadline's length, for messages
        self._handle: RulesHandle | None = None  # the handle the cycle under way reads
        self._reading: RuleSet | None = None  # its set when the cycle began
        self._superseded = False  # set by the handle's notification (on the reloading thread)
        self._followed: weakref.WeakSet[RulesHandle] = weakref.WeakSet()
        self._last: RulesHandle | None = None  # the handle the last cycle followed (subscribed)

    def cancel(self) -> None:
        """Stop every cycle from now on (thread-safe)."""
        self.stop.set()

    def limit(self, seconds: float | None, since: float | None = None) -> None:
        """Give the cycle about to start ``seconds`` (None: no limit) from now, or from ``since``
        (a ``clock`` time)."""
        self.seconds = seconds
        self.deadline = None if seconds is None else (self.clock() if since is None else since) + seconds

    def begin(self, handle: RulesHandle, seconds: float | None = None) -> None:
        """A cycle begins: give it up once ``handle`` swaps in another set than the one it holds
        now, the set the cycle reads (the handle tells: :meth:`rules_changed`); and, with
        ``seconds``, :meth:`limit` it."""
        if handle is not self._last and handle not in self._followed:  # (the last one: no set lookup)
            self._followed.add(handle)
            handle.subscribe(self.rules_changed)
        self._superseded = False
        self._handle = self._last = handle
        self._reading = handle.rules
        if seconds is not None:
            self.limit(seconds)

    def end(self, limited: bool = False) -> None:
        """The cycle is over: follow no set; ``limited``: its deadline goes too."""
        self._handle = self._reading = None
        self._superseded = False
        if limited:
            self.deadline = self.seconds = None

    def rules_changed(self, rules: RuleSet) -> None:
        """A handle this token follows swapped its set (called on the swapping thread): the
        cycle under way is superseded if its own handle no longer holds the set it read."""
        handle, reading = self._handle, self._reading
        if handle is not None and handle.rules is not reading:
            self._superseded = True

    @property
    def cancelled(self) -> bool:
        try:
            self.check()
        except CycleCancelled:
            return True
        return False

    def check(self) -> None:
        """Raise :class:`CycleCancelled` if the cycle under way must stop."""
        if self.stop.is_set():
            raise CycleCancelled("stopping", STOPPING)
        if self._superseded:
            raise CycleCancelled("the rules were reloaded", SUPERSEDED)
        deadline = self.deadline
        if deadline is not None and self.clock() >= deadline:
            raise CycleCancelled("past the cycle's deadline", DEADLINE)
