"""Time in tests, measured so that a loaded machine cannot fail them.

Tests assert outcomes. Where the point is "no costly work" or "no busy wait", they bound CPU
time: :func:`time.thread_time` of the test's thread, :func:`time.process_time` of its process
(work done on the scheduler's threads), :func:`cpu_seconds` of a child process. Other work on
the machine slows these down in wall-clock time, not in CPU time.

Where a wall-clock deadline is itself the behaviour (SIGTERM ends a run at once, a standby takes
a lease over when it expires, a request is answered at its timeout), the bound is the one that
holds on a quiet machine, widened by :class:`Stopwatch`'s factor: how many times longer than its
CPU time a fixed piece of work takes on this machine right now, measured before and after the
timed stretch (1 on a quiet machine; 5-10 on 2 cores beside a real control plane and other
suites). The bound then keeps its meaning: a regression to waiting on a timeout or a silent
connection (tens of seconds) still fails, a slow machine does not.
"""

from __future__ import annotations

import os
import time

TICK = os.sysconf("SC_CLK_TCK")


def slowdown(cpu: float = 0.05) -> float:
    """How many times longer than its CPU time ``cpu`` seconds of pure-Python work take on
    this thread now (at least 1): CPU contention from the machine, and the GIL's from this
    process's other threads."""
    wall, started = time.perf_counter(), time.thread_time()
    while time.thread_time() - started < cpu:
        sum(range(2000))
    return max(1.0, (time.perf_counter() - wall) / (time.thread_time() - started))


class Stopwatch:
    """Wall-clock time of a stretch of a test, with the machine's :func:`slowdown` measured
    as it starts (counted in the stretch: a few hundredths of a second, more on a slow machine)
    and when it stops; :meth:`bound` scales a quiet machine's bound by the larger of the two."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.before = slowdown()
        self.after = 1.0
        self.elapsed: float | None = None

    def stop(self) -> float:
        if self.elapsed is None:
            self.elapsed = time.monotonic() - self.started
            self.after = slowdown()
        return self.elapsed

    @property
    def factor(self) -> float:
        return max(self.before, self.after)

    def bound(self, quiet: float) -> float:
        """``quiet`` seconds, as many times longer as the machine is slower now."""
        self.stop()
        return quiet * self.factor

    def __str__(self) -> str:
        return f"{self.stop():.2f}s (machine {self.factor:.1f}x slower than quiet)"


def cpu_seconds(pid: int) -> float:
    """CPU time (user and system, every thread) a live process has used so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat(5))
