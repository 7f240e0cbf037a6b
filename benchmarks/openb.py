"""Alibaba's openb GPU-sharing trace and the FGD paper's way of replaying it.

The trace is `cluster-trace-gpu-v2023` of alibaba/clusterdata (public research data that asks to
cite Weng et al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
Gradient Descent", USENIX ATC 2023; it states no licence, so it is never copied into this tree):

- the node list and the default pod list are read from `../shared/data/openb/` beside the project;
- the other pod lists (`gpushare*`, `multigpu*`, `gpuspec*`, `cpu*`, from the same clusterdata
  folder `csv/`) from a cache outside the tree: `$RULESCHED_OPENB_CACHE`, else
  `~/.cache/rulesched/openb/`, where a reader puts them (`find_trace` names what is missing);
- the paper's own results (its simulator's `experiments/analysis/expected_results/`, from
  hkust-adsl/kubernetes-scheduler-simulator) from `fgd-expected/` in that cache, when there.

**The method** is the paper's simulator's (`pkg/simulator/core.go`, `simulator.go`: `SortClusterPods`,
`TunePodsByNodeTotalResource`, `syncClusterResourceList`), one seeded random stream per run:

1. every pod of the trace, sorted by name and shuffled (`--shuffle-pod=true`);
2. then pods drawn with replacement from the trace (sorted by name) and appended while the GPU
   milli requested stays within 130% of the cluster's GPUs (the draw that would pass stops it; as
   in the simulator the test adds the drawn pod's per-GPU milli, its total is what is counted);
3. nodes ranked by a seeded permutation: the simulator prefixes node names with it and its
   kube-scheduler fork breaks ties between equal scores by the smallest name, so ties go to the
   lowest rank, the same node every time within a run.

Pods arrive in that order, each placed or failed once, and never leave. The simulator draws from
Go's math/rand; this module from Python's `random.Random(seed)`, so runs match the paper's in
distribution, not pod for pod.
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "openb"
NODE_LIST = "openb_node_list_gpu_node.csv"
MILLI = 1000

# The traces the paper's figures use (experiments/run_scripts/generate_run_scripts.py, FILELIST)
DEFAULT = "default"
VARIANTS = {
    "default": "Fig. 7, 9",
    "gpushare40": "Fig. 11",
    "gpushare60": "Fig. 11",
    "gpushare80": "Fig. 11",
    "gpushare100": "Fig. 11",
    "multigpu20": "Fig. 12",
    "multigpu30": "Fig. 12",
    "multigpu40": "Fig. 12",
    "multigpu50": "Fig. 12",
    "gpuspec10": "Fig. 13",
    "gpuspec20": "Fig. 13",
    "gpuspec25": "Fig. 13",
    "gpuspec33": "Fig. 13",
    "cpu050": "Fig. 14",
    "cpu100": "Fig. 14",
    "cpu200": "Fig. 14",
    "cpu250": "Fig. 14",
}


def cache_dir() -> Path:
    env = os.environ.get("RULESCHED_OPENB_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rulesched" / "openb"


@dataclass(frozen=True)
class GpuNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 1..1000; 0 for a pod without GPUs
    gpu_spec: tuple[str, ...] = ()  # acceptable models; empty: any

    @property
    def total_gpu_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def spec(self) -> tuple[int, int, int, int, tuple[str, ...]]:
        """What the policies read of a pod (its class)."""
        return (self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, self.gpu_spec)


class TraceError(Exception):
    pass


def find_trace(name: str) -> Path:
    """The pod list of a trace variant (`default`, `gpushare40`, ...) or a CSV path."""
    if name.endswith(".csv"):
        return Path(name)
    file = f"openb_pod_list_{name}.csv"
    for folder in (SHARED, cache_dir()):
        if (folder / file).is_file():
            return folder / file
    raise TraceError(
        f"{file} is in neither {SHARED} nor {cache_dir()}: copy it there from alibaba/clusterdata, "
        "cluster-trace-gpu-v2023/csv/ (or set RULESCHED_OPENB_CACHE)"
    )


def node_list() -> Path:
    for folder in (SHARED, cache_dir()):
        if (folder / NODE_LIST).is_file():
            return folder / NODE_LIST
    raise TraceError(f"{NODE_LIST} is in neither {SHARED} nor {cache_dir()}")


def _int(row: dict[str, str], key: str, path: Path, line: int) -> int:
    try:
        return int(float(row.get(key) or 0))
    except ValueError:
        raise TraceError(f"{path}:{line}: {key} {row.get(key)!r} is not a number") from None


def read_nodes(path: Path | None = None) -> list[GpuNode]:
    path = path or node_list()
    with path.open(newline="") as f:
        return [
            GpuNode(
                row["sn"],
                _int(row, "cpu_milli", path, i),
                _int(row, "memory_mib", path, i),
                _int(row, "gpu", path, i),
                row.get("model") or "",
            )
            for i, row in enumerate(csv.DictReader(f), start=2)
        ]


def read_pods(path: Path) -> list[TracePod]:
    """The pods of a trace file, as the simulator's pod_csv_to_yaml.py reads them (gpu_milli above
    1000 is 1000; a pod without GPUs has none)."""
    pods = []
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            num = _int(row, "num_gpu", path, i)
            milli = min(_int(row, "gpu_milli", path, i), MILLI) if num else 0
            if num and milli <= 0:
                raise TraceError(f"{path}:{i}: num_gpu {num} with gpu_milli {milli}")
            if num > 1 and milli != MILLI:
                raise TraceError(f"{path}:{i}: a pod of {num} GPUs must take them whole (gpu_milli {milli})")
            spec = tuple(m for m in (row.get("gpu_spec") or "").split("|") if m) if num else ()
            pods.append(
                TracePod(
                    row["name"], _int(row, "cpu_milli", path, i), _int(row, "memory_mib", path, i), num, milli, spec
                )
            )
    return pods


@dataclass(frozen=True)
class Workload:
    """One run's arrivals and node ranks (the paper's method, above)."""

    pods: tuple[TracePod, ...]
    node_rank: tuple[int, ...]  # node i (in the node list's order) has this rank; ties go to the lowest
    target_milli: int


def arrivals(trace: Sequence[TracePod], nodes: Sequence[GpuNode], seed: int, ratio: float = 1.3) -> Workload:
    rng = random.Random(seed)
    by_name = sorted(trace, key=lambda p: p.name)
    pods = list(by_name)
    rng.shuffle(pods)
    target = ratio * sum(n.gpus for n in nodes) * MILLI
    requested = sum(p.total_gpu_milli for p in pods)
    if requested > target:  # tuneDownPods: random pods leave until the requests fit the target
        while requested > target:
            requested -= pods.pop(rng.randrange(len(pods))).total_gpu_milli
    else:  # tuneUpPods
        i = 0
        while True:
            drawn = by_name[rng.randrange(len(by_name))]
            if requested + drawn.gpu_milli > target:
                break
            pods.append(TracePod(f"{drawn.name}-tuned-{i}", *drawn.spec))
            requested += drawn.total_gpu_milli
            i += 1
    order = sorted(range(len(nodes)), key=lambda i: nodes[i].name)
    perm = list(range(len(nodes)))
    rng.shuffle(perm)
    rank = [0] * len(nodes)
    for position, i in enumerate(order):
        rank[i] = perm[position]
    return Workload(tuple(pods), tuple(rank), int(target))


def typical_pods(trace: Sequence[TracePod], popularity: float = 0.95) -> list[tuple[float, TracePod]]:
    """The target workload FGD measures fragmentation against (`utils.GetTypicalPods` with the
    paper's settings: CPU pods included, 95% popularity, step 1): the pod shapes (cpu, GPUs, milli,
    models; not memory) by decreasing count, ties by the larger shape first, taken until they
    cover 95% of the trace's pods, their frequencies renormalised to sum to 1."""
    counts: dict[tuple[int, int, int, tuple[str, ...]], int] = {}
    for p in trace:
        key = (p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_spec)
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(
        counts.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], "|".join(kv[0][3])), reverse=True
    )
    total = len(trace)
    taken: list[tuple[tuple[int, int, int, tuple[str, ...]], int]] = []
    covered = 0
    for key, count in ranked:
        if covered >= popularity * total:
            break
        taken.append((key, count))
        covered += count
    return [
        (count / covered, TracePod(f"typical-{i}", cpu, 0, num, milli, spec))
        for i, ((cpu, milli, num, spec), count) in enumerate(taken)
    ]
