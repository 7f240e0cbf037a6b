"""The hand-written twin of benchmarks/rules/bench.rules: same checks, same order, written the
plain way, per (pod, node), with no caching across calls. Kubernetes-semantics helpers
(tolerated, ports_conflict) are the same library functions a Python plugin would import."""

from __future__ import annotations

from benchmarks.rules_bench.cluster import (
    GPU,
    INTERRUPTIBLE,
    LIFECYCLE,
    PREFERRED_ZONE,
    UNDERLAY,
    ZONE,
    ZONE_PIN,
)
from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.model import Pod
from rulesched.semantics.matching import ports_conflict, tolerated


def handwritten_filter(pod: Pod, node: NodeInfo) -> bool:
    if node.unschedulable:
        return False
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    for taint in node.taints:
        if taint.effect != "PreferNoSchedule" and not tolerated(taint, pod.tolerations):
            return False
    requests, free = pod.requests, node.free
    if free.get("cpu", 0) < requests.get("cpu", 0) or free.get("memory", 0) < requests.get("memory", 0):
        return False
    if len(node.pods) * 1000 >= node.allocatable.get("pods", 0):  # quantities are milli-units
        return False
    gpus = requests.get(GPU, 0)
    if gpus > 0 and free.get(GPU, 0) < gpus:
        return False
    if pod.annotations.get(UNDERLAY) == "underlay":
        underlay = 0
        for p in node.pods:
            if p.annotations.get(UNDERLAY) == "underlay":
                underlay += 1
        if underlay >= 10:
            return False
    if pod.host_ports and ports_conflict(pod.host_ports, node.used_ports):
        return False
    if ZONE_PIN in pod.annotations and labels.get(ZONE, "") != pod.annotations[ZONE_PIN]:
        return False
    if "app" in pod.labels:
        app, same = pod.labels["app"], 0
        for p in node.pods:
            if p.labels.get("app") == app:
                same += 1
        if same >= 3:
            return False
    return True


def handwritten_scores(pod: Pod, node: NodeInfo) -> list[int]:
    """The raw score of each score rule that applies to the pod, in rule order."""
    allocatable = node.allocatable
    scores = [int(100 - 100 * len(node.pods) / (allocatable["pods"] // 1000))]

    cpu, memory = allocatable["cpu"], allocatable["memory"]
    cpu_left = max(0, cpu - node.nonzero_requested.get("cpu", 0) - pod.nonzero_requests.get("cpu", 0))
    memory_left = max(0, memory - node.nonzero_requested.get("memory", 0) - pod.nonzero_requests.get("memory", 0))
    scores.append(int((cpu_left * 100 / cpu + memory_left * 100 / memory) / 2))

    gpus = pod.requests.get(GPU, 0)
    if gpus > 0:
        node_gpus = allocatable.get(GPU, 0)
        scores.append(int(100 * (node.requested.get(GPU, 0) + gpus) / node_gpus) if node_gpus > 0 else 0)

    untolerated = 0
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule" and not tolerated(taint, pod.tolerations):
            untolerated += 1
    scores.append(untolerated)

    labels = node.labels
    zone = 60 if labels.get(ZONE, "") == pod.annotations.get(PREFERRED_ZONE, "") else 0
    spot_ok = labels.get(LIFECYCLE) == "spot" and pod.labels.get(INTERRUPTIBLE, "") != "true"
    scores.append(zone + (0 if spot_ok else 40))
    return scores
