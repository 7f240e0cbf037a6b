"""Golden runs: `rulesched simulate` on a fixed set of clusters, recorded once and compared after
a change that must not move any placement (a restructure, a speed-up).

    python benchmarks/golden_runs.py record /tmp/golden      # before the change
    python benchmarks/golden_runs.py check /tmp/golden       # after: exit 1 and a diff on any change

The set: ``examples/*.yaml`` under each bundled rule set, each ``rules/examples/*/cluster.yaml``
with its ``policy.rules``, generated clusters (benchmarks/gen_cluster.py: basic, mixed, distinct,
spreading, anti-affinity, volumes, small sizes), and a preemption-heavy cluster built here (full
nodes of low-priority pods under PodDisruptionBudgets, high-priority pending pods, some with
anti-affinity). Each runs with ``--output json`` and with ``--explain --output json``. The
outputs are stored without the fields that measure time (``scheduling_seconds`` and the like)
and with the paths they name written relative to the checkout (``<root>``) and the scratch folder
(``<work>``), so two runs of the same code, from any checkout, compare equal byte for byte. The whole set takes well under a minute.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import generate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = ("default", "most-allocated", "requested-to-capacity-ratio")
# (workload, nodes, running, pending): small enough for seconds, big enough for every plugin.
GENERATED = (
    ("basic", 60, 40, 150),
    ("mixed", 80, 200, 200),
    ("distinct", 80, 200, 150),
    ("spreading", 30, 20, 80),
    ("anti-affinity", 30, 20, 60),
    ("volumes", 30, 20, 60),
)
TIMING = ("seconds", "_ms", "duration", "elapsed")


def preemption_cluster(nodes: int = 12, seed: int = 3) -> dict[str, Any]:
    """Every node full of low-priority pods (some under budgets that allow few disruptions);
    pending pods of higher priorities that fit only by preempting, a few of them repelling
    each other by hostname, so dry runs exercise the filters' counts."""
    import random

    rng = random.Random(seed)
    items: list[dict[str, Any]] = []
    zones = ("zone-a", "zone-b", "zone-c")
    for i in range(nodes):
        name = f"node-{i}"
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zones[i % 3]},
                },
                "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "20"}},
            }
        )

    def pod(name: str, app: str, cpu: str, priority: int, node: str | None, extra: dict[str, Any]) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "priority": priority,
            "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
            **extra,
        }
        if node:
            spec["nodeName"] = node
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": app, "tier": app[:3]}},
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }

    for i in range(nodes):
        for k in range(4):
            app = ("batch", "web", "cache", "batch")[(i + k) % 4]
            items.append(pod(f"low-{i}-{k}", app, "1", rng.choice((0, 0, 10, 50)), f"node-{i}", {}))
    for app, allowed in (("web", 1), ("cache", 0)):
        items.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": f"{app}-pdb", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": app}}, "minAvailable": 2},
                "status": {"disruptionsAllowed": allowed},
            }
        )
    items.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "batch-pdb", "namespace": "default"},
            "spec": {
                "selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["bat"]}]},
                "maxUnavailable": "25%",
            },
        }
    )
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "critical"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    }
    for i in range(nodes + 6):
        app = "critical" if i % 3 == 0 else "urgent"
        cpu = rng.choice(("1", "2", "3"))
        extra = anti if app == "critical" else {}
        if i % 5 == 4:
            extra = {**extra, "preemptionPolicy": "Never"}
        items.append(pod(f"high-{i}", app, cpu, rng.choice((100, 1000)), None, extra))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def cases(work: Path) -> list[tuple[str, list[str]]]:
    """(name, simulate arguments without --output/--explain)."""
    out: list[tuple[str, list[str]]] = []
    for cluster in sorted((ROOT / "examples").glob("*.yaml")):
        for rules in BUNDLED:
            out.append((f"examples-{cluster.stem}-{rules}", [str(cluster), "--rules", rules]))
    for folder in sorted((ROOT / "rules" / "examples").iterdir()):
        if (folder / "cluster.yaml").exists():
            out.append(
                (f"policy-{folder.name}", [str(folder / "cluster.yaml"), "--rules", str(folder / "policy.rules")])
            )
    for workload, nodes, running, pending in GENERATED:
        path = work / f"gen-{workload}.json"
        path.write_text(json.dumps(generate(nodes, running, pending, workload, 1)))
        out.append((f"gen-{workload}", [str(path)]))
    path = work / "preemption.json"
    path.write_text(json.dumps(preemption_cluster()))
    out.append(("preemption", [str(path)]))
    out.append(("preemption-most-allocated", [str(path), "--rules", "most-allocated"]))
    return out


def _untimed(value: Any, work: str) -> Any:
    """The report without its timing fields, and with the paths it names (the provenance's
    inputs and rules) relative to the checkout and the scratch folder, so that two checkouts of
    the same code compare equal."""
    if isinstance(value, dict):
        return {k: _untimed(v, work) for k, v in value.items() if not any(t in k for t in TIMING)}
    if isinstance(value, list):
        return [_untimed(v, work) for v in value]
    if isinstance(value, str):
        return value.replace(work, "<work>").replace(str(ROOT), "<root>")
    return value


def run_one(args: list[str], work: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rulesched", "simulate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):  # (1: some pod unschedulable, still a report)
        return f"exit {done.returncode}\n{done.stderr}"
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return f"exit {done.returncode}, not JSON\n{done.stdout}\n{done.stderr}"
    return json.dumps(_untimed(report, work), indent=1, sort_keys=True) + "\n"


def outputs(jobs: int) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for name, args in cases(Path(tmp)):
            runs.append((f"{name}.json", [*args, "--output", "json"]))
            runs.append((f"{name}.explain.json", [*args, "--explain", "--output", "json"]))
        with ThreadPoolExecutor(jobs) as pool:
            texts = list(pool.map(lambda args: run_one(args, tmp), [args for _, args in runs]))
    return {name: text for (name, _), text in zip(runs, texts, strict=True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("record", "check"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    found = outputs(args.jobs)
    if args.action == "record":
        args.folder.mkdir(parents=True, exist_ok=True)
        for name, text in found.items():
            (args.folder / name).write_text(text)
        print(f"recorded {len(found)} runs in {args.folder}")
        return 0
    differ = 0
    for name, text in found.items():
        path = args.folder / name
        before = path.read_text() if path.exists() else ""
        if text != before:
            differ += 1
            diff = difflib.unified_diff(
                before.splitlines(), text.splitlines(), f"recorded/{name}", f"now/{name}", lineterm=""
            )
            print("\n".join(list(diff)[:40]))
    print(f"{len(found) - differ} of {len(found)} runs identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
