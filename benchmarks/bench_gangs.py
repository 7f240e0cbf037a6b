"""Gang scheduling throughput: pod groups placed all or nothing, beside the same pods without groups.

    python benchmarks/bench_gangs.py                      # 1000 gangs of 8 on 5000 nodes
    python benchmarks/bench_gangs.py --gangs 200 --size 8 --nodes 1000 --repeat 3

Generates scheduler_perf's nodes (gen_cluster.py: 4 CPU, 32Gi, 110 pods, three zones) and
``--gangs`` scheduler-plugins PodGroups of ``--size`` members (minMember = size), each member
asking 500m CPU and 1Gi, interleaved in arrival order as a Job controller would create them
(gang after gang). Schedules them with rules/default.rules through the simulator (the scheduler
of `rulesched simulate` and `rulesched run`), then the same pods with no group label. Prints, for
each (and for the same pods keeping the gangs' labels without PodGroups: each gang its own
equivalence class, as grouped pods are): pods/s of scheduling time, p50/p99 per-pod latency, and for gangs p50/p99 group latency
(one group attempt: its eight cycles, assumptions and bindings). Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import node  # noqa: E402

from rulesched.cluster.store import ClusterStore  # noqa: E402
from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.model.decode import decode_node, decode_pod  # noqa: E402
from rulesched.model.groups import POD_GROUP_LABEL, decode_pod_group  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402


def _member(name: str, group: str | None) -> dict[str, object]:
    labels = {POD_GROUP_LABEL: group} if group else {}
    return {
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
        },
    }


def run(gangs: int, size: int, nodes: int, grouped: bool, seed: int = 1, labelled: bool = False) -> dict[str, float]:
    """``grouped``: PodGroups and labels; ``labelled``: the labels alone (no PodGroup: each pod
    scheduled alone, but in one equivalence class per gang, as grouped pods are)."""
    import random

    rng = random.Random(seed)
    node_objects = [decode_node(node(i, rng), "bench") for i in range(nodes)]
    rules = load_rules([resolve_rules_path("default")])
    sim = Simulation(rules, ClusterStore.build(node_objects, []), SchedulerSettings(seed=seed))
    for g in range(gangs if grouped else 0):
        obj = {"metadata": {"name": f"g{g}", "namespace": "default"}, "spec": {"minMember": size}}
        sim.add_group(decode_pod_group(obj, "bench"))
    for g in range(gangs):
        for m in range(size):
            sim.add(decode_pod(_member(f"g{g}-{m}", f"g{g}" if grouped or labelled else None), "bench"))
    sim.scheduler.gangs.keep_outcomes = False
    latencies: list[float] = []
    started = time.perf_counter()
    while True:
        t = time.perf_counter()
        if sim.schedule_one() is None:
            if sim.queue.next_ready_time() is None:
                break
            sim.clock.now = sim.queue.next_ready_time() or sim.clock.now
            continue
        latencies.append(time.perf_counter() - t)
    total = time.perf_counter() - started
    bound = sum(1 for h in sim.history.values() if h.node)
    out = {"bound": bound, "seconds": total, "pods_per_second": bound / total}
    if grouped:  # one schedule_one per group attempt: the group latency; per pod, spread over its members
        out["group_p50_ms"] = statistics.median(latencies) * 1000
        out["group_p99_ms"] = statistics.quantiles(latencies, n=100)[98] * 1000
        out["pod_p50_ms"] = out["group_p50_ms"] / size
    else:
        out["pod_p50_ms"] = statistics.median(latencies) * 1000
        out["pod_p99_ms"] = statistics.quantiles(latencies, n=100)[98] * 1000
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    pods = args.gangs * args.size
    modes = (
        (True, False, f"{args.gangs} gangs of {args.size}"),
        (False, True, f"{pods} pods with the gangs' labels, no PodGroups"),
        (False, False, f"{pods} pods, no groups"),
    )
    for grouped, labelled, label in modes:
        runs = [run(args.gangs, args.size, args.nodes, grouped, labelled=labelled) for _ in range(args.repeat)]
        best = max(runs, key=lambda r: r["pods_per_second"])
        figures = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in best.items())
        print(f"{label} on {args.nodes} nodes: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
