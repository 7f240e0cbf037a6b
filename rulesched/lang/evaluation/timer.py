"""A cycle's time per rule: the sums kube-scheduler's sampled plugin durations report.

A :class:`RuleTimer` sums the seconds per (extension point, rule): ``Filter`` for a filter's
answers and reasons, ``Score`` for a score's values. The bound rules hold one while a sampled
cycle times them; :mod:`rulesched.lang.evaluation.timing` puts the timing stand-ins in place.
Next stage: the scheduler (rulesched.scheduler.cycle) reports the sums as metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

FILTER = "Filter"
SCORE = "Score"


class RuleTimer:
    """Seconds per (extension point, rule name), summed over one cycle."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], float] = {}

    def add(self, point: str, rule: str, seconds: float) -> None:
        key = (point, rule)
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds

    def call(self, point: str, rule: str, fn: Callable[[Any], Any], node: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(node)
        finally:
            self.add(point, rule, time.perf_counter() - started)
