"""`rulesched run` stopping, resuming watches and failing over, over HTTP against the test API server.

    python benchmarks/bench_shutdown.py                       # every scenario
    python benchmarks/bench_shutdown.py --only sigterm,cycle  # some of them

Scenarios (the API server runs on a thread of this process; each scheduler is a process):

* ``sigterm``: SIGTERM to exit of an idle `rulesched run` on 500 nodes, its watches silent (one
  bookmark a minute, as a real server), ``--repeat`` times.
* ``cycle``: SIGTERM while one long cycle is under way: a pod of priority 1000 that fits
  nowhere on ``--cycle-nodes`` nodes, each full of ``--cycle-pods`` pods of priority 0, so its
  preemption dry-runs every node. First the cycle's length without a signal (creation to the
  eviction it ends with), then SIGTERM 0.3 s into it: time to exit, and evictions or bindings
  made after the signal.
* ``resets``: every watch reset (TCP RST) 0.3 s after it opens, for ``--soak`` seconds while
  pods arrive at 5/s: creation-to-binding delay p50/p99/max.
* ``failover``: two `--leader-elect` replicas (lease 3 s, renew deadline 2 s, retry 0.5 s); the
  leader SIGSTOPped while pods arrive at ~7/s until the standby binds, then SIGCONT: time from
  SIGSTOP to the first binding by the new leader, and binding calls made by a replica that did
  not hold the lease at that moment (the server records both), ``--repeat`` times.

Figures only; the tests (tests/test_run_shutdown.py, tests/test_run_ha.py) assert the behaviour.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.apiserver import TestApiServer  # noqa: E402
from tests.test_run_e2e import node, pod  # noqa: E402


def wait(condition: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def start(server: TestApiServer, tmp: str, name: str, *extra: str) -> subprocess.Popen[bytes]:
    kubeconfig = server.kubeconfig(f"{tmp}/kubeconfig")
    command = [sys.executable, "-m", "rulesched.cli", "-v", "run", "--kubeconfig", kubeconfig]
    command += ["--metrics-bind-address", "", *extra]
    return subprocess.Popen(command, cwd=ROOT, stdout=open(f"{tmp}/{name}.log", "wb"), stderr=subprocess.STDOUT)


def stop(proc: subprocess.Popen[bytes]) -> float:
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    return time.monotonic() - signalled


def sigterm_once() -> float:
    server = TestApiServer()
    server.set_faults(bookmark_every=60.0)
    for i in range(500):
        server.add("nodes", node(f"n{i}"))
    server.add("pods", pod("a"))
    with tempfile.TemporaryDirectory() as tmp:
        proc = start(server, tmp, "run")
        assert wait(lambda: server.store.bindings == 1, 120), "not bound"
        time.sleep(0.5)
        took = stop(proc)
    server.stop()
    return took


def sigterm(repeat: int) -> None:
    times = [sigterm_once() for _ in range(repeat)]
    print(
        f"sigterm: idle, 500 nodes: exit after p50 {statistics.median(times):.2f}s max {max(times):.2f}s ({repeat} runs)"
    )


def cycle_once(nodes: int, pods: int, signalled: bool) -> tuple[float, int, int]:
    """(the cycle's length, or the time to exit after SIGTERM; evictions; binding calls after it)."""
    server = TestApiServer()
    for i in range(nodes):
        server.add("nodes", node(f"n{i}", cpu=str(pods)))
        for j in range(pods):
            server.add("pods", pod(f"r{i}-{j}", cpu="1", spec={"nodeName": f"n{i}", "priority": 0}))
    store = server.store
    with tempfile.TemporaryDirectory() as tmp:
        proc = start(server, tmp, "run")
        assert wait(lambda: b"caches synced" in Path(f"{tmp}/run.log").read_bytes(), 300)
        time.sleep(1.0)
        created = time.monotonic()
        server.add("pods", pod("high", cpu=str(pods), spec={"priority": 1000}))
        if signalled:
            time.sleep(0.3)
            took = stop(proc)
        else:
            assert wait(lambda: len(store.evictions) > 0, 300), "no preemption"
            took = time.monotonic() - created
            stop(proc)
    server.stop()
    return took, len(store.evictions), len(store.binding_calls)


def cycle(nodes: int, pods: int) -> None:
    length, _, _ = cycle_once(nodes, pods, False)
    took, evictions, binds = cycle_once(nodes, pods, True)
    print(
        f"cycle: {nodes} nodes x {pods} pods, a preemption cycle of {length:.2f}s; SIGTERM 0.3s into it: "
        f"exit after {took:.2f}s, {evictions} evictions and {binds} binding calls"
    )


def resets(soak: float) -> None:
    server = TestApiServer()
    for i in range(20):
        server.add("nodes", node(f"n{i}", cpu="64"))
    server.set_faults(reset_watches_every=0.3)
    names: list[str] = []
    pods = server.store.objects["pods"]
    with tempfile.TemporaryDirectory() as tmp:
        proc = start(server, tmp, "run")
        assert wait(lambda: b"caches synced" in Path(f"{tmp}/run.log").read_bytes(), 60)
        end = time.monotonic() + soak
        while time.monotonic() < end:
            names.append(f"p{len(names)}")
            server.add("pods", pod(names[-1], cpu="10m"))
            time.sleep(0.2)
        assert wait(lambda: all(pods[f"default/{n}"]["spec"].get("nodeName") for n in names), 120)
        stop(proc)
    server.stop()
    bound = {key: at for key, _, at in server.store.binding_log}
    delays = sorted(bound[f"default/{n}"] - server.store.created[f"default/{n}"] for n in names)
    p99 = delays[int(0.99 * (len(delays) - 1))]
    print(
        f"resets: watches reset every 0.3s for {soak:.0f}s, {len(names)} pods: creation to binding "
        f"p50 {1000 * statistics.median(delays):.0f}ms p99 {1000 * p99:.0f}ms max {1000 * delays[-1]:.0f}ms"
    )


LEASE = ["--leader-elect", "--leader-elect-resource-namespace", "default", "--leader-elect-lease-duration", "3s"]
LEASE += ["--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"]


def failover_once() -> tuple[float, int, int, int | None]:
    """(SIGSTOP to the first binding by the new leader, binding calls, calls by a replica not
    holding the lease, the old leader's exit code)."""
    server = TestApiServer()
    for i in range(10):
        server.add("nodes", node(f"n{i}", cpu="64"))
    feeding = threading.Event()
    calls = server.store.binding_calls

    def feed() -> None:
        count = 0
        while not feeding.wait(0.15):
            server.add("pods", pod(f"p{count}", cpu="10m"))
            count += 1

    def holder() -> str:
        found = server.store.objects["leases"].get("default/rulesched") or {}
        return str((found.get("spec") or {}).get("holderIdentity") or "")

    with tempfile.TemporaryDirectory() as tmp:
        procs = [start(server, tmp, "one", *LEASE), start(server, tmp, "two", *LEASE)]
        assert wait(lambda: holder() != "", 60)
        old_identity = holder()
        old = next(p for p in procs if p.pid == int(old_identity.split("_")[1]))
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        assert wait(lambda: len(calls) >= 10, 30)
        old.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        assert wait(lambda: holder() not in ("", old_identity), 30)
        new_id = holder().rsplit("_", 1)[0]  # HOST_PID, as the User-Agent ends

        def new_binds() -> list[float]:
            return [c.at for c in calls if c.at > paused and c.caller.split()[-1] == new_id]

        assert wait(lambda: bool(new_binds()), 30)
        first = new_binds()[0]
        old.send_signal(signal.SIGCONT)
        old.wait(timeout=30)
        feeding.set()
        feeder.join()
        time.sleep(1.0)
        for p in procs:
            if p.poll() is None:
                stop(p)
    server.stop()
    strays = [c for c in calls if not c.holders.get("default/rulesched", "").startswith(c.caller.split()[-1] + "_")]
    return first - paused, len(calls), len(strays), old.returncode


def failover(repeat: int) -> None:
    for run in range(repeat):
        took, calls, strays, code = failover_once()
        print(
            f"failover {run + 1}: SIGSTOP to the first binding by the new leader {took:.2f}s (lease 3s); "
            f"{calls} binding calls, {strays} by a replica not holding the lease; the old leader exited {code}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="sigterm,cycle,resets,failover")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cycle-nodes", type=int, default=2000)
    parser.add_argument("--cycle-pods", type=int, default=16)
    parser.add_argument("--soak", type=float, default=60.0)
    args = parser.parse_args(argv)
    chosen = set(args.only.split(","))
    if "sigterm" in chosen:
        sigterm(args.repeat)
    if "cycle" in chosen:
        cycle(args.cycle_nodes, args.cycle_pods)
    if "resets" in chosen:
        resets(args.soak)
    if "failover" in chosen:
        failover(args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
