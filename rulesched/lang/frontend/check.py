"""Check parsed rules: compose files, resolve names, infer types, collect every diagnostic.

Input: parsed files in order (later files override or disable rules of earlier ones). Output: a
:class:`CheckedRules` holding the effective rules in order and, per expression, the decisions the
next stages follow (types, operator coercions, what each name and attribute refers to).
The checker never stops at the first problem; what it gives is :mod:`.checked`'s. Here: the
composition, the rules and the lets (each typed once, its size bounded); expressions are typed by
:mod:`rulesched.lang.frontend.infer`, costs estimated by :mod:`rulesched.lang.frontend.cost`.
Next stage: :mod:`rulesched.lang.evaluation.compile`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from rulesched.lang import schema
from rulesched.lang.builtins import BUILTINS
from rulesched.lang.frontend import ast
from rulesched.lang.frontend import domain_check as domains
from rulesched.lang.frontend.checked import CheckedRule, CheckedRules
from rulesched.lang.frontend.compose import Composer
from rulesched.lang.frontend.cost import DEFAULT_LIMITS, CostLimits, too_costly
from rulesched.lang.frontend.infer import Inference, Scope, did_you_mean
from rulesched.lang.frontend.lets import MAX_EXPANDED_DEPTH, MAX_EXPANDED_SIZE, LetGraph, let_graph, let_uses
from rulesched.lang.frontend.source import Diagnostic, Severity, error, warning
from rulesched.lang.types import ANY, BOOL, NUMBER, STRING, ListOf, fits, is_numeric

NORMALIZATIONS = ("none", "max", "reverse", "minmax", "spread")
# A score that can add at most this share of what the set's scores can add to a node's total
# (1 part in WEAK_SHARE) is reported as too weak to change a ranking but by breaking near-ties.
WEAK_SHARE = 20  # 5%


def check(files: Sequence[ast.RulesFile], limits: CostLimits = DEFAULT_LIMITS) -> CheckedRules:
    return _Checker(limits).run(files)


class _Checker:
    def __init__(self, limits: CostLimits) -> None:
        self.limits = limits
        self.diagnostics: list[Diagnostic] = []
        self.lets: dict[str, ast.Let] = {}
        self.types = Inference(self.diagnostics, self.lets)  # (expressions: rulesched.lang.frontend.infer)
        self.notes = self.types.notes

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
        self.types.used_lets.clear()  # from here on: the lets rules use; those lets use are added below
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
        self.diagnostics.extend(domains.unaggregated(self.types.domain_pods.values()))
        indexed, types = frozenset(self.notes.domain_aggregates), self.notes.types
        self.diagnostics.extend(too_costly(sound, self.lets, graph, types, let_names, self.limits, steps, indexed))
        reached = list(self.types.used_lets)  # a let only unused lets use is unused too, whatever the order
        while reached:
            for used in graph.uses.get(reached.pop(), ()):
                if used not in self.types.used_lets:
                    self.types.used_lets.add(used)
                    reached.append(used)
        # A let only a rule another file disables uses is not unused where it is written: the
        # rule set that disables the rule (a policy extending the default profile) has no say.
        for rule in written:
            for part in (rule.guard, rule.body, rule.reason, rule.unresolvable, rule.order):
                if part is not None:
                    reached.extend(use.id for use, _ in let_uses(part, self.lets))
        while reached:
            name = reached.pop()
            if name not in self.types.used_lets:
                self.types.used_lets.add(name)
            for used in graph.uses.get(name, ()):
                if used not in self.types.used_lets:
                    self.types.used_lets.add(used)
                    reached.append(used)
        for name, let in self.lets.items():
            if name not in self.types.used_lets:
                self.diagnostics.append(warning("unused-let", f"let '{name}' is never used", let.name_span))
        if self.types.pod_reads > self.types.pod_attr_reads:
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
            guard = Scope(dict(schema.GUARD_VARIABLES), where="a when guard")
            self.types.expect(rule.guard, BOOL, guard, "a when guard")
        body_scope = Scope(dict(schema.BODY_VARIABLES[kind]), where=f"a {kind} rule")
        weight, normalize = 1, "none"
        if rule.kind is ast.RuleKind.FILTER:
            self.types.expect(rule.body, BOOL, body_scope, "a filter")
            if rule.reason is not None:
                reason = self.types.infer(rule.reason, Scope(dict(schema.BODY_VARIABLES[kind])))
                if not (fits(reason, STRING) or fits(reason, ListOf(STRING))):
                    self.types.error(
                        "type", f"a filter's reason must be a string or a list of strings, not {reason}", rule.reason
                    )
            if rule.unresolvable is not None:
                # read on failing nodes only, as the reason is: the pod and the node
                scope = Scope(dict(schema.BODY_VARIABLES[kind]), where="an unresolvable condition")
                self.types.expect(rule.unresolvable, BOOL, scope, "an unresolvable condition")
        elif rule.kind is ast.RuleKind.SCORE:
            body = self.types.infer(rule.body, body_scope)
            if body != ANY and body != NUMBER:
                hint = "convert with number(...)" if is_numeric(body) else ""
                self.types.error("type", f"a score must be a number, not {body}", rule.body, hint)
            weight = self._weight(rule)
            normalize = rule.normalize or "none"
            if normalize not in NORMALIZATIONS:
                self.diagnostics.append(
                    error(
                        "normalize",
                        f"unknown normalization '{normalize}'",
                        rule.name_span,
                        suggestion=did_you_mean(normalize, NORMALIZATIONS) or "one of: " + ", ".join(NORMALIZATIONS),
                    )
                )
        else:
            self.types.expect(rule.body, BOOL, body_scope, "a preempt rule")
            if rule.order is not None:
                order = self.types.infer(rule.order, Scope(dict(schema.BODY_VARIABLES["filter"])))
                if not (is_numeric(order) or order == STRING):
                    self.types.error("type", f"a preempt order must be a number or string, not {order}", rule.order)
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
            self.types.error("weight", f"weight must be a positive whole number, not {rule.weight.text}", rule.weight)
            return 1
        return value

    # --- lets ----------------------------------------------------------------------------------
    def _type_lets(self, graph: LetGraph) -> None:
        """Type every let once, each after the lets it uses, so that typing one never types
        another (no recursion however long a chain of lets is); a let on a cycle reads as ANY
        where its cycle comes back to it."""
        for start, loop in graph.cycles.items():
            self.types.error(
                "let-cycle", f"let '{start}' refers to itself through {' -> '.join(loop)}", self.lets[start].value
            )
        for name in graph.in_cycle:
            self.types.let_types[name] = (ANY, frozenset())
        for name in graph.order:
            # Lets past a limit are not typed (see run); each is reported where a chain first
            # passes it, not at every let built on that one.
            over = next((limit for limit in LET_LIMITS if limit.measure(graph)[name] > limit.most), None)
            if over is not None:
                self.types.let_types[name] = (ANY, frozenset())
                if all(over.measure(graph)[u] <= over.most for u in graph.uses[name]):
                    self.types.error(
                        over.code, over.message(name, over.measure(graph)[name]), self.lets[name].value, over.hint
                    )
                continue
            scope = Scope(dict(schema.BODY_VARIABLES["preempt"]), where=f"let '{name}'")
            t = self.types.infer(self.lets[name].value, scope)
            if name not in graph.in_cycle:
                self.types.let_types[name] = (t, frozenset(scope.used))

    def _too_deep(self, rule: ast.Rule, graph: LetGraph) -> bool:
        """Whether an expression of the rule nests too deep with its lets substituted; reported
        here unless a let it uses is too deep itself (that let is reported)."""
        found = False
        for expr in (rule.guard, rule.body, rule.reason, rule.unresolvable, rule.order):
            if expr is None:
                continue
            depth, through = graph.expanded_depth(expr, self.lets)
            found = found or depth > MAX_EXPANDED_DEPTH
            self.types.used_lets.update(name.id for name, _ in let_uses(expr, self.lets))  # typed or not
            if depth > MAX_EXPANDED_DEPTH and (through is None or graph.depth[through.id] <= MAX_EXPANDED_DEPTH):
                self.types.error(
                    "too-deep",
                    f"expression nests {depth} levels deep with the lets it uses; the limit is {MAX_EXPANDED_DEPTH}",
                    through if through is not None else expr,
                )
            size, largest = graph.expanded_size(expr, self.lets)
            found = found or size > MAX_EXPANDED_SIZE
            if size > MAX_EXPANDED_SIZE and (largest is None or graph.size[largest.id] <= MAX_EXPANDED_SIZE):
                self.types.error(
                    "too-large",
                    f"expression holds {_count(size)} expressions with the lets it uses; the limit is "
                    f"{MAX_EXPANDED_SIZE:,}",
                    largest if largest is not None else expr,
                )
        return found


def _count(n: int) -> str:
    return f"{n:,}" if n < 10**18 else "more than 10^18"


@dataclass(frozen=True)
class LetLimit:
    """One bound on a let with the lets it uses substituted (lets.py measures both)."""

    code: str
    most: int
    measure: Callable[[LetGraph], Mapping[str, int]]
    message: Callable[[str, int], str]
    hint: str


LET_LIMITS = (
    LetLimit(
        "too-deep",
        MAX_EXPANDED_DEPTH,
        lambda graph: graph.depth,
        lambda name, depth: (
            f"let '{name}' nests {depth} levels deep with the lets it uses; the limit is {MAX_EXPANDED_DEPTH}"
        ),
        "compute it from fewer lets in a chain",
    ),
    LetLimit(
        "too-large",
        MAX_EXPANDED_SIZE,
        lambda graph: graph.size,
        lambda name, size: (
            f"let '{name}' holds {_count(size)} expressions with the lets it uses; the limit is {MAX_EXPANDED_SIZE:,}"
        ),
        "use each let fewer times in the next (a let used twice in each link doubles)",
    ),
)
