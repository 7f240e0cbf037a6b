"""Explain latency: ``rulesched.scheduler.why.explain_pod`` on one pod at a time, on a big cluster.

    python benchmarks/gen_cluster.py --nodes 5000 --running 1000 --pending 200 --workload mixed --seed 1 > /tmp/c.json
    python benchmarks/bench_explain.py /tmp/c.json [--pods 50] [--rules default]

Each pending pod (the first --pods) is explained against the cluster's snapshot with a fresh
private session, as the live endpoint does: every filter on every node, the reasons of every
failing (node, filter) pair, the 10 nearest nodes' blame, scores of the feasible nodes, and
preemption's dry run when nothing fits. Prints the median, 95th percentile and worst time,
and the time of the first call (cold: node columns built, indexes made).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.scheduler.why import explain_pod  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cluster")
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--rules", action="append")
    args = parser.parse_args()
    objects = load_cluster([args.cluster])
    rules = load_rules([resolve_rules_path(r) for r in args.rules or ["default"]])
    store = objects.store()
    snapshot = store.snapshot()
    times, unschedulable = [], 0
    for pod in objects.pending_pods[: args.pods]:
        started = time.perf_counter()
        answer = explain_pod(pod, snapshot, rules)
        times.append(time.perf_counter() - started)
        unschedulable += answer.feasible == 0
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
    print(
        f"{len(objects.nodes)} nodes, {len(ms)} pods explained ({unschedulable} fit nowhere): "
        f"first {ms[0] if not times else times[0] * 1000:.0f} ms, median {statistics.median(ms):.0f} ms, "
        f"p95 {p95:.0f} ms, worst {ms[-1]:.0f} ms"
    )


if __name__ == "__main__":
    main()
