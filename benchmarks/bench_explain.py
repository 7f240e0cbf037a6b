"""Explain latency: one pod at a time on a big cluster, with and without its fixes; offline, and
live over HTTP from a running scheduler.

    python benchmarks/gen_cluster.py --nodes 5000 --running 1000 --pending 200 --workload mixed --seed 1 > /tmp/c.json
    python benchmarks/bench_explain.py /tmp/c.json [--pods 50] [--rules default]
    python benchmarks/bench_explain.py /tmp/c.json --fixes            # + the fixes of pods that fit nowhere
    python benchmarks/bench_explain.py /tmp/c.json --fixes --unfit 40 # those of 40 pods that fit nowhere
    python benchmarks/bench_explain.py --live [--nodes 5000] [--unfit 20]   # rulesched run, over HTTP

Offline, each pending pod (the first --pods) is explained against the cluster's snapshot with a
fresh private session, as the live endpoint does: every filter on every node, the reasons of
every failing (node, filter) pair as codes, the 10 nearest nodes' blame, scores of the feasible
nodes, and preemption's dry run when nothing fits; with ``--fixes`` the pods that fit nowhere
also get their fixes (each candidate a trial on the cluster, within the search's budget), timed
apart; ``--unfit N`` explains N pods that fit nowhere (:func:`unfit_pods`) instead of the
cluster's. Prints percentiles of the wall time and of the thread's CPU time (the machine may be
shared), and the time of the first call (cold).

``--live`` starts the test API server (tests/apiserver.py) with gen_cluster's mixed cluster
(``--nodes``, a fifth as many running pods) and ``rulesched run`` against it (as
benchmarks/bench_run.py does), creates ``--unfit`` pods that fit nowhere (:func:`unfit_pods`),
waits for their FailedScheduling marks, then asks
``GET /debug/explain?pod=...`` for each (fixes included, the rate limit respected between
requests) and ``POST /debug/explain`` with a Job of 8 such pods (a group explained before
submission); prints client-side latencies (the HTTP round trip, JSON included) and the
endpoint's own ``seconds`` and ``fixes.seconds``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.scheduler.why import explain_pod, fix_pod  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def figures(ms: list[float]) -> str:
    """n, p50, p95, p99 (nearest rank) and the worst, in ms."""
    ms = sorted(ms)
    if not ms:
        return "none"

    def rank(q: float) -> float:
        return ms[min(len(ms) - 1, max(0, math.ceil(len(ms) * q) - 1))]

    return (
        f"n={len(ms)}, p50 {statistics.median(ms):.0f} ms, p95 {rank(0.95):.0f} ms, "
        f"p99 {rank(0.99):.0f} ms, worst {ms[-1]:.0f} ms"
    )


def offline(args: argparse.Namespace) -> None:
    paths = [args.cluster]
    if args.unfit:  # (a file of the pods that fit nowhere beside the cluster's)
        extra = Path(tempfile.mkdtemp()) / "unfit.json"
        extra.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": unfit_pods(args.unfit, args.seed)}))
        paths.append(str(extra))
    objects = load_cluster(paths)
    rules = load_rules([resolve_rules_path(r) for r in args.rules or ["default"]])
    store = objects.store()
    snapshot = store.snapshot()
    pending = list(objects.pending_pods[: args.pods])
    if args.unfit:
        pending = [p for p in objects.pending_pods if p.name.startswith("unfit-")]
    times, cpu, fix_times, fix_cpu, unschedulable, fixed = [], [], [], [], 0, 0
    for pod in pending:
        started, thread = time.perf_counter(), time.thread_time()
        answer = explain_pod(pod, snapshot, rules)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.thread_time() - thread) * 1000)
        unschedulable += answer.feasible == 0
        if args.fixes and not answer.feasible:
            started, thread = time.perf_counter(), time.thread_time()
            found = fix_pod(pod, answer, store, rules, tuple(objects.priority_classes.values()))
            fix_times.append((time.perf_counter() - started) * 1000)
            fix_cpu.append((time.thread_time() - thread) * 1000)
            fixed += bool(found.fixes)
    print(
        f"{len(objects.nodes)} nodes, {len(times)} pods explained ({unschedulable} fit nowhere): "
        f"first {times[0] if times else 0:.0f} ms, {figures(times)}; CPU {figures(cpu)}"
    )
    if args.fixes:
        print(
            f"fixes of the {len(fix_times)} that fit nowhere ({fixed} with a fix): {figures(fix_times)}; "
            f"CPU {figures(fix_cpu)}"
        )


# --- live ---------------------------------------------------------------------------------------------


def unfit_pods(count: int, seed: int) -> list[dict[str, Any]]:
    """Pods that fit nowhere on gen_cluster's mixed cluster, of four kinds in turn: too big for
    any node (33 cpu, the largest shape has 32), a node selector no node has, one tainted node
    (every 25th from node-7: the team taint) and one cordoned node (every 100th from node-42)
    by hostname; their fixes: a lower request, the selector dropped or a node labelled, an
    untaint or a toleration, an uncordon."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        kind = i % 4
        spec: dict[str, Any] = {"schedulerName": "rulesched"}
        cpu = "33"
        if kind == 1:
            cpu, spec["nodeSelector"] = "1", {"example.com/pool": f"p{rng.randrange(3)}"}
        elif kind == 2:
            cpu, spec["nodeSelector"] = "1", {"kubernetes.io/hostname": f"node-{7 + 25 * rng.randrange(40)}"}
        elif kind == 3:
            cpu, spec["nodeSelector"] = "1", {"kubernetes.io/hostname": f"node-{42 + 100 * rng.randrange(10)}"}
        spec["containers"] = [
            {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ]
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"unfit-{i}", "namespace": "default", "labels": {"app": f"unfit-{kind}"}},
                "spec": spec,
                "status": {"phase": "Pending"},
            }
        )
    return out


def get(url: str, data: bytes | None = None) -> tuple[float, dict[str, Any]]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.loads(response.read())
    return (time.perf_counter() - started) * 1000, body


def live(args: argparse.Namespace) -> None:
    from benchmarks.bench_run import ApiServer, cluster_for, free_port, split, write_kubeconfig

    cluster = cluster_for("mixed", args.nodes, args.nodes // 5, 0)
    nodes, running, _ = split(cluster)
    pods = unfit_pods(args.unfit, args.seed)
    server = ApiServer(nodes, running)
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = write_kubeconfig(Path(tmp) / "kubeconfig", server.base)
        ops = free_port()
        log = open(Path(tmp) / "log", "wb")  # noqa: SIM115 - closed with the process
        scheduler = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rulesched.cli",
                "run",
                "--kubeconfig",
                str(kubeconfig),
                "--metrics-bind-address",
                f"127.0.0.1:{ops}",
            ],
            cwd=ROOT,
            stderr=log,
        )
        base = f"http://127.0.0.1:{ops}"
        try:
            started = time.monotonic()
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() - started > 600:
                    raise SystemExit("rulesched run did not become ready")
                time.sleep(0.5)
            from benchmarks.bench_run import post

            post(server.base + "/_bulk", {"plural": "pods", "items": pods})
            server.wait(len(pods), settled=True)
            stats = post(server.base + "/_stats", {})
            print(
                f"{len(nodes)} nodes, {len(running)} running pods; {len(pods)} pods created, {stats['marked']} marked unschedulable"
            )
            client, inside, search, fixes, trials = [], [], [], 0, []
            for p in pods:
                time.sleep(0.6)  # (the endpoint's rate limit: 2 a second)
                try:
                    ms, answer = get(f"{base}/debug/explain?pod=default/{p['metadata']['name']}")
                except urllib.error.HTTPError as error:
                    if error.code == 404:  # (it fit after all: bound, not pending)
                        continue
                    raise
                client.append(ms)
                inside.append(answer["seconds"] * 1000)
                found = answer.get("fixes")
                if found is not None:
                    search.append(found["seconds"] * 1000)
                    trials.append(found["trials"])
                    fixes += bool(found["fixes"])
            print(f"GET /debug/explain, fixes included (client, round trip): {figures(client)}")
            print(f"  the explanation alone (its seconds): {figures(inside)}")
            print(
                f"  the fix search: {figures(search)}; {fixes}/{len(search)} pods with a fix, "
                f"trials median {statistics.median(trials) if trials else 0}, max {max(trials, default=0)}"
            )
            template = {k: v for k, v in pods[1]["spec"].items() if k != "schedulerName"}  # (a selector no node has)
            template["schedulerName"] = "rulesched"
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "train", "namespace": "default"},
                "spec": {"parallelism": 8, "template": {"spec": {**template, "restartPolicy": "Never"}}},
            }
            body = json.dumps({"apiVersion": "v1", "kind": "List", "items": [job]}).encode()
            group_ms = []
            for _ in range(args.groups):
                time.sleep(0.6)
                ms, answer = get(f"{base}/debug/explain", body)
                group_ms.append(ms)
            group = answer["group_explanation"]
            found = group["fixes"] or {}
            print(
                f"POST /debug/explain, a Job of 8 pods before submission (group, fixes included): {figures(group_ms)}; "
                f"{group['fit']} of 8 fit, {len(found.get('fixes', []))} fixes, {found.get('trials')} trials"
            )
        finally:
            scheduler.terminate()
            scheduler.wait(timeout=30)
            log.close()
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("cluster", nargs="?")
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--rules", action="append")
    parser.add_argument("--fixes", action="store_true", help="also time the fixes of the pods that fit nowhere")
    parser.add_argument("--live", action="store_true", help="rulesched run over HTTP (see the docstring)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--unfit", type=int, default=0, help="pods that fit nowhere (live: default 20)")
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.live:
        args.unfit = args.unfit or 20
        live(args)
    elif args.cluster:
        offline(args)
    else:
        parser.error("give a cluster file, or --live")


if __name__ == "__main__":
    main()
