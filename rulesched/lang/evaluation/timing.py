"""Time spent in each rule over one scheduling cycle: kube-scheduler's sampled plugin durations.

kube-scheduler times every plugin call in one scheduling cycle out of ten
(``scheduler_plugin_execution_duration_seconds``); the other cycles pay nothing. rulesched does
the same per rule: for a sampled cycle the scheduler wraps the pod's :class:`BoundRules` in
:func:`timed`, which puts timing stand-ins in place of its bound filters and scores for the
cycle's duration, and times each column evaluation (one call over many nodes), summed in a
:class:`rulesched.lang.evaluation.timer.RuleTimer`. Rules answered from a cache that cycle cost
nothing and are not counted, as a plugin that is not called is not.
Next stage: the scheduler (rulesched.scheduler.cycle) reports the sums as metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from rulesched.lang.evaluation.bound import BoundFilter, BoundRules, BoundScore
from rulesched.lang.evaluation.timer import FILTER, SCORE, RuleTimer


class TimedFilter:
    """A bound filter whose calls count toward its rule's time (what the walk sees as the
    filter while the cycle is timed; a failure cached meanwhile keeps it, harmlessly)."""

    __slots__ = ("name", "_inner", "_timer")

    def __init__(self, inner: BoundFilter, timer: RuleTimer) -> None:
        self.name, self._inner, self._timer = inner.name, inner, timer

    def passes(self, node: Any) -> bool:
        return bool(self._timer.call(FILTER, self.name, self._inner.passes, node))

    def reasons(self, node: Any) -> tuple[str, ...]:
        found: tuple[str, ...] = self._timer.call(FILTER, self.name, self._inner.reasons, node)
        return found

    def unresolvable(self, node: Any) -> bool:
        return self._inner.unresolvable(node)  # (asked by preemption, after the timed cycle)


class TimedScore:
    __slots__ = ("name", "weight", "normalize", "_inner", "_timer")

    def __init__(self, inner: BoundScore, timer: RuleTimer) -> None:
        self.name, self.weight, self.normalize = inner.name, inner.weight, inner.normalize
        self._inner, self._timer = inner, timer

    def score(self, node: Any) -> int:
        value: int = self._timer.call(SCORE, self.name, self._inner.score, node)
        return value


@contextmanager
def timed(bound: BoundRules, timer: RuleTimer) -> Iterator[None]:
    """Within the block, every evaluation of ``bound``'s filters and scores counts in ``timer``."""
    filters, scores = bound.filters, bound.scores
    # (stand-ins with the same attributes as the bound rules they wrap)
    bound.filters = cast("tuple[BoundFilter, ...]", tuple(TimedFilter(f, timer) for f in filters))
    bound.scores = cast("tuple[BoundScore, ...]", tuple(TimedScore(s, timer) for s in scores))
    bound.timer = timer
    try:
        yield
    finally:
        bound.filters, bound.scores, bound.timer = filters, scores, None
