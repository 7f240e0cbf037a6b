"""Parse rules text into the AST (:mod:`rulesched.lang.frontend.ast`), with located syntax errors.

The grammar is data (``grammar/rules.lark``) read by lark's LALR parser. The tree is built while
parsing (lark applies the transformer, :mod:`rulesched.lang.frontend.ast_builder`, on each
reduction), so a pathological input — a megabyte of ``1+1+…`` — costs no recursion. Expressions nested deeper than :data:`MAX_DEPTH` are refused here,
which bounds every later recursive stage.

A file that fails to parse is parsed again item by item (an item starts at a line beginning with a
top-level keyword) so that one syntax error does not hide the problems in the other rules; each
error says what it met and what may come instead (:mod:`rulesched.lang.frontend.syntax_errors`).
Next stage: :mod:`rulesched.lang.frontend.check`.
"""

from __future__ import annotations

import copy
import functools
import re
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import lark
from lark import Token
from lark.exceptions import UnexpectedInput, VisitError
from lark.lexer import BasicLexer, LexerThread

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.ast_builder import AstBuilder, ParseFailed
from rulesched.lang.frontend.source import Diagnostic, Source, Span, error
from rulesched.lang.frontend.syntax_errors import syntax_diagnostic

MAX_DEPTH = 64
MAX_LINE_CHARS = 4_000
MAX_FILE_CHARS = 2_000_000
# lark's parser takes about 10 us a token: a file of 2 MB of `1+1+...` would hold the reloader for
# 15 s. The bundled default.rules has about 2,500 tokens.
MAX_TOKENS = 100_000
# Tokens as the limit counts them: a string, a word or number, any other character; comments
# are not counted.
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|#[^\n]*|\w+|\S')
_TOP_LEVEL = re.compile(r"^(?:let|filter|score|preempt|disable|override|audit|extends)\b", re.MULTILINE)
_RULE_START = re.compile(r"(?:filter|score|preempt|override|audit)\b")  # an item that is a rule (lint counts it)


def grammar_text() -> str:
    """The grammar, from the installed package or, in a source checkout, from ``grammar/``."""
    packaged = resources.files("rulesched").joinpath("_data/grammar/rules.lark")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[3] / "grammar" / "rules.lark").read_text(encoding="utf-8")


class _Parser:
    """One LALR parser (its tables are costly to build) whose builder is pointed at each input
    in turn; the lock keeps concurrent reloads from sharing a builder mid-parse."""

    def __init__(self) -> None:
        self.builder = AstBuilder(Source("<none>", ""), 0)
        self.lark = lark.Lark(grammar_text(), parser="lalr", transformer=self.builder, maybe_placeholders=True)
        self.lock = threading.Lock()
        every = copy.copy(self.lark.lexer_conf)
        every.ignore = ()  # whitespace and comments too
        self.every_token = BasicLexer(every)

    def parse(self, source: Source, text: str, offset: int) -> Any:
        with self.lock:
            self.builder.source, self.builder.offset = source, offset
            return self.lark.parse(text)


@functools.lru_cache(maxsize=1)
def _parser() -> _Parser:
    return _Parser()


def lex(text: str) -> Iterator[Token]:
    """Every token of a text, whitespace and comments included (for ``rulesched fmt``, which
    finds the comments the grammar ignores); the text must lex (it parsed)."""
    thread = LexerThread.from_text(_parser().every_token, text)
    tokens: Iterator[Token] = thread.lex(None)  # type: ignore[no-untyped-call]
    return tokens


def parse_source(source: Source) -> tuple[ast.RulesFile, list[Diagnostic]]:
    """Parse one file. On syntax errors, recover per item and return every error found."""
    limit = _over_limits(source)
    if limit is not None:
        return ast.RulesFile(source, ()), [limit]
    unparsed = 0
    try:
        items = _parse_chunk(source, source.text, 0)
        diagnostics: list[Diagnostic] = []
    except ParseFailed as failed:
        items, diagnostics, unparsed = _parse_by_items(source, failed.diagnostic)
    for item in items:
        deep = _too_deep(item)
        if deep is not None:
            diagnostics.append(error("too-deep", f"expression nested more than {MAX_DEPTH} levels deep", deep.span))
    items = [item for item in items if _too_deep(item) is None]
    return ast.RulesFile(source, tuple(items), unparsed), diagnostics


def _over_limits(source: Source) -> Diagnostic | None:
    """Refuse inputs no reviewed rules file needs, before spending parser time on them."""
    if len(source.text) > MAX_FILE_CHARS:
        return error(
            "too-large", f"rules file is {len(source.text):,} characters; the limit is {MAX_FILE_CHARS:,}", None
        )
    offset = 0
    for line in source.text.split("\n"):
        if len(line) > MAX_LINE_CHARS:
            span = Span(source, offset + MAX_LINE_CHARS, offset + MAX_LINE_CHARS + 1)
            return error("too-long", f"line is {len(line):,} characters long; the limit is {MAX_LINE_CHARS:,}", span)
        offset += len(line) + 1
    tokens = 0
    for match in _TOKENS.finditer(source.text):
        if match.group().startswith("#"):
            continue
        tokens += 1
        if tokens > MAX_TOKENS:
            span = Span(source, match.start(), match.end())
            return error("too-large", f"rules file has more than {MAX_TOKENS:,} tokens (words, numbers, symbols)", span)
    return None


def _parse_by_items(source: Source, first: Diagnostic) -> tuple[list[ast.Item], list[Diagnostic], int]:
    """The items that parse, the errors of those that do not, and how many of those were rules."""
    starts = [m.start() for m in _TOP_LEVEL.finditer(source.text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    starts.append(len(source.text))
    items: list[ast.Item] = []
    diagnostics: list[Diagnostic] = []
    unparsed = 0
    for begin, end in zip(starts, starts[1:], strict=False):
        try:
            items.extend(_parse_chunk(source, source.text[begin:end], begin))
        except ParseFailed as failed:
            diagnostics.append(failed.diagnostic)
            unparsed += _RULE_START.match(source.text, begin) is not None
    if not diagnostics:  # the whole-file error did not reproduce per item; report it as found
        diagnostics.append(first)
    return items, diagnostics, unparsed


def _parse_chunk(source: Source, text: str, offset: int) -> list[ast.Item]:
    try:
        tree = _parser().parse(source, text, offset)
    except UnexpectedInput as err:
        raise ParseFailed(syntax_diagnostic(source, err, offset, offset + len(text))) from None
    except VisitError as err:  # a callback refused a token, e.g. an impossible quantity
        if isinstance(err.orig_exc, ParseFailed):
            raise err.orig_exc from None
        raise
    return list(tree.children)


def _too_deep(item: ast.Item) -> ast.Expr | None:
    """The first expression nested deeper than MAX_DEPTH, found without recursion."""
    roots: list[ast.Expr] = []
    if isinstance(item, ast.Let):
        roots.append(item.value)
    elif isinstance(item, ast.Rule):
        roots.extend(e for e in (item.body, item.guard, item.reason, item.order, item.unresolvable) if e is not None)
    elif isinstance(item, ast.PartialOverride):
        roots.extend(e for e in (item.guard, item.unresolvable) if e is not None)
    stack = [(root, 1) for root in roots]
    while stack:
        expr, depth = stack.pop()
        if depth > MAX_DEPTH:
            return expr
        stack.extend((child, depth + 1) for child in ast.children(expr))
    return None
