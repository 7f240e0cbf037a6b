"""What the Eviction API answers (rulesched.semantics.disruption.EvictionLedger), which
preemption asks where evictions keep budgets (rulesched.scheduler.budgets.eviction_refused).

kube-apiserver 1.37.2's tables, pkg/registry/core/pod/storage/eviction_test.go (TestEvictionWithETCD
and TestEviction), each case named and run under the unhealthyPodEvictionPolicy values it runs
under there (None: the field unset). Pods and budgets are decoded from the API's objects, as the
informer decodes them (the Ready condition, status.currentHealthy, desiredHealthy, disruptedPods,
observedGeneration). Not ported: the cases about the request itself (a name in the URL that
differs, conflicts on delete, resource versions, dry runs), which say nothing of whether the
budget lets the pod go. Below them, cases that are rulesched's own.
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.errors import ObjectError
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.model.decode import decode_pdb, decode_pod
from rulesched.scheduler.budgets import eviction_refused
from rulesched.semantics.disruption import MAX_DISRUPTED_POD_SIZE, EvictionLedger

A_TRUE = {"matchLabels": {"a": "true"}}
ALL_POLICIES = (None, "IfHealthyBudget", "AlwaysAllow")
HEALTHY_POLICIES = (None, "IfHealthyBudget")  # upstream: "AlwaysAllow would terminate the pod"


def pod(
    name: str = "t1",
    phase: str | None = "Running",
    ready: bool | None = None,
    terminating: bool = False,
    labels: dict[str, str] | None = None,
) -> Pod:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": labels if labels is not None else {"a": "true"},
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-12-04T00:00:00Z"
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    body = {"kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "c", "image": "x"}]}, "status": status}
    return decode_pod(body, "test")


def budget(
    allowed: int,
    selector: dict[str, Any] | None = None,
    policy: str | None = None,
    current: int = 0,
    desired: int = 0,
    disrupted: int = 0,
    name: str = "foo",
    behind: bool = False,
) -> PodDisruptionBudget:
    spec: dict[str, Any] = {"selector": A_TRUE if selector is None else selector}
    if policy is not None:
        spec["unhealthyPodEvictionPolicy"] = policy
    status: dict[str, Any] = {"disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired}
    if disrupted:
        status["disruptedPods"] = {f"p{i}": "2026-12-04T00:00:00Z" for i in range(disrupted)}
    meta: dict[str, Any] = {"name": name, "namespace": "default", "generation": 2 if behind else 1}
    status["observedGeneration"] = 1
    return decode_pdb({"kind": "PodDisruptionBudget", "metadata": meta, "spec": spec, "status": status}, "test")


# (name, the pod, its budget's fields, the policies the case runs under, evicted)
UPSTREAM: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str | None, ...], bool]] = [
    # TestEvictionWithETCD
    ("matching pdbs with no disruptions allowed, pod running", {}, {"allowed": 0}, HEALTHY_POLICIES, False),
    (
        "matching pdbs with no disruptions allowed, pod pending",
        {"phase": "Pending"},
        {"allowed": 0},
        ALL_POLICIES,
        True,
    ),
    (
        "matching pdbs with no disruptions allowed, pod succeeded",
        {"phase": "Succeeded"},
        {"allowed": 0},
        ALL_POLICIES,
        True,
    ),
    ("matching pdbs with no disruptions allowed, pod failed", {"phase": "Failed"}, {"allowed": 0}, ALL_POLICIES, True),
    ("matching pdbs with disruptions allowed", {}, {"allowed": 1}, ALL_POLICIES, True),
    ("non-matching pdbs", {}, {"allowed": 0, "selector": {"matchLabels": {"b": "true"}}}, ALL_POLICIES, True),
    (
        "matching pdbs with no disruptions allowed, pod running, empty selector",
        {},
        {"allowed": 0, "selector": {}},
        HEALTHY_POLICIES,
        False,
    ),
    # TestEviction
    (
        "matching pdbs with no disruptions allowed, pod terminating",
        {"terminating": True},
        {"allowed": 0},
        ALL_POLICIES,
        True,
    ),
    (
        "matching pdbs with no disruptions allowed, pod running, pod healthy, unhealthy pod not ours",
        {"ready": True},
        {"allowed": 0, "current": 2, "desired": 2},
        ALL_POLICIES,
        False,
    ),
    (
        "matching pdbs with disruptions allowed, pod running, pod healthy, healthy pod ours, deletes pod by honoring the PDB",
        {"ready": True},
        {"allowed": 1, "current": 3, "desired": 3},
        ALL_POLICIES,
        True,
    ),
    (
        "matching pdbs with no disruptions allowed, pod running, pod unhealthy, unhealthy pod ours",
        {"ready": False},
        {"allowed": 0, "current": 2, "desired": 2},
        ALL_POLICIES,
        True,
    ),
    (
        "matching pdbs with no disruptions allowed, pod running, pod unhealthy, unhealthy pod ours, skips the PDB check and deletes",
        {"ready": False},
        {"allowed": 0},
        ("AlwaysAllow",),
        True,
    ),
    (
        "matching pdbs with no disruptions allowed, pod running, pod healthy, empty selector, pod not deleted by honoring the PDB",
        {"ready": True},
        {"allowed": 0, "selector": {}, "current": 3, "desired": 3},
        ALL_POLICIES,
        False,
    ),
    ("matching pdbs with negative disruptions allowed, pod running", {}, {"allowed": -1}, HEALTHY_POLICIES, False),
    (
        "matching pdbs with too many disrupted pods, pod running",
        {},
        {"allowed": 1, "disrupted": MAX_DISRUPTED_POD_SIZE + 1},
        HEALTHY_POLICIES,
        False,
    ),
]


@pytest.mark.parametrize(
    ("pod_fields", "budget_fields", "policy", "evicted"),
    [
        pytest.param(p, b, policy, want, id=f"{name} [{policy}]")
        for name, p, b, policies, want in UPSTREAM
        for policy in policies
    ],
)
def test_upstream_eviction_table(
    pod_fields: dict[str, Any], budget_fields: dict[str, Any], policy: str | None, evicted: bool
) -> None:
    victim, pdb = pod(**pod_fields), budget(**budget_fields, policy=policy)
    assert eviction_refused([victim], (pdb,)) is not evicted


# --- rulesched's own cases -----------------------------------------------------------------------


def test_a_budget_counts_down_the_evictions_before() -> None:
    """One disruption allowed: the first of two victims it covers goes, the second is refused
    (checkAndDecrement writes the budget's status: TestEvictionPDBStatus "pdb status is updated
    after eviction", 1 -> 0); a victim not Ready that the policy lets go counts nothing."""
    pdb = budget(1, current=3, desired=2)
    first, second = pod("t1", ready=True), pod("t2", ready=True)
    ledger = EvictionLedger()
    assert ledger.allows(first, [pdb]) is True
    assert ledger.allows(second, [pdb]) is False
    assert eviction_refused([first, second], (pdb,)) is True
    assert eviction_refused([pod("t0", ready=False), first], (pdb,)) is False


def test_two_budgets_covering_a_pod_refuse_it() -> None:
    """ "This pod has more than one PodDisruptionBudget, which the eviction subresource does not
    support." (500), whatever they allow."""
    two = (budget(5, name="one"), budget(5, name="two", selector={}))
    assert eviction_refused([pod(ready=True)], two) is True
    assert eviction_refused([pod(phase="Pending")], two) is False  # (canIgnorePDB comes first)


def test_a_budget_the_controller_has_not_caught_up_with_refuses() -> None:
    """status.observedGeneration behind metadata.generation: 429 until the controller has seen
    the spec (checkAndDecrement)."""
    assert eviction_refused([pod(ready=True)], (budget(3, behind=True),)) is True
    assert eviction_refused([pod(ready=True)], (budget(3),)) is False


def test_an_empty_selector_covers_every_pod_for_the_eviction_api() -> None:
    """In policy/v1 an empty selector selects every pod of its namespace, labelled or not, for
    the Eviction API (getPodDisruptionBudgets), though kube-scheduler's victim choice skips it."""
    assert eviction_refused([pod(ready=True, labels={})], (budget(0, selector={}),)) is True
    assert eviction_refused([pod(ready=True, labels={})], (budget(0),)) is False


def test_decoded_fields() -> None:
    """What the informer keeps for the Eviction API's questions."""
    pdb = budget(2, policy="AlwaysAllow", current=4, desired=3, disrupted=2)
    assert (pdb.unhealthy_pod_eviction_policy, pdb.current_healthy, pdb.desired_healthy) == ("AlwaysAllow", 4, 3)
    assert pdb.disrupted_pods == frozenset({"p0", "p1"}) and not pdb.generation_behind
    assert budget(1).unhealthy_pod_eviction_policy == "IfHealthyBudget"
    assert pod(ready=True).ready and not pod(ready=False).ready
    # no conditions at all: only a file written by hand; Running there is taken as Ready
    assert pod(ready=None).ready and not pod(ready=None, phase="Pending").ready
    assert not decode_pod(
        {
            "kind": "Pod",
            "metadata": {"name": "t1", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]},
        },
        "test",
    ).ready  # (the API's pod with no Ready condition: not Ready)


def test_an_unknown_policy_is_one_line_naming_the_field() -> None:
    with pytest.raises(ObjectError, match=r"spec\.unhealthyPodEvictionPolicy.*'Sometimes'"):
        budget(1, policy="Sometimes")
