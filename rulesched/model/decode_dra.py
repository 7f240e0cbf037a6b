"""DRA objects (``resource.k8s.io/v1``) as ``kubectl get -o yaml`` prints them, turned into the
values of :mod:`rulesched.model.dra`; and a pod's ``spec.resourceClaims``.

Same conventions as :mod:`rulesched.model.decode`: every field read is type-checked, the API
server's defaults are applied (``allocationMode: ExactCount``, ``count: 1``, a taint's effect),
what its validation refuses is refused here too (a slice naming no node selection, a request
that is neither ``exactly`` nor ``firstAvailable``, more subrequests than 8), and every problem
is one :class:`~rulesched.errors.ObjectError` line naming the file, the object and the field.
CEL expressions are kept as text here; they are compiled, and their errors located, by
:mod:`rulesched.semantics.cel`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rulesched.model.dra import (
    ALL,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX,
    NO_AMOUNTS,
    NO_ATTRIBUTES,
    NO_CAPACITY,
    Allocation,
    AllocationConfig,
    Attribute,
    Capacity,
    ClaimConfig,
    ClaimSpec,
    Consumer,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceResult,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactRequest,
    PodClaim,
    RequestPolicy,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from rulesched.model.fields import (
    Where,
    describe,
    get_bool,
    get_choice,
    get_int,
    get_list,
    get_map,
    get_maps,
    get_opt_int,
    get_str,
    get_str_list,
    get_str_map,
    get_time,
    join,
    join_key,
    object_metadata,
    quantity,
)
from rulesched.model.names import shown
from rulesched.model.objects import NodeSelectorTerm
from rulesched.model.parts import node_selector_terms
from rulesched.model.semver import parse_semver

_MODES = (EXACT_COUNT, ALL)
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_TOLERATION_EFFECTS = ("", "NoSchedule", "NoExecute", "None")
_OPERATORS = ("Equal", "Exists")
_EXPECTED = {"int": "an integer", "bool": "true or false", "string": "a string", "version": "a string"}
_ATTRIBUTE_KINDS = (
    ("int", "int"),
    ("bool", "bool"),
    ("string", "string"),
    ("version", "version"),
    ("ints", "int"),
    ("bools", "bool"),
    ("strings", "string"),
    ("versions", "version"),
)


def _names(where: Where, obj: Mapping[str, Any], key: str, at: str) -> str:
    value = get_str(obj, key, where, at)
    if not value:
        raise where.error("missing", join(at, key))
    return value


def _amounts(d: Mapping[str, Any], key: str, where: Where, at: str, value_key: str | None = None) -> Mapping[str, int]:
    """A map of quantities (``{memory: 40Gi}``), or of ``{value: 40Gi}`` entries (``value_key``)."""
    amounts = get_map(d, key, where, at)
    if not amounts:
        return NO_AMOUNTS
    out: dict[str, int] = {}
    path = join(at, key)
    for name, raw in amounts.items():
        entry_at = join_key(path, name)
        if value_key is not None:
            if type(raw) is not dict:
                raise where.error(f"expected a mapping, got {describe(raw)}", entry_at)
            if raw.get(value_key) is None:
                raise where.error("missing", join(entry_at, value_key))
            raw = raw[value_key]
            entry_at = join(entry_at, value_key)
        out[name] = quantity(raw, where, entry_at)
    return MappingProxyType(out)


def _attribute(raw: object, where: Where, at: str) -> Attribute:
    """A DeviceAttribute: exactly one of int, bool, string, version (or, DRAListTypeAttributes,
    ints, bools, strings, versions)."""
    if type(raw) is not dict:
        raise where.error(f"expected a mapping, got {describe(raw)}", at)
    found = [(key, kind) for key, kind in _ATTRIBUTE_KINDS if raw.get(key) is not None]
    if len(found) != 1:
        keys = ", ".join(k for k, _ in _ATTRIBUTE_KINDS[:4])
        problem = f"exactly one of {keys} must be set" if not found else f"{found[0][0]} and {found[1][0]} are both set"
        raise where.error(problem, at)
    key, kind = found[0]
    value = raw[key]
    items = value if key.endswith("s") else [value]
    if type(items) is not list:
        raise where.error(f"expected a list, got {describe(items)}", join(at, key))
    for i, item in enumerate(items):
        ok = {"int": type(item) is int, "bool": type(item) is bool}.get(kind, type(item) is str)
        if not ok:
            item_at = join(at, key) if not key.endswith("s") else f"{join(at, key)}[{i}]"
            raise where.error(f"expected {_EXPECTED[kind]}, got {describe(item)}", item_at)
        if kind == "version" and parse_semver(item) is None:
            item_at = join(at, key) if not key.endswith("s") else f"{join(at, key)}[{i}]"
            raise where.error(f"{shown(item)} is not a semantic version (e.g. 1.2.3)", item_at)
    return Attribute(key, tuple(items) if key.endswith("s") else value)


def _request_policy(raw: Mapping[str, Any], where: Where, at: str) -> RequestPolicy:
    default = raw.get("default")
    valid_range = get_map(raw, "validRange", where, at)
    values = get_list(raw, "validValues", where, at)
    if valid_range and values:
        raise where.error("validRange and validValues are both set", at)
    range_at = join(at, "validRange")

    def opt(key: str) -> int | None:
        v = valid_range.get(key)
        return None if v is None else quantity(v, where, join(range_at, key))

    return RequestPolicy(
        default=None if default is None else quantity(default, where, join(at, "default")),
        valid_values=tuple(quantity(v, where, f"{join(at, 'validValues')}[{i}]") for i, v in enumerate(values)),
        min=opt("min"),
        max=opt("max"),
        step=opt("step"),
    )


def _capacity(device: Mapping[str, Any], where: Where, at: str) -> Mapping[str, Capacity]:
    raw = get_map(device, "capacity", where, at)
    if not raw:
        return NO_CAPACITY
    out: dict[str, Capacity] = {}
    path = join(at, "capacity")
    for name, entry in raw.items():
        entry_at = join_key(path, name)
        if type(entry) is not dict:
            raise where.error(f"expected a mapping, got {describe(entry)}", entry_at)
        if entry.get("value") is None:
            raise where.error("missing", join(entry_at, "value"))
        policy = get_map(entry, "requestPolicy", where, entry_at)
        out[name] = Capacity(
            quantity(entry["value"], where, join(entry_at, "value")),
            _request_policy(policy, where, join(entry_at, "requestPolicy")) if policy else None,
        )
    return MappingProxyType(out)


def device_taints(d: Mapping[str, Any], where: Where, at: str) -> tuple[DeviceTaint, ...]:
    out = []
    for path, t in get_maps(d, "taints", where, at):
        out.append(
            DeviceTaint(
                _names(where, t, "key", path),
                get_str(t, "value", where, path),
                get_choice(t, "effect", where, path, _TAINT_EFFECTS, "NoSchedule"),
            )
        )
    return tuple(out)


def device_tolerations(d: Mapping[str, Any], where: Where, at: str) -> tuple[DeviceToleration, ...]:
    out = []
    for path, t in get_maps(d, "tolerations", where, at):
        operator = get_choice(t, "operator", where, path, _OPERATORS, "Equal")
        key = get_str(t, "key", where, path)
        if operator == "Equal" and not key:
            raise where.error("missing (operator Equal needs a key)", join(path, "key"))
        out.append(
            DeviceToleration(
                key,
                operator,
                get_str(t, "value", where, path),
                get_choice(t, "effect", where, path, _TOLERATION_EFFECTS, ""),
                get_opt_int(t, "tolerationSeconds", where, path),
            )
        )
    return tuple(out)


def _counters(raw: Mapping[str, Any], key: str, where: Where, at: str) -> Mapping[str, int]:
    return _amounts(raw, key, where, at, value_key="value")


def _node_selection(
    raw: Mapping[str, Any], where: Where, at: str, per_device: bool
) -> tuple[str, tuple[NodeSelectorTerm, ...] | None, bool, bool]:
    """(nodeName, nodeSelector terms, allNodes, perDeviceNodeSelection): exactly one set (a
    slice holding only shared counters may set none)."""
    node_name = get_str(raw, "nodeName", where, at)
    selector = None
    if raw.get("nodeSelector") is not None:
        selector = node_selector_terms(get_map(raw, "nodeSelector", where, at), where, join(at, "nodeSelector"))
        if len(selector) != 1:
            raise where.error(
                f"must have exactly one term, got {len(selector)}", join(at, "nodeSelector.nodeSelectorTerms")
            )
    all_nodes = get_bool(raw, "allNodes", where, at)
    per = get_bool(raw, "perDeviceNodeSelection", where, at) if per_device else False
    chosen = [
        k
        for k, v in (
            ("nodeName", node_name),
            ("nodeSelector", selector),
            ("allNodes", all_nodes),
            ("perDeviceNodeSelection", per),
        )
        if v
    ]
    if len(chosen) > 1:
        raise where.error(f"{' and '.join(chosen)} are both set (exactly one may be)", at)
    return node_name, selector, all_nodes, per


def _device(raw: Mapping[str, Any], where: Where, at: str, per_device: bool) -> Device:
    name = _names(where, raw, "name", at)
    attributes = get_map(raw, "attributes", where, at)
    attrs: Mapping[str, Attribute] = NO_ATTRIBUTES
    if attributes:
        path = join(at, "attributes")
        attrs = MappingProxyType({k: _attribute(v, where, join_key(path, k)) for k, v in attributes.items()})
    consumes = []
    groups = False
    for path, c in get_maps(raw, "consumesCounters", where, at):
        consumes.append(CounterConsumption(_names(where, c, "counterSet", path), _counters(c, "counters", where, path)))
        groups = groups or bool(get_list(c, "compatibilityGroups", where, path))
    node_name, selector, all_nodes, _ = _node_selection(raw, where, at, False)
    if per_device and not (node_name or selector is not None or all_nodes):
        raise where.error("missing (perDeviceNodeSelection: each device sets nodeName, nodeSelector or allNodes)", at)
    if not per_device and (node_name or selector is not None or all_nodes):
        raise where.error("node selection on a device needs the slice's perDeviceNodeSelection", at)
    multiple = raw.get("allowMultipleAllocations")
    return Device(
        name=name,
        attributes=attrs,
        capacity=_capacity(raw, where, at),
        consumes_counters=tuple(consumes),
        node_name=node_name,
        node_selector=selector,
        all_nodes=all_nodes,
        taints=device_taints(raw, where, at),
        binds_to_node=get_bool(raw, "bindsToNode", where, at),
        binding_conditions=get_str_list(raw, "bindingConditions", where, at),
        binding_failure_conditions=get_str_list(raw, "bindingFailureConditions", where, at),
        allow_multiple_allocations=None if multiple is None else get_bool(raw, "allowMultipleAllocations", where, at),
        compatibility_groups=groups,
    )


def decode_resource_slice(obj: object, source: str = "", *, names: bool = True) -> ResourceSlice:
    """A ResourceSlice: its pool, node selection, devices and shared counter sets."""
    obj, _, name, _, where = object_metadata(obj, "ResourceSlice", source, False, names=names)
    spec = get_map(obj, "spec", where, "")
    pool = get_map(spec, "pool", where, "spec")
    node_name, selector, all_nodes, per_device = _node_selection(spec, where, "spec", True)
    counter_sets = tuple(
        CounterSet(_names(where, c, "name", path), _counters(c, "counters", where, path))
        for path, c in get_maps(spec, "sharedCounters", where, "spec")
    )
    if not (node_name or selector is not None or all_nodes or per_device or counter_sets):
        raise where.error("missing (one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection)", "spec")
    count = get_int(pool, "resourceSliceCount", where, "spec.pool", 0)
    if count < 1:
        raise where.error(f"must be at least 1, got {count}", "spec.pool.resourceSliceCount")
    devices = tuple(_device(d, where, path, per_device) for path, d in get_maps(spec, "devices", where, "spec"))
    return ResourceSlice(
        name=name,
        driver=_names(where, spec, "driver", "spec"),
        pool=_names(where, pool, "name", "spec.pool"),
        generation=get_int(pool, "generation", where, "spec.pool"),
        slice_count=count,
        node_name=node_name,
        node_selector=selector,
        all_nodes=all_nodes,
        per_device_node_selection=per_device,
        devices=devices,
        shared_counters=counter_sets,
        skip_node_operations=get_str_list(spec, "skipNodeOperations", where, "spec"),
    )


def _selectors(d: Mapping[str, Any], where: Where, at: str) -> tuple[str, ...]:
    out = []
    for path, s in get_maps(d, "selectors", where, at):
        cel = get_map(s, "cel", where, path)
        expression = get_str(cel, "expression", where, join(path, "cel"))
        if not expression:
            raise where.error("missing (a selector has a cel.expression)", join(path, "cel.expression"))
        out.append(expression)
    return tuple(out)


def _exact(raw: Mapping[str, Any], where: Where, at: str, sub: bool) -> ExactRequest:
    mode = get_choice(raw, "allocationMode", where, at, _MODES, EXACT_COUNT)
    count = get_opt_int(raw, "count", where, at)
    if mode == ALL:
        count = None  # (ignored with All; Go clients write the 1 they default it to)
    if count is not None and count < 1:
        raise where.error(f"must be at least 1, got {count}", join(at, "count"))
    capacity = get_map(raw, "capacity", where, at)
    admin = raw.get("adminAccess")
    if sub and admin is not None:
        raise where.error("not allowed in a subrequest", join(at, "adminAccess"))
    return ExactRequest(
        device_class_name=_names(where, raw, "deviceClassName", at),
        selectors=_selectors(raw, where, at),
        allocation_mode=mode,
        count=1 if count is None else count,
        admin_access=None if admin is None else get_bool(raw, "adminAccess", where, at),
        tolerations=device_tolerations(raw, where, at),
        capacity=_amounts(capacity, "requests", where, join(at, "capacity")) if capacity else None,
        derived_attributes=bool(get_list(raw, "derivedAttributes", where, at)),
    )


def claim_spec(spec: Mapping[str, Any], where: Where, at: str) -> ClaimSpec:
    """A ResourceClaimSpec: its device requests, constraints and configurations."""
    devices = get_map(spec, "devices", where, at)
    dat = join(at, "devices")
    requests = []
    names: set[str] = set()
    for path, r in get_maps(devices, "requests", where, dat):
        name = _names(where, r, "name", path)
        if name in names:
            raise where.error(f"{shown(name)} is named twice", join(path, "name"))
        names.add(name)
        exactly = get_map(r, "exactly", where, path)
        subs = get_maps(r, "firstAvailable", where, path)
        if bool(exactly) == bool(subs):
            raise where.error("exactly one of exactly and firstAvailable must be set", path)
        if len(subs) > FIRST_AVAILABLE_MAX:
            raise where.error(f"{len(subs)} subrequests: at most {FIRST_AVAILABLE_MAX}", join(path, "firstAvailable"))
        first = []
        for sub_path, s in subs:
            first.append((_names(where, s, "name", sub_path), _exact(s, where, sub_path, True)))
        requests.append(
            DeviceRequest(name, _exact(exactly, where, join(path, "exactly"), False) if exactly else None, tuple(first))
        )
    constraints = []
    for path, c in get_maps(devices, "constraints", where, dat):
        match = get_str(c, "matchAttribute", where, path)
        distinct = get_str(c, "distinctAttribute", where, path)
        if bool(match) == bool(distinct):
            raise where.error("exactly one of matchAttribute and distinctAttribute must be set", path)
        constraints.append(DeviceConstraint(get_str_list(c, "requests", where, path), match, distinct))
    configs = tuple(
        ClaimConfig(get_str_list(c, "requests", where, path), MappingProxyType(dict(get_map(c, "opaque", where, path))))
        for path, c in get_maps(devices, "config", where, dat)
    )
    return ClaimSpec(tuple(requests), tuple(constraints), configs)


def _result(raw: Mapping[str, Any], where: Where, at: str) -> DeviceResult:
    consumed = get_map(raw, "consumedCapacity", where, at)
    return DeviceResult(
        request=_names(where, raw, "request", at),
        driver=_names(where, raw, "driver", at),
        pool=_names(where, raw, "pool", at),
        device=_names(where, raw, "device", at),
        admin_access=None if raw.get("adminAccess") is None else get_bool(raw, "adminAccess", where, at),
        tolerations=device_tolerations(raw, where, at),
        share_id=get_str(raw, "shareID", where, at),
        consumed_capacity=_amounts(raw, "consumedCapacity", where, at) if consumed else None,
        binding_conditions=get_str_list(raw, "bindingConditions", where, at),
        binding_failure_conditions=get_str_list(raw, "bindingFailureConditions", where, at),
    )


def allocation(raw: Mapping[str, Any], where: Where, at: str) -> Allocation:
    devices = get_map(raw, "devices", where, at)
    dat = join(at, "devices")
    selector = None
    if raw.get("nodeSelector") is not None:
        selector = node_selector_terms(get_map(raw, "nodeSelector", where, at), where, join(at, "nodeSelector"))
    return Allocation(
        devices=tuple(_result(r, where, path) for path, r in get_maps(devices, "results", where, dat)),
        config=tuple(
            AllocationConfig(
                get_str(c, "source", where, path),
                get_str_list(c, "requests", where, path),
                MappingProxyType(dict(get_map(c, "opaque", where, path))),
            )
            for path, c in get_maps(devices, "config", where, dat)
        ),
        node_selector=selector,
    )


def _owner(meta: Mapping[str, Any], where: Where) -> tuple[str, str, str] | None:
    for path, ref in get_maps(meta, "ownerReferences", where, "metadata"):
        if get_bool(ref, "controller", where, path):
            return (
                get_str(ref, "kind", where, path),
                get_str(ref, "name", where, path),
                get_str(ref, "uid", where, path),
            )
    return None


def decode_resource_claim(obj: object, source: str = "", *, names: bool = True) -> ResourceClaim:
    """A ResourceClaim with its allocation and the consumers it is reserved for."""
    obj, meta, name, namespace, where = object_metadata(obj, "ResourceClaim", source, True, names=names)
    status = get_map(obj, "status", where, "")
    alloc = get_map(status, "allocation", where, "status")
    return ResourceClaim(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", where, "metadata"),
        resource_version=get_str(meta, "resourceVersion", where, "metadata"),
        annotations=get_str_map(meta, "annotations", where, "metadata"),
        labels=get_str_map(meta, "labels", where, "metadata"),
        owner=_owner(meta, where),
        finalizers=get_str_list(meta, "finalizers", where, "metadata"),
        spec=claim_spec(get_map(obj, "spec", where, ""), where, "spec"),
        allocation=allocation(alloc, where, "status.allocation") if status.get("allocation") is not None else None,
        reserved_for=tuple(
            Consumer(
                _names(where, r, "resource", path),
                _names(where, r, "name", path),
                _names(where, r, "uid", path),
                get_str(r, "apiGroup", where, path),
            )
            for path, r in get_maps(status, "reservedFor", where, "status")
        ),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def decode_resource_claim_template(obj: object, source: str = "", *, names: bool = True) -> ResourceClaimTemplate:
    """A ResourceClaimTemplate: the metadata and spec its claims are made with."""
    obj, _, name, namespace, where = object_metadata(obj, "ResourceClaimTemplate", source, True, names=names)
    spec = get_map(obj, "spec", where, "")
    meta = get_map(spec, "metadata", where, "spec")
    return ResourceClaimTemplate(
        name=name,
        namespace=namespace,
        labels=get_str_map(meta, "labels", where, "spec.metadata"),
        annotations=get_str_map(meta, "annotations", where, "spec.metadata"),
        spec=claim_spec(get_map(spec, "spec", where, "spec"), where, "spec.spec"),
    )


def decode_device_class(obj: object, source: str = "", *, names: bool = True) -> DeviceClass:
    """A DeviceClass: its selectors, configuration and extended resource name."""
    obj, meta, name, _, where = object_metadata(obj, "DeviceClass", source, False, names=names)
    spec = get_map(obj, "spec", where, "")
    return DeviceClass(
        name=name,
        selectors=_selectors(spec, where, "spec"),
        config=tuple(
            MappingProxyType(dict(get_map(c, "opaque", where, path)))
            for path, c in get_maps(spec, "config", where, "spec")
        ),
        extended_resource_name=get_str(spec, "extendedResourceName", where, "spec"),
        created=get_time(meta, "creationTimestamp", where, "metadata"),
    )


def decode_device_taint_rule(obj: object, source: str = "", *, names: bool = True) -> DeviceTaintRule:
    """A DeviceTaintRule: its device selector (driver, pool, device) and its taint (key and
    effect required, as the API server's validation requires them)."""
    obj, _, name, _, where = object_metadata(obj, "DeviceTaintRule", source, False, names=names)
    spec = get_map(obj, "spec", where, "")
    raw = spec.get("taint")
    if not isinstance(raw, Mapping):
        raise where.error("is required (the taint the rule applies)", "spec.taint")
    if not raw.get("effect"):
        raise where.error("is required (NoSchedule, NoExecute or None)", "spec.taint.effect")
    taint = DeviceTaint(
        _names(where, raw, "key", "spec.taint"),
        get_str(raw, "value", where, "spec.taint"),
        get_choice(raw, "effect", where, "spec.taint", _TAINT_EFFECTS, "NoSchedule"),
    )
    selector = spec.get("deviceSelector")
    if selector is None:
        return DeviceTaintRule(name, taint, selects=False)
    picked = get_map(spec, "deviceSelector", where, "spec")
    return DeviceTaintRule(
        name,
        taint,
        driver=_optional_str(picked, "driver", where),
        pool=_optional_str(picked, "pool", where),
        device=_optional_str(picked, "device", where),
    )


def _optional_str(d: Mapping[str, Any], key: str, where: Where) -> str | None:
    return None if d.get(key) is None else get_str(d, key, where, "spec.deviceSelector")


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any], where: Where) -> tuple[PodClaim, ...]:
    """spec.resourceClaims, each with the claim made from its template (status.resourceClaimStatuses)."""
    generated: dict[str, str | None] = {}
    for path, s in get_maps(status, "resourceClaimStatuses", where, "status"):
        name = _names(where, s, "name", path)
        claim = s.get("resourceClaimName")
        generated[name] = None if claim is None else get_str(s, "resourceClaimName", where, path)
    out = []
    seen: set[str] = set()
    for path, c in get_maps(spec, "resourceClaims", where, "spec"):
        name = _names(where, c, "name", path)
        if name in seen:
            raise where.error(f"{shown(name)} is named twice", join(path, "name"))
        seen.add(name)
        claim_name = get_str(c, "resourceClaimName", where, path)
        template = get_str(c, "resourceClaimTemplateName", where, path)
        if bool(claim_name) == bool(template):
            raise where.error("exactly one of resourceClaimName and resourceClaimTemplateName must be set", path)
        out.append(PodClaim(name, claim_name, template, generated.get(name) if template else None))
    return tuple(out)
