"""Scheduling throughput with load-aware rules beside without: the ``mixed`` workload of
``bench_schedule.py`` (gen_cluster.py) scheduled with the bundled default rules, then with the
same rules plus a score reading measured node load (``node.usage``, ``node.metrics``), then with
the bundled ``target-load-packing`` set.

    python benchmarks/bench_load_aware.py [--nodes 5000] [--running 5000] [--pending 10000] [--seed 1] [--repeat 1]

Every node gets a measured cpu and memory usage and a ``cpu_5m`` metric (deterministic from the
seed, as a ``--node-metrics`` file gives them), and every pod placed adds its estimate to its
node, so each bind changes its node's load fields as it changes its requests. Prints pods/s of
scheduling time, p50/p99 per-pod latency and the share of placements that differ from the
default rules'. Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import MappingProxyType

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import generate  # noqa: E402

from rulesched.cluster.store import ClusterStore  # noqa: E402
from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.model.load import LoadSnapshot, NodeLoad, NodeUsage, Sample  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402
from rulesched.simulate.load import ClusterObjects, load_cluster  # noqa: E402

LOAD_SCORE = """extends "default"

# the cpu left as measured (plus placed pods' estimates), and a query's 5-minute cpu
score measured_cpu_left weight 2:
    if not has(node.usage, "cpu") or node.allocatable.cpu == 0 then 0
    else max(0, 100 - 100 * (node.usage.cpu + pod.requests.cpu) / node.allocatable.cpu)

score cool_5m weight 1:
    if has(node.metrics, "cpu_5m") and node.metrics_age < 2min then 100 - node.metrics["cpu_5m"] else 0
"""


def node_load(objects: ClusterObjects, seed: int) -> LoadSnapshot:
    """Every node using 5-85 % of its cpu and 10-90 % of its memory, with a cpu_5m metric near
    its cpu share, measured 0-30 s ago over a 20 s window."""
    rng = random.Random(seed)
    nodes = {}
    for node in objects.nodes:
        cpu = node.allocatable.get("cpu", 0) * rng.uniform(0.05, 0.85)
        memory = node.allocatable.get("memory", 0) // 1000 * rng.uniform(0.1, 0.9)
        age = rng.uniform(0, 30)
        share = 100 * cpu / max(1, node.allocatable.get("cpu", 1))
        nodes[node.name] = NodeLoad(
            usage=NodeUsage(int(cpu), int(memory), at=-age, window=20.0),
            metrics=MappingProxyType({"cpu_5m": Sample(min(100.0, share * rng.uniform(0.8, 1.2)), at=-age)}),
        )
    return LoadSnapshot(MappingProxyType(nodes), now=0.0)


def run(objects: ClusterObjects, rules_paths: list[Path], load: LoadSnapshot | None, seed: int) -> dict[str, object]:
    rules = load_rules(rules_paths)
    state = ClusterStore.build(
        objects.nodes, objects.running_pods, objects.pdbs, storage=objects.storage, provision=True, load=load
    )
    scheduler = Simulation(rules, state, SchedulerSettings(seed=seed))
    for pod in objects.pending_pods:
        scheduler.add(pod)
    gc.collect()
    gc.freeze()
    latencies = []
    started = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        if scheduler.schedule_one() is None:
            break
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    gc.unfreeze()
    latencies.sort()
    return {
        "pods_per_s": len(latencies) / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "placed": {key: h.node for key, h in scheduler.history.items()},
        "scheduled": sum(1 for h in scheduler.history.values() if h.node is not None),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=10000, help="as bench_schedule.py's mixed (default 10000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs each; the fastest is shown")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps(generate(args.nodes, args.running, args.pending, "mixed", args.seed)))
        objects = load_cluster([path])
        rules = Path(tmp) / "load.rules"
        rules.write_text(LOAD_SCORE, encoding="utf-8")
        load = node_load(objects, args.seed)
        variants = [
            ("default", [resolve_rules_path("default")], None),
            ("default + load score", [rules], load),
            ("target-load-packing", [resolve_rules_path("target-load-packing")], load),
        ]
        print(
            f"mixed: nodes={args.nodes} running={len(objects.running_pods)} pending={len(objects.pending_pods)}",
            flush=True,
        )
        baseline: dict[str, str | None] | None = None
        for name, paths, values in variants:
            runs = [run(objects, paths, values, args.seed) for _ in range(args.repeat)]
            best = max(runs, key=lambda r: float(r["pods_per_s"]))  # type: ignore[arg-type]
            placed = best["placed"]
            assert isinstance(placed, dict)
            moved = ""
            if baseline is None:
                baseline = placed
            else:
                differ = sum(1 for k, v in placed.items() if baseline.get(k) != v)
                moved = f"  placements differing from default: {100 * differ / max(1, len(placed)):.0f}%"
            print(
                f"{name:22} {best['pods_per_s']:7.0f} pods/s  scheduled {best['scheduled']}  p50 {best['p50_ms']:.2f}ms  "
                f"p99 {best['p99_ms']:.2f}ms{moved}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
