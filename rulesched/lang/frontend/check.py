"""Check parsed rules: compose files, resolve names, infer types, collect every diagnostic.

Input: parsed files in order (later files override or disable rules of earlier ones). Output: a
:class:`CheckedRules` holding the effective rules in order and, per expression, the decisions the
next stages follow (types, operator coercions, what each name and attribute refers to).
The checker never stops at the first problem; what it gives is :mod:`.checked`'s. Next stage: :mod:`rulesched.lang.evaluation.compile`.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.builtins.groups import GROUP_FIELDS, GROUP_VARIABLE
from rulesched.lang.frontend import ast
from rulesched.lang.frontend import domain_check as domains
from rulesched.lang.frontend.checked import Annotations, AttrRef, CheckedRule, CheckedRules, NameRef
from rulesched.lang.frontend.compose import Composer
from rulesched.lang.frontend.cost import DEFAULT_LIMITS, CostLimits, too_costly
from rulesched.lang.frontend.lets import MAX_EXPANDED_DEPTH, MAX_EXPANDED_SIZE, LetGraph, let_graph, let_uses
from rulesched.lang.frontend.source import Diagnostic, Severity, error, warning
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

NORMALIZATIONS = ("none", "max", "reverse", "minmax", "spread")
# A score that can add at most this share of what the set's scores can add to a node's total
# (1 part in WEAK_SHARE) is reported as too weak to change a ranking but by breaking near-ties.
WEAK_SHARE = 20  # 5%
_LITERAL_TYPES = {
    ast.LiteralKind.NUMBER: NUMBER,
    ast.LiteralKind.QUANTITY: QUANTITY,
    ast.LiteralKind.DURATION: DURATION,
    ast.LiteralKind.STRING: STRING,
    ast.LiteralKind.BOOL: BOOL,
}


def check(files: Sequence[ast.RulesFile], limits: CostLimits = DEFAULT_LIMITS) -> CheckedRules:
    return _Checker(limits).run(files)


@dataclass
class _Scope:
    variables: dict[str, Type]
    bound: dict[str, Type] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)  # rule variables the expression reads
    where: str = ""  # for messages: "a guard", "a score"


def _unbound_group(scope: _Scope, lets: dict[str, ast.Let]) -> bool:
    """``group`` names the group being placed (no variable or let shadows it)."""
    return GROUP_VARIABLE not in scope.variables and GROUP_VARIABLE not in scope.bound and GROUP_VARIABLE not in lets


class _Checker:
    def __init__(self, limits: CostLimits) -> None:
        self.limits = limits
        self.diagnostics: list[Diagnostic] = []
        self.notes = Annotations()
        self.lets: dict[str, ast.Let] = {}
        self.let_types: dict[str, tuple[Type, frozenset[str]]] = {}
        self.used_lets: set[str] = set()
        self.pod_reads, self.pod_attr_reads = 0, 0  # every use of the name `pod`, those reading a field
        self.domain_pods: dict[int, ast.Attr] = {}  # D.pods not (yet) an aggregate's list
        notes = self.notes
        self.domains = domains.Analysis(notes.names, notes.types, self._let_needs, notes.domain_aggregates)

    # --- composition -------------------------------------------------------------------------
    def run(self, files: Sequence[ast.RulesFile]) -> CheckedRules:
        # Rule names are unique per kind, as kube-scheduler's plugins are per extension point:
        # a filter and a score may share a name (NodeAffinity is both).
        composer = Composer(self.diagnostics)
        written: list[ast.Rule] = []  # every rule as written (a later file may disable it)
        for file in files:
            for item in file.items:
                if isinstance(item, ast.Let):
                    self._add_let(item)
                elif isinstance(item, ast.Extends):
                    continue  # resolved by rulesched.lang.frontend.files before checking
                else:
                    composer.add(item)
                    if isinstance(item, ast.Rule):
                        written.append(item)
        graph = let_graph(self.lets)
        self._type_lets(graph)
        self.used_lets.clear()  # from here on: the lets rules use; those lets use are added below
        rules = list(composer.rules.values())
        # Too deep with their lets: not typed (a type as deep as the expression would be printed
        # and compared recursively), not estimated; the error says why.
        shallow = [rule for rule in rules if not self._too_deep(rule, graph)]
        typed = {id(rule) for rule in shallow}
        checked = [self._check_rule(rule) if id(rule) in typed else CheckedRule(rule) for rule in rules]
        self._weak_scores(checked)
        let_names = {key: ref.name for key, ref in self.notes.names.items() if ref.kind == "let"}
        steps: dict[tuple[ast.RuleKind, str], int] = {}
        sound = self._sound(shallow)
        self.diagnostics.extend(domains.unaggregated(self.domain_pods.values()))
        indexed, types = frozenset(self.notes.domain_aggregates), self.notes.types
        self.diagnostics.extend(too_costly(sound, self.lets, graph, types, let_names, self.limits, steps, indexed))
        reached = list(self.used_lets)  # a let only unused lets use is unused too, whatever the order
        while reached:
            for used in graph.uses.get(reached.pop(), ()):
                if used not in self.used_lets:
                    self.used_lets.add(used)
                    reached.append(used)
        # A let only a rule another file disables uses is not unused where it is written: the
        # rule set that disables the rule (a policy extending the default profile) has no say.
        for rule in written:
            for part in (rule.guard, rule.body, rule.reason, rule.unresolvable, rule.order):
                if part is not None:
                    reached.extend(use.id for use, _ in let_uses(part, self.lets))
        while reached:
            name = reached.pop()
            if name not in self.used_lets:
                self.used_lets.add(name)
            for used in graph.uses.get(name, ()):
                if used not in self.used_lets:
                    self.used_lets.add(used)
                    reached.append(used)
        for name, let in self.lets.items():
            if name not in self.used_lets:
                self.diagnostics.append(warning("unused-let", f"let '{name}' is never used", let.name_span))
        if self.pod_reads > self.pod_attr_reads:
            self.notes.pod_fields.add("*")  # the pod is used whole somewhere
        return CheckedRules(tuple(checked), dict(self.lets), self.notes, tuple(self.diagnostics), steps)

    def _add_let(self, let: ast.Let) -> None:
        if let.name in self.lets:
            first = self.lets[let.name].name_span.location()
            self.diagnostics.append(
                error("duplicate-let", f"let '{let.name}' is already defined at {first}", let.name_span)
            )
        elif (
            let.name in schema.BODY_VARIABLES["preempt"]
            or let.name in schema.BODY_VARIABLES[schema.DEVICE_SCORE]
            or let.name in BUILTINS
        ):
            self.diagnostics.append(error("reserved-name", f"'{let.name}' is a built-in name", let.name_span))
        else:
            self.lets[let.name] = let

    # --- rules ----------------------------------------------------------------------------------
    def _check_rule(self, rule: ast.Rule) -> CheckedRule:
        kind = rule.kind.value
        if rule.target != "node":
            if rule.target != "device":
                self.diagnostics.append(
                    error(
                        "score-target",
                        f"a score ranks nodes, or devices ('for device'), not '{rule.target}'",
                        rule.name_span,
                        suggestion='score NAME for device: ... (docs/language.md, "Device scores")',
                    )
                )
            else:
                kind = schema.DEVICE_SCORE
                if rule.normalize is not None:
                    self.diagnostics.append(
                        error(
                            "normalize",
                            "a device score is not normalised: its weighted values rank one request's devices",
                            rule.name_span,
                        )
                    )
        if rule.guard is not None:
            self._expect(rule.guard, BOOL, _Scope(dict(schema.GUARD_VARIABLES), where="a when guard"), "a when guard")
        body_scope = _Scope(dict(schema.BODY_VARIABLES[kind]), where=f"a {kind} rule")
        weight, normalize = 1, "none"
        if rule.kind is ast.RuleKind.FILTER:
            self._expect(rule.body, BOOL, body_scope, "a filter")
            if rule.reason is not None:
                reason = self._infer(rule.reason, _Scope(dict(schema.BODY_VARIABLES[kind])))
                if not (fits(reason, STRING) or fits(reason, ListOf(STRING))):
                    self._error(
                        "type", f"a filter's reason must be a string or a list of strings, not {reason}", rule.reason
                    )
            if rule.unresolvable is not None:
                # read on failing nodes only, as the reason is: the pod and the node
                scope = _Scope(dict(schema.BODY_VARIABLES[kind]), where="an unresolvable condition")
                self._expect(rule.unresolvable, BOOL, scope, "an unresolvable condition")
        elif rule.kind is ast.RuleKind.SCORE:
            body = self._infer(rule.body, body_scope)
            if body != ANY and body != NUMBER:
                hint = "convert with number(...)" if is_numeric(body) else ""
                self._error("type", f"a score must be a number, not {body}", rule.body, hint)
            weight = self._weight(rule)
            normalize = rule.normalize or "none"
            if normalize not in NORMALIZATIONS:
                self.diagnostics.append(
                    error(
                        "normalize",
                        f"unknown normalization '{normalize}'",
                        rule.name_span,
                        suggestion=_did_you_mean(normalize, NORMALIZATIONS) or "one of: " + ", ".join(NORMALIZATIONS),
                    )
                )
        else:
            self._expect(rule.body, BOOL, body_scope, "a preempt rule")
            if rule.order is not None:
                order = self._infer(rule.order, _Scope(dict(schema.BODY_VARIABLES["filter"])))
                if not (is_numeric(order) or order == STRING):
                    self._error("type", f"a preempt order must be a number or string, not {order}", rule.order)
        return CheckedRule(rule, weight, normalize)

    def _sound(self, rules: Iterable[ast.Rule]) -> list[ast.Rule]:
        """The rules with no error inside their own text: a broken rule's cost estimate means
        little (its types are partly unknown)."""
        starts: dict[int, list[int]] = {}
        for d in self.diagnostics:
            if d.severity is Severity.ERROR and d.span is not None:
                starts.setdefault(id(d.span.source), []).append(d.span.start)
        for found in starts.values():
            found.sort()
        sound = []
        for rule in rules:
            found = starts.get(id(rule.span.source), [])
            i = bisect.bisect_left(found, rule.span.start)
            if i == len(found) or found[i] >= rule.span.end:
                sound.append(rule)
        return sound

    def _weak_scores(self, checked: Sequence[CheckedRule]) -> None:
        """Warn about a score whose weight is too small for it to matter. Scores are meant to
        lie in 0..100 (every normalisation gives that), so a score can add at most weight x 100
        to a node's total. A score adding less than 1/WEAK_SHARE of what the set can add, with
        only the scores without a guard counted besides it (they apply whenever it does), can
        never outweigh the others moving by more than that, only break near-ties."""
        # (device scores only order one request's devices: they add nothing to a node's total)
        scores = [c for c in checked if c.kind is ast.RuleKind.SCORE and c.rule.target != "device"]
        for score in scores:
            others = sum(o.weight for o in scores if o is not score and o.rule.guard is None)
            if (WEAK_SHARE - 1) * score.weight >= others:
                continue
            if all(score.weight * 100 < o.weight for o in scores if o is not score):
                continue  # a tie-break by construction: all of it is less than a point of any other
            need = -(-others // (WEAK_SHARE - 1))
            rule = score.rule
            self.diagnostics.append(
                warning(
                    "weak-score",
                    f"score '{score.name}' can add at most {score.weight * 100:,} to a node's total (weight "
                    f"{score.weight}), under {100 // WEAK_SHARE}% of the {(score.weight + others) * 100:,} "
                    f"the set's scores can add; it can only break near-ties",
                    rule.weight.span if rule.weight is not None else rule.name_span,
                    suggestion=f"give it weight {need} or more for it to count",
                )
            )

    def _weight(self, rule: ast.Rule) -> int:
        if rule.weight is None:
            return 1
        assert isinstance(rule.weight, ast.Literal)
        value = rule.weight.value
        if rule.weight.kind is not ast.LiteralKind.NUMBER or not isinstance(value, int) or value <= 0:
            self._error("weight", f"weight must be a positive whole number, not {rule.weight.text}", rule.weight)
            return 1
        return value

    def _expect(self, expr: ast.Expr, want: Type, scope: _Scope, what: str) -> None:
        got = self._infer(expr, scope)
        if not fits(got, want):
            self._error("type", f"{what} must be {want}, not {got}", expr)

    # --- expressions ----------------------------------------------------------------------------
    def _infer(self, expr: ast.Expr, scope: _Scope) -> Type:
        t = self._infer_inner(expr, scope)
        self.notes.types[id(expr)] = t
        return t

    def _infer_inner(self, expr: ast.Expr, scope: _Scope) -> Type:
        match expr:
            case ast.Literal(kind=kind):
                return _LITERAL_TYPES[kind]
            case ast.Table():
                return self._table(expr, scope)
            case ast.ListExpr(items=items):
                types = [self._infer(item, scope) for item in items]
                elem = next((t for t in types if t != ANY), ANY)
                for item, t in zip(items, types, strict=True):
                    if not (fits(t, elem) or fits(elem, t)):
                        self._error("type", f"list items must have one type: {elem} and {t}", item)
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
                container, key_type = self._infer(obj, scope), self._infer(key, scope)
                if isinstance(container, MapOf):
                    if not fits(key_type, STRING):
                        self._error("type", f"map keys are strings, not {key_type}", key)
                    return container.value
                if isinstance(container, ListOf):
                    if not fits(key_type, NUMBER):
                        self._error("type", f"list indexes are numbers, not {key_type}", key)
                    return container.elem
                if container != ANY:
                    self._error("type", f"cannot index {container}", obj)
                return ANY
            case ast.Call():
                return self._call(expr, scope)
            case ast.Unary(op="not", operand=operand):
                self._expect(operand, BOOL, scope, "'not' operand")
                return BOOL
            case ast.Unary(operand=operand):
                t = self._infer(operand, scope)
                if not is_numeric(t):
                    self._error("type", f"cannot negate {t}", operand)
                    return ANY
                return t
            case ast.Binary(op=op, left=left, right=right):
                lt, rt = self._infer(left, scope), self._infer(right, scope)
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
                    self._error("type", info, expr)
                    return ANY
                self.notes.binary[id(expr)] = info
                return info.result
            case ast.If(cond=cond, then=then, otherwise=otherwise):
                self._expect(cond, BOOL, scope, "an if condition")
                a, b = self._infer(then, scope), self._infer(otherwise, scope)
                if {a, b} == {NUMBER, QUANTITY}:  # the number branch is read in whole units
                    self._to_quantity([then if a == NUMBER else otherwise], [NUMBER])
                    return QUANTITY
                if a == ANY:
                    return b
                if b == ANY or fits(b, a):
                    return a
                if fits(a, b):
                    return b
                self._error("type", f"if branches differ: {a} and {b}", expr)
                return ANY
            case ast.Quantifier(kind=kind, var=var, iterable=iterable, where=where):
                elem = self._element(iterable, scope)
                inner = self._bind(scope, var, elem, expr)
                if where is not None:
                    self._expect(where, BOOL, inner, "a where condition")
                self._merge(scope, inner)
                self._domain_aggregate(expr)
                return NUMBER if kind == "count" else BOOL
            case ast.Aggregate(kind=kind, value=value, var=var, iterable=iterable, where=where):
                elem = self._element(iterable, scope)
                inner = self._bind(scope, var, elem, expr)
                if where is not None:
                    self._expect(where, BOOL, inner, "a where condition")
                t = self._infer(value, inner)
                self._merge(scope, inner)
                self._domain_aggregate(expr)
                if kind == "collect":
                    return ListOf(t)
                if not is_numeric(t):
                    self._error("type", f"{kind} needs numbers, not {t}", value)
                    return ANY
                return t
        raise AssertionError(f"unknown expression {expr!r}")  # pragma: no cover

    def _domain_aggregate(self, expr: ast.Quantifier | ast.Aggregate) -> None:
        self.diagnostics.extend(self.domains.record(expr, self.notes.domain_aggregates, self.domain_pods))

    def _to_quantity(self, exprs: Sequence[ast.Expr], types: Sequence[Type]) -> None:
        for expr, t in zip(exprs, types, strict=True):
            if t == NUMBER:
                self.notes.coercions[id(expr)] = TO_MILLI

    def _element(self, iterable: ast.Expr, scope: _Scope) -> Type:
        t = self._infer(iterable, scope)
        if isinstance(t, ListOf):
            return t.elem
        if isinstance(t, MapOf):
            return STRING  # iterating a map walks its keys
        if t != ANY:
            self._error("type", f"cannot iterate over {t}", iterable)
        return ANY

    def _bind(self, scope: _Scope, var: str, elem: Type, expr: ast.Expr) -> _Scope:
        if var in scope.variables or var in scope.bound or var in self.lets:
            self._error("shadow", f"'{var}' is already a name here; pick another", expr)
        return _Scope(scope.variables, {**scope.bound, var: elem}, scope.used, scope.where)

    @staticmethod
    def _merge(scope: _Scope, inner: _Scope) -> None:
        scope.used |= inner.used

    def _name(self, expr: ast.Name, scope: _Scope) -> Type:
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
            t, needs = self._let_type(name)
            missing = sorted(needs - set(scope.variables))
            if missing:
                self._error(
                    "scope",
                    f"let '{name}' reads {', '.join(missing)}, which {scope.where or 'this place'} cannot use",
                    expr,
                )
                return ANY
            scope.used |= needs
            return t
        known = [*scope.bound, *scope.variables, *self.lets]
        if name in schema.BODY_VARIABLES["preempt"]:
            self._error("scope", f"'{name}' cannot be used in {scope.where or 'this place'}", expr)
        else:
            self._error("unknown-name", f"unknown name '{name}'", expr, _did_you_mean(name, known))
        return ANY

    def _type_lets(self, graph: LetGraph) -> None:
        """Type every let once, each after the lets it uses, so that typing one never types
        another (no recursion however long a chain of lets is); a let on a cycle reads as ANY
        where its cycle comes back to it."""
        for start, loop in graph.cycles.items():
            self._error(
                "let-cycle", f"let '{start}' refers to itself through {' -> '.join(loop)}", self.lets[start].value
            )
        for name in graph.in_cycle:
            self.let_types[name] = (ANY, frozenset())
        for name in graph.order:
            depth = graph.depth[name]
            if depth > MAX_EXPANDED_DEPTH:  # not typed (see run); reported where a chain first gets too deep
                self.let_types[name] = (ANY, frozenset())
                if all(graph.depth[u] <= MAX_EXPANDED_DEPTH for u in graph.uses[name]):
                    self._error(
                        "too-deep",
                        f"let '{name}' nests {depth} levels deep with the lets it uses; the limit is "
                        f"{MAX_EXPANDED_DEPTH}",
                        self.lets[name].value,
                        "compute it from fewer lets in a chain",
                    )
                continue
            size = graph.size[name]
            if size > MAX_EXPANDED_SIZE:  # as too deep: reported where a chain first gets too large
                self.let_types[name] = (ANY, frozenset())
                if all(graph.size[u] <= MAX_EXPANDED_SIZE for u in graph.uses[name]):
                    self._error(
                        "too-large",
                        f"let '{name}' holds {_count(size)} expressions with the lets it uses; the limit is "
                        f"{MAX_EXPANDED_SIZE:,}",
                        self.lets[name].value,
                        "use each let fewer times in the next (a let used twice in each link doubles)",
                    )
                continue
            scope = _Scope(dict(schema.BODY_VARIABLES["preempt"]), where=f"let '{name}'")
            t = self._infer(self.lets[name].value, scope)
            if name not in graph.in_cycle:
                self.let_types[name] = (t, frozenset(scope.used))

    def _too_deep(self, rule: ast.Rule, graph: LetGraph) -> bool:
        """Whether an expression of the rule nests too deep with its lets substituted; reported
        here unless a let it uses is too deep itself (that let is reported)."""
        found = False
        for expr in (rule.guard, rule.body, rule.reason, rule.unresolvable, rule.order):
            if expr is None:
                continue
            depth, through = graph.expanded_depth(expr, self.lets)
            found = found or depth > MAX_EXPANDED_DEPTH
            self.used_lets.update(name.id for name, _ in let_uses(expr, self.lets))  # typed or not
            if depth > MAX_EXPANDED_DEPTH and (through is None or graph.depth[through.id] <= MAX_EXPANDED_DEPTH):
                self._error(
                    "too-deep",
                    f"expression nests {depth} levels deep with the lets it uses; the limit is {MAX_EXPANDED_DEPTH}",
                    through if through is not None else expr,
                )
            size, largest = graph.expanded_size(expr, self.lets)
            found = found or size > MAX_EXPANDED_SIZE
            if size > MAX_EXPANDED_SIZE and (largest is None or graph.size[largest.id] <= MAX_EXPANDED_SIZE):
                self._error(
                    "too-large",
                    f"expression holds {_count(size)} expressions with the lets it uses; the limit is "
                    f"{MAX_EXPANDED_SIZE:,}",
                    largest if largest is not None else expr,
                )
        return found

    def _let_needs(self, name: str) -> frozenset[str]:  # (the rule variables the let reads)
        return self._let_type(name)[1]

    def _let_type(self, name: str) -> tuple[Type, frozenset[str]]:
        """A let's type and the rule variables it reads, typed by :meth:`_type_lets`."""
        return self.let_types.get(name, (ANY, frozenset()))

    def _table(self, table: ast.Table, scope: _Scope) -> Type:
        """A table's rows as records: each column one type (that of its first cell not an
        empty list), every cell a constant, every row one cell per column."""
        columns: list[Type] = [ANY] * len(table.columns)
        if len(set(table.columns)) < len(table.columns):
            self._error("type", "a table's columns must have different names", table)
        for row in table.items:
            assert isinstance(row, ast.ListExpr)
            if len(row.items) != len(table.columns):
                self._error("type", f"a row of this table has {len(table.columns)} cells, not {len(row.items)}", row)
            for i, cell in enumerate(row.items[: len(columns)]):
                t = self._infer(cell, scope)
                if not _constant(cell):
                    self._error("type", "a table's cells are constants (numbers, strings, lists of them)", cell)
                elif columns[i] == ANY or columns[i] == ListOf(ANY):
                    columns[i] = t
                elif not fits(t, columns[i]):
                    what = f"column '{table.columns[i]}'"
                    self._error("type", f"{what} holds {columns[i]}; this cell is {t}", cell)
            self.notes.types[id(row)] = ListOf(ANY)
        return ListOf(TableRow("table row", tuple(zip(table.columns, columns, strict=True))))

    def _attr(self, expr: ast.Attr, scope: _Scope) -> Type:
        if isinstance(expr.obj, ast.Name) and expr.obj.id == GROUP_VARIABLE and _unbound_group(scope, self.lets):
            # (group.FIELD of a known field is a built-in call already: rulesched.lang.builtins.groups)
            known = ", ".join(f"group.{f}" for f in GROUP_FIELDS)
            self._error("unknown-field", f"the group has no field '{expr.name}' (it has {known})", expr)
            return ANY
        t = self._infer(expr.obj, scope)
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
            hint = _did_you_mean(expr.name, fields, prefix=f"{owner}.")
            self._error("unknown-field", f"{t} has no field '{expr.name}'", expr, hint)
            return ANY
        if isinstance(t, MapOf) and t.resources:
            if expr.name in schema.RESOURCE_ATTRIBUTES:
                self.notes.attrs[id(expr)] = AttrRef(resource=schema.RESOURCE_ATTRIBUTES[expr.name])
                return t.value
            close = _did_you_mean(expr.name, schema.RESOURCE_ATTRIBUTES, prefix=f"{_describe(expr.obj)}.")
            self._error(
                "unknown-field",
                f"'{expr.name}' is not a resource name; write {_describe(expr.obj)}[\"{expr.name}\"] for other resources",
                expr,
                close,
            )
            return ANY
        if isinstance(t, MapOf):
            self._error("type", f'use {_describe(expr.obj)}["{expr.name}"] to read a map', expr)
            return ANY
        if t != ANY:
            self._error("type", f"{t} has no fields", expr)
        return ANY

    def _call(self, expr: ast.Call, scope: _Scope) -> Type:
        args = [self._infer(arg, scope) for arg in expr.args]
        builtin = BUILTINS.get(expr.func)
        if builtin is None:
            self._error("unknown-function", f"unknown function '{expr.func}'", expr, _did_you_mean(expr.func, BUILTINS))
            return ANY
        result = builtin.check(args)
        if isinstance(result, str):
            self._error("type", f"{expr.func}() {result}", expr, f"{builtin.signature}")
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

    def _error(self, code: str, message: str, expr: Any, suggestion: str = "") -> None:
        self.diagnostics.append(error(code, message, expr.span, suggestion))


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


def _did_you_mean(name: str, candidates: Iterable[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean `{prefix}{close[0]}`?" if close else ""


def _describe(expr: ast.Expr) -> str:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attr):
        return f"{_describe(expr.obj)}.{expr.name}"
    return "(...)"


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**18 else "more than 10^18"
