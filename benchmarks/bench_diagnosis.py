"""What `rulesched run`'s FailedScheduling diagnosis costs: a generated workload scheduled as
`run` schedules it (``SchedulerSettings(diagnose=True)``: every cycle that finds no node
explains itself as reason codes), CPU seconds over the whole drain, beside another tree.

    python benchmarks/bench_diagnosis.py [--workload preemption:600:1500:800:1] [--repeat 2]
                                         [--against /tmp/old-tree] [--lag 40]

A workload is ``kind:nodes:running:pending:seed`` of gen_cluster.py. Each run is a child process
(``PYTHONPATH`` at the tree it times), niced by the caller; with ``--against`` the base tree and
this one alternate, ``--repeat`` times each. Printed per run: CPU seconds (``time.process_time``
of the drain: the machine's other jobs move it far less than wall time), the cycles' own
``explain_seconds`` (wall) and a digest of every attempt's outcome, message, reason codes (each
:class:`Reason` whole) and FailedScheduling annotation; then whether the trees agree on every
one ("all same") and the median CPU seconds of each with their ratio.

``--lag N``: victims leave N cycles after their eviction instead of at once, and the preemptor
waits parked for them, as `rulesched run` sees it (the API server deletes them later; each
deletion moves the parked pods): other pods' cycles meanwhile respect its nomination (the nodes
held for nominated pods are checked with those pods added). With ``--lag 40`` the preemption
workload's attempts cost about what a live run's scheduling thread spends (issue 35).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class _Lagging:
    """An evictor whose victims leave ``lag`` cycles after their eviction (``tick`` once a
    cycle), each deletion moving the parked pods as the live loop's pod events do."""

    at_once = False  # (the scheduler parks the preemptor until its victims are gone)

    def __init__(self, lag: int, store: Any, queue: Any, deleted: Any) -> None:
        self.lag, self.store, self.queue, self.deleted = lag, store, queue, deleted
        self.due: list[tuple[int, str]] = []
        self.cycle = 0

    def evict(self, pod: Any, preemptor: Any, group: Any = None) -> None:
        self.due.append((self.cycle + self.lag, pod.key))

    def tick(self, flush: bool = False) -> None:
        self.cycle += 1
        gone = [key for at, key in self.due if flush or at <= self.cycle]
        if gone:
            self.due = [(at, key) for at, key in self.due if not flush and at > self.cycle]
            for key in gone:
                self.store.remove_pod(key)
                self.queue.move(self.deleted)


def drain(workload: str, lag: int = 0) -> dict[str, object]:
    """One run in this process: the figures and the digest of every attempt."""
    sys.path.insert(0, str(HERE))
    from gen_cluster import generate

    from rulesched.lang import load_rules, resolve_rules_path
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.scheduler.reasons import annotation_value
    from rulesched.simulate.driver import Simulation
    from rulesched.simulate.load import load_cluster

    kind, nodes, running, pending, seed = workload.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps(generate(int(nodes), int(running), int(pending), kind, int(seed))))
        objects = load_cluster([path])
    store = objects.store(provision=True)
    settings = SchedulerSettings(seed=int(seed), diagnose=True)
    sim = Simulation(load_rules([resolve_rules_path("default")]), store, settings)
    lagging = None
    if lag:
        from rulesched.scheduler.cluster_events import Event

        lagging = sim.scheduler.evictor = _Lagging(lag, store, sim.scheduler.queue, Event.POD_DELETED)
    for pod in objects.pending_pods:
        sim.add(pod)
    digest = hashlib.sha256()
    gc.collect()
    gc.freeze()
    began, explain, attempts, unplaced = time.process_time(), 0.0, 0, 0
    while True:
        result = sim.next_result()
        if result is None:
            if lagging is None or not lagging.due:
                break
            lagging.tick(flush=True)  # (nothing left to try until the victims go)
            continue
        if lagging is not None:
            lagging.tick()
        explain += result.explain_seconds
        codes = result.reason_codes()
        attempts += 1
        unplaced += bool(codes)
        annotation = annotation_value(codes, result.num_nodes) if codes else ""
        line = [result.pod.key, result.code.name, result.node, result.message, [repr(c) for c in codes], annotation]
        digest.update(json.dumps(line).encode() + b"\n")
    cpu = time.process_time() - began
    return {
        "cpu_s": round(cpu, 3),
        "explain_s": round(explain, 3),
        "attempts": attempts,
        "unplaced": unplaced,
        "digest": digest.hexdigest()[:16],
    }


def in_tree(tree: Path, argv: list[str], cwd: Path | None = None) -> dict[str, object]:
    """Run ``argv`` (a benchmark script and its arguments) with ``tree``'s rulesched first on the
    path, in a fresh process; its result is the JSON object its last line prints."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, *argv], env=env, cwd=cwd, check=True, capture_output=True, text=True).stdout
    found: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return found


def child(tree: Path, workload: str, lag: int = 0) -> dict[str, object]:
    return in_tree(tree, [str(Path(__file__).resolve()), "--child", workload, "--lag", str(lag)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", action="append", help="kind:nodes:running:pending:seed (repeatable)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--against", type=Path, help="the base tree (its rulesched/ and rules/)")
    parser.add_argument("--lag", type=int, default=0, help="victims leave this many cycles after eviction")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(drain(args.child, args.lag)))
        return 0
    same = True
    for workload in args.workload or ["preemption:600:1500:800:1"]:
        runs: dict[str, list[dict[str, object]]] = {"base": [], "this": []}
        for _ in range(args.repeat):
            for label, tree in (("base", args.against), ("this", ROOT)):
                if tree is None:
                    continue
                run = child(tree, workload, args.lag)
                runs[label].append(run)
                print(workload, label, json.dumps(run), flush=True)
        digests = {r["digest"] for rs in runs.values() for r in rs}
        same = same and len(digests) == 1
        medians = {k: round(statistics.median(float(str(r["cpu_s"])) for r in rs), 3) for k, rs in runs.items() if rs}
        ratio = f", this/base {medians['this'] / medians['base']:.2f}" if len(medians) == 2 else ""
        print(f"{workload}: {'same' if len(digests) == 1 else 'DIFFER'}; median CPU s {medians}{ratio}")
    print("all same" if same else "some differ")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
