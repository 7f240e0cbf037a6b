"""The FGD policy's replay speed through `rulesched simulate` (issue 38's speed target).

    python benchmarks/bench_fgd_speed.py [--nodes N] [--seed 42] [--rules gpu-fragmentation]
        [--runs 1] [--against OTHER_TREE [--together]] [--parts] [--cli] [--cold]

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

``--cli`` measures the whole `rulesched simulate FILE --output json` process instead, from its
start to its exit (its CPU seconds as the parent's ``wait4`` reports them: imports, loading,
the run, the report, the interpreter's exit), on the trace converted once beforehand by this
tree's harness: what a user of the command waits for. The digests are read from its JSON.

Modules' bytecode: this environment sets PYTHONDONTWRITEBYTECODE, so an editable checkout
compiles every module of rulesched in every run (~0.4 CPU s); an installed rulesched has its
bytecode. The runs read it from a cache made before them (PYTHONPYCACHEPREFIX, a temporary
folder), as an installed one does; ``--cold`` leaves it out (every run compiles, as before).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def _timed_loop() -> list[float]:
    """A CPU timer around simulate's scheduling loop (Simulation.run); its sum, as a list of one."""
    from rulesched.simulate.driver import Simulation

    spent = [0.0]
    run = Simulation.run

    def timed(self: Simulation, *args: object, **kwargs: object) -> object:
        began = time.process_time()
        try:
            return run(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent[0] += time.process_time() - began

    Simulation.run = timed  # type: ignore[assignment,method-assign]
    return spent


def one(nodes_wanted: int, seed: int, rules: str, parts: bool = False) -> dict[str, object]:
    """One replay in this process (this tree's rulesched); ``parts``: with the parts' timers."""
    import bench_fragmentation as bench
    import openb

    spent = _timed_parts() if parts else None
    loop = _timed_loop()

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
        # the window's CPU seconds in simulate's loop and outside it (converting, loading, the
        # rules, the collector's walks before and after): the outside, steadier than the whole
        "loop_cpu_s": round(loop[0], 2),
        "outside_cpu_s": round(cpu - loop[0], 2),
        "placements": _digest(sorted(placed.items())),
        "outcomes": _digest(rows),
        **({"parts_cpu_s": {k: round(v, 3) for k, v in spent.items()}} if spent is not None else {}),
    }


def convert(nodes_wanted: int, seed: int, path: Path) -> None:
    """The trace's replay as bench_fragmentation.place_with_rules converts it, written to ``path``."""
    import msgspec
    import openb
    import openb_to_k8s

    nodes = openb.read_nodes()
    if nodes_wanted:
        nodes = nodes[:nodes_wanted]
    workload = openb.arrivals(openb.read_pods(openb.find_trace("default")), nodes, seed)
    items = list(openb_to_k8s.objects(nodes, workload.pods, workload.node_rank, "dra"))
    path.write_bytes(msgspec.json.encode({"apiVersion": "v1", "kind": "List", "items": items}))


def command(tree: Path, path: Path, args: argparse.Namespace) -> dict[str, object]:
    """One `rulesched simulate` of ``tree`` on the converted trace ``path``, a fresh process
    measured from its start to its exit."""
    import openb
    from openb_to_k8s import NAMESPACE

    argv = [sys.executable, "-m", "rulesched", "simulate", str(path), "--rules", args.rules]
    argv += ["--seed", str(args.seed), "--percentage-of-nodes-to-score", "100", "--output", "json"]
    wall0 = time.perf_counter()
    child = subprocess.Popen(argv, env=dict(os.environ, PYTHONPATH=str(tree)), cwd=tree, stdout=subprocess.PIPE)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - wall0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)}: exit status {status}")
    report = json.loads(out)
    nodes = openb.read_nodes()[: args.nodes or None]
    gpus = {
        p.name: p.total_gpu_milli
        for p in openb.arrivals(openb.read_pods(openb.find_trace("default")), nodes, args.seed).pods
    }
    placed = {str(r["pod"]).removeprefix(f"{NAMESPACE}/"): r["node"] for r in report["pods"]}
    rows = [(r["pod"], r["node"], r["message"], r["nominated"], r["victims"]) for r in report["pods"]]
    cpu, pods, seconds = usage.ru_utime + usage.ru_stime, len(rows), float(report["summary"]["scheduling_seconds"])
    return {
        "nodes": len(nodes),
        "pods": pods,
        "placed": sum(1 for node in placed.values() if node),
        "allocated_percent": round(
            100 * sum(gpus[n] for n, node in placed.items() if node) / (sum(n.gpus for n in nodes) * openb.MILLI), 2
        ),
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "pods_per_cpu_s": round(pods / cpu, 1),
        "pods_per_s": round(pods / wall, 1),
        "simulate_s": round(seconds, 2),
        "simulate_pods_per_s": round(pods / seconds, 1) if seconds else 0.0,
        "peak_rss_mib": usage.ru_maxrss // 1024,
        "placements": _digest(sorted(placed.items())),
        "outcomes": _digest(rows),
    }


def cached_bytecode(trees: list[Path], folder: Path) -> None:
    """Compile the trees' rulesched and this harness into ``folder`` (PYTHONPYCACHEPREFIX: every
    source's bytecode under its own path there) and have the runs read it."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    for where in [*(tree / "rulesched" for tree in trees), HERE]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(where)], check=True)


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
    parser.add_argument("--cli", action="store_true", help="the whole `rulesched simulate` process, start to exit")
    parser.add_argument("--cold", action="store_true", help="no bytecode cached: every run compiles the modules")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # (a child: this tree's code, one replay, one JSON line)
        print(json.dumps(one(args.nodes, args.seed, args.rules, args.parts)))
        return 0
    trees = {"this": HERE.parent}
    if args.against is not None:
        trees["against"] = args.against.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-fgd-") as scratch:
        if not args.cold:
            cached_bytecode(list(trees.values()), Path(scratch) / "pycache")
        trace = Path(scratch) / "trace.json"
        if args.cli:
            convert(args.nodes, args.seed, trace)

        def measure(tree: Path) -> dict[str, object]:
            return command(tree, trace, args) if args.cli else in_process(tree, args)

        results = runs(trees, measure, args)
    report(results)
    return 0


def runs(
    trees: dict[str, Path], measure: Callable[[Path], dict[str, object]], args: argparse.Namespace
) -> dict[str, list[dict[str, object]]]:
    """``--runs`` runs of each tree, alternated (or each pair started together)."""
    results: dict[str, list[dict[str, object]]] = {name: [] for name in trees}
    for _ in range(args.runs):
        if args.together:  # (both under the same load: steadier ratios on a shared machine)
            with ThreadPoolExecutor(len(trees)) as pool:
                pair = dict(zip(trees, pool.map(measure, trees.values()), strict=True))
        for name, tree in trees.items():
            found = pair[name] if args.together else measure(tree)
            results[name].append(found)
            print(name, json.dumps(found), flush=True)
    return results


def report(results: dict[str, list[dict[str, object]]]) -> None:
    """Each tree's medians, the parts' medians (``--parts``), and the trees' ratio."""
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
        if rs and all("outside_cpu_s" in r for r in rs):
            loop, outside = (statistics.median(float(str(r[k])) for r in rs) for k in ("loop_cpu_s", "outside_cpu_s"))
            print(f"{name}: median CPU s in simulate's loop {loop:.2f}, outside it {outside:.2f}")
    for name, rs in results.items():
        if rs and "parts_cpu_s" in rs[0]:
            found = {p: statistics.median(float(r["parts_cpu_s"][p]) for r in rs) for p in PARTS}  # type: ignore[index]
            print(f"{name}: parts, median CPU s: " + ", ".join(f"{p} {v:.2f}" for p, v in found.items()))
    if "against" in results:
        same = {(r["placements"], r["outcomes"]) for rs in results.values() for r in rs}
        print(f"CPU s ratio this/against: {medians['this'] / medians['against']:.3f}; outcomes same: {len(same) == 1}")


if __name__ == "__main__":
    raise SystemExit(main())
