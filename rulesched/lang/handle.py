"""The active rule set, behind one handle that is swapped atomically.

Every scheduling cycle and every extender request reads :attr:`RulesHandle.rules` once, at its
start, and uses that set to the end: a reload never shows a mix of two sets. Swapping in a new
set drops the old set's caches (its per-thread evaluation sessions); an evaluation still
running on the old set keeps the session it holds until it finishes.

A handle can start empty (:meth:`RulesHandle.empty`): no set compiled yet, so the scheduler
stays up but does not schedule (:attr:`RulesHandle.loaded` is false and ``waiting`` says why)
until the first good set is swapped in.

Whoever keeps caches of a set (a scheduler's framework, the extender's) subscribes
(:meth:`RulesHandle.subscribe`) and is told of each swap, rather than comparing the set it
cached for with the active one before every use. Subscribers are held weakly. It then holds a set whose one filter passes no node, so
a caller that forgot to look at ``loaded`` parks pods instead of placing them without rules.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.lang.frontend.files import check_texts

NO_RULES_DIGEST = "none"
_NO_RULES = 'filter no_rules_loaded:\n    false\n    else "no valid rules are loaded"\n'


def _no_rules() -> RuleSet:
    return RuleSet(check_texts({"no-rules.rules": _NO_RULES}).checked, (), digest=NO_RULES_DIGEST)


class RulesHandle:
    def __init__(self, rules: RuleSet) -> None:
        self._rules = rules
        self._lock = threading.Lock()  # serialises swaps; readers never take it
        self.swaps = 0
        self.loaded = True  # False until a compiled set is in (see empty())
        self.waiting = ""  # while not loaded: why (the latest rejection, one line)
        self._subscribers: list[weakref.WeakMethod[Callable[[RuleSet], None]]] = []

    @classmethod
    def empty(cls, waiting: str) -> RulesHandle:
        """A handle with no set yet: ``loaded`` is false until the first :meth:`swap`."""
        handle = cls(_no_rules())
        handle.loaded, handle.waiting = False, waiting
        return handle

    @property
    def rules(self) -> RuleSet:
        """The active set (one attribute read: atomic)."""
        return self._rules

    @property
    def digest(self) -> str:
        return self._rules.digest

    def subscribe(self, changed: Callable[[RuleSet], None]) -> None:
        """Call ``changed(new)`` (a bound method, held weakly) on the swapping thread after each
        swap that brings in a different set."""
        with self._lock:
            self._subscribers = [s for s in self._subscribers if s() is not None]
            self._subscribers.append(weakref.WeakMethod(changed))

    def swap(self, rules: RuleSet) -> RuleSet:
        """Make ``rules`` the active set; returns the set it replaced, its caches dropped."""
        with self._lock:
            old, self._rules = self._rules, rules
            self.swaps += 1
            self.loaded, self.waiting = True, ""  # (after the set: a reader seeing loaded sees it)
            subscribers = [s() for s in self._subscribers]
        if old is not rules:
            for changed in subscribers:
                if changed is not None:
                    changed(rules)
        if old is not rules:
            old.drop_caches()
        return old
