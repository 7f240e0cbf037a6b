"""The synthetic cluster of bench_rules.py, deterministic by seed: nodes of varied instance types,
zones, pools and taints with 5-30 running pods each, and pending pods with varied requests,
tolerations, node selectors, annotations and host ports. The label and annotation keys are the
ones benchmarks/rules/bench.rules reads."""

from __future__ import annotations

import random

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.model import ContainerPort, Node, Pod, Taint, Toleration

KI, MI, GI = 2**10 * 1000, 2**20 * 1000, 2**30 * 1000  # bytes as milli-units
GPU = "nvidia.com/gpu"
UNDERLAY = "network.example.com/mode"
ZONE_PIN = "scheduling.example.com/zone"
PREFERRED_ZONE = "scheduling.example.com/preferred-zone"
INTERRUPTIBLE = "workload.example.com/interruptible"
ZONE = "topology.kubernetes.io/zone"
POOL = "node.example.com/pool"
LIFECYCLE = "node.example.com/lifecycle"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
DEFAULT_CPU, DEFAULT_MEMORY = 100, 200 * MI  # kube-scheduler's non-zero request defaults

# name, cpus, memory GiB, max pods, GPUs, share of nodes
INSTANCE_TYPES = [
    ("m5.large", 2, 8, 29, 0, 10),
    ("m5.xlarge", 4, 16, 58, 0, 20),
    ("m5.2xlarge", 8, 32, 58, 0, 20),
    ("c5.4xlarge", 16, 32, 110, 0, 12),
    ("m5.4xlarge", 16, 64, 110, 0, 12),
    ("r5.2xlarge", 8, 64, 58, 0, 8),
    ("m5.8xlarge", 32, 128, 110, 0, 8),
    ("g4dn.12xlarge", 48, 192, 110, 4, 6),
    ("p3.8xlarge", 32, 244, 110, 4, 4),
]
ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
APPS = [f"app-{i:02d}" for i in range(60)]
APP_WEIGHTS = [1.0 / (i + 1) for i in range(len(APPS))]  # a few popular apps, a long tail
NODE_EXPORTER_PORT = ContainerPort(9100)
DEFAULT_TOLERATIONS = (  # what the API server adds to every pod
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 300),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", 300),
)


def _nonzero(requests: dict[str, int]) -> dict[str, int]:
    out = dict(requests)
    out["cpu"] = requests.get("cpu") or DEFAULT_CPU
    out["memory"] = requests.get("memory") or DEFAULT_MEMORY
    return out


def _split(total: int, n: int, rng: random.Random, step: int) -> list[int]:
    weights = [rng.random() + 0.1 for _ in range(n)]
    scale = total / sum(weights)
    return [int(w * scale) // step * step for w in weights]


def make_node(i: int, rng: random.Random) -> NodeInfo:
    itype, cpus, mem_gi, max_pods, gpus, _ = rng.choices(INSTANCE_TYPES, [t[5] for t in INSTANCE_TYPES])[0]
    name = f"node-{i:05d}"
    zone = ZONES[i % len(ZONES)]
    spot = rng.random() < 0.3
    pool = "gpu" if gpus else "highmem" if itype.startswith("r5") else "batch" if rng.random() < 0.1 else "general"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/region": "eu-west-1",
        ZONE: zone,
        INSTANCE_TYPE: itype,
        POOL: pool,
        LIFECYCLE: "spot" if spot else "on-demand",
    }
    capacity = {"cpu": cpus * 1000, "memory": mem_gi * GI, "pods": max_pods * 1000, "ephemeral-storage": 100 * GI}
    allocatable = {
        "cpu": cpus * 1000 - 70 - 10 * cpus,
        "memory": mem_gi * GI - (255 + 11 * max_pods) * MI,
        "pods": max_pods * 1000,
        "ephemeral-storage": 90 * GI,
    }
    if gpus:
        capacity[GPU] = allocatable[GPU] = gpus * 1000
    taints: list[Taint] = []
    unschedulable = rng.random() < 0.02
    if unschedulable:
        taints.append(Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"))
    if gpus:
        taints.append(Taint(GPU, "present", "NoSchedule"))
    if pool == "batch":
        taints.append(Taint("dedicated", "batch", "NoSchedule"))
    if spot:
        taints.append(Taint("node.example.com/spot", "true", "PreferNoSchedule"))
    if rng.random() < 0.1:
        taints.append(Taint("node.example.com/maintenance", "scheduled", "PreferNoSchedule"))
    if rng.random() < 0.01:
        taints.append(Taint("node.kubernetes.io/not-ready", "", "NoExecute"))
    node = Node(
        name,
        labels=labels,
        allocatable=allocatable,
        capacity=capacity,
        unschedulable=unschedulable,
        taints=tuple(taints),
        uid=f"uid-{name}",
    )

    n = rng.randint(5, min(30, max_pods))
    cpu_parts = _split(int(allocatable["cpu"] * rng.uniform(0.1, 1.0)), n, rng, 10)
    mem_parts = _split(int(allocatable["memory"] * rng.uniform(0.1, 1.0)), n, rng, MI)
    gpus_left = gpus
    pods = []
    for j in range(n):
        requests: dict[str, int] = {}
        if rng.random() > 0.08:  # the rest are best-effort
            requests = {"cpu": cpu_parts[j], "memory": mem_parts[j]}
        if gpus_left and rng.random() < 0.5:
            requests[GPU] = 1000
            gpus_left -= 1
        host_ports: tuple[ContainerPort, ...] = ()
        app = rng.choices(APPS, APP_WEIGHTS)[0]
        if j == 0 and rng.random() < 0.6:
            app, host_ports = "node-exporter", (NODE_EXPORTER_PORT,)
        elif rng.random() < 0.03:
            host_ports = (ContainerPort(rng.choice((8080, 8443))),)
        annotations = {UNDERLAY: "underlay"} if rng.random() < 0.35 else {}
        pods.append(
            Pod(
                f"{app}-{i}-{j}",
                labels={"app": app, "pod-template-hash": f"{j:x}"},
                annotations=annotations,
                uid=f"uid-{i}-{j}",
                node_name=name,
                phase="Running",
                requests=requests,
                nonzero_requests=_nonzero(requests),
                tolerations=DEFAULT_TOLERATIONS,
                host_ports=host_ports,
            )
        )
    return NodeInfo(node, pods)


def make_pending_pod(i: int, rng: random.Random) -> Pod:
    labels = {}
    if rng.random() < 0.8:
        labels["app"] = rng.choices(APPS, APP_WEIGHTS)[0]
    if rng.random() < 0.3:
        labels[INTERRUPTIBLE] = "true"
    annotations = {}
    if rng.random() < 0.25:
        annotations[UNDERLAY] = "underlay"
    if rng.random() < 0.08:
        annotations[ZONE_PIN] = rng.choice(ZONES)
    if rng.random() < 0.3:
        annotations[PREFERRED_ZONE] = rng.choice(ZONES)
    requests: dict[str, int] = {}
    if rng.random() > 0.06:
        requests = {
            "cpu": rng.choice((100, 250, 500, 1000, 2000, 4000)),
            "memory": rng.choice((128, 256, 512, 1024, 2048, 4096, 8192)) * MI,
        }
    tolerations = list(DEFAULT_TOLERATIONS)
    node_selector: dict[str, str] = {}
    if rng.random() < 0.1:
        requests[GPU] = rng.choice((1000, 1000, 2000))
        tolerations.append(Toleration(GPU, "Exists", "", "NoSchedule"))
        if rng.random() < 0.5:
            node_selector[POOL] = "gpu"
    r = rng.random()
    if r < 0.3:
        node_selector["kubernetes.io/os"] = "linux"
    elif r < 0.4:
        node_selector[POOL] = "highmem"
    elif r < 0.45:
        node_selector[INSTANCE_TYPE] = "m5.2xlarge"
    if rng.random() < 0.25:
        tolerations.append(Toleration("node.example.com/spot", "Equal", "true", "PreferNoSchedule"))
    if rng.random() < 0.1:
        tolerations.append(Toleration("dedicated", "Equal", "batch", "NoSchedule"))
    if rng.random() < 0.03:
        tolerations.append(Toleration("", "Exists"))  # tolerates everything
    host_ports: tuple[ContainerPort, ...] = ()
    if rng.random() < 0.08:
        host_ports = (ContainerPort(rng.choice((9100, 8080, 10250 + i))),)
    return Pod(
        f"pending-{i:03d}",
        labels=labels,
        annotations=annotations,
        uid=f"uid-pending-{i}",
        requests=requests,
        nonzero_requests=_nonzero(requests),
        node_selector=node_selector,
        tolerations=tuple(tolerations),
        host_ports=host_ports,
        creation_timestamp=1.7e9 + i,
    )


def make_cluster(n_nodes: int, n_pods: int, seed: int) -> tuple[list[NodeInfo], list[Pod]]:
    # separate streams, so the pending pods do not change with --nodes (nor the nodes with --pods)
    node_rng, pod_rng = random.Random(f"nodes-{seed}"), random.Random(f"pods-{seed}")
    nodes = [make_node(i, node_rng) for i in range(n_nodes)]
    pods = [make_pending_pod(i, pod_rng) for i in range(n_pods)]
    return nodes, pods
