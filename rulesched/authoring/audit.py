"""``rulesched audit CLUSTER...``: are the running pods still placed right under the current rules?

Every running pod of the cluster files is checked (:func:`rulesched.scheduler.audit.audit`): the
filters it now fails on its node, the best other node it fits with the weighted score gain, and
whether moving it would break a PodDisruptionBudget. Audit-mode (shadow) filters are listed
apart and never count as violations. Table, JSON or HTML; exit 0 when no pod violates, 1 when
some do (for CI), 2 on errors.
Next stage: none (the live audit, ``audit --live``, reuses the same findings).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from rulesched.errors import InputError
from rulesched.lang import load_rules, resolve_rules_path
from rulesched.scheduler.audit import audit, rechecker, report_json
from rulesched.scheduler.rebalance import EvictSettings, plan_evictions
from rulesched.simulate.html_page import badge, code_list, esc, page, provenance_table, stats
from rulesched.simulate.load import load_cluster


def add_audit_parser(sub: Any) -> None:
    p = sub.add_parser(
        "audit",
        help="check every running pod against the rules: violations, a better node, PDBs",
        description="Audit the running pods of cluster files against the rules. "
        "Exit 0: no violations; 1: some pod violates a filter on its node; 2: errors.",
    )
    p.add_argument("cluster", nargs="*", metavar="CLUSTER", help="kubectl get -o yaml|json output files or folders")
    p.add_argument("--live", action="store_true", help="audit the cluster the API server holds (--kubeconfig)")
    p.add_argument("--kubeconfig", metavar="FILE", help="with --live; default: the in-cluster service account")
    p.add_argument(
        "--evict",
        action="store_true",
        help="with --live: evict violating pods the rules place elsewhere (Eviction API; PDBs respected)",
    )
    p.add_argument("--min-gain", type=int, default=1, metavar="N", help="--evict: least score gain worth a move (1)")
    p.add_argument("--max-per-node", type=int, default=1, metavar="N", help="--evict: evictions per node (1)")
    p.add_argument("--max-per-namespace", type=int, default=5, metavar="N", help="--evict: per namespace (5)")
    p.add_argument("--max-per-run", type=int, default=10, metavar="N", help="--evict: per run (10)")
    p.add_argument(
        "--publish",
        action="store_true",
        help="with --live: write the findings as a wgpolicyk8s.io PolicyReport per namespace",
    )
    p.add_argument("--rules", action="append", metavar="PATH", help="rules (repeatable; default: the bundled default)")
    p.add_argument("--output", choices=("table", "json", "html"), default="table")
    p.add_argument("--scheduler-name", metavar="NAME", help="only audit pods naming this scheduler")


@dataclass(frozen=True)
class AuditSettings:
    cluster: tuple[str, ...]
    rules: tuple[str, ...] = ("default",)
    output: str = "table"
    scheduler_name: str | None = None
    live: bool = False
    kubeconfig: str | None = None
    publish: bool = False
    evict: EvictSettings | None = None  # with live: evict within these caps


def audit_command(args: Any) -> int:
    settings = AuditSettings(
        cluster=tuple(args.cluster),
        rules=tuple(args.rules or ("default",)),
        output=args.output,
        scheduler_name=args.scheduler_name,
        live=args.live,
        kubeconfig=args.kubeconfig,
        publish=args.publish,
        evict=EvictSettings(args.min_gain, args.max_per_node, args.max_per_namespace, args.max_per_run)
        if args.evict
        else None,
    )
    if settings.live == bool(settings.cluster):
        raise InputError("audit: give CLUSTER files, or --live (not both)")
    if (settings.publish or settings.evict) and not settings.live:
        raise InputError("audit: --publish and --evict need --live")
    if settings.evict is not None and min(dataclasses.astuple(settings.evict)[1:]) < 0:
        raise InputError("audit: the --max-per-* caps must be 0 or more")
    answer = audit_live(settings) if settings.live else audit_files(settings)
    if settings.output == "json":
        print(json.dumps(answer, indent=2))
    elif settings.output == "html":
        print(render_html(answer))
    else:
        print(render_table(answer))
    return 1 if answer["summary"]["violating"] else 0


def audit_files(settings: AuditSettings) -> dict[str, Any]:
    objects = load_cluster(settings.cluster, skip_missing_nodes=True)
    store = objects.store()
    rules = load_rules([resolve_rules_path(r) for r in settings.rules])
    answer = report_json(audit(store.snapshot(), rules, scheduler_name=settings.scheduler_name))
    answer["summary"]["rules"] = [str(f) for f in rules.files]
    answer["summary"]["inputs"] = list(settings.cluster)
    return answer


def audit_live(settings: AuditSettings) -> dict[str, Any]:
    """The cluster the API server holds (listed once), audited; PolicyReports with ``publish``."""
    from rulesched.kube.api import KubeApi
    from rulesched.run.audit import audited_per_namespace, evict, policy_reports, publish_reports, read_cluster

    rules = load_rules([resolve_rules_path(r) for r in settings.rules])
    api = KubeApi(settings.kubeconfig)
    try:
        snapshot = read_cluster(api)
        report = audit(snapshot, rules, scheduler_name=settings.scheduler_name)
        answer = report_json(report)
        if settings.publish:
            audited = audited_per_namespace(snapshot, settings.scheduler_name)
            answer["summary"]["policy_reports"] = publish_reports(api, policy_reports(report, audited, time.time()))
        if settings.evict is not None:
            recheck = rechecker(snapshot, rules)  # (a second eviction from a node: still needed?)
            planned, skipped = plan_evictions(report, list(snapshot.pods()), snapshot.pdbs, settings.evict, recheck)
            answer["evictions"] = [
                {
                    "pod": e.pod,
                    "node": e.node,
                    "best": e.best,
                    "gain": e.gain,
                    "rules": list(e.rules),
                    "outcome": outcome,
                }
                for e, outcome in evict(api, planned)
            ]
            answer["not_evicted"] = [{"pod": s.pod, "why": s.why} for s in skipped]
    finally:
        api.close()
    answer["summary"]["rules"] = [str(f) for f in rules.files]
    return answer


def _reasons(items: list[dict[str, Any]]) -> str:
    return "; ".join(f"{v['rule']} ({', '.join(v['reasons']) or 'no reason given'})" for v in items)


def _move(p: dict[str, Any]) -> str:
    if p["best"] is None:
        return "fits no other node"
    move = f"best other node {p['best']} (score {p['gain']:+d})"
    return move + (f"; moving it would break PDB {p['pdb']}" if p["pdb"] else "")


def render_table(a: dict[str, Any]) -> str:
    s = a["summary"]
    lines = []
    for p in a["pods"]:
        if p["violations"]:
            lines.append(f"{p['pod']} on {p['node']}: violates {_reasons(p['violations'])}")
            lines.append(f"  {_move(p)}")
        if p["shadow"]:
            lines.append(f"{p['pod']} on {p['node']}: audit-mode rules would reject: {_reasons(p['shadow'])}")
    for e in a.get("evictions", []):
        lines.append(
            f"evict {e['pod']} from {e['node']} (the rules place it on {e['best']}, {e['gain']:+d}): {e['outcome']}"
        )
    for n in a.get("not_evicted", []):
        lines.append(f"not evicted {n['pod']}: {n['why']}")
    lines.append(
        f"{s['audited']} pods audited, {s['violating']} violating ({s['movable']} could move, "
        f"{s['blocked_by_pdb']} held by a PDB), {s['shadow']} rejected by audit-mode rules, in {s['seconds']:.3f}s"
    )
    return "\n".join(lines)


def render_html(a: dict[str, Any]) -> str:
    s = a["summary"]
    rows = ""
    for p in a["pods"]:
        state = badge("violates", "bad") if p["violations"] else badge("audit-mode only", "warn")
        pdb = badge(f"PDB {p['pdb']}", "bad") if p["pdb"] else ""
        best = "—" if p["best"] is None else f"<code>{esc(p['best'])}</code> ({p['gain']:+d})"
        rows += (
            f"<tr><td><code>{esc(p['pod'])}</code></td><td><code>{esc(p['node'])}</code></td><td>{state}</td>"
            f"<td>{esc(_reasons(p['violations']))}</td><td>{esc(_reasons(p['shadow']))}</td><td>{best} {pdb}</td></tr>"
        )
    body = [
        "<h1>rulesched audit</h1>",
        stats(
            [
                ("audited", s["audited"], ""),
                ("violating", s["violating"], "bad" if s["violating"] else "ok"),
                ("could move", s["movable"], ""),
                ("held by a PDB", s["blocked_by_pdb"], "warn" if s["blocked_by_pdb"] else ""),
                ("audit-mode rejections", s["shadow"], "warn" if s["shadow"] else ""),
            ]
        ),
        provenance_table(
            [
                ("rules digest", f"<code>{esc(s['rules_digest'])}</code>"),
                ("rule files", code_list(s.get("rules", []))),
                ("cluster files", code_list(s.get("inputs", ["(live)"]))),
            ]
        ),
    ]
    if rows:
        body.append(
            "<h2>Pods</h2><table><tr><th>pod</th><th>node</th><th>state</th><th>violated filters</th>"
            f"<th>audit-mode filters</th><th>best other node (gain)</th></tr>{rows}</table>"
        )
    else:
        body.append('<p class="note">Every running pod passes every filter on its node.</p>')
    return page("rulesched audit", "\n".join(body))
