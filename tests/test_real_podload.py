"""testbed/'s podload (testbed/cmd/podload), which creates benchmarks/bench_kube_scheduler.py's
measured pods as scheduler_perf's createPods op does, against the real kube-apiserver: it creates
the pods it reads (one JSON object a line; the namespace of each from its metadata, else
``--namespace``), prints one line per pod with the times of its request on the caller's clock
(CLOCK_MONOTONIC, Python's time.monotonic()), takes a pod that exists already as created, and
names a refused pod on standard error, exiting 1 while still creating the others."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.realk8s import Kube


def pod(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "pause"}]},
    }  # fmt: skip


def podload(k8s: Kube, namespace: str, pods: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    binary = Path(k8s.env["K8S_BIN"]) / "podload"
    return subprocess.run(
        [str(binary), "--kubeconfig", k8s.kubeconfig, "--namespace", namespace, "--workers", "3"],
        input="".join(json.dumps(p) + "\n" for p in pods), capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def test_podload_creates_what_it_reads_and_says_when_on_the_callers_clock(k8s: Kube) -> None:
    ns, other = k8s.namespace("podload"), k8s.namespace("podload")
    pods = [pod(f"p{i}") for i in range(6)] + [pod("elsewhere", other)]
    before = time.monotonic()
    done = podload(k8s, ns, pods)
    after = time.monotonic()
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(r["pod"] for r in records) == sorted(p["metadata"]["name"] for p in pods)
    assert all(before <= r["sent"] <= r["done"] <= after for r in records)
    assert set(k8s.pods(ns)) == {f"p{i}" for i in range(6)}
    assert set(k8s.pods(other)) == {"elsewhere"}

    again = podload(k8s, ns, pods[:2])  # (already there: created, as scheduler_perf's retries take it)
    assert again.returncode == 0, again.stderr
    assert len(again.stdout.splitlines()) == 2


def test_a_refused_pod_is_named_and_the_others_are_created(k8s: Kube) -> None:
    ns = k8s.namespace("podload")
    done = podload(k8s, ns, [pod("Not_A_Name"), pod("fine")])
    assert done.returncode == 1
    assert "Not_A_Name" in done.stderr
    assert [json.loads(line)["pod"] for line in done.stdout.splitlines()] == ["fine"]
    assert set(k8s.pods(ns)) == {"fine"}
