"""The lets of a rule set as a graph: which lets each one uses, an order with every let after
the lets it uses, the cycles, and how deep each expression nests once its lets are substituted.

A let is inlined where it is used, so every later stage that walks an expression walks the lets
it uses as if they were written there: a chain of 170 lets, each using the one before, is an
expression 170 levels deep to the compiler. :mod:`rulesched.lang.frontend.parse` bounds the depth
of what is written; this module bounds the depth counting the lets (:data:`MAX_EXPANDED_DEPTH`),
without recursion, so that the checker (:mod:`rulesched.lang.frontend.check`, which types the lets
in this order, each once) and the stages after it never recurse deeper than that.
Next stage: :mod:`rulesched.lang.frontend.cost` (what a rule costs, lets counted by use).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.parse import MAX_DEPTH

# How many expressions a rule's expression or a let may hold with the lets it uses substituted.
# The cost model counts a let once per (pod, node) (the compiler and the interpreter keep its
# value), but the stages that walk expressions with their lets substituted (column planning,
# sharing, explain's blame, domain values) visit a let at each use: a chain of lets each using the
# one before twice doubles at every link. This bound keeps those walks linear in what is written;
# the bundled rules' largest let holds 673.
MAX_EXPANDED_SIZE = 50_000
_SIZE_CAP = 10**18

# How deep an expression may nest with the lets it uses substituted. Every recursive stage (the
# compiler, the column planner, the interpreter) takes a few Python frames per level: at 128
# levels they stay far below Python's recursion limit of 1000 whatever calls them, and no real
# rule comes near (the bundled ones nest at most 15 levels with their lets).
MAX_EXPANDED_DEPTH = 2 * MAX_DEPTH


def let_uses(expr: ast.Expr, lets: Mapping[str, object]) -> Iterator[tuple[ast.Name, int]]:
    """The names in ``expr`` that stand for a let (not for an aggregate's variable of the same
    name), each with its level in ``expr`` (the root is level 1). No recursion."""
    stack: list[tuple[ast.Expr, int, frozenset[str]]] = [(expr, 1, frozenset())]
    while stack:
        e, level, bound = stack.pop()
        if isinstance(e, ast.Name):
            if e.id in lets and e.id not in bound:
                yield e, level
        elif isinstance(e, (ast.Quantifier, ast.Aggregate)):
            inner = bound | {e.var}
            stack.append((e.iterable, level + 1, bound))
            if e.where is not None:
                stack.append((e.where, level + 1, inner))
            if isinstance(e, ast.Aggregate):
                stack.append((e.value, level + 1, inner))
        else:
            stack.extend((child, level + 1, bound) for child in ast.children(e))


def own_size(expr: ast.Expr) -> int:
    """How many expressions ``expr`` holds as written. No recursion."""
    count, stack = 0, [expr]
    while stack:
        count += 1
        stack.extend(ast.children(stack.pop()))
    return count


def own_depth(expr: ast.Expr) -> int:
    """How deep ``expr`` nests as written (the root alone is 1). No recursion."""
    deepest = 0
    stack = [(expr, 1)]
    while stack:
        e, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.children(e))
    return deepest


@dataclass(frozen=True)
class LetGraph:
    """What :func:`let_graph` found. ``order`` holds every let, each after the lets it uses (the
    members of a cycle in some order); ``cycles`` maps the let where a cycle was entered to the
    path around it; ``depth`` is how deep each let's value nests with its lets substituted (a
    use of a let on a cycle counts as one level)."""

    order: tuple[str, ...]
    uses: Mapping[str, tuple[str, ...]]
    cycles: Mapping[str, tuple[str, ...]]
    in_cycle: frozenset[str]
    depth: Mapping[str, int]
    size: Mapping[str, int]

    def expanded_size(self, expr: ast.Expr, lets: Mapping[str, object]) -> tuple[int, ast.Name | None]:
        """How many expressions ``expr`` holds with its lets substituted (capped at 10^18), and
        the use of the largest let in it (None when it uses none)."""
        total, largest, through = own_size(expr), 0, None
        for name, _ in let_uses(expr, lets):
            size = self.size.get(name.id, 1)
            total = min(_SIZE_CAP, total + size - 1)
            if size > largest:
                largest, through = size, name
        return total, through

    def expanded_depth(self, expr: ast.Expr, lets: Mapping[str, object]) -> tuple[int, ast.Name | None]:
        """How deep ``expr`` nests with its lets substituted, and the use of a let through which
        it is deepest (None when what is written is deepest)."""
        deepest, through = own_depth(expr), None
        for name, level in let_uses(expr, lets):
            total = level - 1 + self.depth.get(name.id, 1)
            if total > deepest:
                deepest, through = total, name
        return deepest, through


def let_graph(lets: Mapping[str, ast.Let]) -> LetGraph:
    uses = {name: tuple(dict.fromkeys(n.id for n, _ in let_uses(let.value, lets))) for name, let in lets.items()}
    order: list[str] = []
    cycles: dict[str, tuple[str, ...]] = {}
    in_cycle: set[str] = set()
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    for root in lets:
        if root in state:
            continue
        path: list[str] = [root]
        pending: list[Iterator[str]] = [iter(uses[root])]
        state[root] = 1
        while pending:
            nxt = next(pending[-1], None)
            if nxt is None:
                done = path.pop()
                pending.pop()
                state[done] = 2
                order.append(done)
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                pending.append(iter(uses[nxt]))
            elif state[nxt] == 1:  # back to a let still being walked: a cycle
                loop = tuple(path[path.index(nxt) :])
                in_cycle.update(loop)
                cycles.setdefault(nxt, loop)
    depth: dict[str, int] = {}
    size: dict[str, int] = {}
    graph = LetGraph(tuple(order), uses, cycles, frozenset(in_cycle), depth, size)
    for name in order:  # every let after those it uses: their depths and sizes are known
        acyclic = {u: None for u in uses[name] if u not in in_cycle}
        depth[name] = graph.expanded_depth(lets[name].value, acyclic)[0]
        size[name] = graph.expanded_size(lets[name].value, acyclic)[0]
    return graph
