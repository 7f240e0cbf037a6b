"""Line layout for the printer: a small Wadler-style document and its renderer.

The printer (:mod:`rulesched.lang.frontend.printer`) describes a rule as a :data:`Doc`: text, and
places where a line may break (:class:`Line`), grouped so that a group is printed on one line
when it fits the width and otherwise breaks at each of its own lines. Comments force breaks:
:data:`HARD` always starts a new line and :data:`FRESH` starts one unless the line is still
empty, and a group holding either never prints flat.

Newlines never pile up: a break asked for right after another (or at the start of the output)
adds nothing, so a document cannot produce blank lines or trailing spaces, whatever the comments
inserted into it. The rules language ignores whitespace and newlines, so a break may go between
any two tokens without changing the program.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum


@dataclass(frozen=True)
class Token:
    """A token of the program. ``grouping`` marks the parentheses the printer adds around an
    operand for precedence: they are not counted when comments are matched to tokens."""

    text: str
    grouping: bool = False


@dataclass(frozen=True)
class Comment:
    """A comment's text (``# ...``, with the spaces before it at the end of a line), never split
    or moved by the renderer, and not counted against the width."""

    text: str


@dataclass(frozen=True)
class Line:
    """A possible break: ``flat`` (a space by default) when its group fits, else a new line."""

    flat: str = " "


class Break(Enum):
    HARD = "hard"  # always a new line
    FRESH = "fresh"  # a new line unless the current one is still empty


HARD = Break.HARD
FRESH = Break.FRESH


@dataclass(frozen=True)
class Group:
    """Printed flat when it fits (and holds no forced break), else its own lines break."""

    parts: Doc
    forced: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "forced", _has_break(self.parts))


@dataclass(frozen=True)
class Nest:
    """Lines inside break to the enclosing indentation plus ``by``."""

    by: int
    parts: Doc


@dataclass(frozen=True)
class Align:
    """Lines inside break to the column where it starts (after an opening bracket)."""

    parts: Doc


Doc = str | Token | Comment | Line | Break | Group | Nest | Align | Sequence["Doc"]


def _has_break(doc: Doc) -> bool:
    stack: list[Doc] = [doc]
    while stack:
        part = stack.pop()
        if isinstance(part, Break):
            return True
        if isinstance(part, Group):
            if part.forced:
                return True
        elif isinstance(part, Nest | Align):
            stack.append(part.parts)
        elif isinstance(part, list | tuple):
            stack.extend(part)
    return False


_FLAT, _BREAK = 0, 1


def render(doc: Doc, width: int, indent: int = 0) -> str:
    """The document laid out within ``width`` columns where it can be (a long string cannot be
    split), lines indented from ``indent``; no trailing newline."""
    lines: list[str] = []
    current: list[str] = []
    column = 0
    pending: int | None = None  # a new line is due before the next text, at this indentation
    stack: list[tuple[int, int, Doc]] = [(indent, _BREAK, doc)]

    def write(text: str) -> None:
        nonlocal column, pending
        if pending is not None or not current:
            if text.isspace():
                return  # no spaces at the start of a line
            if current:
                lines.append("".join(current).rstrip())
                current.clear()
            start = pending if pending is not None else indent
            current.append(" " * start)
            column, pending = start, None
        current.append(text)
        column += len(text)

    while stack:
        at, mode, part = stack.pop()
        if isinstance(part, str):
            if part:
                write(part)
        elif isinstance(part, Token | Comment):
            write(part.text)
        elif isinstance(part, Line):
            if mode == _FLAT:
                if part.flat:
                    write(part.flat)
            else:
                pending = at
        elif isinstance(part, Break):
            if part is HARD or (current and "".join(current).strip()):
                pending = at
        elif isinstance(part, Group):
            start = pending if pending is not None else column
            flat = mode == _FLAT or (not part.forced and _fits(width - start, (at, _FLAT, part.parts), stack))
            stack.append((at, _FLAT if flat else _BREAK, part.parts))
        elif isinstance(part, Nest):
            stack.append((at + part.by, mode, part.parts))
        elif isinstance(part, Align):
            stack.append((pending if pending is not None else column, mode, part.parts))
        else:
            stack.extend((at, mode, p) for p in reversed(part))
    if current:
        lines.append("".join(current).rstrip())
    return "\n".join(lines)


def _fits(room: int, first: tuple[int, int, Doc], rest: list[tuple[int, int, Doc]]) -> bool:
    """Whether ``first`` flat, and what follows it up to the next line break, takes at most
    ``room`` columns. What follows is measured in its own mode, its groups as they would be."""
    todo: list[tuple[int, Doc]] = [(first[1], first[2])]
    later = len(rest)
    while room >= 0:
        if not todo:
            if later == 0:
                return True
            later -= 1
            todo.append((rest[later][1], rest[later][2]))
            continue
        mode, part = todo.pop()
        if isinstance(part, str):
            room -= len(part)
        elif isinstance(part, Token):
            room -= len(part.text)
        elif isinstance(part, Comment):
            return True  # a comment ends its line, and never makes the code before it break
        elif isinstance(part, Line):
            if mode == _BREAK:
                return True
            room -= len(part.flat)
        elif isinstance(part, Break):
            return True
        elif isinstance(part, Group):
            todo.append((_BREAK if part.forced else mode, part.parts))
        elif isinstance(part, Nest | Align):
            todo.append((mode, part.parts))
        else:
            todo.extend((mode, p) for p in reversed(part))
    return False
