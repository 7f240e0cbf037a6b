"""The front door of the language: rules files or texts to a compiled :class:`RuleSet`.

Everything a user can get wrong ends in a :class:`rulesched.errors.RulesError` whose message is
one line (the first problem's ``file:line:col``) and whose ``diagnostics`` hold every problem.
The front end (:mod:`rulesched.lang.frontend.files`) finds, parses and checks; this module
compiles what it checked and names the result by a hash of its content.
Next stage: :class:`rulesched.lang.handle.RulesHandle` holds the active set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rulesched.errors import RulesError
from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.lang.frontend.files import Loaded, check_paths, check_sources, check_texts, content_digest
from rulesched.lang.frontend.source import Severity


def load_rules(paths: Sequence[str | Path]) -> RuleSet:
    """Load, check and compile the rules under ``paths``, or raise RulesError carrying every
    diagnostic."""
    return compile_loaded(check_paths(paths))


def load_rules_text(texts: Mapping[str, str | bytes]) -> RuleSet:
    """The same for rules held as text (a ConfigMap's data): keys ending in ``.rules`` are the
    files, in name order; diagnostics name the key."""
    return compile_loaded(check_texts(texts))


def load_sources(paths: Sequence[str | Path], texts: Mapping[str, str | bytes] | None = None) -> RuleSet:
    """Files and texts (a ConfigMap's data) as one set: what ``--rules`` and
    ``--rules-configmap`` name together."""
    if not texts:
        return load_rules(paths)
    return compile_loaded(check_sources(paths, texts))


def compile_loaded(loaded: Loaded) -> RuleSet:
    errors = [d for d in loaded.diagnostics if d.severity is Severity.ERROR]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RulesError(f"{first.location}: {first.message}{more}", tuple(loaded.diagnostics))
    files = [s.path for s in loaded.sources]
    return RuleSet(loaded.checked, files, digest=content_digest(s.text for s in loaded.sources))
