"""A small cluster of the openb trace's kind for tests beside benchmarks/ (its openb.py,
fgd_reference.py, bench_fragmentation.py): twelve GPU nodes, trace-like pods, and the GPUs' free
milli after a simulation."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

from openb import MILLI, GpuNode, TracePod  # noqa: E402

# twelve nodes of the trace's shapes: GPU counts 2 to 8, three models, cpus 32 to 96
NODES = [
    GpuNode(f"node-{i:02}", cpus * 1000, 262_144, gpus, model)
    for i, (cpus, gpus, model) in enumerate(
        [(32, 2, "T4"), (64, 4, "V100M16"), (96, 8, "A100"), (96, 8, "V100M32")] * 3
    )
]


def trace(n: int = 200, seed: int = 3) -> list[TracePod]:
    """Pods of the trace's kinds: CPU pods, shared GPUs (some tied to a model), whole GPUs."""
    rng = random.Random(seed)
    pods = []
    for i in range(n):
        kind = rng.random()
        cpu = rng.choice([1000, 2000, 4000, 8000, 12000, 16000])
        if kind < 0.15:
            pods.append(TracePod(f"p{i:03}", cpu, 4096, 0, 0))
        elif kind < 0.65:
            spec = rng.choice([(), (), ("T4",), ("V100M16", "V100M32")])
            pods.append(TracePod(f"p{i:03}", cpu, 4096, 1, rng.choice([100, 200, 250, 300, 500, 700]), spec))
        else:
            pods.append(TracePod(f"p{i:03}", cpu, 4096, rng.choice([1, 1, 2, 4, 8]), MILLI))
    return pods


def gpus_left(report: Any) -> dict[str, list[int]]:
    """Each node's GPUs' free milli, sorted, from the claims simulate allocated."""
    used: dict[tuple[str, str], int] = {}
    for claim in report.state.dra.state.claims.values():
        for r in claim.allocation.devices if claim.allocation else ():
            used[(r.pool, r.device)] = used.get((r.pool, r.device), 0) + (r.consumed_capacity or {})["milli"] // 1000
    return {n.name: sorted(MILLI - used.get((n.name, f"gpu-{i}"), 0) for i in range(n.gpus)) for n in NODES}
