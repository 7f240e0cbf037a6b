"""The FGD paper's baselines as rule sets (rules/examples/gpu-baselines/) against the reference
model of its simulator (benchmarks/fgd_reference.py): on a small cluster of the trace's kind, pod
for pod, the same node and the same GPUs. The rule sets' own cases are worked by hand in their
*.test.yaml files (`rulesched test rules/examples/gpu-baselines`); this checks that, composed and
run by `simulate` over many pods, the rules place them as the paper's definitions do."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_fragmentation as bench  # noqa: E402
import fgd_reference as ref  # noqa: E402
from openb import TracePod, Workload, arrivals, typical_pods  # noqa: E402

from tests.helpers.openb_cluster import NODES, gpus_left, trace  # noqa: E402


def reference(
    workload: Workload,
    policy: str,
    monkeypatch: pytest.MonkeyPatch,
    typical: list[tuple[float, TracePod]] | None = None,
) -> tuple[dict[str, str | None], Any]:
    """The reference model's placements (ties by the node order) and its nodes at the end."""
    name_of = {rank: NODES[i].name for i, rank in enumerate(workload.node_rank)}
    placed: dict[str, str | None] = {p.name: None for p in workload.pods}
    built: list[list[ref.Node]] = []
    place, build = ref.place, ref.build_nodes

    def record(node: ref.Node, pod: TracePod, *args: Any) -> None:
        placed[pod.name] = name_of[node.rank]
        place(node, pod, *args)

    def keep(*args: Any) -> list[ref.Node]:
        built.append(build(*args))
        return built[-1]

    monkeypatch.setattr(ref, "place", record)
    monkeypatch.setattr(ref, "build_nodes", keep)
    ref.replay(NODES, workload, typical or [], policy, 42, tie="rank")
    return placed, {NODES[i].name: sorted(n.gpu_left) for i, n in enumerate(built[0])}


def runs() -> Iterator[tuple[str, str]]:
    yield "dotprod", "dotprod"
    yield "clustering", "clustering"
    yield "packing", "packing"


@pytest.mark.parametrize(("policy", "rules"), list(runs()))
def test_a_baseline_as_rules_places_every_pod_as_the_reference_model(
    policy: str, rules: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DotProd, GpuClustering and GpuPacking with the simulator's node order deciding ties: the
    same node for every pod (failures included), and every GPU left as the model leaves it (a
    shared pod's GPU is the best fit; a wrong GPU would also move later placements)."""
    workload = arrivals(trace(), NODES, 42)
    want, want_gpus = reference(workload, policy, monkeypatch)
    got, report = bench.place_with_rules(NODES, workload, bench.Run("t", rules, 42, "rules", "random"))
    assert got == want
    assert sum(node is None for node in got.values()) > 5  # the cluster fills: some pods fail
    assert gpus_left(report) == want_gpus


def test_best_fit_as_rules_places_every_pod_as_the_reference_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BestFit draws among equal nodes (best-fit.rules: its normalised score leaves no room for
    the node order): here the node order is put back, under it, to compare pod for pod."""
    order = tmp_path / "order.rules"
    order.write_text("override score best_fit weight 10000\nscore order_again:\n    9999 - min(node_rank, 9999)\n")
    workload = arrivals(trace(), NODES, 43)
    want, want_gpus = reference(workload, "bestfit", monkeypatch)
    rules = f"{bench.BASELINES_DIR / 'best-fit.rules'}+{order}"
    got, report = bench.place_with_rules(NODES, workload, bench.Run("t", rules, 43, "rules", "random"))
    assert got == want
    assert gpus_left(report) == want_gpus


def test_random_draws_nodes_and_fills_gpus_first_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Random: pods spread over the nodes at random (two seeds place differently); a shared
    pod's GPU is the allocator's first fit (the paper draws it: the language has no draw)."""
    workload = arrivals(trace(), NODES, 44)
    a, _ = bench.place_with_rules(NODES, workload, bench.Run("t", "random", 1, "rules", "random"))
    b, _ = bench.place_with_rules(NODES, workload, bench.Run("t", "random", 2, "rules", "random"))
    assert a != b
    assert len({n for n in a.values() if n}) == len(NODES)


def shipped_mix() -> list[tuple[float, TracePod]]:
    """The target workload rules/gpu-fragmentation.rules ships (its table `mix`), as the
    reference model's typical pods: (share, shape)."""
    text = (bench.BASELINES_DIR.parent.parent / "gpu-fragmentation.rules").read_text(encoding="utf-8")
    rows = [
        (int(n), int(cpu), int(gpus), int(milli))
        for n, cpu, gpus, milli in re.findall(r"\[(\d+), (\d+)m, (\d+), (\d+), \"\"\]", text)
    ]
    total = sum(r[0] for r in rows)
    assert len(rows) == 35
    return [(n / total, TracePod(f"typical-{i}", cpu, 0, gpus, milli)) for i, (n, cpu, gpus, milli) in enumerate(rows)]


def test_fgd_plus_as_rules_places_every_pod_as_the_reference_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rules/gpu-fragmentation-plus.rules against the reference model's `fgd-plus`, the
    node order put under both (FGD+ then BestFit then the order): the same node for every pod and
    every GPU left alike. FGD with BestFit (`fgd-bestfit`) places them otherwise, so the check
    tells the two policies apart."""
    order = tmp_path / "order.rules"
    order.write_text(
        "override score fgd weight 1010000\noverride score best_fit weight 10000\n"
        'score order_again:\n    9999 - min(number(quantity(node.labels["openb.example.com/rank"])), 9999)\n'
    )
    mix = shipped_mix()
    workload = arrivals(trace(300, seed=5), NODES, 45)
    want, want_gpus = reference(workload, "fgd-plus", monkeypatch, mix)
    rules = f"{bench.BASELINES_DIR.parent.parent / 'gpu-fragmentation-plus.rules'}+{order}"
    got, report = bench.place_with_rules(NODES, workload, bench.Run("t", rules, 45, "rules", "random"))
    assert got == want
    assert sum(node is None for node in got.values()) > 5
    assert gpus_left(report) == want_gpus
    want = dict(want)  # (the next replay's recorder calls this one's too)
    fgd_bestfit, _ = reference(workload, "fgd-bestfit", monkeypatch, mix)
    assert fgd_bestfit != want


def test_the_reference_model_measures_against_the_target_workload_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_fragmentation --target-workload: the reference FGD's typical pods are that trace's
    (the FGD rule sets ship the default trace's), else the run's own trace's, as the paper's."""
    traces = {"own": trace(200, seed=3), "other": trace(200, seed=7)}
    monkeypatch.setattr(bench.openb, "read_nodes", lambda: NODES)
    monkeypatch.setattr(bench.openb, "find_trace", lambda name: Path(name))
    monkeypatch.setattr(bench.openb, "read_pods", lambda path: traces[str(path)])
    seen: list[list[tuple[float, TracePod]]] = []
    replay = ref.replay

    def spy(nodes: Any, workload: Any, typical: Any, *args: Any) -> Any:
        seen.append(typical)
        return replay(nodes, workload, typical, *args)

    monkeypatch.setattr(bench.fgd_reference, "replay", spy)
    own = bench.run_one(bench.Run("own", "fgd-bestfit", 42, "reference", "random"))
    other = bench.run_one(bench.Run("own", "fgd-bestfit", 42, "reference", "random", target="other"))
    assert seen == [typical_pods(traces["own"]), typical_pods(traces["other"])] and seen[0] != seen[1]
    assert (own.target, other.target) == ("", "other") and own.pods == other.pods


def test_earlier_runs_are_tabled_again_from_their_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """bench_fragmentation --from: runs split over invocations (seeds, rule sets) in one table."""
    monkeypatch.setattr(bench.openb, "read_nodes", lambda: NODES)
    monkeypatch.setattr(bench.openb, "find_trace", lambda name: Path(name))
    monkeypatch.setattr(bench.openb, "read_pods", lambda path: trace(200, seed=3))
    files = []
    for policy in ("fgd-bestfit", "fgd-plus"):
        runs = [bench.run_one(bench.Run("t", policy, seed, "reference", "random")) for seed in (42, 43)]
        files.append(tmp_path / f"{policy}.json")
        files[-1].write_text(json.dumps([dataclasses.asdict(r) for r in runs]))
    assert bench.main(["--from", ",".join(map(str, files)), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "4 earlier runs, seeds [42, 43]" in out
    again = bench.read_results(files[0])
    assert again[0].curve and all(isinstance(k, int) for k in again[0].curve)
    figures = [r.figure for r in again]
    assert f"| fgd-bestfit | {bench.summary(figures)} | - |" in out
    assert "| fgd-plus | " in out
    assert bench.main(["--from", str(tmp_path / "missing.json")]) == 2
