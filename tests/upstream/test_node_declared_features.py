"""NodeDeclaredFeatures Filter (GA in 1.37), ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodedeclaredfeatures/nodedeclaredfeatures_test.go (TestFilter) at
v1.37.2, and the inference the plugin's PreFilter asks of component-helpers'
nodedeclaredfeatures registry (features/*/..._test.go) for the features it infers for scheduling.

Upstream's Filter cases set the PreFilter's requirements by hand (featureA, B, C of a test
registry); here a pod's requirements are what it asks for, so featureA stands for
RestartAllContainersOnContainerExits (a container restart rule), featureB for
UserNamespacesHostNetworkSupport (hostNetwork with hostUsers: false) and featureC for
VolumeBindMountOptions (a volume mount's bindMountOptions). Not ported: "plugin disabled" (the
gate is locked on in 1.37) and "Error getting pre-filter state" (no PreFilter state here).
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.model.decode import decode_node
from tests.upstream.harness import UNRESOLVABLE, filter_status, pod, state

A, B, C = "RestartAllContainersOnContainerExits", "UserNamespacesHostNetworkSupport", "VolumeBindMountOptions"
REASON = "node(s) didn't match Pod's required features"


def _pod(*features: str) -> Any:
    container: dict[str, Any] = {"name": "c", "image": "x"}
    spec: dict[str, Any] = {"containers": [container]}
    if A in features:
        container["restartPolicyRules"] = [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ]
    if B in features:
        spec.update(hostNetwork=True, hostUsers=False)
    if C in features:
        container["volumeMounts"] = [{"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}]
    return pod("test-pod", spec=spec)


def _node(*declared: str) -> Any:
    obj = {"metadata": {"name": "node-1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
    if declared:
        obj["status"]["declaredFeatures"] = list(declared)  # type: ignore[index]
    return decode_node(obj, "test")


CASES = [
    ("Node matches requirements", [A], [A, B], None),
    ("Node does not match requirements", [A], [B], REASON),
    ("Node with multiple features, pod requires subset", [A, C], [A, B, C], None),
    ("Node has no declared features", [A], [], REASON),
    ("Node with some but not all required features", [A, B], [A], REASON),
]


@pytest.mark.parametrize(("requires", "declared", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_filter(requires: list[str], declared: list[str], want: str | None) -> None:
    status = filter_status(_pod(*requires), state([_node(*declared)]), "node-1", rule="NodeDeclaredFeatures")
    assert status == (None if want is None else (UNRESOLVABLE, (want,)))


@pytest.mark.parametrize(
    ("features", "want"),
    [
        pytest.param((), (), id="Pod with no requirements"),
        pytest.param((A,), (A,), id="restart rule RestartAllContainers"),
        pytest.param((B,), (B,), id="host network with user namespaces"),
        pytest.param((C,), (C,), id="bind mount options"),
        pytest.param((A, B, C), (A, B, C), id="Pod with multiple feature requirements"),
    ],
)
def test_infer_for_pod_scheduling(features: tuple[str, ...], want: tuple[str, ...]) -> None:
    assert _pod(*features).required_features == want


def test_host_network_alone_needs_nothing() -> None:
    # user_namespaces_host_network.go: both hostNetwork and hostUsers: false
    assert pod("p", spec={"hostNetwork": True}).required_features == ()
    assert pod("p", spec={"hostNetwork": True, "hostUsers": True}).required_features == ()


def test_a_pod_needing_nothing_is_not_filtered() -> None:
    assert filter_status(_pod(), state([_node()]), "node-1", rule="NodeDeclaredFeatures") is None
