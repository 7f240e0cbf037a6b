"""VolumeZone Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/volumezone/volume_zone_test.go: TestSingleZone, TestMultiZone and
TestWithBinding, through the VolumeZone filter of rules/default.rules. A case upstream expects
PreFilter to fail fails the filter on the node with the same message (rulesched reports a
PreFilter failure on every node).

Adapted, not skipped:
- "unbound volume immediate binding mode": upstream's fake class has no volumeBindingMode and
  expects ``VolumeBindingMode not set for StorageClass "Class_Immediate"``. The API server always
  defaults the field to Immediate (and rulesched's decoder does the same), so the class here is
  Immediate and the message is the next check's, ``PersistentVolume had no name``.
- "unbound volume no storage class": upstream's fake lister spells the resource plural
  (``storageclasses.storage.k8s.io``); kube-scheduler's real listers, which rulesched follows,
  say ``storageclass.storage.k8s.io "Class_0" not found``.
Skipped: the isSchedulableAfter* (queueing hint) tests and the benchmark: rulesched's queue has no
per-plugin hints.
"""

from __future__ import annotations

from collections.abc import Mapping

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

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
CONFLICT = ("node(s) had no available volume zone",)


def unresolvable(want: tuple[str, ...] | None) -> tuple[str, tuple[str, ...]] | None:
    """Upstream's status: every VolumeZone failure is UnschedulableAndUnresolvable."""
    return None if want is None else (UNRESOLVABLE, want)


def with_claim(claim: str) -> object:
    return pod("pod_1", spec={"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]})


SINGLE = storage(
    volumes=[
        pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
        pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
        pv("Vol_3", {BETA_REGION: "us-west1"}),
        pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
        pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
        pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
    ],
    claims=[
        pvc("PVC_1", spec={"volumeName": "Vol_1"}),
        pvc("PVC_2", spec={"volumeName": "Vol_2"}),
        pvc("PVC_3", spec={"volumeName": "Vol_3"}),
        pvc("PVC_4", spec={"volumeName": "Vol_not_exist"}),
        pvc("PVC_Stable_1", spec={"volumeName": "Vol_Stable_1"}),
        pvc("PVC_Stable_2", spec={"volumeName": "Vol_Stable_2"}),
        pvc("PVC_Stable_3", spec={"volumeName": "Vol_Stable_3"}),
    ],
)

U = {"uselessLabel": "none"}
SINGLE_CASES = [
    ("pod without volume", pod("pod_1"), {BETA_ZONE: "us-west1-a"}, None),
    ("node without labels", with_claim("PVC_1"), {}, None),
    ("beta zone label matched", with_claim("PVC_1"), {BETA_ZONE: "us-west1-a", **U}, None),
    ("beta region label matched", with_claim("PVC_2"), {BETA_REGION: "us-west1", **U}, None),
    ("beta region label doesn't match", with_claim("PVC_2"), {BETA_REGION: "no_us-west1", **U}, CONFLICT),
    ("beta zone label doesn't match", with_claim("PVC_1"), {BETA_ZONE: "no_us-west1-a", **U}, CONFLICT),
    ("zone label matched", with_claim("PVC_Stable_1"), {ZONE: "us-west1-a", **U}, None),
    ("region label matched", with_claim("PVC_Stable_2"), {REGION: "us-west1", **U}, None),
    ("region label doesn't match", with_claim("PVC_Stable_2"), {REGION: "no_us-west1", **U}, CONFLICT),
    ("zone label doesn't match", with_claim("PVC_Stable_1"), {ZONE: "no_us-west1-a", **U}, CONFLICT),
    ("pv with zone and region, node with only zone", with_claim("PVC_Stable_3"), {ZONE: "us-west1-a"}, CONFLICT),
    ("pv with zone,node with beta zone", with_claim("PVC_Stable_1"), {BETA_ZONE: "us-west1-a"}, CONFLICT),
    ("pv with beta label,node with ga label, matched", with_claim("PVC_1"), {ZONE: "us-west1-a"}, None),
    ("pv with beta label,node with ga label, don't match", with_claim("PVC_1"), {ZONE: "us-west1-b"}, CONFLICT),
]


@pytest.mark.parametrize(("incoming", "labels", "want"), [pytest.param(*c[1:], id=c[0]) for c in SINGLE_CASES])
def test_single_zone(incoming: object, labels: Mapping[str, str], want: tuple[str, ...] | None) -> None:
    cluster = state([node("host1", labels)], storage=SINGLE)
    assert filter_status(incoming, cluster, "host1", rule="VolumeZone") == unresolvable(want)  # type: ignore[arg-type]


MULTI = storage(
    volumes=[
        pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
        pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
        pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
        pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
        pv("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
    ],
    claims=[
        pvc("PVC_1", spec={"volumeName": "Vol_1"}),
        pvc("PVC_2", spec={"volumeName": "Vol_2"}),
        pvc("PVC_3", spec={"volumeName": "Vol_3"}),
        pvc("PVC_4", spec={"volumeName": "Vol_not_exist"}),
        pvc("PVC_Stable_1", spec={"volumeName": "Vol_Stable_1"}),
        pvc("PVC_Stable_2", spec={"volumeName": "Vol_Stable_2"}),
    ],
)

MULTI_CASES = [
    ("node without labels", with_claim("PVC_3"), {}, None),
    ("beta zone label matched", with_claim("PVC_3"), {BETA_ZONE: "us-west1-a", **U}, None),
    ("beta zone label doesn't match", with_claim("PVC_1"), {BETA_ZONE: "us-west1-b", **U}, CONFLICT),
    ("zone label matched", with_claim("PVC_Stable_2"), {ZONE: "us-west1-a", **U}, None),
    ("zone label doesn't match", with_claim("PVC_Stable_1"), {ZONE: "us-west1-b", **U}, CONFLICT),
]


@pytest.mark.parametrize(("incoming", "labels", "want"), [pytest.param(*c[1:], id=c[0]) for c in MULTI_CASES])
def test_multi_zone(incoming: object, labels: Mapping[str, str], want: tuple[str, ...] | None) -> None:
    cluster = state([node("host1", labels)], storage=MULTI)
    assert filter_status(incoming, cluster, "host1", rule="VolumeZone") == unresolvable(want)  # type: ignore[arg-type]


BINDING = storage(
    volumes=[pv("Vol_1", {BETA_ZONE: "us-west1-a"})],
    claims=[
        pvc("PVC_1", spec={"volumeName": "Vol_1"}),
        pvc("PVC_NoSC", spec={"storageClassName": "Class_0"}),
        pvc("PVC_EmptySC"),
        pvc("PVC_WaitSC", spec={"storageClassName": "Class_Wait"}),
        pvc("PVC_ImmediateSC", spec={"storageClassName": "Class_Immediate"}),
    ],
    classes=[storage_class("Class_Immediate"), storage_class("Class_Wait", mode="WaitForFirstConsumer")],
)

BINDING_CASES = [
    ("label zone failure domain matched", "PVC_1", None),
    (
        "unbound volume empty storage class",
        "PVC_EmptySC",
        ("PersistentVolumeClaim had no pv name and storageClass name",),
    ),
    ("unbound volume no storage class", "PVC_NoSC", ('storageclass.storage.k8s.io "Class_0" not found',)),
    ("unbound volume immediate binding mode", "PVC_ImmediateSC", ("PersistentVolume had no name",)),
    ("unbound volume wait binding mode", "PVC_WaitSC", None),
]


@pytest.mark.parametrize(("claim", "want"), [pytest.param(*c[1:], id=c[0]) for c in BINDING_CASES])
def test_with_binding(claim: str, want: tuple[str, ...] | None) -> None:
    cluster = state([node("host1", {BETA_ZONE: "us-west1-a", **U})], storage=BINDING)
    assert filter_status(with_claim(claim), cluster, "host1", rule="VolumeZone") == unresolvable(want)  # type: ignore[arg-type]


def test_claim_bound_to_a_missing_volume() -> None:
    """PVC_4 is in upstream's listers but no case uses it: the PreFilter's lookup failure."""
    cluster = state([node("host1", {ZONE: "us-west1-a"})], storage=SINGLE)
    assert filter_reasons(with_claim("PVC_4"), cluster, "host1", rule="VolumeZone") == (  # type: ignore[arg-type]
        'persistentvolume "Vol_not_exist" not found',
    )
