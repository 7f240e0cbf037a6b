"""kube-scheduler's own performance suite (scheduler_perf), run on rulesched's simulator.

    python benchmarks/bench_suite.py                        # every transcribed upstream workload
    python benchmarks/bench_suite.py --workload PreemptionBasic --workload Unschedulable
    python benchmarks/bench_suite.py --pressure             # + pods stop fitting (distinct pods, 5000 nodes)
    python benchmarks/bench_suite.py --scaling              # + mixed at 500 ... 100 000 nodes
    python benchmarks/bench_suite.py --all                  # all three tables
    python benchmarks/bench_suite.py --list                 # the workloads, and those left out and why
    python benchmarks/bench_suite.py --against /tmp/main --repeat 3   # main's tree vs this one, alternated

The upstream workloads are data: ``scheduler_perf.yaml`` (templates, operations, thresholds,
transcribed from kubernetes/kubernetes test/integration/scheduler_perf). For each one the suite
builds the cluster as ``kubectl get -o json`` output, loads it as ``rulesched simulate`` does,
schedules the init pods through the scheduler (untimed, as upstream waits for them), then times
every cycle while the measured pods schedule (churn pods, where upstream injects them, are added
as the measured pods go and their cycles count in the time). Each workload runs in a process of
its own, so peak RSS is that workload's. Printed per workload: pods/s (measured pods placed per
second of the measured phase), p50/p99 and the worst of its cycles, peak RSS, load time, and the
ratio to upstream's threshold (pods/s kube-scheduler must reach in upstream's CI; the target here
is 3x). Figures only; no assertions. Timings on a shared machine vary: compare medians of
alternated runs (``--repeat``); pods per CPU-second of the process (in brackets) moves less with
other load than pods per second. ``BENCH_SUITE_PROFILE=FILE`` (with one workload) writes a cProfile
of its measured phase to FILE.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SUITE = HERE / "scheduler_perf.yaml"
TARGET_RATIO = 3.0
SCALING_NODES = (500, 5000, 15000, 50000, 100000)


# --- building a workload's objects -------------------------------------------------------------


def _fill(template: Any, index: int) -> Any:
    """The template with ``{{.Index}}`` replaced by ``index`` in every key and string."""
    if isinstance(template, dict):
        return {_fill(k, index): _fill(v, index) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, index) for v in template]
    if isinstance(template, str) and "{{.Index}}" in template:
        return template.replace("{{.Index}}", str(index))
    return template


class Builder:
    """Turns a workload's operations into objects (``items``) and phases of pods to schedule."""

    def __init__(self, suite: dict[str, Any], workload: dict[str, Any], scale: float = 1.0) -> None:
        self.templates = suite["templates"]
        self.workload = workload
        self.scale = scale
        self.items: list[dict[str, Any]] = []
        self.phases: list[dict[str, Any]] = []  # {"pods": [keys], "measure": bool, "wait": bool}
        self.churn: list[dict[str, Any]] = []  # churn pod objects, in order of injection
        self.churn_every = 0
        self.serial = 0
        self.node_serial = 0

    def count(self, n: int) -> int:
        return max(1, round(n * self.scale)) if n else 0

    def template(self, name: str, index: int) -> dict[str, Any]:
        return _fill(copy.deepcopy(self.templates[name]), index)

    def build(self) -> Builder:
        for op in self.workload["ops"]:
            getattr(self, "op_" + op["op"])(op)
        return self

    def op_createNodes(self, op: dict[str, Any]) -> None:  # noqa: N802 (upstream's opcode)
        label = op.get("label")
        for i in range(self.count(op["count"])):
            node = self.template(op.get("template", "node-default"), i)
            meta = node["metadata"]
            if meta["name"].endswith("-"):  # generateName
                meta["name"] = f"{meta['name']}{self.node_serial}"
            self.node_serial += 1
            labels = meta.setdefault("labels", {})
            labels.setdefault("kubernetes.io/hostname", meta["name"])
            if label:
                labels[label["key"]] = label["values"][i % len(label["values"])]
            status = node["status"]
            status["capacity"].update(op.get("nodeAllocatable", {}))
            self.items.append(node)
            if op.get("csiNodeAllocatable"):
                csinode: dict[str, Any] = {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSINode",
                    "metadata": {"name": meta["name"]},
                    "spec": {
                        "drivers": [
                            {"name": d, "nodeID": meta["name"], "allocatable": {"count": c}}
                            for d, c in op["csiNodeAllocatable"].items()
                        ]
                    },
                }
                if op.get("migratedPlugins"):
                    csinode["metadata"]["annotations"] = {
                        "storage.alpha.kubernetes.io/migrated-plugins": ",".join(op["migratedPlugins"])
                    }
                self.items.append(csinode)

    def op_createNamespaces(self, op: dict[str, Any]) -> None:  # noqa: N802
        for i in range(op["count"]):
            ns = self.template(op["template"], i) if op.get("template") else {"apiVersion": "v1", "kind": "Namespace"}
            ns.setdefault("metadata", {})["name"] = f"{op['prefix']}-{i}"
            self.items.append(ns)

    def op_createAny(self, op: dict[str, Any]) -> None:  # noqa: N802
        obj = self.template(op["template"], 0)
        meta = obj["metadata"]
        meta["name"] = meta["name"].rstrip("-") + "-0"
        meta["namespace"] = op.get("namespace", "default")
        self.items.append(obj)

    def _pod(self, template: str, index: int, namespace: str, pv: str | None) -> dict[str, Any]:
        pod = self.template(template, index)
        meta = pod["metadata"]
        if meta["name"].endswith("-"):
            meta["name"] = f"{meta['name']}{self.serial}"
        self.serial += 1
        meta["namespace"] = namespace
        meta["uid"] = f"uid-{namespace}-{meta['name']}"
        if pv:  # a volume per pod and a claim bound to it (scheduler_perf's PV/PVC factory)
            name = meta["name"]
            volume = self.template(pv, index)
            volume["metadata"] = {"name": f"pv-{namespace}-{name}"}
            source = volume["spec"]
            if "csi" in source:
                source["csi"]["volumeHandle"] = f"vol-{namespace}-{name}"
            if "awsElasticBlockStore" in source:
                source["awsElasticBlockStore"]["volumeID"] = f"vol-{namespace}-{name}"
            source["claimRef"] = {"namespace": namespace, "name": f"pvc-{name}", "uid": f"uid-pvc-{namespace}-{name}"}
            volume["status"] = {"phase": "Bound"}
            claim = self.template("pvc", index)
            claim["metadata"].update(name=f"pvc-{name}", namespace=namespace, uid=f"uid-pvc-{namespace}-{name}")
            claim["spec"]["volumeName"] = volume["metadata"]["name"]
            claim["status"] = {"phase": "Bound"}
            pod["spec"].setdefault("volumes", []).append(
                {"name": "vol", "persistentVolumeClaim": {"claimName": f"pvc-{name}"}}
            )
            self.items += [volume, claim]
        pod.setdefault("status", {})["phase"] = "Pending"
        return pod

    def op_createPods(self, op: dict[str, Any]) -> None:  # noqa: N802
        template = op.get("template") or self.workload["defaultPod"]
        namespace = op.get("namespace", "default")
        keys = []
        for i in range(self.count(op["count"])):
            pod = self._pod(template, i, namespace, op.get("pv"))
            self.items.append(pod)
            keys.append(f"{namespace}/{pod['metadata']['name']}")
        self.phases.append({"pods": keys, "measure": bool(op.get("measure")), "wait": not op.get("skipWait")})

    def op_createPodSets(self, op: dict[str, Any]) -> None:  # noqa: N802
        for n in range(op["namespaces"]):
            self.op_createPods(
                {"op": "createPods", "count": op["podsPerNamespace"], "namespace": f"{op['namespacePrefix']}-{n}"}
            )

    def op_churn(self, op: dict[str, Any]) -> None:
        # As many churn objects per measured pod as upstream sees running exactly at its threshold.
        self.churn_every = max(1, round(self.workload["threshold"] * op["intervalMilliseconds"] / 1000))
        for i in range(20000):  # more than any run injects
            for template in op["templates"]:
                self.churn.append(self._pod(template, i, "churn", None))


# --- running one workload (in its own process) -------------------------------------------------


def run_upstream(name: str, scale: float, seed: int) -> dict[str, Any]:
    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.model.decode import decode_pod
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.simulate.driver import Simulation
    from rulesched.simulate.load import load_cluster

    suite = yaml.safe_load(SUITE.read_text())
    workload = next(w for w in suite["workloads"] if w["name"] == name)
    built = Builder(suite, workload, scale).build()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": built.items}))
        del built.items
        gc.collect()
        started = time.perf_counter()
        objects = load_cluster([path])
        store = objects.store(provision=True)
        load_seconds = time.perf_counter() - started
    rules = load_rules([resolve_rules_path("default")])
    sim = Simulation(rules, store, SchedulerSettings(seed=seed))
    pending = {p.key: p for p in objects.pending_pods}
    del objects
    churn = [decode_pod(p) for p in built.churn[:2000]]
    gc.collect()
    gc.freeze()
    init_started = time.perf_counter()
    measured: dict[str, Any] = {}
    for phase in built.phases:
        pods = [pending.pop(k) for k in phase["pods"]]
        if phase["measure"]:
            measured = _measure(sim, pods, churn, built.churn_every)
            break
        for pod in pods:
            sim.add(pod)
        if phase["wait"]:
            sim.run()
    init_seconds = time.perf_counter() - init_started - measured.get("sched_s", 0.0)
    measured.update(
        name=name,
        threshold=workload["threshold"],
        threshold_v1_32=workload.get("threshold_v1_32"),
        load_s=load_seconds,
        init_s=init_seconds,
        nodes=len(store.nodes),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return measured


def _measure(sim: Any, pods: list[Any], churn: list[Any], churn_every: int) -> dict[str, Any]:
    """Add ``pods`` and time every cycle until the queue settles; one churn pod goes in after
    every ``churn_every`` measured pods attempted, while measured pods remain."""
    for pod in pods:
        sim.add(pod)
    keys = {p.key for p in pods}
    left = set(keys)
    churned = 0
    attempted = 0
    latencies: list[float] = []
    clock = time.perf_counter
    history = sim.history
    profile_to = os.environ.get("BENCH_SUITE_PROFILE")  # cProfile the measured phase into this file
    profiler = None
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started, cpu_started = clock(), time.process_time()
    while True:
        t0 = clock()
        result = sim.next_result()
        if result is None:
            break
        latencies.append(clock() - t0)
        key = result.pod.key
        if key in left:
            left.discard(key)
            attempted += 1
            if churn_every and attempted % churn_every == 0 and churned < len(churn):
                sim.add(churn[churned])
                churned += 1
    total, cpu = clock() - started, time.process_time() - cpu_started
    if profiler is not None and profile_to:
        profiler.disable()
        profiler.dump_stats(profile_to)
    placed = sum(1 for k in keys if history[k].node is not None)
    latencies.sort()
    return {
        "measured": len(keys),
        "placed": placed,
        "churn_pods": churned,
        "churn_placed": sum(1 for p in churn[:churned] if history[p.key].node is not None),
        "cycles": len(latencies),
        "sched_s": total,
        "pods_per_s": placed / total if total else 0.0,
        "pods_per_cpu_s": placed / cpu if cpu else 0.0,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0,
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))] if latencies else 0.0,
        "max_ms": 1000 * latencies[-1] if latencies else 0.0,
    }


def run_generated(workload: str, nodes: int, running: int, pending: int, seed: int) -> dict[str, Any]:
    """A gen_cluster.py workload through bench_schedule.py's harness."""
    from bench_schedule import run

    result: dict[str, Any] = dict(run(workload, nodes, running, pending, seed))
    result["name"] = f"{workload}/{nodes}Nodes"
    return result


# --- the tables ---------------------------------------------------------------------------------


def _child(args: list[str], tree: Path | None = None) -> dict[str, Any]:
    """Run one workload in a fresh interpreter (with ``tree``'s ``rulesched`` first on its
    PYTHONPATH when given); its JSON result."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), env.get("PYTHONPATH", "")) if p)
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median pods/s (its other figures with it)."""
    runs = sorted(runs, key=lambda r: r["pods_per_s"])
    return runs[(len(runs) - 1) // 2]


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def show_compared(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """One workload, the base tree's runs against this tree's: medians of each figure."""
    r = new[0]
    wall_b, wall_n = _median(base, "pods_per_s"), _median(new, "pods_per_s")
    cpu_b, cpu_n = _median(base, "pods_per_cpu_s"), _median(new, "pods_per_cpu_s")
    thr = r.get("threshold")
    vs = f"  new {wall_n / thr:5.1f}x thr {thr}" if thr else ""
    print(
        f"{r['name']:58} base {wall_b:7.0f} ({cpu_b:6.0f}/cpu-s)  new {wall_n:7.0f} ({cpu_n:6.0f}/cpu-s)  "
        f"x{wall_n / wall_b:5.2f} wall x{cpu_n / cpu_b:5.2f} cpu  "
        f"p99 {_median(base, 'p99_ms'):6.2f}->{_median(new, 'p99_ms'):6.2f}  "
        f"max {_median(base, 'max_ms'):6.1f}->{_median(new, 'max_ms'):6.1f} ms  "
        f"RSS {_median(base, 'peak_rss_mb'):5.0f}->{_median(new, 'peak_rss_mb'):5.0f} MB{vs}",
        flush=True,
    )


def show_upstream(r: dict[str, Any]) -> None:
    ratio = r["pods_per_s"] / r["threshold"]
    old = r.get("threshold_v1_32")
    older = f" ({r['pods_per_s'] / old:5.1f}x v1.32's {old})" if old else ""
    mark = "" if ratio >= TARGET_RATIO else "  < 3x"
    missed = "" if r["placed"] == r["measured"] else f"  placed {r['placed']}/{r['measured']}"
    churn = f"  churn {r['churn_placed']}/{r['churn_pods']}" if r["churn_pods"] else ""
    print(
        f"{r['name']:68} {r['pods_per_s']:8.0f} pods/s ({r['pods_per_cpu_s']:6.0f}/cpu-s)  p50 {r['p50_ms']:6.2f}  p99 {r['p99_ms']:7.2f}  "
        f"max {r['max_ms']:7.1f} ms  {r['peak_rss_mb']:5.0f} MB  load {r['load_s']:5.2f}s  "
        f"thr {r['threshold']:5}  {ratio:5.1f}x{older}{mark}{missed}{churn}",
        flush=True,
    )


def show_generated(r: dict[str, Any], base: float | None = None) -> None:
    per_pod = 1000 / r["pods_per_s"]
    rel = f"  {per_pod / base:5.2f}x the 5000-node per-pod cost" if base else ""
    print(
        f"{r['name']:24} nodes {r['nodes']:>6}  {r['pods_per_s']:7.0f} pods/s ({r['pods_per_cpu_s']:6.0f}/cpu-s)  "
        f"{per_pod:6.3f} ms/pod  "
        f"p50 {r['p50_ms']:5.2f}  p99 {r['p99_ms']:6.2f}  max {r['max_ms']:7.1f} ms  "
        f"{r['peak_rss_mb']:5.0f} MB  load {r['load_s']:5.2f}s + store {r['build_s']:5.2f}s  "
        f"scheduled {r['scheduled']}/{r['pending']}{rel}",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", action="append", help="upstream workloads whose name starts with this")
    parser.add_argument("--pressure", action="store_true", help="also the pods-stop-fitting workload")
    parser.add_argument("--scaling", action="store_true", help="also mixed at 500 ... 100 000 nodes")
    parser.add_argument("--scaling-nodes", type=int, nargs="+", default=list(SCALING_NODES))
    parser.add_argument("--all", action="store_true", help="upstream suite, pressure and scaling")
    parser.add_argument("--no-upstream", action="store_true", help="skip the upstream suite")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply counts (quick checks only)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per workload; the median is shown")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="also run each workload with TREE's rulesched (a checkout), alternating with this one",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="append every run's figures to FILE (JSON lines)")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        kind, *rest = args.child
        if kind == "upstream":
            result = run_upstream(rest[0], float(rest[1]), int(rest[2]))
        else:
            result = run_generated(kind, *(int(x) for x in rest))
        import rulesched

        result["tree"] = str(Path(rulesched.__file__).resolve().parent.parent)  # (which rulesched ran)
        print(json.dumps(result))
        return 0

    suite = yaml.safe_load(SUITE.read_text())
    if args.list:
        for w in suite["workloads"]:
            print(f"{w['name']:68} threshold {w['threshold']}")
        print("\nleft out:")
        for w in suite["left_out"]:
            print(f"  {w['name']}: {w['why']}")
        return 0

    def runs(child_args: list[str], tree: Path | None, label: str) -> dict[str, Any]:
        result = _child(child_args, tree)
        if args.json:
            with args.json.open("a") as out:
                out.write(json.dumps({**result, "version": label, "args": child_args}) + "\n")
        return result

    def repeat(child_args: list[str]) -> dict[str, Any]:
        if args.against is None:
            return _median_of([runs(child_args, None, "new") for _ in range(args.repeat)])
        base, new = [], []
        for _ in range(args.repeat):  # alternated, so both see the machine's load alike
            base.append(runs(child_args, args.against, "base"))
            new.append(runs(child_args, None, "new"))
        show_compared(base, new)
        return _median_of(new)

    if not args.no_upstream:
        names = [
            w["name"]
            for w in suite["workloads"]
            if not args.workload or any(w["name"].startswith(p) for p in args.workload)
        ]
        if args.workload or not (args.pressure or args.scaling) or args.all:
            print(
                f"upstream scheduler_perf workloads (target: {TARGET_RATIO:.0f}x threshold; medians of {args.repeat})"
            )
            for name in names:
                show_upstream(repeat(["upstream", name, str(args.scale), str(args.seed)]))
    if args.pressure or args.all:
        print("\npods stop fitting (distinct cpu requests; preemption finds no victims); target >= 800 pods/s,")
        print("p99 <= 10 ms, worst cycle <= 100 ms, peak RSS <= 400 MB")
        show_generated(repeat(["stops-fitting", "5000", "5000", "10000", str(args.seed)]))
    if args.scaling or args.all:
        print("\nmixed at growing node counts (running pods = nodes, 10 000 pending)")
        results = {n: repeat(["mixed", str(n), str(n), "10000", str(args.seed)]) for n in args.scaling_nodes}
        base = 1000 / results[5000]["pods_per_s"] if 5000 in results else None
        for n in args.scaling_nodes:
            show_generated(results[n], base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
