"""What each client's requests cost in time, from kube-apiserver's own audit log (``--audit
DIR``): per client (its User-Agent's product) and request (verb, resource), how many and how
long the API server took to answer them (requestReceivedTimestamp to the ResponseComplete
stage), split at the end of the measured pods' creations. Watches (open for minutes) and the
Lease renewals are left out.

Why: the API server's own latency metrics mix every client; the audit log names who waited.
Beside rulesched in the preemption workload every client's writes took longer while the pods
were being created, podload's creations and kube-controller-manager's too (benchmarks/README.md,
speed Run 25), which says the slowness is the API server's, shared, not rulesched's requests'.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

CLIENTS = ("kube-scheduler", "rulesched", "kube-controller-manager", "podload", "kube-apiserver")


def client(user_agent: str) -> str:
    """The client a User-Agent names: one of CLIENTS, else its product (the benchmark's own
    Python requests: ``python-urllib3``, the pods' watch and the kubelet stand-in)."""
    for name in CLIENTS:
        if user_agent.startswith(name):
            return name
    return user_agent.split("/", 1)[0] or "?"


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def answered(lines: Iterable[str]) -> list[tuple[float, str, str, float]]:
    """The requests answered: (received, client, "verb resource[/subresource]", seconds)."""
    found = []
    for line in lines:
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or event.get("verb") == "watch":
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "-") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        if resource == "leases":
            continue
        received = _when(event["requestReceivedTimestamp"])
        took = _when(event["stageTimestamp"]) - received
        found.append((received, client(event.get("userAgent") or ""), f"{event['verb']} {resource}", took))
    return found


def latencies(path: Path, since: float) -> dict[str, Any]:
    """Per phase ("creating": until podload's last creation was received; "after"), client and
    request: count, mean, median and 90th percentile in ms, for the requests received from
    ``since`` (wall time) on."""
    with path.open() as f:
        requests = [r for r in answered(f) if r[0] >= since]
    creations = [r[0] for r in requests if r[1] == "podload"]
    created = max(creations) if creations else since
    grouped: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for received, who, what, took in requests:
        grouped["creating" if received <= created else "after"][who][what].append(1000 * took)
    return {
        phase: {
            who: {what: _summary(times) for what, times in sorted(kinds.items(), key=lambda kv: -len(kv[1]))}
            for who, kinds in sorted(clients.items())
        }
        for phase, clients in grouped.items()
    } | {"creating_seconds": round(created - since, 2)}


def _summary(times: list[float]) -> dict[str, float]:
    times.sort()
    n = len(times)
    return {"n": n, "mean": round(statistics.fmean(times), 1), "p50": round(times[n // 2], 1),
            "p90": round(times[min(n - 1, n * 9 // 10)], 1)}  # fmt: skip


def format_latencies(summary: dict[str, Any], least: int = 20) -> str:
    """The summary's lines: each phase, client and request made at least ``least`` times."""
    lines = []
    for phase in ("creating", "after"):
        for who, kinds in summary.get(phase, {}).items():
            for what, s in kinds.items():
                if s["n"] >= least:
                    lines.append(
                        f"      {phase:8} {who:24} {what:34} {s['n']:5}  mean {s['mean']:6.1f}  "
                        f"p50 {s['p50']:6.1f}  p90 {s['p90']:6.1f} ms"
                    )
    return "\n".join(lines)
