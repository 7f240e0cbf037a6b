"""The parser: literals, precedence, items, located syntax errors, recovery and input limits."""

from __future__ import annotations

import pytest

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.parse import MAX_DEPTH, MAX_FILE_CHARS, MAX_LINE_CHARS, parse_source
from rulesched.lang.frontend.source import Severity, Source

K = ast.LiteralKind
GI = 2**30 * 1000  # one Gi in milli-units


def parse(text: str) -> tuple[tuple[ast.Item, ...], list]:
    tree, diagnostics = parse_source(Source("t.rules", text))
    return tree.items, diagnostics


def parse_ok(text: str) -> tuple[ast.Item, ...]:
    items, diagnostics = parse(text)
    assert diagnostics == [], [d.render() for d in diagnostics]
    return items


def expr(text: str) -> ast.Expr:
    (item,) = parse_ok(f"let x = {text}")
    assert isinstance(item, ast.Let)
    return item.value


def shape(e: ast.Expr | None) -> str:
    """An S-expression of the tree, to state precedence compactly."""
    match e:
        case None:
            return "_"
        case ast.Literal(value=value):
            return repr(value) if isinstance(value, str) else str(value)
        case ast.Name(id=name):
            return name
        case ast.ListExpr(items=items):
            return "[" + " ".join(shape(i) for i in items) + "]"
        case ast.Attr(obj=obj, name=name):
            return f"(. {shape(obj)} {name})"
        case ast.Index(obj=obj, key=key):
            return f"([] {shape(obj)} {shape(key)})"
        case ast.Call(func=func, args=args):
            return f"(call {func}" + "".join(" " + shape(a) for a in args) + ")"
        case ast.Unary(op=op, operand=operand):
            return f"({op} {shape(operand)})"
        case ast.Binary(op=op, left=left, right=right):
            return f"({op} {shape(left)} {shape(right)})"
        case ast.If(cond=c, then=t, otherwise=o):
            return f"(if {shape(c)} {shape(t)} {shape(o)})"
        case ast.Quantifier(kind=kind, var=var, iterable=it, where=where):
            return f"({kind} {var} {shape(it)} {shape(where)})"
        case ast.Aggregate(kind=kind, value=value, var=var, iterable=it, where=where):
            return f"({kind} {shape(value)} {var} {shape(it)} {shape(where)})"
    raise AssertionError(e)


# --- literals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("0", K.NUMBER, 0),
        ("42", K.NUMBER, 42),
        ("1.5", K.NUMBER, 1.5),
        ("1e3", K.NUMBER, 1000.0),
        ("2.5E-1", K.NUMBER, 0.25),
        ("500m", K.QUANTITY, 500),
        ("2Gi", K.QUANTITY, 2 * GI),
        ("1.5k", K.QUANTITY, 1_500_000),
        ("1Ki", K.QUANTITY, 1024 * 1000),
        ("3M", K.QUANTITY, 3_000_000 * 1000),
        ("1u", K.QUANTITY, 1),  # below a milli-unit rounds up
        ("30s", K.DURATION, 30.0),
        ("100ms", K.DURATION, 0.1),
        ("5min", K.DURATION, 300.0),
        ("2h", K.DURATION, 7200.0),
        ("1.5h", K.DURATION, 5400.0),
        ('""', K.STRING, ""),
        ('"plain"', K.STRING, "plain"),
        (r'"a\n\"b\\c\td"', K.STRING, 'a\n"b\\c\td'),
        ('"# not a comment"', K.STRING, "# not a comment"),
        ("true", K.BOOL, True),
        ("false", K.BOOL, False),
    ],
)
def test_literals(text: str, kind: ast.LiteralKind, value: object) -> None:
    lit = expr(text)
    assert isinstance(lit, ast.Literal)
    assert (lit.kind, lit.value) == (kind, value)
    assert type(lit.value) is type(value)
    assert lit.text == text  # kept as written, for the printer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", "[]"),
        ("[1, 2]", "[1 2]"),
        ("[[1], [], true]", "[[1] [] True]"),
        ('["a", 500m]', "['a' 500]"),
    ],
)
def test_lists(text: str, expected: str) -> None:
    assert shape(expr(text)) == expected


@pytest.mark.parametrize("text", ["true", "false", "[]", "[1, 2]", "not a", "if a then 1 else 2"])
def test_expressions_starting_with_a_keyword_or_bracket_are_located(text: str) -> None:
    _, item = parse_ok(f"filter a: true\n\nscore s:\n    {text}")
    assert isinstance(item, ast.Rule)
    assert (item.body.span.line, item.body.span.column) == (4, 5)
    assert item.body.span.end - item.body.span.start == len(text)


# --- precedence -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a or b and c", "(or a (and b c))"),
        ("a and b or c", "(or (and a b) c)"),
        ("a or b or c", "(or (or a b) c)"),
        ("not a == b", "(not (== a b))"),
        ("not a and b", "(and (not a) b)"),
        ("not not a", "(not (not a))"),
        ("not a in b", "(not (in a b))"),
        ("a not in b", "(not in a b)"),
        ("-x.y", "(- (. x y))"),
        ("- -x", "(- (- x))"),
        ("-a * b", "(* (- a) b)"),
        ("1 + 2 * 3", "(+ 1 (* 2 3))"),
        ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
        ("1 - 2 - 3", "(- (- 1 2) 3)"),
        ("a // b % c / d", "(/ (% (// a b) c) d)"),
        ("a + b < c * d", "(< (+ a b) (* c d))"),
        ("a >= b and c != d", "(and (>= a b) (!= c d))"),
        ("a[0].b", "(. ([] a 0) b)"),
        ("f(a, b)[1]", "([] (call f a b) 1)"),
        ("f()", "(call f)"),
        ('pod.labels["app"] == "web"', "(== ([] (. pod labels) 'app') 'web')"),
        ("if a then b else c or d", "(if a b (or c d))"),
        ("if a then if b then c else d else e", "(if a (if b c d) e)"),
        ("2Gi / 2 == 1Gi", f"(== (/ {2 * GI} 2) {GI})"),
    ],
)
def test_precedence(text: str, expected: str) -> None:
    assert shape(expr(text)) == expected


# --- aggregates and quantifiers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count(p in node.pods where p.priority > 1)", "(count p (. node pods) (> (. p priority) 1))"),
        ("any(t in node.taints)", "(any t (. node taints) _)"),
        ("all(x in [1, 2] where x > 0 and x < 3)", "(all x [1 2] (and (> x 0) (< x 3)))"),
        (
            "sum(p.priority for p in node.pods where p.priority > 0)",
            "(sum (. p priority) p (. node pods) (> (. p priority) 0))",
        ),
        ("collect(p.name for p in node.pods)", "(collect (. p name) p (. node pods) _)"),
        ("min(x * 2 for x in [1])", "(min (* x 2) x [1] _)"),
        ("max(a, b)", "(call max a b)"),
        ("min(a, b, c)", "(call min a b c)"),
        ("count(x in keys(m)) + 1", "(+ (count x (call keys m) _) 1)"),
        ("counter + anyone", "(+ counter anyone)"),  # keyword prefixes are plain names
    ],
)
def test_aggregates_and_quantifiers(text: str, expected: str) -> None:
    assert shape(expr(text)) == expected


# --- items ------------------------------------------------------------------------------------


def test_rule_headers() -> None:
    items = parse_ok(
        "# a comment\n"
        "filter plain: true\n"
        'override filter guarded when pod.priority > 1: node.unschedulable else "busy"  # trailing\n'
        "score s weight 2 normalize max when g: 1\n"
        "score t normalize reverse weight 3: 2\n"
        "preempt p when a: b order c\n"
        "disable gone\n"
        "disable score half\n"
        'extends "base.rules"\n'
        "let x = 1\n"
    )
    plain, guarded, s, t, p, disable, disable_score, extends, let = items
    assert isinstance(plain, ast.Rule) and plain.kind is ast.RuleKind.FILTER
    assert (plain.name, plain.override, plain.guard, plain.reason) == ("plain", False, None, None)
    assert isinstance(guarded, ast.Rule) and guarded.override
    assert shape(guarded.guard) == "(> (. pod priority) 1)"
    assert shape(guarded.reason) == "'busy'"
    assert isinstance(s, ast.Rule) and s.kind is ast.RuleKind.SCORE
    assert (shape(s.weight), s.normalize, shape(s.guard)) == ("2", "max", "g")
    assert isinstance(t, ast.Rule) and (shape(t.weight), t.normalize) == ("3", "reverse")
    assert isinstance(p, ast.Rule) and p.kind is ast.RuleKind.PREEMPT
    assert (shape(p.guard), shape(p.body), shape(p.order)) == ("a", "b", "c")
    assert disable == ast.Disable("gone", None, span=disable.span)
    assert disable_score == ast.Disable("half", ast.RuleKind.SCORE, span=disable.span)
    assert extends == ast.Extends("base.rules", span=extends.span)
    assert isinstance(let, ast.Let) and (let.name, shape(let.value)) == ("x", "1")
    assert (guarded.name_span.line, guarded.name_span.column) == (3, 17)


def test_filter_body_if_then_reason() -> None:
    (rule,) = parse_ok('filter f:\n    if a then b else c\n    else "r"')
    assert isinstance(rule, ast.Rule)
    assert (shape(rule.body), shape(rule.reason)) == ("(if a b c)", "'r'")


def test_empty_file_and_comments_only() -> None:
    assert parse_ok("") == ()
    assert parse_ok("# nothing here\n\n   # still nothing\n") == ()


# --- syntax errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        ("filter f true", 1, 10, "unexpected 'true'; expected ':', 'when'"),
        ("let x = 1 +", 1, 11, "unexpected end of let 'x'"),
        ("filter f: (1", 1, 12, "expected ')'"),
        ("score s: 1 2", 1, 12, "unexpected '2'"),
        ("let = 1", 1, 5, "expected a name"),
        ("filter f: a == b == c", 1, 18, "unexpected '=='"),
        ("let x = 1 $ 2", 1, 11, "unexpected '$'"),
        ('let x = "abc', 1, 9, "unexpected '\"'"),
        ("let x = 2Gix", 1, 9, "unexpected '2'"),
        ("score s weight: 1", 1, 15, "expected a number"),
        ("score s weight -1: 1", 1, 16, "unexpected '-'"),
        ("override let x = 1", 1, 10, "expected 'filter', 'preempt', 'score'"),
        ("preempt p: a else b", 1, 14, "unexpected 'else'"),
        ("score s: a order b", 1, 12, "unexpected 'order'"),
        ("filter f: count(p in x", 1, 22, "expected ')', 'where'"),
        ("let x = [1, 2", 1, 13, "expected ')', ',', ']'"),
        ("let x = 1\n\x00", 2, 1, "unexpected character U+0000"),
        ("\n\nfilter f:\n    a and\n", 4, 9, "unexpected end of filter 'f'"),
        ("let filter = 1", 1, 5, "'filter' is a reserved word"),
        ("filter when: true", 1, 8, "'when' is a reserved word"),
        ("filter f: count(in in node.pods) > 0", 1, 17, "'in' is a reserved word"),
        ("disable max", 1, 9, "'max' is a reserved word"),
    ],
)
def test_syntax_errors_are_located(text: str, line: int, column: int, words: str) -> None:
    items, diagnostics = parse(text)
    assert len(diagnostics) == 1
    (d,) = diagnostics
    assert (d.code, d.severity) == ("syntax", Severity.ERROR)
    assert (d.span.line, d.span.column) == (line, column), d.render()
    assert words in d.message
    assert d.render().startswith(f"t.rules:{line}:{column}: error: ")


def test_errors_in_several_rules_are_all_reported() -> None:
    text = (
        "filter a:\n    pod.priority >\n\n"  # 2: end of rule
        "score good: 1\n\n"  # 4: fine
        "score b: * 2\n\n"  # 6: '*'
        "let c = )\n\n"  # 8: ')'
        "filter also_good: true\n\n"  # 10: fine
        "preempt d: victim.priority < < 1\n"  # 12: second '<'
    )
    items, diagnostics = parse(text)
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics] == [
        ("syntax", 2, 18),
        ("syntax", 6, 10),
        ("syntax", 8, 9),
        ("syntax", 12, 30),
    ]
    assert diagnostics[0].message.startswith("unexpected end of filter 'a'; expected ")
    assert [i.name for i in items if isinstance(i, ast.Rule)] == ["good", "also_good"]


def test_indented_keyword_is_not_an_item_boundary() -> None:
    items, diagnostics = parse("  filter f: 1 +\nfilter g: true")
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics] == [("syntax", 1, 15)]
    assert [i.name for i in items if isinstance(i, ast.Rule)] == ["g"]


# --- limits -----------------------------------------------------------------------------------


def test_line_over_the_limit_is_one_diagnostic() -> None:
    items, diagnostics = parse("filter ok: true\nlet x = " + "1+" * 500_000 + "1\n")
    assert items == ()
    assert [(d.code, d.span.line, d.span.column) for d in diagnostics] == [("too-long", 2, MAX_LINE_CHARS + 1)]
    assert f"{MAX_LINE_CHARS:,}" in diagnostics[0].message
    assert all(len(line) < 300 for line in diagnostics[0].render().splitlines())


def test_file_over_the_limit_is_one_diagnostic() -> None:
    items, diagnostics = parse("# filler\n" * (MAX_FILE_CHARS // 9 + 1))
    assert items == ()
    assert [(d.code, d.span) for d in diagnostics] == [("too-large", None)]


@pytest.mark.parametrize(
    "deep",
    [
        "-" * MAX_DEPTH + "1",
        "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5),
        "not " * (MAX_DEPTH + 1) + "true",
        "(" * 1500 + "-" * 100 + "1" + ")" * 1500,
        "\n".join(["a +" * 900] * 30) + " 1",  # a long chain spread over lines, none too long
        "f(" * 200 + ")" * 200,
    ],
)
def test_nesting_deeper_than_max_depth_is_one_diagnostic(deep: str) -> None:
    items, diagnostics = parse(f"filter ok: true\n\nlet deep = {deep}\n\nscore fine: 1\n")
    assert [d.code for d in diagnostics] == ["too-deep"]
    assert diagnostics[0].span.line >= 3
    assert [i.name for i in items] == ["ok", "fine"]


def test_nesting_at_max_depth_is_accepted() -> None:
    e = expr("-" * (MAX_DEPTH - 1) + "1")
    depth = 0
    while isinstance(e, ast.Unary):
        e, depth = e.operand, depth + 1
    assert depth == MAX_DEPTH - 1


def test_too_deep_items_each_reported_and_parenthesis_do_not_count() -> None:
    text = "let a = " + "-" * 70 + "1\n" + "let b = " + "[" * 70 + "]" * 70 + "\nlet c = " + "(" * 500 + "1" + ")" * 500
    items, diagnostics = parse(text)
    assert [(d.code, d.span.line) for d in diagnostics] == [("too-deep", 1), ("too-deep", 2)]
    assert [i.name for i in items] == ["c"]
