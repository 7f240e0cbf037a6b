"""How much does writing policy as rules cost, per (pod, node), against hand-written Python?

    python benchmarks/bench_rules.py [--policy bench|default] [--nodes 5000] [--pods 50] [--seed 1]
                                     [--repeat 5] [--profile]

``--policy default`` compares ``rules/default.rules`` (kube-scheduler's default profile) with its
hand-written twin in ``handwritten_default.py``; the default, ``--policy bench``, uses the rule
set below. The rule set is ``benchmarks/rules/bench.rules``: ten filters and five scores of the kinds
platform teams write (taints, nodeSelector, free resources, GPUs, an underlay-IP limit, host
ports, a zone pin, replicas per node; pod capacity, LeastAllocated, GPU bin-packing,
PreferNoSchedule taints, zone/lifecycle preference). ``handwritten_filter`` and
``handwritten_scores`` below do exactly the same checks the straightforward way, per (pod, node),
with no caching across calls.

Method:

* a synthetic cluster (deterministic by ``--seed``): ``--nodes`` NodeInfo objects with varied
  instance types, zones, pools, taints and 5-30 running pods each; ``--pods`` pending pods with
  varied requests, tolerations, node selectors, annotations and host ports;
* equivalence first: for every (pod, node), feasibility and every raw score value (the int a
  score rule yields before normalisation) must be equal, or the benchmark stops;
* then each variant is timed like a scheduling cycle: per pod, bind the rules once (the DSL's
  PreFilter), run the filters in rule order on every node stopping at the first failure, then
  the scores on the feasible nodes only (kube-scheduler's Filter then Score phases).
  time.perf_counter around each phase, the garbage collector off. The variants take turns pod
  by pod, ``--repeat`` times, and each pod counts with its fastest cycle per variant, so a burst
  of load from other processes is discarded instead of landing on one variant;
* every DSL cycle starts with a first bind: the rule set's cache of bindings by pod
  equivalence class is dropped (untimed) before each, as for a pod unlike any before it;
* "warm" keeps the node memos (node-only results the compiled rules cache per node) across pods,
  as between pods of a cycle when nothing changed: every warm cycle starts from the memos the
  equivalence pass filled. "cold" clears every node's memo before each pod (untimed), so every
  cached value is computed again for every pod;
* "warm" and "cold" call the bound rules' per-node functions (``BoundFilter.passes``,
  ``BoundScore.score``): the cost of evaluating the rules. "via feasible()+score_vector()" goes
  through the calls rulesched's scheduler makes, which add the failing filter's reasons and,
  for pods that share a binding with their equivalence class, stamp each node's outcome and
  score vector into its memo; "a replica of the last" then times the same pod again with
  nothing changed in between (another replica of a ReplicaSet), which those stamps answer.

``--profile`` runs the warm DSL path once more under cProfile and prints the top functions.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import platform
import pstats
import random
import resource
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

from benchmarks.handwritten_default import default_filter, default_scores  # noqa: E402
from rulesched import engine  # noqa: E402
from rulesched.cluster.nodeinfo import NodeInfo  # noqa: E402
from rulesched.engine import NodeColumns  # noqa: E402
from rulesched.lang import RuleSet, load_rules  # noqa: E402
from rulesched.lang.context import EvalContext  # noqa: E402
from rulesched.model import ContainerPort, Node, Pod, Taint, Toleration  # noqa: E402
from rulesched.semantics.matching import ports_conflict, tolerated  # noqa: E402

RULES = ROOT / "benchmarks" / "rules" / "bench.rules"
DEFAULT_RULES = ROOT / "rules" / "default.rules"

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

# --------------------------------------------------------------------------------------------
# The hand-written twin of benchmarks/rules/bench.rules: same checks, same order, written the
# plain way, per (pod, node). Kubernetes-semantics helpers (tolerated, ports_conflict) are the
# same library functions a Python plugin would import.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# The synthetic cluster
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Equivalence, then timing
# --------------------------------------------------------------------------------------------


class Twin:
    """The hand-written functions a rule set is compared with. ``with_ctx``: they also take the
    pod's evaluation context (the cluster-wide plugins of the default profile read it)."""

    def __init__(self, filter_fn: Any, scores_fn: Any, with_ctx: bool) -> None:
        self.filter, self.scores, self.with_ctx = filter_fn, scores_fn, with_ctx

    def for_pod(self, pod: Pod) -> tuple[Any, Any]:
        """(filter(node), scores(node)) for one pod, for the equivalence check."""
        if not self.with_ctx:
            return (lambda node: self.filter(pod, node)), (lambda node: self.scores(pod, node))
        ctx = EvalContext(pod)
        return (lambda node: self.filter(pod, node, ctx)), (lambda node: self.scores(pod, node, ctx))


TWINS = {
    "bench": Twin(handwritten_filter, handwritten_scores, False),
    "default": Twin(default_filter, default_scores, True),
}


def check_equivalence(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], twin: Twin
) -> tuple[int, int, Counter[tuple[str, str]]]:
    """Assert the DSL and the hand-written functions agree on every (pod, node); return the
    number of feasible pairs, of score values compared, and how often each rule runs in a
    scheduling cycle (filters up to the first failure, scores on feasible nodes)."""
    feasible = score_values = 0
    reached: Counter[tuple[str, str]] = Counter()
    for pod in pods:
        bound = rules.bind(pod)
        hand_filter, hand_scores = twin.for_pod(pod)
        for node in nodes:
            failed = None
            for f in bound.filters:
                reached[("filter", f.name)] += 1
                if not f.passes(node):
                    failed = f.name
                    break
            want = hand_filter(node)
            if (failed is None) != want:
                raise AssertionError(
                    f"{pod.name} on {node.name}: DSL says {'fails ' + failed if failed else 'fits'}, "
                    f"hand-written says {'fits' if want else 'fails'}"
                )
            # scores are compared on every node, feasible or not, to cover more values
            dsl = [s.score(node) for s in bound.scores]
            hand = hand_scores(node)
            if dsl != hand:
                names = [s.name for s in bound.scores]
                raise AssertionError(f"{pod.name} on {node.name}: scores {names}: DSL {dsl} != hand-written {hand}")
            feasible += want
            score_values += len(dsl)
            if want:
                reached.update(("score", s.name) for s in bound.scores)
    return feasible, score_values, reached


class Phases:
    """Seconds spent in each phase, summed over pods."""

    def __init__(self, bind: float = 0.0, filter: float = 0.0, score: float = 0.0, feasible: int = 0) -> None:
        self.bind, self.filter, self.score, self.feasible = bind, filter, score, feasible

    @property
    def total(self) -> float:
        return self.bind + self.filter + self.score

    def add(self, other: Phases) -> None:
        self.bind += other.bind
        self.filter += other.filter
        self.score += other.score
        self.feasible += other.feasible


def cycle_dsl(rules: RuleSet, nodes: Sequence[NodeInfo], pod: Pod) -> Phases:
    """One pod's scheduling cycle with the compiled rules: bind, filter every node, score the
    feasible ones."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    passes = tuple(f.passes for f in bound.filters)
    score_fns = tuple(s.score for s in bound.scores)
    t1 = clock()
    feasible = []
    for node in nodes:
        for fits in passes:
            if not fits(node):
                break
        else:
            feasible.append(node)
    t2 = clock()
    scored = [(node, [score(node) for score in score_fns]) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


def cycle_scheduler_api(rules: RuleSet, nodes: Sequence[NodeInfo], pod: Pod) -> Phases | None:
    """The same cycle through the calls rulesched's scheduler makes: ``BoundRules.feasible``
    (which also computes the failing filter's reasons, and with a shared binding stamps each
    node's outcome into its memo) and ``score_vector``. None where the API is not there."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    if not hasattr(bound, "feasible") or not hasattr(bound, "score_vector"):
        return None
    reasons: Counter[str] = Counter()

    def failed(node: Any, why: tuple[str, ...]) -> None:
        reasons.update(why)

    t1 = clock()
    feasible, _ = bound.feasible(nodes, 0, len(nodes), failed)
    t2 = clock()
    scored = [(node, bound.score_vector(node)) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


def cycle_columns(rules: RuleSet, cols: NodeColumns, pod: Pod) -> Phases:
    """The same cycle evaluated as columns over every node at once (engine.filter_mask and
    score_matrix, what the scheduler's node tables use for many nodes): bind, the feasible
    mask, the raw score matrix of the feasible nodes."""
    clock = time.perf_counter
    t0 = clock()
    bound = rules.bind(pod)
    rows = np.arange(len(cols.nodes), dtype=np.intp)
    t1 = clock()
    feasible = rows[engine.filter_mask(bound, cols, rows)]
    t2 = clock()
    matrix = engine.score_matrix(bound, cols, feasible)
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(matrix))


def check_columns(rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], twin: Twin) -> None:
    """Column evaluation must agree with the hand-written functions too: feasibility of every
    (pod, node), and every raw score on every node."""
    cols = NodeColumns(nodes)
    rows = np.arange(len(nodes), dtype=np.intp)
    for pod in pods:
        bound = rules.bind(pod)
        hand_filter, hand_scores = twin.for_pod(pod)
        mask = engine.filter_mask(bound, cols, rows).tolist()
        want = [bool(hand_filter(node)) for node in nodes]
        if mask != want:
            bad = next(i for i, (a, b) in enumerate(zip(mask, want, strict=True)) if a != b)
            raise AssertionError(f"{pod.name} on {nodes[bad].name}: columns say {mask[bad]}, hand-written {want[bad]}")
        matrix = engine.score_matrix(bound, cols, rows)[:, :-1].tolist()
        for node, got in zip(nodes, matrix, strict=True):
            if got != hand_scores(node):
                raise AssertionError(
                    f"{pod.name} on {node.name}: column scores {got} != hand-written {hand_scores(node)}"
                )


def forget_bindings(rules: RuleSet) -> None:
    """Drop the rule set's cache of bindings by pod equivalence class (where it has one), so
    that the next bind is a first bind, as for a pod unlike any before it."""
    session = getattr(rules, "session", None)
    if session is not None:
        session().classes.clear()


def cycle_handwritten(nodes: Sequence[NodeInfo], pod: Pod, twin: Twin) -> Phases:
    """The same cycle with the hand-written functions (nothing to bind but, for the default
    profile, the evaluation context its cluster-wide plugins take)."""
    clock = time.perf_counter
    t0 = clock()
    fits, scores = twin.filter, twin.scores
    if twin.with_ctx:
        ctx = EvalContext(pod)
        t1 = clock()
        feasible = [node for node in nodes if fits(pod, node, ctx)]
        t2 = clock()
        scored = [(node, scores(pod, node, ctx)) for node in feasible]
    else:
        t1 = clock()
        feasible = [node for node in nodes if fits(pod, node)]
        t2 = clock()
        scored = [(node, scores(pod, node)) for node in feasible]
    t3 = clock()
    return Phases(t1 - t0, t2 - t1, t3 - t2, len(scored))


class Memos:
    """Saves the rule set's node memos once (after the equivalence pass has filled them) to start
    every warm run from the same, fully cached state; clears them for cold runs."""

    def __init__(self, rules: RuleSet) -> None:
        self.memos = rules.node_memos
        self.saved = {name: (n, g, dict(values)) for name, (n, g, values) in self.memos.entries.items()}

    def restore(self) -> None:
        entries = self.memos.entries
        entries.clear()
        entries.update({name: (n, g, dict(values)) for name, (n, g, values) in self.saved.items()})

    def clear(self) -> None:
        self.memos.entries.clear()


VARIANTS = ("hand", "warm", "cold", "api", "replica", "columns", "columns_cold")


def measure(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], memos: Memos, repeat: int, twin: Twin
) -> dict[str, Phases]:
    """Per variant (see VARIANTS), the sum over pods of the pod's fastest cycle out of
    ``repeat``. The variants take turns pod by pod, so a burst of load on the machine hits one
    repetition of one pod, which the minimum then discards, not one whole variant. Every DSL
    cycle but "replica" starts with a first bind (no cached binding); untimed set-up between
    cycles is marked."""
    totals = {v: Phases() for v in VARIANTS}
    cols = NodeColumns(nodes)  # warm: columns kept across pods, as the scheduler keeps them
    rows = np.arange(len(nodes), dtype=np.intp)
    for pod in pods:  # untimed: build every column the pods' rules read
        engine.filter_mask(rules.bind(pod), cols, rows)
        engine.score_matrix(rules.bind(pod), cols, rows)
    gc.collect()
    gc.disable()
    try:
        for pod in pods:
            runs: dict[str, list[Phases]] = {v: [] for v in VARIANTS}
            for _ in range(repeat):
                runs["hand"].append(cycle_handwritten(nodes, pod, twin))
                memos.restore()  # untimed, as is everything on this side of a cycle call
                forget_bindings(rules)
                runs["warm"].append(cycle_dsl(rules, nodes, pod))
                memos.clear()
                forget_bindings(rules)
                runs["cold"].append(cycle_dsl(rules, nodes, pod))
                memos.restore()
                forget_bindings(rules)
                api = cycle_scheduler_api(rules, nodes, pod)
                if api is not None:
                    runs["api"].append(api)
                    # the next pod is a replica: same equivalence class, nothing changed
                    replica = cycle_scheduler_api(rules, nodes, pod)
                    assert replica is not None
                    runs["replica"].append(replica)
                memos.restore()
                forget_bindings(rules)
                runs["columns"].append(cycle_columns(rules, cols, pod))
                memos.clear()
                cold_cols = NodeColumns(nodes)  # every column (and group) built inside the cycle
                forget_bindings(rules)
                runs["columns_cold"].append(cycle_columns(rules, cold_cols, pod))
            for v, pod_runs in runs.items():
                if pod_runs:
                    totals[v].add(min(pod_runs, key=lambda p: p.total))
    finally:
        gc.enable()
        memos.restore()
        forget_bindings(rules)
    return {v: p for v, p in totals.items() if p.feasible or v in ("hand", "warm", "cold")}


def per_rule(
    rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], repeat: int
) -> list[tuple[str, str, float]]:
    """Each DSL rule alone, on every node for every pod it applies to (no short-circuit), warm
    memos, fastest of ``repeat`` per pod: (kind, name, µs per evaluation)."""
    rows: dict[str, list[Any]] = {}
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for pod in pods:
            bound = rules.bind(pod)
            fns = [("filter", f.name, f.passes) for f in bound.filters] + [
                ("score", s.name, s.score) for s in bound.scores
            ]
            for kind, name, fn in fns:
                fastest = float("inf")
                for _ in range(repeat):
                    t0 = clock()
                    for node in nodes:
                        fn(node)
                    fastest = min(fastest, clock() - t0)
                row = rows.setdefault(f"{kind} {name}", [kind, name, 0, 0.0])
                row[2] += len(nodes)
                row[3] += fastest
    finally:
        gc.enable()
    order = {(r.kind.value, r.name): i for i, r in enumerate(rules.checked.rules)}
    return [
        (k, n, secs / evals * 1e6) for k, n, evals, secs in sorted(rows.values(), key=lambda r: order[(r[0], r[1])])
    ]


def profile_dsl(rules: RuleSet, nodes: Sequence[NodeInfo], pods: Sequence[Pod], top: int) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    for pod in pods:
        cycle_dsl(rules, nodes, pod)
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return stream.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=5, help="timed cycles per pod and variant; the fastest counts")
    parser.add_argument(
        "--policy",
        choices=sorted(TWINS),
        default="bench",
        help="bench: benchmarks/rules/bench.rules; default: rules/default.rules",
    )
    parser.add_argument("--rules", help="rules file (must match the policy's hand-written twin)")
    parser.add_argument("--no-per-rule", action="store_true", help="skip the per-rule DSL table")
    parser.add_argument("--profile", action="store_true", help="cProfile the warm DSL path and print the top functions")
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    args = parser.parse_args(argv)
    twin = TWINS[args.policy]
    args.rules = args.rules or str(DEFAULT_RULES if args.policy == "default" else RULES)

    rules = load_rules([args.rules])
    n_filters, n_scores = len(rules.filters), len(rules.scores)
    t0 = time.perf_counter()
    nodes, pods = make_cluster(args.nodes, args.pods, args.seed)
    build = time.perf_counter() - t0
    running = sum(len(n.pods) for n in nodes)
    pairs = len(nodes) * len(pods)
    rel = Path(args.rules).resolve()
    shown = rel.relative_to(ROOT) if rel.is_relative_to(ROOT) else rel
    print(f"rulesched rules benchmark: {n_filters} filters + {n_scores} scores from {shown}")
    print(f"python {platform.python_version()} ({platform.python_implementation()}), seed {args.seed}")
    print(
        f"cluster: {len(nodes)} nodes, {running} running pods (built in {build:.1f}s); {len(pods)} pending pods; "
        f"{pairs} (pod, node) pairs"
    )

    feasible, score_values, reached = check_equivalence(rules, nodes, pods, twin)
    check_columns(rules, nodes, pods, twin)
    filter_evals = sum(reached[("filter", f.name)] for f in rules.filters)
    print(
        f"equivalence: OK - feasibility of all {pairs} pairs and {score_values} raw score values identical "
        "(node by node and as columns); "
        f"{feasible} feasible pairs ({100 * feasible / pairs:.1f}%), {filter_evals / pairs:.2f} filters run per pair"
    )

    forget_bindings(rules)
    memos = Memos(rules)  # the equivalence pass filled every node-only value there is
    results = measure(rules, nodes, pods, memos, args.repeat, twin)
    for p in results.values():
        assert p.feasible == feasible, (p.feasible, feasible)
    hand, warm, cold = results["hand"], results["warm"], results["cold"]

    def us(seconds: float, count: int) -> str:
        return f"{seconds / count * 1e6:9.3f}" if count else f"{'-':>9}"

    print()
    print(f"timing: per pod, the fastest of {args.repeat} cycles (variants interleaved), summed over pods; gc off;")
    print("µs per (pod, node) pair unless stated")
    print(f"{'variant':<34}{'total':>9}{'bind':>9}{'filter':>9}{'score':>9}  |{'bind µs':>9}{'score µs':>10}")
    print(f"{'':<34}{'/pair':>9}{'/pair':>9}{'/pair':>9}{'/pair':>9}  |{'/pod':>9}{'/scored':>10}")
    labels = {
        "hand": "hand-written",
        "warm": "DSL, warm node memos",
        "cold": "DSL, cold (memos cleared per pod)",
        "api": "DSL via feasible()+score_vector()",
        "replica": "  same, pod a replica of the last",
        "columns": "DSL as columns, warm columns",
        "columns_cold": "DSL as columns, columns built per pod",
    }
    for variant, p in results.items():
        bind_pod = f"{p.bind / len(pods) * 1e6:9.1f}" if p.bind else f"{'-':>9}"
        print(
            f"{labels[variant]:<34}{us(p.total, pairs)}{us(p.bind, pairs) if p.bind else f'{0:9.3f}'}"
            f"{us(p.filter, pairs)}{us(p.score, pairs)}  |{bind_pod}{us(p.score, feasible):>10}"
        )
    print()
    print(f"hand-written: {hand.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(f"DSL (warm):   {warm.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(f"DSL (cold):   {cold.total / pairs * 1e6:.3f} µs per (pod, node)")
    print(
        f"ratio DSL / hand-written: warm {warm.total / hand.total:.2f}, cold {cold.total / hand.total:.2f} "
        f"(filter phase {warm.filter / hand.filter:.2f}, score phase {warm.score / hand.score:.2f})"
    )
    if "api" in results:
        api, replica = results["api"], results["replica"]
        print(
            f"ratio through the scheduler's calls: {api.total / hand.total:.2f} for pods unlike any before, "
            f"{replica.total / hand.total:.2f} for a replica of the previous pod"
        )

    columns, columns_cold = results["columns"], results["columns_cold"]
    print(
        f"ratio DSL as columns (the scheduler's node tables) / hand-written: {columns.total / hand.total:.2f} "
        f"(filter phase {columns.filter / hand.filter:.2f}, score phase {columns.score / hand.score:.2f}); "
        f"with every column built in the cycle {columns_cold.total / hand.total:.2f}"
    )

    if not args.no_per_rule:
        print()
        print("DSL per rule: µs per evaluation, each rule alone on every node for every pod it applies to")
        print("(warm memos); 'in cycle': how often the rule runs in the timed cycle (filters stop at the first")
        print("failure, scores run on feasible nodes) and the µs per pair that makes:")
        for kind, name, micro in per_rule(rules, nodes, pods, min(args.repeat, 3)):
            runs = reached[(kind, name)]
            print(f"  {kind:<7}{name:<32}{micro:7.3f} µs  x {runs:>7} in cycle = {runs * micro / pairs:6.3f} µs/pair")

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    peak_mib = peak / 2**20 if sys.platform == "darwin" else peak / 2**10
    print()
    print(f"peak RSS: {peak_mib:.0f} MiB")

    if args.profile:
        memos.restore()
        print()
        print(f"cProfile of one warm DSL run (top {args.top} by own time; profiling inflates call costs):")
        print(profile_dsl(rules, nodes, pods, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
