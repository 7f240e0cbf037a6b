"""Parse rules text into the AST (:mod:`rulesched.lang.frontend.ast`), with located syntax errors.

The grammar is data (``grammar/rules.lark``) read by lark's LALR parser. The tree is built while
parsing (lark applies the transformer on each reduction), so a pathological input — a megabyte of
``1+1+…`` — costs no recursion. Expressions nested deeper than :data:`MAX_DEPTH` are refused here,
which bounds every later recursive stage.

A file that fails to parse is parsed again item by item (an item starts at a line beginning with a
top-level keyword) so that one syntax error does not hide the problems in the other rules.
Next stage: :mod:`rulesched.lang.frontend.check`.
"""

from __future__ import annotations

import copy
import functools
import math
import re
import threading
from collections.abc import Iterator
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any

import lark
from lark import Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
from lark.lexer import BasicLexer, LexerThread

from rulesched.lang.builtins.groups import GROUP_FIELDS, GROUP_VARIABLE, builtin_name
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.source import Diagnostic, Source, Span, error
from rulesched.model.quantity import QuantityError, parse_quantity

# Words the grammar gives a meaning to. lark's contextual lexer would accept most of them as
# names where no keyword fits; they are refused as names of rules, lets and variables so that a
# file means the same to every reader. (Field names after "." are free: p.weight is fine.)
RESERVED = frozenset(
    {
        "let",
        "filter",
        "score",
        "preempt",
        "disable",
        "override",
        "audit",
        "extends",
        "weight",
        "normalize",
        "when",
        "else",
        "order",
        "if",
        "then",
        "and",
        "or",
        "not",
        "in",
        "where",
        "for",
        "unresolvable",
        "true",
        "false",
        "count",
        "any",
        "all",
        "sum",
        "min",
        "max",
        "collect",
    }
)
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
# An item's keyword (not a field name after "."), and the name that follows it, if any.
_ITEM_HEAD = re.compile(
    r"(?<![\w.])(let|filter|score|preempt|disable|override|extends)(?![\w])(?:\s+(?!(?:filter|score|preempt)\b)([A-Za-z_]\w*))?"
)
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|#[^\n]*')
_RULE_KINDS = ("filter", "score", "preempt")
_ITEM_STARTS = frozenset({"LET", "FILTER", "SCORE", "PREEMPT", "DISABLE", "OVERRIDE", "AUDIT", "EXTENDS"})
_DURATION_SECONDS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)([A-Za-z]*)")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
_TERMINAL_NAMES = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "COMPARE": "a comparison",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "MUL_OP": "'*', '/', '//' or '%'",
    "COLON": "':'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "DOT": "'.'",
    "EQUAL": "'='",
    "QUANTIFIER": "count/any/all",
    "AGGREGATE": "sum/min/max/collect",
    "TABLE": "table",
    "$END": "end of file",
    "OVERRIDE": "'override'",
    "AUDIT": "'audit'",
    "UNRESOLVABLE": "'unresolvable'",
}


def grammar_text() -> str:
    """The grammar, from the installed package or, in a source checkout, from ``grammar/``."""
    packaged = resources.files("rulesched").joinpath("_data/grammar/rules.lark")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8")
    return (Path(__file__).resolve().parents[3] / "grammar" / "rules.lark").read_text(encoding="utf-8")


class ParseFailed(Exception):
    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@v_args(inline=True)
class _Builder(Transformer[Token, Any]):
    """Builds AST nodes while lark reduces; ``offset`` places a re-parsed item in its file."""

    def __init__(self, source: Source, offset: int) -> None:
        super().__init__()
        self.source = source
        self.offset = offset

    def _span(self, first: Any, last: Any) -> Span:
        return Span(self.source, self._start(first), self._end(last))

    def _start(self, obj: Any) -> int:
        if isinstance(obj, Token):
            return self.offset + int(obj.start_pos or 0)
        return int(obj.span.start)

    def _end(self, obj: Any) -> int:
        if isinstance(obj, Token):
            return self.offset + int(obj.end_pos or 0)
        return int(obj.span.end)

    def _tok_span(self, tok: Token) -> Span:
        return Span(self.source, self.offset + (tok.start_pos or 0), self.offset + (tok.end_pos or 0))

    # --- atoms -------------------------------------------------------------------------------
    def number(self, tok: Token) -> ast.Literal:
        return _number_literal(str(tok), self._tok_span(tok))

    def string(self, tok: Token) -> ast.Literal:
        text = str(tok)
        value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text[1:-1])
        return ast.Literal(ast.LiteralKind.STRING, value, text, span=self._tok_span(tok))

    def true(self, *tok: Token) -> ast.Literal:
        return ast.Literal(ast.LiteralKind.BOOL, True, "true", span=self._anon_span(tok, "true"))

    def false(self, *tok: Token) -> ast.Literal:
        return ast.Literal(ast.LiteralKind.BOOL, False, "false", span=self._anon_span(tok, "false"))

    def _anon_span(self, toks: tuple[Token, ...], word: str) -> Span:
        if toks:
            return self._tok_span(toks[0])
        return Span(self.source, self.offset, self.offset + len(word))  # pragma: no cover

    def _word(self, tok: Token) -> str:
        """A name being defined or bound: reserved words are refused."""
        if str(tok) in RESERVED:
            raise ParseFailed(
                error("syntax", f"'{tok}' is a reserved word and cannot be used as a name", self._tok_span(tok))
            )
        return str(tok)

    def name(self, tok: Token) -> ast.Name:
        return ast.Name(self._word(tok), span=self._tok_span(tok))

    def list(self, open_: Token, *items: Any) -> ast.ListExpr:
        exprs = tuple(i for i in items[:-1] if i is not None)
        return ast.ListExpr(exprs, span=self._span(open_, items[-1]))

    # --- operators ---------------------------------------------------------------------------
    def attr(self, obj: ast.Expr, name: Token) -> ast.Attr | ast.Call:
        if isinstance(obj, ast.Name) and obj.id == GROUP_VARIABLE and str(name) in GROUP_FIELDS:
            # group.FIELD: the group being placed, a built-in call (rulesched.lang.builtins.groups)
            return ast.Call(builtin_name(str(name)), (), span=self._span(obj, name))
        return ast.Attr(obj, str(name), span=self._span(obj, name))

    def index(self, obj: ast.Expr, key: ast.Expr) -> ast.Index:
        return ast.Index(obj, key, span=self._span(obj, key))

    def call(self, func: Token, *args: Any) -> ast.Call:
        exprs = tuple(a for a in args if a is not None)
        return ast.Call(str(func), exprs, span=self._span(func, exprs[-1] if exprs else func))

    def neg(self, op: Token, operand: ast.Expr) -> ast.Unary:
        return ast.Unary("-", operand, span=self._span(op, operand))

    def not_op(self, op: Token, operand: ast.Expr) -> ast.Unary:
        return ast.Unary("not", operand, span=self._span(op, operand))

    def arith(self, left: ast.Expr, op: Token, right: ast.Expr) -> ast.Binary:
        return ast.Binary(str(op), left, right, span=self._span(left, right))

    compare = arith

    def in_op(self, left: ast.Expr, right: ast.Expr) -> ast.Binary:
        return ast.Binary("in", left, right, span=self._span(left, right))

    def not_in_op(self, left: ast.Expr, right: ast.Expr) -> ast.Binary:
        return ast.Binary("not in", left, right, span=self._span(left, right))

    def and_op(self, left: ast.Expr, right: ast.Expr) -> ast.Binary:
        return ast.Binary("and", left, right, span=self._span(left, right))

    def or_op(self, left: ast.Expr, right: ast.Expr) -> ast.Binary:
        return ast.Binary("or", left, right, span=self._span(left, right))

    def if_expr(self, keyword: Token, cond: ast.Expr, then: ast.Expr, otherwise: ast.Expr) -> ast.If:
        return ast.If(cond, then, otherwise, span=self._span(keyword, otherwise))

    def quantifier(self, kind: Token, var: Token, iterable: ast.Expr, where: Any = None) -> ast.Quantifier:
        return ast.Quantifier(str(kind), self._word(var), iterable, where, span=self._span(kind, where or iterable))

    def aggregate(
        self, kind: Token, value: ast.Expr, var: Token, iterable: ast.Expr, where: Any = None
    ) -> ast.Aggregate:
        span = self._span(kind, where or iterable)
        return ast.Aggregate(str(kind), value, self._word(var), iterable, where, span=span)

    def where(self, expr: ast.Expr) -> ast.Expr:
        return expr

    def table(self, keyword: Token, *parts: Any) -> ast.Table:
        """``table(c1, ...) [row, ...]``: the column names, then ``[``, the rows (lists), ``]``."""
        columns = tuple(self._word(p) for p in parts if isinstance(p, Token) and p.type == "NAME")
        rows = tuple(p for p in parts if isinstance(p, ast.ListExpr))
        return ast.Table(rows, columns, span=self._span(keyword, parts[-1]))

    # --- items -------------------------------------------------------------------------------
    def let_def(self, name: Token, value: ast.Expr) -> ast.Let:
        return ast.Let(self._word(name), value, span=self._span(name, value), name_span=self._tok_span(name))

    def guard(self, expr: ast.Expr) -> tuple[str, ast.Expr]:
        return ("guard", expr)

    def order(self, expr: ast.Expr) -> tuple[str, ast.Expr]:
        return ("order", expr)

    def unresolvable(self, keyword: Token, condition: Any = None) -> tuple[str, ast.Expr]:
        """``unresolvable`` alone is ``unresolvable when true``: every failure (the literal keeps
        the keyword's place, so that an item ending with it is spanned to its end)."""
        if condition is None:
            condition = ast.Literal(ast.LiteralKind.BOOL, True, span=self._tok_span(keyword))
        return ("unresolvable", condition)

    def weight(self, value: ast.Literal) -> tuple[str, ast.Expr]:
        return ("weight", value)

    def score_target(self, name: Token) -> tuple[str, Token]:
        return ("target", name)

    def normalize(self, name: Token) -> tuple[str, Token]:
        return ("normalize", name)  # the token, so that a header ending with it gets its span

    def filter_rule(self, *parts: Any) -> ast.Rule:
        return self._rule(ast.RuleKind.FILTER, parts)

    def score_rule(self, *parts: Any) -> ast.Rule:
        return self._rule(ast.RuleKind.SCORE, parts)

    def preempt_rule(self, *parts: Any) -> ast.Rule:
        return self._rule(ast.RuleKind.PREEMPT, parts)

    def _rule(self, kind: ast.RuleKind, parts: tuple[Any, ...]) -> ast.Rule:
        audit = bool(parts) and isinstance(parts[0], Token) and parts[0].type == "AUDIT"
        first = parts[0]
        if audit:
            parts = parts[1:]
        override = bool(parts) and isinstance(parts[0], Token) and parts[0].type == "OVERRIDE"
        rest = list(parts[1:] if override else parts)
        name = rest.pop(0)
        self._word(name)
        options: dict[str, Any] = {}
        exprs: list[ast.Expr] = []
        for part in rest:
            if part is None:
                continue
            if isinstance(part, tuple):
                options[part[0]] = part[1]
            else:
                exprs.append(part)
        body = exprs[0]
        reason = exprs[1] if len(exprs) > 1 else None
        last = options.get("unresolvable") or options.get("order") or reason or body
        if not audit:
            first = parts[0]
        normalize = options.get("normalize")
        return ast.Rule(
            kind,
            str(name),
            body,
            guard=options.get("guard"),
            override=override,
            reason=reason,
            weight=options.get("weight"),
            normalize=str(normalize) if normalize is not None else None,
            order=options.get("order"),
            unresolvable=options.get("unresolvable"),
            audit=audit,
            target=str(options["target"]) if "target" in options else "node",
            span=self._span(first, last),
            name_span=self._tok_span(name),
        )

    def filter_header(self, *parts: Any) -> ast.PartialOverride:
        return self._header(ast.RuleKind.FILTER, parts)

    def score_header(self, *parts: Any) -> ast.PartialOverride:
        return self._header(ast.RuleKind.SCORE, parts)

    def preempt_header(self, *parts: Any) -> ast.PartialOverride:
        return self._header(ast.RuleKind.PREEMPT, parts)

    def _header(self, kind: ast.RuleKind, parts: tuple[Any, ...]) -> ast.PartialOverride:
        """``override KIND NAME [options] [when GUARD]`` with no body: what it states, and no more."""
        audit = isinstance(parts[0], Token) and parts[0].type == "AUDIT"
        start = parts[0]
        if audit:
            parts = parts[1:]
        override, name, *rest = parts
        if not audit:
            start = override
        self._word(name)
        options: dict[str, Any] = {}
        last: Any = name
        for part in rest:
            if part is not None:
                options[part[0]] = last = part[1]
        if not options and not audit:
            what = {
                ast.RuleKind.SCORE: "`weight N`, `normalize MODE` or `when GUARD`",
                ast.RuleKind.FILTER: "`when GUARD` or `unresolvable [when COND]`",
            }.get(kind, "`when GUARD`")
            raise ParseFailed(
                error(
                    "syntax",
                    f"override {kind.value} '{name}' changes nothing: state {what}, or a whole rule with ': BODY'",
                    self._tok_span(name),
                )
            )
        normalize = options.get("normalize")
        return ast.PartialOverride(
            kind,
            str(name),
            guard=options.get("guard"),
            weight=options.get("weight"),
            normalize=str(normalize) if normalize is not None else None,
            unresolvable=options.get("unresolvable"),
            audit=audit,
            span=self._span(start, last),
            name_span=self._tok_span(name),
        )

    def extends(self, target: Token) -> ast.Extends:
        return ast.Extends(self.string(target).value, span=self._tok_span(target))  # type: ignore[arg-type]

    def kind_filter(self) -> ast.RuleKind:
        return ast.RuleKind.FILTER

    def kind_score(self) -> ast.RuleKind:
        return ast.RuleKind.SCORE

    def kind_preempt(self) -> ast.RuleKind:
        return ast.RuleKind.PREEMPT

    def disable_rule(self, kind: ast.RuleKind | None, name: Token) -> ast.Disable:
        return ast.Disable(self._word(name), kind, span=self._tok_span(name))


def _number_literal(text: str, span: Span) -> ast.Literal:
    match = _NUMBER.fullmatch(text)
    assert match is not None  # the lexer admits only this shape
    digits, suffix = match.groups()
    if suffix in _DURATION_SECONDS:
        try:
            seconds = float(Decimal(digits) * Decimal(str(_DURATION_SECONDS[suffix])))
        except ArithmeticError:  # an exponent beyond what Decimal holds
            seconds = math.inf
        if not math.isfinite(seconds):
            raise ParseFailed(error("syntax", f"'{text}' is too long a duration", span))
        return ast.Literal(ast.LiteralKind.DURATION, seconds, text, span=span)
    if suffix:
        try:
            return ast.Literal(ast.LiteralKind.QUANTITY, parse_quantity(text), text, span=span)
        except QuantityError as err:
            raise ParseFailed(error("syntax", str(err), span)) from err
    value: int | float = int(digits) if digits.isdigit() else float(digits)
    return ast.Literal(ast.LiteralKind.NUMBER, value, text, span=span)


class _Parser:
    """One LALR parser (its tables are costly to build) whose builder is pointed at each input
    in turn; the lock keeps concurrent reloads from sharing a builder mid-parse."""

    def __init__(self) -> None:
        self.builder = _Builder(Source("<none>", ""), 0)
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
        raise ParseFailed(_syntax_diagnostic(source, err, offset, offset + len(text))) from None
    except VisitError as err:  # a callback refused a token, e.g. an impossible quantity
        if isinstance(err.orig_exc, ParseFailed):
            raise err.orig_exc from None
        raise
    return list(tree.children)


def _syntax_diagnostic(source: Source, err: UnexpectedInput, offset: int, end: int) -> Diagnostic:
    position = offset + err.pos_in_stream if err.pos_in_stream is not None else end
    if isinstance(err, UnexpectedCharacters):
        char = source.text[position] if position < len(source.text) else ""
        shown = repr(char) if char.isprintable() else f"character U+{ord(char):04X}" if char else "end of file"
        return error("syntax", f"unexpected {shown}", Span(source, position, position + 1))
    names = _expected(err)
    tail = []
    if _ITEM_STARTS <= names:  # what may follow a complete item: one phrase, not seven keywords
        names -= _ITEM_STARTS | {"$END"}
        tail = ["a new item"]
    expected = sorted({_TERMINAL_NAMES.get(t, repr(t.lower()) if t.isupper() else t) for t in names}) + tail
    hint = ("expected " + ", ".join(expected[:8]) + (", ..." if len(expected) > 8 else "")) if expected else ""
    if isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END"):
        end = offset + len(_without_comments(source.text[offset:end]).rstrip()) or end
        what = f"unexpected end of {_item_being_parsed(source.text, offset, end) or 'file'}"
        return error("syntax", what + (f"; {hint}" if hint else ""), Span(source, max(0, end - 1), end))
    assert isinstance(err, UnexpectedToken)
    token = err.token
    length = max(1, len(str(token)))
    return error(
        "syntax",
        f"unexpected {str(token)!r}" + (f"; {hint}" if hint else ""),
        Span(source, position, position + length),
    )


def _without_comments(text: str) -> str:
    """The text with each comment blanked (a '#' inside a string is kept)."""
    return _STRINGS_AND_COMMENTS.sub(lambda m: m.group() if m.group().startswith('"') else " " * len(m.group()), text)


def _item_being_parsed(text: str, start: int, end: int) -> str:
    """What the input ending at ``end`` was in the middle of: ``score 'fit'``, ``let 'x'``, or the
    keyword of an item that has no name yet (``override``); "" when there is none. Strings and
    comments are blanked first, and a keyword after "." is a field name, not an item."""
    masked = _STRINGS_AND_COMMENTS.sub(lambda m: " " * len(m.group()), text[start:end])
    described = ""
    waiting = ""  # an `override` or `disable` whose rule kind comes next
    waiting_end = 0
    for match in _ITEM_HEAD.finditer(masked):
        keyword, name = match.group(1), match.group(2)
        if keyword in _RULE_KINDS and waiting and not masked[waiting_end : match.start()].strip():
            if waiting == "override":
                described = f"{keyword} '{name}'" if name else "override"
            waiting = ""
            continue
        if keyword in ("override", "disable") and name is None:
            described, waiting, waiting_end = keyword, keyword, match.end()
            continue
        waiting = ""
        described = f"{keyword} '{name}'" if name and keyword in ("let", *_RULE_KINDS) else keyword
    return described


def _expected(err: UnexpectedInput) -> set[str]:
    expected = getattr(err, "expected", None) or getattr(err, "accepts", None) or set()
    return {str(name) for name in expected}


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
