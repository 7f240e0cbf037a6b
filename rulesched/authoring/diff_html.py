"""``rulesched diff --output html``: a rules change's effect as one self-contained page for its review.

The same content as the text and JSON outputs of :mod:`rulesched.authoring.diff`: the summary (the
counts, then each rule set's files, digest, outcome counts and scheduling time side by side), the
pods evicted under one set only, and every changed pod, old node against new, with the messages
and, for the explained ones, the rules that made the difference as
:mod:`rulesched.authoring.explain` finds them (filters whose verdict changed on a node, score rules
whose weighted pull changed, the totals). The page skeleton, styles and escaping are
:mod:`rulesched.simulate.html_page`'s: inline CSS, no script, no external reference.
"""

from __future__ import annotations

from collections.abc import Sequence

from rulesched.authoring.diff import MOVED, SCHEDULED, UNSCHEDULABLE, Diff, PodChange, Run, summary_line
from rulesched.authoring.explain import (
    ABSENT,
    APPLIES,
    NOT_APPLICABLE,
    Explanation,
    ScoreSide,
    Verdict,
    explanation_lines,
)
from rulesched.simulate.html_page import badge, esc, page, stats

_DIFF_CSS = """
.arrow { color: var(--muted); padding: 0 4px; white-space: pre; }
.gone { color: var(--bad); font-style: italic; }
.pos { color: var(--ok); font-weight: 600; } .neg { color: var(--bad); font-weight: 600; }
.verdict.fail { color: var(--bad); font-weight: 600; } .verdict.pass { color: var(--ok); }
.msg { margin: 2px 0; }
.msg b { color: var(--muted); font-weight: 600; font-size: 12px; text-transform: uppercase; margin-right: 4px; }
"""

_KINDS = {MOVED: "info", UNSCHEDULABLE: "bad", SCHEDULED: "ok"}


def render_html(result: Diff) -> str:
    """The whole page for one ``rulesched diff`` run."""
    body = [_summary(result), _changes(result)]
    return page(f"rulesched diff: {summary_line(result)}", "\n".join(body), _DIFF_CSS)


# --- summary ---------------------------------------------------------------------------------------


def _summary(result: Diff) -> str:
    moved, lost, gained = result.count(MOVED), result.count(UNSCHEDULABLE), result.count(SCHEDULED)
    evictions = len(result.evicted_only_old) + len(result.evicted_only_new)
    figures = stats(
        [
            ("pending pods", len(result.old.outcomes), ""),
            ("moved", moved, "warn" if moved else ""),
            ("newly unschedulable", lost, "bad" if lost else ""),
            ("newly scheduled", gained, "ok" if gained else ""),
            ("evictions differ", evictions, "warn" if evictions else ""),
        ]
    )
    verdict = badge("changes", "warn") if result.changed else badge("no change", "ok")
    parts = [
        "<header>",
        f"<h1>rulesched diff {verdict}</h1>",
        f'<p class="lead">{esc(summary_line(result))}</p>',
        figures,
        _sets(result.old, result.new),
    ]
    if result.rules:
        items = "".join(
            f"<li><code>{esc(r.kind)} {esc(r.name)}</code>: {esc(r.text.split(': ', 1)[1])}</li>" for r in result.rules
        )
        parts.append(f"<h3>Rules that differ</h3><ul class=reasons>{items}</ul>")
    else:
        parts.append('<p class="muted">No rule differs between the sets.</p>')
    if result.evicted_only_new or result.evicted_only_old:
        parts.append("<h3>Evictions that differ</h3>")
        parts.append(f"<p>Evicted only under <b>new</b>: {_keys(result.evicted_only_new)}</p>")
        parts.append(f"<p>Evicted only under <b>old</b>: {_keys(result.evicted_only_old)}</p>")
    if result.newly_violating:
        parts.append("<h3>Running pods the new rules would leave in violation</h3>")
        parts.append(f"<p>{_keys(result.newly_violating)} (<code>rulesched audit</code> says why)</p>")
    shadow = [
        (label, rule, n) for label, run in (("old", result.old), ("new", result.new)) for rule, n in run.shadow.items()
    ]
    if shadow:
        items = "".join(
            f"<li><code>{esc(rule)}</code> ({label}): would reject {n} placement(s)</li>" for label, rule, n in shadow
        )
        parts.append(f"<h3>Audit-mode filters</h3><ul class=reasons>{items}</ul>")
    parts.append("</header>")
    return "\n".join(parts)


def _keys(keys: Sequence[str]) -> str:
    return ", ".join(f"<code>{esc(k)}</code>" for k in keys) or '<span class="muted">none</span>'


def _sets(old: Run, new: Run) -> str:
    """The two rule sets side by side: files, digest and what each made of the pending pods."""
    a, b = old.summary(), new.summary()
    rows = [
        ("rules", _files(a["rules"]), _files(b["rules"])),
        ("digest", f"<code>{esc(a['digest'])}</code>", f"<code>{esc(b['digest'])}</code>"),
    ]
    for field in ("scheduled", "unschedulable", "evicted"):
        rows.append((field, esc(a[field]), esc(b[field])))
    rows.append(("scheduling time", f"{old.seconds:.3f}s", f"{new.seconds:.3f}s"))
    body = "".join(f"<tr><td>{esc(label)}</td><td>{x}</td><td>{y}</td></tr>" for label, x, y in rows)
    return f'<table class="sets"><tr><th></th><th>old (--old)</th><th>new (--new)</th></tr>{body}</table>'


def _files(files: object) -> str:
    names = files if isinstance(files, list) else [files]
    return "<br>".join(f"<code>{esc(name)}</code>" for name in names)


# --- changed pods ----------------------------------------------------------------------------------


def _node(name: str | None) -> str:
    return f"<code>{esc(name)}</code>" if name else '<span class="gone">none</span>'


def _changes(result: Diff) -> str:
    parts = [f"<h2>Pods whose placement changes ({len(result.changes)})</h2>"]
    if not result.changes:
        parts.append('<p class="note">No pending pod changes placement.</p>')
        return "\n".join(parts)
    parts.append("<table>")
    parts.append("<tr><th>Pod</th><th>Change</th><th>Node: old → new</th><th>Message</th></tr>")
    for index, change in enumerate(result.changes):
        parts.append(
            f'<tr id="pod-{index}"><td><code>{esc(change.pod)}</code></td><td>{badge(change.kind, _KINDS[change.kind])}'
            f'</td><td>{_node(change.old.node)}<span class="arrow"> → </span>{_node(change.new.node)}</td>'
            f"<td>{_messages(change)}</td></tr>"
        )
        parts.append(f'<tr class="why"><td colspan="4">{_why(change.why)}</td></tr>')
    parts.append("</table>")
    left_out = len(result.changes) - result.explained
    if left_out:
        parts.append(
            f'<p class="note">Rules named for the first {result.explained} changed pods only; {left_out} left out '
            "(<code>--explain-limit</code>).</p>"
        )
    return "\n".join(parts)


def _messages(change: PodChange) -> str:
    """The messages worth reading: the new failure, or the old one a pod no longer meets."""
    if change.kind == UNSCHEDULABLE:
        return f'<p class="msg"><b>new</b> {esc(change.new.message)}</p>'
    if change.kind == SCHEDULED:
        return f'<p class="msg"><b>was</b> {esc(change.old.message)}</p>'
    return '<span class="muted">-</span>'


def _why(why: Explanation | None) -> str:
    if why is None:
        return '<p class="note">Not explained (beyond <code>--explain-limit</code>).</p>'
    parts = []
    if why.filters:
        rows = "".join(
            f"<tr><td><code>{esc(f.rule)}</code></td><td><code>{esc(f.node)}</code></td>"
            f"<td>{_verdict(f.old)}</td><td>{_verdict(f.new)}</td></tr>"
            for f in why.filters
        )
        parts.append(
            "<div><h3>Filters whose verdict changed</h3><table><tr><th>Filter</th><th>Node</th><th>Old rules</th>"
            f"<th>New rules</th></tr>{rows}</table></div>"
        )
    if len(why.nodes) == 2 and (why.scores or why.totals is not None):
        parts.append(_scores(why))
    if why.empty:
        note = explanation_lines(why)[-1].strip()  # the "no rule differs ... : <cause>" line
        parts.append(f'<p class="note">{esc(note[:1].upper() + note[1:])}</p>')
    return f'<div class="panels">{"".join(parts)}</div>'


def _verdict(verdict: Verdict) -> str:
    reasons = f" ({esc('; '.join(verdict.reasons))})" if verdict.reasons else ""
    return f'<span class="verdict {esc(verdict.state)}">{esc(verdict.state)}</span>{reasons}'


def _weight(side: ScoreSide) -> str:
    if side.state == ABSENT:
        return '<span class="muted">absent</span>'
    if side.state == NOT_APPLICABLE:
        return f'{esc(side.weight)} <span class="muted">({NOT_APPLICABLE})</span>'
    return esc(side.weight)


def _signed(value: int) -> str:
    cls = "pos" if value > 0 else "neg" if value < 0 else "muted"
    return f'<span class="{cls}">{value:+d}</span>'


def _pair(side: ScoreSide, a: str, b: str) -> str:
    if side.state != APPLIES:
        return '<span class="muted">-</span>'
    return f"{esc(side.scores.get(a, '-'))} / {esc(side.scores.get(b, '-'))}"


def _scores(why: Explanation) -> str:
    a, b = why.nodes
    head = (
        f"<tr><th>Score rule</th><th>Weight old → new</th><th>Scores old (<code>{esc(a)}</code> / <code>{esc(b)}</code>)</th>"
        f'<th>Scores new</th><th class="num">Pull <code>{esc(b)}</code>−<code>{esc(a)}</code>: old</th><th class="num">new</th>'
        '<th class="num">change</th></tr>'
    )
    rows = []
    for s in why.scores:
        old_weight, new_weight = _weight(s.old), _weight(s.new)
        weight = old_weight if old_weight == new_weight else f"{old_weight} → {new_weight}"
        rows.append(
            f"<tr><td><code>{esc(s.rule)}</code></td><td>{weight}</td><td>{_pair(s.old, a, b)}</td>"
            f'<td>{_pair(s.new, a, b)}</td><td class="num">{_signed(s.old.difference)}</td>'
            f'<td class="num">{_signed(s.new.difference)}</td><td class="num">{_signed(s.change)}</td></tr>'
        )
    if why.totals is not None:
        old_total, new_total = why.totals
        rows.append(
            f'<tr><td colspan="4"><b>total</b> <span class="muted">(normalised over these two nodes)</span></td>'
            f'<td class="num">{_signed(old_total)}</td><td class="num">{_signed(new_total)}</td>'
            f'<td class="num">{_signed(new_total - old_total)}</td></tr>'
        )
    return f"<div><h3>Score rules whose pull changed</h3><table>{head}{''.join(rows)}</table></div>"
