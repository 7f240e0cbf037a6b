"""DeviceTaintRules (kube-scheduler 1.37's DRADeviceTaintRules): a rule's taint is added to the
devices its selector picks before the allocator sees them.

Upstream's table: k8s.io/dynamic-resource-allocation/resourceslice/tracker/tracker_test.go at
v0.37.2, TestListPatchedResourceSlices, every case (its fixtures rebuilt with the same names and
values: slices s1 of driver1.example.com/pool-1 and s2 of driver2.example.com/pool-2, devices
device-0..2, the taint example.com/taint=tainted:NoExecute, the slice's own
example.com/taint2=tainted2:NoExecute). What is compared is the patched slices at the end (what
the store holds), not the handler events upstream also checks. The taints' effect on allocation
is upstream's allocator table's (tests/upstream/dra: the tainted-* cases); here `simulate` end to
end, the informer cache (rulesched.mirror) following rules and slices, and files refused with
located errors.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.cluster.store import ClusterStore
from rulesched.errors import ObjectError
from rulesched.kube.informer import Delta
from rulesched.mirror import Mirror
from rulesched.model.decode_dra import decode_device_taint_rule
from rulesched.model.dra import Device, DeviceTaint, DeviceTaintRule, ResourceSlice
from rulesched.semantics.dra_taint_rules import TaintedSlices

DRIVER1, DRIVER2 = "driver1.example.com", "driver2.example.com"
POOL1, POOL2 = "pool-1", "pool-2"
TAINT1 = DeviceTaint("example.com/taint", "tainted", "NoExecute")
TAINT2 = DeviceTaint("example.com/taint2", "tainted2", "NoExecute")
DEVICE0, DEVICE1, DEVICE2 = Device("device-0"), Device("device-1"), Device("device-2")


def _with(device: Device, *taints: DeviceTaint) -> Device:
    return dataclasses.replace(device, taints=taints)


S1_NO_DEVICES = ResourceSlice("s1", DRIVER1, POOL1)
S2_NO_DEVICES = ResourceSlice("s2", DRIVER2, POOL2)
UNCHANGED = ResourceSlice("no-change", "", "")


def _devices(s: ResourceSlice, *devices: Device) -> ResourceSlice:
    return dataclasses.replace(s, devices=devices)


S1 = _devices(S1_NO_DEVICES, DEVICE1)
S1_TAINTED = _devices(S1_NO_DEVICES, _with(DEVICE1, TAINT1))
S1_ALREADY_TAINTED = _devices(S1_NO_DEVICES, _with(DEVICE1, TAINT2))
S1_MERGED = _devices(S1_NO_DEVICES, _with(DEVICE1, TAINT2, TAINT1))
S2 = _devices(S2_NO_DEVICES, DEVICE2)
S2_TAINTED = _devices(S2_NO_DEVICES, _with(DEVICE2, TAINT1))
ALL = DeviceTaintRule("rule", TAINT1)  # taintAllDevicesRule: an empty selector
NO_SELECTOR = DeviceTaintRule("rule-no-selector", TAINT1, selects=False)
POOL1_RULE = dataclasses.replace(ALL, pool=POOL1)
POOL2_RULE = dataclasses.replace(ALL, pool=POOL2)
DRIVER1_RULE = dataclasses.replace(ALL, driver=DRIVER1)
DEVICE1_RULE = dataclasses.replace(ALL, device="device-1")


Event = tuple[str, str, Any]  # (slice or rule, its name, the object; None: deleted)


def add(obj: ResourceSlice | DeviceTaintRule) -> Event:
    return ("slice" if isinstance(obj, ResourceSlice) else "rule", obj.name, obj)


def remove(obj: ResourceSlice | DeviceTaintRule) -> Event:
    return ("slice" if isinstance(obj, ResourceSlice) else "rule", obj.name, None)


CASES: dict[str, tuple[list[Event], list[ResourceSlice]]] = {
    # name: (events in order, the patched slices at the end)
    "add-slices-no-patches": ([add(S1), add(S2)], [S1, S2]),
    "update-slices-no-patches": (
        [add(S1_NO_DEVICES), add(S1), add(S2_NO_DEVICES), add(S2), add(UNCHANGED)],
        [S1, S2, UNCHANGED],
    ),
    "delete-slices": ([add(S1), remove(S1), add(S2), remove(S2), add(UNCHANGED)], [UNCHANGED]),
    "patch-all-slices": ([add(S1), add(ALL)], [S1_TAINTED]),
    "update-patch": ([add(POOL1_RULE), add(POOL2_RULE), add(S1), add(S2)], [S1, S2_TAINTED]),
    "remove-patch-known-deleted-rule": ([add(POOL2_RULE), add(S1), add(S2), remove(POOL2_RULE)], [S1, S2]),
    # (upstream deletes it by name alone, a tombstone without the object: a delete here is by name)
    "remove-patch-unknown-deleted-rule": ([add(POOL2_RULE), add(S1), add(S2), remove(POOL2_RULE)], [S1, S2]),
    "merge-taints": ([add(ALL), add(S1_ALREADY_TAINTED)], [S1_MERGED]),
    "add-taint-for-driver": ([add(DRIVER1_RULE), add(S1), add(S2)], [S1_TAINTED, S2]),
    "add-taint-for-pool": ([add(POOL1_RULE), add(S1), add(S2)], [S1_TAINTED, S2]),
    "add-taint-for-device": ([add(DEVICE1_RULE), add(S1), add(S2)], [S1_TAINTED, S2]),
    "filter-all-criteria": (
        [add(dataclasses.replace(ALL, driver=DRIVER1, pool=POOL1, device="device-1")), add(S1), add(S2)],
        [S1_TAINTED, S2],
    ),
    "update-patched-slice": (
        [
            add(DEVICE1_RULE),
            add(S1),
            add(_devices(S1_NO_DEVICES, DEVICE0, DEVICE1, DEVICE2)),
            add(_devices(S2_NO_DEVICES, DEVICE0, DEVICE1, DEVICE2)),
            add(_devices(S2_NO_DEVICES, DEVICE1)),
        ],
        [
            _devices(S1_NO_DEVICES, DEVICE0, _with(DEVICE1, TAINT1), DEVICE2),
            _devices(S2_NO_DEVICES, _with(DEVICE1, TAINT1)),
        ],
    ),
    "nil-selector-matches-none": ([add(S1), add(S2), add(NO_SELECTOR)], [S1, S2]),
}


@pytest.mark.parametrize("case", CASES)
def test_upstream_list_patched_resource_slices(case: str) -> None:
    """TestListPatchedResourceSlices (tracker_test.go:345-584), the case named."""
    events, expected = CASES[case]
    tainted = TaintedSlices()
    store: dict[str, ResourceSlice] = {}
    for kind, name, value in events:
        changed = tainted.slice(name, value) if kind == "slice" else tainted.rule(name, value)
        for key, patched in changed.items():
            if patched is None:
                store.pop(key, None)
            else:
                store[key] = patched
    assert sorted(store.values(), key=lambda s: s.name) == sorted(expected, key=lambda s: s.name)


def test_an_untouched_slice_is_the_same_object() -> None:
    """No rule picks it: the slice itself (the store's per-node pools and verdicts key on it)."""
    tainted = TaintedSlices()
    tainted.rule("r", POOL2_RULE)
    assert tainted.slice("s1", S1)["s1"] is S1


# --- the API object ----------------------------------------------------------------------------


def _rule(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"}, "spec": spec}


def test_decoded_as_the_api_has_it() -> None:
    taint = {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}
    assert decode_device_taint_rule(
        _rule({"deviceSelector": {"driver": "gpu.example.com", "device": "gpu-0"}, "taint": taint})
    ) == (
        DeviceTaintRule(
            "r", DeviceTaint("example.com/unhealthy", "ecc", "NoSchedule"), driver="gpu.example.com", device="gpu-0"
        )
    )
    assert decode_device_taint_rule(_rule({"taint": taint})).selects is False
    assert decode_device_taint_rule(_rule({"deviceSelector": {}, "taint": taint})).selects is True


@pytest.mark.parametrize(
    ("spec", "field", "problem"),
    [
        ({"deviceSelector": {}}, "spec.taint", "is required"),
        ({"taint": {"key": "k"}}, "spec.taint.effect", "is required"),
        ({"taint": {"key": "k", "effect": "Sometimes"}}, "spec.taint.effect", "Sometimes"),
        ({"taint": {"effect": "NoSchedule"}}, "spec.taint.key", "missing"),
        (
            {"deviceSelector": {"pool": 3}, "taint": {"key": "k", "effect": "NoSchedule"}},
            "spec.deviceSelector.pool",
            "",
        ),
    ],
)
def test_a_bad_rule_is_one_located_error(spec: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(ObjectError) as caught:
        decode_device_taint_rule(_rule(spec), "cluster.yaml")
    message = str(caught.value)
    assert message.startswith("cluster.yaml: DeviceTaintRule r: ") and field in message and problem in message


# --- simulate, and the informer cache ------------------------------------------------------------

GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def _slice(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpus"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }


def _pod(name: str, tolerate: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com"}
    if tolerate:
        exactly["tolerations"] = [{"key": "example.com/unhealthy", "operator": "Exists"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
        },
        "status": {"phase": "Pending"},
    }


def _claim(name: str, tolerate: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com"}
    if tolerate:
        exactly["tolerations"] = [{"key": "example.com/unhealthy", "operator": "Exists"}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


UNHEALTHY_N1 = _rule(
    {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"},
        "taint": {"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"},
    }
)


def test_simulate_keeps_untolerating_requests_off_a_tainted_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A rule taints n1's GPU: a claim without a toleration gets n2's, a second such claim none
    (n1 refused as the allocator refuses a tainted device: tainted-* in upstream's allocator
    table); a claim tolerating the taint gets n1's. Without the rule the first two fit."""
    items = [GPU_CLASS, _node("n1"), _node("n2"), _slice("n1"), _slice("n2"), UNHEALTHY_N1]
    items += [_claim("a"), _pod("a"), _claim("b"), _pod("b"), _claim("t", True), _pod("t", True)]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    assert main(["simulate", str(path), "--output", "json", "--explain-full"]) == 0
    rows = {row["pod"]: row for row in json.loads(capsys.readouterr().out)["pods"]}
    assert rows["default/t"]["node"] == "n1"
    placed = sorted(rows[f"default/{p}"]["node"] or "-" for p in ("a", "b"))
    assert placed == ["-", "n2"]
    path.write_text(yaml.safe_dump_all([i for i in items if i is not UNHEALTHY_N1 and i["metadata"]["name"] != "t"]))
    assert main(["simulate", str(path), "--output", "json"]) == 0
    rows = {row["pod"]: row for row in json.loads(capsys.readouterr().out)["pods"]}
    assert sorted(rows[f"default/{p}"]["node"] for p in ("a", "b")) == ["n1", "n2"]


def test_a_bad_rule_in_a_cluster_file_names_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([_node("n1"), _rule({"taint": {"key": "k", "effect": "Later"}})]))
    assert main(["simulate", str(path)]) != 0
    err = capsys.readouterr().err
    assert "cluster.yaml" in err and "DeviceTaintRule r" in err and "spec.taint.effect" in err


def test_the_informer_cache_follows_rules_and_slices() -> None:
    """rulesched.mirror: a slice published, a rule tainting its device (the store's slice
    patched), the slice republished (still patched), the rule deleted (the taint gone)."""
    store = ClusterStore()
    mirror = Mirror(None, store, lambda delta: None, threading.Event(), resources=())  # type: ignore[arg-type]

    def gpu_taints() -> tuple[DeviceTaint, ...]:
        (device,) = store.dra.state.slices["n1-gpus"].devices
        return device.taints

    mirror.apply(Delta("ResourceSlice", "ADDED", _slice("n1")))
    assert gpu_taints() == ()
    mirror.apply(Delta("DeviceTaintRule", "ADDED", UNHEALTHY_N1))
    assert gpu_taints() == (DeviceTaint("example.com/unhealthy", "ecc", "NoSchedule"),)
    mirror.apply(Delta("ResourceSlice", "MODIFIED", _slice("n1")))
    assert gpu_taints() == (DeviceTaint("example.com/unhealthy", "ecc", "NoSchedule"),)
    mirror.apply(Delta("DeviceTaintRule", "DELETED", {"kind": "DeviceTaintRule", "metadata": {"name": "r"}}))
    assert gpu_taints() == ()
