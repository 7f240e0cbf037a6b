"""An expression walked with the lets it uses followed, for the analyses that ask what a rule
reads (which node fields, which pod fields, whether it reads the victim only by priority): a let
is inlined where it is used, so a rule reads what its lets read.

:func:`through_lets` visits ``expr`` and its sub-expressions depth first, in source order, and at
a name standing for a let visits the let's value instead (once per let: a let used twice reads
the same things twice). The visitor says of each expression whether to go on into its
sub-expressions (:data:`INTO`), that it is settled there (:data:`DONE`), or that the answer is
no (:data:`STOP`, which ends the walk). No recursion: a walk is as deep as the lets nest
(:data:`rulesched.lang.frontend.lets.MAX_EXPANDED_DEPTH` bounds it) without Python frames.
Next stage: the engine's analyses (rulesched.engine: columns, sharing, alike, dryrun_columns) and
the compiled rule set's (rulesched.lang.evaluation).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations


class Visit(enum.Enum):
    """What a visitor says of the expression it was shown."""

    INTO = "into"  # go on into its sub-expressions
    DONE = "done"  # settled: its sub-expressions are not visited
    STOP = "stop"  # the answer is no: the walk ends


INTO, DONE, STOP = Visit.INTO, Visit.DONE, Visit.STOP

# The visitor: an expression and the one it is a direct part of (None for the walk's root and
# for a let's value, which stands where the let's name was but is visited as a root).
Visitor = Callable[[ast.Expr, ast.Expr | None], Visit]


def through_lets(expr: ast.Expr, notes: Annotations, lets: Mapping[str, ast.Let], visit: Visitor) -> bool:
    """Visit ``expr`` with its lets followed (see the module docstring): False as soon as a visit
    says :data:`STOP`, else True. A name standing for a let is not shown to ``visit``; its
    value is, the first time the let is met."""
    seen: set[str] = set()
    names = notes.names
    stack: list[tuple[ast.Expr, ast.Expr | None]] = [(expr, None)]
    while stack:
        e, parent = stack.pop()
        if isinstance(e, ast.Name):
            ref = names.get(id(e))
            if ref is not None and ref.kind == "let":
                if ref.name not in seen:
                    seen.add(ref.name)
                    stack.append((lets[ref.name].value, None))
                continue
        verdict = visit(e, parent)
        if verdict is STOP:
            return False
        if verdict is INTO:
            stack.extend((child, e) for child in reversed(ast.children(e)))
    return True


def is_rule_variable(notes: Annotations, e: ast.Expr, name: str) -> bool:
    """Whether ``e`` is the rule variable ``name`` itself (``node``, ``pod``, ``victim``,
    ``cluster``): not a let or an aggregate's variable of that name."""
    if not isinstance(e, ast.Name):
        return False
    ref = notes.names.get(id(e))
    return ref is not None and ref.kind == "var" and ref.name == name
