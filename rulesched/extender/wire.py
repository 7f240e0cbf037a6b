"""kube-scheduler's extender messages (``k8s.io/kube-scheduler/extender/v1``) in and out of JSON.

Those Go types carry no JSON tags, so kube-scheduler writes Go field names (``Pod``, ``Nodes``,
``NodeNames``, ``NodeNameToVictims``, ...) and Go's decoder matches names in any letter case.
Here the envelope's keys are matched in any case too, and answers use the Go names. Pods and nodes
inside are ordinary Kubernetes JSON, decoded by :mod:`rulesched.model.decode`.

Parsing uses msgspec: the envelope is split into raw JSON slices without building objects for
what is inside them, so a full-node request's nodes stay bytes until needed, a node whose bytes
were seen before is not decoded again (:class:`NodeCache`), and a filter answer echoes the
passing nodes' original bytes instead of encoding them anew. (Measured on 1000 nodes of 7 kB:
the standard library's ``json.loads`` 59 ms, orjson 52 ms, msgspec into dicts 45 ms, msgspec
splitting into raw items 2.8 ms; echoing the items 0.2 ms against orjson's 3.7 ms.)

Every problem raises :class:`WireError`, one line naming the field, answered as 400: malformed
JSON, invalid UTF-8, nesting deeper than the decoder's recursion limit, a name the API server
would refuse. Names that go into API paths (the binding's pod, namespace and node) are checked
here as Kubernetes validates them, so a ``PodName`` like ``p?watch=1`` never reaches a URL.
Next stage: :mod:`rulesched.extender.service` evaluates the rules for what was decoded.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

import msgspec

from rulesched.errors import InputError
from rulesched.model import Node, Pod, PriorityClass
from rulesched.model.decode import decode_node, decode_pod
from rulesched.model.names import dns1123_label, dns1123_subdomain
from rulesched.model.utf8 import first_invalid_utf8
from rulesched.scheduler.reasons import Reason

MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority


class WireError(InputError):
    """A request that is not what kube-scheduler sends: ``field: problem``."""


_envelope = msgspec.json.Decoder(dict[str, msgspec.Raw])


class _NodeList(TypedDict, total=False):
    items: list[msgspec.Raw] | None


_node_list = msgspec.json.Decoder(_NodeList | None)
_NULL = msgspec.Raw(b"null")


class _Args(msgspec.Struct, forbid_unknown_fields=True):
    """ExtenderArgs as kube-scheduler writes them (Go's field names, nothing else): decoded in
    one pass; any other body goes the general, case-blind way (:func:`_fields`)."""

    Pod: msgspec.Raw = _NULL
    Nodes: msgspec.Raw = _NULL
    NodeNames: msgspec.Raw = _NULL


_args = msgspec.json.Decoder(_Args)
_names = msgspec.json.Decoder(list[str] | None)
_any = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


# What a hostile body makes the decoder raise: msgspec's own errors (from 0.23 a DecodeError for
# a string that is not UTF-8), UnicodeDecodeError for one up to 0.22, RecursionError for nesting
# past its depth limit (10 000 brackets).
_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError, UnicodeDecodeError, RecursionError)


def _fields(body: bytes, what: str) -> dict[str, msgspec.Raw]:
    """The top-level object's members by lower-cased name (Go's decoder ignores case; the last
    of two spellings wins, as there)."""
    try:
        members = _envelope.decode(body)
    except _DECODE_ERRORS as err:
        raise _wire_error(what, err, body, "the body") from None
    return {key.lower(): value for key, value in members.items()}


def _args_fields(body: bytes) -> dict[str, msgspec.Raw]:
    """ExtenderArgs' members as :func:`_fields` gives them (an absent member is null alike)."""
    try:
        args = _args.decode(body)
    except _DECODE_ERRORS:
        return _fields(body, "ExtenderArgs")  # (which says what is wrong, if anything is)
    return {"pod": args.Pod, "nodes": args.Nodes, "nodenames": args.NodeNames}


def _wire_error(field: str, err: Exception, data: msgspec.Raw | bytes, whose: str) -> WireError:
    """msgspec's "Expected `str`, got `int` - at `$[0]`" as "NodeNames[0]: expected str, got int".
    Bytes that are not UTF-8 are named by their offset in ``data`` (``whose``: "the body", or
    the field's value), found here: no msgspec release gives it (:mod:`rulesched.model.utf8`)."""
    if isinstance(err, RecursionError):
        return WireError(f"{field}: malformed JSON: nested too deeply")
    if not isinstance(err, msgspec.ValidationError):
        bad = first_invalid_utf8(data)
        if bad is not None:
            return WireError(f"{field}: malformed JSON: not UTF-8 (byte {bad} of {whose})")
    text = str(err).replace("`", "")
    text, _, path = text.partition(" - at $")
    if isinstance(err, msgspec.DecodeError) and not isinstance(err, msgspec.ValidationError):
        text = f"malformed JSON: {text}"
    return WireError(f"{field}{path}: {text[:1].lower()}{text[1:]}")


def _decode(decoder: msgspec.json.Decoder[Any], raw: msgspec.Raw | bytes, field: str) -> Any:
    try:
        return decoder.decode(raw)
    except _DECODE_ERRORS as err:
        raise _wire_error(field, err, raw, "its value") from None


def _object(raw: msgspec.Raw | None, field: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = _decode(_any, raw, field)
    if value is not None and not isinstance(value, dict):
        raise WireError(f"{field}: expected an object, got {type(value).__name__}")
    return value


def _pod(raw: msgspec.Raw | None, classes: Mapping[str, PriorityClass]) -> Pod:
    """The pod a request is about. Its DRA claims (spec.resourceClaims) are kube-scheduler's
    business here: its DynamicResources plugin filters nodes for them before asking the
    extender, and allocates them in Reserve and PreBind, before an extender's bind. So the rules
    see the pod without them, and rulesched's own refusal of such pods (rulesched run, simulate
    and test allocate nothing: rulesched.lang.evaluation.prechecks) does not apply."""
    obj = _object(raw, "Pod")
    if obj is None:
        raise WireError("Pod: missing")
    pod = decode_pod(obj, "", classes)  # errors name the pod: "Pod ns/name: spec...: ..."
    return dataclasses.replace(pod, resource_claims=()) if pod.resource_claims else pod


@dataclass(frozen=True)
class _Listed:
    """A whole node list as a request sent it: its bytes, its items (slices of those bytes) and
    their nodes."""

    raw: msgspec.Raw
    items: tuple[msgspec.Raw, ...]
    nodes: tuple[Node, ...]


class NodeCache:
    """Decoded nodes by their JSON bytes: kube-scheduler sends the same node, byte for byte,
    until it changes, and the same :class:`Node` value lets the rules' per-node caches hit.
    Whole node lists too (:meth:`listed`): a filter sends every node, a prioritize the ones
    that passed, the same list request after request while the cluster holds still, and one
    comparison of the list's bytes (0.2 ms for 1000 nodes of 7 kB) then stands for splitting
    it and looking each node up (11 ms).

    Bounded in bytes, not entries: ``max_bytes`` counts the nodes' JSON (their decoded form
    takes about 1.6 times as much again, measured on 7 kB nodes) and the lists' (at most
    ``LISTS`` of them), and the least recently used are dropped past it, lists first, so
    versions of nodes that changed since go first. The default, 128 MiB, holds 5000 nodes of up
    to 26 kB each (kube-scheduler's largest supported cluster)."""

    LISTS = 4

    def __init__(self, max_bytes: int = 128 * 2**20, on_evict: Callable[[Node], None] | None = None) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0  # the JSON bytes of the nodes and lists held
        self._nodes: OrderedDict[bytes, Node] = OrderedDict()
        self._lists: list[_Listed] = []  # most recently used last
        self._on_evict = on_evict  # told of each node let go

    def __len__(self) -> int:
        return len(self._nodes)

    def listed(self, raw: msgspec.Raw) -> tuple[tuple[msgspec.Raw, ...], tuple[Node, ...]] | None:
        """A request's ``Nodes`` member: its items (raw) and their nodes; None when null."""
        lists = self._lists
        for i, known in enumerate(lists):
            if len(known.raw) == len(raw) and known.raw == raw:  # (length first: a memcmp only for likely twins)
                lists.append(lists.pop(i))
                return known.items, known.nodes
        keep = len(raw) <= self.max_bytes // 2
        own = msgspec.Raw(bytes(raw)) if keep else raw  # (a copy to keep: the request's body is let go)
        node_list = _decode(_node_list, own, "Nodes")
        if node_list is None:
            return None
        items = tuple(node_list.get("items") or ())
        nodes = tuple(self.get(item, f"Nodes.items[{i}]") for i, item in enumerate(items))
        if keep:
            lists.append(_Listed(own, items, nodes))
            self.bytes += len(own)
            while len(lists) > self.LISTS:
                self.bytes -= len(lists.pop(0).raw)
            self._shrink()
        return items, nodes

    def get(self, raw: msgspec.Raw, field: str) -> Node:
        data = bytes(raw)
        nodes = self._nodes
        node = nodes.get(data)
        if node is not None:
            nodes.move_to_end(data)  # (0.1 us: the C OrderedDict; cachetools' LRU cost 4 us a hit)
            return node
        obj = _object(raw, field)
        if obj is None:
            raise WireError(f"{field}: null")
        node = decode_node(obj, field)
        if len(data) <= self.max_bytes:
            nodes[data] = node
            self.bytes += len(data)
            self._shrink()
        return node

    def _shrink(self) -> None:
        """Past ``max_bytes``: the least recently used lists go, then nodes."""
        lists, nodes = self._lists, self._nodes
        while self.bytes > self.max_bytes and lists:
            self.bytes -= len(lists.pop(0).raw)
        while self.bytes > self.max_bytes and nodes:
            old, gone = nodes.popitem(last=False)
            self.bytes -= len(old)
            if self._on_evict is not None:
                self._on_evict(gone)


@dataclass(frozen=True)
class ExtenderArgs:
    """Filter and prioritize requests: the pod and either node names (node-cache-capable) or
    nodes (their raw JSON, and decoded)."""

    pod: Pod
    names: list[str] | None = None
    nodes: tuple[Node, ...] | None = None
    raw_nodes: tuple[msgspec.Raw, ...] = ()
    raw_names: bytes = b""  # NodeNames as sent: equal bytes, equal names (a key for lookups)


def decode_args(body: bytes, nodes: NodeCache, classes: Mapping[str, PriorityClass]) -> ExtenderArgs:
    fields = _args_fields(body)
    pod = _pod(fields.get("pod"), classes)
    raw_list = fields.get("nodes")
    listed = nodes.listed(raw_list) if raw_list is not None else None
    names_raw = fields.get("nodenames")
    names = _decode(_names, names_raw, "NodeNames") if names_raw is not None else None
    if listed is not None:
        items, decoded = listed
        return ExtenderArgs(pod, names, decoded, items)
    if names is None:
        raise WireError("ExtenderArgs: neither Nodes nor NodeNames given")
    return ExtenderArgs(pod, names, raw_names=bytes(names_raw or b""))


@dataclass(frozen=True)
class Victims:
    """One node's victims as proposed: full pods (``NodeNameToVictims``) or UIDs only
    (``NodeNameToMetaVictims``, node-cache-capable)."""

    pods: tuple[Pod, ...] | None
    uids: tuple[str, ...]
    pdb_violations: int


@dataclass(frozen=True)
class PreemptionArgs:
    pod: Pod
    victims: Mapping[str, Victims]  # node name -> proposal


def decode_preemption_args(body: bytes, classes: Mapping[str, PriorityClass]) -> PreemptionArgs:
    fields = _fields(body, "ExtenderPreemptionArgs")
    pod = _pod(fields.get("pod"), classes)
    proposals: dict[str, Victims] = {}
    for key, meta in (("nodenametovictims", False), ("nodenametometavictims", True)):
        raw = fields.get(key)
        by_node = _object(raw, "NodeNameTo" + ("MetaVictims" if meta else "Victims"))
        if not by_node or (proposals and meta):
            continue  # kube-scheduler sends one of the two; full pods win if both came
        for node, victims in by_node.items():
            field = f"NodeNameTo{'Meta' if meta else ''}Victims[{node}]"
            proposals[node] = _victims(victims, field, meta, classes)
    return PreemptionArgs(pod, proposals)


def _victims(value: Any, field: str, meta: bool, classes: Mapping[str, PriorityClass]) -> Victims:
    if not isinstance(value, dict):
        raise WireError(f"{field}: expected an object")
    members = {str(k).lower(): v for k, v in value.items()}
    violations = members.get("numpdbviolations") or 0
    if not isinstance(violations, int) or isinstance(violations, bool):
        raise WireError(f"{field}.NumPDBViolations: expected an integer")
    listed = members.get("pods") or []
    if not isinstance(listed, list):
        raise WireError(f"{field}.Pods: expected an array")
    if meta:
        uids = []
        for i, item in enumerate(listed):
            uid = {str(k).lower(): v for k, v in item.items()}.get("uid") if isinstance(item, dict) else None
            if not isinstance(uid, str):
                raise WireError(f"{field}.Pods[{i}].UID: expected a string")
            uids.append(uid)
        return Victims(None, tuple(uids), violations)
    pods = [decode_pod(item, f"{field}.Pods[{i}]", classes) for i, item in enumerate(listed)]
    return Victims(tuple(pods), tuple(p.uid for p in pods), violations)


@dataclass(frozen=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


MAX_UID = 128  # UIDs are 36-character UUIDs; anything much longer is not one


def _check_name(field: str, value: str, what: str, label: bool = False) -> str:
    """apimachinery's IsDNS1123Subdomain (pod and node names) or IsDNS1123Label (namespaces)."""
    problem = dns1123_label(value) if label else dns1123_subdomain(value)
    if problem:
        raise WireError(f"{field}: not a valid {what}: {problem}")
    return value


def decode_binding_args(body: bytes) -> BindingArgs:
    fields = _fields(body, "ExtenderBindingArgs")
    values = []
    for name in ("PodName", "PodNamespace", "PodUID", "Node"):
        raw = fields.get(name.lower())
        value = _decode(_any, raw, name) if raw is not None else ""
        if not isinstance(value, str):
            raise WireError(f"{name}: expected a string")
        values.append(value)
    if not values[0] or not values[3]:
        raise WireError("ExtenderBindingArgs: PodName and Node are required")
    name, namespace, uid, node = values
    if len(uid) > MAX_UID:
        raise WireError(f"PodUID: longer than {MAX_UID} characters")
    return BindingArgs(
        _check_name("PodName", name, "pod name"),
        _check_name("PodNamespace", namespace or "default", "namespace name", label=True),
        uid,
        _check_name("Node", node, "node name"),
    )


# -- answers ---------------------------------------------------------------------------------


def encode(answer: Any) -> bytes:
    return _encoder.encode(answer)


def filter_result(
    passing: Sequence[str] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    raw_nodes: Sequence[msgspec.Raw] | None = None,
    error: str = "",
    codes: Sequence[Reason] = (),
) -> bytes:
    """ExtenderFilterResult: ``NodeNames`` when node names came, ``Nodes`` (the nodes' bytes as
    they came) when nodes did. ``ReasonCodes``: the failed nodes' reasons as codes
    (rulesched.scheduler.reasons), counted over them; kube-scheduler decodes the answer with
    Go's encoding/json (extender.go's send), which skips a field its ExtenderFilterResult does
    not have, so the wire format it reads is unchanged."""
    answer: dict[str, Any] = {
        "Nodes": None if raw_nodes is None else {"metadata": {}, "items": list(raw_nodes)},
        "NodeNames": None if raw_nodes is not None else (None if passing is None else list(passing)),
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": error,
    }
    if codes:
        answer["ReasonCodes"] = [c.summary_json() for c in codes]
    return encode(answer)


class HostPriority(msgspec.Struct):
    Host: str
    Score: int


def host_priorities(hosts: Sequence[str], scores: Sequence[int]) -> bytes:
    """HostPriorityList."""
    return encode(list(map(HostPriority, hosts, scores)))


def preemption_result(victims: Mapping[str, tuple[Sequence[str], int]]) -> bytes:
    """ExtenderPreemptionResult: kube-scheduler reads only ``NodeNameToMetaVictims`` (UIDs it
    looks up on its own node infos), whichever mode it runs in."""
    return encode(
        {
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
                for node, (uids, violations) in victims.items()
            }
        }
    )


def binding_result(error: str = "") -> bytes:
    return encode({"Error": error})
