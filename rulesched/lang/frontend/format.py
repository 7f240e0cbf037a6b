"""``rulesched fmt``: rewrite rules files in the printer's canonical form, keeping comments.

Comments between items stay above the item that follows them. A comment inside an item has no
place in the canonical form, so such a file is reported and left alone rather than losing it.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass
from pathlib import Path

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.files import read_source
from rulesched.lang.frontend.lint import rule_sets
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.printer import print_item
from rulesched.lang.frontend.source import Source


@dataclass(frozen=True)
class FormatSettings:
    paths: tuple[str, ...]
    check: bool = False
    write: bool = False


def comments(text: str) -> list[tuple[int, str]]:
    """(offset, text) of every comment, skipping '#' inside string literals."""
    found: list[tuple[int, str]] = []
    offset = 0
    for line in text.split("\n"):
        in_string = escaped = False
        for i, ch in enumerate(line):
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "#":
                found.append((offset + i, line[i:].rstrip()))
                break
        offset += len(line) + 1
    return found


def format_source(source: Source) -> tuple[str | None, str]:
    """The canonical text, or None and why it cannot be formatted."""
    tree, problems = parse_source(source)
    if problems:
        return None, problems[0].render().splitlines()[0]
    notes = comments(source.text)
    blocks: list[str] = []
    position = 0
    for item in tree.items:
        span = item.span
        start = _item_start(item)
        inside = [c for c in notes if start <= c[0] < span.end]
        if inside:
            line, column = source.position(inside[0][0])
            return (
                None,
                f"{source.path}:{line}:{column}: a comment inside an item would be lost; move it above the item",
            )
        leading = [text for offset, text in notes if position <= offset < start]
        blocks.append("\n".join([*leading, print_item(item)]))
        position = span.end
    trailing = [text for offset, text in notes if offset >= position]
    if trailing:
        blocks.append("\n".join(trailing))
    return ("\n\n".join(blocks) + "\n") if blocks else "", ""


def _item_start(item: ast.Item) -> int:
    # An item's span begins at its first token; rules start with their keyword, before the name.
    if isinstance(item, ast.Rule | ast.PartialOverride):
        return min(item.span.start, item.name_span.start)
    if isinstance(item, ast.Let):
        return min(item.span.start, item.name_span.start)
    return item.span.start


def format_paths(settings: FormatSettings) -> int:
    status = 0
    files = [f for group in rule_sets(settings.paths) for f in group]
    for path in files:
        source = read_source(Path(path))
        text, why = format_source(source)
        if text is None:
            print(f"rulesched fmt: {why}", file=sys.stderr)
            status = 1
            continue
        if text == source.text:
            continue
        if settings.check:
            print(f"{path}: would be reformatted")
            status = 1
        elif settings.write:
            Path(path).write_text(text, encoding="utf-8")
            print(f"{path}: reformatted")
        else:
            sys.stdout.writelines(
                difflib.unified_diff(
                    source.text.splitlines(keepends=True), text.splitlines(keepends=True), str(path), str(path)
                )
            )
    return status
