"""VolumeBinding Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/volumebinding/volume_binding_test.go (TestVolumeBinding): every
case's PreFilter and Filter outcome, through the VolumeBinding filter of rules/default.rules. A
PreFilter failure is the filter failing on every node with its message; a PreFilter Skip passes.
Fixtures as upstream's: classes ``immediate-sc`` (Immediate), ``wait-sc`` and ``wait-hdd-sc``
(WaitForFirstConsumer, no provisioner); makePVC(...).withBoundPV sets ``volumeName`` and the
bind-completed annotation; makeNode labels each node with its hostname.

Not ported: the scores (``wantScores``) and PreScore statuses. They belong to the VolumeBinding
score, which needs the alpha VolumeCapacityPriority feature (off by default, so kube-scheduler's
default profile never scores with it) and rulesched's default rules have no VolumeBinding score.
Nor is ``wantPreFilterResult`` (PreFilter narrowing the nodes for local volumes): it changes no
outcome, only which nodes upstream evaluates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.upstream.harness import (
    UNRESOLVABLE,
    filter_reasons,
    filter_status,
    node,
    pod,
    pv,
    pvc,
    state,
    storage,
    storage_class,
)

HOST = "kubernetes.io/hostname"
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
BIND_CONFLICT = ("node(s) didn't find available persistent volumes to bind",)
CLASSES = [
    storage_class("immediate-sc"),
    storage_class("wait-sc", mode="WaitForFirstConsumer"),
    storage_class("wait-hdd-sc", mode="WaitForFirstConsumer"),
]


def make_node(name: str, **labels: str) -> Any:
    return node(name, {HOST: name, **{k.replace("__", "/"): v for k, v in labels.items()}})


def make_pod(*claims: str) -> Any:
    return pod(
        "pod-a",
        spec={"volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]},
    )


def make_pvc(name: str, cls: str, bound_pv: str = "", request: str = "", phase: str = "Pending") -> Any:
    spec: dict[str, Any] = {"storageClassName": cls}
    annotations = {}
    if bound_pv:
        spec["volumeName"] = bound_pv
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    if request:
        spec["resources"] = {"requests": {"storage": request}}
    return pvc(name, spec=spec, annotations=annotations, phase=phase)


def make_pv(
    name: str,
    cls: str,
    phase: str = "Available",
    capacity: str = "",
    affinity: Mapping[str, Sequence[str]] | None = None,
) -> Any:
    spec: dict[str, Any] = {"storageClassName": cls}
    if capacity:
        spec["capacity"] = {"storage": capacity}
    if affinity:
        exprs = [{"key": k, "operator": "In", "values": list(v)} for k, v in affinity.items()]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    return pv(name, spec=spec, phase=phase)


def local(name: str, cls: str, capacity: str, host: str) -> Any:
    return make_pv(name, cls, capacity=capacity, affinity={HOST: [host]})


def zonal(name: str, cls: str, capacity: str, zone: str) -> Any:
    return make_pv(name, cls, capacity=capacity, affinity={REGION: [f"region-{zone}"], ZONE: [f"zone-{zone}"]})


ZONED_NODES = [
    make_node(
        f"zone-{z}-node-{n}",
        **{"topology.kubernetes.io__region": f"region-{z}", "topology.kubernetes.io__zone": f"zone-{z}"},
    )
    for z in "abc"
    for n in "ab"
]

# (name, pod, nodes, claims, volumes, reasons per node: None passes)
CASES = [
    ("pod has not pvcs", pod("pod-a"), [make_node("node-a")], [], [], [None]),
    (
        "all bound",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a")],
        [make_pv("pv-a", "wait-sc")],
        [None],
    ),
    (
        "all bound with local volumes",
        make_pod("pvc-a", "pvc-b"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a"), make_pvc("pvc-b", "wait-sc", bound_pv="pv-b")],
        [
            make_pv("pv-a", "wait-sc", phase="Bound", affinity={HOST: ["node-a"]}),
            make_pv("pv-b", "wait-sc", phase="Bound", affinity={HOST: ["node-a"]}),
        ],
        [None],
    ),
    (
        "PVC does not exist",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [],
        [],
        [('persistentvolumeclaim "pvc-a" not found',)],
    ),
    (
        "Part of PVCs do not exist",
        make_pod("pvc-a", "pvc-b"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a")],
        [],
        [('persistentvolumeclaim "pvc-b" not found',)],
    ),
    (
        "immediate claims not bound",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "immediate-sc")],
        [],
        [("pod has unbound immediate PersistentVolumeClaims",)],
    ),
    (
        "unbound claims no matches",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc")],
        [],
        [BIND_CONFLICT],
    ),
    (
        "bound and unbound unsatisfied",
        make_pod("pvc-a", "pvc-b"),
        [node("node-a", {HOST: "node-a", "foo": "barbar"})],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a"), make_pvc("pvc-b", "wait-sc")],
        [make_pv("pv-a", "wait-sc", affinity={"foo": ["bar"]})],
        [("node(s) had volume node affinity conflict", *BIND_CONFLICT)],
    ),
    ("pvc not found", make_pod("pvc-a"), [make_node("node-a")], [], [], [('persistentvolumeclaim "pvc-a" not found',)]),
    (
        "pv not found",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a")],
        [],
        [("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)",)],
    ),
    (
        "pv not found claim lost",
        make_pod("pvc-a"),
        [make_node("node-a")],
        [make_pvc("pvc-a", "wait-sc", bound_pv="pv-a", phase="Lost")],
        [],
        [('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"',)],
    ),
    (
        "local volumes with close capacity are preferred",
        make_pod("pvc-a"),
        [make_node("node-a"), make_node("node-b"), make_node("node-c")],
        [make_pvc("pvc-a", "wait-sc", request="50Gi")],
        [
            local("pv-a-0", "wait-sc", "200Gi", "node-a"),
            local("pv-a-1", "wait-sc", "200Gi", "node-a"),
            local("pv-b-0", "wait-sc", "100Gi", "node-b"),
            local("pv-b-1", "wait-sc", "100Gi", "node-b"),
        ],
        [None, None, BIND_CONFLICT],
    ),
    (
        "local volumes with close capacity are preferred (multiple pvcs)",
        make_pod("pvc-0", "pvc-1"),
        [make_node("node-a"), make_node("node-b"), make_node("node-c")],
        [make_pvc("pvc-0", "wait-sc", request="50Gi"), make_pvc("pvc-1", "wait-hdd-sc", request="100Gi")],
        [
            local("pv-a-0", "wait-sc", "200Gi", "node-a"),
            local("pv-a-1", "wait-sc", "200Gi", "node-a"),
            local("pv-a-2", "wait-hdd-sc", "200Gi", "node-a"),
            local("pv-a-3", "wait-hdd-sc", "200Gi", "node-a"),
            local("pv-b-0", "wait-sc", "100Gi", "node-b"),
            local("pv-b-1", "wait-sc", "100Gi", "node-b"),
            local("pv-b-2", "wait-hdd-sc", "100Gi", "node-b"),
            local("pv-b-3", "wait-hdd-sc", "100Gi", "node-b"),
        ],
        [None, None, BIND_CONFLICT],
    ),
    *(
        (
            name,
            make_pod("pvc-a"),
            ZONED_NODES,
            [make_pvc("pvc-a", "wait-sc", request="50Gi")],
            [
                zonal("pv-a-0", "wait-sc", "200Gi", "a"),
                zonal("pv-a-1", "wait-sc", "200Gi", "a"),
                zonal("pv-b-0", "wait-sc", "100Gi", "b"),
                zonal("pv-b-1", "wait-sc", "100Gi", "b"),
            ],
            [None, None, None, None, BIND_CONFLICT, BIND_CONFLICT],
        )
        for name in (
            "zonal volumes with close capacity are preferred",
            "zonal volumes with close capacity are preferred (custom shape)",
        )
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "claims", "volumes", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_volume_binding(
    incoming: Any, nodes: list[Any], claims: list[Any], volumes: list[Any], want: list[Any]
) -> None:
    cluster = state(nodes, storage=storage(volumes, claims, CLASSES))
    got = [filter_reasons(incoming, cluster, n.name, rule="VolumeBinding") for n in nodes]
    assert got == want
    # Every VolumeBinding failure is UnschedulableAndUnresolvable upstream (volume_binding.go).
    statuses = [filter_status(incoming, cluster, n.name, rule="VolumeBinding") for n in nodes]
    assert [s[0] if s else None for s in statuses] == [UNRESOLVABLE if w else None for w in want]
