"""Simulation results as the stable JSON documented in the README, as a table for people (with
``--explain``, each pod's best nodes and its filtered nodes under its row), or as the summary
line alone."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.scheduler.framework import CycleResult, skip_deleting
from rulesched.simulate.driver import PodHistory

EXPLAIN_TOP_NODES = 3  # table --explain: the best nodes shown per pod
EXPLAIN_NODE_NAMES = 3  # and the nodes named per filter reason before "(+N more)"


@dataclass(frozen=True)
class Report:
    """One simulation's outcome: the pods it was to schedule (in input order), what happened to
    each, the cluster after it, and ``skipped``, the pods left out as bound to missing nodes."""

    pending: Sequence[Pod]
    history: Mapping[str, PodHistory]
    state: ClusterStore
    evicted: Sequence[Pod]
    seconds: float
    explain: bool
    skipped: int = 0

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
                row["unresolvable"] = sorted(last.unresolvable or ()) if last else []
                row["scores"] = dict(last.scores or {}) if last else {}
            rows.append(row)
        return rows

    def summary(self) -> dict[str, object]:
        scheduled = sum(1 for p in self.pending if self.history[p.key].node is not None)
        terminating = sum(1 for p in self.pending if p.deleting)
        gated = sum(
            1 for p in self.pending if p.scheduling_gates and not p.deleting and self.history[p.key].last is None
        )
        return {
            "scheduled": scheduled,
            "unschedulable": len(self.pending) - scheduled - gated - terminating,
            "gated": gated,
            "terminating": terminating,
            "preempted": len(self.evicted),
            "skipped": self.skipped,
            "scheduling_seconds": round(self.seconds, 6),
        }


def _not_attempted(pod: Pod) -> str:
    if pod.deleting:  # never queued (kube-scheduler's skipPodSchedule)
        return skip_deleting(pod)
    if pod.scheduling_gates:  # kube-scheduler's PodScheduled=False, reason SchedulingGated
        return f"Scheduling is blocked due to non-empty scheduling gates ({', '.join(pod.scheduling_gates)})"
    return "not attempted"


def render_json(report: Report) -> str:
    return json.dumps({"pods": report.rows(), "summary": report.summary()}, indent=2)


def _percent(used: int, total: int) -> str:
    return f"{100 * used / total:.0f}%" if total else "-"


def render_summary(report: Report) -> str:
    """``--output summary``: the counts and the scheduling time, on one line."""
    return summary_line(report.summary())


def summary_line(summary: Mapping[str, object]) -> str:
    """``4 scheduled, 1 unschedulable, 2 preempted in 0.004s`` (gated, terminating and skipped
    pods when any)."""
    return (
        f"{summary['scheduled']} scheduled, {summary['unschedulable']} unschedulable, "
        + (f"{summary['gated']} gated, " if summary["gated"] else "")
        + (f"{summary['terminating']} terminating (not scheduled), " if summary.get("terminating") else "")
        + f"{summary['preempted']} preempted"
        + (f", {summary['skipped']} skipped (bound to missing nodes)" if summary["skipped"] else "")
        + f" in {summary['scheduling_seconds']:.3f}s"
    )


def render_table(report: Report) -> str:
    rows = report.rows()
    lines: list[str] = []
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
    pod_lines = _columns(table)
    lines.append(pod_lines[0])
    for pod, line in zip(report.pending, pod_lines[1:], strict=True):
        lines.append(line)
        if report.explain:
            lines.extend(explain_lines(report.history[pod.key]))
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
    lines.append("")
    lines.append(summary_line(report.summary()))
    return "\n".join(lines)


def explain_lines(history: PodHistory, indent: str = "    ") -> list[str]:
    """Table ``--explain`` for one pod, from its last cycle: the best nodes by total, one column
    each, with every score rule's normalised value and the total; then the nodes filtered out,
    grouped by reason (a node failing with two reasons is under both)."""
    last = history.last
    if last is None:  # gated, or never reached: the message says why
        return []
    scores, filtered = last.scores or {}, last.filtered or {}
    if not scores and not filtered:
        if last.node is not None:  # a nominated node that still fits is taken without a look at others
            return [f"{indent}its last cycle evaluated only its nominated node {last.node}, which fit"]
        return [f"{indent}no node was evaluated"]
    lines = _score_lines(last, indent) if scores else [f"{indent}scores: no node passed the filters"]
    if filtered:
        lines.append(f"{indent}filtered out ({len(filtered)} of {last.num_nodes} nodes)")
        lines.extend(f"{indent}  {group}" for group in _reason_groups(filtered))
        unresolvable = [n for n in filtered if n in (last.unresolvable or ())]
        if unresolvable:  # in cluster order, as the groups name them
            named = ", ".join(unresolvable[:EXPLAIN_NODE_NAMES])
            more = len(unresolvable) - EXPLAIN_NODE_NAMES
            lines.append(
                f"{indent}  (unresolvable: preemption cannot help on {named}"
                + (f" (+{more} more))" if more > 0 else ")")
            )
    return lines


def _score_lines(last: CycleResult, indent: str) -> list[str]:
    scores = last.scores or {}
    # highest total first; among equal totals the node chosen (the tie draw's winner), then by name
    ranked = sorted(scores, key=lambda n: (-scores[n].get("total", 0), n != last.node, n))
    top = ranked[:EXPLAIN_TOP_NODES]
    rules = list(dict.fromkeys(rule for node in top for rule in scores[node] if rule != "total"))
    scored = (
        f"top {len(top)} of {len(ranked)} nodes scored" if len(ranked) > len(top) else _nodes(len(ranked)) + " scored"
    )
    table = [(f"scores ({scored})", *top)]
    table.extend((f"  {rule}", *(_score(scores[node].get(rule)) for node in top)) for rule in [*rules, "total"])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        indent + "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
        for row in table
    ]


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def _score(value: int | None) -> str:
    return "-" if value is None else str(value)


def _reason_groups(filtered: Mapping[str, Sequence[str]]) -> list[str]:
    """``Insufficient cpu: n3, n4, n7 (+12 more)``, most nodes first, nodes in cluster order."""
    by_reason: dict[str, list[str]] = {}
    for node, reasons in filtered.items():
        for reason in dict.fromkeys(reasons):
            by_reason.setdefault(reason, []).append(node)
    groups = []
    for reason, nodes in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        named = ", ".join(nodes[:EXPLAIN_NODE_NAMES])
        more = len(nodes) - EXPLAIN_NODE_NAMES
        groups.append(f"{reason}: {named}" + (f" (+{more} more)" if more > 0 else ""))
    return groups


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
