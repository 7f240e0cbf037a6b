"""The active rule set, behind one handle that is swapped atomically.

Every scheduling cycle and every extender request reads :attr:`RulesHandle.rules` once, at its
start, and uses that set to the end: a reload never shows a mix of two sets. Swapping in a new
set drops the old set's caches (its per-thread evaluation sessions); an evaluation still
running on the old set keeps the session it holds until it finishes.
"""

from __future__ import annotations

import threading

from rulesched.lang.evaluation.ruleset import RuleSet


class RulesHandle:
    def __init__(self, rules: RuleSet) -> None:
        self._rules = rules
        self._lock = threading.Lock()  # serialises swaps; readers never take it
        self.swaps = 0

    @property
    def rules(self) -> RuleSet:
        """The active set (one attribute read: atomic)."""
        return self._rules

    @property
    def digest(self) -> str:
        return self._rules.digest

    def swap(self, rules: RuleSet) -> RuleSet:
        """Make ``rules`` the active set; returns the set it replaced, its caches dropped."""
        with self._lock:
            old, self._rules = self._rules, rules
            self.swaps += 1
        if old is not rules:
            old.drop_caches()
        return old
