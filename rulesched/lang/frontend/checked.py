"""What the checker gives the stages after it: the effective rules and its decisions.

:func:`rulesched.lang.frontend.check.check` fills these; the compiler, the reference
interpreter, the engine's column evaluator and the authoring tools read them (never the
checker's own state). Next stage: :mod:`rulesched.lang.evaluation.compile`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rulesched.lang import schema
from rulesched.lang.frontend import ast
from rulesched.lang.frontend import domain_check as domains
from rulesched.lang.frontend.source import Diagnostic, Severity
from rulesched.lang.types import BinaryInfo, Type


@dataclass(frozen=True)
class NameRef:
    """What a name stands for: a rule variable (pod, node, victim), a bound variable, a let."""

    kind: str  # "var" | "bound" | "let"
    name: str


@dataclass(frozen=True)
class AttrRef:
    """How an attribute is read: a record field's getter, or a resource key in a resources map."""

    field: schema.Field | None = None
    resource: str | None = None


@dataclass
class Annotations:
    """The checker's decisions, keyed by ``id()`` of the expression they concern."""

    types: dict[int, Type] = field(default_factory=dict)
    binary: dict[int, BinaryInfo] = field(default_factory=dict)
    calls: dict[int, tuple[str | None, ...]] = field(default_factory=dict)
    names: dict[int, NameRef] = field(default_factory=dict)
    attrs: dict[int, AttrRef] = field(default_factory=dict)
    # A conversion applied to an expression's own value, where its context wants another unit:
    # the 1 in [1, 2Gi], a number branch of an if whose other branch is a quantity.
    coercions: dict[int, str] = field(default_factory=dict)
    # The pod fields the rules read ("*": the pod as a whole), and the context built-ins called:
    # what makes two pods equivalent for scheduling (see rulesched.lang.evaluation.ruleset).
    pod_fields: set[str] = field(default_factory=set)
    context_calls: set[str] = field(default_factory=set)
    # How they are read, so that pods differing only where no rule looks stay equivalent: each
    # field's reads as ``pod.FIELD``, those of them that are ``len(pod.FIELD)``, and the fields
    # context built-ins read, cached ones apart from ``fresh`` ones (never cached: they read the
    # pod anew at every call).
    pod_field_reads: dict[str, int] = field(default_factory=dict)
    pod_len_reads: dict[str, int] = field(default_factory=dict)
    builtin_pod_fields: set[str] = field(default_factory=set)
    fresh_pod_fields: set[str] = field(default_factory=set)
    # Aggregates over domains' pods or nodes kept as indexes (rulesched.lang.frontend.domain_check)
    domain_aggregates: dict[int, domains.DomainAggregate | domains.OverDomains] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckedRule:
    rule: ast.Rule
    weight: int = 1
    normalize: str = "none"

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def kind(self) -> ast.RuleKind:
        return self.rule.kind


@dataclass(frozen=True)
class CheckedRules:
    rules: tuple[CheckedRule, ...]
    lets: dict[str, ast.Let]
    notes: Annotations
    diagnostics: tuple[Diagnostic, ...]
    # Each rule's cost bound in steps per (pod, node) (rulesched.lang.frontend.cost); rules with
    # errors have none.
    steps: dict[tuple[ast.RuleKind, str], int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)
