"""How a speed run creates its measured pods. ``podload`` (the default): testbed/'s Go command,
which creates them as scheduler_perf's createPods op does (client-go, 30 workers, QPS and burst
5000; see testbed/cmd/podload), so that on a workload where both schedulers keep up with the
creations, pods/s measures the schedulers and not a Python client competing with them for the
machine's cores. ``python``: the benchmark's own 16 threads, each pod a JSON POST through
tests/realk8s (the creator of Run 7 and before; kept to compare the two)."""

from __future__ import annotations

import json
import resource
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.realk8s import Kube

from .cluster import NS, parallel

CREATORS = ("podload", "python")


@dataclass(frozen=True)
class Creation:
    sent: dict[str, float]  # pod -> time.monotonic() just before its create request
    started: float  # the first request's time.monotonic()
    seconds: float  # from the first request to the last answer
    cpu_seconds: float  # the creator's CPU (see create)


def create(kube: Kube, pods: list[dict[str, Any]], creator: str) -> Creation:
    """Create ``pods`` in the namespace NS. The creator's CPU: podload's own (its process's
    rusage); the Python creator's is the benchmark process's over the creations (its 16 threads,
    and the pods' watch thread, running meanwhile)."""
    if creator == "podload":
        return _podload(kube, pods)
    sent: dict[str, float] = {}

    def one(pod: dict[str, Any]) -> None:
        sent[pod["metadata"]["name"]] = time.monotonic()
        kube.create(f"/api/v1/namespaces/{NS}/pods", pod)

    cpu0, start = time.process_time(), time.monotonic()
    parallel(one, pods)
    return Creation(sent, start, time.monotonic() - start, time.process_time() - cpu0)


def _podload(kube: Kube, pods: list[dict[str, Any]]) -> Creation:
    binary = Path(kube.env["K8S_BIN"]) / "podload"
    if not binary.exists():
        raise RuntimeError(f"{binary} is missing: run testbed/build (it builds podload beside Kubernetes)")
    lines = "".join(json.dumps(p, separators=(",", ":")) + "\n" for p in pods)
    # RUSAGE_CHILDREN counts the children waited for: podload is the only one to end meanwhile
    # (the schedulers and the test bed run on).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [str(binary), "--kubeconfig", kube.kubeconfig, "--namespace", NS],
        input=lines, capture_output=True, text=True, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"podload exited {done.returncode}: {done.stderr[-2000:]}")
    records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    sent = {r["pod"]: r["sent"] for r in records}
    start = min(sent.values(), default=time.monotonic())
    end = max((r["done"] for r in records), default=start)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Creation(sent, start, end - start, cpu)
