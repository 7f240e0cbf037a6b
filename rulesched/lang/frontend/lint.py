"""``rulesched lint``: check rule sets the way a compiler would, for people and for tools.

A file argument is one rule set (with whatever it ``extends``); a folder is one rule set made of
its ``.rules`` files, and each sub-folder holding ``.rules`` files is another; a file in a folder
marked ``# rulesched: standalone`` is a set of its own (a library of alternative sets, like the
bundled ``rules/``: each profile there is a whole policy, not a part of the others). Output is
compiler-style text or JSON; the exit status is 0 when clean, 1 on errors (and on warnings with
``--strict``), 2 when the paths themselves are unusable. Besides what the checker finds, a set
whose filters never check that pods fit gets ``no-resource-fit`` unless it is meant for the
extender (:mod:`rulesched.lang.frontend.resource_fit`), and a rule reading measured node load
without testing that it is there gets ``unguarded-load`` (:mod:`rulesched.lang.frontend.load_guard`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rulesched.errors import RulesError
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.files import RULES_SUFFIX, Loaded, check_paths
from rulesched.lang.frontend.load_guard import unguarded_load_warnings
from rulesched.lang.frontend.resource_fit import meant_for_extender, resource_fit_warning
from rulesched.lang.frontend.source import Diagnostic, Severity


@dataclass(frozen=True)
class LintSettings:
    paths: tuple[str, ...]
    format: str = "text"  # text | json
    strict: bool = False
    # what the sets are for: "scheduler" (run, simulate), "extender", or None: by the files'
    # `# rulesched: extender` line (see rulesched.lang.frontend.resource_fit)
    target: str | None = None


@dataclass(frozen=True)
class LintResult:
    rule_sets: tuple[tuple[str, ...], ...]
    diagnostics: tuple[Diagnostic, ...]
    rules: int  # rules written in the files linted (overrides included), each file counted once
    extended: int = 0  # rules written in the files those extend (and that were not linted themselves)

    @property
    def errors(self) -> int:
        return sum(d.severity is Severity.ERROR for d in self.diagnostics)

    @property
    def warnings(self) -> int:
        return sum(d.severity is Severity.WARNING for d in self.diagnostics)

    @property
    def notes(self) -> int:
        return sum(d.severity is Severity.NOTE for d in self.diagnostics)


def rule_sets(paths: Sequence[str]) -> list[list[Path]]:
    """Group the paths into rule sets (see the module docstring)."""
    sets: list[list[Path]] = []
    for name in paths:
        path = Path(name)
        if path.is_file():
            sets.append([path])
        elif path.is_dir():
            found = _folder_sets(path)
            if not found:
                raise RulesError(f"{path}: no {RULES_SUFFIX} files in this folder or below it")
            sets.extend(found)
        else:
            raise RulesError(f"{path}: no such file or folder")
    return sets


STANDALONE_MARK = "# rulesched: standalone"
_STANDALONE = re.compile(rb"^[ \t]*#[ \t]*rulesched:[ \t]*standalone[ \t]*$", re.MULTILINE)


def _standalone(path: Path) -> bool:
    """Whether the file carries the ``# rulesched: standalone`` line: a whole set on its own,
    an alternative to the files beside it (the bundled rules/: most-allocated.rules beside
    default.rules), not a part of their set. (A file that cannot be read is left with the
    others: checking them says why.)"""
    try:
        return _STANDALONE.search(path.read_bytes()) is not None
    except OSError:
        return False


def _folder_sets(folder: Path) -> list[list[Path]]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == RULES_SUFFIX)
    alone = [p for p in files if _standalone(p)]
    together = [p for p in files if p not in alone]
    sets = ([together] if together else []) + [[p] for p in alone]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        sets.extend(_folder_sets(sub))
    return sets


def lint(settings: LintSettings) -> LintResult:
    diagnostics: list[Diagnostic] = []
    seen: set[tuple[str, int, str]] = set()
    own: dict[str, int] = {}  # rules per file linted
    extended: dict[str, int] = {}  # rules per file reached through extends
    groups = rule_sets(settings.paths)
    for group in groups:
        loaded = check_paths(group)
        roots = {str(Path(root).resolve()) for root in loaded.roots}
        for file in loaded.files:
            path = str(Path(file.source.path).resolve())  # rules/default.rules is also `extends "default"`
            (own if path in roots else extended)[path] = file.unparsed_rules + sum(
                isinstance(item, ast.Rule | ast.PartialOverride) for item in file.items
            )
        found = list(loaded.diagnostics)
        fit = _resource_fit(loaded, settings.target)
        if fit is not None:
            found.insert(0, fit)
        if loaded.ok:
            found += unguarded_load_warnings(loaded.checked)
        for d in found:
            key = (d.location, d.span.start if d.span else -1, d.message)
            if key not in seen:  # a base shared by several sets is reported once
                seen.add(key)
                diagnostics.append(d)
    return LintResult(
        tuple(tuple(str(p) for p in g) for g in groups),
        tuple(diagnostics),
        sum(own.values()),
        sum(count for path, count in extended.items() if path not in own),
    )


def _resource_fit(loaded: Loaded, target: str | None) -> Diagnostic | None:
    """``no-resource-fit`` for a set meant for a scheduler (not for the extender), once it has
    no errors (until then its rules are not all known)."""
    if not loaded.ok or target == "extender" or (target is None and meant_for_extender(loaded.sources)):
        return None
    return resource_fit_warning(loaded.checked, loaded.roots[0] if loaded.roots else "<rules>")


def exit_code(result: LintResult, strict: bool) -> int:
    if result.errors or (strict and result.warnings):
        return 1
    return 0


def render(result: LintResult, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(
            {
                "rule_sets": [list(g) for g in result.rule_sets],
                "rules": result.rules,
                "extended_rules": result.extended,
                "errors": result.errors,
                "warnings": result.warnings,
                "notes": result.notes,
                "diagnostics": [d.to_json() for d in result.diagnostics],
            },
            indent=2,
        )
    lines = [d.render() for d in result.diagnostics]
    files = sum(len(g) for g in result.rule_sets)
    extended = f" (extends {result.extended})" if result.extended else ""
    notes = f", {_count(result.notes, 'note')}" if result.notes else ""
    lines.append(
        f"{_count(files, 'file')}, {_count(result.rules, 'rule')}{extended}: "
        f"{_count(result.errors, 'error')}, {_count(result.warnings, 'warning')}{notes}"
    )
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
