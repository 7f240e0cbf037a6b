"""Load rules from files: find them, read them, follow ``extends``, parse, check, compile.

This is the front door of the language (``rulesched.lang.load_rules``): everything a user can get
wrong ends in a :class:`rulesched.errors.RulesError` whose message is one line and whose
``diagnostics`` say where. Files compose in the order given; a folder means its ``.rules`` files
in name order; ``extends "default"`` names a bundled rule set, any other string a path relative
to the file that says it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rulesched.errors import RulesError
from rulesched.lang import ast
from rulesched.lang.check import CheckedRules, check
from rulesched.lang.parse import MAX_FILE_CHARS, parse_source
from rulesched.lang.ruleset import RuleSet
from rulesched.lang.source import Diagnostic, Severity, Source, error

RULES_SUFFIX = ".rules"


def bundled_rules_dir() -> Path:
    """The bundled rule sets: inside the installed package, or ``rules/`` in a checkout."""
    packaged = resources.files("rulesched").joinpath("_data/rules")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


def resolve_rules_path(name: str) -> Path:
    """A path as given, or the name of a bundled rule set (``default``) when no such path exists."""
    path = Path(name)
    if path.exists():
        return path
    bundled = bundled_rules_dir() / f"{name.removesuffix(RULES_SUFFIX)}{RULES_SUFFIX}"
    return bundled if bundled.is_file() else path


def rule_files(path: Path) -> list[Path]:
    """A file as itself; a folder as its ``.rules`` files in name order (not descending)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == RULES_SUFFIX and p.is_file())
        if not files:
            raise RulesError(f"{path}: no {RULES_SUFFIX} files in this folder")
        return files
    if not path.exists():
        raise RulesError(f"{path}: no such file or folder")
    return [path]


def read_source(path: Path) -> Source:
    try:
        data = path.read_bytes()
    except OSError as err:
        raise RulesError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(data) > MAX_FILE_CHARS:
        raise RulesError(f"{path}: {len(data):,} bytes is too large for a rules file (limit {MAX_FILE_CHARS:,})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RulesError(f"{path}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    if "\x00" in text:
        raise RulesError(f"{path}: binary data, not a rules file (NUL byte at offset {text.index(chr(0))})")
    return Source(str(path), text)


@dataclass(frozen=True)
class Loaded:
    """Parsed files in composition order with every diagnostic so far, and the checked result."""

    files: tuple[ast.RulesFile, ...]
    checked: CheckedRules
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)


def check_paths(paths: Iterable[str | Path]) -> Loaded:
    """Parse and check the files under ``paths`` as one rule set; never raises for bad rules
    text (only for unreadable files), so lint can report everything at once."""
    parsed: list[ast.RulesFile] = []
    diagnostics: list[Diagnostic] = []
    seen: set[Path] = set()
    roots: set[str] = set()
    for path in paths:
        for file in rule_files(Path(path)):
            roots.add(str(file))
            _load_file(file, parsed, diagnostics, seen, stack=())
    checked = check(parsed)
    # Warnings about a base a file extends (say, a let of default.rules that an override left
    # unused) are not the extending file's business; errors anywhere still count.
    kept = [d for d in (*diagnostics, *checked.diagnostics)
            if d.severity is Severity.ERROR or d.span is None or d.span.source.path in roots]
    return Loaded(tuple(parsed), checked, sort_diagnostics(kept))


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """File by file, then by position; problems with no position first."""
    return tuple(sorted(diagnostics, key=lambda d: (
        d.span.source.path if d.span else d.path, d.span.start if d.span else -1)))


def _load_file(path: Path, parsed: list[ast.RulesFile], diagnostics: list[Diagnostic],
               seen: set[Path], stack: tuple[Path, ...]) -> None:
    resolved = path.resolve()
    if resolved in seen:
        return
    seen.add(resolved)
    source = read_source(path)
    tree, problems = parse_source(source)
    diagnostics.extend(problems)
    if not tree.items and not problems:
        diagnostics.append(Diagnostic(Severity.WARNING, "empty", "no rules in this file", None, path=str(path)))
    for item in tree.items:
        if isinstance(item, ast.Extends):
            base = _extends_target(path, item.target)
            if base is None:
                diagnostics.append(error("extends", f"cannot extend '{item.target}': no such file or bundled rule set",
                                         item.span, suggestion="bundled sets: " + ", ".join(_bundled_names())))
            elif base.resolve() in (*stack, resolved):
                diagnostics.append(error("extends", f"'{item.target}' extends this file again (a cycle)", item.span))
            else:
                _load_file(base, parsed, diagnostics, seen, (*stack, resolved))
    parsed.append(tree)


def _extends_target(path: Path, target: str) -> Path | None:
    relative = path.parent / target
    if relative.is_file():
        return relative
    if relative.is_dir():
        files = sorted(relative.glob(f"*{RULES_SUFFIX}"))
        return files[0] if len(files) == 1 else None
    bundled = bundled_rules_dir() / f"{target.removesuffix(RULES_SUFFIX)}{RULES_SUFFIX}"
    return bundled if bundled.is_file() else None


def _bundled_names() -> list[str]:
    return sorted(p.stem for p in bundled_rules_dir().glob(f"*{RULES_SUFFIX}"))


def load_rules(paths: Sequence[str | Path]) -> RuleSet:
    """Load, check and compile a rule set, or raise RulesError carrying every diagnostic."""
    loaded = check_paths(paths)
    errors = [d for d in loaded.diagnostics if d.severity is Severity.ERROR]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise RulesError(f"{first.location}: {first.message}{more}", tuple(loaded.diagnostics))
    return RuleSet(loaded.checked, [f.source.path for f in loaded.files])
