"""How much does writing policy as rules cost, per (pod, node), against hand-written Python?

    python benchmarks/bench_rules.py [--policy bench|default] [--nodes 5000] [--pods 50] [--seed 1]
                                     [--repeat 5] [--profile]

``--policy default`` compares ``rules/default.rules`` (kube-scheduler's default profile) with its
hand-written twin in ``handwritten_default.py``; the default, ``--policy bench``, uses the rule
set below. The rule set is ``benchmarks/rules/bench.rules``: ten filters and five scores of the kinds
platform teams write (taints, nodeSelector, free resources, GPUs, an underlay-IP limit, host
ports, a zone pin, replicas per node; pod capacity, LeastAllocated, GPU bin-packing,
PreferNoSchedule taints, zone/lifecycle preference). ``handwritten_filter`` and
``handwritten_scores`` (``rules_bench/handwritten.py``) do exactly the same checks the
straightforward way, per (pod, node), with no caching across calls.

Method:

* a synthetic cluster (``rules_bench/cluster.py``, deterministic by ``--seed``): ``--nodes`` NodeInfo objects with varied
  instance types, zones, pools, taints and 5-30 running pods each; ``--pods`` pending pods with
  varied requests, tolerations, node selectors, annotations and host ports;
* equivalence first: for every (pod, node), feasibility and every raw score value (the int a
  score rule yields before normalisation) must be equal, or the benchmark stops;
* then each variant is timed like a scheduling cycle (``rules_bench/cycles.py``): per pod, bind the rules once (the DSL's
  PreFilter), run the filters in rule order on every node stopping at the first failure, then
  the scores on the feasible nodes only (kube-scheduler's Filter then Score phases).
  time.perf_counter around each phase, the garbage collector off. The variants take turns pod
  by pod, ``--repeat`` times, and each pod counts with its fastest cycle per variant, so a burst
  of load from other processes is discarded instead of landing on one variant;
* every DSL cycle starts with a first bind: the rule set's cache of bindings by pod
  equivalence class is dropped (untimed) before each, as for a pod unlike any before it;
* "warm" keeps the node memos (node-only results the compiled rules cache per node) across pods,
  as between pods of a cycle when nothing changed: every warm cycle starts from the memos the
  equivalence pass filled. "cold" clears every node's memo before each pod (untimed), so every
  cached value is computed again for every pod;
* "warm" and "cold" call the bound rules' per-node functions (``BoundFilter.passes``,
  ``BoundScore.score``): the cost of evaluating the rules. "via feasible()+score_vector()" goes
  through the calls rulesched's scheduler makes, which add the failing filter's reasons and,
  for pods that share a binding with their equivalence class, stamp each node's outcome and
  score vector into its memo; "a replica of the last" then times the same pod again with
  nothing changed in between (another replica of a ReplicaSet), which those stamps answer.

``--profile`` runs the warm DSL path once more under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import platform
import pstats
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from benchmarks.handwritten_default import default_filter, default_scores  # noqa: E402
from benchmarks.rules_bench.cluster import make_cluster  # noqa: E402
from benchmarks.rules_bench.cycles import (  # noqa: E402
    Memos,
    Phases,
    Twin,
    cycle_columns,
    cycle_dsl,
    cycle_handwritten,
    cycle_scheduler_api,
    forget_bindings,
)
from benchmarks.rules_bench.handwritten import handwritten_filter, handwritten_scores  # noqa: E402
from rulesched import engine  # noqa: E402
from rulesched.cluster.nodeinfo import NodeInfo  # noqa: E402
from rulesched.engine import NodeColumns  # noqa: E402
from rulesched.lang import RuleSet, load_rules  # noqa: E402
from rulesched.model import Pod  # noqa: E402

RULES = ROOT / "benchmarks" / "rules" / "bench.rules"
DEFAULT_RULES = ROOT / "rules" / "default.rules"


TWINS = {
    "bench": Twin(handwritten_filter, handwritten_scores, False),
    "default": Twin(default_filter, default_scores, True),
}


def check_equivalence(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], twin: Twin
) -> tuple[int, int, Counter[tuple[str, str]]]:
    """Assert the DSL and the hand-written functions agree on every (pod, node); return the
    number of feasible pairs, of score values compared, and how often each rule runs in a
    scheduling cycle (filters up to the first failure, scores on feasible nodes)."""
    feasible = score_values = 0
    reached: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        bound = rules.bind(pod)
        hand_filter, hand_scores = twin.for_pod(pod)
        for node in nodes:
            failed = None
            for f in bound.filters:
                reached[("filter", f.name)] += 1
                if not f.passes(node):
                    failed = f.name
                    break
            want = hand_filter(node)
            if (failed is None) != want:
                raise AssertionError(
                    f"{pod.name} on {node.name}: DSL says {'fails ' + failed if failed else 'fits'}, "
                    f"hand-written says {'fits' if want else 'fails'}"
                )
            # scores are compared on every node, feasible or not, to cover more values
            dsl = [s.score(node) for s in bound.scores]
            hand = hand_scores(node)
            if dsl != hand:
                names = [s.name for s in bound.scores]
                raise AssertionError(f"{pod.name} on {node.name}: scores {names}: DSL {dsl} != hand-written {hand}")
            feasible += want
            score_values += len(dsl)
            if want:
                reached.update(("score", s.name) for s in bound.scores)
    return feasible, score_values, reached


def check_columns(rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], twin: Twin) -> None:
    """Column evaluation must agree with the hand-written functions too: feasibility of every
    (pod, node), and every raw score on every node."""
    cols = NodeColumns(nodes)
    rows = np.arange(len(nodes), dtype=np.intp)
    for pod in pods:
        bound = rules.bind(pod)
        hand_filter, hand_scores = twin.for_pod(pod)
        mask = engine.filter_mask(bound, cols, rows).tolist()
        want = [bool(hand_filter(node)) for node in nodes]
        if mask != want:
            bad = next(i for i, (a, b) in enumerate(zip(mask, want, strict=True)) if a != b)
            raise AssertionError(f"{pod.name} on {nodes[bad].name}: columns say {mask[bad]}, hand-written {want[bad]}")
        matrix = engine.score_matrix(bound, cols, rows)[:, :-1].tolist()
        for node, got in zip(nodes, matrix, strict=True):
            if got != hand_scores(node):
                raise AssertionError(
                    f"{pod.name} on {node.name}: column scores {got} != hand-written {hand_scores(node)}"
                )


VARIANTS = ("hand", "warm", "cold", "api", "replica", "columns", "columns_cold")


def measure(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], memos: Memos, repeat: int, twin: Twin
) -> dict[str, Phases]:
    """Per variant (see VARIANTS), the sum over pods of the pod's fastest cycle out of
    ``repeat``. The variants take turns pod by pod, so a burst of load on the machine hits one
    repetition of one pod, which the minimum then discards, not one whole variant. Every DSL
    cycle but "replica" starts with a first bind (no cached binding); untimed set-up between
    cycles is marked."""
    totals = {v: Phases() for v in VARIANTS}
    cols = NodeColumns(nodes)  # warm: columns kept across pods, as the scheduler keeps them
    rows = np.arange(len(nodes), dtype=np.intp)
    for pod in pods:  # untimed: build every column the pods' rules read
        engine.filter_mask(rules.bind(pod), cols, rows)
        engine.score_matrix(rules.bind(pod), cols, rows)
    gc.collect()
    gc.disable()
    try:
        for pod in pods:
            runs: dict[str, list[Phases]] = {v: [] for v in VARIANTS}
            for _ in range(repeat):
                runs["hand"].append(cycle_handwritten(nodes, pod, twin))
                memos.restore()  # untimed, as is everything on this side of a cycle call
                forget_bindings(rules)
                runs["warm"].append(cycle_dsl(rules, nodes, pod))
                memos.clear()
                forget_bindings(rules)
                runs["cold"].append(cycle_dsl(rules, nodes, pod))
                memos.restore()
                forget_bindings(rules)
                api = cycle_scheduler_api(rules, nodes, pod)
                if api is not None:
                    runs["api"].append(api)
                    # the next pod is a replica: same equivalence class, nothing changed
                    replica = cycle_scheduler_api(rules, nodes, pod)
                    assert replica is not None
                    runs["replica"].append(replica)
                memos.restore()
                forget_bindings(rules)
                runs["columns"].append(cycle_columns(rules, cols, pod))
                memos.clear()
                cold_cols = NodeColumns(nodes)  # every column (and group) built inside the cycle
                forget_bindings(rules)
                runs["columns_cold"].append(cycle_columns(rules, cold_cols, pod))
            for v, pod_runs in runs.items():
                if pod_runs:
                    totals[v].add(min(pod_runs, key=lambda p: p.total))
    finally:
        gc.enable()
        memos.restore()
        forget_bindings(rules)
    return {v: p for v, p in totals.items() if p.feasible or v in ("hand", "warm", "cold")}


def per_rule(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], repeat: int
) -> list[tuple[str, str, float]]:
    """Each DSL rule alone, on every node for every pod it applies to (no short-circuit), warm
    memos, fastest of ``repeat`` per pod: (kind, name, µs per evaluation)."""
    rows: dict[str, list[Any]] = {}
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for pod in pods:
            bound = rules.bind(pod)
            fns = [("filter", f.name, f.passes) for f in bound.filters] + [
                ("score", s.name, s.score) for s in bound.scores
            ]
            for kind, name, fn in fns:
                fastest = float("inf")
                for _ in range(repeat):
                    t0 = clock()
                    for node in nodes:
                        fn(node)
                    fastest = min(fastest, clock() - t0)
                row = rows.setdefault(f"{kind} {name}", [kind, name, 0, 0.0])
                row[2] += len(nodes)
                row[3] += fastest
    finally:
        gc.enable()
    order = {(r.kind.value, r.name): i for i, r in enumerate(rules.checked.rules)}
    return [
        (k, n, secs / evals * 1e6) for k, n, evals, secs in sorted(rows.values(), key=lambda r: order[(r[0], r[1])])
    ]


def profile_dsl(rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for pod in pods:
        cycle_dsl(rules, nodes, pod)
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return stream.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="timed cycles per pod and variant; the fastest counts")
    parser.add_argument(
        "--policy",
        choices=sorted(TWINS),
        default="bench",
        help="bench: benchmarks/rules/bench.rules; default: rules/default.rules",
    )
    parser.add_argument("--rules", help="rules file (must match the policy's hand-written twin)")
    parser.add_argument("--no-per-rule", action="store_true", help="skip the per-rule DSL table")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm DSL path and print the top functions")
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    args = parser.parse_args(argv)
    twin = TWINS[args.policy]
    args.rules = args.rules or str(DEFAULT_RULES if args.policy == "default" else RULES)

    rules = load_rules([args.rules])
    n_filters, n_scores = len(rules.filters), len(rules.scores)
    t0 = time.perf_counter()
    nodes, pods = make_cluster(args.nodes, args.pods, args.seed)
    build = time.perf_counter() - t0
    running = sum(len(n.pods) for n in nodes)
    pairs = len(nodes) * len(pods)
    rel = Path(args.rules).resolve()
    shown = rel.relative_to(ROOT) if rel.is_relative_to(ROOT) else rel
    print(f"rulesched rules benchmark: {n_filters} filters + {n_scores} scores from {shown}")
    print(f"python {platform.python_version()} ({platform.python_implementation()}), seed {args.seed}")
    print(
        f"cluster: {len(nodes)} nodes, {running} running pods (built in {build:.1f}s); {len(pods)} pending pods; "
        f"{pairs} (pod, node) pairs"
    )

    feasible, score_values, reached = check_equivalence(rules, nodes, pods, twin)
    check_columns(rules, nodes, pods, twin)
    filter_evals = sum(reached[("filter", f.name)] for f in rules.filters)
    print(
        f"equivalence: OK - feasibility of all {pairs} pairs and {score_values} raw score values identical "
        "(node by node and as columns); "
        f"{feasible} feasible pairs ({100 * feasible / pairs:.1f}%), {filter_evals / pairs:.2f} filters run per pair"
    )

    forget_bindings(rules)
    memos = Memos(rules)  # the equivalence pass filled every node-only value there is
    results = measure(rules, nodes, pods, memos, args.repeat, twin)
    for p in results.values():
        assert p.feasible == feasible, (p.feasible, feasible)
    hand, warm, cold = results["hand"], results["warm"], results["cold"]

    def us(seconds: float, count: int) -> str:
        return f"{seconds / count * 1e6:9.3f}" if count else f"{'-':>9}"

    print()
    print(f"timing: per pod, the fastest of {args.repeat} cycles (variants interleaved), summed over pods; gc off;")
    print("µs per (pod, node) pair unless stated")
    print(f"{'variant':<34}{'total':>9}{'bind':>9}{'filter':>9}{'score':>9}  |{'bind µs':>9}{'score µs':>10}")
    print(f"{'':<34}{'/pair':>9}{'/pair':>9}{'/pair':>9}{'/pair':>9}  |{'/pod':>9}{'/scored':>10}")
    labels = {
        "hand": "hand-written",
        "warm": "DSL, warm node memos",
        "cold": "DSL, cold (memos cleared per pod)",
        "api": "DSL via feasible()+score_vector()",
        "replica": "  same, pod a replica of the last",
        "columns": "DSL as columns, warm columns",
        "columns_cold": "DSL as columns, columns built per pod",
    }
    for variant, p in results.items():
        bind_pod = f"{p.bind / len(pods) * 1e6:9.1f}" if p.bind else f"{'-':>9}"
        print(
            f"{labels[variant]:<34}{us(p.total, pairs)}{us(p.bind, pairs) if p.bind else f'{0:9.3f}'}"
            f"{us(p.filter, pairs)}{us(p.score, pairs)}  |{bind_pod}{us(p.score, feasible):>10}"
        )
    print()
    print(f"hand-written: {hand.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(f"DSL (warm):   {warm.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(f"DSL (cold):   {cold.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(
        f"ratio DSL / hand-written: warm {warm.total / hand.total:.2f}, cold {cold.total / hand.total:.2f} "
        f"(filter phase {warm.filter / hand.filter:.2f}, score phase {warm.score / hand.score:.2f})"
    )
    if "api" in results:
        api, replica = results["api"], results["replica"]
        print(
            f"ratio through the scheduler's calls: {api.total / hand.total:.2f} for pods unlike any before, "
            f"{replica.total / hand.total:.2f} for a replica of the previous pod"
        )

    columns, columns_cold = results["columns"], results["columns_cold"]
    print(
        f"ratio DSL as columns (the scheduler's node tables) / hand-written: {columns.total / hand.total:.2f} "
        f"(filter phase {columns.filter / hand.filter:.2f}, score phase {columns.score / hand.score:.2f}); "
        f"with every column built in the cycle {columns_cold.total / hand.total:.2f}"
    )

    if not args.no_per_rule:
        print()
        print("DSL per rule: µs per evaluation, each rule alone on every node for every pod it applies to")
        print("(warm memos); 'in cycle': how often the rule runs in the timed cycle (filters stop at the first")
        print("failure, scores run on feasible nodes) and the µs per pair that makes:")
        for kind, name, micro in per_rule(rules, nodes, pods, min(args.repeat, 3)):
            runs = reached[(kind, name)]
            print(f"  {kind:<7}{name:<32}{micro:7.3f} µs  x {runs:>7} in cycle = {runs * micro / pairs:6.3f} µs/pair")

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    peak_mib = peak / 2**20 if sys.platform == "darwin" else peak / 2**10
    print()
    print(f"peak RSS: {peak_mib:.0f} MiB")

    if args.profile:
        memos.restore()
        print()
        print(f"cProfile of one warm DSL run (top {args.top} by own time; profiling inflates call costs):")
        print(profile_dsl(rules, nodes, pods, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
