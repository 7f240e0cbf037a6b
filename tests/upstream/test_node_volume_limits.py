"""NodeVolumeLimits (CSI) Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodevolumelimits/csi_test.go (TestCSILimits) through the
NodeVolumeLimits filter of rules/default.rules, with upstream's fixtures: for each driver D the
volumes and bound claims ``csi-D-0`` .. ``csi-D-3`` (CSI handle = name), ``csi-4`` (unbound, class
``csi-sc``), ``csi-5`` (no class), ``csi-6`` (class ``csi-sc``, bound to a missing volume), the
class ``csi-sc`` provisioned by the first driver, and the node's CSINode with every driver at
``maxVols`` ("csinode") or without limits ("csinode-with-no-limit"). Upstream's pods have no
names; here each has one (the store keys pods by name).

Skipped, with reasons:
- "should count VolumeAttachments towards volume limit when no pods exist": rulesched does not
  read VolumeAttachment objects; only volumes of pods on the node count. (The companion case,
  "... does not exceed limit", passes without them and is ported.)
- The eleven in-tree migration cases ("should count in-tree volumes if migration is enabled",
  "nil csi node", "should count unbound in-tree volumes ...", "should not limit pod if volume used
  does not report limits", "should not count non-migratable in-tree volumes", "should count
  in-tree inline volumes ...", the three "mixed volumes" cases, "should count in-tree and csi
  volumes ... (when scheduling csi volumes)", "don't skip Filter when the pod has inline
  migratable volumes"): they need the CSI translation library (in-tree EBS/GCE PD volumes counted
  as their CSI driver's); rulesched counts CSI volumes only.
- "ephemeral volume not owned": rulesched does not check that a generic ephemeral volume's claim
  is owned by the pod.
- The QHint tests: rulesched's queue has no per-plugin hints.
Adapted: the missing ephemeral claim's message names the resource as kube-scheduler's real
listers do (``persistentvolumeclaim "abc-xyz" not found``); upstream's fake lister says
``persistentvolumeclaims``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.upstream.harness import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    csinode,
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

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"


def status(want: tuple[str, ...] | None) -> tuple[str, tuple[str, ...]] | None:
    """Upstream's status: a claim that cannot be looked up is UnschedulableAndUnresolvable, any
    other failure (a disk or claim another pod holds, a full node) plain Unschedulable."""
    if want is None:
        return None
    return (UNRESOLVABLE if any(" not found" in r for r in want) else UNSCHEDULABLE), want


NODE = "node-for-max-pd-test-1"
EXCEEDED = ("node(s) exceed max volume count",)


def claimant(name: str, *claims: str, namespace: str = "default") -> Any:
    return pod(
        name,
        namespace=namespace,
        spec={"volumes": [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]},
    )


def ephemeral(name: str, *volumes: str, uid: str = "") -> Any:
    return pod(name, namespace="test", spec={"volumes": [{"name": v, "ephemeral": {}} for v in volumes]}, uid=uid)


def running(p: Any) -> Any:
    return dataclasses.replace(p, node_name=NODE, phase="Running")


RUNNING = claimant("running", f"csi-{EBS}-3")
PENDING_VOLUME = claimant("pending-volume", "csi-4")
UNBOUND_2 = claimant("unbound-pvc-2", "csi-4")
MISSING_PV = claimant("missing-pv", "csi-6")
NO_SC = claimant("no-sc", "csi-5")
GCE_TWO = claimant("gce-two", f"csi-{GCE}-1", f"csi-{GCE}-2")
EBS_ONE = claimant("ebs-one", f"csi-{EBS}-0")
EBS_TWO = claimant("ebs-two", f"csi-{EBS}-1", f"csi-{EBS}-2")
EPHEMERAL = ephemeral("abc", "xyz", uid="12345")
EPHEMERAL_TWO = ephemeral("abc2", "x", "y", uid="12345II")
CONFIG_AND_SECRET = pod(
    "config", spec={"volumes": [{"name": "c", "configMap": {"name": "c"}}, {"name": "s", "secret": {}}]}
)
PVC_WITH_CONFIG = pod(
    "pvc-config",
    spec={
        "volumes": [
            {"name": "c", "configMap": {"name": "c"}},
            {"name": "s", "secret": {}},
            {"name": "p", "persistentVolumeClaim": {"claimName": f"csi-{EBS}-0"}},
        ]
    },
)
EPHEMERAL_WITH_CONFIG = pod(
    "abc",
    namespace="test",
    spec={
        "volumes": [
            {"name": "c", "configMap": {"name": "c"}},
            {"name": "s", "secret": {}},
            {"name": "xyz", "ephemeral": {}},
        ]
    },
)
EPHEMERAL_CLAIM = pvc("abc-xyz", namespace="test", spec={"storageClassName": "csi-sc"})
EPHEMERAL_X = pvc("abc2-x", namespace="test", spec={"storageClassName": "csi-sc"})
EPHEMERAL_Y = pvc("abc2-y", namespace="test", spec={"storageClassName": "csi-sc"})


def fixtures(drivers: list[str], max_vols: int, limit_source: str, extra_claims: list[Any]) -> Any:
    volumes, claims = [], []
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            volumes.append(pv(name, spec={"csi": {"driver": driver, "volumeHandle": name}}))
            claims.append(pvc(name, spec={"volumeName": name}))
    claims += [
        pvc("csi-4", spec={"storageClassName": "csi-sc"}),
        pvc("csi-5"),
        pvc("csi-6", spec={"storageClassName": "csi-sc", "volumeName": "missing-in-action"}),
        *extra_claims,
    ]
    limits: dict[str, int | None] = {d: (max_vols if limit_source == "csinode" else None) for d in drivers}
    return storage(volumes, claims, [storage_class("csi-sc", provisioner=drivers[0])], [csinode(NODE, limits)])


# (name, new pod, existing pods, extra claims, maxVols, drivers, limit source, want)
CASES = [
    (
        "should schedule pod when VolumeAttachments count does not exceed limit",
        EBS_ONE,
        [],
        [],
        2,
        [EBS],
        "csinode",
        None,
    ),
    ("fits when node volume limit >= new pods CSI volume", EBS_ONE, [RUNNING, EBS_TWO], [], 4, [EBS], "csinode", None),
    (
        "doesn't when node volume limit <= pods CSI volume",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "should when driver does not support volume limits",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode-with-no-limit",
        None,
    ),
    (
        "count pending PVCs towards volume limit <= pods CSI volume",
        EBS_ONE,
        [PENDING_VOLUME, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "count multiple pending pvcs towards volume limit >= pods CSI volume",
        EBS_ONE,
        [PENDING_VOLUME, UNBOUND_2, EBS_TWO],
        [],
        4,
        [EBS],
        "csinode",
        None,
    ),
    (
        "should count PVCs with invalid PV name but valid SC",
        EBS_ONE,
        [MISSING_PV, EBS_TWO],
        [],
        2,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    ("don't count pvcs with missing SC towards volume limit", EBS_ONE, [RUNNING, NO_SC], [], 2, [EBS], "csinode", None),
    (
        "count pvcs with the same type towards volume limit",
        EBS_ONE,
        [GCE_TWO, EBS_TWO],
        [],
        2,
        [EBS, GCE],
        "csinode",
        EXCEEDED,
    ),
    (
        "don't count pvcs with different type towards volume limit",
        GCE_TWO,
        [EBS_TWO, RUNNING],
        [],
        2,
        [EBS, GCE],
        "csinode",
        None,
    ),
    (
        "ephemeral volume missing",
        EPHEMERAL,
        [],
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',),
    ),
    ("ephemeral volume unbound", EPHEMERAL, [], [EPHEMERAL_CLAIM], 0, [EBS], "csinode-with-no-limit", None),
    (
        "ephemeral doesn't when node volume limit <= pods CSI volume",
        EPHEMERAL,
        [RUNNING, EBS_TWO],
        [EPHEMERAL_CLAIM],
        2,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "ephemeral doesn't when node volume limit <= pods ephemeral CSI volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL_TWO],
        [EPHEMERAL_X, EPHEMERAL_Y],
        2,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume, ephemeral disabled",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        3,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "persistent doesn't when node volume limit <= pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        3,
        [EBS],
        "csinode",
        EXCEEDED,
    ),
    (
        "persistent okay when node volume limit > pods ephemeral CSI volume + persistent volume",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        5,
        [EBS],
        "csinode",
        None,
    ),
    ("skip Filter when the pod only uses secrets and configmaps", CONFIG_AND_SECRET, [], [], 2, [EBS], "csinode", None),
    ("don't skip Filter when the pod has pvcs", PVC_WITH_CONFIG, [], [], 2, [EBS], "csinode", None),
    (
        "don't skip Filter when the pod has ephemeral volumes",
        EPHEMERAL_WITH_CONFIG,
        [],
        [],
        0,
        [EBS],
        "csinode-with-no-limit",
        ('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',),
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "extra", "max_vols", "drivers", "source", "want"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_csi_limits(
    incoming: Any, existing: list[Any], extra: list[Any], max_vols: int, drivers: list[str], source: str, want: Any
) -> None:
    cluster = state([node(NODE)], [running(p) for p in existing], storage=fixtures(drivers, max_vols, source, extra))
    assert filter_status(incoming, cluster, NODE, rule="NodeVolumeLimits") == status(want)


def test_limit_from_node_allocatable() -> None:
    """Without a CSINode limit, the node's attachable-volumes-csi-DRIVER allocatable applies."""
    limited = node(NODE, allocatable={"cpu": "4", "memory": "8Gi", "pods": "110", f"attachable-volumes-csi-{EBS}": "2"})
    cluster = state([limited], [running(RUNNING), running(EBS_TWO)], storage=fixtures([EBS], 0, "none", []))
    assert filter_reasons(EBS_ONE, cluster, NODE, rule="NodeVolumeLimits") == EXCEEDED
