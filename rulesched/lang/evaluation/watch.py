"""Which rule an evaluation is in, and a check that may stop it there.

A scheduling cycle (or an extender request) may have to stop in the middle of its rules: its
deadline passed, a reload replaced the set it reads, the process is stopping. The language knows
nothing of those (it never imports the scheduler), so every :class:`Session
<rulesched.lang.evaluation.ruleset.Session>` owns one :class:`RuleWatch`, which each binding it
makes reports to, and which the caller *arms* with a check for the time of one cycle:

* ``rule``: the rule being evaluated. It is written where a rule's evaluation starts: once per
  rule over a batch of nodes (a column evaluation, a rule's loop over nodes), once per rule and
  node where a node's rules run one after the other. One attribute store; read only when the
  check has raised, to say which rule was running.
* :meth:`RuleWatch.enter` (a rule over a batch of nodes begins) and :meth:`RuleWatch.check`
  (every :data:`CHECK_EVERY` nodes of a loop that evaluates rules node by node, and before each
  evaluation of a rule whose cost bound is above ``COSTLY_STEPS``: see
  :mod:`rulesched.lang.evaluation.ruleset`) call the armed check, which raises to stop the
  evaluation; unarmed, they do nothing.

Why that is fine-grained enough: one evaluation of one rule for one (pod, node) is bounded before
the rules ever run (:mod:`rulesched.lang.frontend.cost`: 10,000 steps, about 0.4 ms; a whole set
50,000, about 2 ms), and nothing inside one evaluation checks. So a check comes at most one
costly rule's evaluation late, or :data:`CHECK_EVERY` nodes' evaluations of cheaper rules (a few
ms, about 30 ms for the costliest set the limits accept), or one column evaluation late (a rule
over a batch as array operations: one per step of its body). Nothing on the walk of a cached
node table reads a clock: the caller checks between the steps of its walk
(:mod:`rulesched.scheduler.cycle`).
Next stage: :mod:`rulesched.scheduler.cancel` arms it for a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

CHECK_EVERY = 16  # nodes evaluated one by one between two checks

T = TypeVar("T")


class RuleWatch:
    """One session's evaluation position and its armed check (one thread: the session's)."""

    __slots__ = ("rule", "_check")

    def __init__(self) -> None:
        self.rule = ""  # the rule being (or last) evaluated; "" before any
        self._check: Callable[[], None] | None = None

    def arm(self, check: Callable[[], None]) -> None:
        """From now on, :meth:`check` calls ``check`` (which raises to stop the evaluation)."""
        self.rule = ""
        self._check = check

    def disarm(self) -> None:
        self._check = None

    @property
    def armed(self) -> bool:
        return self._check is not None

    def check(self) -> None:
        """Raise if the armed check says the evaluation must stop."""
        check = self._check
        if check is not None:
            check()

    def tick(self) -> int:
        """:meth:`check`, for a loop counting nodes down: returns the count to start again from."""
        check = self._check
        if check is not None:
            check()
        return CHECK_EVERY

    def enter(self, rule: str) -> None:
        """``rule`` begins over a batch of nodes: record it, then check."""
        self.rule = rule
        check = self._check
        if check is not None:
            check()

    def each_many(self, fn: Callable[[Sequence[Any]], list[T]], items: Sequence[int], nodes: Sequence[Any]) -> list[T]:
        """``fn([nodes[i] for i in items])`` (a function of many nodes at once), in parts of
        :data:`CHECK_EVERY` items checked between while armed."""
        check = self._check
        if check is None or len(items) <= CHECK_EVERY:
            return fn([nodes[i] for i in items])
        out: list[T] = []
        for start in range(0, len(items), CHECK_EVERY):
            check()
            out += fn([nodes[i] for i in items[start : start + CHECK_EVERY]])
        return out

    def each(self, fn: Callable[[Any], T], items: Sequence[Any], nodes: Sequence[Any] | None = None) -> list[T]:
        """``[fn(x) for x in items]`` (with ``nodes``: ``[fn(nodes[i]) for i in items]``),
        checking every :data:`CHECK_EVERY` items while armed."""
        check = self._check
        if check is None or len(items) <= CHECK_EVERY:
            return [fn(x) for x in items] if nodes is None else [fn(nodes[i]) for i in items]
        out: list[T] = []
        for start in range(0, len(items), CHECK_EVERY):
            check()
            part = items[start : start + CHECK_EVERY]
            out += [fn(x) for x in part] if nodes is None else [fn(nodes[i]) for i in part]
        return out
