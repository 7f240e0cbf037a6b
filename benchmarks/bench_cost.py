"""What the costliest rule the checker accepts costs per pod: the figure docs/language.md ("Cost")
quotes for the ``too-costly`` limit.

    python benchmarks/bench_cost.py [--nodes 5000] [--running 50000] [--full-nodes 500] [--repeat 3]

The rule: one ``sum`` over ``node.pods`` whose value reads each pod and the incoming pod (so no
cache and no column evaluation helps, and nothing short-circuits), grown term by term until the
next term would cross the limit; ``rulesched lint`` prints its estimate. It is added to the
bundled default profile and one pending pod is scheduled with ``rulesched simulate
--percentage-of-nodes-to-score 100`` (every node filtered and scored), against the default
profile alone, on two clusters made by ``gen_cluster.py`` (workload ``basic``):

The costliest accepted *set* is timed too: the default profile and as many copies of the rule as
the set's bound admits.

* ``--nodes`` nodes running ``--running`` pods (5,000 and 50,000 by default, as in issue 22);
* ``--full-nodes`` nodes holding 109 pods each, the most the cost bound assumes (110, kubelet's
  default maxPods, less one for the pod being placed); nodes are given 64 CPUs and 256Gi so the
  pod still fits. Per-pod time grows linearly with the nodes, so this figure times
  5000 / ``--full-nodes`` is what the rule costs on 5,000 full nodes.

The time is the simulator's scheduling time (loading the cluster excluded), the fastest of
``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rulesched.lang.frontend.ast import RuleKind
from rulesched.lang.frontend.files import check_paths

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("requests.cpu", "requests.memory", "nonzero_requests.cpu", "nonzero_requests.memory")


def worst_rule(terms: int, copies: int = 1) -> str:
    value = "\n        + ".join(f"number(p.{FIELDS[i % 4]}) * (pod.priority + {i})" for i in range(terms))
    body = f"    sum({value}\n        for p in node.pods) // 1000000\n"
    names = ["worst"] if copies == 1 else [f"worst{i}" for i in range(copies)]
    return 'extends "default"\n' + "".join(f"\nscore {name}:\n{body}" for name in names)


def lint(path: Path) -> str:
    run = subprocess.run([sys.executable, "-m", "rulesched", "lint", str(path)], capture_output=True, text=True)
    return run.stdout


def costliest_accepted(folder: Path) -> tuple[Path, int]:
    path = folder / "worst.rules"
    terms = 1
    while True:
        path.write_text(worst_rule(terms + 1), encoding="utf-8")
        if "too-costly" in lint(path):
            break
        terms += 1
    path.write_text(worst_rule(terms), encoding="utf-8")
    return path, terms


def generate(path: Path, nodes: int, running: int, full: bool) -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "gen_cluster.py"), "--nodes", str(nodes)]
    command += ["--running", str(running), "--pending", "1", "--workload", "basic", "--seed", "1"]
    data = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    if full:  # every node the same number of pods, and room for them
        names = [i["metadata"]["name"] for i in data["items"] if i["kind"] == "Node"]
        placed = [i for i in data["items"] if i["kind"] == "Pod" and i["spec"].get("nodeName")]
        for n, pod in enumerate(placed):
            pod["spec"]["nodeName"] = names[n % len(names)]
        for item in data["items"]:
            if item["kind"] == "Node":
                for key in ("allocatable", "capacity"):
                    item["status"][key].update(cpu="64", memory="256Gi")
    path.write_text(json.dumps(data), encoding="utf-8")


def schedule_seconds(cluster: Path, rules: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        command = [sys.executable, "-m", "rulesched", "simulate", str(cluster), "--rules", rules]
        command += ["--output", "summary", "--percentage-of-nodes-to-score", "100"]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        match = re.search(r"1 scheduled, .* in ([0-9.]+)s", out)
        assert match is not None, out
        best = min(best, float(match.group(1)))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=50_000)
    parser.add_argument("--full-nodes", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rules, terms = costliest_accepted(folder)
        steps = check_paths([rules]).checked.steps[RuleKind.SCORE, "worst"]
        print(f"costliest accepted rule: a sum over node.pods of {terms} terms, {steps:,} steps per node")
        # the costliest set: the default profile and as many copies of the rule as the set's bound takes
        many = folder / "many.rules"
        copies = 1
        while True:
            many.write_text(worst_rule(terms, copies + 1), encoding="utf-8")
            if "too-costly" in lint(many):
                break
            copies += 1
        many.write_text(worst_rule(terms, copies), encoding="utf-8")
        total = sum(check_paths([many]).checked.steps.values())
        print(f"costliest accepted set: the default profile and {copies} copies of it, {total:,} steps per node")
        for label, nodes, running, full in (
            (f"{args.nodes} nodes, {args.running} pods", args.nodes, args.running, False),
            (f"{args.full_nodes} nodes of 109 pods", args.full_nodes, args.full_nodes * 109, True),
        ):
            cluster = folder / "cluster.json"
            generate(cluster, nodes, running, full)
            base = schedule_seconds(cluster, "default", args.repeat)
            worst = schedule_seconds(cluster, str(rules), args.repeat)
            most = schedule_seconds(cluster, str(many), args.repeat)
            scale = f" (x {5000 / nodes:g} for 5,000 full nodes)" if full else ""
            print(
                f"{label}{scale}: default {base * 5000 / nodes * 1000:.0f} ms per pod, with the rule "
                f"{worst * 5000 / nodes * 1000:.0f} ms, the set {most * 5000 / nodes * 1000:.0f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
