"""Composition: the rules of every file, in order, with ``override`` and ``disable`` applied.

Rule names are unique per kind, as kube-scheduler's plugins are per extension point (a filter and
a score may share a name: NodeAffinity is both). A later file may replace a rule (``override``
with a body), amend it (``override score X weight 3``, ``override filter X unresolvable``: only what it states changes) or remove it
(``disable``); each says what it changed in a note located at the author's line, and one that
names no rule of that kind is an error with the closest name. The checker
(:mod:`rulesched.lang.frontend.check`) then types the composed rules.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.printer import expr_text, unresolvable_text
from rulesched.lang.frontend.source import Diagnostic, Span, error, note


class Composer:
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        # (kind, name) -> the rule; insertion order is the rules' order (an override keeps its place)
        self.rules: dict[tuple[ast.RuleKind, str], ast.Rule] = {}

    def add(self, item: ast.Rule | ast.Disable | ast.PartialOverride) -> None:
        if isinstance(item, ast.Disable):
            self.disable(item)
        elif isinstance(item, ast.PartialOverride):
            self.amend(item)
        else:
            self.add_rule(item)

    def disable(self, item: ast.Disable) -> None:
        keys = [k for k in self.rules if k[1] == item.name and (item.kind is None or k[0] is item.kind)]
        for key in keys:
            removed = self.rules.pop(key)
            self.diagnostics.append(
                note(
                    "disable",
                    f"disables {key[0].value} '{item.name}' defined at {removed.name_span.location()}",
                    item.span,
                )
            )
        if keys:
            return
        if item.kind is not None:
            self._missing("disable", item.kind, item.name, item.span)
            return
        self.diagnostics.append(
            error(
                "unknown-rule",
                f"cannot disable rule '{item.name}': no such rule",
                item.span,
                suggestion=did_you_mean_rule(item.name, {k[1] for k in self.rules}),
            )
        )

    def _missing(self, verb: str, kind: ast.RuleKind, name: str, span: Span) -> None:
        """``override`` or ``disable`` of a rule the set does not have: say which kind that name
        is, or the closest name of the kind asked for."""
        others = sorted(k[0].value for k in self.rules if k[1] == name)
        if others and verb == "override":
            self.diagnostics.append(
                error(
                    "override-kind",
                    f"there is no {kind.value} '{name}' to override ('{name}' is a {others[0]})",
                    span,
                    suggestion=f"write `override {others[0]} {name}`",
                )
            )
            return
        if others:
            message = f"cannot {verb} {kind.value} '{name}': no such {kind.value} ('{name}' is a {others[0]})"
            suggestion = f"write `{verb} {others[0]} {name}`"
        else:
            message = f"cannot {verb} {kind.value} '{name}': no such {kind.value}"
            suggestion = did_you_mean_rule(name, {k[1] for k in self.rules if k[0] is kind})
        self.diagnostics.append(error("unknown-rule", message, span, suggestion=suggestion))

    def amend(self, patch: ast.PartialOverride) -> None:
        """``override score X weight 3``: the rule as it was, with only what the override states."""
        key = (patch.kind, patch.name)
        previous = self.rules.get(key)
        if previous is None:
            self._missing("override", patch.kind, patch.name, patch.name_span)
            return
        changes = []
        if patch.weight is not None:
            was = expr_text(previous.weight) if previous.weight is not None else "1"
            changes.append(f"weight {was} -> {expr_text(patch.weight)}")
        if patch.normalize is not None:
            changes.append(f"normalize {previous.normalize or 'none'} -> {patch.normalize}")
        if patch.guard is not None:
            changes.append("when guard replaced" if previous.guard is not None else "when guard added")
        if patch.unresolvable is not None:
            was = unresolvable_text(previous.unresolvable) if previous.unresolvable is not None else "resolvable"
            changes.append(f"{was} -> {unresolvable_text(patch.unresolvable)}")
        if patch.audit:
            changes.append("enforce -> audit" if not previous.audit else "audit (already)")
        self.diagnostics.append(
            note(
                "override",
                f"overrides {patch.kind.value} '{patch.name}' defined at {previous.name_span.location()}: "
                + ", ".join(changes),
                patch.name_span,
            )
        )
        # Keeps the body (and reason, order) and the place in the order; problems with what the
        # override states are reported where it states them.
        self.rules[key] = dataclasses.replace(
            previous,
            guard=patch.guard if patch.guard is not None else previous.guard,
            weight=patch.weight if patch.weight is not None else previous.weight,
            normalize=patch.normalize if patch.normalize is not None else previous.normalize,
            unresolvable=patch.unresolvable if patch.unresolvable is not None else previous.unresolvable,
            audit=patch.audit or previous.audit,
            override=True,
            name_span=patch.name_span,
        )

    def add_rule(self, rule: ast.Rule) -> None:
        kind = rule.kind.value
        key = (rule.kind, rule.name)
        previous = self.rules.get(key)
        if rule.override:
            if previous is not None:
                self.diagnostics.append(
                    note(
                        "override",
                        f"overrides {kind} '{rule.name}' defined at {previous.name_span.location()}",
                        rule.name_span,
                    )
                )
                self.rules[key] = rule  # keeps the overridden rule's place in the order
                return
            self._missing("override", rule.kind, rule.name, rule.name_span)
            return
        if previous is not None:
            self.diagnostics.append(
                error(
                    "duplicate-rule",
                    f"{kind} '{rule.name}' is already defined at {previous.name_span.location()}",
                    rule.name_span,
                    suggestion=f"write `override {kind} {rule.name}` to replace it",
                )
            )
            return
        self.rules[key] = rule


def did_you_mean_rule(name: str, candidates: Iterable[str]) -> str:
    """Rule names are often misspelt in case alone (imagelocality): those come first."""
    names = list(candidates)
    same = [c for c in names if c.lower() == name.lower()]
    if same:
        return f"did you mean `{same[0]}`?"
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else ""
