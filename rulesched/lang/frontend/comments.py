"""Where each comment of a rules file belongs, so that ``rulesched fmt`` keeps it there.

The grammar ignores comments; this module finds them again with the grammar's own lexer (so a
``#`` inside a string is never one) and attaches each to the nearest syntax position:

- a comment alone on its line before an item (at column 1, or after a blank line) leads that
  item, blank lines between such comments and the item kept (one at most);
- a comment at the end of a line follows the token before it: after that token, on its line;
- a comment alone on its line inside an item comes before the token after it, on a line of its
  own;
- a comment alone on an indented line right after an item (no blank line between) closes that
  item: printed indented under it.

Positions inside an item are token indexes. The printer emits the source's tokens but where it
drops parentheses that precedence makes redundant, rewrites a rule header's options in its own
order (``weight`` before ``normalize``) or leaves out ``when true`` after ``unresolvable``; the
two token lists are then matched (:class:`difflib.SequenceMatcher`), a comment at a dropped token
going to the matched token before it (end of line) or after it (own line): the nearest line. The
formatter (:mod:`rulesched.lang.frontend.format`) weaves the comments into the printer's document.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from lark import Token as LarkToken

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.parse import lex

# Types of the tokens that begin an item (the grammar's keywords; one after "." is a field name).
_ITEM_STARTS = frozenset({"LET", "FILTER", "SCORE", "PREEMPT", "DISABLE", "OVERRIDE", "EXTENDS"})
_RULE_KINDS = frozenset({"FILTER", "SCORE", "PREEMPT"})


@dataclass(frozen=True)
class Note:
    """A comment's text and whether a blank line separates it from what precedes it."""

    text: str
    blank_before: bool = False


@dataclass
class ItemComments:
    """The comments of one item. ``tokens`` are the item's source tokens (without parentheses);
    ``before`` and ``after`` hold, per token index, the comments on lines of their own before
    it and those at the end of its line."""

    tokens: list[str] = field(default_factory=list)
    leading: list[Note] = field(default_factory=list)
    blank_after_leading: bool = False
    before: dict[int, list[str]] = field(default_factory=dict)
    after: dict[int, list[str]] = field(default_factory=dict)
    closing: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FileComments:
    items: tuple[ItemComments, ...]
    end: tuple[Note, ...]  # comments after the last item (or in a file without items)


class Unplaceable(Exception):
    """The tokens found do not line up with the parsed items (a bug, never bad input): the file
    is left alone rather than risking a comment."""


@dataclass(frozen=True)
class _Tok:
    type: str
    text: str
    start: int
    line: int
    column: int


def collect(tree: ast.RulesFile) -> FileComments:
    """Attach every comment of a parsed file (one without syntax errors) to its place."""
    tokens, notes = _scan(tree.source.text)
    starts = _item_starts(tokens)
    if len(starts) != len(tree.items):
        raise Unplaceable(f"{len(starts)} item keywords for {len(tree.items)} items")
    bounds = list(zip(starts, [*starts[1:], len(tokens)], strict=False))
    for (first, last), item in zip(bounds, tree.items, strict=True):
        if not tokens[first].start <= item.span.start <= tokens[last - 1].start:
            raise Unplaceable(f"item at offset {item.span.start} is not where its keyword is")
    owner = [0] * len(tokens)  # each token's item
    items = []
    for index, (first, last) in enumerate(bounds):
        owner[first:last] = [index] * (last - first)
        items.append(ItemComments(tokens=[t.text for t in tokens[first:last]]))
    end: list[Note] = []
    last_leading: dict[int, int] = {}  # item -> the line of its last leading comment
    previous_line = 0  # the line of the last token or comment seen
    closing_line = -1  # the last line of an item or of its closing comments, if just seen
    following = 0  # the first token after the comment
    for note in notes:
        while following < len(tokens) and tokens[following].start < note.start:
            previous_line = closing_line = tokens[following].line
            following += 1
        prev = following - 1 if following else None
        after_item = owner[prev] if prev is not None else None
        before_item = owner[following] if following < len(tokens) else None
        text = note.text.rstrip()
        blank = note.line - previous_line > 1 and previous_line > 0
        if prev is not None and after_item is not None and tokens[prev].line == note.line:  # ends a line
            items[after_item].after.setdefault(prev - bounds[after_item][0], []).append(text)
        elif after_item is not None and after_item == before_item:  # alone on a line inside an item
            items[after_item].before.setdefault(following - bounds[after_item][0], []).append(text)
        elif after_item is not None and note.column > 1 and note.line == closing_line + 1:
            items[after_item].closing.append(text)  # indented, right under the item
            closing_line = note.line
        elif before_item is not None:
            items[before_item].leading.append(Note(text, blank))
            last_leading[before_item] = note.line
            closing_line = -1
        else:
            end.append(Note(text, blank))
            closing_line = -1
        previous_line = note.line
    for index, line in last_leading.items():
        items[index].blank_after_leading = tokens[bounds[index][0]].line - line > 1
    return FileComments(tuple(items), tuple(end))


def placed(item: ItemComments, printed: Sequence[str]) -> tuple[dict[int, list[str]], dict[int, list[str]]]:
    """``before`` and ``after`` of an item re-indexed onto the printer's tokens ``printed``."""
    if list(printed) == item.tokens:
        return item.before, item.after
    mapping: list[int | None] = [None] * len(item.tokens)
    matcher = difflib.SequenceMatcher(None, item.tokens, list(printed), autojunk=False)
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            mapping[block.a + i] = block.b + i
    last = max(len(printed) - 1, 0)

    def forward(index: int) -> int:  # the first matched token at or after index
        for j in range(index, len(mapping)):
            if (target := mapping[j]) is not None:
                return target
        return last

    def backward(index: int) -> int:  # the last matched token at or before index
        for j in range(min(index, len(mapping) - 1), -1, -1):
            if (target := mapping[j]) is not None:
                return target
        return 0

    before: dict[int, list[str]] = {}
    after: dict[int, list[str]] = {}
    for index, texts in sorted(item.before.items()):
        before.setdefault(forward(index), []).extend(texts)
    for index, texts in sorted(item.after.items()):
        after.setdefault(backward(index), []).extend(texts)
    return before, _header_ends(after, printed)


def _header_ends(after: dict[int, list[str]], printed: Sequence[str]) -> dict[int, list[str]]:
    """Where the printer wrote an item differently (options reordered, ``when true`` left out),
    end-of-line comments among its header's words (``score NAME weight N normalize M``, one
    line) end that line: after the ``:``, or before ``when`` or ``unresolvable``, or at the end
    of a one-line item. A let keeps its own."""
    if not printed or printed[0] == "let":
        return after
    stops = [i for i, text in enumerate(printed) if text in ("when", ":", "unresolvable")]
    end = len(printed) - 1 if not stops else stops[0] if printed[stops[0]] == ":" else stops[0] - 1
    moved: dict[int, list[str]] = {}
    for index, texts in sorted(after.items()):
        moved.setdefault(end if index < end else index, []).extend(texts)
    return moved


def _scan(text: str) -> tuple[list[_Tok], list[_Tok]]:
    """The significant tokens and the comments."""
    tokens: list[_Tok] = []
    notes: list[_Tok] = []
    for tok in lex(text):
        if tok.type == "COMMENT":
            notes.append(_tok(tok))
        elif tok.type != "WS":
            tokens.append(_tok(tok))
    return tokens, notes


def _tok(tok: LarkToken) -> _Tok:
    return _Tok(tok.type, str(tok), int(tok.start_pos or 0), int(tok.line or 1), int(tok.column or 1))


def _item_starts(tokens: list[_Tok]) -> list[int]:
    starts = []
    for i, tok in enumerate(tokens):
        if tok.type not in _ITEM_STARTS or (i and tokens[i - 1].type == "DOT"):
            continue
        if tok.type in _RULE_KINDS and i and tokens[i - 1].type in ("OVERRIDE", "DISABLE"):
            continue
        starts.append(i)
    return starts
