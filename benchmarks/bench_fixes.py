"""Soundness and minimality of explain's fixes, over generated clusters where a pod (or a group)
does not fit.

    python benchmarks/bench_fixes.py [--cases 200] [--seed 0] [--brute-force 60] [--groups 40]

For each generated cluster (tests/helpers/fixcheck.py: a few nodes of 1-4 cpus, some labelled,
tainted, cordoned or with 3 pod slots, running pods of two priorities, a PriorityClass, a policy
filter of its own; a pending pod with a node selector, a toleration, a zone spread constraint,
anti-affinity to the running pods or the batch tier now and then) whose pod fits nowhere,
``rulesched explain`` is asked for its fixes, and **every fix is made on the cluster's objects and
simulated** (``simulate --apply``'s path, not the trial explain checked it with): sound when the
pod is then scheduled. On the first ``--brute-force`` cases a brute-force search tries every set
of up to three changes of the kinds explain knows (each node untainted, uncordoned, labelled,
copied, each running pod evicted, each taint tolerated, each selector key dropped, the request
lowered to each node's free amount, each PriorityClass, each spread constraint relaxed, the
anti-affinity dropped, the policy's filter in audit mode), smallest first, each by a trial: the
smallest fix was found when nothing smaller schedules the pod.

Prints the soundness figure (fixes that schedule the pod / fixes shown), the pods with at least
one fix, how often the smallest was found, and the time per explain.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.fixcheck import POLICY, check, explain_fixes, generate, least_change, write  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200, help="clusters generated (those whose pod fits are skipped)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brute-force", type=int, default=60, help="cases compared with a brute-force search")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    policy = folder / "policy.rules"
    policy.write_text(POLICY)
    rules = (str(policy),)
    unfit = fixes = sound = fixed = compared = smallest = 0
    unsound: list[str] = []
    missed: list[str] = []
    seconds: list[float] = []
    kinds: dict[str, int] = {}
    for seed in range(args.seed, args.seed + args.cases):
        nodes = 2 + seed % 4
        path = write(generate(seed, nodes=nodes, rich=True), folder / f"c{seed}.json")
        started = time.perf_counter()
        answer = explain_fixes(path, rules=rules)
        seconds.append(time.perf_counter() - started)
        if answer["feasible"]:
            continue
        unfit += 1
        checked = check(path, answer, rules=rules)
        fixes += len(checked)
        fixed += bool(checked)
        for c in checked:
            kinds[c.fix["where"]] = kinds.get(c.fix["where"], 0) + 1
            if c.placed is not None:
                sound += 1
            else:
                unsound.append(f"seed {seed}: {c.fix['summary']}")
        if compared < args.brute_force:
            compared += 1
            best = checked[0].fix["size"] if checked else 3.0
            from rulesched.lang import load_rules

            least = least_change(path, limit=best, rules=load_rules([policy]))
            if (least is None and checked) or (least is not None and checked and least >= best - 1e-9):
                smallest += 1
            else:
                missed.append(f"seed {seed}: explain {best if checked else 'none'}, brute force {least}")
    print(f"{args.cases} clusters, {unfit} with a pod that fits nowhere")
    print(
        f"soundness: {sound}/{fixes} fixes schedule the pod when made on the files and simulated ({100 * sound / max(1, fixes):.1f}%)"
    )
    print(f"pods with a fix: {fixed}/{unfit}; fixes by where: {dict(sorted(kinds.items()))}")
    print(f"smallest found: {smallest}/{compared} compared with brute force ({100 * smallest / max(1, compared):.1f}%)")
    print(f"explain with fixes: median {statistics.median(seconds) * 1000:.0f} ms, worst {max(seconds) * 1000:.0f} ms")
    for line in unsound[:10]:
        print("UNSOUND", line)
    for line in missed[:10]:
        print("NOT SMALLEST", line)


if __name__ == "__main__":
    main()
