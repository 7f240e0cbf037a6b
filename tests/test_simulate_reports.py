"""Reports a reviewer can trust (issue 26): what a report was made from (rules, digest, inputs,
seed, percentage, version) in JSON and HTML; extended resources pods request (GPUs) beside cpu,
memory and pods; big clusters cut to their busiest nodes (``--nodes``); and ``--explain`` taken
from the cycle's own walk: the same placements as without it, the same per-node answers as the
node-by-node reference walk, its time accounted apart from the scheduling time."""

from __future__ import annotations

import gc
import importlib.util
import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched import __version__
from rulesched.cli import main
from rulesched.cluster.store import ClusterStore
from rulesched.engine import RUN_GC_THRESHOLDS
from rulesched.lang import load_rules, resolve_rules_path
from rulesched.scheduler import cycle as cycle_module
from rulesched.scheduler.framework import EXPLAIN_FULL, SchedulerSettings
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import load_cluster
from rulesched.simulate.report import render_json, summary_line
from rulesched.simulate.run import SimulateSettings, simulate

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
GPU = ROOT / "rules" / "examples" / "gpu-binpacking"


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> dict[str, Any]:
    code, out, err = run(capsys, "simulate", *args, "--output", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def write_cluster(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def node(name: str, cpu: str = "4", gpus: int = 0) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m", node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def generated(tmp_path: Path, workload: str, nodes: int, running: int, pending: int, seed: int) -> Path:
    """A cluster from benchmarks/gen_cluster.py (the benchmarks' generator, loaded by path)."""
    spec = importlib.util.spec_from_file_location("gen_cluster", ROOT / "benchmarks" / "gen_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / f"{workload}.json"
    path.write_text(json.dumps(module.generate(nodes, running, pending, workload, seed, 200)))
    return path


# --- provenance ------------------------------------------------------------------------------------


def test_json_summary_names_rules_digest_inputs_seed_percentage_and_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = load_rules([resolve_rules_path("default"), resolve_rules_path(str(GPU))])
    summary = as_json(
        capsys, GPU / "cluster.yaml", "--rules", "default", "--rules", GPU, "--seed", "7",
        "--percentage-of-nodes-to-score", "50",
    )["summary"]  # fmt: skip
    assert summary["rules"] == [str(f) for f in rules.files] and len(summary["rules"]) == 2
    assert summary["digest"] == rules.digest
    assert summary["inputs"] == [str(GPU / "cluster.yaml")]
    assert (summary["seed"], summary["percentage_of_nodes_to_score"]) == (7, 50)
    assert (summary["scheduler_name"], summary["version"]) == (None, __version__)
    assert "explain_seconds" not in summary  # (only an explained run has one)


def test_html_header_names_what_the_page_was_made_from(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", CLUSTER, "--seed", "3", "--output", "html")
    assert code == 0
    header = out[out.index("<header>") : out.index("</header>")]
    rules = load_rules([resolve_rules_path("default")])
    text = " ".join(re.sub(r"<[^>]+>", " ", header).split())
    assert f"rules {rules.files[0]} rules digest {rules.digest}" in text
    assert f"cluster files {CLUSTER}" in text
    assert "seed 3" in text and "percentage of nodes to score 0 (adaptive)" in text
    assert f"rulesched {__version__}" in text


# --- extended resources ----------------------------------------------------------------------------


def test_gpus_pods_request_get_a_column_and_bars(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", GPU / "cluster.yaml", "--rules", GPU)
    assert code == 0
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NODE"))
    assert header.split() == ["NODE", "CPU", "MEMORY", "PODS", "nvidia.com/gpu"]
    rows = {line.split()[0]: line.split()[-1] for line in lines[lines.index(header) + 1 :] if line.strip()}
    # 4 of 4 GPUs taken on gpu-a and gpu-b, 1 on gpu-c; the cpu node has none
    assert {n: rows[n] for n in ("gpu-a", "gpu-b", "gpu-c", "cpu-d")} == {
        "gpu-a": "4/4",
        "gpu-b": "4/4",
        "gpu-c": "1/4",
        "cpu-d": "-",
    }
    code, page, _ = run(capsys, "simulate", GPU / "cluster.yaml", "--rules", GPU, "--output", "html")
    assert code == 0
    assert "<th>nvidia.com/gpu</th>" in page
    assert '<span class="pct">100%</span>' in page and "4 / 4</span>" in page  # gpu-a's GPU bar


def test_no_column_for_a_resource_no_pod_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cluster(tmp_path / "c.yaml", [node("g1", gpus=8), node("n1"), pod("p")])
    code, out, _ = run(capsys, "simulate", path)
    assert code == 0
    assert next(line for line in out.splitlines() if line.startswith("NODE")).split() == [
        "NODE",
        "CPU",
        "MEMORY",
        "PODS",
    ]


# --- --nodes ---------------------------------------------------------------------------------------


def busy_cluster(tmp_path: Path, count: int) -> Path:
    """``count`` nodes; node i runs i % 4 one-cpu pods (n003, n007, ... are 75% busy)."""
    items = [node(f"n{i:03}") for i in range(count)]
    items += [pod(f"run-{i}-{k}", cpu="1", node_name=f"n{i:03}") for i in range(count) for k in range(i % 4)]
    return write_cluster(tmp_path / "big.yaml", [*items, pod("pending")])


def node_rows(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NODE"))
    end = lines.index("", start)
    return lines[start + 1 : end]


def test_big_tables_show_the_busiest_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = busy_cluster(tmp_path, 60)
    code, out, _ = run(capsys, "simulate", path)
    assert code == 0
    rows = node_rows(out)
    assert len(rows) == 20 + 1  # the default: the 20 busiest of more than 50, and what was cut
    names = [r.split()[0] for r in rows[:-1]]
    assert all(r.split()[1] == "75%" for r in rows[:15])  # the 15 nodes running 3 pods come first
    assert names[:3] == ["n003", "n007", "n011"]  # (equally busy: in cluster order)
    assert rows[-1] == (
        "(20 busiest of 60 nodes shown (by the highest use of cpu, memory, pods); 40 left out, --nodes 0 shows all)"
    )
    code, out, _ = run(capsys, "simulate", path, "--nodes", "2")
    assert [r.split()[0] for r in node_rows(out)] == ["n003", "n007", "(2"]
    code, out, _ = run(capsys, "simulate", path, "--nodes", "0")
    assert [r.split()[0] for r in node_rows(out)] == [f"n{i:03}" for i in range(60)]  # cluster order


def test_small_tables_and_bad_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", busy_cluster(tmp_path, 50))
    assert [r.split()[0] for r in node_rows(out)] == [f"n{i:03}" for i in range(50)]
    with pytest.raises(SystemExit) as exited:
        main(["simulate", str(CLUSTER), "--nodes", "-1"])
    assert exited.value.code == 2
    assert "--nodes: must be a whole number, 0 or more, not '-1'" in capsys.readouterr().err


def test_html_bars_follow_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", busy_cluster(tmp_path, 60), "--output", "html", "--nodes", "5")
    assert code == 0
    assert out.count('<span class="bar') == 3 * 5
    assert "55 of 60 nodes left out of the bars" in out
    assert out.count('<div class="heat">') == 3  # every node still in the heatmaps


# --- --explain: cost apart, placements and answers unchanged ---------------------------------------


def test_explain_leaves_placements_as_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for workload in ("mixed", "distinct"):
        path = generated(tmp_path, workload, 300, 300, 150, 3)
        plain = as_json(capsys, path, "--seed", "5")
        explained = as_json(capsys, path, "--seed", "5", "--explain")
        keys = ("pod", "node", "nominated", "victims", "message")
        assert [[r[k] for k in keys] for r in plain["pods"]] == [[r[k] for k in keys] for r in explained["pods"]]
        assert all(r["explanation"] is not None for r in explained["pods"])
    full = as_json(capsys, path, "--seed", "5", "--explain-full")  # (the distinct cluster)
    assert [r["node"] for r in full["pods"]] == [r["node"] for r in plain["pods"]]
    for row in full["pods"]:
        summary = row["explanation"]
        assert len(row["filtered"]) == summary["filtered"] and len(row["scores"]) == summary["scored"]
        assert len(row["unresolvable"]) == summary["unresolvable"]
        assert len(summary["scores"]) == min(10, summary["scored"])  # the best 10 only, even here
        assert summary["scores"] == {n: row["scores"][n] for n in summary["scores"]}


def test_explanations_match_the_node_by_node_walk(tmp_path: Path) -> None:
    """The table walk's full explanation gives every node the reasons, unresolvable status and
    scores the node-by-node walk (``explain``, the reference) records for it."""
    path = generated(tmp_path, "mixed", 200, 200, 80, 4)
    rules = load_rules([resolve_rules_path("default")])
    runs = []
    for settings in (SchedulerSettings(seed=2, explain=True), SchedulerSettings(seed=2, explanation=EXPLAIN_FULL)):
        objects = load_cluster([path])
        store = ClusterStore.build(
            objects.nodes, objects.running_pods, objects.pdbs, {ns.name: ns.labels for ns in objects.namespaces},
            objects.workloads,
        )  # fmt: skip
        simulation = Simulation(rules, store, settings)
        for p in objects.pending_pods:
            simulation.add(p)
        simulation.run()
        runs.append(simulation.history)
    reference, explained = runs
    compared = 0
    for key, ref in reference.items():
        got = explained[key]
        assert (got.node, got.attempts) == (ref.node, ref.attempts), key
        if ref.last is None or ref.last.filtered is None or not (ref.last.filtered or ref.last.scores):
            continue
        assert got.last is not None
        why = got.last.explanation
        assert why is not None, key
        assert dict(why.failed or {}) == ref.last.filtered, key
        assert why.unresolvable_nodes == frozenset(ref.last.unresolvable or ()), key
        assert why.scores() == ref.last.scores, key
        assert why.filtered == len(ref.last.filtered) and why.scored == len(ref.last.scores or {})
        compared += 1
    assert compared > 50


def test_explanation_time_is_accounted_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Explaining is timed by each cycle and left out of the scheduling time: made to take 20 ms
    a pod here, it shows up in ``explain_seconds``, and scheduling plus explaining never exceed
    the run's own duration."""
    real = cycle_module.explain_walk

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.02)
        return real(*args, **kwargs)

    monkeypatch.setattr(cycle_module, "explain_walk", slow)
    objects = load_cluster([CLUSTER])
    started = time.perf_counter()
    report = simulate(objects, SimulateSettings(cluster=(str(CLUSTER),), explain=True))
    elapsed = time.perf_counter() - started
    summary = report.summary()
    assert isinstance(summary["explain_seconds"], float) and summary["explain_seconds"] >= 0.02 * 4
    assert report.seconds + report.explain_seconds <= elapsed
    assert summary_line(summary).endswith(f" in {report.seconds:.3f}s")  # the line's time: scheduling alone


def test_json_is_written_a_pod_at_a_time_as_one_document(tmp_path: Path) -> None:
    objects = load_cluster([CLUSTER])
    report = simulate(objects, SimulateSettings(cluster=(str(CLUSTER),), explain=True, explain_full=True))
    text = render_json(report)
    assert text == json.dumps({"pods": report.rows(), "summary": report.summary()}, indent=2)
    empty = simulate(load_cluster([write_cluster(tmp_path / "e.yaml", [node("n1")])]), SimulateSettings(cluster=()))
    assert render_json(empty) == json.dumps({"pods": [], "summary": empty.summary()}, indent=2)


def test_summary_json_explanation_groups_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["pod"]: r for r in as_json(capsys, CLUSTER, "--explain")["pods"]}
    giant = rows["shop/giant"]["explanation"]
    assert set(giant) == {
        "evaluated",
        "filtered",
        "unresolvable",
        "reasons",
        "codes",
        "unresolvable_names",
        "scored",
        "scores",
    }
    assert (giant["evaluated"], giant["filtered"], giant["unresolvable"], giant["scored"]) == (4, 4, 4, 0)
    assert giant["reasons"][0] == {
        "reason": "Insufficient cpu",
        "nodes": 2,
        "unresolvable": 2,
        "names": ["small-a", "large-b"],
        "code": "InsufficientResource",
        "rule": "NodeResourcesFit",
    }
    cpu = next(c for c in giant["codes"] if c["resource"] == "cpu")
    assert (cpu["code"], cpu["nodes"], cpu["unresolvable_nodes"], cpu["unit"]) == (
        "InsufficientResource",
        2,
        2,
        "cores",
    )
    assert [c["code"] for c in rows["shop/giant"]["reason_codes"]] == [c["code"] for c in giant["codes"]]
    assert "filtered" not in rows["shop/giant"]  # every node's answers: --explain-full
    web = rows["shop/web-1"]["explanation"]
    assert list(web["scores"]) == ["large-b"] and web["scores"]["large-b"]["total"] == 400
    assert rows["shop/api"]["explanation"] is None  # its nominated node was taken without a walk


def test_the_collector_runs_seldom_while_pods_are_scheduled_and_as_before_after() -> None:
    """`simulate` raises the cyclic collector's thresholds for the run (a tenth of the openb
    replay's CPU time went to collecting: benchmarks/README.md, issue 38), the young
    generation's to the number of objects frozen before the run when more, and puts them back,
    also when the run fails."""
    before = gc.get_threshold()
    during: list[tuple[int, int, int]] = []
    frozen: list[int] = []

    def progress(_: int) -> None:
        during.append(gc.get_threshold())
        frozen.append(gc.get_freeze_count())

    objects = load_cluster([CLUSTER])
    simulate(objects, SimulateSettings(cluster=(str(CLUSTER),)), progress=progress)
    young, *older = RUN_GC_THRESHOLDS
    ((grown, *rest),) = set(during)
    # (frozen objects refcounting frees leave the frozen generation: a few since the run began)
    assert rest == older and grown >= max(young, frozen[0]) and (grown == young or grown - frozen[0] < 1_000)
    assert gc.get_threshold() == before

    def fail(_: int) -> None:
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError):
        simulate(load_cluster([CLUSTER]), SimulateSettings(cluster=(str(CLUSTER),)), progress=fail)
    assert gc.get_threshold() == before
