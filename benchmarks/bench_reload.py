"""A storm of rules ConfigMap updates against a running scheduler: how late valid sets apply.

    python benchmarks/bench_reload.py                          # 1000 updates in 60 s
    python benchmarks/bench_reload.py --updates 300 --seconds 6 --max-delay 0.5

The test API server (tests/apiserver.py) runs in this process with a few nodes and the rules
ConfigMap; a :class:`rulesched.run.loop.Loop` schedules on its own thread. A driver thread
replaces the ConfigMap's rules at an even pace, every ``--invalid-every``-th update a set that
does not compile, each valid one a distinct set, the last one valid, and creates a pod every 50
updates. Printed: reloads attempted, sets applied and refused, the longest gap between two
reloads while updates kept coming, for each valid update how long until it or a newer set was
active (p50, p99, max: a refused newest version makes a valid update wait for the next reload
that lands on a valid one), the RulesRejected events posted, and whether every pod was bound.
Figures only; no assertions.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rulesched.lang import bundled_rules_dir  # noqa: E402
from rulesched.lang.frontend.files import content_digest  # noqa: E402
from rulesched.reload import ReloadOutcome  # noqa: E402
from rulesched.run.loop import Loop  # noqa: E402
from rulesched.run.settings import RunSettings  # noqa: E402
from tests.apiserver import TestApiServer  # noqa: E402

NODES = [f"n{i}" for i in range(6)]
BROKEN = 'extends "default"\n\nfilter broken:\n    node.nme == "x"\n'


def only(node: str, i: int) -> str:
    return f'extends "default"\n\nfilter only_{node}:\n    node.name == "{node}"\n    else "not {node}"\n# {i}\n'


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "64", "memory": "64Gi", "pods": "500"}},
    }


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "rulesched", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Pending"},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--invalid-every", type=int, default=4)
    parser.add_argument("--max-delay", type=float, default=2.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)  # the figures only (each refusal logs its diagnostics)

    server = TestApiServer()
    for name in NODES:
        server.add("nodes", node(name))
    policy = {"metadata": {"name": "policy", "namespace": "rulesched"}, "data": {"policy.rules": only("n0", -1)}}
    server.add("configmaps", policy)
    folder = tempfile.mkdtemp()
    loop = Loop(
        RunSettings(
            kubeconfig=server.kubeconfig(f"{folder}/kubeconfig"),
            rules=(),
            rules_configmap="rulesched/policy",
            rules_max_delay=args.max_delay,
            grace_seconds=2,
        )
    )
    outcomes: list[tuple[float, ReloadOutcome]] = []
    reported = loop.reloader.on_outcome

    def record(outcome: ReloadOutcome) -> None:
        outcomes.append((time.monotonic(), outcome))
        reported(outcome)

    loop.reloader.on_outcome = record
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    while not loop.ready:
        time.sleep(0.05)

    default = (bundled_rules_dir() / "default.rules").read_text()
    index_of: dict[str, int] = {}
    sent: list[tuple[float, bool]] = []
    pods = []
    started = time.monotonic()
    pace = args.seconds / args.updates
    for i in range(args.updates):
        valid = i % args.invalid_every != args.invalid_every - 1 or i == args.updates - 1
        text = only(NODES[i % len(NODES)], i) if valid else BROKEN + f"# {i}\n"
        if valid:
            index_of[content_digest([default, text])] = i
        current = server.store.objects["configmaps"]["rulesched/policy"]
        server.update("configmaps", {**current, "data": {"policy.rules": text}})
        sent.append((time.monotonic(), valid))
        if i % 50 == 0:
            pods.append(f"p{i}")
            server.add("pods", pod(pods[-1]))
        time.sleep(max(0.0, started + pace * (i + 1) - time.monotonic()))
    ended = time.monotonic()
    last = max(index_of.values())
    while time.monotonic() - ended < 30 and index_of.get(loop.rules.digest) != last:
        time.sleep(0.05)
    settled = time.monotonic() - ended
    time.sleep(1.0)
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(10)

    during = [t for t, _ in outcomes if started <= t <= ended]
    gaps = [b - a for a, b in zip([started, *during], during, strict=False)]
    applied = [(t, index_of[o.digest]) for t, o in outcomes if o.ok and o.changed and o.digest in index_of]
    delays = []
    for i, (when, valid) in enumerate(sent):
        if valid:
            later = [t for t, index in applied if index >= i and t >= when]
            if later:
                delays.append(later[0] - when)
    delays.sort()
    refused = sum(1 for _, o in outcomes if not o.ok)
    events = [e for e in server.store.objects["events"].values() if e["reason"] == "RulesRejected"]
    bound = sum(1 for name in pods if server.store.objects["pods"][f"default/{name}"]["spec"].get("nodeName"))
    server.stop()
    print(f"{args.updates} updates in {ended - started:.1f} s, max delay {args.max_delay:g} s")
    print(f"reloads {len(outcomes)} ({len(during)} during the storm), applied {len(applied)}, refused {refused}")
    print(f"longest gap between reloads during the storm: {max(gaps, default=0):.2f} s")
    print(
        f"valid update -> it or a newer set active: p50 {statistics.median(delays):.2f} s, "
        f"p99 {delays[int(len(delays) * 0.99) - 1]:.2f} s, max {delays[-1]:.2f} s ({len(delays)} of "
        f"{sum(1 for _, v in sent if v)} valid updates)"
    )
    print(f"last valid set active {settled:.2f} s after the last update; RulesRejected events: {len(events)}")
    print(f"pods bound: {bound} of {len(pods)}")


if __name__ == "__main__":
    main()
