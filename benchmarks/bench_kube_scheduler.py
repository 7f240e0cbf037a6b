"""kube-scheduler 1.37 beside ``rulesched run`` (rules/default.rules), on the same machine and the
same real API server: testbed/'s kube-apiserver, etcd and kube-controller-manager, fresh for each
run (``testbed/build`` first).

    python benchmarks/bench_kube_scheduler.py speed                   # every workload, both schedulers
    python benchmarks/bench_kube_scheduler.py speed --workload basic-5000 --repeat 3
    python benchmarks/bench_kube_scheduler.py fidelity                # mixed and preemption clusters
    python benchmarks/bench_kube_scheduler.py fidelity --case mixed --nodes 100 --pods 60   # CI-sized
    python benchmarks/bench_kube_scheduler.py all --json result.json  # both; the figures as JSON too

**speed** — for each workload, kube-scheduler then ``rulesched run`` (alternated with
``--repeat``), each on a fresh test bed holding the workload's nodes and running pods (created
bound, as upstream's init pods end up), started and ready before the measured pods are created.
They are created as scheduler_perf's createPods op creates them: by testbed/'s podload (Go,
client-go, 30 workers, QPS and burst 5000; ``testbed/build`` builds it), not by this Python
process, whose creations cost the machine's 2 cores more than some schedulers' cycles do
(``--creator python``: the 16 Python threads of Run 7 and before); ``--drain`` creates them
before the scheduler starts, which then drains a full queue alone. Printed per scheduler: pods/s
from the first binding to the last (as a watch on the pods sees them), scheduler_perf's
SchedulingThroughput of the same bindings (sampled each second: average and median), p50/p99
creation-to-binding, CPU seconds per pod of the scheduler's processes (rulesched's binding
process included), of kube-apiserver and etcd, of the creator and of this process (the watch),
the requests kube-apiserver served per pod (its own
apiserver_request_total by verb and resource), the scheduler's attempts and queue moves (its
scheduler_schedule_attempts_total and scheduler_queue_incoming_pods_total), rulesched's scheduling thread's CPU per attempt and its time
waiting for a core (its main thread's schedstat: the cycles' own cost, apart from its binding,
watching and status-writing threads), and the ratio
rulesched / kube-scheduler of pods/s (>1: rulesched faster) and of CPU per pod (<1: rulesched
cheaper). ``--logs DIR`` keeps each scheduler's log and its /metrics at the end; ``--rulesched-flag`` passes a
flag to ``rulesched run`` (a variant, e.g. ``--rulesched-flag=--evict-victims=all``); ``--pprof DIR``
keeps kube-apiserver's CPU profile of the first ``--pprof-seconds`` of each measured phase; ``--audit DIR``
keeps its audit log of every client and prints how long it took to answer each client's requests, while the
pods were created and after. kube-scheduler runs as scheduler_perf runs
it: client QPS and burst 5000, default profile, ``percentageOfNodesToScore`` adaptive (both),
logging at -v=1 (``--kube-scheduler-verbosity``); rulesched with its defaults. Each run also
reports each scheduler's own preemption counts (kube-scheduler's metrics, which rulesched
exports alike: preemptions that chose victims, victims, the mean time to send their removals). Pods of evictions and preemptions are removed at
once by a kubelet stand-in (no kubelets here). Workloads (benchmarks/gen_cluster.py):
``basic-1000`` and ``basic-5000`` (scheduler_perf's SchedulingBasic: 1000 or 5000 nodes, 1000
running pods, 3000 or 5000 measured), ``mixed`` (1000 nodes of four shapes, taints, cordons,
200 Deployments' pods with tolerations, selectors, affinity, spreading; 1000 running, 3000
measured), ``preemption`` (500 nodes full of pods of priority 0-3, some under PDBs; 500 measured
pods of priority 0-4 that need room: many preempt) and ``preemption-drained`` (the same, its pods
created before the scheduler starts, as ``--drain``: side by side by default, since the two
differ most on the machine's saturation, Run 29).

**fidelity** — the same generated cluster twice on fresh test beds, once with kube-scheduler
(at -v=10, which logs every node's score for every pod) and once with ``rulesched run``, both
scoring every feasible node (``percentageOfNodesToScore: 100``). The pending pods are created
one at a time, each once the previous one settled (bound, or unschedulable, or its victims
gone and it bound), so both see the same queue. For every pod whose best node under
kube-scheduler's own scores is unique, the nodes must be equal; on preemption, the victims too.
Every difference is listed with kube-scheduler's per-plugin scores on both nodes, and the first
difference is marked: later ones may follow from it (the clusters differ from there). Cases:
``mixed`` (gen_cluster's mixed cluster) and ``preemption`` (its preemption cluster).

No assertions; figures only. The machine's other load moves wall-clock figures: compare CPU
seconds per pod, and alternated repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from kube_bench import cluster  # (first: it puts the project's root on sys.path, for tests.realk8s)
from kube_bench.creators import CREATORS
from kube_bench.fidelity import fidelity
from kube_bench.speed import speed

from tests.realk8s import ApiError, unavailable_reason


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "fidelity", "all"))
    parser.add_argument(
        "--workload", action="append", choices=sorted(cluster.WORKLOADS), help="speed: (repeatable) default all"
    )
    parser.add_argument("--repeat", type=int, default=1, help="speed: alternated runs of each scheduler")
    parser.add_argument(
        "--scheduler", action="append", choices=("kube-scheduler", "rulesched"), help="speed: only these"
    )
    parser.add_argument("--case", action="append", choices=("mixed", "preemption"), help="fidelity: default both")
    parser.add_argument("--nodes", type=int, help="fidelity: nodes (default 300 mixed, 100 preemption)")
    parser.add_argument("--pods", type=int, help="fidelity: pending pods (default 300 mixed, 100 preemption)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--logs", type=Path, metavar="DIR", help="keep each scheduler's log in DIR")
    parser.add_argument(
        "--rulesched-flag",
        action="append",
        metavar="FLAG",
        help="a flag for `rulesched run` (repeatable), e.g. --rulesched-flag=--evict-victims=all",
    )
    parser.add_argument(
        "--pprof",
        type=Path,
        metavar="DIR",
        help="speed: keep kube-apiserver's CPU profile of each run's measured phase in DIR",
    )
    parser.add_argument(
        "--pprof-seconds", type=int, default=15, help="speed: the profile's length from the first creation"
    )
    parser.add_argument(
        "--audit", type=Path, metavar="DIR",
        help="speed: keep kube-apiserver's audit log of every client in DIR, and print each client's request "
        "latencies from it (costs the API server some CPU)",
    )  # fmt: skip
    parser.add_argument(
        "--creator", choices=CREATORS, default="podload",
        help="speed: what creates the measured pods: testbed/'s podload (Go, as scheduler_perf; default) or python",
    )  # fmt: skip
    parser.add_argument(
        "--drain", action="store_true",
        help="speed: create the measured pods before the scheduler starts; it then drains them (no creation beside it)",
    )  # fmt: skip
    parser.add_argument(
        "--kube-scheduler-verbosity", type=int, default=1, metavar="N",
        help="speed: kube-scheduler's -v (default 1, as scheduler_perf; 2 logs each preemption, its preemptor, "
        "node and victims, for benchmarks/preemption_log.py)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-': standard output)")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"bench_kube_scheduler: {reason}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()}}
    if args.what in ("speed", "all"):
        result["speed"] = speed(args)
    if args.what in ("fidelity", "all"):
        result["fidelity"] = fidelity(args)
    if args.json:
        text = json.dumps(result, indent=2, default=str)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as e:
        print(f"bench_kube_scheduler: {e}", file=sys.stderr)
        sys.exit(1)
