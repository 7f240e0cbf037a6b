"""A small, independent model of the FGD paper's simulator: its six policies in plain Python.

It exists to validate the fragmentation harness (bench_fragmentation.py) against the paper's
published figures before any rules are measured with it, and to stand beside the rules as a
reference. Each definition below names the file of hkust-adsl/kubernetes-scheduler-simulator it
follows; the facts are theirs, the code is ours.

What the simulator's scheduler runs (scripts/generate_config_and_run.py's scheduler config):
- filters: kube-scheduler's defaults (NodeResourcesFit: cpu and memory requests against
  allocatable) and Open-Gpu-Share (`plugin/open_gpu_share.go`): the node's GPU model must be one
  the pod accepts (`gpu_spec`), and a GPU pod needs `num_gpu` GPUs each with `gpu_milli` free;
- one score plugin (weight 1000; every default score disabled), percentageOfNodesToScore 100;
- ties between equal (integer) scores go to the smallest node name (its kube-scheduler fork's
  `selectHost`), names being prefixed with a seeded permutation: here `tie="rank"`. `tie="random"`
  draws among them, as upstream kube-scheduler and rulesched do;
- which GPU a pod gets (Open-Gpu-Share's Reserve): a pod of whole GPUs takes the free GPUs of
  lowest index (`AllocateExclusiveGpuId`); a shared pod the GPU its policy picks: `best` (the
  GPU with the least milli left that fits, lowest index first) for DotProd, Clustering, Packing
  and BestFit; a uniform draw for Random; FGD's own choice for FGD.

Memory is a filter only: no policy scores it and fragmentation ignores it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from openb import MILLI, GpuNode, TracePod, Workload

MAX_SPEC_CPU = 128_000  # gpushareutils.MaxSpecCpu: the normaliser of BestFit and DotProd
MAX_SPEC_GPU = 8_000  # gpushareutils.MaxSpecGpu
POLICIES = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd", "fgd-bestfit", "fgd-plus")
FILL_LAMBDA = 5.0  # FillFragmentation's rate: tuned on the default trace (benchmarks/README.md)
PAPER_NAMES = {
    "random": "Random",
    "dotprod": "DotProd",
    "clustering": "Clustering",
    "packing": "Packing",
    "bestfit": "BestFit",
    "fgd": "FGD",
}


@dataclass
class Node:
    cpu_cap: int
    cpu_left: int
    mem_left: int
    model: str
    gpu_left: list[int]
    rank: int
    affinity: Counter[str] = field(default_factory=Counter)  # GPU pods on the node by kind (Clustering)
    version: int = 0

    @property
    def gpu_total_left(self) -> int:
        return sum(self.gpu_left)


def accessible(model: str, pod: TracePod) -> bool:
    return not pod.gpu_spec or model in pod.gpu_spec


def fits(node: Node, pod: TracePod) -> bool:
    if node.cpu_left < pod.cpu_milli or node.mem_left < pod.memory_mib:
        return False
    if not pod.num_gpu:
        return True
    if not accessible(node.model, pod):
        return False
    return sum(1 for g in node.gpu_left if g >= pod.gpu_milli) >= pod.num_gpu


def affinity_tag(pod: TracePod) -> str:
    """`GetGpuAffinityFromPodAnnotation`: what Clustering groups GPU pods by."""
    return "share-gpu" if pod.shared else f"{pod.num_gpu}-gpu"


# --- fragmentation (pkg/utils/frag.go) ---------------------------------------------------------


class Fragmentation:
    """A node's expected GPU fragmentation against the target workload, FGD's measure
    (`NodeGpuShareFragAmountScore`): for each typical pod m, with its frequency p_m,
    - no GPUs asked (m is a CPU pod; `XL`/`XR`), the node's GPU model not acceptable (`NoAccess`),
      or m not fitting the node's cpu or GPUs (`Q1`, `Q2`, `Q4`): all of the node's free GPU milli;
    - m fitting (`Q3`): the free milli of the GPUs with less free than m asks per GPU (`Q2`);
    summed as p_m × that. Memory is not looked at. Memoised by the node's state."""

    def __init__(self, typical: Sequence[tuple[float, TracePod]]):
        self.typical = [(p, t.cpu_milli, t.gpu_milli, t.num_gpu, t.gpu_spec) for p, t in typical]
        self.memo: dict[tuple[str, int, tuple[int, ...]], float] = {}

    def of(self, model: str, cpu_left: int, gpu_left: Sequence[int]) -> float:
        key = (model, cpu_left, tuple(sorted(gpu_left)))
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = self._compute(model, cpu_left, key[2])
        return value

    def _compute(self, model: str, cpu_left: int, gpus: tuple[int, ...]) -> float:
        total = sum(gpus)
        if total == 0:
            return 0.0
        frag = 0.0
        for p, cpu, milli, num, spec in self.typical:
            if milli == 0 or (spec and model not in spec):
                frag += p * total
            elif cpu_left >= cpu and sum(1 for g in gpus if g >= milli) >= num:
                frag += p * sum(g for g in gpus if g < milli)
            else:
                frag += p * total
        return frag


class FillFragmentation(Fragmentation):
    """Not the paper's: fragmentation as the free milli the target workload is unlikely to fill.
    FGD's measure is, GPU by GPU, the free milli times the share of the workload that cannot use
    it (1 − s, s the share of typical pods that fit the node and ask at most that GPU's free
    milli). Here the free milli is weighed by exp(−λ s): the chance that none of λ typical pods
    (a Poisson number of them) could use it. A sliver only rare pods fit (190 milli beside an 810
    pod) then counts nearly whole, a GPU half the workload could fill hardly at all: a pod is
    placed to leave free space that *some* coming pod fits rather than space the *average* pod
    fits, which is what decides what is left idle once the cluster is full. λ → 0 is FGD
    (up to a factor λ)."""

    def __init__(self, typical: Sequence[tuple[float, TracePod]], rate: float = FILL_LAMBDA):
        super().__init__(typical)
        self.rate = rate

    def _compute(self, model: str, cpu_left: int, gpus: tuple[int, ...]) -> float:
        if sum(gpus) == 0:
            return 0.0
        share = [0.0] * len(gpus)
        for p, cpu, milli, num, spec in self.typical:
            if milli == 0 or (spec and model not in spec) or cpu_left < cpu:
                continue
            if sum(1 for g in gpus if g >= milli) < num:
                continue
            for i, g in enumerate(gpus):
                if g >= milli:
                    share[i] += p
        return sum(g * math.exp(-self.rate * s) for g, s in zip(gpus, share, strict=True))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def pack_subtract(gpu_left: list[int], pod: TracePod) -> list[int]:
    """`NodeResource.Sub`: the pod's GPUs taken from the GPUs with the least left that fit."""
    out = list(gpu_left)
    need = pod.num_gpu
    for i in sorted(range(len(out)), key=lambda i: out[i]):
        if need == 0:
            break
        if out[i] >= pod.gpu_milli:
            out[i] -= pod.gpu_milli
            need -= 1
    return out


def fgd_score(frag: Fragmentation, node: Node, pod: TracePod) -> tuple[int, int]:
    """plugin/fgd_score.go: 100 × sigmoid((fragmentation before − after) / 1000), truncated; for
    a shared pod the best over the GPUs it fits (the first such GPU on ties), which is the one it
    gets. Returns (score, GPU index or -1)."""
    before = frag.of(node.model, node.cpu_left, node.gpu_left)
    cpu_after = node.cpu_left - pod.cpu_milli
    if pod.shared:
        best, best_gpu = 0, -1
        for i, g in enumerate(node.gpu_left):
            if g >= pod.gpu_milli:
                after_gpus = list(node.gpu_left)
                after_gpus[i] -= pod.gpu_milli
                score = int(sigmoid((before - frag.of(node.model, cpu_after, after_gpus)) / 1000) * 100)
                if best_gpu < 0 or score > best:
                    best, best_gpu = score, i
        return best, best_gpu
    after = frag.of(node.model, cpu_after, pack_subtract(node.gpu_left, pod))
    return int(sigmoid((before - after) / 1000) * 100), -1


def fill_score(frag: Fragmentation, node: Node, pod: TracePod) -> tuple[int, int]:
    """`fgd-plus`: FGD's score over FillFragmentation, with a shared pod's GPU the best-fitting
    one (as rules/gpu-fragmentation-plus.rules chooses it with a device score), BestFit's raw
    score deciding among equal scores (weights 101 and 1, as `fgd-bestfit`)."""
    before = frag.of(node.model, node.cpu_left, node.gpu_left)
    if pod.shared:
        gpu = best_gpu(node, pod)
        after_gpus = list(node.gpu_left)
        after_gpus[gpu] -= pod.gpu_milli
    else:
        gpu, after_gpus = -1, pack_subtract(node.gpu_left, pod)
    after = frag.of(node.model, node.cpu_left - pod.cpu_milli, after_gpus)
    return 101 * int(sigmoid((before - after) / 1000) * 100) + bestfit_raw(node, pod), gpu


# --- the baselines' scores (pkg/simulator/plugin/*_score.go) ---------------------------------


def dotprod_score(node: Node, pod: TracePod) -> int:
    """dot_product_score.go, `merge` dimensions, `max` normalisation (the paper's run scripts):
    100 × (1 − (free cpu/128 cpus × cpu asked/128 cpus + free GPU milli/8000 × milli asked/8000) / 2),
    truncated: the node whose free resources align least with the pod's, the fullest."""
    dot = (node.cpu_left / MAX_SPEC_CPU) * (pod.cpu_milli / MAX_SPEC_CPU) + (node.gpu_total_left / MAX_SPEC_GPU) * (
        pod.total_gpu_milli / MAX_SPEC_GPU
    )
    return int(100 * (1 - dot / 2))


def clustering_score(node: Node, pod: TracePod) -> int:
    """gpu_clustering_score.go: GPU pods go where GPU pods of their kind (shared, or n whole GPUs)
    already run: 75-100 on a node running only that kind, 50-75 with other kinds too, 25-50 on a
    node without GPU pods, 0-25 on one running only other kinds; within a band, the fewer free GPU
    milli the higher (25 × used/8000, Go's integer division). CPU pods score 0 everywhere."""
    if not pod.num_gpu:
        return 0
    used = 25 * (MAX_SPEC_GPU - node.gpu_total_left) // MAX_SPEC_GPU
    tag = affinity_tag(pod)
    kinds = sum(1 for n in node.affinity.values() if n > 0)
    if node.affinity[tag] > 0:
        return used + (75 if kinds == 1 else 50)
    return used + (25 if kinds == 0 else 0)


def packing_score(node: Node, pod: TracePod) -> int:
    """gpu_packing_score.go, from high to low: (1) a pod that fits on partly used GPUs: 100 − the
    free share of the GPUs it would use (each in whole percent)/10, at least 50; (2) one that needs
    n free GPUs of a node already in use: 50 − n, at least 33; (3) a node whose GPUs are all free:
    33 − its GPU count (the simulator caps it from below at that count, which never binds). GPUs
    are taken least free first. CPU pods score 0 everywhere."""
    if not pod.num_gpu:
        return 0
    free = sum(1 for g in node.gpu_left if g == MILLI)
    if free == len(node.gpu_left):
        return max(100 // 3 - free, free)
    need, whole, used = pod.num_gpu, 0, []
    for i in sorted(range(len(node.gpu_left)), key=lambda i: node.gpu_left[i]):
        if need == 0:
            break
        if node.gpu_left[i] >= pod.gpu_milli:
            need -= 1
            used.append(i)
            whole += node.gpu_left[i] == MILLI
    if whole:
        return max(50 - whole, 100 // 3)
    share = sum(node.gpu_left[i] * 100 // MILLI for i in used)
    return max(100 - share // 10, 50)


def bestfit_raw(node: Node, pod: TracePod) -> int:
    """best_fit_score.go before normalisation: 100 × (1 − (½ cpu left after / 128 cpus + ½ GPU milli
    left after / 8000)), truncated; then min-max normalised over the feasible nodes."""
    left = (
        0.5 * (node.cpu_left - pod.cpu_milli) / MAX_SPEC_CPU
        + 0.5 * (node.gpu_total_left - pod.total_gpu_milli) / MAX_SPEC_GPU
    )
    return int((1.0 - left) * 100)


def minmax(scores: list[int]) -> list[int]:
    """plugin_utils.go NormalizeScore (and rulesched's `normalize minmax`)."""
    hi, lo = max(scores), min(scores)
    if hi == lo:
        return [0] * len(scores)
    return [(s - lo) * 100 // (hi - lo) for s in scores]


# --- GPU choice for shared pods (open_gpu_share.go) -----------------------------------------


def best_gpu(node: Node, pod: TracePod) -> int:
    choice = -1
    for i, g in enumerate(node.gpu_left):
        if g >= pod.gpu_milli and (choice < 0 or g < node.gpu_left[choice]):
            choice = i
    return choice


def random_gpu(node: Node, pod: TracePod, rng: random.Random) -> int:
    choice, seen = -1, 0
    for i, g in enumerate(node.gpu_left):
        if g >= pod.gpu_milli:
            seen += 1
            if rng.randrange(seen) == 0:
                choice = i
    return choice


# --- the replay --------------------------------------------------------------------------------


@dataclass
class Outcome:
    policy: str
    seed: int
    total_milli: int
    placed: int = 0
    failed: int = 0
    arrived_milli: list[int] = field(default_factory=list)  # after each pod
    allocated_milli: list[int] = field(default_factory=list)
    frag_milli: float = 0.0  # the cluster's fragmentation at the end (FGD's measure)
    gpus_by_model: dict[str, list[int]] = field(default_factory=dict)  # model -> [allocated milli, total milli]

    def at_arrival(self, percent: int) -> float | None:
        """The paper's figure (experiments/analysis/merge_alloc_discrete.py): the mean allocation
        (% of GPU milli) over the moments whose arrived requests round to `percent`% of the GPUs
        (within ±1 when none do)."""

        def pick(lo: float, hi: float) -> list[float]:
            return [
                100 * a / self.total_milli
                for r, a in zip(self.arrived_milli, self.allocated_milli, strict=True)
                if lo <= round(100 * r / self.total_milli) <= hi
            ]

        values = pick(percent, percent) or pick(percent - 1, percent + 1)
        return round(sum(values) / len(values), 2) if values else None

    @property
    def final_percent(self) -> float:
        return 100 * self.allocated_milli[-1] / self.total_milli if self.allocated_milli else 0.0


def build_nodes(nodes: Sequence[GpuNode], workload: Workload) -> list[Node]:
    return [
        Node(n.cpu_milli, n.cpu_milli, n.memory_mib, n.model, [MILLI] * n.gpus, workload.node_rank[i])
        for i, n in enumerate(nodes)
    ]


def replay(
    nodes: Sequence[GpuNode],
    workload: Workload,
    typical: Sequence[tuple[float, TracePod]],
    policy: str,
    seed: int,
    tie: str = "rank",
) -> Outcome:
    """Place the workload's pods in order with `policy`; tie `rank` (the paper's simulator) or
    `random` (kube-scheduler, rulesched)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; one of {', '.join(POLICIES)}")
    rng = random.Random(f"{seed}/{policy}")
    state = build_nodes(nodes, workload)
    frag = Fragmentation(typical)
    fill = FillFragmentation(typical)
    total = sum(len(n.gpu_left) for n in state) * MILLI
    out = Outcome(policy, seed, total)
    # per pod class, per node: (node version, score, GPU) — a node's answer moves only when it does
    cache: dict[tuple[object, ...], dict[int, tuple[int, int, int]]] = {}
    score: Callable[[Node, TracePod], tuple[int, int]] = {
        "random": lambda n, p: (0, -1),
        "dotprod": lambda n, p: (dotprod_score(n, p), -1),
        "clustering": lambda n, p: (clustering_score(n, p), -1),
        "packing": lambda n, p: (packing_score(n, p), -1),
        "bestfit": lambda n, p: (bestfit_raw(n, p), -1),
        "fgd": lambda n, p: fgd_score(frag, n, p),
        # not the paper's: FGD first, BestFit's raw score (0-100) among nodes FGD ties, as rules
        # weighted 101 and 1 would rank them; what rulesched needs, its ties being drawn
        "fgd-bestfit": lambda n, p: (lambda s, g: (101 * s + bestfit_raw(n, p), g))(*fgd_score(frag, n, p)),
        # not the paper's either: FGD's gradient over FillFragmentation (issue 38's "then beat it")
        "fgd-plus": lambda n, p: fill_score(fill, n, p),
    }[policy]
    arrived = allocated = 0
    for pod in workload.pods:
        arrived += pod.total_gpu_milli
        per_node = cache.setdefault(pod.spec, {})
        feasible: list[int] = []
        scores: list[int] = []
        gpus: list[int] = []
        for i, node in enumerate(state):
            hit = per_node.get(i)
            if hit is None or hit[0] != node.version:
                if fits(node, pod):
                    s, g = score(node, pod)
                    hit = (node.version, s, g)
                else:
                    hit = (node.version, -1, -1)
                per_node[i] = hit
            if hit[1] >= 0:
                feasible.append(i)
                scores.append(hit[1])
                gpus.append(hit[2])
        if not feasible:
            out.failed += 1
        else:
            if policy == "random":  # RandomScore's PreScore: one feasible node gets 100, the rest 0
                k = rng.randrange(len(feasible))
            else:
                if policy == "bestfit":
                    scores = minmax(scores)
                top = max(scores)
                ties = [k for k, s in enumerate(scores) if s == top]
                k = min(ties, key=lambda k: state[feasible[k]].rank) if tie == "rank" else rng.choice(ties)
            node = state[feasible[k]]
            place(node, pod, gpus[k], policy, rng)
            allocated += pod.total_gpu_milli
            out.placed += 1
        out.arrived_milli.append(arrived)
        out.allocated_milli.append(allocated)
    out.frag_milli = sum(frag.of(n.model, n.cpu_left, n.gpu_left) for n in state)
    for n in state:
        row = out.gpus_by_model.setdefault(n.model, [0, 0])
        row[0] += len(n.gpu_left) * MILLI - n.gpu_total_left
        row[1] += len(n.gpu_left) * MILLI
    return out


def place(node: Node, pod: TracePod, fgd_gpu: int, policy: str, rng: random.Random) -> None:
    node.cpu_left -= pod.cpu_milli
    node.mem_left -= pod.memory_mib
    node.version += 1
    if not pod.num_gpu:
        return
    node.affinity[affinity_tag(pod)] += 1
    if pod.shared:
        if policy.startswith("fgd"):
            gpu = fgd_gpu
        elif policy == "random":
            gpu = random_gpu(node, pod, rng)
        else:
            gpu = best_gpu(node, pod)
        node.gpu_left[gpu] -= pod.gpu_milli
        return
    need = pod.num_gpu
    for i, g in enumerate(node.gpu_left):  # AllocateExclusiveGpuId: free GPUs of lowest index
        if need and g == MILLI:
            node.gpu_left[i] = 0
            need -= 1
