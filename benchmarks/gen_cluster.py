"""Generate kube-scheduler-perf-like clusters as `kubectl get -o json` output (kind: List).

    python benchmarks/gen_cluster.py --nodes 5000 --running 1000 --pending 10000 \
        --workload basic --seed 1 > /tmp/cluster.json

Workloads (after upstream scheduler_perf's test cases):
  basic          SchedulingBasic: plain pods with small requests
  node-affinity  SchedulingNodeAffinity: pending pods require a zone label via node affinity
  spreading      TopologySpreading: zone spread constraint, maxSkew 1, DoNotSchedule
  anti-affinity  SchedulingPodAntiAffinity: each pod repels its own group on the hostname key
  mixed          like a real cluster: 4 node shapes, some tainted or cordoned; pending pods of 200
                 Deployments (--groups) interleaved, each with its own requests and image, some with
                 tolerations, nodeSelectors, preferred node affinity, zone spreading, anti-affinity
  distinct       the mixed cluster's nodes; no two pending pods alike (each its own memory request)
  volumes        StatefulSet-like: each pending pod mounts its own PersistentVolumeClaim of a zonal
                 WaitForFirstConsumer StorageClass (provisioned in zone-a or zone-b only), spread
                 over zones (ScheduleAnyway); every node has a CSINode with an attach limit of 39
  stops-fitting  the mixed cluster's nodes and running pods; pending pods each with their own cpu
                 request, more than the cluster holds: the last ~8% fit nowhere, and their
                 preemption finds no victims (every pod has the same priority)
  preemption     the mixed cluster's nodes, running pods of priority 0 to 3 (some under a
                 PodDisruptionBudget), and pending pods of priority 0 to 4 that need more room than
                 is free, so many cycles preempt
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


def _pod_object(name: str, labels: dict[str, str], spec: dict[str, Any], node_name: str | None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
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
    return _pod_object(name, labels, spec, node_name)


SHAPES = (  # (cpu, memory, pods): four node shapes
    ("4", "16Gi", "110"),
    ("8", "32Gi", "110"),
    ("16", "64Gi", "250"),
    ("32", "128Gi", "250"),
)


def real_node(i: int, rng: random.Random) -> dict[str, Any]:
    """A node of a mixed cluster: one of four shapes, three zones, 1 in 25 tainted for a team,
    1 in 100 cordoned; racks of 100 nodes."""
    out = node(i, rng)
    cpu, memory, pods = SHAPES[rng.randrange(len(SHAPES))]
    out["metadata"]["labels"]["node.kubernetes.io/instance-type"] = f"shape-{cpu}"
    out["metadata"]["labels"]["example.com/rack"] = f"rack-{i // 100}"  # 100 nodes a rack (domain rules)
    out["status"]["allocatable"] = out["status"]["capacity"] = {"cpu": cpu, "memory": memory, "pods": pods}
    if i % 25 == 7:
        out["spec"]["taints"] = [{"key": "team", "value": "batch", "effect": "NoSchedule"}]
    if i % 100 == 42:
        out["spec"]["unschedulable"] = True
    return out


def deployment_pod(name: str, d: int, node_name: str | None) -> dict[str, Any]:
    """A pod of Deployment ``d`` of a mixed workload: its own requests and image; one Deployment in
    ten tolerates the team taint, one in ten has a nodeSelector, one in ten a preferred node
    affinity, one in ten a zone spread constraint (DoNotSchedule), one in twenty preferred
    hostname anti-affinity against its own pods. The same ``d`` always gives the same spec."""
    rng = random.Random(d * 7919 + 17)
    app = f"deploy-{d}"
    labels = {"app": app, "pod-template-hash": f"{d:08x}", "team": f"team-{d % 13}"}
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "main",
                "image": f"registry.example.com/team-{d % 13}/{app}:v{rng.randrange(1, 9)}",
                "resources": {
                    "requests": {
                        "cpu": f"{rng.choice((50, 100, 200, 250, 500, 750, 1000))}m",
                        "memory": f"{rng.choice((64, 128, 256, 512, 1024, 2048))}Mi",
                    }
                },
            }
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    if d % 10 == 1:
        spec["tolerations"] = [{"key": "team", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
    if d % 10 == 2:
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": rng.choice(("shape-8", "shape-16"))}
    if d % 10 == 3:
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": rng.randrange(1, 100),
                        "preference": {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(ZONES)]}
                            ]
                        },
                    }
                ]
            }
        }
    if d % 10 == 4:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    if d % 20 == 5:
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    return _pod_object(name, labels, spec, node_name)


def distinct_pod(name: str, i: int) -> dict[str, Any]:
    """A pending pod unlike every other: its own memory request (and app label); CPU requests
    between 100m and 499m."""
    out = pod(name, "basic", 0, None, random.Random(i))
    out["metadata"]["labels"] = {"app": f"distinct-{i}"}
    requests = out["spec"]["containers"][0]["resources"]["requests"]
    requests["cpu"] = f"{100 + i % 400}m"
    requests["memory"] = str(128 * 2**20 + i * 4096)  # bytes: 128Mi and 4Ki more per pod
    return out


VOLUME_CLASS = "zonal-ssd"
CSI_DRIVER = "ebs.csi.aws.com"


def storage_objects(nodes: int) -> list[dict[str, Any]]:
    """The volumes workload's StorageClass (WaitForFirstConsumer, two zones of three) and a
    CSINode per node (39 attachments per node, as for many cloud instance types)."""
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": VOLUME_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": CSI_DRIVER,
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": list(ZONES[:2])}]}
            ],
        }
    ]
    out += [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": f"node-{i}"},
            "spec": {"drivers": [{"name": CSI_DRIVER, "nodeID": f"node-{i}", "allocatable": {"count": 39}}]},
        }
        for i in range(nodes)
    ]
    return out


def volume_pod(name: str, group: int) -> list[dict[str, Any]]:
    """A StatefulSet replica and its claim (volumeClaimTemplate "data")."""
    claim = f"data-{name}"
    out = pod(name, "basic", group, None, random.Random(0))
    out["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    out["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": out["metadata"]["labels"]},
        }
    ]
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": "default", "uid": f"uid-{claim}"},
        "spec": {
            "storageClassName": VOLUME_CLASS,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Pending"},
    }
    return [pvc, out]


def generate(nodes: int, running: int, pending: int, workload: str, seed: int, groups: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    if workload in ("mixed", "distinct", "stops-fitting", "preemption"):
        return _generate_real(nodes, running, pending, workload, rng, groups if groups > 1 else 200)
    if workload == "volumes":
        items = [node(i, rng) for i in range(nodes)] + storage_objects(nodes)
        for i in range(running):
            items.append(pod(f"running-{i}", "basic", i % groups, f"node-{rng.randrange(nodes)}", rng))
        for i in range(pending):
            items += volume_pod(f"pending-{i}", i % groups)
        return {"apiVersion": "v1", "kind": "List", "items": items}
    items = [node(i, rng) for i in range(nodes)]
    for i in range(running):
        items.append(pod(f"running-{i}", "basic", i % groups, f"node-{rng.randrange(nodes)}", rng))
    for i in range(pending):
        items.append(pod(f"pending-{i}", workload, i % groups, None, rng))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _generate_real(
    nodes: int, running: int, pending: int, workload: str, rng: random.Random, deployments: int
) -> dict[str, Any]:
    """A cluster like a real one: mixed node shapes, running pods of the Deployments, and
    pending pods from ``deployments`` Deployments interleaved in arrival order (``mixed``) or
    all different (``distinct``)."""
    items = [real_node(i, rng) for i in range(nodes)]
    for i in range(running):
        items.append(deployment_pod(f"running-{i}", rng.randrange(deployments), f"node-{rng.randrange(nodes)}"))
    if workload == "stops-fitting":
        items += _overflowing_pods(items, pending)
        return {"apiVersion": "v1", "kind": "List", "items": items}
    if workload == "preemption":
        items += _preempting_pods(items, pending, rng)
        return {"apiVersion": "v1", "kind": "List", "items": items}
    for i in range(pending):
        if workload == "mixed":
            items.append(deployment_pod(f"pending-{i}", rng.randrange(deployments), None))
        else:
            items.append(distinct_pod(f"pending-{i}", i))
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _milli_cpu(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(quantity) * 1000


def _free_cpu(items: list[dict[str, Any]]) -> int:
    """Millicores left on the schedulable nodes of ``items`` (nodes, then their running pods)."""
    free = {}
    for obj in items:
        if obj["kind"] == "Node" and not obj["spec"].get("unschedulable"):
            free[obj["metadata"]["name"]] = _milli_cpu(obj["status"]["allocatable"]["cpu"])
        elif obj["kind"] == "Pod" and obj["spec"].get("nodeName") in free:
            for c in obj["spec"]["containers"]:
                free[obj["spec"]["nodeName"]] -= _milli_cpu(c["resources"]["requests"]["cpu"])
    return sum(max(0, f) for f in free.values())


def _overflowing_pods(items: list[dict[str, Any]], pending: int) -> list[dict[str, Any]]:
    """Fill each node's first running pod up to 80-90% of the node's cpu, then ``pending`` pods
    unlike each other (own cpu request, own app label) asking together for 95% of the cpu the
    untainted nodes have left: with fragmentation, about 9% of them find no node."""
    cpu = {o["metadata"]["name"]: _milli_cpu(o["status"]["allocatable"]["cpu"]) for o in items if o["kind"] == "Node"}
    filled: set[str] = set()
    for i, obj in enumerate(items):
        node_name = obj["spec"].get("nodeName") if obj["kind"] == "Pod" else None
        if node_name and node_name not in filled:
            filled.add(node_name)
            share = 80 + (i * 37) % 11
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu[node_name] * share // 100}m"
    mean = _free_cpu(items) * 24 // 25 * 95 // 100 // max(1, pending)  # (1 node in 25 is tainted)
    out = []
    for i in range(pending):
        pod_ = distinct_pod(f"pending-{i}", i)
        requests = pod_["spec"]["containers"][0]["resources"]["requests"]
        requests["cpu"] = f"{max(10, mean // 2 + (i * 7919) % max(1, mean))}m"
        out.append(pod_)
    return out


def _preempting_pods(items: list[dict[str, Any]], pending: int, rng: random.Random) -> list[dict[str, Any]]:
    """Running pods get priorities 0-3 (one Deployment in four also a PodDisruptionBudget
    allowing one disruption); ``pending`` pods of priority 0-4 ask for 1.3x the free cpu."""
    budgets = []
    for obj in items:
        if obj["kind"] == "Pod":
            app = obj["metadata"]["labels"]["app"]
            d = int(app.rsplit("-", 1)[1])
            obj["spec"]["priority"] = d % 4
            if d % 4 == 1 and app not in budgets:
                budgets.append(app)
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": f"pdb-{app}", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": app}}},
        }
        for app in budgets
    ]
    mean = _free_cpu(items) * 13 // 10 // max(1, pending)
    for i in range(pending):
        pod_ = distinct_pod(f"pending-{i}", i)
        spec = pod_["spec"]
        spec["priority"] = rng.randrange(5)
        spec["containers"][0]["resources"]["requests"]["cpu"] = f"{max(10, mean // 2 + (i * 7919) % max(1, mean))}m"
        out.append(pod_)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--running", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument(
        "--workload",
        choices=(
            "basic",
            "node-affinity",
            "spreading",
            "anti-affinity",
            "mixed",
            "distinct",
            "volumes",
            "stops-fitting",
            "preemption",
        ),
        default="basic",
    )
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
