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

Positions inside an item are counted in tokens, leaving out parentheses, which the printer drops
where precedence makes them redundant: a comment after a dropped ``)`` follows the token before
it, one after a dropped ``(`` precedes the token after it, still on the nearest line. The printer
emits the same tokens as the source but for those parentheses, and for a rule header's options,
which it writes in its own order (``weight`` before ``normalize``); a comment among reordered
options follows the same option token where it went (the tokens are matched by
:class:`difflib.SequenceMatcher`). The formatter (:mod:`rulesched.lang.frontend.format`) weaves
the comments into the printer's document.
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
_CALLABLE = frozenset({"NAME", "QUANTIFIER", "AGGREGATE"})  # a "(" right after one opens a call


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
    grouping: bool = False  # a parenthesis for precedence, not a call's


def collect(tree: ast.RulesFile) -> FileComments:
    """Attach every comment of a parsed file (one without syntax errors) to its place."""
    tokens, notes = _scan(tree.source.text)
    starts = _item_starts(tokens)
    if len(starts) != len(tree.items):
        raise Unplaceable(f"{len(starts)} item keywords for {len(tree.items)} items")
    bounds = list(zip(starts, [*starts[1:], len(tokens)], strict=True))
    for (first, last), item in zip(bounds, tree.items, strict=True):
        if not tokens[first].start <= item.span.start <= tokens[last - 1].start:
            raise Unplaceable(f"item at offset {item.span.start} is not where its keyword is")
    owner = [0] * len(tokens)
    items = []
    for index, (first, last) in enumerate(bounds):
        owner[first:last] = [index] * (last - first)
        items.append(ItemComments(tokens=[t.text for t in tokens[first:last] if not t.grouping]))
    # each token's index among its item's tokens without parentheses (-1 for a parenthesis)
    counted = [-1] * len(tokens)
    for first, last in bounds:
        k = 0
        for i in range(first, last):
            if not tokens[i].grouping:
                counted[i], k = k, k + 1
    end: list[Note] = []
    last_leading: dict[int, int] = {}  # item -> the line of its last leading comment
    previous_line = 0  # the line of the last token or comment seen
    closing_line = -1  # the last line of an item or of its closing comments, if just seen
    next_token = 0
    for note in notes:
        while next_token < len(tokens) and tokens[next_token].start < note.start:
            previous_line = closing_line = tokens[next_token].line
            next_token += 1
        prev = next_token - 1 if next_token else None
        after_item = owner[prev] if prev is not None else None
        before_item = owner[next_token] if next_token < len(tokens) else None
        text = note.text.rstrip()
        blank = note.line - previous_line > 1 and previous_line > 0
        if prev is not None and tokens[prev].line == note.line:  # at the end of a line
            item = items[owner[prev]]
            item.after.setdefault(_counted_at_or_before(counted, prev, bounds[owner[prev]][0]), []).append(text)
        elif after_item is not None and after_item == before_item:  # alone on a line inside an item
            index = _counted_at_or_after(counted, next_token, bounds[after_item][1])
            if index is None:
                items[after_item].closing.append(text)
            else:
                items[after_item].before.setdefault(index, []).append(text)
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
    return before, after


def _scan(text: str) -> tuple[list[_Tok], list[_Tok]]:
    """The significant tokens (parentheses for precedence marked) and the comments."""
    tokens: list[_Tok] = []
    notes: list[_Tok] = []
    opened: list[bool] = []  # for each "(" still open: whether it groups (not a call's)
    for tok in lex(text):
        found = _tok(tok)
        if found.type == "WS":
            continue
        if found.type == "COMMENT":
            notes.append(found)
            continue
        if found.type == "LPAR":
            grouping = not tokens or tokens[-1].type not in _CALLABLE
            opened.append(grouping)
            found = _Tok(found.type, found.text, found.start, found.line, found.column, grouping)
        elif found.type == "RPAR" and opened:
            found = _Tok(found.type, found.text, found.start, found.line, found.column, opened.pop())
        tokens.append(found)
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


def _counted_at_or_before(counted: list[int], index: int, first: int) -> int:
    while index > first and counted[index] < 0:
        index -= 1
    return max(counted[index], 0)


def _counted_at_or_after(counted: list[int], index: int, last: int) -> int | None:
    while index < last and counted[index] < 0:
        index += 1
    return counted[index] if index < last else None
