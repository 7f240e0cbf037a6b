"""Simulation results as the stable JSON documented in the README, as a table for people (with
``--explain``, each pod's best nodes and its filtered nodes under its row), or as the summary
line alone.

Every form says what produced it (:class:`Provenance`: rule files and digest, input files, seed,
percentageOfNodesToScore, rulesched's version): JSON in its summary, HTML in its header. Node use
is :mod:`rulesched.simulate.nodes`' (extended resources such as GPUs beside cpu, memory and pods;
big clusters cut to their busiest nodes). JSON is written a pod at a time
(:func:`write_json`), so a long explained run never holds its whole document as one string.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import IO

from rulesched import __version__
from rulesched.cluster.store import ClusterStore
from rulesched.lang import Term
from rulesched.model import Pod
from rulesched.scheduler.explanation import BEST, load_text
from rulesched.scheduler.framework import CycleResult, Explanation, skip_deleting
from rulesched.scheduler.reasons import Reason, pod_reasons
from rulesched.simulate.devices import GROUP_BY, MIXED, DeviceGroup, DeviceReport, device_report
from rulesched.simulate.driver import PodHistory
from rulesched.simulate.nodes import BASE_RESOURCES, NodeSelection, extended_resources, select_nodes

EXPLAIN_TOP_NODES = 3  # table --explain: the best nodes shown per pod
EXPLAIN_NODE_NAMES = 3  # and the nodes named per filter reason before "(+N more)"


@dataclass(frozen=True)
class Provenance:
    """What a report came from, so a reviewer can reproduce it: the rule files as loaded and
    their digest, the cluster files as given (``-`` is standard input), the tie-break seed,
    percentageOfNodesToScore, the scheduler name pods had to give, and rulesched's version."""

    rules: tuple[str, ...]
    digest: str
    inputs: tuple[str, ...]
    seed: int = 0
    percentage_of_nodes_to_score: int = 0
    scheduler_name: str | None = None
    version: str = __version__

    def json(self) -> dict[str, object]:
        return {
            "rules": list(self.rules),
            "digest": self.digest,
            "inputs": list(self.inputs),
            "seed": self.seed,
            "percentage_of_nodes_to_score": self.percentage_of_nodes_to_score,
            "scheduler_name": self.scheduler_name,
            "version": self.version,
        }


@dataclass(frozen=True)
class Report:
    """One simulation's outcome: the pods it was to schedule (in input order), what happened to
    each, the cluster after it, and ``skipped``, the pods left out as bound to missing nodes.
    ``seconds`` is the scheduling alone: ``explain_seconds``, the explanations' work, is apart.
    ``explain_full``: JSON lists every evaluated node's reasons and scores. ``nodes``: the
    ``--nodes`` limit of node rows (None: the default, see :mod:`rulesched.simulate.nodes`)."""

    pending: Sequence[Pod]
    history: Mapping[str, PodHistory]
    state: ClusterStore
    evicted: Sequence[Pod]
    seconds: float
    explain: bool
    skipped: int = 0
    provenance: Provenance | None = None
    explain_seconds: float = 0.0
    explain_full: bool = False
    nodes: int | None = None
    device_group: str = GROUP_BY

    @cached_property
    def devices(self) -> DeviceReport | None:
        """The DRA devices at the end, per driver and ``device_group`` value, with their
        fragmentation against the input's pods (None: the cluster has no DRA devices)."""
        return device_report(self.state, self.pending, self.device_group)

    def rows(self) -> list[dict[str, object]]:
        return list(self.iter_rows())

    def iter_rows(self) -> Iterator[dict[str, object]]:
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
                explanation = last.explanation if last is not None else None
                row["explanation"] = explanation_json(explanation)
                # why it is not placed, as codes: its own or its group's, then its nodes'
                if h.node is not None:
                    row["reason_codes"] = []
                else:
                    codes = last.reason_codes() if last is not None else pod_reasons(_not_attempted(pod))
                    row["reason_codes"] = [r.summary_json() for r in codes]
                if last is not None and last.group_detail is not None:
                    row["group"] = last.group_detail.json()
                if self.explain_full:
                    row["filtered"] = {n: list(r) for n, r in (explanation.failed or {}).items()} if explanation else {}
                    row["unresolvable"] = sorted(explanation.unresolvable_nodes or ()) if explanation else []
                    row["scores"] = explanation.scores() if explanation else {}
            yield row

    def summary(self) -> dict[str, object]:
        scheduled = sum(1 for p in self.pending if self.history[p.key].node is not None)
        terminating = sum(1 for p in self.pending if p.deleting)
        gated = sum(
            1 for p in self.pending if p.scheduling_gates and not p.deleting and self.history[p.key].last is None
        )
        out: dict[str, object] = {
            "scheduled": scheduled,
            "unschedulable": len(self.pending) - scheduled - gated - terminating,
            "gated": gated,
            "terminating": terminating,
            "preempted": len(self.evicted),
            "skipped": self.skipped,
            "scheduling_seconds": round(self.seconds, 6),
        }
        if self.explain:
            out["explain_seconds"] = round(self.explain_seconds, 6)
        if self.provenance is not None:
            out.update(self.provenance.json())
        if self.devices is not None:
            out["devices"] = self.devices.json()
        return out

    def resources(self) -> tuple[str, ...]:
        """cpu, memory, pods, then the extended resources some pod requests."""
        return (*BASE_RESOURCES, *extended_resources(self.state.nodes, self.pending))

    def node_selection(self) -> NodeSelection:
        return select_nodes(self.state.nodes, self.resources(), self.nodes)


def explanation_json(explanation: Explanation | None) -> dict[str, object] | None:
    """``--explain``'s JSON for one pod's last cycle (None: it had no walk to explain: never
    attempted, or its nominated node was taken without a look at others)."""
    if explanation is None:
        return None
    coded: dict[str, Reason] = {}  # message -> its code (of the rule reporting it on the most nodes)
    for reason in explanation.codes:
        coded.setdefault(reason.message, reason)
    return {
        "evaluated": explanation.evaluated,
        "filtered": explanation.filtered,
        "unresolvable": explanation.unresolvable,
        "reasons": [
            {
                "reason": g.reason,
                "nodes": g.nodes,
                "unresolvable": g.unresolvable,
                "names": list(g.names),
                **({"values": list(g.values)} if g.values else {}),
                **({"code": coded[g.reason].code.value, "rule": coded[g.reason].rule} if g.reason in coded else {}),
            }
            for g in explanation.groups
        ],
        "codes": [r.summary_json() for r in explanation.codes],
        "unresolvable_names": list(explanation.unresolvable_names),
        "scored": explanation.scored,
        "scores": explanation.scores(explanation.best[:BEST]),  # (the best 10, with --explain-full too)
        **_load_json(explanation),
        **_terms_json(explanation),
    }


def _terms_json(explanation: Explanation) -> dict[str, object]:
    """``terms``: node -> score rule -> the lets it read there, for the best nodes that keep
    them (no key at all when none does: rules without such scores)."""
    terms = {
        n.name: {
            rule: [{"let": t.name, "value": t.value, "at": t.location} for t in kept] for rule, kept in n.terms.items()
        }
        for n in explanation.best[:BEST]
        if n.terms
    }
    return {"terms": terms} if terms else {}


def _load_json(explanation: Explanation) -> dict[str, object]:
    """``load``: node -> the load values its rules read and their age, for the nodes in
    ``scores`` that have any (no key at all when none has: runs without load sources)."""
    load = {n.name: dict(n.load) for n in explanation.best[:BEST] if n.load is not None}
    return {"load": load} if load else {}


def _not_attempted(pod: Pod) -> str:
    if pod.deleting:  # never queued (kube-scheduler's skipPodSchedule)
        return skip_deleting(pod)
    if pod.scheduling_gates:  # kube-scheduler's PodScheduled=False, reason SchedulingGated
        return f"Scheduling is blocked due to non-empty scheduling gates ({', '.join(pod.scheduling_gates)})"
    return "not attempted"


def write_json(report: Report, out: IO[str]) -> None:
    """The JSON document, a pod at a time: the same text as ``json.dumps(document, indent=2)``."""
    out.write('{\n  "pods": [')
    first = True
    for row in report.iter_rows():
        out.write("\n" if first else ",\n")
        first = False
        out.write(_indented(json.dumps(row, indent=2), "    ", first_line=True))
    out.write("\n  ]" if not first else "]")
    out.write(',\n  "summary": ')
    out.write(_indented(json.dumps(report.summary(), indent=2), "  ", first_line=False))
    out.write("\n}")


def _indented(text: str, prefix: str, first_line: bool) -> str:
    lines = text.split("\n")
    head = prefix + lines[0] if first_line else lines[0]
    return "\n".join([head, *(prefix + line for line in lines[1:])])


def render_json(report: Report) -> str:
    buffer = io.StringIO()
    write_json(report, buffer)
    return buffer.getvalue()


def render_summary(report: Report) -> str:
    """``--output summary``: the counts and the scheduling time, on one line (and with DRA
    devices, their allocation and fragmentation on a second)."""
    line = summary_line(report.summary())
    return line if report.devices is None else f"{line}\n{devices_line(report.devices)}"


def summary_line(summary: Mapping[str, object]) -> str:
    """``4 scheduled, 1 unschedulable, 2 preempted in 0.004s`` (gated, terminating and skipped
    pods when any). The time is the scheduling's: with ``--explain`` too (JSON and HTML give the
    explaining time)."""
    return (
        f"{summary['scheduled']} scheduled, {summary['unschedulable']} unschedulable, "
        + (f"{summary['gated']} gated, " if summary["gated"] else "")
        + (f"{summary['terminating']} terminating (not scheduled), " if summary.get("terminating") else "")
        + f"{summary['preempted']} preempted"
        + (f", {summary['skipped']} skipped (bound to missing nodes)" if summary["skipped"] else "")
        + f" in {summary['scheduling_seconds']:.3f}s"
    )


def render_table(report: Report) -> str:
    lines: list[str] = []
    table = [("POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE")]
    for row in report.iter_rows():
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
            lines.extend(explain_lines(report.history[pod.key], terms=report.explain_full))
    lines.append("")
    lines.extend(node_lines(report.node_selection()))
    if report.devices is not None:
        lines.append("")
        lines.extend(device_lines(report.devices))
    lines.append("")
    lines.append(summary_line(report.summary()))
    return "\n".join(lines)


def device_lines(devices: DeviceReport) -> list[str]:
    """The devices table: per driver and attribute value, the devices, those held whole (or to
    the last unit) and in part, each capacity as allocated/total, and the free, fragmented and
    stranded capacity (in the one capacity every device has, else in devices); a total row when
    there are several; then what the fragmentation was measured against."""
    return [*_columns(device_rows(devices)), f"({device_note(devices)})"]


def device_rows(devices: DeviceReport) -> list[tuple[str, ...]]:
    """The devices table's header and rows (text and HTML): the free, fragmented and stranded
    columns in the unit of the header, or with drivers of different units each in its own."""
    names = sorted({n for g in devices.groups for n in g.capacity})
    unit = devices.measure
    head = ("DRIVER", devices.group_by.upper(), "DEVICES", "ALLOCATED", "PARTLY", *(n.upper() for n in names))
    rows = [(*head, f"FREE {unit}" if unit else "FREE", "FRAGMENTED", "STRANDED")]
    groups = list(devices.groups)
    if len(groups) > 1:
        groups.append(devices.total)
    for g in groups:
        rows.append(
            (
                g.driver or "",
                g.value,
                str(g.devices),
                str(g.full),
                str(g.partly),
                *(_capacity(g, n) for n in names),
                *(v if unit or g.measure == MIXED else f"{v} {g.measure}" for v in _measured(g)),
            )
        )
    return rows


def device_note(devices: DeviceReport) -> str:
    unit = devices.measure or "capacity"
    return (
        f"fragmented: free {unit} the pods' commonest {devices.shapes} shapes cannot use, weighed by their share "
        f"of the {devices.pods} pods (the FGD paper's measure); stranded: free {unit} on nodes none of them fits"
    )


def devices_line(devices: DeviceReport) -> str:
    """``--output summary``'s devices line: the totals (the free capacity's per unit)."""
    t = devices.total
    parts = [f"devices: {t.full} allocated, {t.partly} partly of {t.devices}"]
    parts.extend(_capacity(t, n) + f" {n}" for n in sorted(t.capacity))
    for unit, g in devices.by_measure().items():
        _, frag, lost = _measured(g)
        parts.append(f"{frag} {unit} fragmented, {lost} stranded")
    return ", ".join(parts)


def _capacity(g: DeviceGroup, name: str) -> str:
    allocated, total = g.capacity.get(name, (0, 0))
    if not total:
        return "-"
    return f"{_amount(allocated)}/{_amount(total)} ({100 * allocated / total:.1f}%)"


def _measured(g: DeviceGroup) -> tuple[str, str, str]:
    if g.measure == MIXED:  # (a total over units)
        return "-", "-", "-"
    return _amount(g.free, g.scale), f"{g.fragmented / g.scale:.1f}", _amount(g.stranded, g.scale)


def _amount(value: int, scale: int = 1000) -> str:
    return str(value // scale) if value % scale == 0 else f"{value / scale:.3f}".rstrip("0")


def node_lines(selection: NodeSelection) -> list[str]:
    """The node table: cpu and memory as percentages, pods and extended resources as used/allocatable
    (``-``: the node has none); then what was left out, if anything."""
    extended = selection.resources[len(BASE_RESOURCES) :]
    rows = [("NODE", "CPU", "MEMORY", "PODS", *extended)]
    for info, (cpu, memory, pods, *more) in selection.rows:
        rows.append(
            (
                info.name,
                cpu.percent,
                memory.percent,
                pods.amounts(),
                *(use.amounts() if use.total else "-" for use in more),
            )
        )
    lines = _columns(rows)
    if selection.busiest:
        lines.append(f"({selection.note()})")
    return lines


def explain_lines(history: PodHistory, indent: str = "    ", terms: bool = False) -> list[str]:
    """Table ``--explain`` for one pod, from its last cycle: the best nodes by total, one column
    each, with every score rule's normalised value and the total (and with ``terms``,
    ``--explain-full``'s, the lets each score built from them read there); then the nodes filtered
    out, grouped by reason (a node failing with two reasons is under both)."""
    last = history.last
    if last is None:  # gated, or never reached: the message says why
        return []
    group = [f"{indent}{line}" for line in last.group_detail.lines()] if last.group_detail is not None else []
    return group + _walk_lines(last, indent, terms)


def _walk_lines(last: CycleResult, indent: str, terms: bool) -> list[str]:
    explanation = last.explanation
    if explanation is None or (not explanation.scored and not explanation.filtered):
        if last.node is not None:  # a nominated node that still fits is taken without a look at others
            return [f"{indent}its last cycle evaluated only its nominated node {last.node}, which fit"]
        return [f"{indent}no node was evaluated"]
    if explanation.scored:
        lines = _score_lines(last, explanation, indent, terms)
    else:
        lines = [f"{indent}scores: no node passed the filters"]
    if explanation.filtered:
        lines.append(f"{indent}filtered out ({explanation.filtered} of {last.num_nodes} nodes)")
        for group in explanation.groups:
            more = group.nodes - min(EXPLAIN_NODE_NAMES, len(group.names))
            named = ", ".join(group.names[:EXPLAIN_NODE_NAMES])
            lines.append(f"{indent}  {group.reason}: {named}" + (f" (+{more} more)" if more > 0 else ""))
            for shown in group.values:  # the domain and cluster counts the filter read there
                lines.append(f"{indent}    where {shown}")
        if explanation.unresolvable:  # in walk order, as the groups name them
            named = ", ".join(explanation.unresolvable_names[:EXPLAIN_NODE_NAMES])
            more = explanation.unresolvable - min(EXPLAIN_NODE_NAMES, len(explanation.unresolvable_names))
            lines.append(
                f"{indent}  (unresolvable: preemption cannot help on {named}"
                + (f" (+{more} more))" if more > 0 else ")")
            )
    return lines


def _score_lines(last: CycleResult, explanation: Explanation, indent: str, terms: bool) -> list[str]:
    # highest total first; among equal totals the node chosen (the tie draw's winner), then by name
    top = explanation.best[:EXPLAIN_TOP_NODES]
    scored = explanation.scored
    what = f"top {len(top)} of {scored} nodes scored" if scored > len(top) else _nodes(scored) + " scored"
    table = [(f"scores ({what})", *(n.name for n in top))]
    table.extend((f"  {rule}", *(str(n.values[i]) for n in top)) for i, rule in enumerate(explanation.rules))
    table.append(("  total", *(str(n.total) for n in top)))
    if any(n.load is not None for n in top):  # the node load the rules read, and its age
        keys = list(dict.fromkeys(k for n in top for k in (n.load or {})))
        table.extend((f"  load {key}", *(_load_value(key, n.load) for n in top)) for key in keys)
    for rule in dict.fromkeys(r for n in top for r in (n.terms or {}) if terms):  # the lets a score read
        lets = list(dict.fromkeys(t.name for n in top for t in (n.terms or {}).get(rule, ())))
        table.extend((f"  {rule}: {name}", *(_term_value(n.terms, rule, name) for n in top)) for name in lets)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return [
        indent + "  ".join([row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))])
        for row in table
    ]


def _term_value(terms: Mapping[str, tuple[Term, ...]] | None, rule: str, name: str) -> str:
    return next((t.value for t in (terms or {}).get(rule, ()) if t.name == name), "-")


def _load_value(key: str, load: Mapping[str, float] | None) -> str:
    return "-" if load is None or key not in load else load_text(key, load[key])


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
