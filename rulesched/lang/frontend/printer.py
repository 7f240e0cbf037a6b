"""Print the AST back as canonical rules text.

``parse(print(tree)) == tree`` for every tree (a hypothesis property in tests/): operators get
exactly the parentheses their precedence needs, literals keep the spelling they were written with
(``500m`` stays ``500m``), and generated literals get a spelling that parses back to their value.

Layout: each item starts at column 0; a rule's body and its ``else``, ``order`` and
``unresolvable`` clauses each start a line indented by four spaces. An expression that does not
fit in :data:`WIDTH` columns breaks before its loosest operators (``or`` before ``and`` before
comparisons before ``+``), the continuation indented four more; inside brackets, after commas and
before ``for`` and ``where``, aligned with the bracket's contents; an ``if`` before its ``else``
branches. A partial override, ``disable`` and ``extends`` stay on one line. The printer builds a
document (:mod:`rulesched.lang.frontend.layout`) whose tokens ``rulesched fmt`` weaves comments
into (:mod:`rulesched.lang.frontend.format`) before laying it out.
"""

from __future__ import annotations

from rulesched.lang.builtins.groups import GROUP_FIELDS, GROUP_VARIABLE, builtin_name
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.layout import HARD, Align, Doc, Group, Line, Nest, Token, render

INDENT = "    "
WIDTH = 100
_STEP = len(INDENT)
_ONE_LINE = 1 << 30  # a width nothing exceeds: one line unless a comment forces a break
# Binding strength, loosest first; a child needs parentheses when it binds looser than its slot.
_IF, _OR, _AND, _NOT, _COMPARE, _SUM, _PRODUCT, _UNARY, _POSTFIX, _ATOM = range(10)
_BINARY = {
    "or": _OR,
    "and": _AND,
    "==": _COMPARE,
    "!=": _COMPARE,
    "<": _COMPARE,
    "<=": _COMPARE,
    ">": _COMPARE,
    ">=": _COMPARE,
    "in": _COMPARE,
    "not in": _COMPARE,
    "+": _SUM,
    "-": _SUM,
    "*": _PRODUCT,
    "/": _PRODUCT,
    "//": _PRODUCT,
    "%": _PRODUCT,
}

_GROUP_CALLS = {builtin_name(f): f"{GROUP_VARIABLE}.{f}" for f in GROUP_FIELDS}


def print_file(file: ast.RulesFile) -> str:
    return "\n\n".join(print_item(item) for item in file.items) + ("\n" if file.items else "")


def print_item(item: ast.Item) -> str:
    return render(item_doc(item), item_width(item))


def item_width(item: ast.Item) -> int:
    """The width an item is laid out in: rules and lets break to fit; the one-line items never."""
    return WIDTH if isinstance(item, ast.Rule | ast.Let) else _ONE_LINE


def expr_text(expr: ast.Expr) -> str:
    """An expression on one line (for messages)."""
    return render(expr_doc(expr), _ONE_LINE)


def unresolvable_text(condition: ast.Expr) -> str:
    """``unresolvable`` for every failure, else ``unresolvable when COND``."""
    return render(_unresolvable(condition), _ONE_LINE)


def tokens(doc: Doc) -> list[str]:
    """The tokens in a document, in order."""
    found: list[str] = []
    stack: list[Doc] = [doc]
    while stack:
        part = stack.pop()
        if isinstance(part, Token):
            found.append(part.text)
        elif isinstance(part, Group | Nest | Align):
            stack.append(part.parts)
        elif isinstance(part, list | tuple):
            stack.extend(reversed(part))
    return found


def item_doc(item: ast.Item) -> Doc:
    if isinstance(item, ast.Rule | ast.Let):
        return _item_doc(item)
    return Nest(_STEP, _item_doc(item))  # a one-line item broken by a comment: indented after it


def _item_doc(item: ast.Item) -> Doc:
    match item:
        case ast.Let(name=name, value=value):
            # the value's continuation lines (and a line broken by a comment) indented once
            return [_t("let"), " ", _t(name), " ", _t("="), Nest(_STEP, [" ", _doc(value, nest=0)[0]])]
        case ast.Disable(name=name, kind=kind):
            which: list[Doc] = [_t(kind.value), " "] if kind is not None else []
            return [_t("disable"), " ", *which, _t(name)]
        case ast.Extends(target=target):
            return [_t("extends"), " ", _t(_string(target))]
        case ast.Rule():
            return _rule(item)
        case ast.PartialOverride(kind=kind, name=name, guard=guard, weight=weight, normalize=normalize):
            head = _header(True, kind, name, weight, normalize, guard, item.audit)  # no body, no colon
            return head if item.unresolvable is None else [head, " ", _unresolvable(item.unresolvable)]
    raise TypeError(f"not an item: {item!r}")  # pragma: no cover


def _t(text: str) -> Token:
    return Token(text)


def _header(
    override: bool,
    kind: ast.RuleKind,
    name: str,
    weight: ast.Expr | None,
    normalize: str | None,
    guard: ast.Expr | None,
    audit: bool = False,
    target: str = "node",
) -> Doc:
    """``[audit] [override] KIND NAME [for device] [weight N] [normalize MODE] [when GUARD]``,
    options in that order."""
    head: list[Doc] = [_t("audit"), " "] if audit else []
    head += [_t("override"), " "] if override else []
    head += [_t(kind.value), " ", _t(name)]
    if target != "node":
        head += [" ", _t("for"), " ", _t(target)]
    if weight is not None:
        head += [" ", _t("weight"), " ", expr_doc(weight)]
    if normalize is not None:
        head += [" ", _t("normalize"), " ", _t(normalize)]
    if guard is not None:  # a guard that does not fit breaks to a line of its own
        return Group([head, Nest(2 * _STEP, [Line(), _t("when"), " ", expr_doc(guard)])])
    return head


def _rule(rule: ast.Rule) -> Doc:
    head = _header(
        rule.override, rule.kind, rule.name, rule.weight, rule.normalize, rule.guard, rule.audit, rule.target
    )
    clauses: list[Doc] = [HARD, expr_doc(rule.body)]
    if rule.reason is not None:
        clauses += [HARD, _t("else"), " ", expr_doc(rule.reason)]
    if rule.order is not None:
        clauses += [HARD, _t("order"), " ", expr_doc(rule.order)]
    if rule.unresolvable is not None:
        clauses += [HARD, _unresolvable(rule.unresolvable)]
    return [head, _t(":"), Nest(_STEP, clauses)]


def _unresolvable(condition: ast.Expr) -> Doc:
    if isinstance(condition, ast.Literal) and condition.kind is ast.LiteralKind.BOOL and condition.value is True:
        return _t("unresolvable")
    return [_t("unresolvable"), " ", _t("when"), " ", expr_doc(condition)]


def expr_doc(expr: ast.Expr) -> Doc:
    return _doc(expr)[0]


def _wrap(expr: ast.Expr, minimum: int, clarify: bool = False) -> Doc:
    """The expression, in parentheses if it binds looser than ``minimum``, or if ``clarify``
    and it is an ``and`` (an operand of ``or``: parentheses it does not need, for the reader)."""
    doc, strength = _doc(expr)
    if strength >= minimum and not (clarify and isinstance(expr, ast.Binary) and expr.op == "and"):
        return doc
    if isinstance(expr, ast.Binary):  # inside parentheses, operators align with the first operand
        doc = _binary(expr.op, expr.left, expr.right, nest=0)[0]
    return [Token("(", grouping=True), Align(doc), Token(")", grouping=True)]


def _listed(items: tuple[ast.Expr, ...]) -> Doc:
    """Comma-separated expressions, breaking after the commas."""
    parts: list[Doc] = []
    for i, item in enumerate(items):
        if i:
            parts += [_t(","), Line()]
        parts.append(_wrap(item, _IF))
    return Align(parts)


def _doc(expr: ast.Expr, nest: int = _STEP) -> tuple[Doc, int]:
    """The expression's document and binding strength; a chain of operators or of ``else``
    branches at its top breaks its lines indented by ``nest``."""
    match expr:
        case ast.Literal():
            return _t(_literal(expr)), _ATOM
        case ast.Table(items=rows, columns=columns):
            opening = _t(f"table({', '.join(columns)}) [")
            return Group([opening, _listed(rows), _t("]")]), _ATOM
        case ast.ListExpr(items=items):
            return Group([_t("["), _listed(items), _t("]")]), _ATOM
        case ast.Name(id=name):
            return _t(name), _ATOM
        case ast.Attr(obj=obj, name=name):
            return [_wrap(obj, _POSTFIX), _t("."), _t(name)], _POSTFIX
        case ast.Index(obj=obj, key=key):
            return [_wrap(obj, _POSTFIX), _t("["), Align(expr_doc(key)), _t("]")], _POSTFIX
        case ast.Call(func=func, args=()) if func in _GROUP_CALLS:  # written group.FIELD (parse.attr)
            return _t(_GROUP_CALLS[func]), _POSTFIX
        case ast.Call(func=func, args=args):
            return Group([_t(func), _t("("), _listed(args), _t(")")]), _POSTFIX
        case ast.Unary(op="not", operand=operand):
            return [_t("not"), " ", _wrap(operand, _NOT)], _NOT
        case ast.Unary(operand=operand):
            return [_t("-"), _wrap(operand, _UNARY)], _UNARY
        case ast.Binary(op=op, left=left, right=right):
            return _binary(op, left, right, nest)
        case ast.If():
            return _if(expr, nest), _IF
        case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
            inner: list[Doc] = [_t(var), " ", _t("in"), " ", expr_doc(iterable)]
            if where is not None:
                inner += [Line(), _t("where"), " ", expr_doc(where)]
            return Group([_t(kind), _t("("), Align(inner), _t(")")]), _ATOM
        case ast.Aggregate(kind=kind, value=value, var=var, iterable=iterable, where=where):
            head = Group([expr_doc(value), Line(), _t("for"), " ", _t(var), " ", _t("in"), " ", expr_doc(iterable)])
            tail: list[Doc] = [Line(), _t("where"), " ", expr_doc(where)] if where is not None else []
            return Group([_t(kind), _t("("), Align([head, *tail]), _t(")")]), _ATOM
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover


def _operator(op: str) -> Doc:
    return [_t("not"), " ", _t("in")] if op == "not in" else _t(op)


def _binary(op: str, left: ast.Expr, right: ast.Expr, nest: int = _STEP) -> tuple[Doc, int]:
    """A chain of operators of one strength (``a + b - c``) breaks before each of them at once,
    indented by ``nest``."""
    strength = _BINARY[op]
    if strength == _COMPARE:  # comparisons do not chain
        rest: Doc = [Line(), _operator(op), " ", _wrap(right, _SUM)]
        return Group([_wrap(left, _SUM), Nest(nest, rest)]), _COMPARE
    chain: list[tuple[str, ast.Expr]] = [(op, right)]
    first = left
    while isinstance(first, ast.Binary) and _BINARY[first.op] == strength:  # left-associative
        chain.append((first.op, first.right))
        first = first.left
    parts: list[Doc] = []
    for link_op, operand in reversed(chain):
        parts += [Line(), _operator(link_op), " ", _wrap(operand, strength + 1, strength == _OR)]
    return Group([_wrap(first, strength, strength == _OR), Nest(nest, parts)]), strength


def _if(expr: ast.If, nest: int = _STEP) -> Doc:
    """``if C then A`` on a line, each ``else`` (``else if``) branch breaking to its own."""
    branches: list[Doc] = []
    node: ast.Expr = expr
    while isinstance(node, ast.If):
        then: Doc = Nest(_STEP, [Line(), _t("then"), " ", expr_doc(node.then)])
        test = Group([_t("if"), " ", Align(expr_doc(node.cond)), then])
        branches.append(test if not branches else [Line(), _t("else"), " ", test])
        node = node.otherwise
    return Group([branches[0], Nest(nest, [*branches[1:], Line(), _t("else"), " ", expr_doc(node)])])


def _literal(lit: ast.Literal) -> str:
    if lit.text:
        return lit.text
    kind, value = lit.kind, lit.value
    if kind is ast.LiteralKind.STRING:
        return _string(str(value))
    if kind is ast.LiteralKind.BOOL:
        return "true" if value else "false"
    if kind is ast.LiteralKind.QUANTITY:
        return f"{value}m"
    if kind is ast.LiteralKind.DURATION:
        return f"{_plain_number(value)}s"
    return _plain_number(value)


def _plain_number(value: object) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    return repr(value)


def _string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'
