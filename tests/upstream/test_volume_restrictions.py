"""VolumeRestrictions Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/volumerestrictions/volume_restrictions_test.go:
TestGCEDiskConflicts, TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts and
TestAccessModeConflicts, every case, through the VolumeRestrictions filter of rules/default.rules.
Upstream builds volumes without names (st.MakePod().Volume(v)); the API requires one, so each
volume here is named. A PreFilter Skip is a filter that passes (its ``when`` guard or an empty
reason list); a PreFilter failure is the filter failing with the same message. The existing pods
run on the node (upstream's nodeInfo and snapshot hold the same pods).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    filter_reasons,
    filter_status,
    node,
    pod,
    pvc,
    state,
    storage,
)

DISK = ("node(s) had no available disk",)
RWOP = ("node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode",)


def status(want: tuple[str, ...] | None) -> tuple[str, tuple[str, ...]] | None:
    """Upstream's status: a claim that cannot be looked up is UnschedulableAndUnresolvable, any
    other failure (a disk or claim another pod holds, a full node) plain Unschedulable."""
    if want is None:
        return None
    return (UNRESOLVABLE if any(r.endswith(" not found") for r in want) else UNSCHEDULABLE), want


GCE = {"name": "a", "gcePersistentDisk": {"pdName": "foo"}}
GCE2 = {"name": "b", "gcePersistentDisk": {"pdName": "bar"}}
AWS = {"name": "a", "awsElasticBlockStore": {"volumeID": "foo"}}
AWS2 = {"name": "b", "awsElasticBlockStore": {"volumeID": "bar"}}
RBD = {"name": "a", "rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"name": "b", "rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {
    "name": "a",
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0},
}
ISCSI2 = {
    "name": "b",
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0},
}
NO_RESTRICTION = {"name": "volume with no restriction", "emptyDir": {}}


def with_volumes(*volumes: dict[str, Any], name: str = "p", node_name: str = "") -> Any:
    return pod(name, spec={"volumes": list(volumes)}, node_name=node_name)


def disk_cases(vol: dict[str, Any], other: dict[str, Any]) -> list[Any]:
    """The four cases each disk kind's table has."""
    return [
        ("nothing", pod("p"), [], None),
        ("one state", pod("p"), [vol], None),
        ("same state", with_volumes(vol), [vol], DISK),
        ("different state", with_volumes(other), [vol], None),
    ]


CASES = [
    *(("GCE " + c[0], *c[1:]) for c in disk_cases(GCE, GCE2)),
    ("GCE pod with a volume that doesn't have restrictions", with_volumes(NO_RESTRICTION), [], None),
    *(("AWS " + c[0], *c[1:]) for c in disk_cases(AWS, AWS2)),
    *(("RBD " + c[0], *c[1:]) for c in disk_cases(RBD, RBD2)),
    *(("ISCSI " + c[0], *c[1:]) for c in disk_cases(ISCSI, ISCSI2)),
]


@pytest.mark.parametrize(("incoming", "existing", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_disk_conflicts(incoming: Any, existing: list[dict[str, Any]], want: tuple[str, ...] | None) -> None:
    pods = [with_volumes(*existing, name="existing", node_name="node-1")] if existing else []
    cluster = state([node("node-1")], pods)
    assert filter_status(incoming, cluster, "node-1", rule="VolumeRestrictions") == status(want)


def test_read_only_gce_disks_do_not_conflict() -> None:
    """isVolumeConflict: the same GCE disk mounted read-only by both pods is allowed."""
    ro = {"name": "a", "gcePersistentDisk": {"pdName": "foo", "readOnly": True}}
    cluster = state([node("node-1")], [with_volumes(ro, name="existing", node_name="node-1")])
    assert filter_reasons(with_volumes(ro), cluster, "node-1", rule="VolumeRestrictions") is None


def claims(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in names]


def claimant(name: str, *claim_names: str, node_name: str = "") -> Any:
    return pod(name, spec={"volumes": claims(*claim_names)}, node_name=node_name)


RWOP_1 = pvc("claim-with-rwop-1", spec={"accessModes": ["ReadWriteOncePod"]})
RWOP_2 = pvc("claim-with-rwop-2", spec={"accessModes": ["ReadWriteOncePod"]})
RWX = pvc("claim-with-rwx", spec={"accessModes": ["ReadWriteMany"]})

ACCESS_CASES = [
    ("nothing", pod("p"), [], [], None),
    (
        "failed to get PVC",
        claimant("pod-with-one-pvc", "claim-with-rwop-1"),
        [],
        [],
        ('persistentvolumeclaim "claim-with-rwop-1" not found',),
    ),
    (
        "no access mode conflict",
        claimant("pod-with-one-pvc", "claim-with-rwop-1"),
        [claimant("pod-with-rwx", "claim-with-rwx", node_name="node-1")],
        [RWOP_1, RWX],
        None,
    ),
    (
        "access mode conflict, unschedulable",
        claimant("pod-with-one-conflict", "claim-with-rwop-1"),
        [
            claimant("pod-with-one-pvc", "claim-with-rwop-1", node_name="node-1"),
            claimant("pod-with-rwx", "claim-with-rwx", node_name="node-1"),
        ],
        [RWOP_1, RWX],
        RWOP,
    ),
    (
        "two conflicts, unschedulable",
        claimant("pod-with-two-conflicts", "claim-with-rwop-1", "claim-with-rwop-2"),
        [
            claimant("pod-with-two-pvcs", "claim-with-rwop-1", "claim-with-rwop-2", node_name="node-1"),
            claimant("pod-with-rwx", "claim-with-rwx", node_name="node-1"),
        ],
        [RWOP_1, RWOP_2, RWX],
        RWOP,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "pvcs", "want"), [pytest.param(*c[1:], id=c[0]) for c in ACCESS_CASES]
)
def test_access_mode_conflicts(incoming: Any, existing: list[Any], pvcs: list[Any], want: Any) -> None:
    cluster = state([node("node-1")], existing, storage=storage(claims=pvcs))
    assert filter_status(incoming, cluster, "node-1", rule="VolumeRestrictions") == status(want)


def test_read_write_once_pod_claim_in_use_on_another_node_rejects_every_node() -> None:
    """The ReadWriteOncePod check is cluster-wide (IsPVCUsedByPods), not per node."""
    cluster = state(
        [node("node-1"), node("node-2")],
        [claimant("user", "claim-with-rwop-1", node_name="node-2")],
        storage=storage(claims=[RWOP_1]),
    )
    incoming = claimant("p", "claim-with-rwop-1")
    assert filter_reasons(incoming, cluster, "node-1", rule="VolumeRestrictions") == RWOP
    assert filter_reasons(incoming, cluster, "node-2", rule="VolumeRestrictions") == RWOP
