"""Why a pod does not fit, for programs: a closed set of reason codes and their parts.

kube-scheduler's statuses carry a code (``Unschedulable``, ``UnschedulableAndUnresolvable``) and
free text (``Insufficient cpu``, ``node(s) had untolerated taint {gpu: true}``); scripts that act
on a pending pod parse that text (k/k #138991 asks for codes instead). Here every failure a filter
reports is also a :class:`Reason`: one :class:`ReasonCode` from a closed set, the parts the code
has (the resource, the taint or topology key and value, the shortfall as a number with its unit),
the rule that reported it and kube-scheduler's plugin where the rule stands for one, and whether
preemption could help, beside the message as written.

A reason's code is read from the message: the default rules give upstream's own reason texts
(pkg/scheduler/framework/plugins/*/ ``ErrReason...`` at v1.37.2), whichever rule reports them, so
a rule of one's own that says ``Insufficient example.com/foo`` is an InsufficientResource too;
any other text of a rule is :attr:`ReasonCode.RULE_REJECTED`, naming the rule. Codes of a pod or
a group as a whole (gated, waiting for its group, a gang short of its minimum) are in the same
set: :func:`pod_reason`. The table of codes is in docs/explain-and-audit.md ("Reason codes") and
:data:`CODES` is what it documents (a test holds the two together).

Every face reports them: ``explain --output json``, ``simulate --explain``, the extender's filter
answer (a field kube-scheduler ignores), the FailedScheduling event's annotation and
``rulesched_unschedulable_reasons_total``'s labels (code and rule: both from closed sets, the
resource name never: pods can name any extended resource).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache
from typing import Any

from rulesched.lang import quantity_text
from rulesched.model import Pod


class ReasonCode(StrEnum):
    """The closed set of reason codes. Node codes: one filter failing one node; pod codes: the
    pod or its group as a whole (no node was the question)."""

    # --- a node's (a filter's status there)
    NODE_UNSCHEDULABLE = "NodeUnschedulable"
    NODE_NAME_MISMATCH = "NodeNameMismatch"
    TAINT_NOT_TOLERATED = "TaintNotTolerated"
    NODE_AFFINITY_MISMATCH = "NodeAffinityMismatch"
    HOST_PORT_CONFLICT = "HostPortConflict"
    TOO_MANY_PODS = "TooManyPods"
    INSUFFICIENT_RESOURCE = "InsufficientResource"
    VOLUME_IN_USE = "VolumeInUse"
    VOLUME_LIMIT_EXCEEDED = "VolumeLimitExceeded"
    VOLUME_BINDING_CONFLICT = "VolumeBindingConflict"
    VOLUME_NOT_FOUND = "VolumeNotFound"
    VOLUME_ZONE_CONFLICT = "VolumeZoneConflict"
    TOPOLOGY_SPREAD_SKEW = "TopologySpreadSkew"
    TOPOLOGY_LABEL_MISSING = "TopologyLabelMissing"
    POD_AFFINITY_MISMATCH = "PodAffinityMismatch"
    POD_ANTI_AFFINITY_CONFLICT = "PodAntiAffinityConflict"
    EXISTING_POD_ANTI_AFFINITY = "ExistingPodAntiAffinity"
    NODE_FEATURE_MISSING = "NodeFeatureMissing"
    GROUP_DOMAIN_MISMATCH = "GroupDomainMismatch"
    DEVICE_CLAIM_UNSATISFIED = "DeviceClaimUnsatisfied"
    RULE_REJECTED = "RuleRejected"
    # --- a pod's or a group's (before or beside any node)
    NO_NODES = "NoNodes"
    SCHEDULING_GATED = "SchedulingGated"
    POD_TERMINATING = "PodTerminating"
    GROUP_NOT_FOUND = "GroupNotFound"
    GROUP_TOO_FEW_MEMBERS = "GroupTooFewMembers"
    GROUP_MIN_COUNT_UNMET = "GroupMinCountUnmet"
    GROUP_NO_PLACEMENT = "GroupNoPlacement"
    GROUP_INVALID = "GroupInvalid"
    CYCLE_DEADLINE_EXCEEDED = "CycleDeadlineExceeded"


C = ReasonCode

# kube-scheduler's in-tree Filter and PreFilter plugins (pkg/scheduler/framework/plugins/names at
# v1.37.2): a rule of one of these names stands for that plugin (the default rules' filters do).
PLUGINS = frozenset(
    {
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeDeclaredFeatures",
        "DynamicResources",
        "GangScheduling",
        "TopologyPlacement",
        "SchedulingGates",
    }
)


@dataclass(frozen=True)
class CodeInfo:
    """One row of the reason-code table: the plugin whose reasons it stands for, the parts its
    reasons carry, whether preemption can help, and upstream's message."""

    code: ReasonCode
    plugin: str
    parts: str
    unresolvable: str  # "always", "never", or when ("when a request exceeds the node's allocatable")
    message: str


CODES: tuple[CodeInfo, ...] = (
    CodeInfo(C.NODE_UNSCHEDULABLE, "NodeUnschedulable", "", "always", "node(s) were unschedulable"),
    CodeInfo(C.NODE_NAME_MISMATCH, "NodeName", "", "always", "node(s) didn't match the requested node name"),
    CodeInfo(
        C.TAINT_NOT_TOLERATED,
        "TaintToleration",
        "key, value (the taint)",
        "always",
        "node(s) had untolerated taint {K: V}",
    ),
    CodeInfo(
        C.NODE_AFFINITY_MISMATCH, "NodeAffinity", "", "always", "node(s) didn't match Pod's node affinity/selector"
    ),
    CodeInfo(
        C.HOST_PORT_CONFLICT, "NodePorts", "", "never", "node(s) didn't have free ports for the requested pod ports"
    ),
    CodeInfo(C.TOO_MANY_PODS, "NodeResourcesFit", "resource pods, shortfall 1 pods", "never", "Too many pods"),
    CodeInfo(
        C.INSUFFICIENT_RESOURCE,
        "NodeResourcesFit",
        "resource, shortfall (cores, bytes or units), quantity",
        "when the request exceeds the node's allocatable",
        "Insufficient R",
    ),
    CodeInfo(
        C.VOLUME_IN_USE,
        "VolumeRestrictions",
        "",
        "never",
        "node(s) had no available disk; ReadWriteOncePod claim in use",
    ),
    CodeInfo(C.VOLUME_LIMIT_EXCEEDED, "NodeVolumeLimits", "", "never", "node(s) exceed max volume count"),
    CodeInfo(
        C.VOLUME_BINDING_CONFLICT,
        "VolumeBinding",
        "",
        "always",
        "node(s) didn't find available persistent volumes to bind; had volume node affinity conflict; "
        "did not have enough free storage",
    ),
    CodeInfo(
        C.VOLUME_NOT_FOUND, "VolumeBinding", "", "always", 'persistentvolumeclaim "N" not found; ... non-existent pv(s)'
    ),
    CodeInfo(C.VOLUME_ZONE_CONFLICT, "VolumeZone", "", "always", "node(s) had no available volume zone"),
    CodeInfo(
        C.TOPOLOGY_SPREAD_SKEW, "PodTopologySpread", "", "never", "node(s) didn't match pod topology spread constraints"
    ),
    CodeInfo(
        C.TOPOLOGY_LABEL_MISSING,
        "PodTopologySpread",
        "",
        "always",
        "node(s) didn't match pod topology spread constraints (missing required label)",
    ),
    CodeInfo(C.POD_AFFINITY_MISMATCH, "InterPodAffinity", "", "always", "node(s) didn't match pod affinity rules"),
    CodeInfo(
        C.POD_ANTI_AFFINITY_CONFLICT, "InterPodAffinity", "", "never", "node(s) didn't match pod anti-affinity rules"
    ),
    CodeInfo(
        C.EXISTING_POD_ANTI_AFFINITY,
        "InterPodAffinity",
        "",
        "never",
        "node(s) didn't satisfy existing pods anti-affinity rules",
    ),
    CodeInfo(
        C.NODE_FEATURE_MISSING, "NodeDeclaredFeatures", "", "always", "node(s) didn't match Pod's required features"
    ),
    CodeInfo(
        C.GROUP_DOMAIN_MISMATCH,
        "TopologyPlacement",
        "",
        "always",
        "node(s) didn't match the pod group's topology domain",
    ),
    CodeInfo(
        C.DEVICE_CLAIM_UNSATISFIED,
        "DynamicResources",
        "",
        "as the plugin reports it",
        "cannot allocate all claims; resourceclaim not available on the node; ...",
    ),
    CodeInfo(
        C.RULE_REJECTED, "", "rule (a policy's own)", "as the rule's unresolvable clause says", "the rule's else text"
    ),
    CodeInfo(C.NO_NODES, "", "", "always", "no nodes available to schedule pods"),
    CodeInfo(
        C.SCHEDULING_GATED, "SchedulingGates", "", "always", "Scheduling is blocked due to non-empty scheduling gates"
    ),
    CodeInfo(C.POD_TERMINATING, "", "", "always", "skip schedule deleting pod: NS/NAME"),
    CodeInfo(
        C.GROUP_NOT_FOUND,
        "GangScheduling",
        "key (the group)",
        "always",
        'waiting for pods\'s pod group "G" to appear in scheduling queue',
    ),
    CodeInfo(
        C.GROUP_TOO_FEW_MEMBERS,
        "GangScheduling",
        "",
        "always",
        "waiting for minCount pods from a gang to appear in scheduling queue",
    ),
    CodeInfo(
        C.GROUP_MIN_COUNT_UNMET,
        "GangScheduling",
        "shortfall (members no remaining one can make up)",
        "never",
        "minCount (N) cannot be satisfied: S scheduled, R remaining",
    ),
    CodeInfo(
        C.GROUP_NO_PLACEMENT,
        "TopologyPlacement",
        "",
        "never",
        "0/N placements are available, first placement status: ...",
    ),
    CodeInfo(C.GROUP_INVALID, "GangScheduling", "", "always", "all pods in a single pod group should have ..."),
    CodeInfo(
        C.CYCLE_DEADLINE_EXCEEDED,
        "",
        "rule (the one running)",
        "never",
        "scheduling cycle exceeded its Ns deadline ...",
    ),
)
_INFO = {info.code: info for info in CODES}


@dataclass(frozen=True)
class Reason:
    """One failure, for programs. ``shortfall`` is in ``unit`` (cores, bytes, pods, members or
    units: an extended resource's own), ``quantity`` the same as Kubernetes writes it; for
    reasons counted over many nodes (``nodes`` > 1) the shortfall is the smallest among them, on
    ``nearest``. ``unresolvable``: preemption cannot help (on every one of the nodes counted)."""

    code: ReasonCode
    message: str
    rule: str = ""
    plugin: str = ""
    resource: str = ""
    key: str = ""
    value: str = ""
    shortfall: float | int | None = None
    unit: str = ""
    quantity: str = ""
    unresolvable: bool = False
    nodes: int = 1
    unresolvable_nodes: int = 0
    nearest: str = ""

    def json(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "rule": self.rule or None,
            "plugin": self.plugin or None,
            "resource": self.resource or None,
            "key": self.key or None,
            "value": self.value or None,
            "shortfall": self.shortfall,
            "unit": self.unit or None,
            "quantity": self.quantity or None,
            "unresolvable": self.unresolvable,
            "message": self.message,
        }

    def summary_json(self) -> dict[str, Any]:
        """As :meth:`json`, with the node counts (a reason over many nodes)."""
        out = self.json()
        out["nodes"] = self.nodes
        out["unresolvable_nodes"] = self.unresolvable_nodes
        out["nearest"] = self.nearest or None
        return out

    @property
    def subject(self) -> str:
        """What it is about, as one word: the resource, or key=value, or the rule's name."""
        if self.resource:
            return self.resource
        if self.key:
            return f"{self.key}={self.value}" if self.value else self.key
        return ""


_TAINT = re.compile(r"node\(s\) had untolerated taint \{(.*?): (.*)\}\Z")
_INSUFFICIENT = re.compile(r"Insufficient (\S+)\Z")
_FIXED: dict[str, ReasonCode] = {
    "node(s) were unschedulable": C.NODE_UNSCHEDULABLE,
    "node(s) had unknown conditions": C.NODE_UNSCHEDULABLE,
    "node(s) didn't match the requested node name": C.NODE_NAME_MISMATCH,
    "node(s) had taints that the pod didn't tolerate": C.TAINT_NOT_TOLERATED,
    "node(s) didn't match Pod's node affinity/selector": C.NODE_AFFINITY_MISMATCH,
    "node(s) didn't have free ports for the requested pod ports": C.HOST_PORT_CONFLICT,
    "Too many pods": C.TOO_MANY_PODS,
    "node(s) had no available disk": C.VOLUME_IN_USE,
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode": C.VOLUME_IN_USE,
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod": (
        C.VOLUME_IN_USE
    ),
    "node(s) exceed max volume count": C.VOLUME_LIMIT_EXCEEDED,
    "node(s) had volume node affinity conflict": C.VOLUME_BINDING_CONFLICT,
    "node(s) didn't match PersistentVolume's node affinity": C.VOLUME_BINDING_CONFLICT,
    "node(s) didn't find available persistent volumes to bind": C.VOLUME_BINDING_CONFLICT,
    "node(s) did not have enough free storage": C.VOLUME_BINDING_CONFLICT,
    "pod has unbound immediate PersistentVolumeClaims": C.VOLUME_BINDING_CONFLICT,
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)": C.VOLUME_NOT_FOUND,
    "node(s) had no available volume zone": C.VOLUME_ZONE_CONFLICT,
    "node(s) didn't match pod topology spread constraints": C.TOPOLOGY_SPREAD_SKEW,
    "node(s) didn't match pod topology spread constraints (missing required label)": C.TOPOLOGY_LABEL_MISSING,
    "node(s) didn't match pod affinity rules": C.POD_AFFINITY_MISMATCH,
    "node(s) didn't match pod anti-affinity rules": C.POD_ANTI_AFFINITY_CONFLICT,
    "node(s) didn't satisfy existing pods anti-affinity rules": C.EXISTING_POD_ANTI_AFFINITY,
    "node(s) didn't match Pod's required features": C.NODE_FEATURE_MISSING,
    "node(s) didn't match the pod group's topology domain": C.GROUP_DOMAIN_MISMATCH,
}
# DynamicResources' reasons (dynamicresources.go at v1.37.2) start with these.
_DEVICE_PREFIXES = ("cannot allocate all claims", "resourceclaim ", "ResourceClaim ", "node(s) lack ", "claim ")
_NOT_FOUND = re.compile(r'(persistentvolumeclaim|persistentvolume|storageclass\.storage\.k8s\.io) "[^"]*" not found')


# The default rules' filters that stand for an upstream plugin of another name.
_RULE_PLUGINS = {"PodGroupTopology": "TopologyPlacement"}


@lru_cache(maxsize=4096)
def classify(rule: str, message: str) -> Reason:
    """The reason (without node-specific parts) of ``message`` reported by filter ``rule``."""
    plugin = rule if rule in PLUGINS else _RULE_PLUGINS.get(rule, "")
    code = _FIXED.get(message)
    resource = key = value = ""
    if code is None:
        if (found := _INSUFFICIENT.match(message)) is not None:
            code, resource = C.INSUFFICIENT_RESOURCE, found[1]
        elif (found := _TAINT.match(message)) is not None:
            code, key, value = C.TAINT_NOT_TOLERATED, found[1], found[2]
        elif _NOT_FOUND.search(message) is not None:
            code = C.VOLUME_NOT_FOUND
        elif rule == "DynamicResources" or (not rule and message.startswith(_DEVICE_PREFIXES)):
            code = C.DEVICE_CLAIM_UNSATISFIED  # (rulesched.semantics.dra_pod's reasons, upstream's)
        else:
            code = C.RULE_REJECTED
    if code is C.TOO_MANY_PODS:
        resource = "pods"
    return Reason(code, message, rule, plugin, resource, key, value)


def unit_of(resource: str) -> str:
    """The unit a shortfall of ``resource`` is given in."""
    if resource == "cpu":
        return "cores"
    if resource == "pods":
        return "pods"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return "bytes"
    return "units"


def amount(resource: str, milli: int) -> float | int:
    """``milli`` milli-units of ``resource`` in :func:`unit_of`'s unit: cores may be fractional
    (1.5), other units are whole (a fraction of a byte rounds up, as the node would need it)."""
    if resource == "cpu":
        return milli // 1000 if milli % 1000 == 0 else milli / 1000
    return -(-milli // 1000)


def on_node(reason: Reason, pod: Pod, node: Any, unresolvable: bool) -> Reason:
    """``reason`` as one node gives it: the shortfall there (what the pod requests beyond what
    the node has free), and whether preemption can help there."""
    if reason.code is C.INSUFFICIENT_RESOURCE:
        resource = reason.resource
        lack = pod.requests.get(resource, 0) - node.free.get(resource, 0)
        if lack > 0:
            return replace(
                reason,
                shortfall=amount(resource, lack),
                unit=unit_of(resource),
                quantity=quantity_text(lack),
                unresolvable=unresolvable,
                nearest=node.name,
                unresolvable_nodes=int(unresolvable),
            )
    elif reason.code is C.TOO_MANY_PODS:
        return replace(
            reason,
            shortfall=1,
            unit="pods",
            quantity="1",
            unresolvable=unresolvable,
            nearest=node.name,
            unresolvable_nodes=int(unresolvable),
        )
    return replace(reason, unresolvable=unresolvable, nearest=node.name, unresolvable_nodes=int(unresolvable))


def node_reasons(rule: str, messages: Iterable[str], pod: Pod, node: Any, unresolvable: bool) -> tuple[Reason, ...]:
    """Each of a failing filter's messages on one node as a :class:`Reason`."""
    return tuple(on_node(classify(rule, m), pod, node, unresolvable) for m in dict.fromkeys(messages))


class Tally:
    """Reasons over many nodes, merged by (rule, message): node counts, how many unresolvable,
    the smallest shortfall and the node that has it (the nearest to fitting for that reason).
    Counted without making a :class:`Reason` per node (explain tallies every failing node)."""

    __slots__ = ("_found",)

    def __init__(self) -> None:
        # (rule, message) -> [reason, nodes, unresolvable nodes, smallest lack (milli), nearest node,
        # the resource it lacks]
        self._found: dict[tuple[str, str], list[Any]] = {}

    def add_node(self, rule: str, messages: Iterable[str], pod: Pod, node: Any, unresolvable: bool) -> None:
        found = self._found
        for message in messages if type(messages) is tuple and len(messages) < 2 else dict.fromkeys(messages):
            entry = found.get((rule, message))
            if entry is None:
                reason = classify(rule, message)
                # (the resource whose lack is the shortfall, "" for none; pods: 1 short)
                short = reason.resource if reason.code in (C.INSUFFICIENT_RESOURCE, C.TOO_MANY_PODS) else ""
                entry = found[(rule, message)] = [reason, 0, 0, None, "", short]
            entry[1] += 1
            if unresolvable:
                entry[2] += 1
            short = entry[5]
            if short:
                lack = 1000 if short == "pods" else pod.requests.get(short, 0) - node.free.get(short, 0)
                if entry[3] is None or lack < entry[3]:
                    entry[3], entry[4] = lack, node.name
            elif not entry[4]:
                entry[4] = node.name

    def add_counted(self, reason: Reason, nodes: int, unresolvable: int, lack: int | None, nearest: str) -> None:
        """``nodes`` nodes failing for ``reason`` (as :func:`classify` gives it), ``unresolvable``
        of them unresolvable, ``lack``: the smallest shortfall among them (milli-units; None for
        a reason without one) and ``nearest`` the node that has it (the first such node in walk
        order), as :meth:`add_node` would count them one by one (into a tally that has none
        of this reason yet)."""
        key = (reason.rule, reason.message)
        assert key not in self._found, key
        short = reason.resource if lack is not None else ""
        self._found[key] = [reason, nodes, unresolvable, lack, nearest, short]

    def add(self, reason: Reason) -> None:
        """A reason already made (one node's, or a count of its own)."""
        entry = self._found.get((reason.rule, reason.message))
        lack = None if reason.shortfall is None else round(reason.shortfall * 1000)
        if entry is None:
            self._found[(reason.rule, reason.message)] = [
                replace(reason, shortfall=None, unit="", quantity=""),
                reason.nodes,
                reason.unresolvable_nodes,
                lack,
                reason.nearest,
                reason.resource if lack is not None else "",
            ]
            return
        entry[1] += reason.nodes
        entry[2] += reason.unresolvable_nodes
        if lack is not None and (entry[3] is None or lack < entry[3]):
            entry[3], entry[4] = lack, reason.nearest

    def reasons(self) -> tuple[Reason, ...]:
        """Most nodes first, then by code, rule and message."""
        out = []
        for reason, nodes, unresolvable, lack, nearest, _ in self._found.values():
            parts: dict[str, Any] = {}
            if lack is not None and lack > 0:
                resource = reason.resource
                parts = {
                    "shortfall": amount(resource, lack),
                    "unit": unit_of(resource),
                    "quantity": quantity_text(lack),
                }
            out.append(
                replace(
                    reason,
                    nodes=nodes,
                    unresolvable_nodes=unresolvable,
                    unresolvable=bool(nodes) and unresolvable == nodes,
                    nearest=nearest,
                    **parts,
                )
            )
        return tuple(sorted(out, key=lambda r: (-r.nodes, r.code.value, r.rule, r.message)))


# --- a pod's or a group's reasons -------------------------------------------------------------------

_POD_MESSAGES: tuple[tuple[re.Pattern[str], ReasonCode], ...] = (
    (re.compile(r"Scheduling is blocked due to non-empty scheduling gates"), C.SCHEDULING_GATED),
    (re.compile(r"skip schedule deleting pod"), C.POD_TERMINATING),
    (re.compile(r"waiting for pods's pod group \"([^\"]*)\" to appear"), C.GROUP_NOT_FOUND),
    (re.compile(r"waiting for minCount pods from a gang"), C.GROUP_TOO_FEW_MEMBERS),
    (re.compile(r"waiting for composite pod group \"([^\"]*)\" tree to meet quorum"), C.GROUP_TOO_FEW_MEMBERS),
    (re.compile(r"of its minimum \d+ members exist"), C.GROUP_TOO_FEW_MEMBERS),
    (re.compile(r"minCount \((\d+)\) cannot be satisfied: (\d+) scheduled, (\d+) remaining"), C.GROUP_MIN_COUNT_UNMET),
    (
        re.compile(r"minGroupCount \((\d+)\) cannot be satisfied: (\d+) scheduled, (\d+) remaining"),
        C.GROUP_MIN_COUNT_UNMET,
    ),
    (re.compile(r"(\d+) of \d+ members could be placed; (\d+) are needed"), C.GROUP_MIN_COUNT_UNMET),
    (re.compile(r"placements are available"), C.GROUP_NO_PLACEMENT),
    (re.compile(r"all pods in a single pod group should"), C.GROUP_INVALID),
    (
        re.compile(r"scheduling cycle exceeded its .* deadline(?: while evaluating rule '([^']*)')?"),
        C.CYCLE_DEADLINE_EXCEEDED,
    ),
    (re.compile(r"no nodes available to schedule pods|^0/0 nodes are available"), C.NO_NODES),
)


def pod_reasons(message: str) -> tuple[Reason, ...]:
    """The reasons of a pod or group as a whole found in its status message (a pod waiting for
    its group, gated, a gang short of its minimum, a cycle past its deadline); () when the
    message is only the nodes' (``0/N nodes are available: ...``)."""
    out = []
    for pattern, code in _POD_MESSAGES:
        found = pattern.search(message)
        if found is None:
            continue
        info = _INFO[code]
        reason = Reason(code, found[0], plugin=info.plugin, unresolvable=info.unresolvable == "always", nodes=0)
        if code is C.GROUP_NOT_FOUND:
            reason = replace(reason, key=found[1])
        elif code is C.CYCLE_DEADLINE_EXCEEDED and found.lastindex:
            reason = replace(reason, rule=found[1] or "")
        elif code is C.GROUP_MIN_COUNT_UNMET:
            numbers = [int(g) for g in found.groups()]
            if len(numbers) == 2:  # scheduler-plugins': placed, needed
                short = numbers[1] - numbers[0]
            else:  # minimum, scheduled, remaining: the members no remaining one can make up
                short = numbers[0] - numbers[1] - numbers[2]
            short = max(0, short)
            reason = replace(reason, shortfall=short, unit="members", quantity=str(short))
        out.append(reason)
    return tuple(out)


def info(code: ReasonCode) -> CodeInfo:
    return _INFO[code]


# --- where they are shown ----------------------------------------------------------------------------

ANNOTATION = "rulesched.io/reasons"  # on FailedScheduling events: the pod's reasons as JSON
ANNOTATION_LIMIT = 16  # reasons in the annotation (the most nodes first); the rest are counted


def annotation_value(reasons: Sequence[Reason], nodes: int) -> str:
    """The FailedScheduling event's :data:`ANNOTATION`: compact JSON, ``{"nodes": N, "reasons":
    [...], "more": K}`` (K reasons left out past :data:`ANNOTATION_LIMIT`)."""
    shown = [r.summary_json() for r in reasons[:ANNOTATION_LIMIT]]
    body: dict[str, Any] = {"nodes": nodes, "reasons": shown}
    if len(reasons) > ANNOTATION_LIMIT:
        body["more"] = len(reasons) - ANNOTATION_LIMIT
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def labels(reason: Reason) -> Mapping[str, str]:
    """A reason's metric labels: its code and rule, each from a closed set (the rule set's names)."""
    return {"code": reason.code.value, "rule": reason.rule}
