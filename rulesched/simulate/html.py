"""``rulesched simulate --output html``: one self-contained page to attach to a review.

The page is a single HTML document written to stdout: inline CSS, bars drawn with plain HTML and
CSS, no script, no external reference (fonts, images, style sheets), so it opens from a CI
artifact as it is. From the top:

* the summary: the counts of ``--output summary``, the nodes, the scheduling time and the pods
  evicted by preemption; then what the page was made from (:class:`rulesched.simulate.report.Provenance`:
  rule files and digest, cluster files, seed, percentageOfNodesToScore, rulesched's version);
* node use after placement (:mod:`rulesched.simulate.html_nodes`): cpu, memory, pods and the
  extended resources pods request as bars, for big clusters a heatmap grid per resource and the
  busiest nodes as bars;
* with DRA devices, the devices table of the text report (per driver and model, fragmentation);
* every pending pod in input order: outcome, node, nominated node, victims and message; with
  ``--explain`` its last cycle under it: the best nodes' per-rule scores and totals and the nodes
  filtered out, grouped by reason.

Every string from the cluster or the rules (pod and node names, messages, reasons, rule names)
goes through :func:`esc`. The page skeleton is :mod:`rulesched.simulate.html_page`'s, shared
with ``rulesched diff --output html`` (:mod:`rulesched.authoring.diff_html`).
"""

from __future__ import annotations

from rulesched.scheduler.framework import CycleResult, Explanation
from rulesched.simulate.driver import PodHistory
from rulesched.simulate.html_nodes import HEATMAP_MIN_NODES, NODES_CSS, heat_css, nodes_section
from rulesched.simulate.html_page import badge, code_list, esc, page, provenance_table, stats
from rulesched.simulate.nodes import BUSIEST_NODES
from rulesched.simulate.report import Provenance, Report, device_note, device_rows, summary_line

__all__ = ["BUSIEST_NODES", "HEATMAP_MIN_NODES", "badge", "esc", "page", "render_html", "stats"]

TOP_NODES = 5  # --explain: the best nodes shown per pod, a column each
NODE_NAMES = 30  # --explain: the nodes named per filter reason before "+N more"
OPEN_EXPLANATIONS = 50  # up to this many pending pods, explanations start unfolded

_SIMULATE_CSS = """
table.scores td { padding: 3px 10px; } table.scores td.num { min-width: 70px; }
table.scores th.chosen, table.scores td.chosen { background: #ebf8ff; }
table.scores tr.total td { font-weight: 700; border-top: 2px solid var(--line); }
.mini { display: block; height: 3px; background: #90cdf4; margin-top: 2px; margin-left: auto; }
"""


def render_html(report: Report) -> str:
    """The whole page for one simulation (see the module's docstring)."""
    body = [_summary(report, len(report.state.nodes)), nodes_section(report), _devices(report), _pods(report)]
    css = _SIMULATE_CSS + NODES_CSS + heat_css()
    return page(f"rulesched simulate: {summary_line(report.summary())}", "\n".join(body), css)


# --- devices ---------------------------------------------------------------------------------------


def _devices(report: Report) -> str:
    """The DRA devices table (the text report's, :func:`rulesched.simulate.report.device_rows`);
    nothing without devices."""
    if report.devices is None:
        return ""
    head, *rows = device_rows(report.devices)
    cells = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    table = "<tr>" + "".join(f"<th>{esc(c)}</th>" for c in head) + "</tr>" + cells
    return f"<h2>Devices</h2><table>{table}</table><p>{esc(device_note(report.devices))}</p>"


# --- summary ---------------------------------------------------------------------------------------


def _summary(report: Report, node_count: int) -> str:
    summary = report.summary()
    unschedulable, gated = summary["unschedulable"], summary["gated"]
    items: list[tuple[str, object, str]] = [
        ("pending pods", len(report.pending), ""),
        ("scheduled", summary["scheduled"], "ok"),
        ("unschedulable", unschedulable, "bad" if unschedulable else ""),
    ]
    if gated:
        items.append(("gated", gated, "warn"))
    if summary["terminating"]:
        items.append(("terminating", summary["terminating"], "none"))
    items.append(("preempted", summary["preempted"], "warn" if summary["preempted"] else ""))
    if summary["skipped"]:
        items.append(("skipped", summary["skipped"], "warn"))
    items.append(("nodes", node_count, ""))
    items.append(("scheduling time", f"{report.seconds:.3f}s", ""))
    if report.explain:
        items.append(("explaining time", f"{report.explain_seconds:.3f}s", ""))
    parts = [
        "<header>",
        "<h1>rulesched simulate</h1>",
        f'<p class="lead">{esc(summary_line(summary))}</p>',
        stats(items),
    ]
    if report.provenance is not None:
        parts.append(_provenance(report.provenance))
    if report.evicted:
        victims = ", ".join(f"<code>{esc(p.key)}</code>" for p in report.evicted)
        parts.append(f"<p>Evicted by preemption: {victims}</p>")
    if summary["skipped"]:
        parts.append(
            f'<p class="note">{esc(summary["skipped"])} running pods bound to nodes missing from the cluster '
            "files were left out.</p>"
        )
    parts.append("</header>")
    return "\n".join(parts)


def _provenance(made: Provenance) -> str:
    """The rule set, the cluster files and the settings the page came from, as diff's page names its sets."""
    percentage = made.percentage_of_nodes_to_score
    rows = [
        ("rules", code_list(made.rules)),
        ("rules digest", f"<code>{esc(made.digest)}</code>"),
        ("cluster files", code_list("<stdin>" if f == "-" else f for f in made.inputs)),
        ("seed", f"<code>{esc(made.seed)}</code>"),
        (
            "percentage of nodes to score",
            f"<code>{esc(percentage)}</code>" + (' <span class="muted">(adaptive)</span>' if percentage <= 0 else ""),
        ),
    ]
    if made.scheduler_name is not None:
        rows.append(("scheduler name", f"<code>{esc(made.scheduler_name)}</code>"))
    rows.append(("rulesched", f"<code>{esc(made.version)}</code>"))
    return provenance_table(rows)


# --- pods ------------------------------------------------------------------------------------------


def _outcome(history: PodHistory) -> str:
    if history.node is not None:
        return badge("scheduled", "ok")
    if history.last is None and history.pod.deleting:  # never attempted: kube-scheduler skips it
        return badge("terminating", "none")
    if history.last is None and history.pod.scheduling_gates:
        return badge("gated", "none")
    if history.last is None:
        return badge("not attempted", "none")
    if history.nominated is not None:
        return badge("nominated", "warn")
    return badge("unschedulable", "bad")


def _or_dash(value: object) -> str:
    return f"<code>{esc(value)}</code>" if value else '<span class="muted">-</span>'


def _pods(report: Report) -> str:
    rows = report.rows()
    parts = [
        f"<h2>Pending pods ({len(rows)})</h2>",
        "<table>",
        "<tr><th>Pod</th><th>Outcome</th><th>Node</th><th>Nominated</th><th>Victims</th><th>Message</th></tr>",
    ]
    unfold = len(rows) <= OPEN_EXPLANATIONS
    for index, (pod, row) in enumerate(zip(report.pending, rows, strict=True)):
        history = report.history[pod.key]
        victims = row["victims"]
        assert isinstance(victims, list)
        victim_cells = "<br>".join(f"<code>{esc(v)}</code>" for v in victims) or '<span class="muted">-</span>'
        parts.append(
            f'<tr id="pod-{index}"><td><code>{esc(row["pod"])}</code></td><td>{_outcome(history)}</td>'
            f"<td>{_or_dash(row['node'])}</td><td>{_or_dash(row['nominated'])}</td><td>{victim_cells}</td>"
            f"<td>{esc(row['message'])}</td></tr>"
        )
        if report.explain:
            opened = " open" if unfold else ""
            parts.append(
                f'<tr class="why"><td colspan="6"><details{opened}><summary>why: its last cycle</summary>'
                f"{explanation(history)}</details></td></tr>"
            )
    parts.append("</table>")
    if not rows:
        parts.append('<p class="note">No pending pods.</p>')
    elif not report.explain:
        parts.append('<p class="note">Run with <code>--explain</code> for each pod\'s scores and filtered nodes.</p>')
    return "\n".join(parts)


def explanation(history: PodHistory) -> str:
    """One pod's last cycle, as the table's ``--explain`` tells it: the best nodes by total with
    every score rule's normalised value, then the nodes filtered out grouped by reason."""
    last = history.last
    if last is None:
        return '<p class="note">Never attempted: the message says why.</p>'
    why = last.explanation
    if why is None or (not why.scored and not why.filtered):
        if last.node is not None:
            return (
                f'<p class="note">Its last cycle evaluated only its nominated node <code>{esc(last.node)}</code>, '
                "which fit.</p>"
            )
        return '<p class="note">No node was evaluated.</p>'
    if why.scored:
        left = _scores(last, why)
    else:
        left = '<div><h3>Scores</h3><p class="note">No node passed the filters.</p></div>'
    right = _filtered(last, why) if why.filtered else ""
    return f'<div class="panels">{left}{right}</div>'


def _scores(last: CycleResult, why: Explanation) -> str:
    top = why.best[:TOP_NODES]
    what = (
        f"top {len(top)} of {why.scored} nodes scored"
        if why.scored > len(top)
        else _count(why.scored, "node") + " scored"
    )
    head = "".join(
        f'<th class="num{" chosen" if n.name == last.node else ""}"><code>{esc(n.name)}</code>'
        + (" ✓" if n.name == last.node else "")
        + "</th>"
        for n in top
    )
    lines = [f"<div><h3>Scores ({esc(what)})</h3>", '<table class="scores">', f"<tr><th>Rule</th>{head}</tr>"]
    for i, rule in enumerate(why.rules):
        cells = "".join(_score_cell(n.values[i], n.name == last.node) for n in top)
        lines.append(f"<tr><td><code>{esc(rule)}</code></td>{cells}</tr>")
    totals = "".join(f'<td class="num{" chosen" if n.name == last.node else ""}">{esc(n.total)}</td>' for n in top)
    lines.append(f'<tr class="total"><td>total (weighted)</td>{totals}</tr>')
    lines.append("</table></div>")
    return "".join(lines)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _score_cell(value: int, chosen: bool) -> str:
    cls = "num chosen" if chosen else "num"
    width = max(0, min(100, value))
    return f'<td class="{cls}">{esc(value)}<span class="mini" style="width:{width}%"></span></td>'


def _filtered(last: CycleResult, why: Explanation) -> str:
    items = []
    for group in why.groups:
        named = ", ".join(f"<code>{esc(n)}</code>" for n in group.names[:NODE_NAMES])
        more = group.nodes - min(NODE_NAMES, len(group.names))
        count = _count(group.nodes, "node")
        items.append(
            f'<li><b>{esc(group.reason)}</b> <span class="muted">({count})</span>: {named}'
            + (f' <span class="muted">+{more} more</span>' if more > 0 else "")
            + "</li>"
        )
    return (
        f"<div><h3>Filtered out ({why.filtered} of {last.num_nodes} nodes)</h3>"
        f'<ul class="reasons">{"".join(items)}</ul></div>'
    )
