"""A rule test's case as values (:class:`Case`, its :class:`Cluster` and :class:`Expect`), the
error that names a test file's field, and a case's ``expect`` read and checked.

:mod:`rulesched.authoring.testfile` reads a whole test file (its format is described there) into
these; :mod:`rulesched.authoring.ruletest` and :mod:`rulesched.authoring.gangcase` run them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError
from rulesched.model import Node, Pod, PodDisruptionBudget
from rulesched.model.dra import EMPTY_DRA, DraState
from rulesched.model.fields import describe
from rulesched.model.groups import PodGroup
from rulesched.model.load import LoadSnapshot
from rulesched.model.objects import Namespace
from rulesched.model.storage import EMPTY_STORAGE, StorageState
from rulesched.model.workloads import NO_WORKLOADS, Workloads

EXPECT_KEYS = (
    "feasible",
    "winner",
    "unschedulable",
    "reasons",
    "unresolvable",
    "scores",
    "message",
    "nominated",
    "victims",
    "group",
    "members",
)


class RuleTestError(InputError):
    """A test file that cannot be used: ``path: field: problem``, one line."""

    def __init__(self, path: Path | str, field: str, problem: str) -> None:
        self.path, self.field, self.problem = str(path), field, problem
        super().__init__(": ".join(part for part in (str(path), field, problem) if part))


@dataclass(frozen=True)
class Cluster:
    """A case's cluster: its nodes, the pods running on them, PDBs, namespaces, and the Services
    and controllers whose selectors system default spreading reads, and storage."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    namespaces: tuple[Namespace, ...] = ()
    workloads: Workloads = NO_WORKLOADS
    storage: StorageState = EMPTY_STORAGE
    load: LoadSnapshot | None = None  # nodeMetrics: what load-aware rules read
    dra: DraState = EMPTY_DRA  # DeviceClasses, ResourceClaims, templates, ResourceSlices

    def store(self) -> ClusterStore:
        """A cluster store holding all of it: where a case's cycle (or group attempt) starts."""
        return ClusterStore.build(
            self.nodes,
            self.pods,
            self.pdbs,
            {ns.name: ns.labels for ns in self.namespaces},
            self.workloads,
            storage=self.storage,
            load=self.load,
            dra=self.dra,
        )


@dataclass(frozen=True)
class Expect:
    """What a case checks; ``None`` leaves a field unchecked."""

    feasible: frozenset[str] | None = None
    winner: frozenset[str] | None = None  # one node, or the nodes tying for the highest total
    unschedulable: bool | None = None
    reasons: Mapping[str, tuple[str, ...]] | None = None
    unresolvable: frozenset[str] | None = None  # the filtered nodes preemption cannot help
    scores: Mapping[str, Mapping[str, int | None]] | None = None  # None: the rule does not apply
    message: str | None = None
    nominated: str | None = None  # "" expects no node nominated
    victims: frozenset[str] | None = None  # pod keys (namespace/name)
    # group cases (rulesched.authoring.gangcase): the group's outcome and each member's node
    group_placed: bool | None = None
    group_message: str | None = None
    members: Mapping[str, str] | None = None  # member name -> node ("": not bound)


@dataclass(frozen=True)
class Case:
    name: str
    pod: Pod
    cluster: Cluster
    expect: Expect
    group: PodGroup | None = None  # a group case: ``members`` placed as a gang, all or nothing
    members: tuple[Pod, ...] = ()
    groups: tuple[PodGroup, ...] = ()  # every group of the case (a composite tree's), ``group`` among them


@dataclass(frozen=True)
class CaseFile:
    """A test file read and checked: the rule set it tests (files or folders) and its cases."""

    path: Path
    rules: tuple[Path, ...]
    cases: tuple[Case, ...]


def check_keys(raw: Mapping[Any, Any], allowed: Sequence[str], path: Path, field: Callable[[str], str]) -> None:
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"expected one of {', '.join(allowed)}"
            raise RuleTestError(path, field(str(key)), f"unknown field; {hint}")


def read_expect(
    raw: Any, path: Path, label: str, nodes: Sequence[str], pods: Sequence[str], members: Sequence[str] = ()
) -> Expect:
    if not isinstance(raw, dict) or not raw:
        got = "an empty mapping" if isinstance(raw, dict) else describe(raw)
        raise RuleTestError(path, label, f"expected a mapping of checks ({', '.join(EXPECT_KEYS)}), got {got}")
    check_keys(raw, EXPECT_KEYS, path, lambda key: f"{label}.{key}")

    def fail(key: str, problem: str) -> RuleTestError:
        return RuleTestError(path, f"{label}.{key}", problem)

    def node(value: Any, key: str) -> str:
        if not isinstance(value, str):
            raise fail(key, f"expected a node name, got {describe(value)}")
        if value not in nodes:
            raise fail(key, f"no node {value!r} in this case (nodes: {', '.join(nodes) or 'none'})")
        return value

    def node_list(value: Any, key: str) -> frozenset[str]:
        if not isinstance(value, list):
            raise fail(key, f"expected a list of node names, got {describe(value)}")
        return frozenset(node(v, f"{key}[{i}]") for i, v in enumerate(value))

    def node_map(value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise fail(key, f"expected a mapping of node names, got {describe(value)}")
        return {node(k, f"{key}.{k}"): v for k, v in value.items()}

    checks: dict[str, Any] = {}
    if "feasible" in raw:
        checks["feasible"] = node_list(raw["feasible"], "feasible")
    if "winner" in raw:
        winner = raw["winner"]
        if winner is None:
            raise fail("winner", "expected a node name or a list of node names (for no node: unschedulable: true)")
        checks["winner"] = (
            node_list(winner, "winner") if isinstance(winner, list) else frozenset([node(winner, "winner")])
        )
        if not checks["winner"]:
            raise fail("winner", "an empty list; for no node write unschedulable: true")
    if "unschedulable" in raw:
        if not isinstance(raw["unschedulable"], bool):
            raise fail("unschedulable", f"expected true or false, got {describe(raw['unschedulable'])}")
        checks["unschedulable"] = raw["unschedulable"]
    if "unresolvable" in raw:
        checks["unresolvable"] = node_list(raw["unresolvable"], "unresolvable")
    if "reasons" in raw:
        reasons = {}
        for name, value in node_map(raw["reasons"], "reasons").items():
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
                raise fail(f"reasons.{name}", f"expected a list of reasons (strings), got {describe(value)}")
            reasons[name] = tuple(value)
        checks["reasons"] = MappingProxyType(reasons)
    if "scores" in raw:
        scores = {}
        for name, value in node_map(raw["scores"], "scores").items():
            if not isinstance(value, dict) or not value:
                raise fail(f"scores.{name}", f"expected a mapping of rule names to scores, got {describe(value)}")
            for rule, score in value.items():
                if isinstance(score, bool) or not (score is None or isinstance(score, int)):
                    raise fail(f"scores.{name}.{rule}", f"expected a whole number (or null), got {describe(score)}")
            scores[name] = MappingProxyType({str(rule): score for rule, score in value.items()})
        checks["scores"] = MappingProxyType(scores)
    if "message" in raw:
        if not isinstance(raw["message"], str):
            raise fail("message", f"expected a string, got {describe(raw['message'])}")
        checks["message"] = raw["message"]
    if "nominated" in raw:
        checks["nominated"] = "" if raw["nominated"] is None else node(raw["nominated"], "nominated")
    if "victims" in raw:
        victims = raw["victims"]
        if not isinstance(victims, list) or not all(isinstance(v, str) and v for v in victims):
            raise fail("victims", f"expected a list of running pods (namespace/name), got {describe(victims)}")
        keys = frozenset(v if "/" in v else f"default/{v}" for v in victims)
        unknown = sorted(keys - set(pods))
        if unknown:
            raise fail("victims", f"no running pod {unknown[0]!r} in this case")
        checks["victims"] = keys
    if ("group" in raw or "members" in raw) and not members:
        raise fail(
            "group" if "group" in raw else "members", "only a group case (with 'group' and 'members') expects these"
        )
    if "group" in raw:
        group = raw["group"]
        if not isinstance(group, dict) or not set(group) <= {"placed", "message"} or not group:
            raise fail("group", f"expected a mapping with placed (true/false) and/or message, got {describe(group)}")
        if "placed" in group:
            if not isinstance(group["placed"], bool):
                raise fail("group.placed", f"expected true or false, got {describe(group['placed'])}")
            checks["group_placed"] = group["placed"]
        if "message" in group:
            if not isinstance(group["message"], str):
                raise fail("group.message", f"expected a string, got {describe(group['message'])}")
            checks["group_message"] = group["message"]
    if "members" in raw:
        placed = raw["members"]
        if not isinstance(placed, dict):
            raise fail(
                "members", f"expected a mapping of member names to nodes (null: not bound), got {describe(placed)}"
            )
        found = {}
        for name, value in placed.items():
            if name not in members:
                raise fail(f"members.{name}", f"no member {name!r} in this case (members: {', '.join(members)})")
            found[name] = "" if value is None else node(value, f"members.{name}")
        checks["members"] = MappingProxyType(found)
    return Expect(**checks)
