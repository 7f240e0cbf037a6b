"""speed: each workload's measured pods on a fresh test bed, kube-scheduler then rulesched
(alternated with --repeat); pods/s, latencies, CPU per pod of every process, requests per pod."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_cluster import generate

from .audit import format_latencies
from .audit import latencies as api_latencies
from .cluster import WORKLOADS, PodWatch, Workload, api_objects, build, settled
from .creators import create
from .processes import (
    Profile,
    Rulesched,
    Scheduler,
    Upstream,
    apiserver_metrics,
    attempts,
    component_pid,
    cpu_seconds,
    cycle_cpu,
    main_thread_seconds,
    preemptions,
    requests_served,
    scheduler_metrics,
    testbed,
)


@dataclass(frozen=True)
class Options:
    seed: int = 1
    logs: Path | None = None  # keep each scheduler's log and final /metrics here
    flags: tuple[str, ...] = ()  # rulesched run's
    pprof: tuple[Path, int] | None = None  # (DIR, seconds): kube-apiserver's CPU profile
    creator: str = "podload"  # creators.CREATORS
    # the measured pods created before the scheduler starts, which then drains them: its pods/s
    # free of the creations' competition for the cores (kube-apiserver's share: bindings, events)
    drain: bool = False
    kube_scheduler_verbosity: int = 1  # its -v: 1 as scheduler_perf; 2 logs each preemption
    # keep kube-apiserver's audit log (every client, Metadata level) here, and report each
    # client's request latencies from it (audit.py; the log costs the API server some CPU)
    audit: Path | None = None


def speed_run(workload: Workload, which: str, options: Options) -> dict[str, Any]:
    logs, flags, pprof = options.logs, options.flags, options.pprof
    drain = options.drain or workload.drain
    objects = api_objects(generate(workload.nodes, workload.running, workload.pending, workload.kind, options.seed))
    api_latency = None
    with testbed(audit=options.audit is not None) as kube, tempfile.TemporaryDirectory(prefix="bench-") as work:
        t0 = time.monotonic()
        build(kube, objects, ready_pods=workload.kind == "preemption")
        built = time.monotonic() - t0
        scheduler: Scheduler = (
            Upstream(kube, None, options.kube_scheduler_verbosity)
            if which == "kube-scheduler"
            else Rulesched(kube, None, Path(work), flags)
        )
        names = [p["metadata"]["name"] for p in objects["pending"]]
        watch = PodWatch(kube)
        watch.start()
        creation = create(kube, objects["pending"], options.creator) if drain else None
        scheduler.start()
        try:
            stamp = f"{workload.name}-{which}-{time.strftime('%H%M%S')}"
            if logs is not None:  # (kube-apiserver's metrics as the measured phase starts, scraped before
                # its CPU is read: diff them with the end's)
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"{stamp}.kube-apiserver.start.metrics").write_text(apiserver_metrics(kube))
            pids = {"scheduler": scheduler.pid(), "kube-apiserver": component_pid(kube, "kube-apiserver"),
                    "etcd": component_pid(kube, "etcd")}  # fmt: skip
            cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
            main0 = main_thread_seconds(pids["scheduler"])
            requests0 = requests_served(kube)
            ready, ready_wall = time.monotonic(), time.time()
            profile = None
            if pprof is not None:  # (DIR, seconds)
                name = f"{workload.name}-{which}-{time.strftime('%H%M%S')}.kube-apiserver.pprof"
                profile = Profile(kube, pprof[1], pprof[0] / name)
                profile.start()
            own0 = time.process_time()
            if creation is None:
                creation = create(kube, objects["pending"], options.creator)
            created, start = creation.sent, creation.started if not drain else ready
            end = start + 900
            while time.monotonic() < end and not settled(watch, names, quiet=3.0):
                time.sleep(0.2)
            own1 = time.process_time()
            cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
            main1 = main_thread_seconds(pids["scheduler"])
            requests1 = requests_served(kube)
            text = scheduler_metrics(scheduler)
            tried, preempted, cycles = attempts(text), preemptions(text), cycle_cpu(text)
            if logs is not None:  # (and its metrics as the run left them)
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"{workload.name}-{which}-{time.strftime('%H%M%S')}.metrics").write_text(text)
                # (and kube-apiserver's: its request latencies by verb and resource, as it served them)
                (logs / f"{stamp}.kube-apiserver.metrics").write_text(apiserver_metrics(kube))
            watch.stop()
            if profile is not None:
                profile.join()
        finally:
            scheduler.stop()
            if logs is not None:  # (kept: the test bed's directory goes)
                logs.mkdir(parents=True, exist_ok=True)
                log = scheduler.log if isinstance(scheduler, (Upstream, Rulesched)) else None
                if log is not None and log.exists():
                    (logs / f"{workload.name}-{which}-{time.strftime('%H%M%S')}.log").write_bytes(log.read_bytes())
                # (and kube-apiserver's log: which watchers it closed as unresponsive, among others)
                served = kube.dir / "logs" / "kube-apiserver.log"
                if served.exists():
                    (logs / f"{stamp}.kube-apiserver.log").write_bytes(served.read_bytes())
            audited = kube.dir / "logs" / "audit.log"
            if options.audit is not None and audited.exists():  # (kept, and read: the test bed goes)
                options.audit.mkdir(parents=True, exist_ok=True)
                kept = options.audit / f"{stamp}.audit.log"
                kept.write_bytes(audited.read_bytes())
                api_latency = api_latencies(kept, ready_wall)
    bound = {n: watch.seen.bound[n] for n in names if n in watch.seen.bound}
    times = sorted(t for t, _ in bound.values())
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    latencies = sorted(bound[n][0] - created[n] for n in bound)
    # CPU per pod: per the pods bound after the CPU counters started (draining, the scheduler
    # may bind a few before it says it is ready)
    count = max(1, sum(1 for t, _ in bound.values() if t >= ready))
    return {
        "workload": workload.name, "scheduler": which, "pods": len(names), "bound": len(bound),
        "flags": list(flags) if which == "rulesched" else [],
        "unschedulable": sum(1 for n in names if n not in bound and n in watch.seen.unschedulable),
        "deleted": len(watch.seen.deleted), "pods_per_second": len(bound) / span if span == span and span > 0 else None,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)] if latencies else None,
        "creator": options.creator, "drain": drain,
        "bound_before_ready": sum(1 for t, _ in bound.values() if t < ready),
        # "creator": what created the pods (podload's process; the Python creator's: this
        # process during the creations); "benchmark": this process over the whole measured phase
        # (the pods' watch and the kubelet stand-in; the Python creator's threads too)
        "cpu_ms_per_pod": {**{k: 1000 * (cpu1[k] - cpu0[k]) / count for k in pids},
                           "creator": 1000 * creation.cpu_seconds / count, "benchmark": 1000 * (own1 - own0) / count},
        # scheduler_perf's SchedulingThroughput of the same bindings (sampled each second)
        "throughput": sampled_throughput(start, times),
        "attempts": tried,
        "preemptions": preempted,
        # rulesched's cycles by outcome: how many, and the CPU each took on the scheduling thread
        "cycle_cpu": cycles,
        # rulesched's scheduling thread per attempt (kube-scheduler's main thread is not its
        # scheduling loop: left out): CPU, and time runnable but waiting for a core
        "scheduling_thread_ms_per_attempt": (
            {"cpu": 1000 * (main1[0] - main0[0]) / n_tried, "waiting_for_a_core": 1000 * (main1[1] - main0[1]) / n_tried}
            if which == "rulesched" and (n_tried := sum(v for k, v in tried.items() if "<-" not in k))
            else None
        ),
        "requests": {k: v - requests0.get(k, 0) for k, v in sorted(requests1.items()) if v != requests0.get(k, 0)},
        "build_seconds": round(built, 1), "creation_seconds": round(creation.seconds, 1),
        "first_binding_after_seconds": round(times[0] - start, 2) if times else None,
        "last_binding_after_seconds": round(times[-1] - start, 2) if times else None,
        # the bindings in each second from the measured phase's start: where the time went (a
        # raced preemption's last second often waits on backoffs and victims, not on the cycles)
        "bindings_by_second": [sum(1 for t in times if s <= t - start < s + 1) for s in range(int(times[-1] - start) + 1)]
        if times else [],
        # the profile's window: pods created and bound in it (its samples per pod are per these)
        "api_latency": api_latency,  # --audit: each client's requests, as the API server took them
        "profile": None if profile is None else {
            "path": str(profile.path), "seconds": profile.seconds,
            "created": sum(1 for t in created.values() if t - profile.started < profile.seconds),
            "bound": sum(1 for t, _ in bound.values() if t - profile.started < profile.seconds),
        },
    }  # fmt: skip


def speed(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    options = Options(
        seed=args.seed, logs=args.logs, flags=tuple(args.rulesched_flag or ()),
        pprof=(args.pprof, args.pprof_seconds) if args.pprof else None, creator=args.creator, drain=args.drain,
        kube_scheduler_verbosity=args.kube_scheduler_verbosity, audit=args.audit,
    )  # fmt: skip
    for name in args.workload or list(WORKLOADS):
        for r in range(args.repeat):
            order = ("kube-scheduler", "rulesched") if r % 2 == 0 else ("rulesched", "kube-scheduler")
            for which in [w for w in order if w in (args.scheduler or order)]:
                result = speed_run(WORKLOADS[name], which, options)
                runs.append(result)
                print(format_run(result), file=sys.stderr, flush=True)
    table = []
    for name in args.workload or list(WORKLOADS):
        row: dict[str, Any] = {"workload": name}
        for which in ("kube-scheduler", "rulesched"):
            mine = [r for r in runs if r["workload"] == name and r["scheduler"] == which]
            row[which] = {
                "pods_per_second": median([r["pods_per_second"] for r in mine]),
                "scheduler_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["scheduler"] for r in mine]),
                "apiserver_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["kube-apiserver"] for r in mine]),
                "etcd_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["etcd"] for r in mine]),
                "creator_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["creator"] for r in mine]),
                "throughput_perc50": median([(r["throughput"] or {}).get("Perc50") for r in mine]),
                "p99_ms": median([r["p99_ms"] for r in mine]),
                "bound": median([r["bound"] for r in mine]),
                "preemptions": median([r["preemptions"].get("preemptions") for r in mine]),
                "victims": median([r["preemptions"].get("victims") for r in mine]),
            }
        ks, rs = row["kube-scheduler"], row["rulesched"]
        row["ratio_pods_per_second"] = ratio(rs["pods_per_second"], ks["pods_per_second"])
        row["ratio_scheduler_cpu_per_pod"] = ratio(rs["scheduler_cpu_ms_per_pod"], ks["scheduler_cpu_ms_per_pod"])
        row["ratio_apiserver_cpu_per_pod"] = ratio(rs["apiserver_cpu_ms_per_pod"], ks["apiserver_cpu_ms_per_pod"])
        table.append(row)
    print(format_speed(table))
    return {"runs": runs, "table": table, "repeat": args.repeat, "load": os.getloadavg()}


def sampled_throughput(start: float, bindings: list[float]) -> dict[str, float] | None:
    """scheduler_perf's SchedulingThroughput (util.go throughputCollector) of these binding times
    (sorted): a tick each second from ``start``; the first tick that sees a binding only sets the
    baseline; a tick seeing new bindings records their count over the time since the last
    recorded tick, once for each interval it spans (ticks seeing none are skipped); Average and
    the percentiles of those samples as upstream takes them. None when too short to sample."""
    samples: list[float] = []
    seen, last, baseline, skipped, i = 0, start, False, 0, 0
    tick = start + 1.0
    while bindings and tick < bindings[-1] + 1.0:
        while i < len(bindings) and bindings[i] <= tick:
            i += 1
        if i and not baseline:
            baseline, seen, last = True, i, tick
        elif baseline and i == seen:
            skipped += 1
        elif baseline:
            samples += [(i - seen) / (tick - last)] * (skipped + 1)
            seen, last, skipped = i, tick, 0
        tick += 1.0
    if not samples:
        return None
    samples.sort()

    def perc(p: int) -> float:
        return samples[math.ceil(len(samples) * p / 100) - 1]

    return {"Average": sum(samples) / len(samples), "Perc50": perc(50), "Perc90": perc(90), "Perc99": perc(99),
            "samples": len(samples)}  # fmt: skip


def median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def format_run(r: dict[str, Any]) -> str:
    pps = f"{r['pods_per_second']:.0f}" if r["pods_per_second"] else "-"
    cpu = r["cpu_ms_per_pod"]
    flags = f" ({' '.join(r['flags'])})" if r.get("flags") else ""
    return (f"  {r['workload']:<11} {r['scheduler']:<14}{flags} {r['bound']}/{r['pods']} bound, {pps} pods/s, "
            f"p99 {r['p99_ms'] or 0:.0f} ms; CPU ms/pod: scheduler {cpu['scheduler']:.2f}, "
            f"kube-apiserver {cpu['kube-apiserver']:.2f}, etcd {cpu['etcd']:.2f}; created in {r['creation_seconds']} s, "
            f"bindings from {r['first_binding_after_seconds']} s to {r['last_binding_after_seconds']} s; "
            f"creator ({r['creator']}) CPU {cpu['creator']:.2f} ms/pod, the benchmark's own {cpu['benchmark']:.2f}"
            + ("" if not (s := r.get("throughput")) else
               f"; sampled each second: {s['Average']:.0f} pods/s average, {s['Perc50']:.0f} median")
            + "\n"
            f"    attempts: {r['attempts']}; "
            + ("" if not (p := r.get("preemptions")) else
               f"preemptions {p['preemptions']} with {p['victims']} victims (of {p['attempts']} tried), "
               f"their removals sent in {p['execution_ms']:.0f} ms on average; ")
            + "requests per pod: " + ", ".join(f"{k} {v / r['pods']:.2f}" for k, v in r["requests"].items())
            + ("" if not (t := r.get("scheduling_thread_ms_per_attempt")) else
               f"\n    scheduling thread per attempt: {t['cpu']:.2f} ms CPU, {t['waiting_for_a_core']:.2f} ms waiting for a core")
            + ("" if not (c := r.get("cycle_cpu")) else
               "; a cycle's CPU by outcome: " + ", ".join(f"{k} {v['ms']:.2f} ms ({v['cycles']})" for k, v in c.items()))
            + ("" if not (a := r.get("api_latency")) else
               f"\n    API server's answers by client (audit log; creations over {a['creating_seconds']} s after the start):\n"
               + format_latencies(a)))  # fmt: skip


def format_speed(table: list[dict[str, Any]]) -> str:
    def f(v: float | None, digits: int = 0) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    lines = [
        "workload     | kube-scheduler pods/s | rulesched pods/s | ratio | sched CPU ms/pod ks / rs (ratio) | apiserver CPU ms/pod ks / rs | sampled p50 ks / rs",
        "-------------|-----------------------|------------------|-------|----------------------------------|------------------------------|--------------------",
    ]
    for row in table:
        ks, rs = row["kube-scheduler"], row["rulesched"]
        lines.append(
            f"{row['workload']:<12} | {f(ks['pods_per_second']):>21} | {f(rs['pods_per_second']):>16} | "
            f"{f(row['ratio_pods_per_second'], 2):>5} | {f(ks['scheduler_cpu_ms_per_pod'], 2):>8} / "
            f"{f(rs['scheduler_cpu_ms_per_pod'], 2):<7} ({f(row['ratio_scheduler_cpu_per_pod'], 2)}) | "
            f"{f(ks['apiserver_cpu_ms_per_pod'], 2):>12} / {f(rs['apiserver_cpu_ms_per_pod'], 2):<13} | "
            f"{f(ks['throughput_perc50'])} / {f(rs['throughput_perc50'])}"
        )
    return "\n".join(lines)
