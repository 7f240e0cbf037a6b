"""The simulate page's node section: each node's use after placement.

Every resource :mod:`rulesched.simulate.nodes` shows (cpu, memory, pods, then the extended
resources some pod requests, such as ``nvidia.com/gpu``) is a bar per node: every node for small
clusters, the busiest ones otherwise (``--nodes``). Above :data:`HEATMAP_MIN_NODES` nodes a
heatmap grid per resource comes first, every node a cell in cluster order with its figures in
the cell's tooltip, so the nodes left out of the bars are still seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.simulate.html_page import esc
from rulesched.simulate.nodes import ALL_NODES_UP_TO, NodeSelection, Use, uses
from rulesched.simulate.report import Report

HEATMAP_MIN_NODES = ALL_NODES_UP_TO  # more nodes than this: a heatmap grid per resource above the bars
HEAT_LEVELS = 10  # heatmap colour steps (0-10%, ..., 90-100% and over)

NODES_CSS = """
.bar { display: inline-block; width: 150px; height: 12px; background: #e4e7eb; border-radius: 3px;
  vertical-align: middle; overflow: hidden; }
.bar > span { display: block; height: 100%; background: #3b82c4; }
.bar.warn > span { background: #d69e2e; } .bar.hot > span { background: #e53e3e; }
.use { white-space: nowrap; }
.use .pct { display: inline-block; width: 42px; text-align: right; margin-right: 6px;
  font-variant-numeric: tabular-nums; }
.use .detail { color: var(--muted); font-size: 12px; margin-left: 6px; }
.cordoned { color: var(--warn); font-size: 12px; font-weight: 600; }
.heat { display: inline-block; vertical-align: top; margin: 0 24px 12px 0; }
.grid { display: grid; grid-template-columns: repeat(44, 7px); gap: 1px; }
.grid i { display: block; width: 7px; height: 7px; }
.legend { display: flex; align-items: center; gap: 1px; margin-top: 6px; font-size: 11px; color: var(--muted); }
.legend i { display: block; width: 16px; height: 9px; }
.legend span { margin: 0 6px; }
"""

# heatmap colours: pale grey-blue at 0% through amber to deep red at 100%
_HEAT_STOPS = ((0.0, (0xE8, 0xF0, 0xF8)), (0.5, (0xF6, 0xC3, 0x4A)), (1.0, (0xB4, 0x1E, 0x1E)))
_HEADINGS = {"cpu": "CPU", "memory": "Memory", "pods": "Pods"}


def nodes_section(report: Report) -> str:
    nodes = report.state.nodes
    title = f"<h2>Nodes after placement ({len(nodes)})</h2>"
    if not nodes:
        return title + '\n<p class="note">No nodes.</p>'
    selection = report.node_selection()
    placed = _placed(report)
    parts = [title]
    if len(nodes) > HEATMAP_MIN_NODES:
        parts.append(_heatmap(nodes, selection.resources))
    if selection.busiest:
        what = ", ".join(selection.resources)
        parts.append(f"<h3>Busiest {len(selection.rows)} nodes (highest of {esc(what)})</h3>")
    parts.append(_node_rows(selection, placed))
    if selection.busiest:
        parts.append(
            f'<p class="note">{selection.left_out} of {selection.total} nodes left out of the bars '
            "(<code>--nodes 0</code> draws every node).</p>"
        )
    return "\n".join(parts)


def _detail(use: Use) -> str:
    return use.amounts(" / ")


def _bar(use: Use) -> str:
    fraction = use.fraction or 0.0
    level = "hot" if fraction >= 0.9 else "warn" if fraction >= 0.7 else ""
    width = min(100.0, 100 * fraction)
    return (
        f'<span class="use"><span class="pct">{esc(use.percent)}</span>'
        f'<span class="bar {level}"><span style="width:{width:.1f}%"></span></span>'
        f'<span class="detail">{esc(_detail(use))}</span></span>'
    )


def _placed(report: Report) -> Counter[str]:
    """Pending pods this run bound, per node."""
    return Counter(h.node for h in (report.history[p.key] for p in report.pending) if h.node is not None)


def _node_rows(selection: NodeSelection, placed: Mapping[str, int]) -> str:
    heads = "".join(f"<th>{esc(_HEADINGS.get(r, r))}</th>" for r in selection.resources)
    rows = ["<table>", f'<tr><th>Node</th>{heads}<th class="num">Placed by this run</th></tr>']
    for info, node_uses in selection.rows:
        cordoned = ' <span class="cordoned">cordoned</span>' if info.unschedulable else ""
        count = placed.get(info.name, 0)
        bars = "".join(
            f"<td>{_bar(use)}</td>"
            if use.total or use.resource in _HEADINGS
            else '<td><span class="muted">-</span></td>'
            for use in node_uses
        )
        rows.append(
            f"<tr><td><code>{esc(info.name)}</code>{cordoned}</td>{bars}"
            f'<td class="num">{f"+{count}" if count else ""}</td></tr>'
        )
    rows.append("</table>")
    return "\n".join(rows)


def heat_colour(level: int) -> str:
    """The colour of heatmap step ``level`` (0..HEAT_LEVELS - 1), interpolated between the stops."""
    x = level / (HEAT_LEVELS - 1)
    for (x0, c0), (x1, c1) in zip(_HEAT_STOPS, _HEAT_STOPS[1:], strict=False):
        if x <= x1:
            t = (x - x0) / (x1 - x0)
            return "#" + "".join(f"{round(a + (b - a) * t):02x}" for a, b in zip(c0, c1, strict=True))
    return "#" + "".join(f"{c:02x}" for c in _HEAT_STOPS[-1][1])


def heat_css() -> str:
    """The heatmap's colour steps, ``.h0`` .. ``.h9``, and ``.hn`` for nothing allocatable."""
    steps = "".join(f".h{i} {{ background: {heat_colour(i)}; }}\n" for i in range(HEAT_LEVELS))
    return f"{steps}.hn {{ background: #cbd2d9; }}\n"


def _heat_class(use: Use) -> str:
    fraction = use.fraction
    if fraction is None:
        return "hn"
    return f"h{min(HEAT_LEVELS - 1, int(fraction * HEAT_LEVELS))}"


def _heatmap(nodes: Sequence[NodeInfo], resources: Sequence[str]) -> str:
    measured = [(info, uses(info, resources)) for info in nodes]
    parts = [
        f'<p class="muted">{len(nodes)} nodes, one cell each in cluster order; hover a cell for the node and its '
        "figures.</p>",
    ]
    for index, resource in enumerate(resources):
        cells = "".join(
            f'<i class="{_heat_class(u[index])}" title="{esc(info.name)}: {esc(u[index].percent)} '
            f'({esc(_detail(u[index]))})"></i>'
            for info, u in measured
        )
        parts.append(f'<div class="heat"><h3>{esc(resource)}</h3><div class="grid">{cells}</div>{_legend()}</div>')
    return "\n".join(parts)


def _legend() -> str:
    steps = "".join(f'<i class="h{i}"></i>' for i in range(HEAT_LEVELS))
    return f'<div class="legend"><span>0%</span>{steps}<span>100%</span><i class="hn"></i><span>none</span></div>'
