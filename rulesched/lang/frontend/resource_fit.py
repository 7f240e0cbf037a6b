"""The ``no-resource-fit`` warning: a rule set that places pods without checking they fit.

A rule set is the whole placement policy for ``rulesched run`` and ``simulate``: if none of its
filters compares the pod's requests with the node's free or allocatable resources, an 8-GPU pod
goes to a 4-GPU node. That is what happens when a file does not ``extends "default"`` (whose
NodeResourcesFit filter does it). Rules served to kube-scheduler as an extender are different:
kube-scheduler has already run its own filters, so such a set rightly has none. The set says so
with a line of its own in any of its files::

    # rulesched: extender

(a comment, so the language has no new word), or ``rulesched lint --for extender`` says it for
the files linted. ``lint`` then stays quiet; ``run`` and ``simulate`` warn whatever the mark,
once at startup, since there the set is the whole policy.

The check is by reading, not by running: a filter counts when its body, or a let it uses, reads
``pod.requests`` (or ``pod.nonzero_requests``) and ``node.free`` or ``node.allocatable``. Taints
(``node.taints``) and node affinity (``pod.node_selector``, ``pod.required_node_affinity``,
``term_matches``) are named in the message when no filter reads them either.
Used by :mod:`rulesched.lang.frontend.lint` and, through :mod:`rulesched.lang`, by the faces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rulesched.lang.frontend import ast
from rulesched.lang.frontend.checked import CheckedRules
from rulesched.lang.frontend.source import Diagnostic, Severity, Source

CODE = "no-resource-fit"
EXTENDER_MARK = "# rulesched: extender"
_MARK = re.compile(r"^[ \t]*#[ \t]*rulesched:[ \t]*extender[ \t]*$", re.MULTILINE)
_POD_REQUESTS = {("pod", "requests"), ("pod", "nonzero_requests")}
_NODE_CAPACITY = {("node", "free"), ("node", "allocatable")}
_TAINTS = {("node", "taints")}
_AFFINITY = {
    ("pod", "node_selector"),
    ("pod", "required_node_affinity"),
    ("pod", "has_required_node_affinity"),
    ("call", "term_matches"),
}


def meant_for_extender(sources: Iterable[Source]) -> bool:
    """Whether a file of the set carries the ``# rulesched: extender`` line."""
    return any(_MARK.search(source.text) for source in sources)


def resource_fit_warning(checked: CheckedRules, path: str, *, lint: bool = True) -> Diagnostic | None:
    """The warning for a set none of whose filters checks that pods fit, else None. ``path``
    names the set (its first file); ``lint`` adds how to mark a set meant for the extender."""
    if not checked.rules:
        return None  # nothing to place with (an empty file has its own warning; a file of lets)
    reads = [_reads(c.rule.body, checked.lets) for c in checked.rules if c.kind is ast.RuleKind.FILTER]
    if any(r & _POD_REQUESTS and r & _NODE_CAPACITY for r in reads):
        return None
    unchecked = [
        what
        for what, fields in (("taints", _TAINTS), ("node affinity", _AFFINITY))
        if not any(r & fields for r in reads)
    ]
    also = "".join(f", nor {what}" for what in unchecked)
    message = (
        f"no filter checks that a pod fits the node's resources (pod.requests against node.free){also}: "
        "pods will be placed on nodes without room for them"
    )
    suggestion = 'add `extends "default"` for kube-scheduler\'s filters (resources, taints, affinity, ports, volumes)'
    if lint:
        suggestion += (
            f"; rules served with `rulesched extender` (kube-scheduler filters first) say so with `{EXTENDER_MARK}`"
        )
    return Diagnostic(Severity.WARNING, CODE, message, None, path=path, suggestion=suggestion)


def startup_warning(checked: CheckedRules, files: Sequence[str]) -> str | None:
    """The warning as one log line for ``run`` and ``simulate`` (the set is their whole policy,
    marked for the extender or not), naming the set by its files; None when it checks fit."""
    shown = ", ".join(files[:3]) + (f" (+{len(files) - 3} more)" if len(files) > 3 else "")
    found = resource_fit_warning(checked, shown or "<rules>", lint=False)
    return None if found is None else f"{found.location}: {found.message} [{CODE}]; {found.suggestion}"


def _reads(root: ast.Expr, lets: dict[str, ast.Let]) -> set[tuple[str, str]]:
    """The ``pod.X`` and ``node.X`` fields an expression reads, through the lets it uses, and the
    built-ins it calls (as ``("call", name)``)."""
    found: set[tuple[str, str]] = set()
    seen: set[str] = set()
    stack = [root]
    while stack:
        expr = stack.pop()
        if isinstance(expr, ast.Attr) and isinstance(expr.obj, ast.Name) and expr.obj.id in ("pod", "node"):
            found.add((expr.obj.id, expr.name))
        elif isinstance(expr, ast.Call):
            found.add(("call", expr.func))
        elif isinstance(expr, ast.Name) and expr.id in lets and expr.id not in seen:
            seen.add(expr.id)
            stack.append(lets[expr.id].value)
        stack.extend(ast.children(expr))
    return found
