"""High availability: two ``rulesched run --leader-elect`` processes against one API server.
One leads and schedules; it is killed (SIGKILL: no chance to give the lease up); the other takes
the lease within the lease duration and schedules the rest; no pod is bound twice; SIGTERM then
stops the survivor cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod

ROOT = Path(__file__).resolve().parents[1]
LEASE = 3.0


def start(kubeconfig: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rulesched.cli",
            "-v",
            "run",
            "--kubeconfig",
            kubeconfig,
            "--leader-elect",
            "--leader-elect-resource-namespace",
            "default",
            "--leader-elect-lease-duration",
            f"{LEASE}s",
            "--leader-elect-renew-deadline",
            "2s",
            "--leader-elect-retry-period",
            "300ms",
            "--metrics-bind-address",
            "127.0.0.1:0",
        ],
        cwd=ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def holder(server: TestApiServer) -> str:
    lease = server.store.objects["leases"].get("default/rulesched")
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def wait(condition: object, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return bool(condition())  # type: ignore[operator]


def bound(server: TestApiServer, names: list[str]) -> bool:
    pods = server.store.objects["pods"]
    return all(pods[f"default/{n}"]["spec"].get("nodeName") for n in names)


def test_a_standby_takes_over_when_the_leader_dies(server: TestApiServer, tmp_path: Path) -> None:
    for i in range(10):
        server.add("nodes", node(f"n{i}"))
    first = [f"a{i}" for i in range(20)]
    for name in first:
        server.add("pods", pod(name))
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    procs = [start(kubeconfig, tmp_path / "one.log"), start(kubeconfig, tmp_path / "two.log")]
    try:
        assert wait(lambda: bound(server, first), 60), (tmp_path / "one.log").read_text()[-2000:]
        leader = holder(server)
        pids = {p.pid: p for p in procs}
        leader_pid = int(leader.split("_")[1])
        assert leader_pid in pids
        os.kill(leader_pid, signal.SIGKILL)
        killed = time.monotonic()
        pids[leader_pid].wait(timeout=10)
        second = [f"b{i}" for i in range(20)]
        for name in second:
            server.add("pods", pod(name))
        assert wait(lambda: holder(server) not in ("", leader), LEASE + 5), holder(server)
        took_over = time.monotonic() - killed
        assert took_over <= LEASE + 2.0, took_over  # within the lease duration (+ one retry period, slack)
        assert wait(lambda: bound(server, second), 30)
        counts = Counter(key for key, _, _ in server.store.binding_log)
        assert set(counts) == {f"default/{n}" for n in first + second} and set(counts.values()) == {1}
        survivor = next(p for pid, p in pids.items() if pid != leader_pid)
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=10) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
