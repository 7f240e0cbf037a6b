"""Type rules' expressions: what the checker (:mod:`rulesched.lang.frontend.check`) asks of each
guard, body, reason and let.

:class:`Inference` infers an expression's type bottom-up in a :class:`Scope` (the rule
variables a place may read, the names a quantifier binds) and records, per expression, the
decisions the next stages follow in :class:`~rulesched.lang.frontend.checked.Annotations`:
types, operator coercions (a number read as a quantity), what each name and attribute refers
to, which pod fields and built-ins the rules read, and the domain aggregates
(:mod:`rulesched.lang.frontend.domain_check`). Each problem is a diagnostic on the checker's
list; the expression is then typed ANY, so that one mistake is reported once.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.builtins.groups import GROUP_FIELDS, GROUP_VARIABLE
from rulesched.lang.frontend import ast
from rulesched.lang.frontend import domain_check as domains
from rulesched.lang.frontend.checked import Annotations, AttrRef, NameRef
from rulesched.lang.frontend.source import Diagnostic, error
from rulesched.lang.schema import table_fields
from rulesched.lang.types import (
    ANY,
    BOOL,
    DURATION,
    NUMBER,
    QUANTITY,
    STRING,
    TO_MILLI,
    ListOf,
    MapOf,
    Record,
    TableRow,
    Type,
    binary,
    fits,
    is_numeric,
)

_LITERAL_TYPES = {
    ast.LiteralKind.NUMBER: NUMBER,
    ast.LiteralKind.QUANTITY: QUANTITY,
    ast.LiteralKind.DURATION: DURATION,
    ast.LiteralKind.STRING: STRING,
    ast.LiteralKind.BOOL: BOOL,
}


@dataclass
class Scope:
    variables: dict[str, Type]
    bound: dict[str, Type] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # rule variables the expression reads
    where: str = ""  # for messages: "a guard", "a score"


def _unbound_group(scope: Scope, lets: Mapping[str, ast.Let]) -> bool:
    """``group`` names the group being placed (no variable or let shadows it)."""
    return GROUP_VARIABLE not in scope.variables and GROUP_VARIABLE not in scope.bound and GROUP_VARIABLE not in lets


class Inference:
    """The types of one rule set's expressions. The checker types each let once
    (:attr:`let_types`) before the rules that use it."""

    def __init__(self, diagnostics: list[Diagnostic], lets: Mapping[str, ast.Let]) -> None:
        self.diagnostics = diagnostics  # (the checker's, in the order found)
        self.lets = lets  # every let by name, as the checker reads them
        self.notes = Annotations()
        self.let_types: dict[str, tuple[Type, frozenset[str]]] = {}
        self.used_lets: set[str] = set()
        self.pod_reads, self.pod_attr_reads = 0, 0  # every use of the name `pod`, those reading a field
        self.domain_pods: dict[int, ast.Attr] = {}  # D.pods not (yet) an aggregate's list
        notes = self.notes
        self.domains = domains.Analysis(notes.names, notes.types, self.let_needs, notes.domain_aggregates)

    def error(self, code: str, message: str, expr: Any, suggestion: str = "") -> None:
        self.diagnostics.append(error(code, message, expr.span, suggestion))

    def expect(self, expr: ast.Expr, want: Type, scope: Scope, what: str) -> None:
        got = self.infer(expr, scope)
        if not fits(got, want):
            self.error("type", f"{what} must be {want}, not {got}", expr)

    def infer(self, expr: ast.Expr, scope: Scope) -> Type:
        t = self._infer_inner(expr, scope)
        self.notes.types[id(expr)] = t
        return t

    def _infer_inner(self, expr: ast.Expr, scope: Scope) -> Type:
        match expr:
            case ast.Literal(kind=kind):
                return _LITERAL_TYPES[kind]
            case ast.Table():
                return self._table(expr, scope)
            case ast.ListExpr(items=items):
                types = [self.infer(item, scope) for item in items]
                elem = next((t for t in types if t != ANY), ANY)
                for item, t in zip(items, types, strict=True):
                    if not (fits(t, elem) or fits(elem, t)):
                        self.error("type", f"list items must have one type: {elem} and {t}", item)
                if elem == NUMBER and any(t == QUANTITY for t in types):
                    elem = QUANTITY
                if elem == QUANTITY:
                    self._to_quantity(items, types)
                return ListOf(elem)
            case ast.Name():
                return self._name(expr, scope)
            case ast.Attr():
                return self._attr(expr, scope)
            case ast.Index(obj=obj, key=key):
                container, key_type = self.infer(obj, scope), self.infer(key, scope)
                if isinstance(container, MapOf):
                    if not fits(key_type, STRING):
                        self.error("type", f"map keys are strings, not {key_type}", key)
                    return container.value
                if isinstance(container, ListOf):
                    if not fits(key_type, NUMBER):
                        self.error("type", f"list indexes are numbers, not {key_type}", key)
                    return container.elem
                if container != ANY:
                    self.error("type", f"cannot index {container}", obj)
                return ANY
            case ast.Call():
                return self._call(expr, scope)
            case ast.Unary(op="not", operand=operand):
                self.expect(operand, BOOL, scope, "'not' operand")
                return BOOL
            case ast.Unary(operand=operand):
                t = self.infer(operand, scope)
                if not is_numeric(t):
                    self.error("type", f"cannot negate {t}", operand)
                    return ANY
                return t
            case ast.Binary(op=op, left=left, right=right):
                lt, rt = self.infer(left, scope), self.infer(right, scope)
                if (
                    op in ("in", "not in")
                    and lt == QUANTITY
                    and rt == ListOf(NUMBER)
                    and isinstance(right, ast.ListExpr)
                ):
                    self._to_quantity(right.items, [NUMBER] * len(right.items))  # x in [1, 2]: whole units
                    rt = ListOf(QUANTITY)
                    self.notes.types[id(right)] = rt
                info = binary(op, lt, rt)
                if isinstance(info, str):
                    self.error("type", info, expr)
                    return ANY
                self.notes.binary[id(expr)] = info
                return info.result
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                self.expect(cond, BOOL, scope, "an if condition")
                a, b = self.infer(then, scope), self.infer(otherwise, scope)
                if {a, b} == {NUMBER, QUANTITY}:  # the number branch is read in whole units
                    self._to_quantity([then if a == NUMBER else otherwise], [NUMBER])
                    return QUANTITY
                if a == ANY:
                    return b
                if b == ANY or fits(b, a):
                    return a
                if fits(a, b):
                    return b
                self.error("type", f"if branches differ: {a} and {b}", expr)
                return ANY
            case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
                elem = self._element(iterable, scope)
                inner = self._bind(scope, var, elem, expr)
                if where is not None:
                    self.expect(where, BOOL, inner, "a where condition")
                self._merge(scope, inner)
                self._domain_aggregate(expr)
                return NUMBER if kind == "count" else BOOL
            case ast.Aggregate(kind=kind, value=value, var=var, iterable=iterable, where=where):
                elem = self._element(iterable, scope)
                inner = self._bind(scope, var, elem, expr)
                if where is not None:
                    self.expect(where, BOOL, inner, "a where condition")
                t = self.infer(value, inner)
                self._merge(scope, inner)
                self._domain_aggregate(expr)
                if kind == "collect":
                    return ListOf(t)
                if not is_numeric(t):
                    self.error("type", f"{kind} needs numbers, not {t}", value)
                    return ANY
                return t
        raise AssertionError(f"unknown expression {expr!r}")  # pragma: no cover

    def _domain_aggregate(self, expr: ast.Quantifier | ast.Aggregate) -> None:
        self.diagnostics.extend(self.domains.record(expr, self.notes.domain_aggregates, self.domain_pods))

    def _to_quantity(self, exprs: Sequence[ast.Expr], types: Sequence[Type]) -> None:
        for expr, t in zip(exprs, types, strict=True):
            if t == NUMBER:
                self.notes.coercions[id(expr)] = TO_MILLI

    def _element(self, iterable: ast.Expr, scope: Scope) -> Type:
        t = self.infer(iterable, scope)
        if isinstance(t, ListOf):
            return t.elem
        if isinstance(t, MapOf):
            return STRING  # iterating a map walks its keys
        if t != ANY:
            self.error("type", f"cannot iterate over {t}", iterable)
        return ANY

    def _bind(self, scope: Scope, var: str, elem: Type, expr: ast.Expr) -> Scope:
        if var in scope.variables or var in scope.bound or var in self.lets:
            self.error("shadow", f"'{var}' is already a name here; pick another", expr)
        return Scope(scope.variables, {**scope.bound, var: elem}, scope.used, scope.where)

    @staticmethod
    def _merge(scope: Scope, inner: Scope) -> None:
        scope.used |= inner.used

    def _name(self, expr: ast.Name, scope: Scope) -> Type:
        name = expr.id
        if name in scope.bound:
            self.notes.names[id(expr)] = NameRef("bound", name)
            return scope.bound[name]
        if name in scope.variables:
            self.notes.names[id(expr)] = NameRef("var", name)
            if name == schema.POD_VARIABLE:
                self.pod_reads += 1
            elif name == schema.CLUSTER_VARIABLE:
                self.notes.context_calls.add("domain")
            scope.used.add(name)
            return scope.variables[name]
        if name in self.lets:
            self.notes.names[id(expr)] = NameRef("let", name)
            self.used_lets.add(name)
            t, needs = self.let_type(name)
            missing = sorted(needs - set(scope.variables))
            if missing:
                self.error(
                    "scope",
                    f"let '{name}' reads {', '.join(missing)}, which {scope.where or 'this place'} cannot use",
                    expr,
                )
                return ANY
            scope.used |= needs
            return t
        known = [*scope.bound, *scope.variables, *self.lets]
        if name in schema.BODY_VARIABLES["preempt"]:
            self.error("scope", f"'{name}' cannot be used in {scope.where or 'this place'}", expr)
        else:
            self.error("unknown-name", f"unknown name '{name}'", expr, did_you_mean(name, known))
        return ANY

    def let_needs(self, name: str) -> frozenset[str]:  # (the rule variables the let reads)
        return self.let_type(name)[1]

    def let_type(self, name: str) -> tuple[Type, frozenset[str]]:
        """A let's type and the rule variables it reads, as the checker typed it (ANY before)."""
        return self.let_types.get(name, (ANY, frozenset()))

    def _table(self, table: ast.Table, scope: Scope) -> Type:
        """A table's rows as records: each column one type (that of its first cell not an
        empty list), every cell a constant, every row one cell per column."""
        columns: list[Type] = [ANY] * len(table.columns)
        if len(set(table.columns)) < len(table.columns):
            self.error("type", "a table's columns must have different names", table)
        for row in table.items:
            assert isinstance(row, ast.ListExpr)
            if len(row.items) != len(table.columns):
                self.error("type", f"a row of this table has {len(table.columns)} cells, not {len(row.items)}", row)
            for i, cell in enumerate(row.items[: len(columns)]):
                t = self.infer(cell, scope)
                if not _constant(cell):
                    self.error("type", "a table's cells are constants (numbers, strings, lists of them)", cell)
                elif columns[i] == ANY or columns[i] == ListOf(ANY):
                    columns[i] = t
                elif not fits(t, columns[i]):
                    what = f"column '{table.columns[i]}'"
                    self.error("type", f"{what} holds {columns[i]}; this cell is {t}", cell)
            self.notes.types[id(row)] = ListOf(ANY)
        return ListOf(TableRow("table row", tuple(zip(table.columns, columns, strict=True))))

    def _attr(self, expr: ast.Attr, scope: Scope) -> Type:
        if isinstance(expr.obj, ast.Name) and expr.obj.id == GROUP_VARIABLE and _unbound_group(scope, self.lets):
            # (group.FIELD of a known field is a built-in call already: rulesched.lang.builtins.groups)
            known = ", ".join(f"group.{f}" for f in GROUP_FIELDS)
            self.error("unknown-field", f"the group has no field '{expr.name}' (it has {known})", expr)
            return ANY
        t = self.infer(expr.obj, scope)
        ref = self.notes.names.get(id(expr.obj))
        if ref is not None and ref.kind == "var" and ref.name == schema.POD_VARIABLE:
            self.notes.pod_fields.add(expr.name)
            reads = self.notes.pod_field_reads
            reads[expr.name] = reads.get(expr.name, 0) + 1
            self.pod_attr_reads += 1
        if isinstance(t, Record):
            fields = table_fields(t) if isinstance(t, TableRow) else schema.RECORDS[t]
            if t in domains.DOMAIN_RECORDS and expr.name == "pods":  # reported unless an aggregate's list
                self.domain_pods[id(expr)] = expr
            if expr.name in fields:
                self.notes.attrs[id(expr)] = AttrRef(field=fields[expr.name])
                return fields[expr.name].type
            owner = _describe(expr.obj)
            hint = did_you_mean(expr.name, fields, prefix=f"{owner}.")
            self.error("unknown-field", f"{t} has no field '{expr.name}'", expr, hint)
            return ANY
        if isinstance(t, MapOf) and t.resources:
            if expr.name in schema.RESOURCE_ATTRIBUTES:
                self.notes.attrs[id(expr)] = AttrRef(resource=schema.RESOURCE_ATTRIBUTES[expr.name])
                return t.value
            close = did_you_mean(expr.name, schema.RESOURCE_ATTRIBUTES, prefix=f"{_describe(expr.obj)}.")
            self.error(
                "unknown-field",
                f"'{expr.name}' is not a resource name; write {_describe(expr.obj)}[\"{expr.name}\"] for other resources",
                expr,
                close,
            )
            return ANY
        if isinstance(t, MapOf):
            self.error("type", f'use {_describe(expr.obj)}["{expr.name}"] to read a map', expr)
            return ANY
        if t != ANY:
            self.error("type", f"{t} has no fields", expr)
        return ANY

    def _call(self, expr: ast.Call, scope: Scope) -> Type:
        args = [self.infer(arg, scope) for arg in expr.args]
        builtin = BUILTINS.get(expr.func)
        if builtin is None:
            self.error("unknown-function", f"unknown function '{expr.func}'", expr, did_you_mean(expr.func, BUILTINS))
            return ANY
        result = builtin.check(args)
        if isinstance(result, str):
            self.error("type", f"{expr.func}() {result}", expr, f"{builtin.signature}")
            return ANY
        self.notes.calls[id(expr)] = result[1]
        if expr.func == "len" and len(expr.args) == 1 and isinstance(expr.args[0], ast.Attr):
            ref = self.notes.names.get(id(expr.args[0].obj))
            if ref is not None and ref.kind == "var" and ref.name == schema.POD_VARIABLE:
                lens = self.notes.pod_len_reads
                lens[expr.args[0].name] = lens.get(expr.args[0].name, 0) + 1
        if builtin.context:
            self.notes.context_calls.add(builtin.name)
            self.notes.pod_fields.update(builtin.pod_fields)
            (self.notes.fresh_pod_fields if builtin.fresh else self.notes.builtin_pod_fields).update(builtin.pod_fields)
        return result[0]


def _constant(cell: ast.Expr) -> bool:
    """A literal, a negated number, or a list of such."""
    match cell:
        case ast.Literal():
            return True
        case ast.Unary(op="-", operand=ast.Literal(kind=kind)):
            return kind is not ast.LiteralKind.STRING and kind is not ast.LiteralKind.BOOL
        case ast.Table():
            return False
        case ast.ListExpr(items=items):
            return all(_constant(i) for i in items)
    return False


def did_you_mean(name: str, candidates: Iterable[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean `{prefix}{close[0]}`?" if close else ""


def _describe(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attr):
        return f"{_describe(expr.obj)}.{expr.name}"
    return "(...)"
