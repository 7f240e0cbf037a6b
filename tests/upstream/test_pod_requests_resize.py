"""A resized pod's requests, ported from k8s.io/component-helpers/resource/helpers_test.go at
v0.37.2 (what kube-scheduler 1.37 counts with InPlacePodVerticalScaling, GA, and
InPlacePodLevelResourcesVerticalScaling, beta and on: UseStatusResources and
InPlacePodLevelResourcesVerticalScalingEnabled). Quantities in milli-units.
"""

from __future__ import annotations

from typing import Any

from rulesched.model.decode import decode_pod


def _pod(spec: dict[str, Any], status: dict[str, Any]) -> Any:
    return decode_pod({"metadata": {"name": "p"}, "spec": spec, "status": status}, "test")


def _container(name: str, requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources}


INFEASIBLE = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}


def test_resized_per_resource_three_way_maximum() -> None:
    # TestPodResourceRequests "resized: per-resource 3-way maximum"
    spec = {"containers": [_container("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})]}
    status = {
        "containerStatuses": [
            {
                "name": "container-1",
                "allocatedResources": {"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
                "resources": {"requests": {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"}},
            }
        ]
    }
    requests = _pod(spec, status).requests
    assert (requests["cpu"], requests["memory"], requests["ephemeral-storage"]) == (
        30,
        30_000_000_000,
        30_000_000_000_000,
    )


def test_aggregate_resolves_directly_from_pod_status() -> None:
    # TestAggregateContainerRequestsAndLimits "aggregate container request/limit resolves directly
    # from pod status when PLR vertical scaling enabled"
    spec = {"containers": [_container("c1", {"cpu": "1"}, {"cpu": "2"})]}
    status = {"allocatedResources": {"cpu": "4"}, "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "5"}}}
    assert _pod(spec, status).requests["cpu"] == 4000


def test_falls_back_to_container_statuses_without_pod_allocated_resources() -> None:
    # "falls back to container status aggregation when PLR vertical scaling enabled but podAllocatedResources is nil"
    spec = {"containers": [_container("c1", {"cpu": "1"}, {"cpu": "2"})]}
    status = {
        "containerStatuses": [
            {
                "name": "c1",
                "allocatedResources": {"cpu": "6"},
                "resources": {"requests": {"cpu": "5"}, "limits": {"cpu": "7"}},
            }
        ],
        "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "7"}},
    }
    assert _pod(spec, status).requests["cpu"] == 6000


def test_falls_back_to_container_statuses_without_pod_resources() -> None:
    # "falls back to container status aggregation when PLR vertical scaling enabled but podResources is nil"
    spec = {"containers": [_container("c1", {"cpu": "1"}, {"cpu": "2"})]}
    status = {
        "containerStatuses": [
            {
                "name": "c1",
                "allocatedResources": {"cpu": "6"},
                "resources": {"requests": {"cpu": "5"}, "limits": {"cpu": "8"}},
            }
        ],
        "allocatedResources": {"cpu": "6"},
    }
    assert _pod(spec, status).requests["cpu"] == 6000


def test_pod_level_requests_with_status_populated() -> None:
    # TestPodRequestsAndLimitsVerticalScalingWrappers "pod level requests/limits with PLR vertical
    # scaling enabled and status populated"
    spec = {
        "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}},
        "containers": [_container("c1", {"cpu": "1"}, {"cpu": "2"})],
    }
    status = {"allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3.5"}, "limits": {"cpu": "5"}}}
    assert _pod(spec, status).requests["cpu"] == 3500


def test_pod_level_requests_with_infeasible_resize() -> None:
    # "pod level requests/limits with PLR vertical scaling enabled and infeasible resize"
    spec = {
        "resources": {"requests": {"cpu": "10"}, "limits": {"cpu": "20"}},
        "containers": [_container("c1", {"cpu": "1"}, {"cpu": "2"})],
    }
    status = {
        "conditions": [INFEASIBLE],
        "allocatedResources": {"cpu": "3"},
        "resources": {"requests": {"cpu": "4"}, "limits": {"cpu": "8"}},
    }
    assert _pod(spec, status).requests["cpu"] == 4000


def test_multi_container_resize_is_not_overestimated() -> None:
    # 1.37's kubernetes PR #140047 ("Fixed the overestimation of a Pod's resource footprint during
    # resize operations for multi-container Pods"): spec, allocated and actual are each summed
    # over the containers, then the largest sum is taken; not the largest of each container
    # summed (4 + 3 = 7 cpu, which the pod never holds).
    spec = {"containers": [_container("a", {"cpu": "4"}), _container("b", {"cpu": "1"})]}
    status = {
        "containerStatuses": [
            {"name": "a", "allocatedResources": {"cpu": "2"}, "resources": {"requests": {"cpu": "2"}}},
            {"name": "b", "allocatedResources": {"cpu": "3"}, "resources": {"requests": {"cpu": "3"}}},
        ]
    }
    assert _pod(spec, status).requests["cpu"] == 5000
