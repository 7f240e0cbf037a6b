"""A GPU replay through `simulate` with FGD (the openb converter's objects), each pod's outcome:
what tests/test_gpu_replay_property.py and tests/test_kept_failures.py compare between the
engine's caches and the node-by-node walk (``explain``); and small clusters of the trace's GPU
nodes and pod sequences of its kinds to replay on them (Hypothesis strategies, also for
tests/test_dra_cache_reuse.py)."""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "benchmarks"))

import openb_to_k8s  # noqa: E402
from openb import MILLI, GpuNode, TracePod  # noqa: E402

from rulesched.simulate.load import load_cluster  # noqa: E402
from rulesched.simulate.run import SimulateSettings, simulate  # noqa: E402


def replay(
    nodes: list[GpuNode], pods: list[TracePod], seed: int, explain: bool, rules: str = "gpu-fragmentation"
) -> list[tuple[Any, ...]]:
    """Each pod's node, message, nomination and victims, the pods (arriving as drawn: enough to
    fill the nodes) through simulate with FGD (or ``rules``: a rules file's path)."""
    rank = list(range(len(nodes)))  # (the converter's node order label; FGD does not read it)
    random.Random(seed).shuffle(rank)
    items = list(openb_to_k8s.objects(nodes, pods, rank, "dra"))
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)
        f.flush()
        objects = load_cluster([f.name])
    report = simulate(
        objects,
        SimulateSettings(cluster=(), rules=(rules,), seed=seed, percentage_of_nodes_to_score=100, explain=explain),
    )
    return [(r["pod"], r["node"], r["message"], r["nominated"], r["victims"]) for r in report.iter_rows()]


MODELS = ("T4", "V100M16", "A100")


@st.composite
def gpu_nodes(draw: st.DrawFn) -> list[GpuNode]:
    count = draw(st.integers(2, 4))
    return [
        GpuNode(
            f"node-{i}",
            draw(st.sampled_from([16, 32, 64, 96])) * 1000,
            draw(st.sampled_from([65_536, 262_144])),
            draw(st.sampled_from([0, 1, 2, 4])),
            draw(st.sampled_from(MODELS)),
        )
        for i in range(count)
    ]


@st.composite
def gpu_pods(draw: st.DrawFn) -> list[TracePod]:
    shapes = draw(
        st.lists(
            st.one_of(
                st.tuples(st.sampled_from([1000, 4000, 12000]), st.just(0), st.just(0), st.just(())),
                st.tuples(
                    st.sampled_from([1000, 4000, 8000]),
                    st.just(1),
                    st.sampled_from([100, 250, 470, 500, 810]),
                    st.sampled_from([(), (), ("T4",), ("V100M16", "A100")]),
                ),
                st.tuples(
                    st.sampled_from([2000, 8000, 16000]), st.sampled_from([1, 2, 4]), st.just(MILLI), st.just(())
                ),
            ),
            min_size=1,
            max_size=6,
        )
    )
    memories = draw(st.lists(st.sampled_from([1024, 4096, 30_000, 120_000]), min_size=1, max_size=3, unique=True))
    picks = draw(
        st.lists(st.tuples(st.integers(0, len(shapes) - 1), st.integers(0, len(memories) - 1)), min_size=5, max_size=40)
    )
    return [
        TracePod(f"p{i:03}", shapes[s][0], memories[m], shapes[s][1], shapes[s][2], shapes[s][3])
        for i, (s, m) in enumerate(picks)
    ]
