"""The FGD policy's replay speed through `rulesched simulate` (issue 38's speed target).

    python benchmarks/bench_fgd_speed.py [--nodes N] [--seed 42] [--rules gpu-fragmentation]
        [--runs 1] [--against OTHER_TREE [--together]] [--parts]

Replays the default openb trace (or its first N nodes and arrivals drawn for them, as
bench_fragmentation.py draws them) with the rule set through `simulate` (every node scored,
ties drawn with the seed) and prints, per run: pods, placed, % of GPU milli allocated, CPU
seconds, wall seconds, pods per CPU-second, pods/s, the pods/s `simulate` itself reports (its
scheduling loop alone, without converting and loading the trace), peak RSS, and a digest of every pod's node
and of every pod's (node, message, nomination, victims), so two trees are seen to place alike.
``--against`` runs another checkout's rulesched package (this tree's harness) in
alternation with this one, ``--runs`` times each, each run a fresh process, and prints the
medians and their ratio (CPU seconds: the machine is shared). ``--parts`` adds in-process CPU
timers around the feasible side's parts (PARTS: the DRA allocator, the feasible rows, the
failing walk's first failures, FitError reasons and node statuses, preemption), each run's and
their medians: steadier than the total when other work shares the machine. ``--together`` starts
each pair's two runs at the same moment (one process each) instead of one after the other: on a
machine other work loads unevenly, both then run under the same load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_diagnosis import in_tree  # noqa: E402  (a sibling script: run in another tree)

# The feasible side's parts, timed in process with --parts (CPU seconds, inclusive; the
# allocator's runs are inside the feasible rows): steadier on a shared machine than the total.
PARTS = {
    "allocator": ("rulesched.semantics.dra", "Allocator", "allocate"),
    "feasible": ("rulesched.engine.table", "NodeTable", "feasible"),
    "failures": ("rulesched.engine.table", "NodeTable", "failures"),
    "reasons": ("rulesched.scheduler.cycle", "", "reason_counts"),
    "statuses": ("rulesched.scheduler.cycle", "Cycle", "statuses"),
    "preemption": ("rulesched.scheduler.scheduler", "", "preempt"),
}


def _timed_parts() -> dict[str, float]:
    """Wrap each of PARTS (where the caller looks it up) with a CPU timer; the sums, by part."""
    import importlib

    spent = dict.fromkeys(PARTS, 0.0)
    for part, (module, owner, name) in PARTS.items():
        where = importlib.import_module(module)
        holder = getattr(where, owner) if owner else where

        def timed(*args: object, _fn: object = getattr(holder, name), _part: str = part, **kwargs: object) -> object:
            began = time.process_time()
            try:
                return _fn(*args, **kwargs)  # type: ignore[operator]
            finally:
                spent[_part] += time.process_time() - began

        setattr(holder, name, timed)
    return spent


def one(nodes_wanted: int, seed: int, rules: str, parts: bool = False) -> dict[str, object]:
    """One replay in this process (this tree's rulesched); ``parts``: with the parts' timers."""
    import bench_fragmentation as bench
    import openb

    spent = _timed_parts() if parts else None

    nodes = openb.read_nodes()
    if nodes_wanted:
        nodes = nodes[:nodes_wanted]
    trace = openb.read_pods(openb.find_trace("default"))
    workload = openb.arrivals(trace, nodes, seed)
    run = bench.Run(trace="default", policy=rules, seed=seed, engine="rules", tie="random")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    placed, report = bench.place_with_rules(nodes, workload, run)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    by_name = {p.name: p for p in workload.pods}
    allocated = sum(by_name[name].total_gpu_milli for name, node in placed.items() if node)
    total = sum(n.gpus for n in nodes) * openb.MILLI
    rows = [(r["pod"], r["node"], r["message"], r["nominated"], r["victims"]) for r in report.iter_rows()]
    pods = len(workload.pods)
    return {
        "nodes": len(nodes),
        "pods": pods,
        "placed": sum(1 for node in placed.values() if node),
        "allocated_percent": round(100 * allocated / total, 2),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "pods_per_cpu_s": round(pods / cpu, 1),
        "pods_per_s": round(pods / wall, 1),
        # What `rulesched simulate` itself reports: its scheduling loop alone (wall), without
        # the converter, loading the cluster file and reading the rules that the figures above hold.
        "simulate_s": round(report.seconds, 2),
        "simulate_pods_per_s": round(pods / report.seconds, 1) if report.seconds else 0.0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "placements": _digest(sorted(placed.items())),
        "outcomes": _digest(rows),
        **({"parts_cpu_s": {k: round(v, 3) for k, v in spent.items()}} if spent is not None else {}),
    }


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()[:12]


def in_process(tree: Path, args: argparse.Namespace) -> dict[str, object]:
    """One replay in a fresh process running ``tree``'s rulesched (this tree's harness: the
    converter and the arrivals are the same for both)."""
    return in_tree(tree, [str(HERE / "bench_fgd_speed.py"), "--one", *_passed(args)], cwd=tree)


def _passed(args: argparse.Namespace) -> list[str]:
    return [
        "--nodes",
        str(args.nodes),
        "--seed",
        str(args.seed),
        "--rules",
        args.rules,
        *(["--parts"] if args.parts else []),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=0, help="the trace's first N nodes (0: all 1,213)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rules", default="gpu-fragmentation")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--against", type=Path, help="another rulesched checkout, run in alternation")
    parser.add_argument("--parts", action="store_true", help="time the feasible side's parts in process too")
    parser.add_argument("--together", action="store_true", help="with --against: each pair's two runs at once")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # (a child: this tree's code, one replay, one JSON line)
        print(json.dumps(one(args.nodes, args.seed, args.rules, args.parts)))
        return 0
    trees = {"this": HERE.parent}
    if args.against is not None:
        trees["against"] = args.against.resolve()
    results: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        if args.together:  # (both under the same load: steadier ratios on a shared machine)
            with ThreadPoolExecutor(len(trees)) as pool:
                pair = dict(zip(trees, pool.map(lambda tree: in_process(tree, args), trees.values()), strict=True))
        for name, tree in trees.items():
            found = pair[name] if args.together else in_process(tree, args)
            results[name].append(found)
            print(name, json.dumps(found), flush=True)
    medians = {name: statistics.median(float(str(r["cpu_s"])) for r in rs) for name, rs in results.items()}
    for name, rs in results.items():
        print(
            f"{name}: median {medians[name]:.1f} CPU s, {statistics.median(float(str(r['pods_per_cpu_s'])) for r in rs):.0f}"
            f" pods/CPU-s, {statistics.median(float(str(r['pods_per_s'])) for r in rs):.0f} pods/s wall,"
            f" peak RSS {max(int(str(r['peak_rss_mib'])) for r in rs)} MiB"
            + (  # (an older tree's harness does not report it)
                f", simulate's own loop {statistics.median(float(str(r['simulate_pods_per_s'])) for r in rs):.0f} pods/s"
                if all("simulate_pods_per_s" in r for r in rs)
                else ""
            )
        )
    for name, rs in results.items():
        if rs and "parts_cpu_s" in rs[0]:
            found = {p: statistics.median(float(r["parts_cpu_s"][p]) for r in rs) for p in PARTS}  # type: ignore[index]
            print(f"{name}: parts, median CPU s: " + ", ".join(f"{p} {v:.2f}" for p, v in found.items()))
    if "against" in results:
        same = {(r["placements"], r["outcomes"]) for rs in results.values() for r in rs}
        print(f"CPU s ratio this/against: {medians['this'] / medians['against']:.3f}; outcomes same: {len(same) == 1}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
