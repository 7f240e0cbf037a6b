"""`rulesched run` against an API server, end to end over HTTP, as scheduler_perf measures it,
beside what the same API server binds for a plain client.

    python benchmarks/bench_run.py                    # basic: 5000 nodes, 1000 running, 5000 pending
    python benchmarks/bench_run.py --repeat 3         # three alternated pairs (plain client, run)
    python benchmarks/bench_run.py --workload mixed
    python benchmarks/bench_run.py --workload stop-fitting
    python benchmarks/bench_run.py --nodes 500 --running 100 --pending 1000
    python benchmarks/bench_run.py --py-spy /tmp/run   # profiles (py-spy, raw): /tmp/run.scheduler.txt, .server.txt, .binder.txt
    python benchmarks/bench_run.py --scheduler-args=--no-bind-process   # bindings on the scheduler's own threads

Each measurement has a fresh test API server (tests/apiserver.py) in its own process, holding
the nodes and running pods of benchmarks/gen_cluster.py's workload:

* plain client ("API server alone"): another process binds the pending pods (created in one bulk
  request) as fast as it can over ``--bind-workers`` kept-alive connections, one thread each
  (http.client, node N mod nodes for pod N, nothing else): what this server can bind;
* ``rulesched run`` starts in another process and syncs its caches; then the pending pods are
  created (in one bulk request) and it binds them.

Printed for each: pods/s from the first creation to the last binding as the API server saw it,
creation-to-binding latency p50/p99; for rulesched also the ratio to the plain client's rate,
CPU per pod of each process (its binding process apart) and thread, its peak RSS, the mean
binding call and scheduling cycle (from /metrics), and (once) the same scheduler's rate on the
same cluster in the simulator (no API, no HTTP). With ``--repeat N`` the two alternate N times
and the medians close the output. All processes share the machine's
cores. Figures only; no assertions.

Workloads: ``basic`` (scheduler_perf's SchedulingBasic), ``mixed`` (gen_cluster's mixed
cluster: four node shapes, taints, cordons, 200 Deployments), ``stop-fitting`` (the basic
cluster with every other node at 2 CPU, and pending pods of 3 CPU each: about half of them bind,
then the rest stop fitting, each with its FailedScheduling event and PodScheduled=False status;
"settled" is when the last one was bound or marked).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import generate  # noqa: E402

WORKLOADS = ("basic", "mixed", "stop-fitting")


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


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    if os.environ.get("BENCH_RUN_CPU"):
        print(f"  pid {pid} user {int(fields[11])} system {int(fields[12])} ticks", file=sys.stderr)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Process ``pid``'s child processes (rulesched run's binding process)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each of process ``pid``'s threads, by thread id."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by thread id, from ``py-spy dump`` (empty without py-spy)."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        return {}
    dump = subprocess.run([str(spy), "dump", "--nonblocking", "--pid", str(pid)], capture_output=True, text=True)
    names = {}
    for text in dump.stdout.splitlines():
        if text.startswith("Thread "):  # Thread 1234 (idle): "MainThread"
            tid = text.split()[1]
            if tid.isdigit():
                names[int(tid)] = text.rpartition(":")[2].strip().strip('"')
    return names


def by_role(before: dict[int, float], after: dict[int, float], names: dict[int, str]) -> dict[str, float]:
    """CPU seconds between two thread_cpu readings, summed by role (thread name less its number)."""
    roles: dict[str, float] = {}
    for tid, seconds in after.items():
        name = names.get(tid, "other").rstrip("0123456789").rstrip("_-")
        name = "informer-" + name.split("-", 1)[1] if name.startswith("informer-") else name
        roles[name] = roles.get(name, 0.0) + seconds - before.get(tid, 0.0)
    return roles


def cluster_for(workload: str, nodes: int, running: int, pending: int) -> dict[str, Any]:
    cluster = generate(nodes, running, pending, "basic" if workload == "stop-fitting" else workload, seed=1)
    for item in cluster["items"]:
        if item["kind"] == "Pod" and not item["spec"].get("nodeName"):
            item["spec"]["schedulerName"] = "rulesched"
            if workload == "stop-fitting":
                item["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
        if workload == "stop-fitting" and item["kind"] == "Node" and int(item["metadata"]["name"][5:]) % 2:
            item["status"]["allocatable"] = {**item["status"]["allocatable"], "cpu": "2"}
    return cluster


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


@dataclass(frozen=True)
class Measured:
    who: str  # "plain client" or "rulesched run"
    bound: int
    pods_per_second: float  # bound pods, first creation to last binding
    p50: float  # creation to binding, seconds
    p99: float
    settled: float  # first creation to the last binding or PodScheduled=False mark, seconds
    marked: int  # pods marked PodScheduled=False
    extra: str = ""


def write_kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig naming ``server`` with a token (tests/apiserver.py takes any), at ``path``."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "b",
        "clusters": [{"name": "b", "cluster": {"server": server}}],
        "users": [{"name": "b", "user": {"token": "t"}}],
        "contexts": [{"name": "b", "context": {"cluster": "b", "user": "b"}}],
    }
    path.write_text(json.dumps(config))
    return path


class ApiServer:
    """tests/apiserver.py in its own process, loaded with nodes and running pods."""

    def __init__(self, nodes: list[dict[str, Any]], running: list[dict[str, Any]]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.apiserver", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline().split()[-1])
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        post(self.base + "/_bulk", {"plural": "nodes", "items": nodes})
        post(self.base + "/_bulk", {"plural": "pods", "items": running})

    def wait(self, pending: int, settled: bool) -> dict[str, Any]:
        """Until every pending pod is bound (or, with ``settled``, bound or marked unschedulable,
        and nothing changed for a second)."""
        last: tuple[int, int] | None = None
        quiet_since = time.monotonic()
        while True:
            stats: dict[str, Any] = post(self.base + "/_stats", {})
            done = stats["bound_keys"] + (stats["marked"] if settled else 0)
            if done >= pending:
                now = (stats["bound_keys"], stats["marked"])
                if now != last:
                    last, quiet_since = now, time.monotonic()
                if not settled or time.monotonic() - quiet_since > 1.0:
                    final: dict[str, Any] = post(self.base + "/_stats", {"latencies": True})
                    return final
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def measured(who: str, stats: dict[str, Any], extra: str = "") -> Measured:
    first = stats["first_created"]
    latencies = sorted(stats["latencies"]) or [0.0]
    bound = stats["bound_keys"]
    return Measured(
        who,
        bound,
        bound / max(1e-9, stats["last_bound"] - first),
        statistics.median(latencies),
        latencies[int(0.99 * (len(latencies) - 1))],
        max(stats["last_bound"], stats["last_marked"]) - first,
        stats["marked"],
        extra,
    )


def plain_client(cluster: dict[str, Any], connections: int) -> Measured:
    """A fresh server, the pending pods created at once, then bound by ``--plain-bind``."""
    nodes, running, pending = split(cluster)
    server = ApiServer(nodes, running)
    try:
        names = "\n".join(p["metadata"]["name"] for p in pending)
        binder = subprocess.Popen(
            [sys.executable, __file__, "--plain-bind", str(server.port), "--bind-workers", str(connections)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert binder.stdout is not None and binder.stdin is not None
        binder.stdin.write(f"{len(nodes)}\n{names}\n")
        binder.stdin.close()
        binder.stdout.readline()  # ready: connections open
        cpu = cpu_seconds(binder.pid), cpu_seconds(server.process.pid)
        post(server.base + "/_bulk", {"plural": "pods", "items": pending})
        stats = server.wait(len(pending), settled=False)
        cpu = cpu_seconds(binder.pid) - cpu[0], cpu_seconds(server.process.pid) - cpu[1]
        binder.wait(timeout=60)
    finally:
        server.stop()
    per_pod = 1e6 / len(pending)
    return measured(
        "plain client", stats, f"CPU per pod: client {cpu[0] * per_pod:.0f}us, server {cpu[1] * per_pod:.0f}us"
    )


def plain_bind(port: int, connections: int) -> None:
    """(The plain client's process.) Read the node count and pod names from stdin; once the pods
    exist, bind pod i to node i mod nodes over ``connections`` kept-alive connections."""
    nodes = int(sys.stdin.readline())
    names = [line.strip() for line in sys.stdin if line.strip()]
    conns = [http.client.HTTPConnection("127.0.0.1", port) for _ in range(connections)]
    for conn in conns:
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("ready", flush=True)

    def work(k: int) -> None:
        conn = conns[k]
        for i in range(k, len(names), connections):
            name = names[i]
            body = json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": "default"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{i % nodes}"},
                }
            )
            while True:
                conn.request(
                    "POST",
                    f"/api/v1/namespaces/default/pods/{name}/binding",
                    body,
                    {"Content-Type": "application/json"},
                )
                response = conn.getresponse()
                response.read()
                if response.status != 404:  # (404: not created yet)
                    break
                time.sleep(0.01)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def split(cluster: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [i for i in cluster["items"] if i["kind"] == "Node"]
    running = [i for i in cluster["items"] if i["kind"] == "Pod" and i["spec"].get("nodeName")]
    pending = [i for i in cluster["items"] if i["kind"] == "Pod" and not i["spec"].get("nodeName")]
    return nodes, running, pending


def rulesched_run(
    cluster: dict[str, Any], bind_workers: int, settled: bool, py_spy: str | None, scheduler_args: tuple[str, ...] = ()
) -> Measured:
    nodes, running, pending = split(cluster)
    server = ApiServer(nodes, running)
    scheduler = None
    spies: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "log", "wb") as log_file:
        try:
            kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", server.base)
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
                    str(bind_workers),
                    "--metrics-bind-address",
                    f"127.0.0.1:{ops}",
                    *scheduler_args,
                ],
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
                stderr=log_file,  # (its log: a line per binding)
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
            helpers = children(scheduler.pid)  # (its binding process, if it has one)
            if py_spy:
                spies = [
                    spy_on(scheduler.pid, f"{py_spy}.scheduler.txt"),
                    spy_on(server.process.pid, f"{py_spy}.server.txt"),
                    *(spy_on(pid, f"{py_spy}.binder.txt") for pid in helpers[:1]),
                ]
                time.sleep(1.0)  # (attached)
            cpu = cpu_seconds(scheduler.pid), cpu_seconds(server.process.pid)
            helper_cpu = sum(cpu_seconds(pid) for pid in helpers)
            threads = thread_cpu(scheduler.pid)
            post(server.base + "/_bulk", {"plural": "pods", "items": pending})
            stats = server.wait(len(pending), settled)
            cpu = cpu_seconds(scheduler.pid) - cpu[0], cpu_seconds(server.process.pid) - cpu[1]
            helper_cpu = sum(cpu_seconds(pid) for pid in helpers) - helper_cpu
            roles = by_role(threads, thread_cpu(scheduler.pid), thread_names(scheduler.pid))
            rss = peak_rss_mb(scheduler.pid)
            with urllib.request.urlopen(f"http://127.0.0.1:{ops}/metrics", timeout=10) as r:
                metrics = r.read().decode()
        finally:
            for spy in spies:
                spy.send_signal(signal.SIGINT)
                spy.wait(timeout=60)
            if scheduler is not None:
                scheduler.send_signal(signal.SIGTERM)
                scheduler.wait(timeout=30)
            server.stop()

    def metric(name: str) -> float:
        return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(name))

    per_pod = 1e6 / len(pending)
    extra = f"cache sync {sync_seconds:.1f}s  peak RSS {rss:.0f} MB  CPU per pod: scheduler {cpu[0] * per_pod:.0f}us"
    if helpers:
        extra += f", binding process {helper_cpu * per_pod:.0f}us"
    extra += f", server {cpu[1] * per_pod:.0f}us"
    shown = sorted(roles.items(), key=lambda r: -r[1])
    extra += " (scheduler threads: " + ", ".join(f"{n} {s * per_pod:.0f}us" for n, s in shown if s * per_pod >= 5) + ")"
    bind = 'scheduler_framework_extension_point_duration_seconds_{}{{extension_point="Bind",profile="rulesched",status="Success"}}'
    binds = metric(bind.format("count"))
    if binds:
        mean = metric(bind.format("sum")) / binds
        cycle = metric("scheduler_scheduling_algorithm_duration_seconds_sum") / max(
            1, metric("scheduler_scheduling_algorithm_duration_seconds_count")
        )
        extra += f"  binding call mean {1000 * mean:.1f}ms  cycle mean {1000 * cycle:.2f}ms"
    return measured("rulesched run", stats, extra)


def spy_on(pid: int, path: str) -> subprocess.Popen[bytes]:
    """py-spy recording process ``pid`` (every thread, raw collapsed stacks) into ``path``."""
    command = [str(Path(sys.executable).with_name("py-spy")), "record", "--format", "raw", "--threads"]
    command += [
        "--nonblocking",
        *os.environ.get("BENCH_RUN_SPY", "--gil").split(),
        "--rate",
        "100",
        "-o",
        path,
        "--pid",
        str(pid),
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def line(m: Measured, settled: bool) -> str:
    text = (
        f"{m.who:>13}: {m.pods_per_second:5.0f} pods/s  bound {m.bound}  "
        f"create->bound p50 {1000 * m.p50:.0f}ms p99 {1000 * m.p99:.0f}ms"
    )
    if settled:
        text += f"  marked unschedulable {m.marked}, all settled in {m.settled:.1f}s"
    return text + (f"  ({m.extra})" if m.extra else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=WORKLOADS, default="basic")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument("--bind-workers", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1, help="alternated pairs (plain client, rulesched run)")
    parser.add_argument("--no-plain", action="store_true", help="rulesched run only")
    parser.add_argument("--no-simulate", action="store_true")
    parser.add_argument(
        "--py-spy",
        metavar="PREFIX",
        help="record the scheduler and the server with py-spy: PREFIX.scheduler.txt, .server.txt",
    )
    parser.add_argument(
        "--scheduler-args",
        default="",
        metavar="ARGS",
        help="more arguments for rulesched run, e.g. --scheduler-args=--no-bind-process",
    )
    parser.add_argument("--plain-bind", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain_bind:
        plain_bind(args.plain_bind, args.bind_workers)
        return 0

    cluster = cluster_for(args.workload, args.nodes, args.running, args.pending)
    settled = args.workload == "stop-fitting"
    print(
        f"workload={args.workload} nodes={args.nodes} running={args.running} pending={args.pending} "
        f"connections/bind workers={args.bind_workers}",
        flush=True,
    )
    plain: list[Measured] = []
    ours: list[Measured] = []
    for _ in range(args.repeat):
        if not args.no_plain:
            plain.append(plain_client(cluster, args.bind_workers))
            print(line(plain[-1], False), flush=True)
        ours.append(rulesched_run(cluster, args.bind_workers, settled, args.py_spy, tuple(args.scheduler_args.split())))
        ratio = (
            f"  ratio to the plain client {ours[-1].pods_per_second / plain[-1].pods_per_second:.2f}" if plain else ""
        )
        print(line(ours[-1], settled) + ratio, flush=True)
    if args.repeat > 1:
        ours_rate = statistics.median(m.pods_per_second for m in ours)
        text = (
            f"medians: rulesched run {ours_rate:.0f} pods/s, p99 {1000 * statistics.median(m.p99 for m in ours):.0f}ms"
        )
        if plain:
            plain_rate = statistics.median(m.pods_per_second for m in plain)
            text += f"; plain client {plain_rate:.0f} pods/s; ratio {ours_rate / plain_rate:.2f}"
        print(text, flush=True)
    if not args.no_simulate:
        print(f"simulate on the same cluster: {simulate_rate(cluster):.0f} pods/s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
