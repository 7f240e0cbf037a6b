"""Compiled rule sets and their per-pod binding: what the scheduler calls.

``RuleSet.bind(pod, cluster)`` evaluates guards and every pod-only part once, and returns
:class:`BoundRules` whose filters, scores and preemption predicates are plain functions of a node
(and, for preemption, a victim pod). This mirrors a kube-scheduler cycle: PreFilter work happens
at bind time, Filter and Score per node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang import ast
from rulesched.lang.check import CheckedRules
from rulesched.lang.compile import Code, CompiledRule, compile_rules
from rulesched.lang.context import ClusterView, EvalContext
from rulesched.lang.values import as_score
from rulesched.model import Pod


@dataclass(frozen=True)
class BoundFilter:
    name: str
    passes: Callable[[Any], bool]
    reasons: Callable[[Any], tuple[str, ...]]


@dataclass(frozen=True)
class BoundScore:
    name: str
    weight: int
    normalize: str
    score: Callable[[Any], int]


@dataclass(frozen=True)
class BoundPreempt:
    name: str
    allows: Callable[[Any, Pod], bool]  # (node, victim) -> may the victim be evicted?
    order: Callable[[Any], Any] | None  # node -> sort key, lowest preferred


@dataclass(frozen=True)
class BoundRules:
    """The rules that apply to one pod (guards already decided), as functions of a node."""

    ctx: EvalContext
    filters: tuple[BoundFilter, ...]
    scores: tuple[BoundScore, ...]
    preempts: tuple[BoundPreempt, ...]

    def first_failure(self, node: Any) -> tuple[BoundFilter, tuple[str, ...]] | None:
        """The first filter (in rule order) the node fails, with its reasons; None if it fits."""
        for f in self.filters:
            if not f.passes(node):
                return f, f.reasons(node)
        return None


class RuleSet:
    """A checked, compiled set of rules. Immutable: a reload builds a new one."""

    def __init__(self, checked: CheckedRules, files: Sequence[str] = ()) -> None:
        self.checked = checked
        self.files = tuple(files)
        compiled = compile_rules(checked)
        self.filters = tuple(r for r in compiled if r.checked.kind is ast.RuleKind.FILTER)
        self.scores = tuple(r for r in compiled if r.checked.kind is ast.RuleKind.SCORE)
        self.preempts = tuple(r for r in compiled if r.checked.kind is ast.RuleKind.PREEMPT)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.checked.rules)

    def bind(self, pod: Pod, cluster: ClusterView | None = None) -> BoundRules:
        ctx = EvalContext(pod, cluster)
        filters = tuple(_bind_filter(r, ctx) for r in self.filters if _applies(r, ctx))
        scores = tuple(_bind_score(r, ctx) for r in self.scores if _applies(r, ctx))
        preempts = tuple(_bind_preempt(r, ctx) for r in self.preempts if _applies(r, ctx))
        return BoundRules(ctx, filters, scores, preempts)


def _applies(rule: CompiledRule, ctx: EvalContext) -> bool:
    if rule.guard is None:
        return True
    return bool(_node_fn(rule.guard, ctx)(None))


def _node_fn(code: Code, ctx: EvalContext) -> Callable[[Any], Any]:
    """The code as a one-argument function of a node. One env dict per binding is enough:
    evaluation is sequential and every slot is written before it is read."""
    if code.is_const:
        value = code.const
        return lambda n: value
    fn, env = code.factory()(ctx), {}  # type: ignore[var-annotated]
    return lambda n: fn(n, env)


def _bind_filter(rule: CompiledRule, ctx: EvalContext) -> BoundFilter:
    name = rule.name
    passes = _node_fn(rule.body, ctx)
    default = (f"node(s) didn't satisfy rule {name}",)
    if rule.reason is None:
        return BoundFilter(name, passes, lambda n: default)
    reason = _node_fn(rule.reason, ctx)

    def reasons(n: Any) -> tuple[str, ...]:
        value = reason(n)
        if isinstance(value, str):
            return (value,) if value else default
        return tuple(value) or default

    return BoundFilter(name, passes, reasons)


def _bind_score(rule: CompiledRule, ctx: EvalContext) -> BoundScore:
    fn = _node_fn(rule.body, ctx)
    return BoundScore(rule.name, rule.checked.weight, rule.checked.normalize, lambda n: as_score(fn(n)))


def _bind_preempt(rule: CompiledRule, ctx: EvalContext) -> BoundPreempt:
    body = rule.body.factory()(ctx) if not rule.body.is_const else None
    const = rule.body.const
    env: dict[int, Any] = {}

    def allows(node: Any, victim: Pod) -> bool:
        if body is None:
            return bool(const)
        env[0] = victim
        return bool(body(node, env))

    order = _node_fn(rule.order, ctx) if rule.order is not None else None
    return BoundPreempt(rule.name, allows, order)
