"""Generate kube-scheduler-perf-like clusters as `kubectl get -o json` output (kind: List).

    python benchmarks/gen_cluster.py --nodes 5000 --running 1000 --pending 10000 \
        --workload basic --seed 1 > /tmp/cluster.json

Workloads (after upstream scheduler_perf's test cases):
  basic          SchedulingBasic: plain pods with small requests
  node-affinity  SchedulingNodeAffinity: pending pods require a zone label via node affinity
  spreading      TopologySpreading: zone spread constraint, maxSkew 1, DoNotSchedule
  anti-affinity  SchedulingPodAntiAffinity: each pod repels its own group on the hostname key
Deterministic by seed. Node shape follows scheduler_perf's node template (4 CPU, 32Gi, 110 pods).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any

ZONES = ("zone-a", "zone-b", "zone-c")


def node(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"node-{i}"
    zone = ZONES[i % len(ZONES)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": zone,
                "node.kubernetes.io/instance-type": rng.choice(("std-4", "std-4", "mem-4")),
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110"},
        },
    }


def pod(name: str, workload: str, group: int, node_name: str | None, rng: random.Random) -> dict[str, Any]:
    labels = {"app": f"app-{group}"}
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if workload == "node-affinity":
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(ZONES[:2])}
                            ]
                        }
                    ]
                }
            }
        }
    elif workload == "spreading":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
    elif workload == "anti-affinity":
        labels["color"] = "green"
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def generate(nodes: int, running: int, pending: int, workload: str, seed: int, groups: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    items = [node(i, rng) for i in range(nodes)]
    for i in range(running):
        items.append(pod(f"running-{i}", "basic", i % groups, f"node-{rng.randrange(nodes)}", rng))
    for i in range(pending):
        items.append(pod(f"pending-{i}", workload, i % groups, None, rng))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--workload", choices=("basic", "node-affinity", "spreading", "anti-affinity"), default="basic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--groups", type=int, default=1, help="distinct pod templates (app labels); scheduler_perf uses one"
    )
    args = parser.parse_args(argv)
    json.dump(generate(args.nodes, args.running, args.pending, args.workload, args.seed, args.groups), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
