"""Whether a rule can be evaluated as columns (:mod:`rulesched.engine.vectorise`), decided once per
expression when the rules load: what reads no node is always supported (the interpreter answers
it once); what reads the node is supported if it is arithmetic, comparisons and logic over scalar
node values, fields and constant keys, built-in calls, and loops over pod-side lists, and not a
loop over a node's own list, ``in`` over lists, ``%``, or the cluster itself.
"""

from __future__ import annotations

from rulesched.engine.arrays import SCALAR
from rulesched.engine.domain_columns import groupable
from rulesched.lang import schema
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import Annotations
from rulesched.lang.types import MapOf


def vectorisable(expr: ast.Expr, notes: Annotations, lets: dict[str, ast.Let]) -> bool:
    """Whether :class:`ColumnEvaluator` can evaluate ``expr`` (values may still make it raise
    :class:`Unsupported`)."""
    return Analysis(notes, lets).supported(expr)


class Analysis:
    def __init__(self, notes: Annotations, lets: dict[str, ast.Let]) -> None:
        self.notes, self.lets = notes, lets
        self._node: dict[int, bool] = {}
        self._supported: dict[int, bool] = {}  # (the answer for each expression: it never changes)

    def reads_node(self, expr: ast.Expr) -> bool:
        key = id(expr)
        hit = self._node.get(key)
        if hit is None:
            if isinstance(expr, ast.Name):
                ref = self.notes.names[key]
                if ref.kind == "let":
                    hit = self.reads_node(self.lets[ref.name].value)
                else:  # (the cluster: a domain's answers are not columns; counted as the node's)
                    hit = ref.kind != "bound" and ref.name in (schema.NODE_VARIABLE, schema.CLUSTER_VARIABLE)
            else:
                hit = any(self.reads_node(c) for c in ast.children(expr))
            self._node[key] = hit
        return hit

    def supported(self, expr: ast.Expr) -> bool:
        key = id(expr)
        hit = self._supported.get(key)
        if hit is None:
            hit = self._supported[key] = self._supported_now(expr)
        return hit

    def _supported_now(self, expr: ast.Expr) -> bool:
        if not self.reads_node(expr):
            return True
        notes = self.notes
        over_domain = groupable(expr, notes, self.reads_node)
        if over_domain is not None:
            return over_domain
        match expr:
            case ast.Name():
                ref = notes.names[id(expr)]
                if ref.name == schema.CLUSTER_VARIABLE and ref.kind == "var":
                    return False
                return ref.kind != "let" or self.supported(self.lets[ref.name].value)
            case ast.Attr(obj=obj):
                return self.supported(obj)
            case ast.Index(obj=obj, key=key):
                return isinstance(notes.types[id(obj)], MapOf) and not self.reads_node(key) and self.supported(obj)
            case ast.Call(func=func, args=args):
                return func != "domain" and all(self.supported(a) for a in args)
            case ast.Unary(operand=operand):
                return self.supported(operand)
            case ast.Binary(op=op, left=left, right=right):
                if op not in ("and", "or"):
                    info = notes.binary[id(expr)]
                    if info.kind == "seq" or op in ("in", "not in", "%"):
                        return False
                    if notes.types[id(left)] not in SCALAR or notes.types[id(right)] not in SCALAR:
                        return False
                return self.supported(left) and self.supported(right)
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                return all(self.supported(e) for e in (cond, then, otherwise))
            case ast.Quantifier(iterable=iterable, where=where):
                return not self.reads_node(iterable) and (where is None or self.supported(where))
            case ast.Aggregate(kind=kind, iterable=iterable, value=value, where=where):
                return (
                    kind == "sum"
                    and not self.reads_node(iterable)
                    and self.supported(value)
                    and (where is None or self.supported(where))
                )
        return False
