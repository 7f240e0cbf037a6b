"""``rulesched simulate --output html``: one self-contained page to attach to a review.

The page is a single HTML document written to stdout: inline CSS, bars drawn with plain HTML and
CSS, no script, no external reference (fonts, images, style sheets), so it opens from a CI
artifact as it is. From the top:

* the summary: the counts of ``--output summary``, the nodes, the scheduling time and the pods
  evicted by preemption;
* node utilisation after placement: cpu, memory and pods as bars, one row per node, or for
  clusters of more than :data:`HEATMAP_MIN_NODES` nodes a compact heatmap grid per resource (each
  node a cell, its figures in the cell's tooltip) and the busiest nodes as bars;
* every pending pod in input order: outcome, node, nominated node, victims and message; with
  ``--explain`` its last cycle under it: the best nodes' per-rule scores and totals and the nodes
  filtered out, grouped by reason.

Every string from the cluster or the rules (pod and node names, messages, reasons, rule names)
goes through :func:`esc`. :func:`page`, :func:`esc`, :func:`badge` and :data:`BASE_CSS` are shared
with ``rulesched diff --output html`` (:mod:`rulesched.authoring.diff_html`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape

from rulesched import __version__
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.scheduler.framework import CycleResult
from rulesched.simulate.driver import PodHistory
from rulesched.simulate.report import Report, summary_line

HEATMAP_MIN_NODES = 200  # more nodes than this: a heatmap grid per resource instead of a row per node
BUSIEST_NODES = 15  # with the heatmap: the busiest nodes, drawn as bars
TOP_NODES = 5  # --explain: the best nodes shown per pod, a column each
NODE_NAMES = 30  # --explain: the nodes named per filter reason before "+N more"
OPEN_EXPLANATIONS = 50  # up to this many pending pods, explanations start unfolded
HEAT_LEVELS = 10  # heatmap colour steps (0-10%, ..., 90-100% and over)
_MILLI = 1000
_GIB = 2**30 * _MILLI  # memory is held in milli-bytes

BASE_CSS = """
:root { color-scheme: light; --fg: #1f2933; --muted: #616e7c; --line: #d9e2ec; --panel: #f5f7fa;
  --ok: #2f855a; --warn: #b7791f; --bad: #c53030; --info: #2b6cb0; --none: #7b8794; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto,
  "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 14px 0 6px; }
p { margin: 4px 0; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
.lead { font-size: 15px; margin: 2px 0 14px; }
.stats { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0 14px; }
.stat { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px;
  min-width: 112px; }
.stat b { display: block; font-size: 22px; line-height: 1.2; }
.stat span { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.stat.ok b { color: var(--ok); } .stat.bad b { color: var(--bad); } .stat.warn b { color: var(--warn); }
table { border-collapse: collapse; margin: 4px 0 8px; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .03em;
  background: var(--panel); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td code, th code { white-space: nowrap; } th code { text-transform: none; letter-spacing: 0; color: var(--fg); }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600;
  color: #fff; white-space: nowrap; }
.badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); }
.badge.warn { background: var(--warn); } .badge.info { background: var(--info); }
.badge.none { background: var(--none); }
details { margin: 0; }
details[open] > summary { margin-bottom: 6px; }
summary { cursor: pointer; color: var(--info); }
tr.why { background: #fbfcfd; }
tr.why > td { padding: 2px 10px 6px 28px; }
.panels { display: flex; flex-wrap: wrap; gap: 10px 36px; align-items: flex-start; }
ul.reasons { margin: 4px 0; padding-left: 18px; }
ul.reasons li { margin: 2px 0; }
.note { color: var(--muted); font-style: italic; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
"""

_SIMULATE_CSS = """
.bar { display: inline-block; width: 150px; height: 12px; background: #e4e7eb; border-radius: 3px;
  vertical-align: middle; overflow: hidden; }
.bar > span { display: block; height: 100%; background: #3b82c4; }
.bar.warn > span { background: #d69e2e; } .bar.hot > span { background: #e53e3e; }
.use { white-space: nowrap; }
.use .pct { display: inline-block; width: 42px; text-align: right; margin-right: 6px;
  font-variant-numeric: tabular-nums; }
.use .detail { color: var(--muted); font-size: 12px; margin-left: 6px; }
.cordoned { color: var(--warn); font-size: 12px; font-weight: 600; }
table.scores td { padding: 3px 10px; } table.scores td.num { min-width: 70px; }
table.scores th.chosen, table.scores td.chosen { background: #ebf8ff; }
table.scores tr.total td { font-weight: 700; border-top: 2px solid var(--line); }
.mini { display: block; height: 3px; background: #90cdf4; margin-top: 2px; margin-left: auto; }
.heat { display: inline-block; vertical-align: top; margin: 0 24px 12px 0; }
.grid { display: grid; grid-template-columns: repeat(44, 7px); gap: 1px; }
.grid i { display: block; width: 7px; height: 7px; }
.legend { display: flex; align-items: center; gap: 1px; margin-top: 6px; font-size: 11px; color: var(--muted); }
.legend i { display: block; width: 16px; height: 9px; }
.legend span { margin: 0 6px; }
"""

# heatmap colours: pale grey-blue at 0% through amber to deep red at 100%
_HEAT_STOPS = ((0.0, (0xE8, 0xF0, 0xF8)), (0.5, (0xF6, 0xC3, 0x4A)), (1.0, (0xB4, 0x1E, 0x1E)))


def esc(value: object) -> str:
    """``value`` as text safe inside HTML content and quoted attribute values."""
    return escape(str(value), quote=True)


def badge(text: str, kind: str) -> str:
    """A coloured label; ``kind`` is one of ok, bad, warn, info, none."""
    return f'<span class="badge {kind}">{esc(text)}</span>'


def page(title: str, body: str, css: str = "") -> str:
    """A complete HTML document: ``body`` (already HTML) with :data:`BASE_CSS` and ``css`` inline."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{BASE_CSS}{css}</style>\n</head>\n<body>\n"
        f"{body}\n"
        f"<footer>Generated by rulesched {esc(__version__)}. A self-contained page: no script, no external "
        "resources.</footer>\n</body>\n</html>\n"
    )


def stats(items: Iterable[tuple[str, object, str]]) -> str:
    """A row of figure cards: (label, value, kind), kind "" or ok, bad, warn."""
    cards = "".join(
        f'<div class="stat {kind}"><b>{esc(value)}</b> <span>{esc(label)}</span></div>' for label, value, kind in items
    )
    return f'<div class="stats">{cards}</div>'


def render_html(report: Report) -> str:
    """The whole page for one simulation (see the module's docstring)."""
    body = [_summary(report, len(report.state.nodes)), _nodes(report), _pods(report)]
    return page(f"rulesched simulate: {summary_line(report.summary())}", "\n".join(body), _SIMULATE_CSS + _heat_css())


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
    parts = [
        "<header>",
        "<h1>rulesched simulate</h1>",
        f'<p class="lead">{esc(summary_line(summary))}</p>',
        stats(items),
    ]
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


# --- nodes -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Use:
    """One resource's use on one node: the fraction requested (None: nothing allocatable) and the
    figures behind it."""

    fraction: float | None
    detail: str

    @property
    def percent(self) -> str:
        return "-" if self.fraction is None else f"{100 * self.fraction:.0f}%"


def _uses(info: NodeInfo) -> tuple[_Use, _Use, _Use]:
    """cpu, memory and pods on ``info`` after placement, as the table output counts them."""
    alloc, req = info.allocatable, info.requested
    cpu, cpu_total = req.get("cpu", 0), alloc.get("cpu", 0)
    memory, memory_total = req.get("memory", 0), alloc.get("memory", 0)
    pods, pods_total = len(info.pods), alloc.get("pods", 0) // _MILLI
    return (
        _Use(cpu / cpu_total if cpu_total else None, f"{cpu / _MILLI:g} / {cpu_total / _MILLI:g} cores"),
        _Use(memory / memory_total if memory_total else None, f"{memory / _GIB:.1f} / {memory_total / _GIB:.1f} GiB"),
        _Use(pods / pods_total if pods_total else None, f"{pods} / {pods_total}"),
    )


_RESOURCES = ("cpu", "memory", "pods")


def _bar(use: _Use) -> str:
    fraction = use.fraction or 0.0
    level = "hot" if fraction >= 0.9 else "warn" if fraction >= 0.7 else ""
    width = min(100.0, 100 * fraction)
    return (
        f'<span class="use"><span class="pct">{esc(use.percent)}</span>'
        f'<span class="bar {level}"><span style="width:{width:.1f}%"></span></span>'
        f'<span class="detail">{esc(use.detail)}</span></span>'
    )


def _placed(report: Report) -> Counter[str]:
    """Pending pods this run bound, per node."""
    return Counter(h.node for h in (report.history[p.key] for p in report.pending) if h.node is not None)


def _node_rows(nodes: Sequence[NodeInfo], placed: Mapping[str, int]) -> str:
    rows = [
        "<table>",
        '<tr><th>Node</th><th>CPU</th><th>Memory</th><th>Pods</th><th class="num">Placed by this run</th></tr>',
    ]
    for info in nodes:
        cpu, memory, pods = _uses(info)
        cordoned = ' <span class="cordoned">cordoned</span>' if info.unschedulable else ""
        count = placed.get(info.name, 0)
        rows.append(
            f"<tr><td><code>{esc(info.name)}</code>{cordoned}</td><td>{_bar(cpu)}</td><td>{_bar(memory)}</td>"
            f'<td>{_bar(pods)}</td><td class="num">{f"+{count}" if count else ""}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


def _heat_colour(level: int) -> str:
    """The colour of heatmap step ``level`` (0..HEAT_LEVELS - 1), interpolated between the stops."""
    x = level / (HEAT_LEVELS - 1)
    for (x0, c0), (x1, c1) in zip(_HEAT_STOPS, _HEAT_STOPS[1:], strict=False):
        if x <= x1:
            t = (x - x0) / (x1 - x0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1, strict=True))
    return "#" + "".join(f"{c:02x}" for c in _HEAT_STOPS[-1][1])


def _heat_css() -> str:
    """The heatmap's colour steps, ``.h0`` .. ``.h9``, and ``.hn`` for nothing allocatable."""
    steps = "".join(f".h{i} {{ background: {_heat_colour(i)}; }}\n" for i in range(HEAT_LEVELS))
    return f"{steps}.hn {{ background: #cbd2d9; }}\n"


def _heat_class(use: _Use) -> str:
    if use.fraction is None:
        return "hn"
    return f"h{min(HEAT_LEVELS - 1, int(use.fraction * HEAT_LEVELS))}"


def _heatmap(nodes: Sequence[NodeInfo], placed: Mapping[str, int]) -> str:
    uses = [(info, _uses(info)) for info in nodes]
    parts = [
        f'<p class="muted">{len(nodes)} nodes, one cell each in cluster order; hover a cell for the node and its '
        "figures.</p>",
    ]
    for index, resource in enumerate(_RESOURCES):
        cells = "".join(
            f'<i class="{_heat_class(u[index])}" title="{esc(info.name)}: {esc(u[index].percent)} '
            f'({esc(u[index].detail)})"></i>'
            for info, u in uses
        )
        parts.append(f'<div class="heat"><h3>{resource}</h3><div class="grid">{cells}</div>{_legend()}</div>')
    busiest = sorted(uses, key=lambda item: -max(u.fraction or 0.0 for u in item[1]))[:BUSIEST_NODES]
    parts.append(f"<h3>Busiest {len(busiest)} nodes (highest of cpu, memory, pods)</h3>")
    parts.append(_node_rows([info for info, _ in busiest], placed))
    return "\n".join(parts)


def _legend() -> str:
    steps = "".join(f'<i class="h{i}"></i>' for i in range(HEAT_LEVELS))
    return f'<div class="legend"><span>0%</span>{steps}<span>100%</span><i class="hn"></i><span>none</span></div>'


def _nodes(report: Report) -> str:
    nodes = report.state.nodes
    placed = _placed(report)
    title = f"<h2>Nodes after placement ({len(nodes)})</h2>"
    if not nodes:
        return title + '\n<p class="note">No nodes.</p>'
    if len(nodes) > HEATMAP_MIN_NODES:
        return title + "\n" + _heatmap(nodes, placed)
    return title + "\n" + _node_rows(nodes, placed)


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
    scores, filtered = last.scores or {}, last.filtered or {}
    if not scores and not filtered:
        if last.node is not None:
            return (
                f'<p class="note">Its last cycle evaluated only its nominated node <code>{esc(last.node)}</code>, '
                "which fit.</p>"
            )
        return '<p class="note">No node was evaluated.</p>'
    left = _scores(last) if scores else '<div><h3>Scores</h3><p class="note">No node passed the filters.</p></div>'
    right = _filtered(last) if filtered else ""
    return f'<div class="panels">{left}{right}</div>'


def _scores(last: CycleResult) -> str:
    scores = last.scores or {}
    ranked = sorted(scores, key=lambda n: (-scores[n].get("total", 0), n != last.node, n))
    top = ranked[:TOP_NODES]
    rules = list(dict.fromkeys(rule for node in top for rule in scores[node] if rule != "total"))
    what = (
        f"top {len(top)} of {len(ranked)} nodes scored"
        if len(ranked) > len(top)
        else _count(len(ranked), "node") + " scored"
    )
    head = "".join(
        f'<th class="num{" chosen" if node == last.node else ""}"><code>{esc(node)}</code>'
        + (" ✓" if node == last.node else "")
        + "</th>"
        for node in top
    )
    lines = [f"<div><h3>Scores ({esc(what)})</h3>", '<table class="scores">', f"<tr><th>Rule</th>{head}</tr>"]
    for rule in rules:
        cells = "".join(_score_cell(scores[node].get(rule), node == last.node) for node in top)
        lines.append(f"<tr><td><code>{esc(rule)}</code></td>{cells}</tr>")
    totals = "".join(
        f'<td class="num{" chosen" if node == last.node else ""}">{esc(scores[node].get("total", 0))}</td>'
        for node in top
    )
    lines.append(f'<tr class="total"><td>total (weighted)</td>{totals}</tr>')
    lines.append("</table></div>")
    return "".join(lines)


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _score_cell(value: int | None, chosen: bool) -> str:
    cls = "num chosen" if chosen else "num"
    if value is None:
        return f'<td class="{cls}"><span class="muted">-</span></td>'
    width = max(0, min(100, value))
    return f'<td class="{cls}">{esc(value)}<span class="mini" style="width:{width}%"></span></td>'


def reason_groups(filtered: Mapping[str, Sequence[str]]) -> list[tuple[str, list[str]]]:
    """(reason, nodes) pairs, most nodes first, nodes in cluster order; a node failing with two
    reasons is under both."""
    by_reason: dict[str, list[str]] = {}
    for node, reasons in filtered.items():
        for reason in dict.fromkeys(reasons):
            by_reason.setdefault(reason, []).append(node)
    return sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0]))


def _filtered(last: CycleResult) -> str:
    filtered = last.filtered or {}
    items = []
    for reason, nodes in reason_groups(filtered):
        named = ", ".join(f"<code>{esc(n)}</code>" for n in nodes[:NODE_NAMES])
        more = len(nodes) - NODE_NAMES
        count = _count(len(nodes), "node")
        items.append(
            f'<li><b>{esc(reason)}</b> <span class="muted">({count})</span>: {named}'
            + (f' <span class="muted">+{more} more</span>' if more > 0 else "")
            + "</li>"
        )
    return (
        f"<div><h3>Filtered out ({len(filtered)} of {last.num_nodes} nodes)</h3>"
        f'<ul class="reasons">{"".join(items)}</ul></div>'
    )
