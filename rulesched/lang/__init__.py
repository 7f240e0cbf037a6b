"""The rules language: text -> parse (spans) -> check (names, types) -> compile (closures).

Public API:

* :func:`load_rules` - files or folders to a compiled :class:`RuleSet` (or ``RulesError``);
* :func:`check_paths` - everything lint needs: parsed files, the checked set, diagnostics;
* :class:`RuleSet` / :class:`BoundRules` - ``rules.bind(pod, cluster)`` then per-node functions;
* :class:`Diagnostic` - located problems, rendered compiler-style.

Modules, in the order data flows through them: ``source``, ``parse`` (with ``ast``), ``check``
(with ``types``, ``schema``, ``builtins``), ``compile`` (with ``values``, ``context``),
``ruleset``; beside them ``interp`` (the reference interpreter), ``printer`` and ``lint``.
This package never imports the cluster or Kubernetes side (an import-linter contract).
"""

from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.load import bundled_rules_dir, check_paths, load_rules, resolve_rules_path
from rulesched.lang.ruleset import BoundFilter, BoundPreempt, BoundRules, BoundScore, RuleSet
from rulesched.lang.source import Diagnostic, Severity, Source

__all__ = [
    "BoundFilter",
    "BoundPreempt",
    "BoundRules",
    "BoundScore",
    "ClusterView",
    "Diagnostic",
    "EvalContext",
    "RuleSet",
    "Severity",
    "Source",
    "bundled_rules_dir",
    "check_paths",
    "load_rules",
    "resolve_rules_path",
]
