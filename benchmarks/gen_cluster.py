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


def full_node(i: int, rng: random.Random) -> dict[str, Any]:
    """A node as a real cluster's API server returns it (about 7 kB of JSON): what the scheduler
    reads plus conditions, addresses, node info and 25 images, as kube-scheduler sends nodes to
    an extender that is not node-cache-capable."""
    out = node(i, rng)
    name = out["metadata"]["name"]
    out["metadata"].update(
        resourceVersion=str(1000 + i),
        creationTimestamp="2026-01-01T00:00:00Z",
        annotations={
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        },
    )
    out["metadata"]["labels"].update({f"example.com/label-{k}": f"value-{k}" for k in range(6)})
    out["metadata"]["labels"].update({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"})
    out["spec"] = {"podCIDR": f"10.{i // 250}.{i % 250}.0/24", "providerID": f"test:///{name}"}
    stamp = "2026-01-01T00:00:00Z"
    out["status"].update(
        conditions=[
            {
                "type": t,
                "status": "False",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
                "reason": f"KubeletHasSufficient{t}",
                "message": f"kubelet has sufficient {t}",
            }
            for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
        ]
        + [
            {
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
            }
        ],
        addresses=[
            {"type": "InternalIP", "address": f"10.250.{i // 250}.{i % 250}"},
            {"type": "Hostname", "address": name},
        ],
        daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
        nodeInfo={
            "machineID": name,
            "systemUUID": name,
            "bootID": name,
            "kernelVersion": "6.1.0",
            "osImage": "Debian GNU/Linux 13",
            "containerRuntimeVersion": "containerd://2.0.0",
            "kubeletVersion": "v1.34.0",
            "kubeProxyVersion": "v1.34.0",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
        images=[
            {
                "names": [
                    f"registry.example.com/team/image-{k}@sha256:{k:064x}",
                    f"registry.example.com/team/image-{k}:v1.{k}",
                ],
                "sizeBytes": 100_000_000 + k * 1_000_000,
            }
            for k in range(25)
        ],
    )
    return out


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
