"""The rules AST: frozen values with a span on every node.

Built by :mod:`rulesched.lang.frontend.parse`, printed back by :mod:`rulesched.lang.frontend.printer`, checked by
:mod:`rulesched.lang.frontend.check`. Spans are left out of equality, so ``parse(print(tree)) == tree``
is the round-trip property.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from rulesched.lang.frontend.source import Source, Span


class LiteralKind(Enum):
    NUMBER = "number"  # int or float
    QUANTITY = "quantity"  # int milli-units
    DURATION = "duration"  # float seconds
    STRING = "string"
    BOOL = "bool"


@dataclass(frozen=True)
class Node:
    span: Span = field(compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Literal(Node):
    kind: LiteralKind
    value: object
    text: str = field(compare=False, default="")  # as written: 500m stays 500m when printed


@dataclass(frozen=True)
class ListExpr(Node):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Table(ListExpr):
    """``table(c1, c2, ...) [[v1, v2, ...], ...]``: data a policy ships, a list of rows whose
    cells are constants (``items`` are the rows, each a :class:`ListExpr` of one cell per
    column); a row's cells are read as ``row.c1``. Being a list, every stage that knows lists
    knows it (its length is known when the rules load); the checker types its rows as records."""

    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Name(Node):
    id: str


@dataclass(frozen=True)
class Attr(Node):
    obj: Expr
    name: str


@dataclass(frozen=True)
class Index(Node):
    obj: Expr
    key: Expr


@dataclass(frozen=True)
class Call(Node):
    func: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Unary(Node):
    op: str  # "-" | "not"
    operand: Expr


@dataclass(frozen=True)
class Binary(Node):
    op: str  # + - * / // % == != < <= > >= in "not in" and or
    left: Expr
    right: Expr


@dataclass(frozen=True)
class If(Node):
    cond: Expr
    then: Expr
    otherwise: Expr


@dataclass(frozen=True)
class Quantifier(Node):
    """``count|any|all(var in iterable where cond)``."""

    kind: str
    var: str
    iterable: Expr
    where: Expr | None


@dataclass(frozen=True)
class Aggregate(Node):
    """``sum|min|max|collect(value for var in iterable where cond)``."""

    kind: str
    value: Expr
    var: str
    iterable: Expr
    where: Expr | None


Expr = Literal | ListExpr | Name | Attr | Index | Call | Unary | Binary | If | Quantifier | Aggregate


class RuleKind(Enum):
    FILTER = "filter"
    SCORE = "score"
    PREEMPT = "preempt"


@dataclass(frozen=True)
class Let(Node):
    name: str
    value: Expr
    name_span: Span = field(compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Rule(Node):
    kind: RuleKind
    name: str
    body: Expr
    guard: Expr | None = None
    override: bool = False
    reason: Expr | None = None  # filter: the failure reason(s), a string or list of strings
    # filter: which failures preemption cannot fix (``unresolvable``: the literal true; with
    # ``when COND``: where COND holds); None: none of them
    unresolvable: Expr | None = None
    weight: Expr | None = None  # score: a positive number literal (1 when absent)
    normalize: str | None = None  # score: none | max | reverse | minmax (none when absent)
    order: Expr | None = None  # preempt: sort key for candidate nodes, lowest first
    audit: bool = False  # filter: audit mode (shadow): evaluated and reported, never rejecting
    # score: what it ranks: "node" (the nodes that pass the filters) or "device" (for each DRA
    # request, the devices the allocator tries: ``score NAME for device``)
    target: str = "node"
    name_span: Span = field(compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class PartialOverride(Node):
    """``override score NAME weight 3``: an override without a body. It changes only what it
    states (a score's weight and normalisation, any rule's ``when`` guard) and keeps the rest
    of the rule it overrides, its place in the order included; ``None`` means "not restated"."""

    kind: RuleKind
    name: str
    guard: Expr | None = None
    weight: Expr | None = None  # score only
    normalize: str | None = None  # score only
    unresolvable: Expr | None = None  # filter only
    audit: bool = False  # filter only: `audit override filter X` puts the rule in audit mode
    name_span: Span = field(compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Disable(Node):
    """``disable [kind] NAME``: without a kind, every rule of that name (filter, score, preempt)."""

    name: str
    kind: RuleKind | None = None


@dataclass(frozen=True)
class Extends(Node):
    """``extends "default"``: compose another rule set (a path, or a bundled set's name) first."""

    target: str


Item = Let | Rule | PartialOverride | Disable | Extends


@dataclass(frozen=True)
class RulesFile:
    source: Source = field(compare=False, repr=False)
    items: tuple[Item, ...]
    # Rules whose text did not parse (a syntax error: the item is left out of ``items``), so that
    # lint counts the rules written, broken ones too.
    unparsed_rules: int = 0


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of an expression, in source order."""
    match expr:
        case Literal() | Name():
            return ()
        case ListExpr(items=items):
            return items
        case Attr(obj=obj):
            return (obj,)
        case Index(obj=obj, key=key):
            return (obj, key)
        case Call(args=args):
            return args
        case Unary(operand=operand):
            return (operand,)
        case Binary(left=left, right=right):
            return (left, right)
        case If(cond=c, then=t, otherwise=o):
            return (c, t, o)
        case Quantifier(iterable=it, where=w):
            return (it,) if w is None else (it, w)
        case Aggregate(value=v, iterable=it, where=w):
            return (v, it) if w is None else (v, it, w)
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover
