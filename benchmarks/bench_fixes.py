"""Soundness and minimality of explain's fixes, over generated clusters where a pod (or a group)
does not fit.

    python benchmarks/bench_fixes.py [--cases 200] [--seed 0] [--brute-force 60] [--groups 100] [--group-brute-force 30]

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

Then ``--groups`` clusters of two racks with a workload API gang of 2-5 members (minCount 2-5,
one rack for all of it now and then; tests/helpers/fixcheck.py's ``generate_group``) that does
not fit: every group fix is made on the files and simulated, sound when at least the gang's
minimum (the one the fix sets, when it lowers it) is bound. On the first
``--group-brute-force`` of them, a brute-force search over every set of up to two changes (each
node untainted, uncordoned, copied 1..members times, each running pod evicted, every member
tolerating a taint or asking less, the minimum lowered) looks for one smaller than explain's
smallest fix, each by a trial.

Prints the soundness figures (fixes that schedule the pod or place the group / fixes shown),
the pods and groups with at least one fix, how often the smallest was found, and the time per
explain.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.fixcheck import (  # noqa: E402
    POLICY,
    check,
    check_group,
    explain_fixes,
    explain_group_fixes,
    generate,
    generate_group,
    least_change,
    least_group_change,
    write,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200, help="clusters generated (those whose pod fits are skipped)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--brute-force", type=int, default=60, help="cases compared with a brute-force search")
    parser.add_argument("--groups", type=int, default=100, help="clusters generated with a gang")
    parser.add_argument("--group-brute-force", type=int, default=30, help="gangs compared with a brute-force search")
    args = parser.parse_args()
    if args.cases:
        pods(args)
    if args.groups:
        groups(args)


def pods(args: argparse.Namespace) -> None:
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
            # found: nothing smaller than explain's smallest schedules it (or, when explain has
            # none, nothing of up to three changes does either)
            if least is None or (checked and least >= best - 1e-9):
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


def groups(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp())
    unfit = fixes = sound = fixed = compared = smallest = 0
    unsound: list[str] = []
    missed: list[str] = []
    seconds: list[float] = []
    kinds: dict[str, int] = {}
    for seed in range(args.seed, args.seed + args.groups):
        items, target, minimum = generate_group(seed, nodes=3 + seed % 3)
        path = write(items, folder / f"g{seed}.json")
        started = time.perf_counter()
        g = explain_group_fixes(path, target)["group_explanation"]
        seconds.append(time.perf_counter() - started)
        if g["placed"]:
            continue
        unfit += 1
        checked = check_group(path, {"group_explanation": g}, g["members"], minimum)
        fixes += len(checked)
        fixed += bool(checked)
        for c in checked:
            kinds[c.fix["where"]] = kinds.get(c.fix["where"], 0) + 1
            if c.placed >= c.needed:
                sound += 1
            else:
                unsound.append(f"seed {seed}: {c.fix['summary']} ({c.placed} of {c.needed} bound)")
        if compared < args.group_brute_force and checked:
            compared += 1
            best = min(c.fix["size"] for c in checked)
            least = least_group_change(path, target, limit=best)
            if least is None:
                smallest += 1
            else:
                missed.append(f"seed {seed}: explain {best}, brute force {least}")
    print(f"{args.groups} clusters with a gang, {unfit} gangs that do not fit")
    print(
        f"soundness (groups): {sound}/{fixes} fixes place the gang when made on the files and simulated "
        f"({100 * sound / max(1, fixes):.1f}%)"
    )
    print(f"gangs with a fix: {fixed}/{unfit}; fixes by where: {dict(sorted(kinds.items()))}")
    print(
        f"smallest found (groups, sets of up to 2 changes): {smallest}/{compared} compared with brute force "
        f"({100 * smallest / max(1, compared):.1f}%)"
    )
    print(
        f"explain a group with fixes: median {statistics.median(seconds) * 1000:.0f} ms, "
        f"worst {max(seconds) * 1000:.0f} ms"
    )
    for line in unsound[:10]:
        print("UNSOUND", line)
    for line in missed[:10]:
        print("NOT SMALLEST", line)


if __name__ == "__main__":
    main()
