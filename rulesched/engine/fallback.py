"""Column evaluations that fell back to node by node for a reason nobody planned: a bug.

Column evaluation (:mod:`rulesched.engine.vectorise`) declines in two planned ways, both
silent, because node by node is the reference and gives the same answers:

* a rule whose body it cannot express gets no column body when the rules load (``vectorisable``),
  so it is never tried as columns;
* values numpy cannot hold exactly (an integer beyond int64, a float overflow, a list too long to
  unroll) raise :class:`rulesched.engine.arrays.Unsupported` during an evaluation.

Any other exception out of a column evaluation is a bug in the column engine. The scheduler must
not stop for it (node by node is right, only slower), but it must not go unseen either:
:class:`ColumnFallbacks` counts it, logs it at WARNING once per (rule, exception type) with the
rule and pod fields and the traceback, and hands it to whoever :func:`observe` s fallbacks.

Observers are process-wide on purpose, the one piece of global state here: rule sets are made deep
inside the commands (simulate, run, the extender) and their sessions' threads, where a caller
cannot reach each one's evaluator. Nothing in rulesched installs an observer; the tests do
(tests/conftest.py fails every test during which one happened), and a metric could.
Next stage: :class:`rulesched.lang.evaluation.bound.BoundRules` reports here from ``_column``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Fallback:
    """One unplanned fallback: the rule, the pod being evaluated, what was raised."""

    rule: str
    pod: str
    error: Exception


Observer = Callable[[Fallback], None]
_observers: list[Observer] = []
_observers_lock = threading.Lock()


@contextmanager
def observe(observer: Observer) -> Iterator[None]:
    """Call ``observer`` with every unplanned fallback of any rule set in this process (any
    thread) while the block runs. An observer that raises makes the evaluation raise."""
    with _observers_lock:
        _observers.append(observer)
    try:
        yield
    finally:
        with _observers_lock:
            _observers.remove(observer)


class ColumnFallbacks:
    """The unplanned fallbacks of one rule set's column evaluator (shared by its sessions'
    threads): ``count`` of them, each (rule, exception type) logged once."""

    def __init__(self) -> None:
        self.count = 0
        # Once per (rule, type): a column bug hits every pod of a class and every cycle, and a
        # warning per evaluation would bury the log (and cost more than the fallback itself).
        self._logged: set[tuple[str, type[Exception]]] = set()

    def record(self, rule: str, pod: str, error: Exception) -> None:
        self.count += 1
        key = (rule, type(error))
        if key not in self._logged:
            self._logged.add(key)
            log.warning(
                "rule %s: column evaluation raised %s, evaluating it node by node (a bug; logged once per rule and error type)",
                rule,
                type(error).__name__,
                exc_info=error,
                extra={"rule": rule, "pod": pod},
            )
        for observer in tuple(_observers):
            observer(Fallback(rule, pod, error))
