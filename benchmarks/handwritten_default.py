"""The hand-written twin of rules/default.rules, for ``bench_rules.py --policy default``.

kube-scheduler's default profile written the plain way, per (pod, node), as a Python plugin
would: the same filters in the same order, the same raw scores. The Kubernetes-semantics helpers
(toleration, node-selector-term and port matching) and the cluster-wide plugins (inter-pod
affinity, topology spreading, image locality) are the same library functions the rules call.
bench_rules.py asserts that both agree on every (pod, node) before timing anything.
"""

from __future__ import annotations

import math

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.lang.builtins.topology import (
    existing_anti_affinity_ok,
    image_locality,
    inter_pod_affinity_score,
    pod_affinity_ok,
    pod_anti_affinity_ok,
    spread_ok,
    spread_score,
)
from rulesched.lang.context import EvalContext
from rulesched.model import Pod
from rulesched.semantics.matching import (
    node_selector_term_matches,
    ports_conflict,
    tolerated,
    tolerates,
)

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
FIRST = ("cpu", "memory", "ephemeral-storage")


def default_filter(pod: Pod, node: NodeInfo, ctx: EvalContext) -> bool:
    if node.unschedulable and not any(
        (t.key == UNSCHEDULABLE_TAINT or (t.key == "" and t.operator == "Exists"))
        and t.effect in ("NoSchedule", "")
        and (t.operator == "Exists" or t.value == "")
        for t in pod.tolerations
    ):
        return False
    if pod.node_name and pod.node_name != node.name:
        return False
    if pod.host_ports and ports_conflict(pod.host_ports, node.used_ports):
        return False
    if len(node.pods) * 1000 >= node.allocatable.get("pods", 0):  # quantities are milli-units
        return False
    free = node.free
    for resource, amount in pod.requests.items():
        if amount > 0 and amount > free.get(resource, 0):
            return False
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    terms = pod.required_node_affinity
    if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
        return False
    for taint in node.taints:
        if taint.effect != "PreferNoSchedule" and not tolerated(taint, pod.tolerations):
            return False
    if not (pod_affinity_ok(ctx, node) and pod_anti_affinity_ok(ctx, node) and existing_anti_affinity_ok(ctx, node)):
        return False
    if any(c.when_unsatisfiable == "DoNotSchedule" for c in pod.topology_spread_constraints):
        return spread_ok(ctx, node)
    return True


def _least_allocated(requested: int, wanted: int, allocatable: int) -> int:
    if allocatable == 0 or requested + wanted > allocatable:
        return 0
    return (allocatable - requested - wanted) * 100 // allocatable


def _balance(cpu_requested: int, cpu: int, memory_requested: int, memory: int) -> int:
    """How balanced the node's cpu and memory shares are (each capped at 1), 0 to 100."""
    cpu_share, memory_share = min(1, cpu_requested / cpu), min(1, memory_requested / memory)
    return int(math.floor((1 - abs(cpu_share - memory_share) / 2) * 100))


def default_scores(pod: Pod, node: NodeInfo, ctx: EvalContext) -> list[int]:
    """Raw scores of the rules that apply to the pod, in rule order."""
    untolerated = 0
    for taint in node.taints:
        if taint.effect == "PreferNoSchedule" and not any(
            t.effect in ("PreferNoSchedule", "") and tolerates(t, taint) for t in pod.tolerations
        ):
            untolerated += 1
    scores = [untolerated]
    scores.append(sum(p.weight for p in pod.preferred_node_affinity if node_selector_term_matches(p.preference, node)))
    if any(c.when_unsatisfiable == "ScheduleAnyway" for c in pod.topology_spread_constraints):
        scores.append(spread_score(ctx, node))
    scores.append(inter_pod_affinity_score(ctx, node))

    allocatable, nonzero = node.allocatable, node.nonzero_requested
    cpu, memory = allocatable.get("cpu", 0), allocatable.get("memory", 0)
    shares = _least_allocated(nonzero.get("cpu", 0), pod.nonzero_requests.get("cpu", 0), cpu) + _least_allocated(
        nonzero.get("memory", 0), pod.nonzero_requests.get("memory", 0), memory
    )
    resources = (cpu > 0) + (memory > 0)
    scores.append(shares // resources if resources else 0)

    requests = pod.requests
    if requests.get("cpu", 0) > 0 or requests.get("memory", 0) > 0:
        # BalancedAllocation as 1.36 scores it (#135573): the balance with the pod against without
        if cpu == 0 or memory == 0:
            scores.append(75)  # a single share: balanced with the pod and without
        else:
            requested = node.requested
            cpu_now, memory_now = requested.get("cpu", 0), requested.get("memory", 0)
            with_pod = _balance(cpu_now + requests.get("cpu", 0), cpu, memory_now + requests.get("memory", 0), memory)
            without = _balance(cpu_now, cpu, memory_now, memory)
            scores.append(50 + (50 + with_pod - without) // 2)
    scores.append(image_locality(ctx, node))
    return scores
