"""A worst-case cost for a CEL selector, before it is ever evaluated.

CEL has no loops but its comprehension macros (``all``, ``exists``, ``exists_one``, ``map``,
``filter``), each running its body once per element of a list or map. A selector's input is
bounded (a device has at most 32 attributes and capacities, a list attribute at most 64 values,
strings at most 64 characters), so the worst case is the expression's size with each
comprehension's body counted once per element it may see: a list literal's length, or 64 for
anything the device holds. cel-go estimates costs with per-operation weights; this bound counts
tokens instead, which is cruder but has the property that matters: an expression under it
terminates within it, and nesting comprehensions (the way to make CEL expensive) multiplies it,
as in Kubernetes' estimate. The allocator refuses selectors estimated above 1,000,000
(CELSelectorExpressionMaxCost), as the API server refuses to store them.
"""

from __future__ import annotations

import re

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
DEVICE_RANGE = 64  # the most elements a comprehension over the device's values sees

_TOKEN = re.compile(
    r"""\s+|(?P<str>[rRbB]*(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))"""
    r"""|(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<num>[0-9][0-9a-fA-FxXuU.eE+-]*)|(?P<op>\|\||&&|[=!<>]=|.)"""
)


def _tokens(expression: str) -> list[str]:
    out = []
    for m in _TOKEN.finditer(expression):
        if m.lastgroup is not None:
            out.append(m.group(0))
    return out


def _match(tokens: list[str], start: int) -> int:
    """The index of the bracket closing the one at ``start`` (or the end)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack = [pairs[tokens[start]]]
    i = start + 1
    while i < len(tokens) and stack:
        t = tokens[i]
        if t in pairs:
            stack.append(pairs[t])
        elif stack and t == stack[-1]:
            stack.pop()
        i += 1
    return i - 1


def _range(tokens: list[str], dot: int) -> int:
    """How many elements the comprehension whose receiver ends before ``dot`` runs over."""
    end = dot - 1
    if end >= 0 and tokens[end] == "]":
        # a list literal: '[' preceded by nothing, an operator or an opening bracket
        depth, i = 0, end
        while i >= 0:
            if tokens[i] in ("]", ")", "}"):
                depth += 1
            elif tokens[i] in ("[", "(", "{"):
                depth -= 1
                if depth == 0:
                    break
            i -= 1
        before = tokens[i - 1] if i > 0 else ""
        if i >= 0 and not (before[:1].isalnum() or before in ("]", ")", '"', "'") or before[:1] in "\"'"):
            inner = tokens[i + 1 : end]
            if not inner:
                return 0
            level, commas = 0, 0
            for t in inner:
                if t in ("[", "(", "{"):
                    level += 1
                elif t in ("]", ")", "}"):
                    level -= 1
                elif t == "," and level == 0:
                    commas += 1
            return commas + 1
    return DEVICE_RANGE


def _cost(tokens: list[str], start: int, end: int) -> int:
    total = 0
    i = start
    while i < end:
        t = tokens[i]
        if t == "." and i + 2 < end and tokens[i + 1] in MACROS and tokens[i + 2] == "(":
            close = _match(tokens, i + 2)
            body = _cost(tokens, i + 3, close)
            total += _range(tokens, i) * (body + 1) + 1
            i = close + 1
            continue
        total += 1
        i += 1
    return total


def estimate_cost(expression: str) -> int:
    """The expression's worst-case cost (see the module's docstring)."""
    tokens = _tokens(expression)
    return _cost(tokens, 0, len(tokens))
