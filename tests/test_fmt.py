"""``rulesched fmt``: the canonical form is stable, the bundled rules are in it, and comments stay
where they were written: before the same token of the same item, or after it on its line.

The property test prints generated programs, lays their tokens out again at random (newlines
and indentation anywhere between tokens), inserts comments at random line ends and on lines of
their own (inside bodies too), formats, and checks the result against the input with its own
reading of the comments (independent of :mod:`rulesched.lang.frontend.comments`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cli import main
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.format import format_source
from rulesched.lang.frontend.parse import lex, parse_source
from rulesched.lang.frontend.printer import print_file
from rulesched.lang.frontend.source import Source
from tests.strategies import rules_files

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted(
    {
        *ROOT.glob("rules/**/*.rules"),
        *ROOT.glob("deploy/**/*.rules"),
        *ROOT.glob("benchmarks/rules/*.rules"),
        *ROOT.glob("examples/**/*.rules"),
    }
)


def fmt(text: str) -> str:
    out, why = format_source(Source("t.rules", text))
    assert out is not None, why
    return out


def items(text: str) -> tuple[ast.Item, ...]:
    tree, problems = parse_source(Source("t.rules", text))
    assert problems == [], [d.render() for d in problems]
    return tree.items


# --- the bundled files -------------------------------------------------------------------------


def test_there_are_bundled_rules_files() -> None:
    assert any(p.name == "default.rules" for p in BUNDLED) and len(BUNDLED) >= 10


@pytest.mark.parametrize("path", BUNDLED, ids=[str(p.relative_to(ROOT)) for p in BUNDLED])
def test_every_bundled_rules_file_is_formatted(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert fmt(text) == text, f"run: rulesched fmt --write {path.relative_to(ROOT)}"


def test_fmt_check_passes_on_the_bundled_folders(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(ROOT / p) for p in ("rules", "deploy", "benchmarks/rules")]
    assert main(["fmt", "--check", *paths]) == 0
    assert capsys.readouterr().out == ""


# --- comments ------------------------------------------------------------------------------------


def test_an_end_of_line_comment_stays_on_its_rule() -> None:
    text = "score a: 1  # why a\nscore b: 2\n"
    assert fmt(text) == "score a:\n    1  # why a\n\nscore b:\n    2\n"


def test_comments_inside_a_body_are_kept_in_place() -> None:
    text = (
        "# the header\n"
        "\n"
        "# about f\n"
        "filter f when pod.priority > 0:  # guard\n"
        "    # the test\n"
        "    len(node.pods) < 10\n"
        '        and node.name != "x"  # not x\n'
        "    # the reason\n"
        '    else "full"\n'
        "    # closing f\n"
        "\n"
        "# at the end\n"
    )
    assert fmt(text) == (
        "# the header\n"
        "\n"
        "# about f\n"
        "filter f when pod.priority > 0:  # guard\n"
        "    # the test\n"
        '    len(node.pods) < 10 and node.name != "x"  # not x\n'
        "    # the reason\n"
        '    else "full"\n'
        "    # closing f\n"
        "\n"
        "# at the end\n"
    )


def test_end_of_line_comments_do_not_count_towards_the_width() -> None:
    body = 'count(p in node.pods where p.annotations["network.example.com/mode"] == "underlay") < 10'
    text = f"filter f:\n    {body}  # the pool size, a long comment that goes past the hundredth column\n"
    assert fmt(text) == text


def test_a_comment_mid_expression_breaks_the_line_there() -> None:
    text = "score s: count(p in node.pods  # the pods\n where p.priority > 1) + 1\n"
    out = fmt(text)
    assert out == ("score s:\n    count(p in node.pods  # the pods\n          where p.priority > 1)\n        + 1\n")
    assert fmt(out) == out


def test_comments_around_dropped_parentheses_stay_on_their_lines() -> None:
    text = "let x = (  # opening\n  (1 + 2)  # inner\n) * 3\nlet y = [1, 2  # two\n]\n"
    out = fmt(text)
    assert out == "let x =  # opening\n    (1 + 2)  # inner\n    * 3\n\nlet y = [1, 2]  # two\n"
    assert items(out) == items(text)
    assert fmt(out) == out


def test_a_hash_inside_a_string_is_not_a_comment() -> None:
    text = 'filter f: node.name != "#1" else "no #1"  # real\n'
    assert fmt(text) == 'filter f:\n    node.name != "#1"\n    else "no #1"  # real\n'


def test_reordered_options_keep_their_comment_on_the_header() -> None:
    text = "score s normalize max  # how\n weight 2: 1\n"
    out = fmt(text)
    assert out == "score s weight 2 normalize max:  # how\n    1\n"
    assert fmt(out) == out


def test_a_file_of_comments_only() -> None:
    assert fmt("# one\n\n\n# two\n") == "# one\n\n# two\n"


def test_a_syntax_error_is_reported_not_formatted() -> None:
    out, why = format_source(Source("t.rules", "score s: 1 +\n"))
    assert out is None and "t.rules:1:" in why


# --- the property --------------------------------------------------------------------------------

ITEM_STARTS = {"LET", "FILTER", "SCORE", "PREEMPT", "DISABLE", "OVERRIDE", "EXTENDS"}


def anchors(text: str) -> list[tuple[str, int, int, bool]]:
    """Each comment: its text, the item it is in or after (-1: before the first), the number of
    that item's tokens before it (parentheses and closing brackets not counted: the printer
    drops redundant parentheses, and an end-of-line comment moves past closing brackets),
    and whether it ends a line holding a token."""
    found: list[tuple[str, int, int, bool]] = []
    item, count, line = -1, 0, 0
    previous = ""
    for tok in lex(text):
        if tok.type == "WS":
            continue
        if tok.type == "COMMENT":
            found.append((str(tok).rstrip(), item, count, tok.line == line))
            continue
        starts = tok.type in ITEM_STARTS and previous != "DOT"
        if tok.type in ("FILTER", "SCORE", "PREEMPT") and previous in ("OVERRIDE", "DISABLE"):
            starts = False
        if starts:
            item, count = item + 1, 0
        if tok.type not in ("LPAR", "RPAR", "RSQB"):  # a comment may move past closing brackets
            count += 1
        line, previous = int(tok.line or 0), tok.type
    return found


comment_words = st.text(alphabet=st.sampled_from(list("ab #\"'(){}:é")), max_size=8).map(str.strip)


@st.composite
def commented_programs(draw: st.DrawFn) -> str:
    """A generated program laid out at random, with comments at line ends and between lines."""
    tree = draw(rules_files)
    printed = print_file(tree)
    pieces: list[str] = []
    position = 0
    for tok in lex(printed):
        if tok.type == "WS":
            continue
        start = int(tok.start_pos or 0)
        gap = printed[position:start]
        choice = draw(st.integers(0, 5))
        if choice == 0 and pieces:
            gap = "\n" + " " * draw(st.integers(0, 8))
        elif choice == 1 and pieces:
            gap = gap or " "
        pieces += [gap, str(tok)]
        position = int(tok.end_pos or start)
    lines = "".join(pieces).split("\n")
    out: list[str] = []
    number = 0
    for line in lines:
        where = draw(st.integers(0, 4))
        if where == 0:
            out.append(" " * draw(st.integers(0, 6)) + f"# c{number} {draw(comment_words)}".rstrip())
            number += 1
        if where == 1 and line.strip():
            line = f"{line}  # c{number} {draw(comment_words)}".rstrip()
            number += 1
        out.append(line)
    if draw(st.booleans()):
        out.append(f"# c{number} at the end")
    return "\n".join(out) + "\n"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commented_programs())
def test_fmt_keeps_every_comment_in_its_place(text: str) -> None:
    out = fmt(text)
    assert items(out) == items(text), (text, out)
    before, after = anchors(text), anchors(out)
    assert [a[0] for a in after] == [b[0] for b in before], (text, out)  # each once, in order
    # Same item, same token, same kind of line; but of several end-of-line comments on one token
    # and the closing brackets after it, only the first can stay at the end of that line.
    shared = {(b[1], b[2]) for i, b in enumerate(before) if i and (before[i - 1][1:3]) == b[1:3]}
    assert [a if a[1:3] not in shared else a[:3] for a in after] == [
        b if b[1:3] not in shared else b[:3] for b in before
    ], (text, out)
    assert fmt(out) == out, (text, out)
