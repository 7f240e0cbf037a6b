"""``rulesched explain --output html``: the explanation as one self-contained page, in the style of
``simulate``'s and ``diff``'s (:mod:`rulesched.simulate.html_page`): the verdict, filtered nodes
grouped by reason, the nearest nodes with every failing filter and its blame, single-rule
blockers and shortfalls, the best nodes' scores, and preemption.
"""

from __future__ import annotations

from typing import Any

from rulesched.simulate.html_page import badge, code_list, esc, page, provenance_table, stats

_CSS = """
td.blame code { white-space: pre-wrap; }
"""


def render_html(a: dict[str, Any]) -> str:
    fits = a["feasible"] > 0
    parts = [
        f"<h1>Why {esc(a['pod'])} {'fits' if fits else 'is pending'}</h1>",
        f'<p class="lead">{badge("fits" if fits else "unschedulable", "ok" if fits else "bad")} {esc(a["message"])}</p>',
        stats(
            [
                ("nodes", a["nodes"], ""),
                ("fit", a["feasible"], "ok" if fits else "bad"),
                ("filtered", a["nodes"] - a["feasible"], "warn" if a["nodes"] > a["feasible"] else ""),
            ]
        ),
        provenance_table(
            [
                ("rules digest", f"<code>{esc(a['rules_digest'])}</code>"),
                ("rule files", code_list(a.get("rules", []))),
                ("cluster files", code_list(a.get("inputs", ["(live snapshot)"]))),
                ("filters not applied", code_list(a["filters_not_applied"])),
            ]
        ),
    ]
    if a["reasons"]:
        rows = "".join(
            f"<tr><td><code>{esc(g['rule'])}</code></td><td>{esc(g['reason'])}</td><td class=num>{g['nodes']}</td>"
            f"<td class=num>{g['unresolvable']}</td><td>{esc(', '.join(g['names']))}"
            f"{_more(g)}</td></tr>"
            for g in a["reasons"]
        )
        parts.append(
            "<h2>Filtered nodes by reason</h2><table><tr><th>filter</th><th>reason</th><th class=num>nodes</th>"
            f"<th class=num>unresolvable</th><th>first nodes</th></tr>{rows}</table>"
        )
    if a["detailed"]:
        rows = ""
        for d in a["detailed"]:
            for i, f in enumerate(d["failures"]):
                blame = "<br>".join(
                    f"<code>{esc(b['expression'])}</code> <span class=muted>at {esc(b['at'])}</span>"
                    for b in f["blame"]
                )
                kind = badge("unresolvable", "bad") if f["unresolvable"] else badge("preemption may help", "warn")
                node = f"<code>{esc(d['node'])}</code>" if i == 0 else ""
                rows += (
                    f"<tr><td>{node}</td><td><code>{esc(f['rule'])}</code> {kind}</td>"
                    f"<td>{esc('; '.join(f['reasons']))}</td><td class=blame>{blame}</td></tr>"
                )
        parts.append(
            "<h2>Nearest nodes: every failing filter</h2><table><tr><th>node</th><th>filter</th><th>reasons</th>"
            f"<th>failing expression</th></tr>{rows}</table>"
        )
    if a["blockers"] or a["shortfalls"]:
        items = [
            f"<li><code>{esc(b['rule'])}</code> alone keeps out {b['nodes']} node(s): {esc(', '.join(b['names']))}</li>"
            for b in a["blockers"]
        ]
        items += [
            "<li>needs "
            + esc(", ".join(f"{amount} more {resource}" for resource, amount in s["needs"].items()))
            + f" on <code>{esc(s['node'])}</code></li>"
            for s in a["shortfalls"]
        ]
        parts.append(f"<h2>What would change it</h2><ul class=reasons>{''.join(items)}</ul>")
    best = a["scores"]["best"]
    if best:
        rules = a["scores"]["rules"]
        head = "".join(f"<th class=num><code>{esc(r['rule'])}</code> ×{r['weight']}</th>" for r in rules)
        rows = "".join(
            f"<tr><td><code>{esc(s['node'])}</code></td>"
            + "".join(f"<td class=num>{v}</td>" for v in s["values"])
            + f"<td class=num><b>{s['total']}</b></td></tr>"
            for s in best
        )
        parts.append(f"<h2>Best nodes</h2><table><tr><th>node</th>{head}<th class=num>total</th></tr>{rows}</table>")
        parts.extend(_terms_html(best))
    shadow = a.get("shadow") or {}
    if shadow.get("rules"):
        shadow_items = "".join(
            f"<li><code>{esc(g['rule'])}</code> would reject {g['nodes']} node(s): {esc(g['reason'])}</li>"
            for g in shadow["reasons"]
        )
        left = shadow["feasible"]
        tail = (
            f"<p>Enforced, they would leave {left} of the {a['feasible']} fitting node(s).</p>"
            if left is not None
            else ""
        )
        parts.append(
            f"<h2>Audit-mode filters {badge('never enforced', 'info')}</h2><ul class=reasons>{shadow_items}</ul>{tail}"
        )
    p = a["preemption"]
    state = (
        badge("helps", "ok")
        if p["helps"]
        else badge("does not help", "bad")
        if p["tried"]
        else badge("not tried", "none")
    )
    victims = f"<p>victims: {esc(', '.join(p['victims']))}</p>" if p["victims"] else ""
    parts.append(f"<h2>Preemption</h2><p>{state} {esc(p['why'])}</p>{victims}")
    return page(f"rulesched explain {a['pod']}", "\n".join(parts), _CSS)


def _more(group: dict[str, Any]) -> str:
    left = group["nodes"] - len(group["names"])
    return f" (+{left} more)" if left > 0 else ""


def _terms_html(best: list[dict[str, Any]]) -> list[str]:
    """The score terms (the lets a score read) on the best nodes that have them: a row per let."""
    shown = [s for s in best if s.get("terms")]
    if not shown:
        return []
    head = "".join(f"<th><code>{esc(s['node'])}</code></th>" for s in shown)
    rows = []
    for rule in dict.fromkeys(rule for s in shown for rule in s["terms"]):
        rows.append(f"<tr><td colspan={len(shown) + 1}><code>{esc(rule)}</code></td></tr>")
        for name in dict.fromkeys(t["let"] for s in shown for t in s["terms"].get(rule, ())):
            cells = "".join(
                f"<td class=num>{esc(next((t['value'] for t in s['terms'].get(rule, ()) if t['let'] == name), '-'))}</td>"
                for s in shown
            )
            rows.append(f"<tr><td>&nbsp;&nbsp;<code>{esc(name)}</code></td>{cells}</tr>")
    return [f"<h2>Score terms</h2><table><tr><th>let</th>{head}</tr>{''.join(rows)}</table>"]
