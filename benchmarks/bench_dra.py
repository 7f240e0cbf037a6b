"""DRA throughput: upstream's scheduler_perf DRA workloads in the simulator, and the
allocator's cost per node.

    python benchmarks/bench_dra.py                 # both workloads and the per-node cost
    python benchmarks/bench_dra.py --cpu           # throughput as pods per CPU second (shared machines)

Workloads (test/integration/scheduler_perf/dra/performance-config.yaml at v1.37, templates/):
``SchedulingWithResourceClaimTemplate/5000pods_500nodes`` (500 nodes with one ResourceSlice of
10 devices each, upstream's test driver's realistic attributes; 2500 claims allocated first, as
its allocResourceClaims does, then 2500 pods each with a claim from a one-device template;
threshold 56 pods/s) and ``SteadyStateClusterResourceClaimTemplate/empty_500nodes`` (the same
cluster, no claims allocated first; upstream keeps 10 pods at a time for 10 s, creating one as one
is deleted, threshold 64 pods/s: here 500 pods are scheduled in turn into the empty cluster, each
deleted once placed, so the devices stay free as in the steady state). The target is 3 times the
threshold. Per-node cost: one allocation of a one-device claim on one node of 500 nodes x 10
devices, cold (selectors evaluated) and warm (verdicts cached), and the full filter of 500 nodes.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rulesched.cluster.store import ClusterStore  # noqa: E402
from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.model.decode import decode_node, decode_pod  # noqa: E402
from rulesched.model.decode_dra import (  # noqa: E402
    decode_device_class,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from rulesched.model.dra import DraState  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.semantics.cel import CelCache  # noqa: E402
from rulesched.semantics.dra import Allocator  # noqa: E402
from rulesched.semantics.dra_claims import claims_from_templates  # noqa: E402
from rulesched.semantics.dra_devices import allocated_state  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402

DRIVER = "test-driver.cdi.k8s.io"
THRESHOLDS = {
    "SchedulingWithResourceClaimTemplate/5000pods_500nodes": 56,
    "SteadyStateClusterResourceClaimTemplate/empty_500nodes": 64,
}


def node(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"scheduler-perf-dra-{i}", "labels": {"node-with-dra": "true"}},
        "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"}},
    }


def resource_slice(i: int, devices: int = 10, roots: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": f"resourceslice-{i}"},
        "spec": {
            "pool": {"name": f"resourceslice-{i}", "generation": 1, "resourceSliceCount": 1},
            "driver": DRIVER,
            "nodeName": f"scheduler-perf-dra-{i}",
            "devices": [
                {
                    "name": f"basic-device-{d}",
                    "attributes": {
                        "driver": {"string": "xe"},
                        "driverVersion": {"version": "1.2.3"},
                        "resource.k8s.io/pciRoot": {"string": str(d % roots)},
                        "family": {"string": "Arc Pro B-Series"},
                        "health": {"string": "Healthy"},
                        "model": {"string": "B60"},
                        "pciAddress": {"string": f"0000:0{d}:00.0"},
                        "pciId": {"string": "0xe211"},
                        "pciRoot": {"string": f"0{d % roots}"},
                        "resource.kubernetes.io/pciBusID": {"string": f"0000:0{d}:00.0"},
                        "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{d % roots}"},
                        "sriov": {"bool": True},
                        "type": {"string": "gpu"},
                    },
                    "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
                }
                for d in range(devices)
            ],
        },
    }


CLASS = {
    "metadata": {"name": "test-class"},
    "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
}
TEMPLATE = {
    "metadata": {"name": "test-claim-template", "namespace": "test"},
    "spec": {"spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}},
}


def pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"test-dra-{i}", "namespace": "test", "uid": f"uid-{i}"},
        "spec": {
            "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1"}],
            "resourceClaims": [{"name": "resource", "resourceClaimTemplateName": "test-claim-template"}],
        },
    }


def cluster(nodes: int, init_claims: int) -> tuple[list[Any], DraState]:
    node_values = [decode_node(node(i)) for i in range(nodes)]
    slices = {s.name: s for s in (decode_resource_slice(resource_slice(i)) for i in range(nodes))}
    classes = {"test-class": decode_device_class(CLASS)}
    templates = {"test/test-claim-template": decode_resource_claim_template(TEMPLATE)}
    claims: dict[str, Any] = {}
    # allocResourceClaims: each claim allocated on the first node where it fits
    allocator = Allocator(list(slices.values()), classes, cel=CelCache())
    done: list[Any] = []
    first = 0  # (first fit: the nodes before the last one used are full)
    for i in range(init_claims):
        raw = {
            "metadata": {"name": f"test-claim-{i}", "namespace": "init"},
            "spec": {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}},
        }
        claim = decode_resource_claim(raw)
        allocator.allocated = allocated_state(done[-10:])  # (only the last node's claims can matter)
        for position in range(first, len(node_values)):
            result = allocator.allocate(node_values[position], [claim])
            if result is not None:
                claim = dataclasses.replace(claim, allocation=result[0])
                first = position
                break
        done.append(claim)
        claims[claim.key] = claim
    return node_values, DraState(classes, claims, templates, slices)


def throughput(name: str, nodes: int, init_claims: int, pods: int, delete: bool, cpu: bool) -> dict[str, float]:
    node_values, state = cluster(nodes, init_claims)
    rules = load_rules([resolve_rules_path("default")])
    store = ClusterStore.build(node_values, [], dra=state)
    sim = Simulation(rules, store, SchedulerSettings(seed=1))
    pending = []
    for i in range(pods):
        p, made = claims_from_templates(decode_pod(pod(i)), state.templates, store.dra.state.claims)
        for claim in made:
            store.dra.put("claims", claim.key, claim)
        pending.append(p)
    for p in pending:
        sim.add(p)
    gc.collect()
    gc.freeze()
    clock = time.process_time if cpu else time.perf_counter
    latencies = []
    started = clock()
    while True:
        t0 = clock()
        result = sim.schedule_one()
        if result is None:
            break
        latencies.append(clock() - t0)
        if delete and result.node is not None:  # the steady state: the pod goes, its claim too
            store.remove_pod(result.pod.key)
            for entry in result.pod.resource_claims:
                store.dra.put("claims", f"{result.pod.namespace}/{entry.generated}", None)
    total = clock() - started
    gc.unfreeze()
    placed = sum(1 for h in sim.history.values() if h.node is not None)
    latencies.sort()
    return {
        "placed": placed,
        "pods_per_s": len(latencies) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def per_node_cost(nodes: int = 500) -> dict[str, float]:
    """One allocation of a one-device claim per node: cold (the node's pools gathered, the
    selectors evaluated), and warm (pools and verdicts kept by the store, as the scheduler has
    them: one Allocator per pod, as PreFilter makes)."""
    node_values, state = cluster(nodes, 0)
    claim = decode_resource_claim({"metadata": {"name": "c", "namespace": "test"}, "spec": TEMPLATE["spec"]["spec"]})
    cel = CelCache()
    pools: dict[str, Any] = {}
    allocator = Allocator(list(state.slices.values()), state.classes, cel=cel, pools=pools)
    t0 = time.process_time()
    for n in node_values:
        allocator.allocate(n, [claim], results=False)
    cold = (time.process_time() - t0) / nodes
    t0 = time.process_time()
    rounds = 5
    for _ in range(rounds):
        fresh = Allocator(list(state.slices.values()), state.classes, cel=cel, pools=pools)
        for n in node_values:
            fresh.allocate(n, [claim], results=False)
    warm = (time.process_time() - t0) / (rounds * nodes)
    return {"cold_us": cold * 1e6, "warm_us": warm * 1e6, "all_nodes_ms": warm * nodes * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="pods per CPU second instead of wall-clock")
    args = parser.parse_args(argv)
    unit = "pods/CPU-s" if args.cpu else "pods/s"
    runs = [
        ("SchedulingWithResourceClaimTemplate/5000pods_500nodes", 500, 2500, 2500, False),
        ("SteadyStateClusterResourceClaimTemplate/empty_500nodes", 500, 0, 500, True),
    ]
    for name, nodes, init, pods, delete in runs:
        r = throughput(name, nodes, init, pods, delete, args.cpu)
        threshold = THRESHOLDS[name]
        print(
            f"{name}: {r['placed']}/{pods} placed, {r['pods_per_s']:.0f} {unit} "
            f"(threshold {threshold}, target {3 * threshold}: {r['pods_per_s'] / threshold:.1f}x), "
            f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, peak RSS {r['peak_rss_mb']:.0f} MB"
        )
    c = per_node_cost()
    print(
        f"allocation per node (CPU), 500 nodes x 10 devices: cold {c['cold_us']:.0f} us, warm {c['warm_us']:.0f} us "
        f"(one pod's allocator over all 500 nodes, no verdict shared: {c['all_nodes_ms']:.1f} ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
