"""VolumeBinding's binder, ported from kube-scheduler's
pkg/scheduler/framework/plugins/volumebinding/binder_test.go: TestFindPodVolumesWithoutProvisioning
and TestFindPodVolumesWithProvisioning. Each scenario's reasons (or error) are checked through the
VolumeBinding filter of rules/default.rules on upstream's test node (labelled ``nodeKey: node1``),
and its expected static bindings and dynamic provisions through
:func:`rulesched.semantics.volume_binding.plan_bindings`, what the store records when the pod is
assumed. A scenario upstream expects to fail with an error fails the filter with the message
that error carries (upstream's test helper turns unbound immediate claims into
``pod has unbound immediate PersistentVolumeClaims``).

Fixtures as upstream's makeTestPVC/makeTestPV: claims in namespace ``testns`` sharing the UID
``pvc-uid``, ``waitClass`` (WaitForFirstConsumer, ``kubernetes.io/no-provisioner``),
``immediateClass``, ``waitClassWithProvisioner`` (``test-provisioner``, allowed where ``nodeKey``
is ``node1`` or ``reference-value``) and ``topoMismatchClass`` (only ``reference-value``); a PV
on a node has node affinity ``nodeKey In [node]``.

Skipped, with reasons:
- the "CSIDriver with capacity tracking" and "... without capacity tracking" runs of every
  scenario: rulesched reads neither CSIDriver nor CSIStorageCapacity objects (storage capacity
  tracking); the "no CSIDriver" run is ported;
- "generic-ephemeral,wrong-pvc": rulesched does not check that a generic ephemeral volume's
  claim is owned by the pod;
- "two-unbound-pvcs,partial-match": its reasons are ported, not its expected binding of the
  matched claim, which upstream keeps in a failing node's cache and rulesched does not record;
- TestFindPodVolumesWithCSIMigration: needs in-tree to CSI translation;
- TestAssumePodVolumes, TestRevertAssumedPodVolumes, TestBindAPIUpdate, TestCheckBindings and
  the other API-update tests: they test the binder's cache and API calls, which rulesched's store
  and ``run`` binder replace (tests/test_volumes_store.py covers assume and revert).
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.semantics.volume_binding import Decision, plan_bindings
from tests.upstream.harness import filter_reasons, node, pod, pv, pvc, state, storage, storage_class

KEY = "nodeKey"
WAIT = "waitClass"
IMMEDIATE = "immediateClass"
PROVISIONED = "waitClassWithProvisioner"
TOPO_MISMATCH = "topoMismatchClass"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

CLASSES = [
    storage_class(
        PROVISIONED,
        provisioner="test-provisioner",
        mode="WaitForFirstConsumer",
        topologies=[{"matchLabelExpressions": [{"key": KEY, "values": ["node1", "reference-value"]}]}],
    ),
    storage_class(IMMEDIATE),
    storage_class(WAIT, provisioner="kubernetes.io/no-provisioner", mode="WaitForFirstConsumer"),
    storage_class(
        TOPO_MISMATCH,
        provisioner="test-provisioner",
        mode="WaitForFirstConsumer",
        topologies=[{"matchLabelExpressions": [{"key": KEY, "values": ["reference-value"]}]}],
    ),
]


def make_test_pvc(name: str, size: str, state_: str, pv_name: str, cls: str, selected_node: str = "") -> Any:
    """makeTestPVC: ``state_`` is unbound, prebound (volumeName only), bound (and completed) or
    selected (the selected-node annotation)."""
    annotations = {}
    spec: dict[str, Any] = {"storageClassName": cls, "resources": {"requests": {"storage": size}}}
    if state_ == "selected":
        annotations["volume.kubernetes.io/selected-node"] = selected_node
    if state_ == "bound":
        annotations["pv.kubernetes.io/bind-completed"] = "yes"
    if state_ in ("bound", "prebound"):
        spec["volumeName"] = pv_name
    return pvc(name, namespace="testns", spec=spec, annotations=annotations, uid="pvc-uid")


def make_test_pv(name: str, on_node: str, capacity: str, bound_to: Any, cls: str) -> Any:
    spec: dict[str, Any] = {"storageClassName": cls, "capacity": {"storage": capacity}}
    if on_node:
        expr = {"key": KEY, "operator": "In", "values": [on_node]}
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}}
    if bound_to is not None:
        spec["claimRef"] = {"name": bound_to.name, "namespace": bound_to.namespace, "uid": bound_to.uid}
    return pv(name, spec=spec)


unboundPVC = make_test_pvc("unbound-pvc", "1G", "unbound", "", WAIT)
unboundPVC2 = make_test_pvc("unbound-pvc2", "5G", "unbound", "", WAIT)
preboundPVC = make_test_pvc("prebound-pvc", "1G", "prebound", "pv-node1a", WAIT)
boundPVC = make_test_pvc("bound-pvc", "1G", "bound", "pv-bound", WAIT)
immediateUnboundPVC = make_test_pvc("immediate-unbound-pvc", "1G", "unbound", "", IMMEDIATE)
immediateBoundPVC = make_test_pvc("immediate-bound-pvc", "1G", "bound", "pv-bound-immediate", IMMEDIATE)
provisionedPVC = make_test_pvc("provisioned-pvc", "1Gi", "unbound", "", PROVISIONED)
noProvisionerPVC = make_test_pvc("no-provisioner-pvc", "1Gi", "unbound", "", WAIT)
topoMismatchPVC = make_test_pvc("topo-mismatch-pvc", "1Gi", "unbound", "", TOPO_MISMATCH)
selectedNodePVC = make_test_pvc("provisioned-pvc", "1Gi", "selected", "", PROVISIONED, selected_node="node1")
genericPVC = make_test_pvc("test-pod-test-volume", "1G", "bound", "pv-bound", WAIT)

pvNode1a = make_test_pv("pv-node1a", "node1", "5G", None, WAIT)
pvNode1b = make_test_pv("pv-node1b", "node1", "10G", None, WAIT)
pvNode2 = make_test_pv("pv-node2", "node2", "1G", None, WAIT)
pvBound = make_test_pv("pv-bound", "node1", "1G", boundPVC, WAIT)
pvNode1aBound = make_test_pv("pv-node1a", "node1", "5G", unboundPVC, WAIT)
pvBoundImmediate = make_test_pv("pv-bound-immediate", "node1", "1G", immediateBoundPVC, IMMEDIATE)
pvBoundImmediateNode2 = make_test_pv("pv-bound-immediate", "node2", "1G", immediateBoundPVC, IMMEDIATE)
pvBoundGeneric = make_test_pv("pv-bound", "node1", "1G", genericPVC, WAIT)


def claims_pod(*claims: Any) -> Any:
    volumes = [{"name": c.name, "persistentVolumeClaim": {"claimName": c.name}} for c in claims]
    return pod("test-pod", namespace="testns", spec={"volumes": volumes})


def ephemeral_pod(volume: str) -> Any:
    return pod("test-pod", namespace="testns", spec={"volumes": [{"name": volume, "ephemeral": {}}]})


def static(claim: Any, volume: Any) -> Decision:
    return Decision(claim.key, volume.name)


def provision(claim: Any) -> Decision:
    return Decision(claim.key)


# (name, pod, claims in the cache, volumes, reasons or error, expected decisions)
WITHOUT_PROVISIONING = [
    ("no-volumes", pod("test-pod", namespace="testns"), [], [], None, []),
    (
        "no-pvcs",
        pod("test-pod", namespace="testns", spec={"volumes": [{"name": "e", "emptyDir": {}}]}),
        [],
        [],
        None,
        [],
    ),
    ("pvc-not-found", claims_pod(boundPVC), [], [], ['persistentvolumeclaim "bound-pvc" not found'], []),
    ("bound-pvc", claims_pod(boundPVC), [boundPVC], [pvBound], None, []),
    ("bound-pvc,pv-not-exists", claims_pod(boundPVC), [boundPVC], [], [PV_NOT_EXIST], []),
    ("prebound-pvc", claims_pod(preboundPVC), [preboundPVC], [pvNode1aBound], [UNBOUND_IMMEDIATE], []),
    (
        "unbound-pvc,pv-same-node",
        claims_pod(unboundPVC),
        [unboundPVC],
        [pvNode2, pvNode1a, pvNode1b],
        None,
        [static(unboundPVC, pvNode1a)],
    ),
    ("unbound-pvc,pv-different-node", claims_pod(unboundPVC), [unboundPVC], [pvNode2], [BIND_CONFLICT], []),
    (
        "two-unbound-pvcs",
        claims_pod(unboundPVC, unboundPVC2),
        [unboundPVC, unboundPVC2],
        [pvNode1a, pvNode1b],
        None,
        [static(unboundPVC, pvNode1a), static(unboundPVC2, pvNode1b)],
    ),
    (
        "two-unbound-pvcs,order-by-size",
        claims_pod(unboundPVC2, unboundPVC),
        [unboundPVC2, unboundPVC],
        [pvNode1a, pvNode1b],
        None,
        [static(unboundPVC, pvNode1a), static(unboundPVC2, pvNode1b)],
    ),
    (
        "two-unbound-pvcs,partial-match",
        claims_pod(unboundPVC, unboundPVC2),
        [unboundPVC, unboundPVC2],
        [pvNode1a],
        [BIND_CONFLICT],
        [],
    ),
    (
        "one-bound,one-unbound",
        claims_pod(unboundPVC, boundPVC),
        [unboundPVC, boundPVC],
        [pvBound, pvNode1a],
        None,
        [static(unboundPVC, pvNode1a)],
    ),
    (
        "one-bound,one-unbound,no-match",
        claims_pod(unboundPVC, boundPVC),
        [unboundPVC, boundPVC],
        [pvBound, pvNode2],
        [BIND_CONFLICT],
        [],
    ),
    (
        "one-prebound,one-unbound",
        claims_pod(unboundPVC, preboundPVC),
        [unboundPVC, preboundPVC],
        [pvNode1a, pvNode1b],
        [UNBOUND_IMMEDIATE],
        [],
    ),
    ("immediate-bound-pvc", claims_pod(immediateBoundPVC), [immediateBoundPVC], [pvBoundImmediate], None, []),
    (
        "immediate-bound-pvc-wrong-node",
        claims_pod(immediateBoundPVC),
        [immediateBoundPVC],
        [pvBoundImmediateNode2],
        [NODE_CONFLICT],
        [],
    ),
    ("immediate-unbound-pvc", claims_pod(immediateUnboundPVC), [immediateUnboundPVC], [], [UNBOUND_IMMEDIATE], []),
    (
        "immediate-unbound-pvc,delayed-mode-bound",
        claims_pod(immediateUnboundPVC, boundPVC),
        [immediateUnboundPVC, boundPVC],
        [pvBound],
        [UNBOUND_IMMEDIATE],
        [],
    ),
    (
        "immediate-unbound-pvc,delayed-mode-unbound",
        claims_pod(immediateUnboundPVC, unboundPVC),
        [immediateUnboundPVC, unboundPVC],
        [],
        [UNBOUND_IMMEDIATE],
        [],
    ),
    (
        "generic-ephemeral,no-pvc",
        ephemeral_pod("no-such-pvc"),
        [],
        [],
        ['waiting for ephemeral volume controller to create the persistentvolumeclaim "test-pod-no-such-pvc"'],
        [],
    ),
    ("generic-ephemeral,with-pvc", ephemeral_pod("test-volume"), [genericPVC], [pvBoundGeneric], None, []),
]

WITH_PROVISIONING = [
    ("one-provisioned", claims_pod(provisionedPVC), [provisionedPVC], [], None, [provision(provisionedPVC)]),
    (
        "two-unbound-pvcs,one-matched,one-provisioned",
        claims_pod(unboundPVC, provisionedPVC),
        [unboundPVC, provisionedPVC],
        [pvNode1a],
        None,
        [static(unboundPVC, pvNode1a), provision(provisionedPVC)],
    ),
    (
        "one-bound,one-provisioned",
        claims_pod(boundPVC, provisionedPVC),
        [boundPVC, provisionedPVC],
        [pvBound],
        None,
        [provision(provisionedPVC)],
    ),
    (
        "one-binding,one-selected-node",
        claims_pod(boundPVC, selectedNodePVC),
        [boundPVC, selectedNodePVC],
        [pvBound],
        None,
        [provision(selectedNodePVC)],
    ),
    ("immediate-unbound-pvc", claims_pod(immediateUnboundPVC), [immediateUnboundPVC], [], [UNBOUND_IMMEDIATE], []),
    (
        "one-immediate-bound,one-provisioned",
        claims_pod(immediateBoundPVC, provisionedPVC),
        [immediateBoundPVC, provisionedPVC],
        [pvBoundImmediate],
        None,
        [provision(provisionedPVC)],
    ),
    ("invalid-provisioner", claims_pod(noProvisionerPVC), [noProvisionerPVC], [], [BIND_CONFLICT], []),
    ("volume-topology-unsatisfied", claims_pod(topoMismatchPVC), [topoMismatchPVC], [], [BIND_CONFLICT], []),
]


@pytest.mark.parametrize(
    ("incoming", "claims", "volumes", "reasons", "decisions"),
    [pytest.param(*c[1:], id=c[0]) for c in (*WITHOUT_PROVISIONING, *WITH_PROVISIONING)],
)
def test_find_pod_volumes(
    incoming: Any, claims: list[Any], volumes: list[Any], reasons: list[str] | None, decisions: list[Decision]
) -> None:
    cluster = state([node("node1", {KEY: "node1"})], storage=storage(volumes, claims, CLASSES))
    got = filter_reasons(incoming, cluster, "node1", rule="VolumeBinding")
    assert got == (None if reasons is None else tuple(reasons))
    info = cluster.node_view("node1")
    assert plan_bindings(incoming, cluster.storage, info) == decisions
