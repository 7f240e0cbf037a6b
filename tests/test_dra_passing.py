"""Property: the DynamicResources precheck asked of many nodes in one call
(rulesched.semantics.dra_pod.PodClaims.passing, what a walk's rows checked as columns and the
failing walk's first failures use) answers as the filter asked afresh node by node: each pod's
claims found again without the store's memo, pools or any answer kept (issue 38's speed work).

Generated: small clusters of the openb trace's GPU nodes, GPU pods placed on them one after the
other by FGD (so nodes hold shares and whole GPUs), and after each placement the next pods'
answers on every node, asked twice (the second time from what the first kept).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import openb_to_k8s  # noqa: E402
from openb import MILLI, GpuNode, TracePod  # noqa: E402

from rulesched.lang import load_rules, resolve_rules_path  # noqa: E402
from rulesched.scheduler.framework import SchedulerSettings  # noqa: E402
from rulesched.semantics.cel import CelCache  # noqa: E402
from rulesched.semantics.dra_pod import pod_claims  # noqa: E402
from rulesched.simulate.driver import Simulation  # noqa: E402
from rulesched.simulate.load import load_cluster  # noqa: E402
from tests.helpers.gpu_replay import gpu_nodes  # noqa: E402

GPU_PODS = st.lists(
    st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([100, 470, 500, MILLI]), st.sampled_from([(), ("T4",)])),
    min_size=2,
    max_size=12,
)


def _pods(shapes: list[tuple[int, int, tuple[str, ...]]]) -> list[TracePod]:
    return [
        TracePod(f"p{i:02}", 1000, 1024, count if milli == MILLI else 1, milli, models)
        for i, (count, milli, models) in enumerate(shapes)
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=gpu_nodes(), shapes=GPU_PODS)
def test_many_nodes_at_once_answer_as_each_node_afresh(
    nodes: list[GpuNode], shapes: list[tuple[int, int, tuple[str, ...]]]
) -> None:
    pods = _pods(shapes)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": list(openb_to_k8s.objects(nodes, pods, list(range(len(nodes))))),
            },
            f,
        )
        f.flush()
        cluster = load_cluster([f.name])
    store = cluster.store(provision=True)
    rules = load_rules([resolve_rules_path("gpu-fragmentation")])
    sim = Simulation(rules, store, SchedulerSettings(seed=1))
    pending = list(cluster.pending_pods)
    asked = 0
    for at, pod in enumerate(pending):
        snapshot = store.snapshot()
        views = list(snapshot.nodes)
        for later in pending[at:]:
            bound = rules.bind(later, snapshot)
            claims = bound.dra_claims
            if claims is None:
                continue
            fresh = pod_claims(
                later, snapshot.dra, snapshot.dra_allocated, CelCache(), ranking=claims.ranking, ranking_key=None
            )
            expected = [not fresh.filter(view) for view in views]
            assert claims.passing(views) == expected
            assert claims.passing(views) == expected  # (from what the first call kept)
            asked += 1
            bound.release()
        sim.add(pod)
        while sim.schedule_one() is not None:
            pass
    assert asked or not any(s[1] for s in shapes)
