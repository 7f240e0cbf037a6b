"""What one preemption costs (PostFilter alone: preemption.preempt as a cycle calls it) on a
cluster where every node could host the preemptor once its pods go.

    python benchmarks/bench_preemption.py [--nodes 500 --nodes 5000] [--repeat 7]
                                          [--percentage 10] [--absolute 100]

Nodes follow scheduler_perf's template (4 CPU, 32Gi, 110 pods), each full with four priority-0
pods of 900m CPU; the preemptor asks for 3 CPU at priority 100, so it fits nowhere and every node
is a candidate (three victims each). The filter statuses and the snapshot's columns are made
before timing, as the cycle hands them over (``--node-by-node``: no columns, so every node's dry
run is done alone, as for rules the columns cannot adjust). Each run draws its own offset (seeded); printed:
the first run (cold: nothing memoised on the nodes yet), the median and fastest of the rest, and
how many nodes were dry-run. ``--percentage 100 --absolute 0`` tries every node, as preemption
did before it sampled; ``PYTHONPATH=<tree>`` times another checkout's rulesched (one without
sampling ignores the two flags).
"""

from __future__ import annotations

import argparse
import inspect
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_cluster import node as template_node  # noqa: E402

from rulesched.cluster.store import ClusterStore  # noqa: E402
from rulesched.engine import ColumnStore  # noqa: E402
from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.model.decode import decode_node, decode_pod  # noqa: E402
from rulesched.scheduler import preemption  # noqa: E402
from rulesched.scheduler.evaluate import node_statuses  # noqa: E402


def _pod(name: str, cpu: str, priority: int, node_name: str = "") -> Any:
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    obj = {"kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    obj["status"] = {"phase": "Running" if node_name else "Pending"}
    return decode_pod(obj, "bench")


def cluster(n: int) -> ClusterStore:
    rng = random.Random(1)
    nodes = [decode_node(template_node(i, rng), "bench") for i in range(n)]
    pods = [_pod(f"low-{i}-{k}", "900m", 0, nodes[i].name) for i in range(n) for k in range(4)]
    return ClusterStore.build(nodes, pods)


def measure(n: int, repeat: int, percentage: int, absolute: int, alone: bool = False) -> dict[str, float]:
    store = cluster(n)
    rules = load_rules([resolve_rules_path("default")])
    incoming = _pod("preemptor", "3", 100)
    snapshot = store.snapshot()
    statuses = node_statuses(rules.bind(incoming, snapshot), snapshot.nodes)
    columns = None if alone else ColumnStore().current(snapshot)
    named: dict[str, Any] = {}
    sampling = "sampling" in inspect.signature(preemption.preempt).parameters
    if sampling:
        named = {"sampling": preemption.Sampling(percentage, absolute), "rng": random.Random(1)}
    tried = [0]
    real = preemption.select_victims, preemption.dry_runs_together

    def one(*args: Any) -> Any:
        tried[0] += 1
        return real[0](*args)

    def many(bound: Any, base: Any, nodes: Any, *rest: Any) -> Any:
        tried[0] += len(nodes)
        return real[1](bound, base, nodes, *rest)

    preemption.select_victims, preemption.dry_runs_together = one, many  # type: ignore[assignment]
    times = []
    for _ in range(repeat):
        tried[0] = 0
        session = rules.session()
        started = time.perf_counter()
        result = preemption.preempt(snapshot, session, incoming, statuses, None, columns, None, **named)
        times.append(time.perf_counter() - started)
        assert result.nominated is not None and len(result.victims) == 3
    preemption.select_victims, preemption.dry_runs_together = real  # type: ignore[assignment]
    rest = times[1:] or times
    return {
        "cold_ms": times[0] * 1000,
        "median_ms": statistics.median(rest) * 1000,
        "fastest_ms": min(rest) * 1000,
        "dry_runs": tried[0],
        "sampling": sampling,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, action="append", help="default: 500 and 5000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--percentage", type=int, default=10, help="minCandidateNodesPercentage (default 10)")
    parser.add_argument("--absolute", type=int, default=100, help="minCandidateNodesAbsolute (default 100)")
    parser.add_argument(
        "--node-by-node", action="store_true", help="without the snapshot's columns: every dry run node by node"
    )
    args = parser.parse_args(argv)
    for n in args.nodes or [500, 5000]:
        r = measure(n, args.repeat, args.percentage, args.absolute, args.node_by_node)
        what = f"{args.percentage}%/{args.absolute}" if r["sampling"] else "every node (no sampling)"
        what += ", node by node" if args.node_by_node else ""
        print(
            f"{n:6d} nodes, {what}: cold {r['cold_ms']:.1f} ms, median {r['median_ms']:.1f} ms,"
            f" fastest {r['fastest_ms']:.1f} ms ({r['dry_runs']:.0f} nodes dry-run)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
