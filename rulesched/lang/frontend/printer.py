"""Print the AST back as canonical rules text.

``parse(print(tree)) == tree`` for every tree (a hypothesis property in tests/): operators get
exactly the parentheses their precedence needs, literals keep the spelling they were written with
(``500m`` stays ``500m``), and generated literals get a spelling that parses back to their value.
``rulesched fmt`` uses this printer.
"""

from __future__ import annotations

from rulesched.lang.frontend import ast

INDENT = "    "
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


def print_file(file: ast.RulesFile) -> str:
    return "\n\n".join(print_item(item) for item in file.items) + ("\n" if file.items else "")


def print_item(item: ast.Item) -> str:
    match item:
        case ast.Let(name=name, value=value):
            return f"let {name} = {expr_text(value)}"
        case ast.Disable(name=name, kind=kind):
            return f"disable {kind.value} {name}" if kind is not None else f"disable {name}"
        case ast.Extends(target=target):
            return f"extends {_string(target)}"
        case ast.Rule():
            return _rule(item)
        case ast.PartialOverride(kind=kind, name=name, guard=guard, weight=weight, normalize=normalize):
            head = _header(True, kind, name, weight, normalize, guard)  # no body, no colon
            return head if item.unresolvable is None else f"{head} {unresolvable_text(item.unresolvable)}"
    raise TypeError(f"not an item: {item!r}")  # pragma: no cover


def _header(
    override: bool,
    kind: ast.RuleKind,
    name: str,
    weight: ast.Expr | None,
    normalize: str | None,
    guard: ast.Expr | None,
) -> str:
    """``[override] KIND NAME [weight N] [normalize MODE] [when GUARD]``, options in that order."""
    head = ["override"] if override else []
    head += [kind.value, name]
    if weight is not None:
        head += ["weight", expr_text(weight)]
    if normalize is not None:
        head += ["normalize", normalize]
    if guard is not None:
        head += ["when", expr_text(guard)]
    return " ".join(head)


def _rule(rule: ast.Rule) -> str:
    head = _header(rule.override, rule.kind, rule.name, rule.weight, rule.normalize, rule.guard)
    lines = [head + ":", INDENT + expr_text(rule.body)]
    if rule.reason is not None:
        lines.append(INDENT + "else " + expr_text(rule.reason))
    if rule.order is not None:
        lines.append(INDENT + "order " + expr_text(rule.order))
    if rule.unresolvable is not None:
        lines.append(INDENT + unresolvable_text(rule.unresolvable))
    return "\n".join(lines)


def unresolvable_text(condition: ast.Expr) -> str:
    """``unresolvable`` for every failure, else ``unresolvable when COND``."""
    if isinstance(condition, ast.Literal) and condition.kind is ast.LiteralKind.BOOL and condition.value is True:
        return "unresolvable"
    return "unresolvable when " + expr_text(condition)


def expr_text(expr: ast.Expr) -> str:
    return _text(expr)[0]


def _wrap(expr: ast.Expr, minimum: int) -> str:
    text, strength = _text(expr)
    return f"({text})" if strength < minimum else text


def _text(expr: ast.Expr) -> tuple[str, int]:
    match expr:
        case ast.Literal():
            return _literal(expr), _ATOM
        case ast.ListExpr(items=items):
            return "[" + ", ".join(_wrap(i, _IF) for i in items) + "]", _ATOM
        case ast.Name(id=name):
            return name, _ATOM
        case ast.Attr(obj=obj, name=name):
            return f"{_wrap(obj, _POSTFIX)}.{name}", _POSTFIX
        case ast.Index(obj=obj, key=key):
            return f"{_wrap(obj, _POSTFIX)}[{expr_text(key)}]", _POSTFIX
        case ast.Call(func=func, args=args):
            return f"{func}(" + ", ".join(expr_text(a) for a in args) + ")", _POSTFIX
        case ast.Unary(op="not", operand=operand):
            return f"not {_wrap(operand, _NOT)}", _NOT
        case ast.Unary(operand=operand):
            return f"-{_wrap(operand, _UNARY)}", _UNARY
        case ast.Binary(op=op, left=left, right=right):
            strength = _BINARY[op]
            if strength == _COMPARE:  # comparisons do not chain
                return f"{_wrap(left, _SUM)} {op} {_wrap(right, _SUM)}", _COMPARE
            return f"{_wrap(left, strength)} {op} {_wrap(right, strength + 1)}", strength
        case ast.If(cond=cond, then=then, otherwise=otherwise):
            return f"if {expr_text(cond)} then {expr_text(then)} else {expr_text(otherwise)}", _IF
        case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
            tail = f" where {expr_text(where)}" if where is not None else ""
            return f"{kind}({var} in {expr_text(iterable)}{tail})", _ATOM
        case ast.Aggregate(kind=kind, value=value, var=var, iterable=iterable, where=where):
            tail = f" where {expr_text(where)}" if where is not None else ""
            return f"{kind}({expr_text(value)} for {var} in {expr_text(iterable)}{tail})", _ATOM
    raise TypeError(f"not an expression: {expr!r}")  # pragma: no cover


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
