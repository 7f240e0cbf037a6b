"""Simulation results as the stable JSON documented in the README, or as a table for people."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.simulate.driver import PodHistory


@dataclass(frozen=True)
class Report:
    pending: Sequence[Pod]
    history: Mapping[str, PodHistory]
    state: ClusterStore
    evicted: Sequence[Pod]
    seconds: float
    explain: bool

    def rows(self) -> list[dict[str, object]]:
        rows = []
        for pod in self.pending:
            h = self.history[pod.key]
            last = h.last
            row: dict[str, object] = {
                "pod": pod.key,
                "node": h.node,
                "message": last.message if last is not None else _not_attempted(pod),
                "nominated": h.nominated,
                "victims": [v.key for v in h.victims],
            }
            if self.explain:
                row["filtered"] = {n: list(r) for n, r in (last.filtered or {}).items()} if last else {}
                row["scores"] = dict(last.scores or {}) if last else {}
            rows.append(row)
        return rows

    def summary(self) -> dict[str, object]:
        scheduled = sum(1 for p in self.pending if self.history[p.key].node is not None)
        gated = sum(1 for p in self.pending if p.scheduling_gates and self.history[p.key].last is None)
        return {
            "scheduled": scheduled,
            "unschedulable": len(self.pending) - scheduled - gated,
            "gated": gated,
            "preempted": len(self.evicted),
            "scheduling_seconds": round(self.seconds, 6),
        }


def _not_attempted(pod: Pod) -> str:
    if pod.scheduling_gates:  # kube-scheduler's PodScheduled=False, reason SchedulingGated
        return f"Scheduling is blocked due to non-empty scheduling gates ({', '.join(pod.scheduling_gates)})"
    return "not attempted"


def render_json(report: Report) -> str:
    return json.dumps({"pods": report.rows(), "summary": report.summary()}, indent=2)


def _percent(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def render_table(report: Report) -> str:
    rows = report.rows()
    lines = []
    table = [("POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE")]
    for row in rows:
        victims = row["victims"]
        assert isinstance(victims, list)
        table.append(
            (
                str(row["pod"]),
                str(row["node"] or "-"),
                str(row["nominated"] or "-"),
                ",".join(victims) or "-",
                str(row["message"]),
            )
        )
    lines.extend(_columns(table))
    lines.append("")
    nodes = [("NODE", "CPU", "MEMORY", "PODS")]
    for info in report.state.nodes:
        alloc, req = info.allocatable, info.requested
        nodes.append(
            (
                info.name,
                _percent(req.get("cpu", 0), alloc.get("cpu", 0)),
                _percent(req.get("memory", 0), alloc.get("memory", 0)),
                f"{len(info.pods)}/{alloc.get('pods', 0) // 1000}",
            )
        )
    lines.extend(_columns(nodes))
    summary = report.summary()
    lines.append("")
    lines.append(
        f"{summary['scheduled']} scheduled, {summary['unschedulable']} unschedulable, "
        + (f"{summary['gated']} gated, " if summary["gated"] else "")
        + f"{summary['preempted']} preempted in {summary['scheduling_seconds']:.3f}s"
    )
    return "\n".join(lines)


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
