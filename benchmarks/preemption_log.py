"""preemption_log.py: a run's preemptions pod by pod, read from the scheduler's own log.

``bench_kube_scheduler.py speed --workload preemption --logs DIR`` keeps each scheduler's log;
with ``--kube-scheduler-verbosity 2`` kube-scheduler logs each preemption (its executor's "Start
the preemption asynchronously": preemptor, node, victims), each victim's removal sent ("Preemptor
Pod preempted victim Pod", or "already being deleted": chosen while leaving) and each binding;
with ``--rulesched-flag=--v=2`` rulesched logs each attempt (``scheduled``, ``unschedulable`` with
``nominated=`` and ``victims=`` when it preempted) and each removal answered (``deleted`` or
``evicted``, naming the preemptor)::

    $ python benchmarks/preemption_log.py DIR/preemption-kube-scheduler-*.log DIR/preemption-rulesched-*.log

For each log: the preemptions and their preemptors (by priority: the generated workload's, ``--seed``),
those that preempted more than once, what became of each preemption (its preemptor's next
outcome: bound on the node it was nominated to, bound elsewhere, preempted again, found no
candidate, nothing more), the victims chosen by more than one preemption, and how long from a
preemption to its victims' removal being answered. Both schedulers' counts of preemptions with
victims are also in their metrics (``speed`` prints them); this says why they differ.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gen_cluster import generate

_KLOG_TIME = re.compile(r"^[IWE]\d{4} (\d+):(\d+):(\d+\.\d+)")
_ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT(\d+):(\d+):(\d+\.\d+)Z")
_POD = re.compile(r'\bpod="?(?:[\w.-]+/)?([\w.-]+)')
_NODE = re.compile(r'\bnode="?([\w.-]+)')
_PREEMPTOR = re.compile(r'\bpreemptor="?(?:[\w.-]+/)?([\w.-]+)')
_VICTIM = re.compile(r'\bvictim="(?:[\w.-]+/)?([\w.-]+)"')
_NOMINATED = re.compile(r"\bnominated=([\w.-]+)")
_VICTIMS = re.compile(r"\bvictims=(\S+)")


@dataclass(frozen=True)
class Step:
    """One outcome of one pod's attempt: ``preempted`` (on ``node``), ``bound`` (to ``node``),
    ``failed`` (unschedulable, no candidate), ``waiting`` (not eligible: its victims leaving)."""

    time: float
    kind: str
    node: str = ""


@dataclass(frozen=True)
class Removal:
    """A victim's removal for a preemptor: answered (``sent``) or skipped as leaving already."""

    time: float
    preemptor: str
    victim: str
    sent: bool


@dataclass
class Run:
    """What one log says: each pod's steps in order, the removals, the victims each preemption
    chose (rulesched's log names them; kube-scheduler's through its removals)."""

    steps: dict[str, list[Step]] = field(default_factory=lambda: defaultdict(list))
    removals: list[Removal] = field(default_factory=list)
    chosen: dict[tuple[str, float], list[str]] = field(default_factory=dict)  # (preemptor, time) -> victims


def _seconds(line: str) -> float | None:
    m = _KLOG_TIME.match(line) or _ISO_TIME.match(line)
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else None


def _found(pattern: re.Pattern[str], line: str) -> str:
    m = pattern.search(line)
    return m[1] if m else ""


def parse(lines: Iterable[str]) -> Run:
    """The steps and removals of a kube-scheduler (-v=2 or more) or ``rulesched run --v=2`` log."""
    run = Run()
    for line in lines:
        t = _seconds(line)
        if t is None:
            continue
        if '"Start the preemption asynchronously"' in line:
            run.steps[_found(_PREEMPTOR, line)].append(Step(t, "preempted", _found(_NODE, line)))
        elif '"Successfully bound pod to node"' in line or "rulesched.run.loop: scheduled " in line:
            run.steps[_found(_POD, line)].append(Step(t, "bound", _found(_NODE, line)))
        elif '"Unable to schedule pod; no fit; waiting"' in line or "rulesched.run.loop: unschedulable " in line:
            pod, node = _found(_POD, line), _found(_NOMINATED, line)
            if node:  # (rulesched: the attempt that preempted; kube-scheduler's has its own line)
                run.steps[pod].append(Step(t, "preempted", node))
                run.chosen[(pod, t)] = [v.rpartition("/")[2] for v in _found(_VICTIMS, line).split(",") if v]
            elif "found a potential placement" not in line:
                leaving = "terminating pod on the nominated node" in line or "waiting for the preempted" in line
                run.steps[pod].append(Step(t, "waiting" if leaving else "failed"))
        elif '"Preemptor Pod preempted victim Pod"' in line or '"Victim Pod is already being deleted' in line:
            sent = "preempted victim" in line
            run.removals.append(Removal(t, _found(_PREEMPTOR, line), _found(_VICTIM, line), sent))
        elif re.search(r"rulesched\.run\.workers: (deleted|evicted) pod=", line):
            run.removals.append(Removal(t, _found(_PREEMPTOR, line), _found(_POD, line), True))
    if not run.chosen:  # (kube-scheduler: a preemption's victims are the removals it sent or skipped)
        for r in run.removals:
            before = [s.time for s in run.steps[r.preemptor] if s.kind == "preempted" and s.time <= r.time]
            if before:
                run.chosen.setdefault((r.preemptor, max(before)), []).append(r.victim)
    return run


@dataclass(frozen=True)
class Summary:
    preemptions: int
    preemptors: int
    repeated: int  # preemptors that preempted more than once
    by_priority: dict[int, int]  # preemptors by priority
    outcomes: dict[str, int]  # what each preemption's preemptor did next
    victims_chosen: int
    chosen_again: int  # victims chosen by a preemption after another one had chosen them
    removal_seconds: tuple[float, float] | None  # preemption -> removal answered: median, 90th percentile


def summarize(run: Run, priorities: Mapping[str, int]) -> Summary:
    preemptors = Counter({p: sum(s.kind == "preempted" for s in steps) for p, steps in run.steps.items()})
    preemptors = +preemptors  # (those that preempted)
    outcomes: Counter[str] = Counter()
    for steps in run.steps.values():
        for i, step in enumerate(steps):
            if step.kind != "preempted":
                continue
            after = next((s for s in steps[i + 1 :] if s.kind != "waiting"), None)
            if after is None:
                outcomes["nothing more"] += 1
            elif after.kind == "bound":
                outcomes["bound there" if after.node == step.node else "bound elsewhere"] += 1
            else:
                outcomes["preempted again" if after.kind == "preempted" else "found no candidate"] += 1
    times = Counter(v for victims in run.chosen.values() for v in victims)
    waits = []
    for r in run.removals:
        before = [s.time for s in run.steps.get(r.preemptor, ()) if s.kind == "preempted" and s.time <= r.time]
        if r.sent and before:
            waits.append(r.time - max(before))
    waits.sort()
    return Summary(
        preemptions=sum(preemptors.values()),
        preemptors=len(preemptors),
        repeated=sum(1 for n in preemptors.values() if n > 1),
        by_priority=dict(sorted(Counter(priorities.get(p, 0) for p in preemptors).items())),
        outcomes=dict(outcomes.most_common()),
        victims_chosen=sum(times.values()),
        chosen_again=sum(n - 1 for n in times.values()),
        removal_seconds=(statistics.median(waits), waits[int(0.9 * (len(waits) - 1))]) if waits else None,
    )


def workload_priorities(seed: int, nodes: int = 500, running: int = 2500, pending: int = 500) -> dict[str, int]:
    """Each pod's priority in gen_cluster's preemption workload (the speed benchmark's sizes)."""
    items = generate(nodes, running, pending, "preemption", seed)["items"]
    return {o["metadata"]["name"]: o["spec"].get("priority", 0) for o in items if o["kind"] == "Pod"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--seed", type=int, default=1, help="the workload's (bench_kube_scheduler.py --seed)")
    args = parser.parse_args(argv)
    priorities = workload_priorities(args.seed)
    for path in args.logs:
        with open(path, errors="replace") as f:
            s = summarize(parse(f), priorities)
        wait = "-" if s.removal_seconds is None else "{:.3f} s (90%: {:.3f} s)".format(*s.removal_seconds)
        print(
            f"{path}\n  {s.preemptions} preemptions by {s.preemptors} preemptors ({s.repeated} more than once); "
            f"preemptors by priority {s.by_priority}\n  then: {s.outcomes}\n"
            f"  victims chosen {s.victims_chosen}, of them chosen again while leaving {s.chosen_again}; "
            f"from a preemption to a victim's removal answered: {wait}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
