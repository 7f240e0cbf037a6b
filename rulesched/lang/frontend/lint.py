"""``rulesched lint``: check rule sets the way a compiler would, for people and for tools.

A file argument is one rule set (with whatever it ``extends``); a folder is one rule set made of
its ``.rules`` files, and each sub-folder holding ``.rules`` files is another. Output is
compiler-style text or JSON; the exit status is 0 when clean, 1 on errors (and on warnings with
``--strict``), 2 when the paths themselves are unusable.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rulesched.errors import RulesError
from rulesched.lang.frontend.files import RULES_SUFFIX, check_paths
from rulesched.lang.frontend.source import Diagnostic, Severity


@dataclass(frozen=True)
class LintSettings:
    paths: tuple[str, ...]
    format: str = "text"  # text | json
    strict: bool = False


@dataclass(frozen=True)
class LintResult:
    rule_sets: tuple[tuple[str, ...], ...]
    diagnostics: tuple[Diagnostic, ...]
    rules: int

    @property
    def errors(self) -> int:
        return sum(d.severity is Severity.ERROR for d in self.diagnostics)

    @property
    def warnings(self) -> int:
        return sum(d.severity is Severity.WARNING for d in self.diagnostics)


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


def _folder_sets(folder: Path) -> list[list[Path]]:
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == RULES_SUFFIX)
    sets = [files] if files else []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        sets.extend(_folder_sets(sub))
    return sets


def lint(settings: LintSettings) -> LintResult:
    diagnostics: list[Diagnostic] = []
    seen: set[tuple[str, int, str]] = set()
    count = 0
    groups = rule_sets(settings.paths)
    for group in groups:
        loaded = check_paths(group)
        count += len(loaded.checked.rules)
        for d in loaded.diagnostics:
            key = (d.location, d.span.start if d.span else -1, d.message)
            if key not in seen:  # a base shared by several sets is reported once
                seen.add(key)
                diagnostics.append(d)
    return LintResult(tuple(tuple(str(p) for p in g) for g in groups), tuple(diagnostics), count)


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
                "errors": result.errors,
                "warnings": result.warnings,
                "diagnostics": [d.to_json() for d in result.diagnostics],
            },
            indent=2,
        )
    lines = [d.render() for d in result.diagnostics]
    files = sum(len(g) for g in result.rule_sets)
    lines.append(
        f"{files} file{'s' if files != 1 else ''}, {result.rules} rule{'s' if result.rules != 1 else ''}: "
        f"{result.errors} error{'s' if result.errors != 1 else ''}, "
        f"{result.warnings} warning{'s' if result.warnings != 1 else ''}"
    )
    return "\n".join(lines)
