"""DRA's objects (resource.k8s.io/v1) read from cluster files: what a driver and a user write
decodes to the model's values, and what the API server would refuse is one line naming the file,
the object and the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.errors import InputError, ObjectError
from rulesched.model.decode_dra import decode_resource_claim, decode_resource_slice
from rulesched.model.dra import ALL, Attribute, Capacity
from rulesched.simulate.load import load_cluster

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def slice_(name: str = "n1-gpus", node: str = "n1", **extra: Any) -> dict[str, Any]:
    spec = {
        "driver": "gpu.example.com",
        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
        "nodeName": node,
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {"model": {"string": "A100"}, "numa": {"int": 0}, "driverVersion": {"version": "1.2.3"}},
                "capacity": {"memory": {"value": "40Gi"}},
            }
        ],
        **extra,
    }
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}},
}


def write(tmp_path: Path, *items: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    return path


def test_a_cluster_file_with_dra_objects_loads(tmp_path: Path) -> None:
    cluster = load_cluster([write(tmp_path, GPU_CLASS, slice_(), TEMPLATE)])
    dra = cluster.dra
    assert dra.classes["gpu.example.com"].selectors == ('device.driver == "gpu.example.com"',)
    s = dra.slices["n1-gpus"]
    assert (s.driver, s.pool, s.generation, s.slice_count, s.node_name) == ("gpu.example.com", "n1", 1, 1, "n1")
    device = s.devices[0]
    assert device.attributes["model"] == Attribute("string", "A100")
    assert device.attributes["driverVersion"] == Attribute("version", "1.2.3")
    assert device.capacity["memory"] == Capacity(40 * 2**30 * 1000)
    request = dra.templates["default/one-gpu"].spec.requests[0]
    assert request.exactly is not None and (request.exactly.count, request.exactly.allocation_mode) == (1, "ExactCount")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"nodeName": "n1", "allNodes": True}, "ResourceSlice n1-gpus: spec: nodeName and allNodes are both set"),
        (
            {"devices": [{"name": "g", "attributes": {"v": {"version": "1.02.3"}}}]},
            "spec.devices[0].attributes.v.version: '1.02.3' is not a semantic version",
        ),
        ({"devices": [{"name": "g", "attributes": {"v": {}}}]}, "spec.devices[0].attributes.v: exactly one of"),
        (
            {"devices": [{"name": "g", "capacity": {"m": {"value": "lots"}}}]},
            "spec.devices[0].capacity.m.value: 'lots' is not a quantity",
        ),
        ({"pool": {"name": "p", "resourceSliceCount": 0}}, "spec.pool.resourceSliceCount: must be at least 1"),
    ],
)
def test_a_broken_slice_is_one_located_line(change: dict[str, Any], message: str, tmp_path: Path) -> None:
    bad = slice_()
    bad["spec"].update(change)
    with pytest.raises(InputError) as err:
        load_cluster([write(tmp_path, bad)])
    assert message in str(err.value) and "cluster.yaml" in str(err.value) and "\n" not in str(err.value)


def test_claims_requests_and_constraints_are_checked() -> None:
    claim = {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "devices": {
                "requests": [
                    {"name": "a", "exactly": {"deviceClassName": "x", "allocationMode": "All"}},
                    {"name": "b", "firstAvailable": [{"name": "big", "deviceClassName": "x", "count": 2}]},
                ],
                "constraints": [{"requests": ["a", "b"], "matchAttribute": "x/numa"}],
            }
        },
    }
    decoded = decode_resource_claim(claim, "f.yaml")
    assert decoded.key == "ns/c"
    assert decoded.spec.requests[0].exactly is not None and decoded.spec.requests[0].exactly.allocation_mode == ALL
    assert decoded.spec.requests[1].first_available[0][1].count == 2
    assert decoded.spec.constraints[0].match_attribute == "x/numa"
    claim["spec"]["devices"]["requests"][0] = {"name": "a"}
    with pytest.raises(
        ObjectError,
        match=r"f\.yaml: ResourceClaim ns/c: spec\.devices\.requests\[0\]: exactly one of exactly and firstAvailable",
    ):
        decode_resource_claim(claim, "f.yaml")


def test_v1beta1_is_refused_with_a_hint(tmp_path: Path) -> None:
    old = dict(GPU_CLASS, apiVersion="resource.k8s.io/v1beta1")
    with pytest.raises(
        InputError, match=r"resource\.k8s\.io/v1beta1 is not read .* give the object as resource\.k8s\.io/v1"
    ):
        load_cluster([write(tmp_path, old)])


def test_per_device_node_selection_needs_each_device_to_choose() -> None:
    raw = slice_(perDeviceNodeSelection=True)
    del raw["spec"]["nodeName"]
    with pytest.raises(ObjectError, match=r"spec\.devices\[0\]: missing \(perDeviceNodeSelection"):
        decode_resource_slice(raw, "f.yaml")
    raw["spec"]["devices"][0]["allNodes"] = True
    assert decode_resource_slice(raw, "f.yaml").devices[0].all_nodes
