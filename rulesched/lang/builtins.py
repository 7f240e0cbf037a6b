"""Built-in functions: the Kubernetes semantics rules must not re-implement.

Each built-in has a type rule (``check``: argument types -> result type and per-argument
coercions, or a message) and an implementation. Implementations are total: bad or missing
input gives the documented "nothing matches" answer, never an exception. Built-ins that need the
cluster (topology domains) take the evaluation context first; see :class:`EvalContext`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rulesched.lang import schema
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
    Type,
    fits,
    is_numeric,
)
from rulesched.lang.values import to_number
from rulesched.model import (
    ContainerPort,
    LabelSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    QuantityError,
    Taint,
    Toleration,
    parse_quantity,
)

Check = Callable[[Sequence[Type]], "tuple[Type, tuple[str | None, ...]] | str"]


@dataclass(frozen=True)
class Builtin:
    name: str
    check: Check
    impl: Callable[..., Any]
    signature: str  # for docs and "did you mean" help
    doc: str
    context: bool = False  # impl(ctx, *args): needs the cluster; see rulesched.lang.compile
    costly: bool = False  # worth caching per node when its arguments depend on the node only


def _sig(params: Sequence[Type], result: Type) -> Check:
    def check(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
        if len(args) != len(params):
            return f"takes {len(params)} argument{'s' if len(params) != 1 else ''}, not {len(args)}"
        for i, (arg, param) in enumerate(zip(args, params, strict=True), 1):
            if not fits(arg, param):
                return f"argument {i} must be {param}, not {arg}"
        coercions = tuple(TO_MILLI if p == QUANTITY and a == NUMBER else None for a, p in zip(args, params, strict=True))
        return result, coercions

    return check


def _check_len(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) != 1:
        return f"takes 1 argument, not {len(args)}"
    if isinstance(args[0], (ListOf, MapOf)) or args[0] in (STRING, ANY):
        return NUMBER, (None,)
    return f"argument 1 must be a list, map or string, not {args[0]}"


def _check_extreme(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) < 2:
        return "takes two or more arguments (or write min(x for v in list) to aggregate)"
    if not all(is_numeric(a) for a in args):
        return "arguments must be numbers, quantities or durations"
    units = {a for a in args if a not in (NUMBER, ANY)}
    if len(units) > 1:
        return "cannot mix quantities and durations"
    unit = units.pop() if units else NUMBER
    return unit, tuple(TO_MILLI if unit == QUANTITY and a == NUMBER else None for a in args)


def _check_same_numeric(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) != 1 or not is_numeric(args[0]):
        return "takes one number, quantity or duration"
    return args[0], (None,)


def _check_number(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) != 1 or not is_numeric(args[0]):
        return "takes one number, quantity or duration"
    return NUMBER, ("to_number" if args[0] == QUANTITY else None,)


def _check_string(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) != 1 or args[0] not in (STRING, NUMBER, BOOL, ANY):
        return "takes one string, number or bool"
    return STRING, (None,)


def _check_quantity(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
    if len(args) != 1 or args[0] not in (STRING, NUMBER, QUANTITY, ANY):
        return "takes one string or number"
    return QUANTITY, (TO_MILLI if args[0] == NUMBER else None,)


# --- implementations -----------------------------------------------------------------------


def _quantity(value: Any) -> int:
    if isinstance(value, int):
        return value  # already milli-units (numbers were coerced by the checker)
    try:
        return parse_quantity(str(value))
    except QuantityError:
        return 0


def _string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _sqrt(value: Any) -> float:
    return math.sqrt(value) if value > 0 else 0.0


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, an empty selector everything."""
    if selector is None:
        return False
    for key, value in selector.match_labels:
        if labels.get(key) != value:
            return False
    for req in selector.match_expressions:
        present = req.key in labels
        op = req.operator
        if op == "In":
            if not present or labels[req.key] not in req.values:
                return False
        elif op == "NotIn":
            if present and labels[req.key] in req.values:
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist":
            if present:
                return False
        else:
            return False
    return True


def _requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    op = req.operator
    present = req.key in values
    if op == "In":
        return present and values[req.key] in req.values
    if op == "NotIn":
        return not present or values[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            actual, bound = int(values[req.key]), int(req.values[0])
        except ValueError:
            return False
        return actual > bound if op == "Gt" else actual < bound
    return False


def node_selector_term_matches(term: NodeSelectorTerm, node: Any) -> bool:
    """A NodeSelectorTerm: every expression (on labels) and field (metadata.name) must hold.
    A term with neither matches nothing, as in component-helpers."""
    if not term.match_expressions and not term.match_fields:
        return False
    labels = node.labels
    for req in term.match_expressions:
        if not _requirement_matches(req, labels):
            return False
    if term.match_fields:
        fields = {"metadata.name": node.name}
        for req in term.match_fields:
            if req.key != "metadata.name" or req.operator not in ("In", "NotIn"):
                return False
            if not _requirement_matches(req, fields):
                return False
    return True


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """v1.Toleration.ToleratesTaint: effect (empty matches all), key (empty with Exists matches
    all keys), then Exists, or Equal on the value."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    if toleration.operator in ("Equal", ""):
        return toleration.value == taint.value
    return False


def tolerated(taint: Taint, tolerations: Sequence[Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def subset(small: Mapping[str, str], big: Mapping[str, str]) -> bool:
    return all(big.get(k) == v for k, v in small.items())


def ports_conflict(wanted: Sequence[ContainerPort], used: Sequence[ContainerPort]) -> bool:
    """NodePorts: same port and protocol, and the host IPs overlap (0.0.0.0 overlaps all)."""
    for want in wanted:
        for have in used:
            if want.host_port != have.host_port or want.protocol != have.protocol:
                continue
            if want.host_ip == have.host_ip or "0.0.0.0" in (want.host_ip, have.host_ip):
                return True
    return False


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin("len", _check_len, len, "len(list | map | string) -> number", "Number of elements or characters."),
        Builtin("has", _sig([MapOf(ANY), STRING], BOOL), lambda m, k: k in m, "has(map, key) -> bool",
                "Whether the map has the key (an empty value counts as present)."),
        Builtin("keys", _sig([MapOf(ANY)], ListOf(STRING)), lambda m: tuple(m), "keys(map) -> list of string",
                "The map's keys."),
        Builtin("lower", _sig([STRING], STRING), str.lower, "lower(string) -> string", "Lower case."),
        Builtin("upper", _sig([STRING], STRING), str.upper, "upper(string) -> string", "Upper case."),
        Builtin("startswith", _sig([STRING, STRING], BOOL), str.startswith, "startswith(s, prefix) -> bool", ""),
        Builtin("endswith", _sig([STRING, STRING], BOOL), str.endswith, "endswith(s, suffix) -> bool", ""),
        Builtin("contains", _sig([STRING, STRING], BOOL), lambda s, sub: sub in s, "contains(s, part) -> bool", ""),
        Builtin("string", _check_string, _string, "string(value) -> string", "Text of a number or bool."),
        Builtin("abs", _check_same_numeric, abs, "abs(x) -> x", "Absolute value."),
        Builtin("sqrt", _sig([NUMBER], NUMBER), _sqrt, "sqrt(number) -> number", "Square root; 0 below 0."),
        Builtin("floor", _sig([NUMBER], NUMBER), math.floor, "floor(number) -> number", ""),
        Builtin("ceil", _sig([NUMBER], NUMBER), math.ceil, "ceil(number) -> number", ""),
        Builtin("min", _check_extreme, min, "min(a, b, ...) -> smallest", ""),
        Builtin("max", _check_extreme, max, "max(a, b, ...) -> largest", ""),
        Builtin("number", _check_number, lambda x: x, "number(quantity | duration) -> number",
                "A quantity in whole units (500m is 0.5), a duration in seconds."),
        Builtin("quantity", _check_quantity, _quantity, "quantity(string | number) -> quantity",
                "Parse a Kubernetes quantity, e.g. from an annotation; 0 when it is not one."),
        Builtin("seconds", _sig([DURATION], NUMBER), lambda d: d, "seconds(duration) -> number", ""),
        Builtin("matches", _sig([schema.LABEL_SELECTOR, MapOf(STRING)], BOOL), label_selector_matches,
                "matches(label selector, labels) -> bool", "metav1.LabelSelector matching."),
        Builtin("term_matches", _sig([schema.NODE_SELECTOR_TERM, schema.NODE], BOOL), node_selector_term_matches,
                "term_matches(node selector term, node) -> bool",
                "NodeSelectorTerm matching: In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields."),
        Builtin("tolerates", _sig([schema.TOLERATION, schema.TAINT], BOOL), tolerates,
                "tolerates(toleration, taint) -> bool", "Whether one toleration tolerates a taint."),
        Builtin("tolerated", _sig([schema.TAINT, ListOf(schema.TOLERATION)], BOOL), tolerated,
                "tolerated(taint, tolerations) -> bool", "Whether any of the tolerations tolerates the taint."),
        Builtin("subset", _sig([MapOf(STRING), MapOf(STRING)], BOOL), subset, "subset(map, map) -> bool",
                "Whether every key of the first map has the same value in the second (nodeSelector)."),
        Builtin("ports_conflict", _sig([ListOf(schema.PORT), ListOf(schema.PORT)], BOOL), ports_conflict,
                "ports_conflict(wanted ports, used ports) -> bool", "Host port conflicts, 0.0.0.0 overlapping all."),
    ]
}

# number(q) is coerced by the checker (TO_NUMBER), so its implementation is the identity; keep
# the import used where a caller wants the conversion directly.
__all__ = ["BUILTINS", "Builtin", "to_number"]
