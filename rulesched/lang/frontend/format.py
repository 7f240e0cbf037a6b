"""``rulesched fmt``: rewrite rules files in the printer's canonical form, keeping every comment
where it was written.

The printer (:mod:`rulesched.lang.frontend.printer`) lays out the program; the comments, found
and placed by :mod:`rulesched.lang.frontend.comments`, are woven into its document first: a
comment leading an item stays above it (blank lines between such comments and the item kept, one
at most), an end-of-line comment stays after the same token, two spaces before its ``#``, and
the line breaks there; a comment on a line of its own inside an item stays on a line of its own
before the same token, indented as that line. Items are separated by one blank line. The result
is stable: formatting it again changes nothing.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rulesched.lang.frontend.comments import FileComments, ItemComments, Unplaceable, collect, placed
from rulesched.lang.frontend.files import read_source
from rulesched.lang.frontend.layout import FRESH, HARD, Align, Comment, Doc, Group, Nest, Token, render
from rulesched.lang.frontend.lint import rule_sets
from rulesched.lang.frontend.parse import parse_source
from rulesched.lang.frontend.printer import INDENT, item_doc, item_width, tokens
from rulesched.lang.frontend.source import Source


@dataclass(frozen=True)
class FormatSettings:
    paths: tuple[str, ...]
    check: bool = False
    write: bool = False


def format_source(source: Source) -> tuple[str | None, str]:
    """The canonical text, or None and why it cannot be formatted (a syntax error)."""
    tree, problems = parse_source(source)
    if problems:
        return None, problems[0].render().splitlines()[0]
    try:
        found = collect(tree)
    except Unplaceable as err:  # pragma: no cover - a bug: never lose a comment over it
        return None, f"{source.path}: cannot place the comments ({err}); file left as it is"
    lines: list[str] = []
    for item, comments in zip(tree.items, found.items, strict=True):
        if lines:
            lines.append("")
        for note in comments.leading:
            if note.blank_before and lines and lines[-1]:
                lines.append("")
            lines.append(note.text)
        if comments.leading and comments.blank_after_leading:
            lines.append("")
        lines.extend(render(_with_comments(item_doc(item), comments), item_width(item)).split("\n"))
        lines.extend(INDENT + text for text in comments.closing)
    _end(lines, found)
    return ("\n".join(lines) + "\n") if lines else "", ""


def _end(lines: list[str], found: FileComments) -> None:
    for i, note in enumerate(found.end):
        if lines and lines[-1] and (note.blank_before or (i == 0 and found.items)):
            lines.append("")
        lines.append(note.text)


def _with_comments(doc: Doc, comments: ItemComments) -> Doc:
    before, after = placed(comments, tokens(doc))
    if not before and not after:
        return doc
    weaver = _Weaver(before, after)
    woven = weaver.weave(doc)
    return [woven, Nest(len(INDENT), [*weaver.pending(), *weaver.leftover()])]  # the others indented: closing it


_CLOSING = (")", "]")


class _Weaver:
    """Rebuilds a document in order, inserting comments at the tokens they belong to. An
    end-of-line comment waits past the closing brackets that follow its token, so that a line
    never starts with one; when several end-of-line comments fall on one token and the brackets
    after it, the first ends the line and the others follow on lines of their own."""

    def __init__(self, before: dict[int, list[str]], after: dict[int, list[str]]) -> None:
        self.before = dict(before)
        self.after = dict(after)
        self.seen = 0  # tokens passed
        self.waiting: list[str] = []

    def weave(self, doc: Doc) -> Doc:
        if isinstance(doc, Group):
            # Comments before the group's first token go before the group, so that they do not
            # force it to break.
            hoisted = self._before_next() if isinstance(_first_leaf(doc), Token) else []
            group = Group(self.weave(doc.parts))
            return [*hoisted, group] if hoisted else group
        if isinstance(doc, Nest):
            return Nest(doc.by, self.weave(doc.parts))
        if isinstance(doc, Align):
            return Align(self.weave(doc.parts))
        if isinstance(doc, list | tuple):
            return [self.weave(part) for part in doc]
        if not isinstance(doc, Token):
            return [*self.pending(), doc]
        out: list[Doc] = []
        if doc.text not in _CLOSING:
            out += self.pending()
        out += self._before_next()
        self.waiting += self.after.pop(self.seen, [])
        self.seen += 1
        return [*out, doc]

    def _before_next(self) -> list[Doc]:
        """The comments on lines of their own before the next token (after any end-of-line
        comment still waiting)."""
        texts = self.before.pop(self.seen, [])
        out: list[Doc] = self.pending() if texts else []
        for text in texts:
            out += [FRESH, Comment(text), HARD]
        return out

    def pending(self) -> list[Doc]:
        """The end-of-line comments waiting to be written (only the first ends a line: others
        mapped to the same token go on lines of their own)."""
        out: list[Doc] = []
        for i, text in enumerate(self.waiting):
            out += [Comment("  " + text) if i == 0 else [FRESH, Comment(text)], HARD]
        self.waiting = []
        return out

    def leftover(self) -> list[Doc]:
        out: list[Doc] = []
        for index in sorted({*self.before, *self.after}):
            for text in [*self.after.pop(index, []), *self.before.pop(index, [])]:
                out += [FRESH, Comment(text), HARD]
        return out


def _first_leaf(doc: Doc) -> Doc | None:
    while True:
        if isinstance(doc, Group | Nest | Align):
            doc = doc.parts
        elif isinstance(doc, list | tuple):
            if not doc:
                return None
            doc = doc[0]
        else:
            return doc


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
            sys.stdout.writelines(_diff(source.text, text, str(path)))
    return status


def _diff(old: str, new: str, path: str) -> Sequence[str]:
    return list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), path, path))
