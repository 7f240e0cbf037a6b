"""Built-in functions: the Kubernetes semantics rules must not re-implement.

The semantics themselves are :mod:`rulesched.semantics` (pure functions of the object model, which
the store and the binders use too); a built-in gives one a type rule and, for those that read the
whole cluster, a per-pod plan, a version token and the column evaluation's hints.

Each built-in has a type rule (``check``: argument types -> result type and per-argument
coercions, or a message) and an implementation. Implementations are total: bad or missing
input gives the documented "nothing matches" answer, never an exception. Built-ins that need the
cluster (topology domains) take the evaluation context first; see :class:`EvalContext`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rulesched.lang import schema
from rulesched.lang.builtins import domains, dra, groups, topology, volume_binding, volumes
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
from rulesched.lang.values import to_number, whole
from rulesched.model import QuantityError, parse_quantity
from rulesched.semantics.matching import (
    label_selector_matches,
    node_selector_term_matches,
    ports_conflict,
    subset,
    tolerated,
    tolerates,
)

Check = Callable[[Sequence[Type]], "tuple[Type, tuple[str | None, ...]] | str"]


@dataclass(frozen=True)
class Builtin:
    name: str
    check: Check
    impl: Callable[..., Any]
    signature: str  # for docs and "did you mean" help
    doc: str
    context: bool = False  # impl(ctx, *args): needs the cluster; see rulesched.lang.evaluation.compile
    costly: bool = False  # worth caching per node when its arguments depend on the node only
    # Context built-ins only: the pod fields the implementation reads, and a token that changes
    # whenever the cluster-wide answer may change (None: never cache, e.g. reads ctx.feasible).
    pod_fields: frozenset[str] = frozenset()
    version: Callable[[Any], object] | None = None
    # Its answers are never cached (it moves for every pod): the pod fields it reads need not be
    # equal between pods sharing a binding (rulesched.lang.evaluation.ruleset).
    fresh: bool = False
    # Its answer on a node is a function of that node and the pod fields above alone, given the
    # rule set (not the cluster beyond the node, not the pod whole): a rule calling it may share
    # its answers between classes agreeing on those fields (rulesched.engine.sharing).
    by_fields: bool = False
    moves: Callable[[Any], bool] | None = None  # for this pod, does every cluster change move it?
    # The node labels the answer depends on, for this pod at this moment (the rest is the
    # context's): nodes alike in those labels get one evaluation (rulesched.engine.vectorise).
    # (None from it: not for this pod, e.g. a volume whose reach names the node itself.)
    domain: Callable[[Any], tuple[str, ...] | None] | None = None
    # For this pod at this moment, the answer on every node when it is the same everywhere (the
    # running pods' terms select nothing of it, ...), else None: a column is then one value.
    uniform: Callable[[Any], Any] | None = None
    # For a built-in whose answer for a pod depends on cluster objects beyond the pod's fields
    # (Services, controllers): a token of them, given the cluster view; classes of equivalent
    # pods are keyed by it too (rulesched.lang.evaluation.ruleset), so guards calling it stay true.
    class_token: Callable[[Any], object] | None = None
    # Built-ins without context that take a node: the node fields the implementation reads (None:
    # any), so a rule passing the node whole can still be shared (rulesched.engine.sharing).
    node_fields: frozenset[str] | None = None
    # impl(ctx, node) for many nodes at once: (ctx, NodeColumns, rows) -> one answer per row, for a
    # built-in that reads per-node numbers the columns hold (attach counts), not labels alone.
    columns: Callable[[Any, Any, Any], Sequence[Any]] | None = None


def _sig(params: Sequence[Type], result: Type) -> Check:
    def check(args: Sequence[Type]) -> tuple[Type, tuple[str | None, ...]] | str:
        if len(args) != len(params):
            return f"takes {len(params)} argument{'s' if len(params) != 1 else ''}, not {len(args)}"
        for i, (arg, param) in enumerate(zip(args, params, strict=True), 1):
            if not fits(arg, param):
                return f"argument {i} must be {param}, not {arg}"
        coercions = tuple(
            TO_MILLI if p == QUANTITY and a == NUMBER else None for a, p in zip(args, params, strict=True)
        )
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


def identity(value: Any) -> Any:
    """``number``'s work: its argument arrives coerced to a number already (the checker's
    coercion); the compiler leaves the call out (rulesched.lang.evaluation.compile)."""
    return value


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
        value = int(value)
    if isinstance(value, int) and value.bit_length() > 10_000:
        return str(Decimal(value))  # str() refuses ints of over 4,300 digits; Decimal does not
    return str(value)


def _sqrt(value: Any) -> float:
    return math.sqrt(value) if value > 0 else 0.0


def _floor(value: Any) -> int:
    return whole(value, math.floor)


def _sigmoid(value: Any) -> float:
    """1 / (1 + e^-x), computed so that no argument overflows (e^x is only taken of x <= 0)."""
    try:
        x = float(value)
    except OverflowError:  # an integer beyond a float's range
        return 1.0 if value > 0 else 0.0
    if x != x:  # (NaN: no rule value is one, but the function stays total)
        return 0.5
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _exp(value: Any) -> float:
    """e^x, total: where it would overflow, the largest float (about 1.8e308) rather than infinity
    (a score of infinity counts 0, and floor, ceil and quantities have no integer for it); 0 for an
    argument too negative for a float; NaN (no rule value is one) reads as 0, as in a score."""
    try:
        x = float(value)
    except OverflowError:  # an integer beyond a float's range
        return sys.float_info.max if value > 0 else 0.0
    if x != x:
        return 1.0
    try:
        return min(math.exp(x), sys.float_info.max)  # (min: x itself infinite)
    except OverflowError:
        return sys.float_info.max


BUILTINS: dict[str, Builtin] = {
    b.name: b
    for b in [
        Builtin("len", _check_len, len, "len(list | map | string) -> number", "Number of elements or characters."),
        Builtin(
            "has",
            _sig([MapOf(ANY), STRING], BOOL),
            lambda m, k: k in m,
            "has(map, key) -> bool",
            "Whether the map has the key (an empty value counts as present).",
        ),
        Builtin(
            "keys",
            _sig([MapOf(ANY)], ListOf(STRING)),
            lambda m: tuple(m),
            "keys(map) -> list of string",
            "The map's keys.",
        ),
        Builtin("lower", _sig([STRING], STRING), str.lower, "lower(string) -> string", "Lower case."),
        Builtin("upper", _sig([STRING], STRING), str.upper, "upper(string) -> string", "Upper case."),
        Builtin("startswith", _sig([STRING, STRING], BOOL), str.startswith, "startswith(s, prefix) -> bool", ""),
        Builtin("endswith", _sig([STRING, STRING], BOOL), str.endswith, "endswith(s, suffix) -> bool", ""),
        Builtin("contains", _sig([STRING, STRING], BOOL), lambda s, sub: sub in s, "contains(s, part) -> bool", ""),
        Builtin("string", _check_string, _string, "string(value) -> string", "Text of a number or bool."),
        Builtin("abs", _check_same_numeric, abs, "abs(x) -> x", "Absolute value."),
        Builtin("sqrt", _sig([NUMBER], NUMBER), _sqrt, "sqrt(number) -> number", "Square root; 0 below 0."),
        Builtin(
            "sigmoid",
            _sig([NUMBER], NUMBER),
            _sigmoid,
            "sigmoid(number) -> number",
            "The logistic function 1 / (1 + e^-x): between 0 and 1, 0.5 at 0.",
        ),
        Builtin(
            "exp",
            _sig([NUMBER], NUMBER),
            _exp,
            "exp(number) -> number",
            "e^x; the largest float (about 1.8e308) where e^x is larger (never infinity).",
        ),
        Builtin("floor", _sig([NUMBER], NUMBER), _floor, "floor(number) -> number", ""),
        Builtin("ceil", _sig([NUMBER], NUMBER), whole, "ceil(number) -> number", ""),
        Builtin("min", _check_extreme, min, "min(a, b, ...) -> smallest", ""),
        Builtin("max", _check_extreme, max, "max(a, b, ...) -> largest", ""),
        Builtin(
            "number",
            _check_number,
            identity,
            "number(quantity | duration) -> number",
            "A quantity in whole units (500m is 0.5), a duration in seconds.",
        ),
        Builtin(
            "quantity",
            _check_quantity,
            _quantity,
            "quantity(string | number) -> quantity",
            "Parse a Kubernetes quantity, e.g. from an annotation; 0 when it is not one.",
        ),
        Builtin("seconds", _sig([DURATION], NUMBER), lambda d: d, "seconds(duration) -> number", ""),
        Builtin(
            "matches",
            _sig([schema.LABEL_SELECTOR, MapOf(STRING)], BOOL),
            label_selector_matches,
            "matches(label selector, labels) -> bool",
            "metav1.LabelSelector matching.",
        ),
        Builtin(
            "term_matches",
            _sig([schema.NODE_SELECTOR_TERM, schema.NODE], BOOL),
            node_selector_term_matches,
            "term_matches(node selector term, node) -> bool",
            "NodeSelectorTerm matching: In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields.",
            node_fields=frozenset({"labels", "name"}),
        ),
        Builtin(
            "tolerates",
            _sig([schema.TOLERATION, schema.TAINT], BOOL),
            tolerates,
            "tolerates(toleration, taint) -> bool",
            "Whether one toleration tolerates a taint.",
        ),
        Builtin(
            "tolerated",
            _sig([schema.TAINT, ListOf(schema.TOLERATION)], BOOL),
            tolerated,
            "tolerated(taint, tolerations) -> bool",
            "Whether any of the tolerations tolerates the taint.",
        ),
        Builtin(
            "subset",
            _sig([MapOf(STRING), MapOf(STRING)], BOOL),
            subset,
            "subset(map, map) -> bool",
            "Whether every key of the first map has the same value in the second (nodeSelector).",
        ),
        Builtin(
            "ports_conflict",
            _sig([ListOf(schema.PORT), ListOf(schema.PORT)], BOOL),
            ports_conflict,
            "ports_conflict(wanted ports, used ports) -> bool",
            "Host port conflicts, 0.0.0.0 overlapping all.",
        ),
    ]
}


def _topology(name: str, result: Type, doc: str) -> Builtin:
    return Builtin(
        name,
        _sig([schema.NODE], result),
        getattr(topology, name),
        f"{name}(node) -> {result}",
        doc,
        context=True,
        pod_fields=topology.POD_FIELDS,
        version=topology.VERSIONS[name],
        moves=topology.MOVES[name],
        domain=topology.DOMAINS.get(name),
        uniform=topology.UNIFORM.get(name),
        columns=topology.COLUMNS.get(name),
    )


BUILTINS.update(
    {
        b.name: b
        for b in [
            _topology("pod_affinity_ok", BOOL, "The pod's required pod affinity holds on the node (InterPodAffinity)."),
            _topology("pod_anti_affinity_ok", BOOL, "The pod's required pod anti-affinity holds on the node."),
            _topology(
                "existing_anti_affinity_ok", BOOL, "No existing pod's required anti-affinity rejects the pod there."
            ),
            _topology(
                "inter_pod_affinity_score", NUMBER, "Summed preferred (anti-)affinity weights of the node's domains."
            ),
            _topology(
                "spread_missing_label",
                BOOL,
                "The first DoNotSchedule constraint the node fails, it fails for lack of its topology key.",
            ),
            _topology("spread_ok", BOOL, "Every DoNotSchedule topology spread constraint's skew holds on the node."),
            _topology("spread_score", NUMBER, "PodTopologySpread's score for ScheduleAnyway constraints; -1: ignored."),
            _topology("image_locality", NUMBER, "ImageLocality's 0..100 score for the pod's images on the node."),
            Builtin(
                "spread_defaulted",
                _sig([], BOOL),
                topology.spread_defaulted,
                "spread_defaulted() -> bool",
                "The pod has no topology spread constraints and a Service or its controller selects"
                " it: PodTopologySpread's score spreads it by the system defaults.",
                context=True,
                pod_fields=topology.POD_FIELDS,
                version=topology.VERSIONS["spread_defaulted"],
                moves=topology.MOVES["spread_defaulted"],
                class_token=topology.CLASS_TOKENS["spread_defaulted"],
            ),
        ]
    }
)


def _volume_generation(ctx: Any) -> object:
    return getattr(ctx.cluster, "generation", 0)


def _always_moves(ctx: Any) -> bool:
    return True


def _volume(name: str, doc: str) -> Builtin:
    """A volume plugin's reasons for a node. Its answers depend on claims other pods take as
    they are placed, so they are evaluated afresh (moves) for the pods that reach them: the
    rules gate them on the pod's claims and volumes. For the common pods their answer is one
    value everywhere, one per group of nodes alike in a few labels, or array operations over
    per-node counts (``volumes.UNIFORM``, ``DOMAINS``, ``COLUMNS``, and VolumeBinding's own), so a
    walk evaluates them as columns."""
    module = volume_binding if name == "volume_binding" else volumes
    return Builtin(
        name,
        _sig([schema.NODE], ListOf(STRING)),
        getattr(module, name),
        f"{name}(node) -> list of string",
        doc,
        context=True,
        pod_fields=frozenset({"namespace", "volumes"}),
        version=_volume_generation,
        moves=_always_moves,
        fresh=True,
        domain=module.DOMAINS.get(name),
        uniform=module.UNIFORM.get(name),
        columns=module.COLUMNS.get(name),
    )


BUILTINS.update(
    {
        b.name: b
        for b in [
            _volume(
                "volume_restrictions",
                "VolumeRestrictions' reasons: inline disks in use on the node, ReadWriteOncePod claims in use.",
            ),
            _volume("volume_limits", "NodeVolumeLimits' reasons: CSI attach limits (CSINode) exceeded on the node."),
            _volume(
                "volume_binding",
                "VolumeBinding's reasons: bound volumes' node affinity, unbound claims' matching or provisioning.",
            ),
            _volume("volume_zone", "VolumeZone's reasons: bound volumes' zone/region labels against the node's."),
        ]
    }
)


def _group(field: str, result: Type, doc: str) -> Builtin:
    """``group.FIELD`` (the parser's spelling of ``group_FIELD()``): rulesched.lang.builtins.groups."""
    nodes = field == "nodes"
    fields = frozenset({"domain"}) if field == "domain" else frozenset({"gang"})
    return Builtin(
        groups.builtin_name(field),
        _sig([], result),
        getattr(groups, groups.builtin_name(field)),
        f"group.{field} -> {result}",
        doc,
        context=True,
        # group.nodes moves with every member placed, while the members' fields stay alike: "name"
        # keeps each pod out of any class (its bindings are its own, evaluated at each cycle).
        pod_fields=frozenset({"name", "labels", "scheduling_group"}) if nodes else fields,
        version=None if nodes else groups.steady,
        moves=_always_moves if nodes else None,
        fresh=nodes,
    )


BUILTINS.update(
    {
        b.name: b
        for b in [
            _group("members", NUMBER, "How many members the pod's group (gang) has (0: no group)."),
            _group("min_count", NUMBER, "The group's minimum (minMember, minCount): 0 for a pod of no group."),
            _group(
                "nodes",
                ListOf(schema.NODE),
                "The nodes of the group's members placed so far (bound, or earlier in this attempt).",
            ),
            _group(
                "domain",
                schema.STRINGS,
                "The topology domain the group's attempt is trying, as label key to value (KEP-5732):"
                " empty for a group without topology constraints and for a pod of no group.",
            ),
        ]
    }
)

# devices_after(node): node.devices once the pod's claims are allocated there. Its answer for a
# node moves only with the node (its devices) and what the pod's claims ask, which the class key
# holds: kept per class and node like any rule reading node.devices.
BUILTINS["devices_after"] = Builtin(
    "devices_after",
    _sig([schema.NODE], ListOf(schema.DEVICE)),
    dra.devices_after,
    "devices_after(node) -> list of device",
    "node.devices as they would be once the pod's DRA claims are allocated on the node (as the "
    "DynamicResources filter allocates them, device scores included); node.devices where the "
    "pod has none to allocate or they cannot be allocated there.",
    context=True,
    pod_fields=frozenset({"namespace", "resource_claims"}),
    version=groups.steady,
    # (the allocation of the pod's claims on the node, the rules' device scores ranking the
    # candidates: the same for pods asking the same when those scores read only the device and
    # the request; rulesched.engine.batch.ColumnPlan checks that before sharing)
    by_fields=True,
)

# dra_score(node): DynamicResources' Score (firstAvailable subrequests, the earlier the better).
# Its answers move with every allocation: evaluated afresh for each pod that reaches it.
BUILTINS["dra_score"] = Builtin(
    "dra_score",
    _sig([schema.NODE], NUMBER),
    dra.dra_score,
    "dra_score(node) -> number",
    "DynamicResources' Score: per claim request with firstAvailable, 8 minus the index of the "
    "subrequest its allocation on the node uses (0 where the claims cannot be allocated).",
    context=True,
    pod_fields=frozenset({"namespace", "resource_claims"}),
    version=None,
    moves=_always_moves,
    fresh=True,
)

# domain(node, KEY): the nodes sharing the node's value of label KEY (docs/language.md,
# "Topology domains"). Its answers move with every change to the cluster; the aggregates over its
# pods are indexed (rulesched.lang.builtins.domains).
BUILTINS["domain"] = Builtin(
    "domain",
    _sig([schema.NODE, STRING], schema.DOMAIN),
    domains.domain,
    "domain(node, key) -> domain",
    "The nodes whose label KEY has the node's value (none when the node lacks the label): "
    ".nodes, .pods, .allocatable, .requested, .free.",
    context=True,
    version=domains.version,
    moves=_always_moves,  # evaluated afresh, not cached per node: as columns, once per label value
)

# number(q) is coerced by the checker (TO_NUMBER), so its implementation is the identity; keep
# the import used where a caller wants the conversion directly.
__all__ = ["BUILTINS", "Builtin", "to_number"]
