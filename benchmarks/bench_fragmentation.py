"""GPU fragmentation on Alibaba's openb trace: the FGD paper's experiment over policies, seeds and traces.

    python benchmarks/bench_fragmentation.py [--traces default,gpushare40,...] [--policies fgd,bestfit,...]
        [--seeds 10] [--first-seed 42] [--tie rank|random] [--jobs 2] [--out DIR]

For each trace, policy and seed (seeds 42.. as the paper's run scripts): the cluster of 1213 GPU
nodes (6212 GPUs) empty; pods arrive by the paper's method (benchmarks/openb.py: the trace
shuffled, then pods drawn with replacement until the GPU requests reach 130% of the GPUs), each
placed or failed once, never leaving. The figure is the share of GPU milli allocated when the
arrived requests reach 130% (the paper's Fig. 9(a) and its tables), with the curve along the way.

Prints a table (mean ± standard deviation over the seeds, [min-max]) beside the paper's figure
for the same trace and policy (from its simulator's expected results, when cached: see
openb.py), and writes to --out (default /tmp/rulesched-fragmentation): `results.json` (every
run: final and at-130% allocation, failed pods, fragmentation at the end in GPU milli (the
reference model's against the trace's typical pods, a rules run's as `simulate` reports it,
against the arrivals'), GPUs by model, the curve sampled at each whole percent of arrival) and
`allocation.png` (the curve per policy on each trace, ours solid, the paper's dashed; needs
matplotlib: `pip install -e '.[bench]'`).

Runs go to `--jobs` worker processes (default 2: the machine has 2 cores), each under `nice 10`.
`--tie rank` breaks ties as the paper's simulator does (a seeded node order), `--tie random` as
kube-scheduler and rulesched do.

`--engine rules` runs rule sets through `rulesched simulate` instead of the reference model
(fgd_reference.py): `--rules` (or `--policies`) names them, a bundled set's name or a path, `A+B`
composing; the paper's baselines by their names here (random, dotprod, clustering, packing,
bestfit: rules/examples/gpu-baselines/), so the table sets them beside the paper's figures.
GPUs are DRA devices shared by GPU milli (`--gpus dra`, every feasible node scored as in the
paper) or the extended resource `nvidia.com/gpu` taken whole (`--gpus extended`).

`--target-workload TRACE` has the reference model's FGD measure fragmentation against another
trace's typical pods (`default`: the table the FGD rule sets ship) rather than the run's own (the
paper's). `--from a/results.json,b/results.json` runs nothing: it tables and plots earlier runs
together (runs split over invocations).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fgd_reference  # noqa: E402
import openb  # noqa: E402

if TYPE_CHECKING:
    from rulesched.simulate.report import Report

# The paper's baselines as rule sets (rules/examples/gpu-baselines/): with --engine rules these
# names stand for the files, so the table sets them beside the paper's figures.
BASELINE_RULES = {
    "random": "random.rules",
    "dotprod": "dot-product.rules",
    "clustering": "clustering.rules",
    "packing": "packing.rules",
    "bestfit": "best-fit.rules",
}
BASELINES_DIR = Path(__file__).resolve().parent.parent / "rules" / "examples" / "gpu-baselines"

PAPER_POLICY_DIRS = {
    "random": "01-Random",
    "dotprod": "02-DotProd",
    "clustering": "03-GpuClustering",
    "packing": "04-GpuPacking",
    "bestfit": "05-BestFit",
    "fgd": "06-FGD",
}


@dataclass(frozen=True)
class Run:
    trace: str
    policy: str  # a reference policy (fgd_reference.POLICIES), or for the rules engine a rule set
    seed: int
    engine: str
    tie: str
    gpus: str = "dra"  # the rules engine: GPUs as DRA devices, or as the extended resource nvidia.com/gpu
    as_is: bool = False  # the trace's pods once in file order, not the paper's arrivals
    percentage: int = 100  # the rules engine's percentage of nodes to score (0: kube-scheduler's adaptive)
    target: str = ""  # the reference model: the trace whose typical pods FGD measures against ("": its own)


@dataclass
class RunResult:
    trace: str
    policy: str
    seed: int
    engine: str
    tie: str
    pods: int
    placed: int
    failed: int
    at_130: float | None  # the paper's figure: allocated when the arrived requests reach 130% of the GPUs
    final: float
    figure: float  # what the table shows: at_130, or with --as-is (arrivals stop short of 130%) final
    frag_milli: float
    gpus_by_model: dict[str, list[int]]
    curve: dict[int, float]  # arrived % of GPUs -> allocated %
    cpu_seconds: float
    target: str = ""  # the reference model's target workload: this trace's typical pods ("": its own)


def _nice() -> None:
    try:
        os.nice(10)
    except OSError:
        pass


def run_one(run: Run) -> RunResult:
    start = time.process_time()
    nodes = openb.read_nodes()
    trace = openb.read_pods(openb.find_trace(run.trace))
    workload = openb.arrivals(trace, nodes, run.seed)
    if run.as_is:
        workload = openb.Workload(tuple(trace), workload.node_rank, workload.target_milli)
    if run.engine == "reference":
        mix = openb.read_pods(openb.find_trace(run.target)) if run.target else trace
        out = fgd_reference.replay(nodes, workload, openb.typical_pods(mix), run.policy, run.seed, run.tie)
    elif run.engine == "rules":
        out = replay_rules(nodes, workload, run)
    else:
        raise ValueError(f"unknown engine {run.engine!r}")
    top = round(100 * max(out.arrived_milli) / out.total_milli)
    curve = {p: v for p in range(0, top + 1) if (v := out.at_arrival(p)) is not None}
    final = round(out.final_percent, 3)
    return RunResult(
        trace=run.trace,
        policy=run.policy,
        seed=run.seed,
        engine=run.engine,
        tie=run.tie,
        pods=len(workload.pods),
        placed=out.placed,
        failed=out.failed,
        at_130=out.at_arrival(130),
        final=final,
        figure=final if run.as_is else (out.at_arrival(130) or 0.0),
        frag_milli=round(out.frag_milli, 1),
        gpus_by_model=out.gpus_by_model,
        curve=curve,
        cpu_seconds=round(time.process_time() - start, 2),
        target=run.target,
    )


def rule_files(policy: str) -> tuple[str, ...]:
    """The rule set a policy names for the rules engine: parts joined by `+` compose; a
    baseline's name (BASELINE_RULES) is its file in rules/examples/gpu-baselines/, anything else
    a bundled set's name or a path."""
    return tuple(str(BASELINES_DIR / BASELINE_RULES[p]) if p in BASELINE_RULES else p for p in policy.split("+"))


def replay_rules(nodes: list[openb.GpuNode], workload: openb.Workload, run: Run) -> fgd_reference.Outcome:
    """The workload through `rulesched simulate` with the rule set `run.policy` (see
    place_with_rules). With `--gpus dra` a placed pod counts `num_gpu` x `gpu_milli`, as in the
    paper; with `--gpus extended` `num_gpu` whole GPUs (a shared GPU taken whole). The
    fragmentation at the end is simulate's (see simulate_fragmentation)."""
    placed, report = place_with_rules(nodes, workload, run)
    model = {n.name: n.model for n in nodes}
    total = sum(n.gpus for n in nodes) * openb.MILLI
    out = fgd_reference.Outcome(run.policy, run.seed, total)
    out.frag_milli = simulate_fragmentation(report)
    for n in nodes:
        out.gpus_by_model.setdefault(n.model, [0, 0])[1] += n.gpus * openb.MILLI
    arrived = allocated = 0
    for pod in workload.pods:
        arrived += pod.total_gpu_milli
        node = placed.get(pod.name)
        if node is None:
            out.failed += 1
        else:
            out.placed += 1
            held = pod.total_gpu_milli if run.gpus == "dra" else pod.num_gpu * openb.MILLI
            allocated += held
            out.gpus_by_model[model[node]][0] += held
        out.arrived_milli.append(arrived)
        out.allocated_milli.append(allocated)
    return out


def simulate_fragmentation(report: Report) -> float:
    """The GPU milli fragmented at the end, as `simulate` reports it (its devices section:
    rulesched/simulate/devices.py, the paper's measure against the target workload of the input's
    own pods, i.e. the arrivals' commonest shapes covering 95% of them; the reference model takes
    the trace's). 0 when the GPUs are not DRA devices shared by GPU milli (`--gpus extended`)."""
    devices = report.devices
    if devices is None or devices.measure != "milli":
        return 0.0
    total = devices.total
    return total.fragmented / total.scale


def place_with_rules(
    nodes: Sequence[openb.GpuNode], workload: openb.Workload, run: Run
) -> tuple[dict[str, str | None], Report]:
    """Each pod's node (None: it failed) and simulate's report, the workload through `rulesched simulate` with the
    rule set `run.policy` (ties drawn at random, seeded; every feasible node scored unless
    `run.percentage` says otherwise, as the paper's simulator does): the trace as Kubernetes
    objects (openb_to_k8s.py), the pods pending in arrival order, each attempted in that order (a
    pod that failed never fits later: pods never leave). With `--gpus dra` a GPU is a device
    shared by claims asking GPU milli."""
    import gc
    import tempfile

    import msgspec
    import openb_to_k8s

    from rulesched.simulate.load import load_cluster
    from rulesched.simulate.run import SimulateSettings, simulate

    # The collector paused while the trace is converted: its dicts and lists hold no cycles,
    # and the full collections the converting set off walked them with everything else (0.2
    # CPU s on the whole trace). msgspec encodes the same objects as json.dumps ~4x faster.
    collecting = gc.isenabled()
    gc.disable()
    try:
        items = list(openb_to_k8s.objects(nodes, workload.pods, workload.node_rank, run.gpus))
        text = msgspec.json.encode({"apiVersion": "v1", "kind": "List", "items": items})
        del items
    finally:
        if collecting:
            gc.enable()
    with tempfile.NamedTemporaryFile("wb", suffix=".json") as f:
        f.write(text)
        f.flush()
        objects = load_cluster([f.name])
    settings = SimulateSettings(
        cluster=(), rules=rule_files(run.policy), seed=run.seed, percentage_of_nodes_to_score=run.percentage
    )
    report = simulate(objects, settings)
    prefix = f"{openb_to_k8s.NAMESPACE}/"
    return {str(row["pod"]).removeprefix(prefix): row["node"] for row in report.iter_rows()}, report  # type: ignore[misc]


def paper_results() -> dict[tuple[str, str], list[dict[str, str]]]:
    """(trace, policy) -> the paper's rows (one per seed), from its expected_results, if cached."""
    path = openb.cache_dir() / "fgd-expected" / "analysis_allo_discrete.csv"
    rows: dict[tuple[str, str], list[dict[str, str]]] = {}
    if not path.is_file():
        return rows
    policy_of = {v: k for k, v in PAPER_POLICY_DIRS.items()}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            trace = row["workload"].removeprefix("openb_pod_list_")
            policy = policy_of.get(row["sc_policy"])
            if policy:
                rows.setdefault((trace, policy), []).append(row)
    return rows


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    sd = statistics.pstdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.2f} ±{sd:.2f} [{min(values):.2f}-{max(values):.2f}]"


def table(results: list[RunResult], paper: dict[tuple[str, str], list[dict[str, str]]]) -> str:
    traces = list(dict.fromkeys(r.trace for r in results))
    policies = list(dict.fromkeys(r.policy for r in results))
    lines = [
        "| policy | " + " | ".join(f"{t} (ours) | {t} (paper)" for t in traces) + " |",
        "|---|" + "---|---|" * len(traces),
    ]
    for policy in policies:
        cells = []
        for trace in traces:
            ours = [r.figure for r in results if r.trace == trace and r.policy == policy]
            theirs = [float(row["130"]) for row in paper.get((trace, policy), []) if row.get("130")]
            cells += [summary(ours), summary(theirs)]
        lines.append(f"| {fgd_reference.PAPER_NAMES.get(policy, policy)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def unallocated(results: list[RunResult], total_gpus: int) -> str:
    lines = []
    for trace in dict.fromkeys(r.trace for r in results):
        parts = []
        for policy in dict.fromkeys(r.policy for r in results):
            runs = [r for r in results if r.trace == trace and r.policy == policy]
            if runs:
                left = statistics.mean((100 - r.figure) * total_gpus / 100 for r in runs)
                frag = statistics.mean(r.frag_milli for r in runs) / openb.MILLI
                parts.append(f"{policy} {left:.0f} ({frag:.0f} fragmented at the end)")
        lines.append(f"  {trace}: GPUs left unallocated: " + ", ".join(parts))
    return "\n".join(lines)


def plot(results: list[RunResult], paper: dict[tuple[str, str], list[dict[str, str]]], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (pip install -e '.[bench]')"
    traces = list(dict.fromkeys(r.trace for r in results))
    policies = list(dict.fromkeys(r.policy for r in results))
    fig, axes = plt.subplots(1, len(traces), figsize=(7 * len(traces), 5.5), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, trace in zip(axes[0], traces, strict=False):
        for n, policy in enumerate(policies):
            runs = [r for r in results if r.trace == trace and r.policy == policy]
            xs = sorted(set.intersection(*(set(r.curve) for r in runs)))
            ys = [statistics.mean(r.curve[x] for r in runs) for x in xs]
            colour = colours[n % len(colours)]
            ax.plot(
                xs,
                ys,
                color=colour,
                label=f"{fgd_reference.PAPER_NAMES.get(policy, policy)} "
                f"({statistics.mean(r.figure for r in runs):.2f}%)",
            )
            rows = paper.get((trace, policy), [])
            if rows:
                pxs = [x for x in range(0, 131) if all(row.get(str(x)) for row in rows)]
                pys = [statistics.mean(float(row[str(x)]) for row in rows) for x in pxs]
                ax.plot(pxs, pys, color=colour, linestyle="--", linewidth=0.8)
        ax.plot([0, 100, 130], [0, 100, 100], color="grey", linewidth=0.5)
        ax.set_xlim(80, 131)
        ax.set_ylim(80, 101)
        ax.set_xlabel("GPU requests arrived (% of the cluster's GPUs)")
        ax.set_ylabel("GPU allocated (% of GPU milli)")
        ax.set_title(f"openb {trace}: mean of {len({r.seed for r in results})} seeds (paper dashed)")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return f"plot: {path}"


def read_results(path: Path) -> list[RunResult]:
    """The runs a results.json holds (JSON's keys are strings: the curve's are whole percents)."""
    runs = []
    for r in json.loads(path.read_text()):
        r["curve"] = {int(k): v for k, v in r["curve"].items()}
        runs.append(RunResult(**r))
    return runs


def replot(files: list[Path], out: Path) -> int:
    try:
        results = [r for f in files for r in read_results(f)]
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"bench_fragmentation: --from: {e}", file=sys.stderr)
        return 2
    seeds = sorted({r.seed for r in results})
    print(
        f"GPU allocation when requests reach 130% of the GPUs (% of GPU milli; {len(results)} earlier runs, seeds {seeds}):"
    )
    paper = paper_results()
    print(table(results, paper))
    print(unallocated(results, sum(n.gpus for n in openb.read_nodes())))
    out.mkdir(parents=True, exist_ok=True)
    print(plot(results, paper, out / "allocation.png"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", default="default", help="comma-separated trace variants (default: default)")
    parser.add_argument(
        "--policies",
        help="the reference model's policies (default: the paper's six); with --engine rules, rule sets as --rules",
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=42)
    parser.add_argument("--engine", default="reference", choices=["reference", "rules"])
    parser.add_argument(
        "--rules",
        help="the rules engine: comma-separated rule sets (a bundled name or a path; A+B composes; "
        f"the baselines by name: {', '.join(BASELINE_RULES)}); default: default",
    )
    parser.add_argument("--gpus", default="dra", choices=["dra", "extended"], help="the rules engine's GPUs")
    parser.add_argument(
        "--percentage-of-nodes-to-score",
        type=int,
        help="the rules engine: 100 with --gpus dra (the paper's), 0 (kube-scheduler's adaptive) with extended",
    )
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="the trace's pods once, in file order (one run per policy: the seed only draws ties)",
    )
    parser.add_argument("--tie", default="rank", choices=["rank", "random"])
    parser.add_argument(
        "--target-workload",
        default="",
        help="the reference model: the trace whose typical pods FGD measures fragmentation against "
        "(default: each run's own, as the paper's simulator; `default` is the table the FGD rule sets ship)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/rulesched-fragmentation"))
    parser.add_argument(
        "--from",
        dest="earlier",
        help="no runs: the table and the plot (in --out) of earlier runs, from their comma-separated "
        "results.json files (runs split over several invocations, seeds or rule sets)",
    )
    args = parser.parse_args(argv)
    if args.earlier:
        return replot([Path(f) for f in args.earlier.split(",") if f], args.out)
    traces = [t for t in args.traces.split(",") if t]
    if args.target_workload and args.engine == "rules":
        parser.error("--target-workload is the reference model's (a rule set ships its target workload)")
    try:
        for trace in [*traces, *([args.target_workload] if args.target_workload else [])]:
            openb.find_trace(trace)
        openb.node_list()
    except openb.TraceError as e:
        print(f"bench_fragmentation: {e}", file=sys.stderr)
        return 2
    if args.engine == "rules":
        policies = (args.rules or args.policies or "default").split(",")
    else:
        policies = (args.policies or ",".join(fgd_reference.POLICIES[:6])).split(",")
    tie = "random" if args.engine == "rules" else args.tie  # (rulesched draws its ties)
    percentage = args.percentage_of_nodes_to_score
    if percentage is None:
        percentage = 100 if args.gpus == "dra" else 0
    runs = [
        Run(t, p, s, args.engine, tie, args.gpus, args.as_is, percentage, args.target_workload)
        for t in traces
        for p in policies
        for s in range(args.first_seed, args.first_seed + args.seeds)
    ]
    start = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs, initializer=_nice) as pool:
        results = list(pool.map(run_one, runs))
    wall = time.monotonic() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    paper = paper_results()
    total_gpus = sum(n.gpus for n in openb.read_nodes())
    what = "the trace ran once, in file order" if args.as_is else "requests reach 130% of the GPUs"
    unit = "whole GPUs, a shared GPU taken whole" if args.engine == "rules" and args.gpus == "extended" else "GPU milli"
    print(
        f"GPU allocation when {what} (% of {unit}; engine {args.engine}, ties {tie}; "
        f"{args.seeds} seeds from {args.first_seed}"
        + (f"; FGD's target workload: the {args.target_workload} trace's" if args.target_workload else "")
        + "):"
    )
    print(table(results, paper))
    print(unallocated(results, total_gpus))
    cpu = sum(r.cpu_seconds for r in results)
    print(
        f"{len(results)} runs, {cpu:.0f} CPU s ({cpu / len(results):.1f} per run), {wall:.0f} s wall "
        f"on {args.jobs} processes; results: {args.out / 'results.json'}"
    )
    print(plot(results, paper, args.out / "allocation.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
