"""The values of the aggregates over topology domains and the cluster a rule reads, on one node,
for explanations: ``app_here = 3 in topology.kubernetes.io/zone=a``, ``app_fewest = 1``.

A rule over domains fails or passes because of counts a reader cannot see in the node alone, so
``rulesched explain`` and ``simulate --explain`` show them next to the rule's verdict. The
aggregates are those the checker indexed (rulesched.lang.frontend.domain_check) that the rule's
body reaches (through lets) outside any other aggregate's own variable: their values depend on
the pod, the cluster and the node only. They are read with the compiled closures the scheduler
uses (the same indexes, no rescan of the cluster), named by the let they are the value of, else
written out as the rule writes them. Next stage: rulesched.scheduler.why and
rulesched.authoring.explain put them beside each verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
from rulesched.lang.context import EvalContext
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.frontend.domain_check import DomainAggregate
from rulesched.lang.frontend.printer import expr_text


@dataclass(frozen=True)
class DomainValue:
    """One aggregate's value on one node: ``name = value [in domain]``."""

    name: str  # the let's name, or the aggregate as written
    value: Any
    domain: str = ""  # "KEY=value" for an aggregate over the node's domain; "" for the cluster

    def text(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else str(self.value)
        shown = f"{self.name} = {value}"
        return f"{shown} in {self.domain}" if self.domain else shown


@dataclass(frozen=True)
class _Read:
    name: str
    expr: ast.Expr
    key: ast.Expr | None  # KEY of domain(node, KEY); None: the cluster, or over domains


class DomainValues:
    """For one rule set: the domain and cluster aggregates each rule reads, and their values."""

    def __init__(self, checked: CheckedRules, codes: dict[int, Any]) -> None:
        self._checked, self._codes = checked, codes
        self._interp = Interpreter(checked.notes, checked.lets)
        self._rules = {(r.kind, r.name): r for r in checked.rules}
        self._reads: dict[tuple[ast.RuleKind, str], tuple[_Read, ...]] = {}

    def reads(self, rule: str, kind: ast.RuleKind = ast.RuleKind.FILTER) -> tuple[_Read, ...]:
        found = self._reads.get((kind, rule))
        if found is None:
            checked = self._rules.get((kind, rule))
            found = self._reads[kind, rule] = () if checked is None else self._walk(checked.rule.body)
        return found

    def values(
        self, rule: str, ctx: EvalContext, node: Any, kind: ast.RuleKind = ast.RuleKind.FILTER
    ) -> tuple[DomainValue, ...]:
        """The values on ``node`` of the aggregates ``rule`` reads (none for a rule that reads no
        domain or cluster aggregate, or one this set does not have)."""
        out = []
        for read in self.reads(rule, kind):
            code = self._codes.get(id(read.expr))
            if code is None:
                continue  # (audit-mode rules are compiled apart: rulesched.lang.RuleSet.shadow)
            value = code(ctx)(node, None)
            where = ""
            if read.key is not None:
                key = self._interp.evaluate(read.key, ctx, None, {})
                label = node.labels.get(key)
                where = f"{key}={label}" if label is not None else f"no {key} domain"
            out.append(DomainValue(read.name, value, where))
        return tuple(out)

    def _walk(self, body: ast.Expr) -> tuple[_Read, ...]:
        notes, lets = self._checked.notes, self._checked.lets
        found: list[_Read] = []
        seen: set[int] = set()

        def walk(e: ast.Expr, name: str | None) -> None:
            if id(e) in notes.domain_aggregates:
                if id(e) not in seen:
                    seen.add(id(e))
                    read = self._read(e, name or expr_text(e))
                    if read is not None:
                        found.append(read)
                return
            if isinstance(e, ast.Name):
                ref = notes.names.get(id(e))
                if ref is not None and ref.kind == "let":
                    walk(lets[ref.name].value, ref.name)
                return
            for child in ast.children(e):
                walk(child, None)

        walk(body, None)
        return tuple(found)

    def _read(self, e: ast.Expr, name: str) -> _Read | None:
        info = self._checked.notes.domain_aggregates[id(e)]
        if not isinstance(info, DomainAggregate) or isinstance(info.source, ast.Name):
            return _Read(name, e, None)  # over the domains, or the cluster
        source = info.source
        if isinstance(source, ast.Call) and len(source.args) == 2 and isinstance(source.args[0], ast.Name):
            ref = self._checked.notes.names.get(id(source.args[0]))
            if ref is not None and ref.kind == "var" and ref.name == schema.NODE_VARIABLE:
                return _Read(name, e, source.args[1])
        return None  # over another node's domain (a variable's): no value of its own here
