"""The benchmark's per-client latencies from kube-apiserver's audit log
(benchmarks/kube_bench/audit.py, ``bench_kube_scheduler.py speed --audit``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from kube_bench.audit import client, format_latencies, latencies  # noqa: E402

T0 = 1_700_000_000.0  # (wall time of the measured phase's start)


def event(agent: str, verb: str, resource: str, received: float, took: float, **ref: str) -> dict[str, Any]:
    def stamp(t: float) -> str:
        return f"2023-11-14T22:13:{t - T0 + 20:09.6f}Z"

    return {
        "stage": "ResponseComplete",
        "verb": verb,
        "userAgent": agent,
        "objectRef": {"resource": resource, **ref},
        "requestReceivedTimestamp": stamp(received),
        "stageTimestamp": stamp(received + took),
    }


def test_clients_phases_and_what_is_left_out(tmp_path: Path) -> None:
    events = [
        event("podload/v1.37.2 (linux/amd64)", "create", "pods", T0 + 0.1, 0.040),
        event("podload/v1.37.2 (linux/amd64)", "create", "pods", T0 + 1.0, 0.060),  # the last creation
        event("rulesched/0.1.0 (linux/x86_64) vm_1", "create", "pods", T0 + 0.5, 0.100, subresource="binding"),
        event("rulesched/0.1.0 (linux/x86_64) vm_1", "create", "pods", T0 + 2.0, 0.010, subresource="binding"),
        event("rulesched/0.1.0 (linux/x86_64) vm_1", "watch", "pods", T0 + 0.2, 30.0),  # a watch: left out
        event("kube-controller-manager/v1.37.2", "update", "leases", T0 + 0.3, 0.001),  # a lease: left out
        event("kube-scheduler/v1.37.2", "create", "events", T0 - 5.0, 0.001),  # before the start: left out
        {**event("python-urllib3/2.8.0", "delete", "pods", T0 + 3.0, 0.008), "stage": "ResponseStarted"},
    ]
    log = tmp_path / "audit.log"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    summary = latencies(log, T0)
    assert summary["creating_seconds"] == 1.0
    assert set(summary["creating"]) == {"podload", "rulesched"}
    assert summary["creating"]["podload"]["create pods"] == {"n": 2, "mean": 50.0, "p50": 60.0, "p90": 60.0}
    assert summary["creating"]["rulesched"]["create pods/binding"]["n"] == 1
    assert summary["after"] == {"rulesched": {"create pods/binding": {"n": 1, "mean": 10.0, "p50": 10.0, "p90": 10.0}}}
    assert "creating podload" in format_latencies(summary, least=1).replace("  ", " ").replace("  ", " ")


def test_client_names() -> None:
    assert client("kube-scheduler/v1.37.2 (linux/amd64) kubernetes/abc/scheduler") == "kube-scheduler"
    assert client("rulesched/0.1.0 (linux/x86_64) host_42") == "rulesched"
    assert client("python-urllib3/2.8.0") == "python-urllib3"
    assert client("") == "?"
