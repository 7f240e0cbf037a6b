"""Find rules text, follow ``extends``, parse and check: the front end's entry point.

Rules come from files and folders on disk (``rulesched lint``, ``--rules PATH``) or from a
mapping of names to texts (a ConfigMap's ``data``: ``{"policy.rules": "..."}``). Either way a
rule set is the files given, in order (a folder or a mapping: its ``.rules`` entries in name
order), each preceded by what it ``extends``: ``extends "default"`` names a bundled rule set; any
other string is a path relative to the file that says it (on disk) or another key of the same
mapping. Diagnostics name the file by its path or its key.

Nothing here raises for bad rules text, so lint can report every problem at once; unreadable
files are a :class:`rulesched.errors.RulesError`.
Next stage: :func:`rulesched.lang.load.load_rules` compiles what :func:`check_paths` checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rulesched.errors import RulesError
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.check import check
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.frontend.parse import MAX_FILE_CHARS, parse_source
from rulesched.lang.frontend.source import Diagnostic, Severity, Source, error

RULES_SUFFIX = ".rules"


def bundled_rules_dir() -> Path:
    """The bundled rule sets: inside the installed package, or ``rules/`` in a checkout."""
    packaged = resources.files("rulesched").joinpath("_data/rules")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "rules"


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
    return decode_source(str(path), data)


def decode_source(name: str, data: bytes | str) -> Source:
    """Rules text from bytes (or text) named ``name``, or a RulesError saying why it is not."""
    if len(data) > MAX_FILE_CHARS:
        raise RulesError(f"{name}: {len(data):,} bytes is too large for a rules file (limit {MAX_FILE_CHARS:,})")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise RulesError(f"{name}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    if "\x00" in data:
        raise RulesError(f"{name}: binary data, not a rules file (NUL byte at offset {data.index(chr(0))})")
    return Source(name, data)


@dataclass(frozen=True)
class Loaded:
    """Parsed files in composition order with every diagnostic so far, and the checked result."""

    files: tuple[ast.RulesFile, ...]
    checked: CheckedRules
    diagnostics: tuple[Diagnostic, ...]
    roots: tuple[str, ...] = ()  # the paths (or keys) of the files given, not reached by extends

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)

    @property
    def sources(self) -> tuple[Source, ...]:
        """Every file's text, in composition order (the rule set's content)."""
        return tuple(f.source for f in self.files)


@dataclass(frozen=True)
class _Unit:
    """One rules text to load: its source, an identity (for cycles and duplicates) and how the
    ``extends`` targets it names are found."""

    source: Source
    identity: object
    extends: Callable[[str], _Unit | None]


def check_paths(paths: Iterable[str | Path]) -> Loaded:
    """Parse and check the files under ``paths`` as one rule set; never raises for bad rules
    text (only for unreadable files), so lint can report everything at once."""
    return _check_units(_path_units(paths))


def check_texts(texts: Mapping[str, str | bytes]) -> Loaded:
    """:func:`check_paths` for rules held as text: every key ending in ``.rules`` is a file of
    the set, in name order; ``extends`` finds other keys first, then the bundled sets."""
    return _check_units(_text_units(texts))


def check_sources(paths: Iterable[str | Path], texts: Mapping[str, str | bytes]) -> Loaded:
    """Files and texts as one set (``--rules default`` with a ConfigMap): the files first."""
    return _check_units([*_path_units(paths), *_text_units(texts)])


def _path_units(paths: Iterable[str | Path]) -> list[_Unit]:
    return [_disk_unit(file) for path in paths for file in rule_files(Path(path))]


def _text_units(texts: Mapping[str, str | bytes]) -> list[_Unit]:
    names = sorted(k for k in texts if k.endswith(RULES_SUFFIX))
    if not names:
        raise RulesError(f"no {RULES_SUFFIX} entries (keys: {', '.join(sorted(texts)) or 'none'})")
    units: dict[str, _Unit] = {}

    def find(target: str) -> _Unit | None:
        for key in (target, f"{target}{RULES_SUFFIX}"):
            if key in texts:
                return unit(key)
        bundled = _bundled(target)
        return _disk_unit(bundled) if bundled is not None else None

    def unit(key: str) -> _Unit:
        if key not in units:
            units[key] = _Unit(decode_source(key, texts[key]), ("text", key), find)
        return units[key]

    return [unit(name) for name in names]


def _disk_unit(path: Path) -> _Unit:
    def find(target: str) -> _Unit | None:
        base = _extends_target(path, target)
        return _disk_unit(base) if base is not None else None

    return _Unit(read_source(path), path.resolve(), find)


def _check_units(roots: list[_Unit]) -> Loaded:
    parsed: list[ast.RulesFile] = []
    diagnostics: list[Diagnostic] = []
    seen: set[object] = set()
    for unit in roots:
        _load(unit, parsed, diagnostics, seen)
    checked = check(parsed)
    # Warnings about a base a file extends (say, a let of default.rules that an override left
    # unused) are not the extending file's business; errors anywhere still count.
    names = {unit.source.path for unit in roots}
    kept = [
        d
        for d in (*diagnostics, *checked.diagnostics)
        if d.severity is Severity.ERROR or d.span is None or d.span.source.path in names
    ]
    return Loaded(tuple(parsed), checked, sort_diagnostics(kept), tuple(unit.source.path for unit in roots))


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    """File by file, then by position; problems with no position first."""
    return tuple(
        sorted(
            diagnostics,
            key=lambda d: (d.span.source.path if d.span else d.path, d.span.start if d.span else -1),
        )
    )


def _load(root: _Unit, parsed: list[ast.RulesFile], diagnostics: list[Diagnostic], seen: set[object]) -> None:
    """Parse ``root`` and what it extends, each file after the files it extends. A walk with its
    own stack, not recursion: a ConfigMap of thousands of keys each extending the next is a long
    chain, not a crash."""
    frames: list[tuple[_Unit, ast.RulesFile, Iterator[ast.Item]]] = []
    path: set[object] = set()  # the files being loaded, each extending the next: a cycle's members

    def enter(unit: _Unit) -> None:
        seen.add(unit.identity)
        path.add(unit.identity)
        tree, problems = parse_source(unit.source)
        diagnostics.extend(problems)
        if not tree.items and not problems:
            diagnostics.append(
                Diagnostic(Severity.WARNING, "empty", "no rules in this file", None, path=unit.source.path)
            )
        frames.append((unit, tree, iter(tree.items)))

    if root.identity not in seen:
        enter(root)
    while frames:
        unit, tree, items = frames[-1]
        item = next(items, None)
        if item is None:
            frames.pop()
            path.discard(unit.identity)
            parsed.append(tree)
        elif isinstance(item, ast.Extends):
            base = unit.extends(item.target)
            if base is None:
                diagnostics.append(
                    error(
                        "extends",
                        f"cannot extend '{item.target}': no such file or bundled rule set",
                        item.span,
                        suggestion="bundled sets: " + ", ".join(_bundled_names()),
                    )
                )
            elif base.identity in path:
                diagnostics.append(error("extends", f"'{item.target}' extends this file again (a cycle)", item.span))
            elif base.identity not in seen:
                enter(base)


def _extends_target(path: Path, target: str) -> Path | None:
    relative = path.parent / target
    if relative.is_file():
        return relative
    if relative.is_dir():
        files = sorted(relative.glob(f"*{RULES_SUFFIX}"))
        return files[0] if len(files) == 1 else None
    return _bundled(target)


def _bundled(target: str) -> Path | None:
    bundled = bundled_rules_dir() / f"{target.removesuffix(RULES_SUFFIX)}{RULES_SUFFIX}"
    return bundled if bundled.is_file() else None


def _bundled_names() -> list[str]:
    return sorted(p.stem for p in bundled_rules_dir().glob(f"*{RULES_SUFFIX}"))


def content_digest(texts: Iterable[str]) -> str:
    """A short hash of a rule set's texts in composition order: the same rules have the same
    hash wherever they were loaded from (a path, a ConfigMap key)."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode()
        digest.update(len(encoded).to_bytes(8, "big"))
        digest.update(encoded)
    return digest.hexdigest()[:16]
