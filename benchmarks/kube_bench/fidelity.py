"""fidelity: the same generated cluster under kube-scheduler (-v=10: every node's score) and under
rulesched, pods one at a time; each pod then replayed through rulesched on kube-scheduler's
state before it, so that a tie broken at random does not make every later pod differ."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen_cluster import generate

from tests.realk8s import Kube

from .cluster import NS, PodWatch, api_objects, build
from .processes import Rulesched, Scheduler, Upstream, testbed

FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod" pod="(?P<pod>[^"]+)" node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)
PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)


@dataclass
class Outcome:
    node: str | None
    victims: tuple[str, ...]
    unschedulable: bool
    seconds: float = 0.0  # from its creation until it settled (or the timeout)
    # the PodDisruptionBudgets as the API server had them just before the pod was created (their
    # status is the disruption controller's: which victims count as violating a budget)
    budgets: tuple[dict[str, Any], ...] = ()


def one_at_a_time(kube: Kube, watch: PodWatch, pending: list[dict[str, Any]], timeout: float) -> dict[str, Outcome]:
    """Create each pod once the previous one settled: bound (its victims gone first), or
    unschedulable and not nominated; its victims are the pods deleted meanwhile."""
    out = {}
    for pod in pending:
        name = pod["metadata"]["name"]
        with watch.lock:
            deleted_before = set(watch.seen.deleted)
        budgets = tuple(
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": b["metadata"]["name"],
             "namespace": NS}, "spec": b["spec"], "status": b.get("status", {})}
            for b in kube.items(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets")
        )  # fmt: skip
        kube.create(f"/api/v1/namespaces/{NS}/pods", pod)
        created = time.monotonic()
        end = created + timeout
        while time.monotonic() < end:
            with watch.lock:
                s = watch.seen
                if name in s.bound:
                    break
                quiet = time.monotonic() - s.last_change > 1.0
                if name in s.unschedulable and name not in s.nominated and quiet:
                    break
            time.sleep(0.02)
        with watch.lock:
            s = watch.seen
            victims = tuple(sorted(set(s.deleted) - deleted_before))
            node = s.bound[name][1] if name in s.bound else None
            out[name] = Outcome(node, victims, name not in s.bound, time.monotonic() - created, budgets)
    return out


def fidelity_run(
    objects: dict[str, list[dict[str, Any]]],
    which: str,
    preemption: bool,
    keep: Path | None = None,
    flags: tuple[str, ...] = (),
) -> tuple[dict[str, Outcome], dict[str, str], str]:
    """The pods' outcomes, the running pods' start times (preemption's last criterion reads
    them), and kube-scheduler's log; ``keep``: where to copy the scheduler's log; ``flags``:
    rulesched run's own."""
    with testbed() as kube, tempfile.TemporaryDirectory(prefix="bench-") as work:
        build(kube, objects, ready_pods=preemption)
        started = {
            p["metadata"]["name"]: p["status"]["startTime"]
            for p in kube.items(f"/api/v1/namespaces/{NS}/pods")
            if p.get("status", {}).get("startTime")
        }
        scheduler: Scheduler = (
            Upstream(kube, 100, 10) if which == "kube-scheduler" else Rulesched(kube, 100, Path(work), flags)
        )
        scheduler.start()
        try:
            watch = PodWatch(kube)
            watch.start()
            outcomes = one_at_a_time(kube, watch, objects["pending"], timeout=60)
            watch.stop()
        finally:
            scheduler.stop()
            if keep is not None:
                keep.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(scheduler.log, keep)
        log = ""
        if isinstance(scheduler, Upstream):
            log = scheduler.log.read_text(errors="replace")
    return outcomes, started, log


def scores_from_log(log: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, int]]]]:
    """kube-scheduler's -v=10 log: pod -> node -> final score; pod -> node -> plugin -> score
    (a pod's last cycle's, as a retried pod logs again)."""
    finals: dict[str, dict[str, int]] = {}
    plugins: dict[str, dict[str, dict[str, int]]] = {}
    for line in log.splitlines():
        if "final score" in line:
            m = FINAL_SCORE.search(line)
            if m:
                pod = m["pod"].split("/", 1)[-1]
                if m["node"] in finals.get(pod, {}):
                    finals[pod] = {}  # a new cycle of the same pod
                finals.setdefault(pod, {})[m["node"]] = int(m["score"])
        elif "Plugin scored node" in line:
            m = PLUGIN_SCORE.search(line)
            if m:
                pod = m["pod"].split("/", 1)[-1]
                plugins.setdefault(pod, {}).setdefault(m["node"], {})[m["plugin"]] = int(m["score"])
    return finals, plugins


def fidelity_case(
    case: str, nodes: int, pods: int, seed: int, logs: Path | None = None, flags: tuple[str, ...] = ()
) -> dict[str, Any]:
    kind = "preemption" if case == "preemption" else "mixed"
    running = nodes * (4 if kind == "preemption" else 2)
    cluster = generate(nodes, running, pods, kind, seed)
    results = {}
    settle: dict[str, dict[str, Any]] = {}  # per scheduler: the pods' settle times summed, the slowest
    log = ""
    start_times: dict[str, str] = {}
    for which in ("kube-scheduler", "rulesched"):
        objects = api_objects(json.loads(json.dumps(cluster)))
        t0 = time.monotonic()
        keep = logs / f"fidelity-{case}-{which}.log" if logs is not None else None
        outcomes, started, text = fidelity_run(objects, which, kind == "preemption", keep, flags)
        start_times = started if which == "kube-scheduler" else start_times
        results[which] = outcomes
        log = text or log
        slowest = max(outcomes, key=lambda n: outcomes[n].seconds, default="")
        settle[which] = {
            "seconds": round(sum(o.seconds for o in outcomes.values()), 1),
            "slowest": [slowest, round(outcomes[slowest].seconds, 1) if slowest else 0.0],
        }
        print(f"  fidelity {case}: {which} done in {time.monotonic() - t0:.0f} s (the pods settled in "
              f"{settle[which]['seconds']} s; slowest {slowest} {settle[which]['slowest'][1]} s)",
              file=sys.stderr, flush=True)  # fmt: skip
    finals, plugins = scores_from_log(log)
    ks, rs = results["kube-scheduler"], results["rulesched"]
    objects = api_objects(json.loads(json.dumps(cluster)))
    t0 = time.monotonic()
    replayed = replay_all(objects, ks, start_times)
    print(f"  fidelity {case}: {len(replayed)} pods replayed on kube-scheduler's states in {time.monotonic() - t0:.0f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    sequential = {"compared": 0, "agreed": 0}
    same_state = {"compared": 0, "agreed": 0, "ties_compared": 0, "ties_agreed": 0, "preemption_ties": 0}
    differences = []
    for name, upstream in ks.items():
        scores = finals.get(name, {})
        top = max(scores.values()) if scores else None
        tied = sorted(n for n, v in scores.items() if v == top) if scores else []
        unique = len(tied) <= 1
        mine = rs.get(name)
        if unique:
            sequential["compared"] += 1
            if mine is not None and mine.node == upstream.node and mine.victims == upstream.victims:
                sequential["agreed"] += 1
        replay = replayed.get(name, {})
        if "error" in replay:
            differences.append({"pod": name, "error": replay["error"]})
            continue
        if upstream.victims:  # a preemption: the same node nominated, the same victims
            ok = replay.get("nominated") == upstream.node and replay.get("victims") == list(upstream.victims)
        elif upstream.node is None:  # unschedulable, nothing to preempt
            ok = not replay.get("best") and not replay.get("nominated")
        elif unique:
            ok = replay.get("best") == [upstream.node]
        else:  # a tie: the same nodes tie for the best total
            same_state["ties_compared"] += 1
            ok = sorted(replay.get("best") or []) == tied
            same_state["ties_agreed"] += ok
        theirs, mine_victims = upstream.victims, replay.get("victims") or []
        if (
            not ok
            and upstream.victims
            and (
                preemption_tie(objects, theirs, mine_victims, start_times)
                or (
                    replay.get("nominated") == upstream.node
                    and reprieve_tie(objects, theirs, mine_victims, start_times)
                )
            )
        ):
            # kube-scheduler's own order cannot decide between these candidates (see preemption_tie)
            same_state["preemption_ties"] += 1
            continue
        if unique or upstream.victims or upstream.node is None:
            same_state["compared"] += 1
            same_state["agreed"] += ok
        if not ok:
            nodes_ = sorted({n for n in [upstream.node, *(replay.get("best") or [])] if n})
            differences.append({
                "pod": name,
                "kube_scheduler": {"node": upstream.node, "victims": list(upstream.victims), "tied": tied},
                "rulesched_on_the_same_state": {k: replay.get(k) for k in ("best", "nominated", "victims")},
                "kube_scheduler_scores": {n: {"total": scores.get(n), **plugins.get(name, {}).get(n, {})} for n in nodes_},
                "rulesched_scores": {n: (replay.get("scores") or {}).get(n) for n in nodes_},
            })  # fmt: skip
    return {
        "case": case, "nodes": nodes, "pods": pods, "seed": seed,
        "sequential": {**sequential, "agreement": rate(sequential["agreed"], sequential["compared"])},
        "same_state": {**same_state, "agreement": rate(same_state["agreed"], same_state["compared"]),
                       "tie_agreement": rate(same_state["ties_agreed"], same_state["ties_compared"])},
        "differences": differences,
        "unschedulable": {w: sum(1 for o in results[w].values() if o.unschedulable) for w in results},
        "preempted": {w: sum(len(o.victims) for o in results[w].values()) for w in results},
        "settle": settle,
    }  # fmt: skip


def preemption_tie(
    objects: dict[str, list[dict[str, Any]]], theirs: Any, mine: list[str], start_times: dict[str, str]
) -> bool:
    """Two victim sets kube-scheduler's pickOneNodeForPreemption cannot order (v1.37.2,
    framework/preemption/preemption.go): no budget covers any victim, the same highest victim
    priority, priority sum and count, and the same earliest start time among the highest-priority
    victims (util.GetEarliestPodStartTime). Start times are whole seconds in the API (metav1.Time
    drops the fraction), so victims started in the same second tie; a victim that never started
    (pods bound here never do) counts as time.Now(), taken anew for each candidate as it is
    scored, so two such sets tie too (the last one scored wins). The candidates left are taken in
    the order of a Go map's iteration, which is random. kube-scheduler's log does not show these
    ties (no score is logged for a preemption)."""
    pods, budgets = _by_name(objects), _budget_selectors(objects)

    def key(victims: Any) -> tuple[int, int, int, str] | None:
        found = [pods.get(v) for v in victims]
        if not found or any(p is None for p in found):
            return None
        if any(_budgeted(p, budgets) for p in found if p):
            return None
        priorities = [_priority(p) for p in found if p]
        highest = max(priorities)
        # RFC 3339 in UTC ("...Z") sorts as time does; "~" (after every digit) stands for now
        earliest = min(start_times.get(p["metadata"]["name"], "~") for p in found if p and _priority(p) == highest)
        return highest, sum(priorities), len(priorities), earliest

    a, b = key(theirs), key(mine)
    return a is not None and a == b


def reprieve_tie(
    objects: dict[str, list[dict[str, Any]]], theirs: Any, mine: list[str], start_times: dict[str, str]
) -> bool:
    """Two victim sets on the same node that differ only among pods kube-scheduler's
    SelectVictimsOnNode cannot order (v1.37.2, plugins/defaultpreemption/default_preemption.go):
    it reprieves the potential victims greedily, those violating a budget first, each group in
    util.MoreImportantPod's order (priority, then start time, whole seconds in the API; a pod
    never started counts as now) sorted by sort.Slice, which is not stable. Pods alike in both
    (the same priority and start time, and each selected by a budget or none of them) come out in
    any order, and which of them the greedy reprieve keeps is chance (fidelity Run 7's
    pending-55: three priority-1 pods started in the same second, each under a budget that
    allowed no disruption)."""
    differ = set(theirs) ^ set(mine)
    if not differ:
        return False
    pods, budgets = _by_name(objects), _budget_selectors(objects)
    keys = set()
    for name in differ:
        pod = pods.get(name)
        if pod is None:
            return False
        keys.add((_priority(pod), start_times.get(name, "~"), _budgeted(pod, budgets)))
    return len(keys) == 1


def _by_name(objects: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in objects["running"] + objects["pending"]}


def _budget_selectors(objects: dict[str, list[dict[str, Any]]]) -> list[dict[str, str]]:
    return [b["spec"]["selector"].get("matchLabels", {}) for b in objects["pdbs"]]


def _budgeted(pod: dict[str, Any], budgets: list[dict[str, str]]) -> bool:
    """Whether a budget's selector (matchLabels: the generated budgets') selects the pod."""
    labels = pod["metadata"].get("labels", {})
    return any(all(labels.get(k) == v for k, v in b.items()) for b in budgets)


def _priority(pod: dict[str, Any]) -> int:
    return int(pod["spec"].get("priorityClassName", "bench-priority-0").rsplit("-", 1)[1])


def rate(a: int, b: int) -> float | None:
    return a / b if b else None


def states(
    objects: dict[str, list[dict[str, Any]]], ks: dict[str, Outcome]
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(pod, the pods of kube-scheduler's cluster just before it): the pods before it where
    kube-scheduler put them, their victims gone (its own victims not yet)."""
    gone: set[str] = set()
    placed: list[dict[str, Any]] = []
    pending = {p["metadata"]["name"]: p for p in objects["pending"]}
    for name, outcome in ks.items():
        yield name, [p for p in objects["running"] + placed if p["metadata"]["name"] not in gone]
        gone.update(outcome.victims)
        if outcome.node:
            pod = json.loads(json.dumps(pending[name]))
            pod["spec"]["nodeName"] = outcome.node
            placed.append(pod)


def with_start_time(pod: dict[str, Any], start_times: dict[str, str]) -> dict[str, Any]:
    """The pod with the start time it had in kube-scheduler's cluster (the pods made Running
    there; the others, bound by the scheduler, never started)."""
    started = start_times.get(pod["metadata"]["name"])
    return {**pod, "status": {"phase": "Running", "startTime": started}} if started else pod


def replay_all(
    objects: dict[str, list[dict[str, Any]]], ks: dict[str, Outcome], start_times: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """rulesched's one cycle (as ``rulesched test`` runs it, every node scored) for every pod, on
    kube-scheduler's cluster as it was just before that pod (its budgets' statuses too): the
    decision compared on the same state, so that a tie kube-scheduler broke at random does not
    make every later pod differ."""
    from unittest import mock

    from rulesched.authoring import testfile
    from rulesched.authoring.ruletest import run_case
    from rulesched.errors import RuleschedError
    from rulesched.lang import load_rules, resolve_rules_path

    pending = {p["metadata"]["name"]: p for p in objects["pending"]}
    out: dict[str, dict[str, Any]] = {}
    rules = load_rules([resolve_rules_path("default")])  # (once, not once per pod as run_tests would)
    # The files are JSON written here: read as JSON, not through the YAML reader's pure-Python
    # constructor (seconds per file of a few hundred nodes on a loaded machine; the rest is the same).
    as_json = mock.patch.object(testfile, "_load_yaml", lambda path: json.loads(path.read_text()))
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as d, as_json:
        for name, pods in states(objects, ks):
            pods = [with_start_time(p, start_times) for p in pods]
            case = {
                "rules": ["default"], "nodes": objects["nodes"], "pods": pods,
                "pdbs": list(ks[name].budgets) or objects["pdbs"],  # (with the status kube-scheduler saw)
                "priorityClasses": objects["classes"],
                "cases": [{"name": name, "pod": pending[name], "expect": {"unschedulable": False}}],
            }  # fmt: skip
            path = Path(d) / f"{name}.test.yaml"
            path.write_text(json.dumps(case))
            try:
                (case,) = testfile.read_case_file(path).cases
                got = run_case(rules, case).outcome.as_json()
            except RuleschedError as err:
                out[name] = {"error": str(err)}
                continue
            best = got["winner"] if isinstance(got["winner"], list) else [got["winner"]] if got["winner"] else []
            out[name] = {"best": best, "nominated": got["nominated"], "victims": sorted(v.split("/", 1)[1] for v in got["victims"]),
                         "scores": got["scores"]}  # fmt: skip
            path.unlink()
    return out


def preemption_case(case: str) -> bool:
    return case == "preemption"


def fidelity(args: argparse.Namespace) -> dict[str, Any]:
    cases = args.case or ["mixed", "preemption"]
    out = []
    for case in cases:
        nodes = args.nodes or (300 if case == "mixed" else 100)
        pods = args.pods or (300 if case == "mixed" else 100)
        result = fidelity_case(case, nodes, pods, args.seed, args.logs, tuple(args.rulesched_flag or ()))
        out.append(result)
        seq, same = result["sequential"], result["same_state"]
        print(f"fidelity {case}: on the same state (each pod replayed on kube-scheduler's cluster before it): "
              f"{same['agreed']}/{same['compared']} unique best nodes or preemptions agree, "
              f"{same['ties_agreed']}/{same['ties_compared']} tied sets agree, {same['preemption_ties']} preemptions "
              f"kube-scheduler's own order leaves to chance (equal victims, no start times) set apart; run twice: "
              f"{seq['agreed']}/{seq['compared']} of the pods with a unique best node agree; "
              f"unschedulable {result['unschedulable']}; preempted {result['preempted']}")  # fmt: skip
        for d in result["differences"]:
            print(f"  {json.dumps(d)}")
    return {"cases": out}
