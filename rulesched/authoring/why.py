"""``rulesched explain NS/POD``: why a pod is pending, or where it would go, and why.

Offline, against cluster files (``--cluster FILES``), for a pod in them or one not yet submitted
(``-f pod.yaml``); live, by asking a running scheduler's or extender's ops port
(``--server URL``: ``GET /debug/explain?pod=NS/NAME``, or ``POST`` of the pod's JSON), which
evaluates it on its current snapshot and rules. Both give the same JSON
(:func:`rulesched.scheduler.why.explanation_json`); this module renders it as a table or an HTML
page (:mod:`rulesched.authoring.why_html`). A pod already bound is explained as if it were not:
left out of the cluster, its node's room freed.
Exit 0 when the pod fits some node, 1 when none, 2 on errors.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulesched.authoring.subjects import subject
from rulesched.errors import ConfigError, InputError
from rulesched.lang import load_rules, resolve_rules_path
from rulesched.model import Pod
from rulesched.model.groups import group_key
from rulesched.scheduler.fixes import fixes_json
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.scheduler.group_fixes import explain_group, group_json
from rulesched.scheduler.why import WhySettings, explain_pod, explanation_json, fix_pod
from rulesched.simulate.documents import read_file
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import ClusterObjects, load_cluster

ENDPOINT = "/debug/explain"
# (a group with its fixes on thousands of nodes takes seconds: bench_explain --live; the search
# itself is bounded by its static budget)
TIMEOUT_SECONDS = 60.0


def add_explain_parser(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a pod is pending (or where it would go): every node's failing filters, blame, scores",
        description="Explain one pod against cluster files (--cluster) or a running scheduler (--server). "
        "Exit 0: some node fits; 1: none does; 2: errors.",
    )
    p.add_argument(
        "pod",
        nargs="?",
        metavar="NS/POD",
        help="the pod (namespace/name; a bare name is in default), or KIND/NS/NAME: the pending pods of a "
        "podgroup, job, jobset, deployment, replicaset or statefulset, explained as a group",
    )
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        metavar="FILE",
        help="objects not yet created, as YAML or JSON (repeatable): Pods, PodGroups, and Jobs, JobSets, Deployments, "
        "ReplicaSets, StatefulSets as the pods their controllers would create; more than one pod is a group",
    )
    p.add_argument("--cluster", nargs="+", metavar="FILE", help="kubectl get -o yaml|json output files or folders")
    p.add_argument("--server", metavar="URL", help="a running `rulesched run` or `extender` ops URL (http://host:port)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a `rulesched run --config` file: ask the scheduler on its metrics_bind_address (this host)",
    )
    p.add_argument("--rules", action="append", metavar="PATH", help="rules (offline; default: the bundled default)")
    p.add_argument("--output", choices=("table", "json", "html"), default="table")
    p.add_argument("--node", action="append", default=[], metavar="NAME", help="always detail this node (repeatable)")
    p.add_argument("--details", type=int, default=10, metavar="N", help="filtered nodes detailed with blame (10)")
    p.add_argument(
        "--no-fixes",
        dest="fixes",
        action="store_false",
        help="skip the search for the smallest changes that would let it schedule (each checked by a trial)",
    )


@dataclass(frozen=True)
class ExplainSettings:
    pod: str | None
    filenames: tuple[str, ...] = ()
    cluster: tuple[str, ...] = ()
    server: str | None = None
    rules: tuple[str, ...] = ("default",)
    output: str = "table"
    nodes: tuple[str, ...] = ()
    details: int = 10
    fixes: bool = True


def explain_command(args: Any) -> int:
    server = args.server
    if server is None and args.config:
        server = server_from_config(args.config)
    settings = ExplainSettings(
        pod=args.pod,
        filenames=tuple(args.filename or ()),
        cluster=tuple(args.cluster or ()),
        server=server,
        rules=tuple(args.rules or ("default",)),
        output=args.output,
        nodes=tuple(args.node),
        details=args.details,
        fixes=args.fixes,
    )
    answer = explain(settings)
    if settings.output == "json":
        print(json.dumps(answer, indent=2))
    elif settings.output == "html":
        from rulesched.authoring.why_html import render_html

        print(render_html(answer))
    else:
        print(render_table(answer))
    return 0 if answer["feasible"] else 1


def server_from_config(path: str) -> str:
    """The ops URL of the scheduler a ``run --config`` file starts, as seen from this host."""
    from rulesched.config import read_config
    from rulesched.run.settings import RunSettings

    address = read_config(path, RunSettings).get("metrics_bind_address", "0.0.0.0:10251")
    if not address:
        raise InputError(f"{path}: metrics_bind_address is off: no endpoint to ask")
    host, _, port = str(address).rpartition(":")
    return f"http://{'127.0.0.1' if host in ('', '0.0.0.0', '::') else host}:{port}"


def explain(settings: ExplainSettings) -> dict[str, Any]:
    if settings.pod is None and not settings.filenames:
        raise InputError("explain: name a pod (NS/POD, or KIND/NS/NAME) or give objects with -f FILE")
    if settings.server:
        return ask_server(settings)
    if not settings.cluster:
        raise InputError("explain: give --cluster FILES (offline) or --server URL (a running scheduler)")
    objects = load_cluster(settings.cluster, skip_missing_nodes=True)
    asked = subject(settings.pod, settings.filenames, objects)
    pod = asked.pods[0]
    keys = {p.key for p in asked.pods}
    running = tuple(p for p in objects.running_pods if p.key not in keys)
    store = objects.store(running=running)
    rules = load_rules([resolve_rules_path(r) for r in settings.rules])
    why = WhySettings(detailed=settings.details, nodes=settings.nodes)
    explained = explain_pod(pod, store.snapshot(), rules, why)
    answer = explanation_json(explained)
    classes = tuple(objects.priority_classes.values())
    if asked.group:
        group = explain_group(
            asked.pods,
            asked.groups,
            store,
            rules,
            asked.name,
            classes,
            fixes=settings.fixes,
            other_pending=objects.pending_pods,
        )
        answer["group_explanation"] = group_json(group)
        answer["group_explanation"]["created"] = list(asked.created)
    elif settings.fixes and not explained.feasible:
        found = fix_pod(pod, explained, store, rules, classes, other_pending=objects.pending_pods)
        answer["fixes"] = fixes_json(found)
    if not settings.filenames:
        attempt = _group_attempt(pod, objects, running, rules)
        if attempt is not None:
            answer["group"] = attempt
    answer["rules"] = [str(f) for f in rules.files]
    answer["inputs"] = list(settings.cluster)
    return answer


def _group_attempt(pod: Pod, objects: ClusterObjects, running: tuple[Pod, ...], rules: Any) -> dict[str, Any] | None:
    """For a member of a workload API group: its group's attempt, as the scheduler would make
    it now (a simulation of the group's tree and its pending members alone, on a copy of the
    cluster): how many members fit, the domains tried, what stopped it."""
    key = group_key(pod)
    if key is None or not pod.scheduling_group:
        return None
    known = {g.key: g for g in objects.groups}
    if key not in known:
        return {
            "group": f"{pod.namespace}/{pod.scheduling_group}",
            "outcome": "its PodGroup is not in the files: the pod waits for it",
        }
    simulation = Simulation(rules, objects.store(running=running), SchedulerSettings(percentage_of_nodes_to_score=100))
    for group in objects.groups:
        if group.native:
            simulation.add_group(group)
    for member in objects.pending_pods:
        if member.scheduling_group and member.namespace == pod.namespace:
            simulation.add(member)
    if pod.key not in {m.key for m in objects.pending_pods}:
        simulation.add(pod)
    simulation.run()
    last = simulation.history[pod.key].last
    if last is None or last.group_detail is None:
        message = last.message if last is not None else "not attempted"
        return {"group": f"{pod.namespace}/{pod.scheduling_group}", "outcome": message}
    detail = last.group_detail.json()
    detail["node"] = simulation.history[pod.key].node
    return detail


def _key(text: str) -> str:
    return text if "/" in text else f"default/{text}"


def ask_server(settings: ExplainSettings) -> dict[str, Any]:
    """The running scheduler's answer (its ops endpoint; see rulesched.run.ops)."""
    import urllib.error  # (here: http.client and ssl cost every command ~0.05 CPU s to import)
    import urllib.parse
    import urllib.request

    assert settings.server is not None
    base = settings.server.rstrip("/")
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):  # (127.0.0.1:10251 reads as scheme "127.0.0.1")
        hint = "" if "://" in base else f" (did you mean http://{base}?)"
        raise ConfigError(f"--server {settings.server}: expected a URL with http:// or https://{hint}")
    query: dict[str, str] = {"details": str(settings.details)}
    if not settings.fixes:
        query["fixes"] = "0"
    for node in settings.nodes:
        query.setdefault("node", node)
    data: bytes | None = None
    if settings.filenames:  # (one Pod as it is; anything more as a List the endpoint expands)
        found = [(kind, obj) for f in settings.filenames for _, kind, obj in read_file(Path(f), f)]
        if len(found) == 1 and found[0][0] == "Pod":
            data = json.dumps(found[0][1]).encode()
        else:
            data = json.dumps({"apiVersion": "v1", "kind": "List", "items": [o for _, o in found]}).encode()
    else:
        assert settings.pod is not None
        query["pod"] = _key(settings.pod)
    url = f"{base}{ENDPOINT}?{urllib.parse.urlencode(query)}"
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    request.add_header("Accept", "application/json")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310 - a URL the user gave
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as error:
        detail = error.read().decode("utf-8", "replace").strip()[:300]
        raise InputError(f"{url}: {error.code} {detail}") from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise InputError(f"{url}: {getattr(error, 'reason', error)}") from None
    return answer


# --- table -----------------------------------------------------------------------------------------


def render_table(a: dict[str, Any]) -> str:
    lines = [f"pod {a['pod']}: {a['message']}", f"  rules {a['rules_digest']}, {a['nodes']} nodes, {a['feasible']} fit"]
    if a.get("group_explanation") is not None:  # (the group's own part is at the end)
        lines.insert(0, f"{a['group_explanation']['group']}: one member on its own first, then the group")
    if a["filters_not_applied"]:
        lines.append(f"  filters not applied (their `when` is false): {', '.join(a['filters_not_applied'])}")
    if a["reasons"]:
        lines += ["", "Filtered nodes by reason (every failing filter counted):"]
        for g in a["reasons"]:
            names = ", ".join(g["names"]) + (
                f" (+{g['nodes'] - len(g['names'])} more)" if g["nodes"] > len(g["names"]) else ""
            )
            unres = f", {g['unresolvable']} unresolvable" if g["unresolvable"] else ""
            lines.append(f"  {g['rule']}: {g['reason']}{_code_text(g)}: {g['nodes']} node(s){unres}: {names}")
    if a["detailed"]:
        lines += ["", "Nearest nodes, every failing filter:"]
        for d in a["detailed"]:
            lines.append(f"  {d['node']}")
            for f in d["failures"]:
                mark = " [unresolvable]" if f["unresolvable"] else ""
                lines.append(f"    {f['rule']}{mark}: {'; '.join(f['reasons']) or '(no reason given)'}")
                for b in f["blame"]:
                    lines.append(f"      {b['expression']}   at {b['at']}")
                if f.get("values"):
                    lines.append(f"      where {', '.join(f['values'])}")
    if a["blockers"]:
        lines += ["", "Single-rule blockers (nodes that would fit without that one rule):"]
        for b in a["blockers"]:
            lines.append(f"  {b['rule']}: {b['nodes']} node(s): {', '.join(b['names'])}")
    if a["shortfalls"]:
        lines += ["", "Shortfall on the nearest nodes:"]
        for s in a["shortfalls"]:
            needs = ", ".join(f"{amount} more {resource}" for resource, amount in s["needs"].items())
            lines.append(f"  needs {needs} on {s['node']}")
    best = a["scores"]["best"]
    if best:
        rules = [r["rule"] for r in a["scores"]["rules"]]
        header = ["node", *(f"{r['rule']}x{r['weight']}" for r in a["scores"]["rules"]), "total"]
        rows = [[s["node"], *(str(v) for v in s["values"]), str(s["total"])] for s in best]
        if not rules:
            header, rows = ["node"], [[s["node"]] for s in best]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines += ["", "Best nodes (normalised score per rule, weighted total):"]
        for row in [header, *rows]:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        lines += term_lines(best)
    shadow = a.get("shadow") or {}
    if shadow.get("rules"):
        lines += ["", f"Audit-mode filters ({', '.join(shadow['rules'])}; never enforced):"]
        for g in shadow["reasons"]:
            lines.append(f"  would reject {g['nodes']} node(s): {g['rule']}: {g['reason']}: {', '.join(g['names'])}")
        if shadow["feasible"] is not None:
            lines.append(f"  enforced, they would leave {shadow['feasible']} of the {a['feasible']} fitting node(s)")
    p = a["preemption"]
    lines += [
        "",
        f"Preemption: {'helps' if p['helps'] else 'does not help' if p['tried'] else 'not tried'}: {p['why']}",
    ]
    group = a.get("group")
    if group:
        lines += ["", *_group_lines(group)]
    if p["victims"]:
        lines.append(f"  victims: {', '.join(p['victims'])}")
    if a.get("fixes") is not None:
        lines += ["", *fix_lines(a["fixes"])]
    if a.get("group_explanation") is not None:
        lines += ["", *group_explanation_lines(a["group_explanation"])]
    return "\n".join(lines)


def term_lines(best: list[dict[str, Any]]) -> list[str]:
    """The lets each score built from them read, on the best nodes that have them: a row per
    let under its rule, a column per node (as the score table above)."""
    shown = [s for s in best if s.get("terms")]
    if not shown:
        return []
    rules = list(dict.fromkeys(rule for s in shown for rule in s["terms"]))
    table = [["", *(s["node"] for s in shown)]]
    for rule in rules:
        lets = list(dict.fromkeys(t["let"] for s in shown for t in s["terms"].get(rule, ())))
        table.append([rule, *([""] * len(shown))])
        for name in lets:
            values = [next((t["value"] for t in s["terms"].get(rule, ()) if t["let"] == name), "-") for s in shown]
            table.append([f"  {name}", *values])
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = ["", f"Score terms (the lets each score read, on the best {len(shown)} node(s) scoring differently):"]
    for row in table:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return lines


def group_explanation_lines(g: dict[str, Any]) -> list[str]:
    """A group's trial: how many members fit and where, the closest domain, what the rest lack;
    then its fixes."""
    lines = [f"made from {', '.join(g['created'])}:"] if g.get("created") else []
    verdict = "fits" if g["placed"] else f"does not fit: {g['message']}" if g["message"] else "does not fit"
    head = (
        f"{g['group']} ({g['policy']}): {g['fit']} of {len(g['members'])} pending members fit, "
        f"{g['needed']} needed, {g['before']} already placed; {verdict}"
    )
    lines.append(head)
    if g["where"]:
        lines.append("  where they fit: " + ", ".join(f"{node} {n}" for node, n in list(g["where"].items())[:10]))
    for d in g["domains"]:
        where = ", ".join(f"{k}={v}" for k, v in d["domain"].items())
        lines.append(f"  tried {where}: {d['placed']} fit" + (f" ({d['message']})" if d["message"] else ""))
    closest = g.get("closest")
    if closest is not None:
        where = ", ".join(f"{k}={v}" for k, v in closest["domain"].items())
        lacks = ", ".join(f"{q} more {r}" for r, q in closest["lacks"].items())
        lines.append(
            f"  closest: {where} ({closest['placed']} fit)" + (f"; it needs at least {lacks}" if lacks else "")
        )
    for pod, reasons in list(g["lacking"].items())[:3]:
        shown = "; ".join(
            f"{r['code']}"
            + (f" {r['resource'] or r['key']}" if r["resource"] or r["key"] else "")
            + (f" (nearest {r['nearest']} short {r['quantity']})" if r.get("quantity") and r.get("nearest") else "")
            + f" on {r['nodes']} node(s)"
            for r in reasons[:4]
        )
        lines.append(f"  {pod} lacks: {shown or 'no node was tried'}")
    if len(g["lacking"]) > 3:
        lines.append(f"  ... and {len(g['lacking']) - 3} more members without a place")
    if g["fixes"] is not None:
        lines += ["", *fix_lines(g["fixes"])]
    return lines


def fix_lines(f: dict[str, Any]) -> list[str]:
    """The fixes found, smallest first, each with its changes, commands and what its trial found."""
    checked = f["checked"]
    head = (
        f"What would make it fit (each checked by scheduling the changed cluster with rules {checked['rules']}, "
        f"{checked['nodes']} nodes, {checked['running_pods']} running pods; {f['trials']} trials, "
        f"{f['candidates']} candidates, {f['seconds']}s):"
    )
    lines = [head]
    if not f["fixes"]:
        lines.append("  none found" + (f" (left out: {', '.join(f['unfixable'])})" if f["unfixable"] else ""))
    for i, fix in enumerate(f["fixes"], 1):
        placed = ", ".join(f"{pod} on {node}" for pod, node in fix["checked"]["placed"].items())
        alike = f" (or the same on {fix['alike'] - 1} other node(s))" if fix.get("alike", 1) > 1 else ""
        lines.append(f"  {i}. [{fix['where']}, size {fix['size']:g}] {fix['summary']}{alike}")
        for command in fix["commands"]:
            lines.append(f"       $ {command}")
        evicted = fix["checked"]["evicted"]
        lines.append(f"       checked: {placed}" + (f"; its preemption evicts {', '.join(evicted)}" if evicted else ""))
        moves = fix.get("moves")
        if moves is not None:
            moved = ", ".join(
                f"{m['pod']} {m['old'] or 'pending'} -> {m['new'] or 'pending'}" for m in moves["pods"][:5]
            )
            lines.append(
                f"       diff: {len(moves['pods'])} of {moves['asked']} other pending pods move"
                + (f": {moved}" if moved else "")
            )
    if f["refuted"]:
        lines.append(f"  refuted by their trial: {len(f['refuted'])} candidate(s), e.g. {f['refuted'][0]['summary']}")
    return lines


def _code_text(g: dict[str, Any]) -> str:
    """`` [InsufficientResource cpu, nearest n3 short 500m]``: a reason group's code and parts."""
    if not g.get("code"):
        return ""
    parts = [g["code"]]
    if g.get("resource"):
        parts.append(g["resource"])
    elif g.get("key"):
        parts.append(f"{g['key']}={g['value']}" if g.get("value") else g["key"])
    text = " ".join(parts)
    if g.get("quantity") and g.get("nearest"):
        text += f", nearest {g['nearest']} short {g['quantity']}"
    return f" [{text}]"


def _group_lines(g: dict[str, Any]) -> list[str]:
    if "kind" not in g:
        return [f"Pod group {g['group']}: {g['outcome']}"]
    verdict = f"placed, this pod on {g['node']}" if g["placed"] else f"not placed: {g['outcome']}"
    lines = [
        f"Pod group {g['group']} ({g['kind']}, {g['policy']}): {g['fit']} of {g['members']} pending members fit, "
        f"{g['before']} already placed; {verdict}"
    ]
    if g["domain"]:
        lines.append("  domain chosen: " + ", ".join(f"{k}={v}" for k, v in g["domain"].items()))
    for t in g["trials"]:
        where = ", ".join(f"{k}={v}" for k, v in t["domain"].items())
        lines.append(f"  tried {t['group']} in {where}: {'fits' if t['fit'] else t['message']}")
    return lines


def write_json(answer: dict[str, Any]) -> None:
    json.dump(answer, sys.stdout, indent=2)
