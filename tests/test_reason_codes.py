"""Reason codes (rulesched.scheduler.reasons): upstream's reason texts as codes with their parts,
the shortfall on each node and the nearest over many, a pod's and a group's own reasons, the
table in docs/explain-and-audit.md held to the code list, and the codes as every face gives them
(explain, simulate --explain; the extender's and run's are in test_extender and test_run_e2e)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rulesched.cli import main
from rulesched.cluster.store import ClusterStore
from rulesched.scheduler.reasons import (
    CODES,
    PLUGINS,
    ReasonCode,
    Tally,
    annotation_value,
    classify,
    node_reasons,
    pod_reasons,
)
from rulesched.scheduler.why import explain_pod
from rulesched.scheduler.workload_placement import feasibility
from rulesched.scheduler.workloads import WAITING_FOR_GROUP, WAITING_FOR_MEMBERS
from rulesched.semantics import volumes
from tests.upstream.harness import default_rules, node, pod

DOCS = Path(__file__).resolve().parent.parent / "docs" / "explain-and-audit.md"
C = ReasonCode

# Each of kube-scheduler's reason texts (pkg/scheduler/framework/plugins/... at v1.37.2, the
# constant named) as the default rules give it, with the rule reporting it, the code and parts.
UPSTREAM = [
    # nodeunschedulable/node_unschedulable.go ErrReasonUnschedulable
    ("NodeUnschedulable", "node(s) were unschedulable", C.NODE_UNSCHEDULABLE, {}),
    # nodename/node_name.go ErrReason
    ("NodeName", "node(s) didn't match the requested node name", C.NODE_NAME_MISMATCH, {}),
    # tainttoleration/taint_toleration.go: "node(s) had untolerated taint {%s: %s}"
    (
        "TaintToleration",
        "node(s) had untolerated taint {nvidia.com/gpu: present}",
        C.TAINT_NOT_TOLERATED,
        {"key": "nvidia.com/gpu", "value": "present"},
    ),
    ("TaintToleration", "node(s) had untolerated taint {dedicated: }", C.TAINT_NOT_TOLERATED, {"key": "dedicated"}),
    # nodeaffinity/node_affinity.go ErrReasonPod
    ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector", C.NODE_AFFINITY_MISMATCH, {}),
    # nodeports/node_ports.go ErrReason
    ("NodePorts", "node(s) didn't have free ports for the requested pod ports", C.HOST_PORT_CONFLICT, {}),
    # noderesources/fit.go: "Too many pods", "Insufficient %v"
    ("NodeResourcesFit", "Too many pods", C.TOO_MANY_PODS, {"resource": "pods"}),
    ("NodeResourcesFit", "Insufficient cpu", C.INSUFFICIENT_RESOURCE, {"resource": "cpu"}),
    ("NodeResourcesFit", "Insufficient nvidia.com/gpu", C.INSUFFICIENT_RESOURCE, {"resource": "nvidia.com/gpu"}),
    ("NodeResourcesFit", "Insufficient hugepages-2Mi", C.INSUFFICIENT_RESOURCE, {"resource": "hugepages-2Mi"}),
    # volumerestrictions/volume_restrictions.go ErrReasonDiskConflict, the ReadWriteOncePod conflict
    ("VolumeRestrictions", volumes.DISK_CONFLICT, C.VOLUME_IN_USE, {}),
    ("VolumeRestrictions", volumes.RWOP_CONFLICT, C.VOLUME_IN_USE, {}),
    (
        "VolumeRestrictions",
        "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod",
        C.VOLUME_IN_USE,
        {},
    ),
    ("VolumeRestrictions", volumes.not_found("data"), C.VOLUME_NOT_FOUND, {}),
    # nodevolumelimits/csi.go ErrReasonMaxVolumeCountExceeded
    ("NodeVolumeLimits", volumes.MAX_VOLUMES, C.VOLUME_LIMIT_EXCEEDED, {}),
    # volumebinding/binder.go ErrReasonBindConflict, ErrReasonNodeConflict, ErrReasonNotEnoughSpace, ErrReasonPVNotExist
    ("VolumeBinding", volumes.BIND_CONFLICT, C.VOLUME_BINDING_CONFLICT, {}),
    ("VolumeBinding", volumes.NODE_CONFLICT, C.VOLUME_BINDING_CONFLICT, {}),
    ("VolumeBinding", "node(s) didn't match PersistentVolume's node affinity", C.VOLUME_BINDING_CONFLICT, {}),
    ("VolumeBinding", "node(s) did not have enough free storage", C.VOLUME_BINDING_CONFLICT, {}),
    ("VolumeBinding", volumes.PV_NOT_EXIST, C.VOLUME_NOT_FOUND, {}),
    ("VolumeBinding", 'storageclass.storage.k8s.io "fast" not found', C.VOLUME_NOT_FOUND, {}),
    # volumezone/volume_zone.go ErrReasonConflict
    ("VolumeZone", volumes.ZONE_CONFLICT, C.VOLUME_ZONE_CONFLICT, {}),
    # podtopologyspread/plugin.go ErrReasonConstraintsNotMatch, ErrReasonNodeLabelNotMatch
    ("PodTopologySpread", "node(s) didn't match pod topology spread constraints", C.TOPOLOGY_SPREAD_SKEW, {}),
    (
        "PodTopologySpread",
        "node(s) didn't match pod topology spread constraints (missing required label)",
        C.TOPOLOGY_LABEL_MISSING,
        {},
    ),
    # interpodaffinity/filtering.go the three ErrReasons
    ("InterPodAffinity", "node(s) didn't match pod affinity rules", C.POD_AFFINITY_MISMATCH, {}),
    ("InterPodAffinity", "node(s) didn't match pod anti-affinity rules", C.POD_ANTI_AFFINITY_CONFLICT, {}),
    ("InterPodAffinity", "node(s) didn't satisfy existing pods anti-affinity rules", C.EXISTING_POD_ANTI_AFFINITY, {}),
    # nodedeclaredfeatures/nodedeclaredfeatures.go
    ("NodeDeclaredFeatures", "node(s) didn't match Pod's required features", C.NODE_FEATURE_MISSING, {}),
    # the default rules' PodGroupTopology (topology-aware workload scheduling)
    ("PodGroupTopology", "node(s) didn't match the pod group's topology domain", C.GROUP_DOMAIN_MISMATCH, {}),
    # a rule of one's own: its text, or an upstream text it chose to give
    ("gpu_free", "no free GPU", C.RULE_REJECTED, {}),
    ("team_quota", "Insufficient example.com/quota", C.INSUFFICIENT_RESOURCE, {"resource": "example.com/quota"}),
]


@pytest.mark.parametrize(("rule", "message", "code", "parts"), UPSTREAM, ids=[f"{r}:{m[:40]}" for r, m, *_ in UPSTREAM])
def test_upstream_reasons_have_their_codes(rule: str, message: str, code: ReasonCode, parts: dict[str, str]) -> None:
    reason = classify(rule, message)
    assert reason.code is code and reason.message == message and reason.rule == rule
    assert {k: getattr(reason, k) for k in parts} == parts
    plugin = {"PodGroupTopology": "TopologyPlacement"}.get(rule, rule if rule in PLUGINS else "")
    assert reason.plugin == plugin


def test_the_docs_table_is_the_code_list() -> None:
    """docs/explain-and-audit.md's table has a row per code, in order, with its plugin, parts,
    unresolvable and message as CODES says; and CODES has every code once."""
    text = DOCS.read_text()
    section = text[text.index("## Reason codes") :]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    shown = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert [row[0].strip("`") for row in shown] == [info.code.value for info in CODES]
    for row, info in zip(shown, CODES, strict=True):
        assert row[1:] == [info.plugin or "-", info.parts or "-", info.unresolvable, info.message]
    assert sorted(info.code for info in CODES) == sorted(ReasonCode)


def test_shortfall_on_a_node_in_its_unit() -> None:
    n = node("n", allocatable={"cpu": "2", "memory": "1Gi", "pods": "110", "nvidia.com/gpu": "1"})
    store = ClusterStore.build([n], [])
    info = store.node_view("n")
    big = pod("big", spec={"containers": [_requests(cpu="2500m", memory="1536Mi", **{"nvidia.com/gpu": "3"})]})
    messages = ("Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu")
    found = {r.resource: r for r in node_reasons("NodeResourcesFit", messages, big, info, True)}
    assert (found["cpu"].shortfall, found["cpu"].unit, found["cpu"].quantity) == (0.5, "cores", "500m")
    assert (found["memory"].shortfall, found["memory"].unit, found["memory"].quantity) == (
        512 * 2**20,
        "bytes",
        "512Mi",
    )
    gpu = found["nvidia.com/gpu"]
    assert (gpu.shortfall, gpu.unit, gpu.quantity, gpu.nearest, gpu.unresolvable) == (2, "units", "2", "n", True)


@given(st.lists(st.tuples(st.integers(0, 8000), st.booleans()), min_size=1, max_size=30))
def test_a_tally_counts_nodes_and_keeps_the_smallest_shortfall(nodes: list[tuple[int, bool]]) -> None:
    """Over any nodes lacking cpu: the count, the unresolvable count, and the smallest lack (and
    its node) are those of the nodes added; unresolvable as a whole only when on every node."""
    pods = pod("p", spec={"containers": [_requests(cpu="9")]})
    built = [node(f"n{i}", allocatable={"cpu": f"{free}m", "pods": "110"}) for i, (free, _) in enumerate(nodes)]
    store = ClusterStore.build(built, [])
    tally = Tally()
    for i, (_, unresolvable) in enumerate(nodes):
        tally.add_node("NodeResourcesFit", ("Insufficient cpu",), pods, store.node_view(f"n{i}"), unresolvable)
    (reason,) = tally.reasons()
    lacks = [9000 - free for free, _ in nodes]
    nearest = min(range(len(nodes)), key=lambda i: (lacks[i], i))
    assert reason.nodes == len(nodes)
    assert reason.unresolvable_nodes == sum(u for _, u in nodes)
    assert reason.unresolvable == all(u for _, u in nodes)
    assert reason.nearest == f"n{nearest}"
    assert reason.shortfall == pytest.approx(lacks[nearest] / 1000)


@given(st.text(max_size=200), st.sampled_from(["", "NodeResourcesFit", "mine", "TaintToleration"]))
def test_any_message_gets_one_code_of_the_set(message: str, rule: str) -> None:
    reason = classify(rule, message)
    assert reason.code in set(ReasonCode) and reason.message == message and reason.rule == rule
    json.dumps(reason.json())
    assert all(r.code in set(ReasonCode) for r in pod_reasons(message))


def test_a_pods_and_a_groups_own_reasons() -> None:
    (gated,) = pod_reasons("Scheduling is blocked due to non-empty scheduling gates (example.com/wait)")
    assert gated.code is C.SCHEDULING_GATED and gated.plugin == "SchedulingGates" and gated.unresolvable
    (waiting,) = pod_reasons(WAITING_FOR_GROUP.format("mpi"))
    assert (waiting.code, waiting.key, waiting.plugin) == (C.GROUP_NOT_FOUND, "mpi", "GangScheduling")
    (few,) = pod_reasons(WAITING_FOR_MEMBERS)
    assert few.code is C.GROUP_TOO_FEW_MEMBERS
    _, message = feasibility(4, 1, 1)  # minCount (4) cannot be satisfied: 1 scheduled, 1 remaining
    (unmet,) = pod_reasons(message)
    assert (unmet.code, unmet.shortfall, unmet.unit) == (C.GROUP_MIN_COUNT_UNMET, 2, "members")
    (plugins,) = pod_reasons(
        "pod group default/mpi: 4 of 5 members could be placed; 5 are needed (minimum 5, 0 bound); none was bound."
    )
    assert (plugins.code, plugins.shortfall) == (C.GROUP_MIN_COUNT_UNMET, 1)
    (deadline,) = pod_reasons("scheduling cycle exceeded its 5s deadline while evaluating rule 'heavy' (rules abc)")
    assert (deadline.code, deadline.rule) == (C.CYCLE_DEADLINE_EXCEEDED, "heavy")
    assert pod_reasons("0/3 nodes are available: 3 Insufficient cpu.") == ()


def test_the_annotation_is_compact_json_and_bounded() -> None:
    reasons = [classify("mine", f"reason {i}") for i in range(20)]
    value = json.loads(annotation_value(reasons, 7))
    assert value["nodes"] == 7 and len(value["reasons"]) == 16 and value["more"] == 4
    assert value["reasons"][0]["code"] == "RuleRejected" and value["reasons"][0]["rule"] == "mine"


def test_every_default_filter_gives_coded_reasons() -> None:
    """A pod failing every node for a different default filter: each reason has its code (none
    is RuleRejected), counted once per node, the nearest resource shortfall named."""
    nodes = [
        node("cordoned", unschedulable=True),
        node("tainted", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        node("elsewhere", labels={"disk": "hdd"}),
        node("small", labels={"disk": "ssd"}, allocatable={"cpu": "1", "memory": "64Gi", "pods": "110"}),
        node("smaller", labels={"disk": "ssd"}, allocatable={"cpu": "500m", "memory": "64Gi", "pods": "110"}),
        node("full", labels={"disk": "ssd"}, allocatable={"cpu": "32", "memory": "64Gi", "pods": "1"}),
    ]
    running = [pod("occupant", node_name="full")]
    store = ClusterStore.build(nodes, running)
    wanted = pod("p", spec={"containers": [_requests(cpu="2")], "nodeSelector": {"disk": "ssd"}})
    answer = explain_pod(wanted, store.snapshot(), default_rules())
    codes = {r.code: r for r in answer.codes}
    assert set(codes) == {
        C.NODE_UNSCHEDULABLE,
        C.TAINT_NOT_TOLERATED,
        C.NODE_AFFINITY_MISMATCH,
        C.INSUFFICIENT_RESOURCE,
        C.TOO_MANY_PODS,
    }
    cpu = codes[C.INSUFFICIENT_RESOURCE]
    assert (cpu.nodes, cpu.nearest, cpu.shortfall, cpu.quantity, cpu.unresolvable) == (2, "small", 1, "1", True)
    assert codes[C.TAINT_NOT_TOLERATED].key == "dedicated" and codes[C.TOO_MANY_PODS].unresolvable is False
    assert all(r.plugin == r.rule for r in answer.codes)


def _requests(**amounts: str) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "resources": {"requests": dict(amounts), "limits": dict(amounts)}}


def _write(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def _node(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    meta = {"name": name, "labels": {"kubernetes.io/hostname": name}}
    return {"kind": "Node", "metadata": meta, "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


def _pod(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    body = {"containers": [_requests(cpu=cpu)], **spec}
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": body}


def test_explain_and_simulate_give_the_same_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path,
        [
            _node("a", "2"),
            _node("b", "8", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]),
            _pod("big", "3"),
            _pod("waits", "1", schedulingGates=[{"name": "example.com/hold"}]),
        ],
    )
    assert main(["explain", "default/big", "--cluster", path, "--output", "json"]) == 1
    explained = json.loads(capsys.readouterr().out)
    assert main(["simulate", path, "--explain", "--output", "json"]) == 0
    rows = {r["pod"]: r for r in json.loads(capsys.readouterr().out)["pods"]}
    simulated = rows["default/big"]["reason_codes"]
    keys = ("code", "rule", "plugin", "resource", "key", "value", "shortfall", "unit", "nearest", "nodes")
    assert [{k: r[k] for k in keys} for r in simulated] == [{k: r[k] for k in keys} for r in explained["codes"]]
    assert [(r["code"], r["resource"] or r["key"], r["shortfall"]) for r in simulated] == [
        ("InsufficientResource", "cpu", 1),
        ("TaintNotTolerated", "gpu", None),
    ]
    group = rows["default/big"]["explanation"]["reasons"][0]
    assert (group["reason"], group["code"], group["rule"]) == (
        "Insufficient cpu",
        "InsufficientResource",
        "NodeResourcesFit",
    )
    assert [r["code"] for r in rows["default/waits"]["reason_codes"]] == ["SchedulingGated"]
    detailed = {d["node"]: d for d in explained["detailed"]}
    (fit,) = detailed["a"]["failures"]
    assert fit["codes"][0]["code"] == "InsufficientResource" and fit["codes"][0]["quantity"] == "1"
    assert main(["explain", "default/big", "--cluster", path]) == 1
    table = capsys.readouterr().out
    assert re.search(r"Insufficient cpu \[InsufficientResource cpu, nearest a short 1\]: 1 node", table)
