"""`rulesched extender` under kube-scheduler's calls: latency and throughput of filter and prioritize.

    python benchmarks/bench_extender.py                       # 100, 1000, 5000 nodes; both modes; 1 and 4 clients
    python benchmarks/bench_extender.py --nodes 1000 --requests 100

The extender runs in its own process; the clients in others (one process per client), each with
a kept-alive connection, sending bodies prepared beforehand in kube-scheduler's shape: a filter
with every node, then a prioritize with the nodes that passed, for pods that differ (several
workloads, groups and sizes, so the rules' per-class caches are not one entry).

* node-cache-capable: only node names go over the wire; nodes and running pods (one per node on
  average) come from the informer cache, which lists them from the test API server
  (tests/apiserver.py, its own process);
* full nodes: every request carries every node as a real API server returns it (~7 kB each,
  benchmarks/gen_cluster.py's full_node); no cache.

Printed per case: p50/p99 latency of each verb as the client sees it (request sent to answer
read), requests/s over the case (filter and prioritize together), and the extender's RSS.
Targets on a 2-core machine: node-cache-capable filter + prioritize at 5000 nodes p99 <= 10 ms;
1000 full nodes p99 <= 50 ms. Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import random
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

from bench_run import write_kubeconfig  # noqa: E402
from gen_cluster import full_node, node, pod  # noqa: E402

from tests.extender_client import ExtenderProcess, extender_args  # noqa: E402

WORKLOADS = ("basic", "node-affinity", "spreading")


def pods(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """Pods that differ: workload, group (labels) and CPU request vary."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        p = pod(f"bench-{i}", WORKLOADS[i % 3], i % 17, None, rng)
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{100 + 50 * (i % 7)}m"
        out.append(p)
    return out


def post(url: str, body: Any) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        response.read()


def _client(job: tuple[str, int, list[tuple[bytes, bytes]]]) -> list[tuple[float, float]]:
    """One client: for each (filter body, prioritize body), both calls' latencies in seconds."""
    host, port, bodies = job
    conn = http.client.HTTPConnection(host, port, timeout=120)
    headers = {"Content-Type": "application/json"}
    out = []
    for filter_body, prioritize_body in bodies:
        times = []
        for path, body in (("/filter", filter_body), ("/prioritize", prioritize_body)):
            started = time.perf_counter()
            conn.request("POST", path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            times.append(time.perf_counter() - started)
            if response.status != 200:
                raise RuntimeError(f"{path}: {response.status} {data[:200]!r}")
        out.append((times[0], times[1]))
    conn.close()
    return out


def _prioritize_body(ext: ExtenderProcess, filter_body: bytes, full: bool, message: dict[str, Any]) -> bytes:
    """kube-scheduler's prioritize: the same pod, the nodes that passed the filter."""
    status, answer = ext.post("/filter", filter_body)
    assert status == 200, answer
    if full:
        return json.dumps(extender_args(message["Pod"], nodes=answer["Nodes"]["items"])).encode()
    return json.dumps(extender_args(message["Pod"], names=answer["NodeNames"])).encode()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def run_case(
    ext: ExtenderProcess, messages: list[dict[str, Any]], full: bool, clients: int, requests: int
) -> dict[str, float]:
    bodies = []
    for message in messages:
        body = json.dumps(message).encode()
        bodies.append((body, _prioritize_body(ext, body, full, message)))
    for _body, prioritize in bodies:  # warm: every pod class seen once, as in a running cluster
        ext.request("POST", "/prioritize", prioritize)
    per_client = max(1, requests // clients)
    jobs = [
        (ext.host, ext.port, [bodies[(c * 7 + i) % len(bodies)] for i in range(per_client)]) for c in range(clients)
    ]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(clients) as workers:
        results = workers.map(_client, jobs)
    elapsed = time.perf_counter() - started
    filters = [f for r in results for f, _ in r]
    prioritizes = [p for r in results for _, p in r]
    return {
        "filter_p50": statistics.median(filters) * 1e3,
        "filter_p99": pct(filters, 0.99) * 1e3,
        "prio_p50": statistics.median(prioritizes) * 1e3,
        "prio_p99": pct(prioritizes, 0.99) * 1e3,
        "rps": 2 * len(filters) / elapsed,
        "rss": rss_mb(ext.proc.pid),
    }


def cache_mode(n: int, args: argparse.Namespace, tmp: str) -> list[tuple[str, dict[str, float]]]:
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.apiserver", "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = server.stdout.readline().split()[-1]
    base = f"http://127.0.0.1:{port}"
    out = []
    try:
        rng = random.Random(1)
        post(base + "/_bulk", {"plural": "nodes", "items": [node(i, rng) for i in range(n)]})
        running = [pod(f"running-{i}", "basic", i % 17, f"node-{rng.randrange(n)}", rng) for i in range(n)]
        post(base + "/_bulk", {"plural": "pods", "items": running})
        kubeconfig = str(write_kubeconfig(Path(tmp) / "kubeconfig", base))
        ext = ExtenderProcess("--kubeconfig", kubeconfig, "--rules", args.rules)
        try:
            ext.wait_ready(120)
            names = [f"node-{i}" for i in range(n)]
            messages = [extender_args(p, names=names) for p in pods(args.pods)]
            for clients in args.clients:
                out.append(
                    (
                        f"names   {n:5d} nodes, {clients} client(s)",
                        run_case(ext, messages, False, clients, args.requests),
                    )
                )
        finally:
            ext.stop()
    finally:
        server.terminate()
        server.wait()
    return out


def full_mode(n: int, args: argparse.Namespace) -> list[tuple[str, dict[str, float]]]:
    rng = random.Random(1)
    nodes = [full_node(i, rng) for i in range(n)]
    messages = [extender_args(p, nodes=nodes) for p in pods(args.pods)]
    ext = ExtenderProcess("--rules", args.rules)
    out = []
    try:
        requests = args.requests if n <= 1000 else max(20, args.requests // 10)
        for clients in args.clients:
            out.append((f"full    {n:5d} nodes, {clients} client(s)", run_case(ext, messages, True, clients, requests)))
    finally:
        ext.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--requests", type=int, default=400, help="filter+prioritize pairs per case")
    parser.add_argument("--pods", type=int, default=40, help="different pods the requests cycle through")
    parser.add_argument("--rules", default="default")
    parser.add_argument("--modes", nargs="+", default=["names", "full"], choices=["names", "full"])
    args = parser.parse_args(argv)
    print(
        f"{'case':38s} {'filter p50':>10s} {'p99':>7s} {'prioritize p50':>15s} {'p99':>7s} {'req/s':>7s} {'RSS MB':>7s}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.nodes:
            cases = []
            if "names" in args.modes:
                cases += cache_mode(n, args, tmp)
            if "full" in args.modes:
                cases += full_mode(n, args)
            for name, r in cases:
                print(
                    f"{name:38s} {r['filter_p50']:8.2f}ms {r['filter_p99']:5.2f}ms {r['prio_p50']:13.2f}ms "
                    f"{r['prio_p99']:5.2f}ms {r['rps']:7.0f} {r['rss']:7.0f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
