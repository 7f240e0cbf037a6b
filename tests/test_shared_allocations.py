"""Allocations shared between pods asking the same (rulesched.semantics.dra_after): the store's
memo gives a pod the allocation, and the devices after it, that another pod with claims alike
had on the node, while the node's devices are what they were; a change to them (a pod placed
there), or device scores that read the pod, and each pod has its own.

The GPU replay property (tests/test_gpu_replay_property.py) runs both of its paths through the
store's memo; these cases say what a kept allocation must not outlive.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import openb_to_k8s  # noqa: E402
from openb import GpuNode, TracePod  # noqa: E402

from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.lang.builtins.dra import devices_after  # noqa: E402
from rulesched.lang.evaluation.ruleset import RuleSet  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402


def _cluster(tmp_path: Path, pods: list[TracePod]) -> Any:
    nodes = [GpuNode("n", 32_000, 262_144, 2, "T4")]
    path = tmp_path / "cluster.json"
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": list(openb_to_k8s.objects(nodes, pods, [0]))})
    )
    return load_cluster([str(path)])


def _free_after(rules: RuleSet, pod: Any, snapshot: Any) -> list[int]:
    bound = rules.bind(pod, snapshot)
    (view,) = snapshot.nodes
    return [d.free["milli"] for d in devices_after(bound.ctx, view)]


def test_a_kept_allocation_goes_when_a_pod_is_placed_on_the_node(tmp_path: Path) -> None:
    """Two pods of a shared GPU's half, classes apart (memory): the second, scored after the
    first is placed, sees the GPU the first holds full (best fit), not the node as the first saw it."""
    pods = [TracePod("a", 4000, 1024, 1, 500), TracePod("b", 4000, 4096, 1, 500)]
    cluster = _cluster(tmp_path, pods)
    store = cluster.store(provision=True)
    rules = load_rules([resolve_rules_path("gpu-fragmentation")])
    first, second = cluster.pending_pods
    assert _free_after(rules, first, store.snapshot()) == [500 * 1000, 1000 * 1000]  # (milli in milli-units)
    assert _free_after(rules, second, store.snapshot()) == [500 * 1000, 1000 * 1000]  # (shared: the same node)
    sim = Simulation(rules, store, SchedulerSettings(seed=1))
    sim.add(first)
    while sim.schedule_one() is not None:
        pass
    assert _free_after(rules, second, store.snapshot()) == [0, 1000 * 1000]


DEVICE_BY_PRIORITY = """extends "default"

# a pod of priority above 0 wants the last GPU, the others the first
score by_priority for device:
    if (pod.priority > 0) == (device.name == "gpu-1") then 1 else 0
"""


def test_device_scores_that_read_the_pod_keep_allocations_apart(tmp_path: Path) -> None:
    """A device score reading the pod ranks the GPUs per pod: pods asking the same of the same
    node do not share the allocation (nor the devices after it)."""
    pods = [TracePod("a", 4000, 1024, 1, 500), TracePod("b", 4000, 1024, 1, 500)]
    cluster = _cluster(tmp_path, pods)
    store = cluster.store(provision=True)
    rules_path = tmp_path / "by-priority.rules"
    rules_path.write_text(DEVICE_BY_PRIORITY)
    rules = load_rules([rules_path])
    low, high = cluster.pending_pods
    high = dataclasses.replace(high, priority=5)
    snapshot = store.snapshot()
    assert _free_after(rules, low, snapshot) == [500 * 1000, 1000 * 1000]
    assert _free_after(rules, high, snapshot) == [1000 * 1000, 500 * 1000]


def test_a_nodes_kept_device_order_goes_when_its_devices_change(tmp_path: Path) -> None:
    """FGD's device score (best fit: the GPU with the least milli left that fits) reads the
    device alone, so a node's order is kept for every pod (rulesched.lang.evaluation.ruleset
    .device_ranking); once a pod takes a GPU there the order is worked out again: 300 milli go to
    gpu-0, 800 to gpu-1 (gpu-0 has 700 left), and 100 to gpu-1 then (200 left, the best fit), not
    to gpu-0 as the order from before would have it."""
    pods = [TracePod("x", 1000, 1024, 1, 300), TracePod("y", 1000, 1024, 1, 800), TracePod("z", 1000, 1024, 1, 100)]
    cluster = _cluster(tmp_path, pods)
    store = cluster.store(provision=True)
    sim = Simulation(load_rules([resolve_rules_path("gpu-fragmentation")]), store, SchedulerSettings(seed=1))
    for pod in cluster.pending_pods:
        sim.add(pod)
    while sim.schedule_one() is not None:
        pass
    held = {
        c.name.split("-gpu-")[0]: [d.device for d in c.allocation.devices]
        for c in store.dra.state.claims.values()
        if c.allocation is not None
    }
    assert held == {"x": ["gpu-0"], "y": ["gpu-1"], "z": ["gpu-1"]}


def test_a_device_after_an_allocation_is_the_device_replaced() -> None:
    """dra_after builds the device after an allocation with NodeDevice's constructor: every
    field must be what dataclasses.replace gives (a field added to NodeDevice and left out
    would show here)."""
    from types import MappingProxyType

    from rulesched.model.dra import DeviceResult, DeviceTaint, NodeDevice
    from rulesched.semantics.dra_after import _after

    device = NodeDevice(
        "gpu.example.com",
        "n1",
        "gpu-0",
        MappingProxyType({"model": "V100"}),
        MappingProxyType({"index": 0}),
        MappingProxyType({"milli": 1000}),
        MappingProxyType({"milli": 200}),
        MappingProxyType({"milli": 800}),
        True,
        True,
        1,
        (DeviceTaint("k", "v"),),
    )
    share = DeviceResult("r", "gpu.example.com", "n1", "gpu-0", share_id="s", consumed_capacity={"milli": 300})
    whole = DeviceResult("r", "gpu.example.com", "n1", "gpu-0")
    for results, consumed, free in (([share], {"milli": 500}, {"milli": 500}), ([whole], {"milli": 200}, {})):
        want = dataclasses.replace(device, consumed=consumed, free=free, allocated=True, claims=2)
        got = _after(device, results)
        assert [getattr(got, f.name) for f in dataclasses.fields(NodeDevice)] == [
            getattr(want, f.name) for f in dataclasses.fields(NodeDevice)
        ]


def test_kept_verdicts_go_when_a_device_class_changes(tmp_path: Path) -> None:
    """The memo's verdicts and allocations are keyed by what the claims ask, which names the
    DeviceClass, not its selectors: a class changed to select no device of the node must not
    leave the verdict a pod of the same claims had before (found stale: issue 38's h-38bind)."""
    cluster = _cluster(tmp_path, [TracePod("a", 1000, 1024, 1, 1000), TracePod("b", 1000, 1024, 1, 1000)])
    store = cluster.store(provision=True)
    rules = load_rules([resolve_rules_path("gpu-fragmentation")])
    first, second = cluster.pending_pods
    snapshot = store.snapshot()
    bound = rules.bind(first, snapshot)
    assert bound.dra_claims.filter(snapshot.nodes[0]) == ()
    bound.release()
    ((name, cls),) = store.dra.state.classes.items()
    selector = 'device.attributes["gpu.example.com"].model == "A100"'
    store.dra.put("classes", name, dataclasses.replace(cls, selectors=(selector,)))
    snapshot = store.snapshot()
    bound = rules.bind(second, snapshot)
    assert bound.dra_claims.filter(snapshot.nodes[0]) == ("cannot allocate all claims",)
