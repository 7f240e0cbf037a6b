"""Say what a syntax error is, in the rules' words: where it is, what came, what may come
instead (``unexpected end of score 'fit'; expected a name, a number, ...``), from lark's
UnexpectedInput. :mod:`rulesched.lang.frontend.parse` reports one per item that fails.
"""

from __future__ import annotations

import re

from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from rulesched.lang.frontend.source import Diagnostic, Source, Span, error

# An item's keyword (not a field name after "."), and the name that follows it, if any.
_ITEM_HEAD = re.compile(
    r"(?<![\w.])(let|filter|score|preempt|disable|override|extends)(?![\w])(?:\s+(?!(?:filter|score|preempt)\b)([A-Za-z_]\w*))?"
)
_STRINGS_AND_COMMENTS = re.compile(r'"(?:[^"\\\n]|\\.)*"?|#[^\n]*')
_RULE_KINDS = ("filter", "score", "preempt")
_ITEM_STARTS = frozenset({"LET", "FILTER", "SCORE", "PREEMPT", "DISABLE", "OVERRIDE", "AUDIT", "EXTENDS"})
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


def syntax_diagnostic(source: Source, err: UnexpectedInput, offset: int, end: int) -> Diagnostic:
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
