"""A PodDisruptionBudget without a status (written by hand, or dumped before the disruption
controller ran) allows what the controller would compute from the pods it selects; one with a
status allows what the status says; bad minAvailable/maxUnavailable values name the field."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.errors import ObjectError
from rulesched.model.decode import decode_pdb
from rulesched.semantics.disruption import disruptions_allowed
from tests.upstream.harness import node, pod


def pdb(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }
    if status is not None:
        obj["status"] = status
    return obj


def web(i: int, phase: str = "Running", ready: bool | None = None) -> Any:
    ready = phase == "Running" if ready is None else ready
    return dataclasses.replace(pod(f"w{i}", labels={"app": "web"}, node_name="n1"), phase=phase, ready=ready)


@pytest.mark.parametrize(
    ("spec", "running", "pending", "allowed"),
    [
        ({"minAvailable": 2}, 3, 0, 1),
        ({"minAvailable": 3}, 3, 0, 0),
        ({"minAvailable": 5}, 3, 0, 0),  # never negative
        ({"minAvailable": "50%"}, 3, 0, 1),  # ceil(1.5) = 2 wanted
        ({"maxUnavailable": 1}, 3, 0, 1),
        ({"maxUnavailable": 1}, 2, 1, 0),  # 3 selected, 2 wanted healthy, 2 healthy
        ({"maxUnavailable": "34%"}, 3, 0, 2),  # ceil(1.02) = 2 may go: 1 wanted healthy
        ({}, 3, 0, 3),  # neither: nothing wanted
    ],
)
def test_computed_like_the_disruption_controller(
    spec: dict[str, Any], running: int, pending: int, allowed: int
) -> None:
    budget = decode_pdb(pdb(spec))
    assert not budget.status_known and budget.disruptions_allowed == 0
    pods = [web(i) for i in range(running)] + [web(100 + i, "Pending") for i in range(pending)]
    pods.append(pod("other", labels={"app": "db"}, node_name="n1"))
    assert disruptions_allowed(budget, pods) == allowed


def test_the_controller_counts_ready_pods_not_terminating_nor_disrupted() -> None:
    """countHealthyPods (pkg/controller/disruption): a pod is healthy when Ready (IsPodReady),
    not being deleted, and not in status.disruptedPods (an eviction granted, not yet seen)."""
    budget = decode_pdb(pdb({"minAvailable": 1}))
    pods = [web(0), web(1), web(2)]
    assert disruptions_allowed(budget, pods) == 2
    assert disruptions_allowed(budget, [web(0), web(1), web(2, ready=False)]) == 1  # Running, not Ready
    assert disruptions_allowed(budget, [web(0), web(1), dataclasses.replace(web(2), deleting=True)]) == 1
    assert disruptions_allowed(dataclasses.replace(budget, disrupted_pods=frozenset({"w2"})), pods) == 1


def test_a_status_is_taken_as_is_and_stores_compute_the_rest() -> None:
    known = decode_pdb({**pdb({"minAvailable": 0}, {"disruptionsAllowed": 0}), "metadata": {"name": "known"}})
    unknown = decode_pdb(pdb({"minAvailable": 1}))
    store = ClusterStore.build([node("n1")], [web(0), web(1)], [known, unknown])
    allowed = {p.name: p.disruptions_allowed for p in store.pdbs}
    assert allowed == {"known": 0, "b": 1}


@pytest.mark.parametrize("value", ["lots", -1, "5", True, 1.5])
def test_bad_values_name_the_field(value: object) -> None:
    with pytest.raises(ObjectError, match=r"spec\.minAvailable: .* is not a count or a percentage"):
        decode_pdb(pdb({"minAvailable": value}))
