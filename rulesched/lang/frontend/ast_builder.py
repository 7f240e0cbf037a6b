"""Build the AST (:mod:`rulesched.lang.frontend.ast`) while lark parses: the transformer
:mod:`rulesched.lang.frontend.parse` hands its LALR parser, one method per grammar rule
(``grammar/rules.lark``), called on each reduction so a long input costs no recursion.

Atoms (numbers with their units, strings, names) and operators become expressions; rule
headers, options and bodies become items. A construct the grammar admits but the language
refuses (a reserved word as a name, an impossible quantity, an override stating nothing) raises
:class:`ParseFailed` with its located diagnostic.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from lark import Token, Transformer, v_args

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
_DURATION_SECONDS = {"ms": 0.001, "s": 1.0, "min": 60.0, "h": 3600.0}
_NUMBER = re.compile(r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)([A-Za-z]*)")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


class ParseFailed(Exception):
    """Input the grammar admits and the language refuses (or lark cannot parse), located."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@v_args(inline=True)
class AstBuilder(Transformer[Token, Any]):
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
