"""Golden placements: record what the scheduler decides on a set of clusters, then check a later
version decides the same (every pod's node, nomination, victims and message).

    python benchmarks/golden.py record /tmp/golden          # with the version to compare against
    python benchmarks/golden.py check /tmp/golden           # after a change: exit 1 on any difference
    python benchmarks/golden.py check /tmp/golden --only mixed --only PreemptionBasic

Run it from the worktree whose ``rulesched`` is to be recorded or checked (``PYTHONPATH=<tree>``
picks another one); the generators (gen_cluster.py, bench_suite.py's transcription of upstream's
suite) are this directory's, so both versions see the same clusters.

Cases: ``rulesched simulate --output json`` (and ``--explain`` for the small ones) of the example
clusters, with the default rules and with each example's own policy; clusters of gen_cluster.py
at a size that runs in seconds (basic, mixed, distinct, spreading, anti-affinity, volumes,
stops-fitting, preemption; two seeds); and scaled-down upstream scheduler_perf workloads run in
phases as bench_suite.py runs them (init pods, then measured pods with churn), preemption
included. Timing fields are left out. Each case's result is one gzipped JSON file in DIR.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

# (name, workload, nodes, running, pending, seed, explain)
GENERATED = [
    ("basic", "basic", 500, 200, 1500, 1, False),
    ("mixed", "mixed", 1000, 1000, 3000, 1, False),
    ("mixed-s5", "mixed", 1000, 1000, 3000, 5, False),
    ("distinct", "distinct", 1000, 1000, 2000, 1, False),
    ("spreading", "spreading", 600, 300, 1500, 1, False),
    ("anti-affinity", "anti-affinity", 600, 300, 700, 1, False),
    ("volumes", "volumes", 300, 100, 600, 1, False),
    ("stops-fitting", "stops-fitting", 1000, 1000, 2000, 1, False),
    ("stops-fitting-s3", "stops-fitting", 700, 700, 1400, 3, False),
    ("preemption", "preemption", 600, 1500, 800, 1, False),
    ("preemption-s2", "preemption", 400, 1200, 600, 2, False),
    ("preemption-explain", "preemption", 60, 150, 80, 1, True),
    ("stops-fitting-explain", "stops-fitting", 80, 80, 160, 1, True),
]
# upstream workloads (bench_suite.py), scaled: (name prefix, scale)
UPSTREAM = [
    ("PreemptionBasic", 0.2),
    ("PreemptionAsync", 0.05),
    ("Unschedulable/5kNodes/100Init", 0.05),
    ("SchedulingWithExtendedResource", 0.1),
    ("SchedulingPodMatchingAntiAffinity", 0.1),
    ("MixedSchedulingBasePod", 0.05),
    ("DefaultTopologySpreading", 0.02),
    ("SchedulingWithNodeInclusionPolicy", 0.1),
    ("SchedulingCSIPVs", 0.05),
    ("SchedulingRequiredPodAntiAffinityWithNSSelector", 0.05),
]


def _strip(report: dict[str, Any]) -> dict[str, Any]:
    """Leave out what differs from run to run or tree to tree: timings, and the input and rule
    file paths (temporary files; each tree's own rules/default.rules)."""
    summary = report.get("summary", {})
    for key in [k for k in summary if k.endswith("_seconds") or k in ("inputs", "rules")]:
        del summary[key]
    return report


def _simulate(paths: list[Path], rules: tuple[str, ...], explain: bool, seed: int = 0) -> dict[str, Any]:
    from rulesched.simulate.load import load_cluster
    from rulesched.simulate.report import render_json
    from rulesched.simulate.run import SimulateSettings, simulate

    settings = SimulateSettings(tuple(str(p) for p in paths), rules, output="json", explain=explain, seed=seed)
    objects = load_cluster(settings.cluster)
    return _strip(json.loads(render_json(simulate(objects, settings))))


def _example_cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    clusters = [ROOT / "examples" / "cluster.yaml", *sorted((ROOT / "rules" / "examples").glob("*/cluster.yaml"))]
    for path in clusters:
        label = path.parent.name if path.parent.name != "examples" else "examples"
        for explain in (False, True):
            suffix = "-explain" if explain else ""
            yield f"example-{label}{suffix}", lambda p=path, e=explain: _simulate([p], ("default",), e)
            policy = path.parent / "policy.rules"
            if policy.exists():
                text = policy.read_text()
                rules = (str(policy),) if 'extends "default"' in text else ("default", str(policy))
                yield f"example-{label}-policy{suffix}", lambda p=path, r=rules, e=explain: _simulate([p], r, e)


def _generated(workload: str, nodes: int, running: int, pending: int, seed: int, explain: bool) -> dict[str, Any]:
    from gen_cluster import generate

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps(generate(nodes, running, pending, workload, seed)))
        return _simulate([path], ("default",), explain, seed)


def _upstream(prefix: str, scale: float) -> dict[str, Any]:
    """An upstream workload, scaled, in bench_suite.py's phases; every pod's outcome."""
    from bench_suite import SUITE, Builder

    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.model.decode import decode_pod
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.simulate.driver import Simulation
    from rulesched.simulate.load import load_cluster

    suite = yaml.safe_load(SUITE.read_text())
    workload = next(w for w in suite["workloads"] if w["name"].startswith(prefix))
    built = Builder(suite, workload, scale).build()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": built.items}))
        objects = load_cluster([path])
    store = objects.store(provision=True)
    sim = Simulation(load_rules([resolve_rules_path("default")]), store, SchedulerSettings(seed=1))
    pending = {p.key: p for p in objects.pending_pods}
    churn = [decode_pod(p) for p in built.churn[:200]]
    order: list[str] = []
    for phase in built.phases:
        for key in phase["pods"]:
            sim.add(pending[key])
            order.append(key)
        if not (phase["wait"] or phase["measure"]):
            continue
        attempted, churned, left = 0, 0, set(phase["pods"]) if phase["measure"] else set()
        while (result := sim.next_result()) is not None:
            if result.pod.key in left:
                left.discard(result.pod.key)
                attempted += 1
                if built.churn_every and attempted % built.churn_every == 0 and churned < len(churn):
                    sim.add(churn[churned])
                    order.append(churn[churned].key)
                    churned += 1
        if phase["measure"]:
            break
    pods = []
    for key in order:
        h = sim.history[key]
        last = h.last
        pods.append(
            {
                "pod": key,
                "node": h.node,
                "nominated": h.nominated,
                "victims": [v.key for v in h.victims],
                "attempts": h.attempts,
                "message": last.message if last is not None else None,
            }
        )
    return {"pods": pods, "evicted": [p.key for p in sim.evicted]}


def cases() -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    yield from _example_cases()
    for name, workload, nodes, running, pending, seed, explain in GENERATED:
        yield name, lambda w=workload, n=nodes, r=running, p=pending, s=seed, e=explain: _generated(w, n, r, p, s, e)
    for prefix, scale in UPSTREAM:
        yield f"upstream-{prefix.split('/')[0]}", lambda p=prefix, s=scale: _upstream(p, s)


def _differences(old: Any, new: Any, limit: int = 5) -> list[str]:
    if isinstance(old, dict) and "pods" in old and isinstance(new, dict) and "pods" in new:
        out = []
        for a, b in zip(old["pods"], new["pods"], strict=False):
            if a != b:
                out.append(f"  {a.get('pod')}: {json.dumps(a)[:400]}\n    now: {json.dumps(b)[:400]}")
                if len(out) >= limit:
                    break
        if len(old["pods"]) != len(new["pods"]):
            out.append(f"  pod count {len(old['pods'])} -> {len(new['pods'])}")
        for key in sorted(set(old) | set(new)):
            if key != "pods" and old.get(key) != new.get(key):
                out.append(f"  {key}: {json.dumps(old.get(key))[:300]} -> {json.dumps(new.get(key))[:300]}")
        return out or ["  (equal pods, other fields differ)"]
    return ["  results differ"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--only", action="append", help="cases whose name contains this")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, run in cases():
        if args.only and not any(o in name for o in args.only):
            continue
        started = time.perf_counter()
        result = run()
        seconds = time.perf_counter() - started
        path = args.dir / f"{name}.json.gz"
        if args.action == "record":
            path.write_bytes(gzip.compress(json.dumps(result, sort_keys=True).encode()))
            print(f"recorded {name} ({seconds:.1f}s)", flush=True)
            continue
        if not path.exists():
            print(f"MISSING  {name}: no recording", flush=True)
            failed += 1
            continue
        expected = _strip(json.loads(gzip.decompress(path.read_bytes())))  # (recorded by an older golden.py)
        got = json.loads(json.dumps(result, sort_keys=True))
        if got == expected:
            print(f"same     {name} ({seconds:.1f}s)", flush=True)
        else:
            failed += 1
            print(f"DIFFERS  {name} ({seconds:.1f}s)", flush=True)
            print("\n".join(_differences(expected, got)), flush=True)
    if args.action == "check":
        print("all same" if not failed else f"{failed} case(s) differ")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
