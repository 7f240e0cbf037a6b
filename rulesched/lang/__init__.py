"""The rules language: text -> parse (spans) -> check (names, types) -> compile (closures).

Public API:

* :func:`load_rules` / :func:`load_rules_text` - files or folders, or ``{name: text}`` (a
  ConfigMap's data), to a compiled :class:`RuleSet` (or ``RulesError``);
* :func:`check_paths` / :func:`check_texts` - everything lint needs: parsed files, the checked
  set, diagnostics;
* :class:`RulesHandle` - the active set, swapped atomically on reload;
* :class:`RuleSet` / :class:`BoundRules` - ``rules.bind(pod, cluster)`` then per-node functions;
* :class:`Diagnostic` - located problems, rendered compiler-style.

Also exported, for the scheduler, the engine's clients and the faces (which import nothing else
of this package, an import-linter contract): the evaluation watch (``RuleWatch``, ``CHECK_EVERY``)
and per-rule timing (``RuleTimer``, ``timed``), the per-node memos (``NodeMemos``), forked
per-domain indexes (``ForkedIndexes``), a failure (``Failure``), explanations' ``Blame``, the
types preemption reads (``NUMBER``, ``ListOf``) and the resource-fit ``startup_warning``.
Batch evaluation (many nodes at once, as columns) is not here: it is :mod:`rulesched.engine`,
which imports this package and is never imported by it.

Sub-packages, in the order data flows through them: ``frontend`` (source, parse, check, and the
tools printer, format, lint), ``evaluation`` (compile, ruleset, bound, the reference
interpreter); ``builtins`` holds the built-in functions and the Kubernetes semantics they
implement (matching, affinity, spreading, topology, indexes). ``types``, ``schema``, ``values``
and ``context`` are the vocabulary all of them share. ``load`` and ``handle`` are the front door.
This package never imports the cluster or Kubernetes side (an import-linter contract, as are the
layers between the sub-packages).
"""

from rulesched.lang.builtins import BUILTINS  # the registry (its hooks tell the engine what a call reads)
from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.evaluation.blame import Blame, Blamer, quantity_text
from rulesched.lang.evaluation.bound import (
    BoundFilter,
    BoundPreempt,
    BoundRules,
    BoundScore,
    Failure,
)
from rulesched.lang.evaluation.ruleset import RuleSet, Session
from rulesched.lang.evaluation.stages import NodeMemos
from rulesched.lang.evaluation.terms import ScoreTerms, Term
from rulesched.lang.evaluation.timer import RuleTimer
from rulesched.lang.evaluation.timing import timed
from rulesched.lang.evaluation.watch import CHECK_EVERY, RuleWatch
from rulesched.lang.frontend.compare import RuleDifference, rule_differences
from rulesched.lang.frontend.files import (
    bundled_rules_dir,
    check_paths,
    check_texts,
    resolve_rules_path,
)
from rulesched.lang.frontend.resource_fit import startup_warning
from rulesched.lang.frontend.source import Diagnostic, Severity, Source
from rulesched.lang.handle import RulesHandle
from rulesched.lang.indexes import ForkedIndexes
from rulesched.lang.load import load_rules, load_rules_text, load_sources
from rulesched.lang.types import NUMBER, ListOf

__all__ = [
    "BUILTINS",
    "CHECK_EVERY",
    "NUMBER",
    "Blame",
    "Blamer",
    "BoundFilter",
    "BoundPreempt",
    "BoundRules",
    "BoundScore",
    "ClusterView",
    "Diagnostic",
    "EvalContext",
    "Failure",
    "ForkedIndexes",
    "ListOf",
    "NodeMemos",
    "RuleSet",
    "RuleTimer",
    "RuleWatch",
    "RulesHandle",
    "ScoreTerms",
    "Session",
    "Term",
    "Severity",
    "Source",
    "bundled_rules_dir",
    "check_paths",
    "check_texts",
    "load_rules",
    "load_rules_text",
    "load_sources",
    "quantity_text",
    "resolve_rules_path",
    "startup_warning",
    "RuleDifference",
    "rule_differences",
    "timed",
]
