"""Lets kept: once per pod and node (:func:`once`), and by the values they read
(:func:`kept_by_inputs`).

A costly let that reads the pod and the node only through other lets is a function of those
lets' values, so its answer is kept by them and shared between pods and nodes. FGD's
``frag_after`` (rules/gpu-fragmentation.rules) loops over 35 pod shapes and the node's GPUs, for
every class of pods on every node a bind changed; what it reads is three lets, the GPUs' free
milli after the pod (``free_after``), the cpus left (``cpu_after``) and the GPU model. Pods of
different classes (say, differing in memory, which no fragmentation term reads) and nodes alike
(a rack of empty 8-GPU servers) give it the same three values again and again. An int read only
against a constant table's column (``cpu_after >= m.cpu`` over the mix) is keyed by where it
falls among that column's values (:func:`compared_only_with`), a list read only by loops whose
answer is the same in any order, sorted (:func:`only_looped_over`): on the openb trace 92% of
``frag_after``'s evaluations (90,194 of 98,163) find their answer kept.

Kept answers never go stale: the let reads nothing but its inputs (the checker's notes say so:
no ``pod``, ``node``, cluster, rule variable or built-in reading the cluster), and a compiled rule
set has its own table, so a reload starts afresh. Only values whose equality is identity of
meaning are keys: ints, strings, bools and tuples of them, checked per input against the type
the checker gave it (a number that is a float, where 1.0 == 1 and -0.0 == 0.0 would merge values
a rule can tell apart, is evaluated, not looked up). Each input is evaluated before the lookup, as
the let's body would have (each is computed once per pod and node, :func:`once`, so its use
inside the body then costs a lookup); the static cost bound counts every let once, so it holds.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.stages import NodeFn, Staged, map1
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.types import BOOL, DURATION, NUMBER, QUANTITY, STRING, ListOf, Type

LIMIT = 65_536  # answers kept per let; past it the table starts afresh (about 10 MB for FGD's)
_MISSING = object()

Check = Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_str(v: Any) -> bool:
    return type(v) is str


def _is_bool(v: Any) -> bool:
    return type(v) is bool


_SCALAR: dict[Type, type] = {NUMBER: int, QUANTITY: int, DURATION: int, STRING: str, BOOL: bool}
_SCALAR_CHECK: dict[type, Check] = {int: _is_int, str: _is_str, bool: _is_bool}


def key_check(t: Type | None) -> Check | None:
    """How to tell that a value of type ``t`` is a safe key (None: no value of it is)."""
    if t in _SCALAR:
        return _SCALAR_CHECK[_SCALAR[t]]
    if isinstance(t, ListOf) and t.elem in _SCALAR:
        elem = _SCALAR[t.elem]

        def all_of(v: Any) -> bool:
            if type(v) is not tuple:
                return False
            for x in v:
                if type(x) is not elem:
                    return False
            return True

        return all_of
    return None


def let_inputs(expr: ast.Expr, notes: Annotations) -> list[str] | None:
    """The lets ``expr`` reads (in order of first use), when it reads nothing else that varies
    between pods or nodes; None when it does (the pod, the node, the cluster, a rule's variable,
    a built-in reading the cluster)."""
    found: list[str] = []
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Name):
            ref = notes.names.get(id(e))
            if ref is None:
                return None
            if ref.kind == "let":
                if ref.name not in found:
                    found.append(ref.name)
            elif ref.kind != "bound":
                return None  # pod, node, cluster, victim, device, request
            continue
        if isinstance(e, ast.Call) and BUILTINS[e.func].context:
            return None
        stack.extend(reversed(ast.children(e)))
    return found


def worth_keeping(expr: ast.Expr) -> bool:
    """Whether the let loops (an aggregate or quantifier somewhere in it): else its body costs
    about what the lookup does."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (ast.Quantifier, ast.Aggregate)):
            return True
        stack.extend(ast.children(e))
    return False


def kept_by_inputs(
    code: Staged,
    value: ast.Expr,
    notes: Annotations,
    lets: Mapping[str, ast.Let],
    input_code: Callable[[str], Staged],
    tables: dict[Hashable, dict[tuple[Any, ...], Any]] | None = None,
) -> Staged:
    """``code`` (a let's, whose body is ``value``) with its answers kept by its
    inputs' values, when it loops, reads the pod and the node (a node-stage code that depends on
    the pod) or the node alone (a node-only code) and reads them only through lets whose values
    can be keys; else ``code`` as it is. ``input_code(let)`` gives an input let's compiled code.
    ``tables``: the compiled set's tables of kept answers, by the let's body up to its inputs
    (:func:`body_shape`): lets computing the same function of their inputs share one."""
    static = code.node is None
    if (static and (code.static is None or code.is_const)) or not code.free <= _POD_NODE:
        return code
    names = let_inputs(value, notes)
    if names is None or not worth_keeping(value):
        return code
    inputs: list[tuple[str, Staged, Check]] = []
    for input_name in names:
        input_staged = input_code(input_name)
        if input_staged.is_const:
            continue  # (the same for every pod and node: no part of the key)
        if static and input_staged.static is None:
            return code
        check = key_check(notes.types.get(id(lets[input_name].value)))
        if check is None:
            return code
        inputs.append((input_name, input_staged, check))
    if not any(c.pod is None for _, c, _ in inputs):
        return code  # (pod-only inputs: the let is computed once per pod anyway)
    # The key: the pod-stage inputs' values, then the others', each in order of first use; an int
    # compared only with a constant table's column, by where it falls among that column's values.
    inputs.sort(key=lambda i: i[1].pod is None)
    order = [name for name, _, _ in inputs]
    # A list read only by loops whose answer is the same in any order is keyed sorted.
    ways: list[tuple[Hashable, Callable[[Any], Any]] | None] = []
    for n, _, check in inputs:
        among = compared_only_with(value, notes, n, input_code) if check is _is_int else None
        if among is not None:
            ways.append((among, _rank(among)))
        else:
            ways.append(("sorted", _sorted) if only_looped_over(value, notes, n) else None)
    types = tuple(repr(notes.types.get(id(lets[n].value))) for n in order)
    made = tuple(None if w is None else w[0] for w in ways)  # (how each input's key is made)
    kept = {} if tables is None else tables.setdefault((body_shape(value, notes, order), types, made), {})
    keyed = [(c if w is None else map1(c, w[1]), check) for (_, c, check), w in zip(inputs, ways, strict=True)]
    if static:
        return Staged(code.free, static=_static_keeper(code, keyed, kept), cost=code.cost)
    return Staged(code.free, node=_keeper(code, keyed, kept))


def body_shape(expr: ast.Expr, notes: Annotations, inputs: Sequence[str]) -> Hashable:
    """``expr`` as a value, the lets ``inputs`` by their position in it, every other name by
    its own and every constant with its type (``1`` is not ``1.0``): lets whose bodies have one
    shape compute the same function of their inputs' values, when those have the same types.
    (FGD's ``frag_now`` over the GPUs and cpus free now, ``frag_after`` over those after the
    pod: one table, and a node's ``frag_now`` after a bind is the placed pod's ``frag_after``.)"""
    position = {name: i for i, name in enumerate(inputs)}

    def shape(e: Any) -> Hashable:
        if isinstance(e, ast.Name):
            ref = notes.names.get(id(e))
            if ref is not None and ref.kind == "let" and ref.name in position:
                return ("input", position[ref.name])
        if isinstance(e, ast.Node):
            return (
                type(e).__name__,
                *(shape(getattr(e, f.name)) for f in dataclasses.fields(e) if f.compare),
            )
        if isinstance(e, tuple):
            return tuple(shape(x) for x in e)
        return (type(e).__name__, e)

    return shape(expr)


def compared_only_with(
    expr: ast.Expr, notes: Annotations, name: str, let_code: Callable[[str], Staged]
) -> tuple[int, ...] | None:
    """The ints (sorted, distinct) the let ``name`` is compared with in ``expr``, when every use
    of it there is a comparison (< <= > >=) with an int constant or with a column of a constant
    table the comparison loops over (``cpu_after >= m.cpu for m in mix``); None when it is read
    otherwise. ``expr`` then depends on the let's value only through where it falls among
    those ints, so values falling alike may share a kept answer (:func:`_rank`): FGD's
    ``frag_after`` reads the cpus left after the pod only against its mix's 35 cpu requests.
    ``let_code(let)`` gives a let's compiled code (whether a table is constant)."""
    found: set[Any] = set()

    def is_input(e: ast.Expr) -> bool:
        ref = notes.names.get(id(e))
        return isinstance(e, ast.Name) and ref is not None and ref.kind == "let" and ref.name == name

    def values(e: ast.Expr, scope: Mapping[str, ast.Expr]) -> list[Any] | None:
        if notes.coercions.get(id(e)) is not None:
            return None
        if isinstance(e, ast.Literal):
            return [e.value]
        if not (isinstance(e, ast.Attr) and isinstance(e.obj, ast.Name) and e.obj.id in scope):
            return None
        ref, table, attr = notes.names.get(id(e.obj)), scope[e.obj.id], notes.attrs.get(id(e))
        table_ref = notes.names.get(id(table))
        if ref is None or ref.kind != "bound" or attr is None or attr.field is None:
            return None
        if not isinstance(table, ast.Name) or table_ref is None or table_ref.kind != "let":
            return None
        rows = let_code(table_ref.name)
        return [attr.field.get(row) for row in rows.const] if rows.is_const else None

    def visit(e: ast.Expr, scope: Mapping[str, ast.Expr]) -> bool:
        if is_input(e):
            return False  # (read other than compared: its value itself may matter)
        if isinstance(e, ast.Binary) and e.op in ("<", "<=", ">", ">=") and (is_input(e.left) or is_input(e.right)):
            info = notes.binary[id(e)]
            other = e.right if is_input(e.left) else e.left
            found_here = values(other, scope) if info.left is None and info.right is None else None
            if found_here is None or is_input(other):
                return False
            found.update(found_here)
            return visit(other, scope)
        if isinstance(e, (ast.Quantifier, ast.Aggregate)):
            inner = {**scope, e.var: e.iterable}
            looped = [e.where] + ([e.value] if isinstance(e, ast.Aggregate) else [])
            parts = [(e.iterable, scope)] + [(c, inner) for c in looped if c is not None]
            return all(visit(c, s) for c, s in parts)
        return all(visit(c, scope) for c in ast.children(e))

    if not visit(expr, {}) or not found or any(type(v) is not int for v in found):
        return None
    return tuple(sorted(found))


def only_looped_over(expr: ast.Expr, notes: Annotations, name: str) -> bool:
    """Whether every use of the let ``name`` in ``expr`` is as the list a count, any or all loops
    over, or a sum, min or max of its elements themselves (``sum(f for f in free_after where f <
    m.milli)``): answers the same in any order of the list (its elements are ints when it is a
    key: their sum is exact in any order), so the list may be keyed sorted (:func:`_sorted`)."""

    def is_input(e: ast.Expr) -> bool:
        ref = notes.names.get(id(e))
        return isinstance(e, ast.Name) and ref is not None and ref.kind == "let" and ref.name == name

    def visit(e: ast.Expr) -> bool:
        if is_input(e):
            return False
        if isinstance(e, (ast.Quantifier, ast.Aggregate)) and is_input(e.iterable):
            if isinstance(e, ast.Aggregate):
                ref = notes.names.get(id(e.value))
                itself = (
                    isinstance(e.value, ast.Name) and e.value.id == e.var and ref is not None and ref.kind == "bound"
                )
                if e.kind not in ("sum", "min", "max") or not itself:
                    return False
            return e.where is None or visit(e.where)
        return all(visit(c) for c in ast.children(e))

    return visit(expr)


def _sorted(v: Any) -> Any:
    """A list's key when its order does not matter (:func:`only_looped_over`)."""
    return tuple(sorted(v)) if type(v) is tuple else v


def _rank(among: tuple[int, ...]) -> Callable[[Any], Any]:
    """An int's key by where it falls among ``among``: equal for two ints exactly when each
    compares alike with every one of them (below, at, or above); anything else as it is (no key)."""
    size = len(among)

    def rank(v: Any) -> Any:
        if type(v) is not int:
            return v
        i = bisect.bisect_left(among, v)
        return 2 * i + (i < size and among[i] == v)

    return rank


def _static_keeper(code: Staged, inputs: Sequence[tuple[Staged, Check]], kept: dict[tuple[Any, ...], Any]) -> NodeFn:
    fns: list[tuple[NodeFn, Check]] = []
    for c, check in inputs:
        assert c.static is not None  # (kept_by_inputs: a node-only let's inputs are node-only)
        fns.append((c.static, check))
    assert code.static is not None
    return _keeping([], fns, code.static, kept)


def _keeper(
    code: Staged, inputs: Sequence[tuple[Staged, Check]], kept: dict[tuple[Any, ...], Any]
) -> Callable[[EvalContext], NodeFn]:
    make = code.factory()
    pod_inputs = [(c.pod, check) for c, check in inputs if c.pod is not None]
    node_inputs = [(c.factory(), check) for c, check in inputs if c.pod is None]

    def factory(ctx: EvalContext) -> NodeFn:
        fn = make(ctx)
        prefix = []
        for pod_fn, check in pod_inputs:
            v = pod_fn(ctx, {})
            if not check(v):
                return fn
            prefix.append(v)
        return _keeping(prefix, [(f(ctx), check) for f, check in node_inputs], fn, kept)

    return factory


def _keeping(
    prefix: list[Any], inputs: Sequence[tuple[NodeFn, Check]], fn: NodeFn, kept: dict[tuple[Any, ...], Any]
) -> NodeFn:
    """``fn`` looked up in ``kept`` by ``prefix`` (the pod-stage inputs' values) and the node-stage
    inputs' values; computed (and kept) when missing, computed alone when an input is no key."""

    def keeping(n: Any, env: Any = None) -> Any:
        key = prefix.copy()
        for f, check in inputs:
            v = f(n, env)
            if not check(v):
                return fn(n, env)
            key.append(v)
        k = tuple(key)
        found = kept.get(k, _MISSING)
        if found is _MISSING:
            if len(kept) >= LIMIT:
                kept.clear()
            found = kept[k] = fn(n, env)
        return found

    return keeping


_POD_NODE = frozenset({schema.POD_VARIABLE, schema.NODE_VARIABLE})
_UNSET = object()


def once(name: str, code: Staged) -> Staged:
    """A let reading the pod and the node (no loop's variable, not the cluster) is computed once
    per (pod, node): its value is kept in the pod's context, with the node and its generation,
    and every later use on that node reads it (each use, in any rule or loop, costs a lookup;
    rulesched.lang.frontend.cost counts the let once). A let reading the pod alone is kept in
    the pod's context too: it is computed within one pod-stage evaluation, where each use would
    otherwise compute it again (a chain of lets each using the one before twice doubled at every
    link: tests/test_lang_hostile.py's doublings)."""
    if not code.free <= _POD_NODE:
        return code
    if code.node is None:
        if code.pod is None:
            return code
        pod_fn, pod_key = code.pod, ("let pod", name)

        def once_per_pod(ctx: EvalContext, env: Any) -> Any:
            kept = ctx.scratch.get(pod_key, _UNSET)
            if kept is _UNSET:
                kept = ctx.scratch[pod_key] = pod_fn(ctx, env)
            return kept

        return dataclasses.replace(code, pod=once_per_pod)
    inner, key = code.node, ("let", name)

    def factory(ctx: EvalContext) -> NodeFn:
        fn = inner(ctx)
        scratch = ctx.scratch

        def once(n: Any, env: Any = None) -> Any:
            kept = scratch.get(key)
            if kept is not None and kept[0] is n and kept[1] == n.generation:
                return kept[2]
            value = fn(n, env)
            scratch[key] = (n, n.generation, value)
            return value

        return once

    return Staged(code.free, node=factory)
