"""Preemption dry-runs a bounded, rotating sample of the nodes it may help on, as kube-scheduler's
DefaultPreemption (calculateNumCandidates, GetOffsetAndNumCandidates, DryRunPreemption's stop):
the candidate count, the settings' validation, how many nodes a preemption dry-runs on a large
cluster and where its node comes from, and that ``rulesched simulate`` picks the same victims
for the same seed. (Upstream's TestDryRunPreemption cases for the sample are ported with the
other DefaultPreemption tables, in tests/upstream/test_defaultpreemption.py.)"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main
from rulesched.engine import ColumnStore, dryrun
from rulesched.errors import ConfigError
from rulesched.run.settings import RunSettings
from rulesched.scheduler import preemption
from rulesched.scheduler.evaluate import node_statuses
from rulesched.scheduler.framework import candidate_sampling_errors, check_sampling, num_candidates
from tests.upstream.harness import default_rules, node, pod, state

# numCandidates = max(minCandidateNodesAbsolute, numNodes * minCandidateNodesPercentage / 100),
# never more than numNodes: (numNodes, percentage, absolute, want). Upstream's own cases are the
# DryRunPreemption ones (5 nodes, 40% and 1 -> 2; 40% and 2 -> 2) and its defaults (10%, 100).
NUM_CANDIDATES = [
    ("defaults, fewer nodes than the absolute", 50, 10, 100, 50),
    ("defaults, the absolute", 500, 10, 100, 100),
    ("defaults, 1000 nodes: both 100", 1000, 10, 100, 100),
    ("defaults, the percentage", 5000, 10, 100, 500),
    ("upstream DryRunPreemption: 40% of 5, at least 1", 5, 40, 1, 2),
    ("upstream DryRunPreemption: 40% of 5, at least 2", 5, 40, 2, 2),
    ("percentage rounds down", 99, 10, 0, 9),
    ("percentage alone, 100%", 7, 100, 0, 7),
    ("absolute alone", 30, 0, 4, 4),
    ("absolute above the nodes", 3, 0, 20, 3),
    ("no potential nodes", 0, 10, 100, 0),
]


@pytest.mark.parametrize(
    ("n", "percentage", "absolute", "want"), [pytest.param(*c[1:], id=c[0]) for c in NUM_CANDIDATES]
)
def test_num_candidates(n: int, percentage: int, absolute: int, want: int) -> None:
    assert num_candidates(n, percentage, absolute) == want


# ValidateDefaultPreemptionArgs' rules: (percentage, absolute, errors)
VALIDATION = [
    ("defaults", 10, 100, 0),
    ("percentage 0, absolute set", 0, 100, 0),
    ("percentage 100, absolute 0", 100, 0, 0),
    ("negative percentage", -1, 100, 1),
    ("percentage over 100", 900, 100, 1),
    ("negative absolute", 20, -1, 1),
    ("both zero", 0, 0, 1),
    ("both negative", -1, -1, 2),
]


@pytest.mark.parametrize(("percentage", "absolute", "errors"), [pytest.param(*c[1:], id=c[0]) for c in VALIDATION])
def test_sampling_settings_validated_as_upstream(percentage: int, absolute: int, errors: int) -> None:
    assert len(candidate_sampling_errors(percentage, absolute)) == errors
    if errors:
        with pytest.raises(ConfigError, match="min_candidate_nodes"):
            check_sampling(percentage, absolute)
        with pytest.raises(ConfigError, match="min_candidate_nodes"):
            RunSettings(min_candidate_nodes_percentage=percentage, min_candidate_nodes_absolute=absolute)


def _full_cluster(n: int) -> Any:
    """n nodes of 1 CPU, each full with a priority-0 pod: the preemptor (1 CPU, priority 100)
    fits any of them once its pod goes, and every node is an equal candidate."""
    nodes = [node(f"n{i:04}", allocatable={"cpu": "1", "memory": "8Gi", "pods": "110"}) for i in range(n)]
    spec = {"priority": 0, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
    pods = [pod(f"low{i}", spec=spec, node_name=f"n{i:04}") for i in range(n)]
    return state(nodes, pods)


HIGH = pod(
    "high", spec={"priority": 100, "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}
)


@pytest.mark.parametrize("together", [False, True], ids=["node-by-node", "columns"])
def test_a_large_cluster_dry_runs_only_the_sample_from_the_offset(
    monkeypatch: pytest.MonkeyPatch, together: bool
) -> None:
    """1000 nodes, every one a candidate: 100 are dry-run (the defaults: max(100, 10%)), and the
    node chosen is one of the 100 from the offset the seeded source draws."""
    cluster = _full_cluster(1000)
    snapshot = cluster.snapshot()
    rules = default_rules()
    statuses = node_statuses(rules.bind(HIGH, snapshot), snapshot.nodes)
    tried: list[str] = []
    alone, many = preemption.select_victims, dryrun.dry_runs_together

    def one(overlay: Any, bound: Any, name: str, *rest: Any) -> Any:
        tried.append(name)
        return alone(overlay, bound, name, *rest)

    def at_once(bound: Any, base: Any, nodes: Any, *rest: Any) -> Any:
        tried.extend(n.name for n in nodes)
        return many(bound, base, nodes, *rest)

    monkeypatch.setattr(preemption, "select_victims", one)
    monkeypatch.setattr(preemption, "dry_runs_together", at_once)
    columns = ColumnStore().current(snapshot) if together else None
    result = preemption.preempt(snapshot, rules.session(), HIGH, statuses, None, columns, rng=random.Random(7))
    offset = random.Random(7).randrange(1000)
    window = [f"n{(offset + k) % 1000:04}" for k in range(100)]
    assert sorted(tried) == sorted(window)
    assert result.nominated in window and [v.name for v in result.victims] == [f"low{int(result.nominated[1:])}"]
    # the first of the equals in node order (as before sampling: pick_candidate's tie-break)
    assert result.nominated == min(window)


def test_every_node_is_tried_when_the_settings_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _full_cluster(300)
    snapshot = cluster.snapshot()
    tried: list[str] = []
    alone = preemption.select_victims
    monkeypatch.setattr(
        preemption, "select_victims", lambda o, b, name, *r: tried.append(name) or alone(o, b, name, *r)
    )
    sampling = preemption.Sampling(percentage=100, absolute=0)
    result = preemption.preempt(snapshot, default_rules().session(), HIGH, sampling=sampling, rng=random.Random(3))
    assert len(tried) == 300 and result.nominated == "n0000"


def _cluster_file(path: Path, n: int) -> Path:
    alloc = {"cpu": "1", "memory": "8Gi", "pods": "110"}
    items: list[dict[str, Any]] = []
    for i in range(n):
        name = f"n{i:04}"
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}})
    requests = {"requests": {"cpu": "1", "memory": "64Mi"}}
    for i in range(n):
        spec = {
            "nodeName": f"n{i:04}",
            "priority": 0,
            "containers": [{"name": "c", "image": "x", "resources": requests}],
        }
        meta = {"name": f"low{i}", "namespace": "default"}
        items.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}
        )
    for k in range(3):
        spec = {"priority": 100, "containers": [{"name": "c", "image": "x", "resources": requests}]}
        meta = {"name": f"high{k}", "namespace": "default"}
        items.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}
        )
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def _victims(capsys: pytest.CaptureFixture[str], cluster: Path, seed: int) -> list[tuple[str, list[str]]]:
    assert main(["simulate", str(cluster), "--output", "json", "--seed", str(seed)]) == 0
    rows = json.loads(capsys.readouterr().out)["pods"]
    return [(row["nominated"], row["victims"]) for row in rows]


def test_simulate_picks_the_same_victims_for_the_same_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """300 equal nodes, 3 preemptors: each preempts within the window its offset starts, so the
    victims depend on the seed, and the same seed gives the same ones."""
    cluster = _cluster_file(tmp_path / "cluster.yaml", 300)
    first, again = _victims(capsys, cluster, 11), _victims(capsys, cluster, 11)
    assert first == again and all(victims for _, victims in first)
    others = [_victims(capsys, cluster, seed) for seed in (12, 13)]
    assert any(other != first for other in others)  # (the offsets are the seed's)
