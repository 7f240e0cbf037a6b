"""`rulesched run` against an API server, end to end over HTTP, as scheduler_perf measures it.

    python benchmarks/bench_run.py                    # 5000 nodes, 1000 running, 5000 pending
    python benchmarks/bench_run.py --nodes 500 --running 100 --pending 1000

The test API server (tests/apiserver.py) runs in its own process, holding the nodes and running
pods of benchmarks/gen_cluster.py's `basic` workload. `rulesched run` starts in another process
and syncs its caches; then the pending pods are created (in one bulk request) and it binds them.
Printed: pods/s from the first creation to the last binding as the API server saw them,
creation-to-binding latency p50/p99, the scheduler's peak RSS, and the same scheduler's rate on
the same cluster in the simulator (no API, no HTTP) for comparison. Both processes share the
machine's cores with this one. Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import generate  # noqa: E402


def post(url: str, body: Any) -> Any:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def simulate_rate(cluster: dict[str, Any]) -> float:
    from rulesched.cluster.store import ClusterStore
    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.simulate.driver import Simulation
    from rulesched.simulate.load import load_cluster

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps(cluster))
        objects = load_cluster([path])
    simulation = Simulation(
        load_rules([resolve_rules_path("default")]),
        ClusterStore.build(objects.nodes, objects.running_pods),
        SchedulerSettings(),
    )
    pending = [p for p in objects.pending_pods if p.scheduler_name == "rulesched"]
    for p in pending:
        simulation.add(p)
    started = time.perf_counter()
    simulation.run()
    return len(pending) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--bind-workers", type=int, default=16)
    args = parser.parse_args(argv)

    cluster = generate(args.nodes, args.running, args.pending, "basic", seed=1)
    for item in cluster["items"]:
        if item["kind"] == "Pod" and not item["spec"].get("nodeName"):
            item["spec"]["schedulerName"] = "rulesched"
    nodes = [i for i in cluster["items"] if i["kind"] == "Node"]
    running = [i for i in cluster["items"] if i["kind"] == "Pod" and i["spec"].get("nodeName")]
    pending = [i for i in cluster["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")]

    server = subprocess.Popen(
        [sys.executable, "-m", "tests.apiserver", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    scheduler = None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline().split()[-1])
            base = f"http://127.0.0.1:{port}"
            post(base + "/_bulk", {"plural": "nodes", "items": nodes})
            post(base + "/_bulk", {"plural": "pods", "items": running})
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(
                json.dumps(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "current-context": "b",
                        "clusters": [{"name": "b", "cluster": {"server": base}}],
                        "users": [{"name": "b", "user": {"token": "t"}}],
                        "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
                    }
                )
            )
            ops = free_port()
            scheduler = subprocess.Popen(
                [
                    sys.executable,
                    *os.environ.get("BENCH_RUN_PROFILE", "").split(),
                    "-m",
                    "rulesched.cli",
                    "run",
                    "--kubeconfig",
                    str(kubeconfig),
                    "--bind-workers",
                    str(args.bind_workers),
                    "--metrics-bind-address",
                    f"127.0.0.1:{ops}",
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            started = time.monotonic()
            while True:  # caches synced
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{ops}/readyz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() - started > 300:
                    raise SystemExit("rulesched run did not become ready")
                time.sleep(0.2)
            sync_seconds = time.monotonic() - started
            post(base + "/_bulk", {"plural": "pods", "items": pending})
            while True:
                stats = post(base + "/_stats", {})
                if stats["bound_keys"] >= len(pending):
                    break
                time.sleep(0.2)
            rss = peak_rss_mb(scheduler.pid)
            with urllib.request.urlopen(f"http://127.0.0.1:{ops}/metrics", timeout=10) as r:
                metrics = r.read().decode()
        finally:
            if scheduler is not None:
                scheduler.send_signal(signal.SIGTERM)
                scheduler.wait(timeout=30)
            server.terminate()
            server.wait(timeout=30)
    seconds = stats["last_bound"] - stats["first_created"]
    latencies = sorted(stats["latencies"])
    print(
        f"nodes={args.nodes} running={args.running} pending={args.pending}  cache sync {sync_seconds:.1f}s  "
        f"{len(pending) / seconds:.0f} pods/s (first create -> last bound)  "
        f"create->bound p50 {1000 * statistics.median(latencies):.0f}ms "
        f"p99 {1000 * latencies[int(0.99 * (len(latencies) - 1))]:.0f}ms  "
        f"scheduler peak RSS {rss:.0f} MB  bindings {stats['bindings']}",
        flush=True,
    )

    def metric(name: str) -> float:
        return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name))

    bind = 'scheduler_framework_extension_point_duration_seconds_{}{{extension_point="Bind",profile="rulesched",status="Success"}}'
    binds = metric(bind.format("count"))
    if binds:
        mean = metric(bind.format("sum")) / binds
        evaluation = metric("scheduler_scheduling_algorithm_duration_seconds_sum") / max(
            1, metric("scheduler_scheduling_algorithm_duration_seconds_count")
        )
        print(f"binding call mean {1000 * mean:.1f}ms; scheduling cycle mean {1000 * evaluation:.2f}ms", flush=True)
    print(f"simulate on the same cluster: {simulate_rate(cluster):.0f} pods/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
