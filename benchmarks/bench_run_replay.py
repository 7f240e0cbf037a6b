"""A generated cluster replayed offline with ``rulesched run``'s scheduler settings (the
FailedScheduling diagnosis, cycle timings, the live walk chunk), every attempt recorded as the
run's reporter reads it: node, message, nomination, victims and the FailedScheduling event's
reason-code annotation. Prints the scheduling CPU (process time of the cycles alone), a cycle's
CPU by outcome (as the live scheduler's rulesched_scheduling_cycle_cpu_seconds counts it: the
live figures beside these say what running among the other processes costs) and a digest of
those decisions, which a change meant to be decision-neutral must leave the same.

    python benchmarks/gen_cluster.py --nodes 500 --running 2500 --pending 500 --workload preemption > /tmp/c.json
    python benchmarks/bench_run_replay.py /tmp/c.json [--repeat 3] [--profile OUT.prof] [--dump OUT.json]
    PYTHONPATH=<tree> python benchmarks/bench_run_replay.py /tmp/c.json   # another checkout's rulesched

``--count``: also how many column evaluations, rule bindings and interpreter evaluations (every
expression it evaluates, sub-expressions too) the cycles made (counted, so the same every run,
unlike CPU seconds on a shared machine). Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import gc
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from rulesched.engine import collecting_seldom
from rulesched.engine.settings import EngineSettings
from rulesched.engine.vectorise import ColumnEvaluator
from rulesched.lang import load_rules, resolve_rules_path
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.scheduler.framework import Code, CycleResult, SchedulerSettings
from rulesched.scheduler.reasons import annotation_value
from rulesched.simulate import run as simrun
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import load_cluster

WALK_CHUNK = 448  # rulesched.run.loop.WALK_CHUNK


def _counting(counts: collections.Counter[str]) -> None:
    """Count ColumnEvaluator.evaluate, RuleSet.bind_new and Interpreter.evaluate calls (each
    expression the reference interpreter evaluates, its sub-expressions too) into ``counts``."""
    evaluate, bind_new, interpret = ColumnEvaluator.evaluate, RuleSet.bind_new, Interpreter.evaluate

    def counted_evaluate(self: Any, *args: Any, **named: Any) -> Any:
        counts["column evaluations"] += 1
        return evaluate(self, *args, **named)

    def counted_bind(self: Any, *args: Any, **named: Any) -> Any:
        counts["bindings made"] += 1
        return bind_new(self, *args, **named)

    def counted_interpret(self: Any, *args: Any, **named: Any) -> Any:
        counts["interpreter evaluations"] += 1
        return interpret(self, *args, **named)

    ColumnEvaluator.evaluate = counted_evaluate  # type: ignore[method-assign]
    RuleSet.bind_new = counted_bind  # type: ignore[method-assign]
    Interpreter.evaluate = counted_interpret  # type: ignore[method-assign]


def replay(
    path: str, profile: str | None = None, by_outcome: dict[str, list[float]] | None = None
) -> tuple[float, list[list[Any]]]:
    """One replay: the cycles' process time and every attempt's record; ``by_outcome`` gets
    each outcome's cycles and their CPU (``CycleTiming.cpu_seconds``, as the live scheduler's
    rulesched_scheduling_cycle_cpu_seconds counts it)."""
    objects = load_cluster([path], skip_missing_nodes=True)
    options = simrun.SimulateSettings(cluster=(path,))
    rules = load_rules([resolve_rules_path(r) for r in options.rules])
    store = objects.store(provision=True, load=None)
    settings = SchedulerSettings(engine=EngineSettings(walk_chunk=WALK_CHUNK), timings=True, diagnose=True)
    simulation = Simulation(rules, store, settings)
    log: list[list[Any]] = []
    recorded = simulation.recorder.attempted

    def attempted(result: CycleResult) -> None:
        recorded(result)
        if by_outcome is not None and result.timing is not None:
            kept = by_outcome.setdefault(result.outcome, [0, 0.0])
            kept[0] += 1
            kept[1] += result.timing.cpu_seconds
        codes = result.reason_codes() if result.code is Code.UNSCHEDULABLE else ()
        preemption = result.preemption
        log.append(
            [
                result.pod.key,
                result.code.value,
                result.node,
                result.message,
                None if preemption is None else preemption.nominated,
                [] if preemption is None else [v.key for v in preemption.victims],
                annotation_value(codes, result.num_nodes) if codes else "",
            ]
        )

    simulation.recorder.attempted = attempted  # type: ignore[method-assign]
    for pod in simrun.pods_to_schedule(objects, options):
        simulation.add(pod)
    gc.collect()
    gc.freeze()
    profiler = cProfile.Profile() if profile else None
    started = time.process_time()
    with collecting_seldom():
        if profiler is not None:
            profiler.enable()
        simulation.run()
        if profiler is not None:
            profiler.disable()
    seconds = time.process_time() - started
    gc.unfreeze()
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    return seconds, log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cluster")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", help="cProfile the first replay's cycles into this file")
    parser.add_argument("--dump", help="write the attempts' records (JSON) here")
    parser.add_argument("--count", action="store_true", help="count column evaluations and bindings")
    args = parser.parse_args()
    counts: collections.Counter[str] = collections.Counter()
    if args.count:
        _counting(counts)
    seconds = []
    for i in range(args.repeat):
        outcomes: dict[str, list[float]] = {}
        cpu, log = replay(args.cluster, args.profile if i == 0 else None, outcomes)
        seconds.append(cpu)
        digest = hashlib.sha256(json.dumps(log, sort_keys=True, default=str).encode()).hexdigest()[:16]
        unplaced = sum(1 for entry in log if entry[1] != Code.SCHEDULED.value)
        print(
            f"run {i}: {len(log)} attempts ({unplaced} unplaced), CPU {cpu:.2f} s, "
            f"{1000 * cpu / max(1, len(log)):.2f} ms an attempt, digest {digest}; a cycle's CPU by outcome: "
            + ", ".join(f"{k} {1000 * t / n:.2f} ms ({n:.0f})" for k, (n, t) in sorted(outcomes.items())),
            flush=True,
        )
        if args.dump and i == 0:
            Path(args.dump).write_text(json.dumps(log, indent=0, default=str))
        if args.count and i == 0:
            print(", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
    seconds.sort()
    print(f"median CPU {seconds[len(seconds) // 2]:.2f} s of {len(seconds)}")


if __name__ == "__main__":
    main()
