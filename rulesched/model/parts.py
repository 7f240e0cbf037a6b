"""Decoders for the parts of objects that scheduling matches on: selectors, affinity terms,
tolerations and taints, topology spread constraints, host ports and images.

Split from :mod:`rulesched.model.decode` (which assembles whole objects) to keep each module
readable. Each function checks what it reads and fills in the defaults the API server would, so
hand-written files and objects read back from a cluster decode alike; errors name the field via
the :class:`~rulesched.model.fields.Where` passed in. The whole-part decoders at the end
(:func:`affinity`, :func:`tolerations`, ...) go through the load's memo, because the pods of one
workload repeat these parts verbatim.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from rulesched.model.fields import (
    Where,
    describe,
    get_bool,
    get_choice,
    get_int,
    get_map,
    get_maps,
    get_opt_int,
    get_str,
    get_str_list,
    get_str_map,
    join,
    memoized,
)
from rulesched.model.objects import (
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from rulesched.model.requests import is_sidecar

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_NODE_OPERATORS = (*_LABEL_OPERATORS, "Gt", "Lt")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def valid_label_value(value: str) -> bool:
    """A label value the API server accepts: at most 63 characters, alphanumerics with ``-_.``
    inside (or empty)."""
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


# A requirement no label set meets (In, no values): what an invalid selector or term becomes.
# The API server's selector parsing rejects values that are not label values, and the scheduler
# then matches nothing with them (nodeaffinity's lazy-error selector drops the term).
NEVER_LABELS = LabelSelectorRequirement("", "In", ())
NEVER_NODE = NodeSelectorRequirement("", "In", ())
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_PROTOCOLS = ("TCP", "UDP", "SCTP")


def _requirement(
    expr: Mapping[str, Any], where: Where, at: str, operators: tuple[str, ...]
) -> tuple[str, str, tuple[str, ...]]:
    """A ``{key, operator, values}`` expression, checked as the API server checks it."""
    key = get_str(expr, "key", where, at)
    if not key:
        raise where.error("missing", join(at, "key"))
    op = get_choice(expr, "operator", where, at, operators, "")
    values = get_str_list(expr, "values", where, at)
    if op in ("In", "NotIn") and not values:
        raise where.error(f"operator {op} needs at least one value", join(at, "values"))
    if op in ("Exists", "DoesNotExist") and values:
        raise where.error(f"operator {op} takes no values", join(at, "values"))
    if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise where.error(f"operator {op} needs exactly one integer value", join(at, "values"))
    return key, op, values


def label_selector(value: object, where: Where, at: str) -> LabelSelector | None:
    """A metav1.LabelSelector; absent or null is ``None`` (selects nothing)."""
    if value is None:
        return None
    if type(value) is not dict:
        raise where.error(f"expected a mapping, got {describe(value)}", at)
    labels = get_str_map(value, "matchLabels", where, at)
    exprs = tuple(
        LabelSelectorRequirement(*_requirement(e, where, path, _LABEL_OPERATORS))
        for path, e in get_maps(value, "matchExpressions", where, at)
    )
    values = [*labels.values(), *(v for e in exprs for v in e.values)]
    if not all(valid_label_value(v) for v in values):
        return LabelSelector((), (NEVER_LABELS,))  # selects nothing
    return LabelSelector(tuple(labels.items()), exprs)


def _node_selector_term(term: Mapping[str, Any], where: Where, at: str) -> NodeSelectorTerm:
    exprs, fields = (
        tuple(
            NodeSelectorRequirement(*_requirement(e, where, path, _NODE_OPERATORS))
            for path, e in get_maps(term, key, where, at)
        )
        for key in ("matchExpressions", "matchFields")
    )
    if not all(valid_label_value(v) for e in exprs if e.operator in ("In", "NotIn") for v in e.values):
        return NodeSelectorTerm((NEVER_NODE,), ())  # the term matches no node
    return NodeSelectorTerm(exprs, fields)


def decode_label_selector(value: object, *, source: str = "", obj: str = "", field: str = "") -> LabelSelector | None:
    """Decode a label selector found anywhere; ``obj`` and ``field`` name it in errors."""
    return label_selector(value, Where(source, obj), field)


def decode_node_selector_term(value: object, *, source: str = "", obj: str = "", field: str = "") -> NodeSelectorTerm:
    """Decode one ``nodeSelectorTerms`` entry found anywhere."""
    where = Where(source, obj)
    if type(value) is not dict:
        raise where.error(f"expected a mapping, got {describe(value)}", field)
    return _node_selector_term(value, where, field)


def node_selector_terms(selector: Mapping[str, Any], where: Where, at: str) -> tuple[NodeSelectorTerm, ...]:
    """A NodeSelector's ``nodeSelectorTerms`` (ORed), as node affinity and PV affinity hold them."""
    return tuple(_node_selector_term(t, where, path) for path, t in get_maps(selector, "nodeSelectorTerms", where, at))


def _weight(item: Mapping[str, Any], where: Where, at: str) -> int:
    weight = get_int(item, "weight", where, at)
    if not 1 <= weight <= 100:
        raise where.error(f"must be from 1 to 100, got {weight}", join(at, "weight"))
    return weight


def node_affinity(
    affinity: Mapping[str, Any], where: Where
) -> tuple[tuple[NodeSelectorTerm, ...] | None, tuple[PreferredSchedulingTerm, ...]]:
    at = "spec.affinity.nodeAffinity"
    node = get_map(affinity, "nodeAffinity", where, "spec.affinity")
    required = None
    if node.get("requiredDuringSchedulingIgnoredDuringExecution") is not None:
        req = get_map(node, "requiredDuringSchedulingIgnoredDuringExecution", where, at)
        req_at = f"{at}.requiredDuringSchedulingIgnoredDuringExecution"
        required = node_selector_terms(req, where, req_at)
    preferred = tuple(
        PreferredSchedulingTerm(
            _weight(p, where, path),
            _node_selector_term(get_map(p, "preference", where, path), where, f"{path}.preference"),
        )
        for path, p in get_maps(node, "preferredDuringSchedulingIgnoredDuringExecution", where, at)
    )
    return required, preferred


def _pod_affinity_term(term: Mapping[str, Any], where: Where, at: str) -> PodAffinityTerm:
    key = get_str(term, "topologyKey", where, at)
    if not key:
        raise where.error("missing", join(at, "topologyKey"))
    return PodAffinityTerm(
        topology_key=key,
        label_selector=label_selector(term.get("labelSelector"), where, join(at, "labelSelector")),
        namespaces=get_str_list(term, "namespaces", where, at),
        namespace_selector=label_selector(term.get("namespaceSelector"), where, join(at, "namespaceSelector")),
        match_label_keys=get_str_list(term, "matchLabelKeys", where, at),
        mismatch_label_keys=get_str_list(term, "mismatchLabelKeys", where, at),
    )


def pod_affinity(
    affinity: Mapping[str, Any], key: str, where: Where
) -> tuple[tuple[PodAffinityTerm, ...], tuple[WeightedPodAffinityTerm, ...]]:
    """``podAffinity`` or ``podAntiAffinity``: required terms, then weighted preferred terms."""
    at = f"spec.affinity.{key}"
    section = get_map(affinity, key, where, "spec.affinity")
    if not section:
        return (), ()
    required = tuple(
        _pod_affinity_term(t, where, path)
        for path, t in get_maps(section, "requiredDuringSchedulingIgnoredDuringExecution", where, at)
    )
    preferred = tuple(
        WeightedPodAffinityTerm(
            _weight(w, where, path),
            _pod_affinity_term(get_map(w, "podAffinityTerm", where, path), where, f"{path}.podAffinityTerm"),
        )
        for path, w in get_maps(section, "preferredDuringSchedulingIgnoredDuringExecution", where, at)
    )
    return required, preferred


def toleration(t: Mapping[str, Any], where: Where, at: str) -> Toleration:
    return Toleration(
        key=get_str(t, "key", where, at),
        operator=get_choice(t, "operator", where, at, ("Equal", "Exists", "Gt", "Lt", ""), "Equal") or "Equal",
        value=get_str(t, "value", where, at),
        effect=get_choice(t, "effect", where, at, ("", *TAINT_EFFECTS), ""),
        toleration_seconds=get_opt_int(t, "tolerationSeconds", where, at),
    )


def spread_constraint(c: Mapping[str, Any], where: Where, at: str) -> TopologySpreadConstraint:
    max_skew = get_opt_int(c, "maxSkew", where, at)
    if max_skew is None or max_skew < 1:
        problem = "missing" if max_skew is None else f"must be at least 1, got {max_skew}"
        raise where.error(problem, join(at, "maxSkew"))
    key = get_str(c, "topologyKey", where, at)
    if not key:
        raise where.error("missing", join(at, "topologyKey"))
    min_domains = get_int(c, "minDomains", where, at, 1)
    if min_domains < 1:
        raise where.error(f"must be at least 1, got {min_domains}", join(at, "minDomains"))
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=get_choice(c, "whenUnsatisfiable", where, at, ("DoNotSchedule", "ScheduleAnyway"), ""),
        label_selector=label_selector(c.get("labelSelector"), where, join(at, "labelSelector")),
        min_domains=min_domains,
        node_affinity_policy=get_choice(c, "nodeAffinityPolicy", where, at, ("Honor", "Ignore"), "Honor"),
        node_taints_policy=get_choice(c, "nodeTaintsPolicy", where, at, ("Honor", "Ignore"), "Ignore"),
        match_label_keys=get_str_list(c, "matchLabelKeys", where, at),
    )


def normalized_image_name(image: str) -> str:
    """The name ImageLocality looks an image up by: ``nginx`` means ``nginx:latest``."""
    return image if image.rfind(":") > image.rfind("/") else image + ":latest"


def ports_and_images(spec: Mapping[str, Any], where: Where) -> tuple[tuple[ContainerPort, ...], tuple[str, ...]]:
    """Host ports as kube-scheduler's GetHostPorts collects them (sidecar init containers, then
    containers; ``hostPort > 0``; with ``hostNetwork`` the API server makes every container port a
    host port) and images as ImageLocality does (init containers, then containers, then image
    volumes' ``image.reference``, kubernetes PR #130231 of 1.36, each counted in the score's
    threshold as 1.37's #138951 does; normalized, one entry per container or volume)."""
    host_network = get_bool(spec, "hostNetwork", where, "spec")
    ports: list[ContainerPort] = []
    images: list[str] = []
    for key in ("initContainers", "containers"):
        for path, c in get_maps(spec, key, where, "spec"):
            image = get_str(c, "image", where, path)
            if image:
                images.append(normalized_image_name(image))
            if key == "initContainers" and not is_sidecar(c, where, path):
                continue
            for port_at, p in get_maps(c, "ports", where, path):
                host_port = get_int(p, "hostPort", where, port_at)
                if host_port == 0 and host_network:
                    host_port = get_int(p, "containerPort", where, port_at)
                if host_port > 0:
                    protocol = get_choice(p, "protocol", where, port_at, _PROTOCOLS, "TCP")
                    host_ip = get_str(p, "hostIP", where, port_at) or "0.0.0.0"
                    ports.append(ContainerPort(host_port, protocol, host_ip))
    for path, volume in get_maps(spec, "volumes", where, "spec") if spec.get("volumes") else ():
        if volume.get("image") is not None:
            reference = get_str(get_map(volume, "image", where, path), "reference", where, f"{path}.image")
            if reference:
                images.append(normalized_image_name(reference))
    return tuple(ports), tuple(images)


def taint(t: Mapping[str, Any], where: Where, at: str) -> Taint:
    key = get_str(t, "key", where, at)
    if not key:
        raise where.error("missing", join(at, "key"))
    effect = get_choice(t, "effect", where, at, TAINT_EFFECTS, "")
    return Taint(key, get_str(t, "value", where, at), effect)


class Affinity(NamedTuple):
    """``spec.affinity`` in the shape :class:`~rulesched.model.objects.Pod` stores it."""

    required_node: tuple[NodeSelectorTerm, ...] | None = None
    preferred_node: tuple[PreferredSchedulingTerm, ...] = ()
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_affinity: tuple[WeightedPodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_pod_anti_affinity: tuple[WeightedPodAffinityTerm, ...] = ()


_NO_AFFINITY = Affinity()


def affinity(spec: Mapping[str, Any], where: Where) -> Affinity:
    """``spec.affinity``: node affinity, pod affinity and pod anti-affinity."""
    raw = get_map(spec, "affinity", where, "spec")
    if not raw:
        return _NO_AFFINITY

    def build() -> Affinity:
        required_node, preferred_node = node_affinity(raw, where)
        return Affinity(
            required_node,
            preferred_node,
            *pod_affinity(raw, "podAffinity", where),
            *pod_affinity(raw, "podAntiAffinity", where),
        )

    return memoized(where, "affinity", raw, build)


def tolerations(spec: Mapping[str, Any], where: Where) -> tuple[Toleration, ...]:
    """``spec.tolerations``; an empty operator means ``Equal``."""

    def build() -> tuple[Toleration, ...]:
        return tuple(toleration(t, where, p) for p, t in get_maps(spec, "tolerations", where, "spec"))

    return memoized(where, "tolerations", spec.get("tolerations") or None, build)


def spread_constraints(spec: Mapping[str, Any], where: Where) -> tuple[TopologySpreadConstraint, ...]:
    """``spec.topologySpreadConstraints`` with the API defaults (minDomains 1, nodeAffinityPolicy
    Honor, nodeTaintsPolicy Ignore)."""
    key = "topologySpreadConstraints"

    def build() -> tuple[TopologySpreadConstraint, ...]:
        return tuple(spread_constraint(c, where, p) for p, c in get_maps(spec, key, where, "spec"))

    return memoized(where, "spread", spec.get(key) or None, build)


def taints(spec: Mapping[str, Any], where: Where) -> tuple[Taint, ...]:
    """A Node's ``spec.taints``; key and effect are required."""

    def build() -> tuple[Taint, ...]:
        return tuple(taint(t, where, p) for p, t in get_maps(spec, "taints", where, "spec"))

    return memoized(where, "taints", spec.get("taints") or None, build)
