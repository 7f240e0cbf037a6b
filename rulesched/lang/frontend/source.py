"""Source text, spans and diagnostics: the first stage of the rules journey.

A :class:`Source` is one rules file's text. Every AST node carries a :class:`Span` into it, so any
later stage can report a problem as ``path:line:col``, with the source line and a caret under it.
Next stage: :mod:`rulesched.lang.frontend.parse`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True, eq=False)
class Source:
    """The text of one rules file and where it came from (a path, or ``<string>``)."""

    path: str
    text: str
    _line_starts: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts = [0]
        starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")
        object.__setattr__(self, "_line_starts", tuple(starts))

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)]


@dataclass(frozen=True)
class Span:
    """A half-open range of characters in a source. Excluded from AST equality on purpose:
    two trees are the same program wherever they were written."""

    source: Source
    start: int
    end: int

    @property
    def line(self) -> int:
        return self.source.position(self.start)[0]

    @property
    def column(self) -> int:
        return self.source.position(self.start)[1]

    def location(self) -> str:
        line, column = self.source.position(self.start)
        return f"{self.source.path}:{line}:{column}"


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"  # information, never a problem: e.g. which rule an override replaces


# Lines longer than this are shown as a window around the caret, so a 1 MB line prints one line.
_EXCERPT_WIDTH = 100


@dataclass(frozen=True)
class Diagnostic:
    """One located problem. ``code`` is stable for tools; ``message`` is for people."""

    severity: Severity
    code: str
    message: str
    span: Span | None
    path: str = ""
    suggestion: str = ""

    @property
    def location(self) -> str:
        if self.span is not None:
            return self.span.location()
        return self.path or "<rules>"

    def render(self) -> str:
        """Compiler-style text: location, severity, message, the line and a caret, a hint."""
        head = f"{self.location}: {self.severity.value}: {self.message} [{self.code}]"
        lines = [head]
        if self.span is not None:
            line_no, column = self.span.source.position(self.span.start)
            text = self.span.source.line_text(line_no).replace("\t", " ")
            start = max(0, column - 1 - _EXCERPT_WIDTH // 2) if len(text) > _EXCERPT_WIDTH else 0
            shown = text[start : start + _EXCERPT_WIDTH]
            width = max(1, min(self.span.end - self.span.start, len(shown) - (column - 1 - start)))
            lines.append(f"    {shown}")
            lines.append("    " + " " * (column - 1 - start) + "^" * width)
        if self.suggestion:
            lines.append(f"    help: {self.suggestion}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        line, column = (0, 0)
        if self.span is not None:
            line, column = self.span.source.position(self.span.start)
        return {
            "path": self.span.source.path if self.span is not None else self.path,
            "line": line,
            "column": column,
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "suggestion": self.suggestion or None,
        }


def error(code: str, message: str, span: Span | None, suggestion: str = "") -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, message, span, suggestion=suggestion)


def warning(code: str, message: str, span: Span | None, suggestion: str = "") -> Diagnostic:
    return Diagnostic(Severity.WARNING, code, message, span, suggestion=suggestion)


def note(code: str, message: str, span: Span | None) -> Diagnostic:
    return Diagnostic(Severity.NOTE, code, message, span)
