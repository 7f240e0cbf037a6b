"""Node load as rule fields: node.usage, node.metrics, node.metrics_age read from metrics files
(the NodeMetricsList kubectl prints, the simple map), placed pods' estimates in the store, the
compiled rules, the interpreter and the column engine agreeing on them, and --node-metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched import engine
from rulesched.cluster.store import ClusterStore
from rulesched.engine import NodeColumns
from rulesched.errors import InputError
from rulesched.lang.evaluation.interp import Interpreter
from rulesched.lang.evaluation.ruleset import RuleSet
from rulesched.lang.frontend.lint import LintSettings, lint
from rulesched.model import Node, Pod
from rulesched.model.decode_load import combine, decode_load_document, go_duration
from rulesched.model.load import NEVER_MEASURED, EstimateRules, LoadSnapshot, NodeLoad, NodeUsage, Sample
from tests.helpers.profiles import examples
from tests.helpers.rules import agree, load
from tests.upstream import harness

MI = 2**20
ROOT = Path(__file__).resolve().parent.parent


def node(name: str) -> Node:
    return harness.node(name, allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})


def pod(name: str, cpu: str = "", memory: str = "") -> Pod:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return harness.pod(name, spec={"containers": [{"name": "c", "resources": {"requests": requests}}]})


NODE_METRICS_LIST = {  # as `kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes` prints it
    "kind": "NodeMetricsList",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {},
    "items": [
        {
            "metadata": {"name": "n1", "creationTimestamp": "2026-11-26T10:00:05Z"},
            "timestamp": "2026-11-26T10:00:00Z",
            "window": "20.044s",
            "usage": {"cpu": "1500000000n", "memory": "2048Ki"},
        },
        {
            "metadata": {"name": "n2"},
            "timestamp": "2026-11-26T09:59:30Z",
            "window": "1m0s",
            "usage": {"cpu": "250m", "memory": "1Gi"},
        },
    ],
}


def test_node_metrics_list_is_read_with_relative_ages() -> None:
    snapshot = decode_load_document(NODE_METRICS_LIST, "nm.json")
    n1, n2 = snapshot.node("n1"), snapshot.node("n2")
    assert n1 is not None and n2 is not None
    assert (n1.cpu_milli, n1.memory_bytes) == (1500, 2048 * 1024)
    assert n1.usage is not None and n1.usage.window == pytest.approx(20.044)
    assert n1.ages(0.0) == {"usage": 0.0} and n2.ages(0.0) == {"usage": 30.0}
    usage, metrics, age = n2.fields(0.0)
    assert dict(usage) == {"cpu": 250, "memory": 2**30 * 1000} and dict(metrics) == {} and age == 30.0


def test_simple_format() -> None:
    doc = {
        "usage": {"n1": {"cpu": "2", "memory": "3Gi"}, "n2": {"cpu": "500m"}},
        "metrics": {"cpu_5m": {"n1": 41.5, "n3": 80}},
        "age_seconds": {"n1": 30},
        "pod_estimates": {"cpu_5m": 2.5},
    }
    snapshot = decode_load_document(doc, "m.yaml")
    assert sorted(snapshot.nodes) == ["n1", "n2", "n3"]
    n1 = snapshot.node("n1")
    assert n1 is not None and n1.fields(0.0)[1] == {"cpu_5m": 41.5} and n1.fields(0.0)[2] == 30.0
    assert snapshot.estimates.per_pod == {"cpu_5m": 2.5}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"usage": {"n1": {"cpu": "lots"}}}, "m.yaml: usage.n1.cpu"),
        ({"metrics": {"9bad": {"n1": 1}}}, "m.yaml: metrics.9bad: '9bad' is not a metric name"),
        ({"metrics": {"x": {"n1": "high"}}}, "m.yaml: metrics.x.n1: expected a number"),
        ({"age_seconds": {"n1": -1}}, "an age cannot be negative"),
        ({"usages": {}}, "m.yaml: usages: unknown field"),
        ({"kind": "PodMetricsList", "items": []}, "m.yaml: kind: expected NodeMetricsList"),
        ({"kind": "NodeMetricsList", "items": [{"metadata": {"name": "n1"}, "usage": {}}]}, "usage"),
        ([1, 2], "expected a NodeMetricsList or a mapping"),
    ],
)
def test_bad_documents_are_one_line_errors(doc: object, message: str) -> None:
    with pytest.raises(InputError) as err:
        decode_load_document(doc, "m.yaml")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_go_durations_and_combining_files() -> None:
    assert go_duration("1m0.5s") == 60.5 and go_duration("500ms") == 0.5 and go_duration("0s") == 0
    with pytest.raises(ValueError):
        go_duration("5 minutes")
    a = decode_load_document({"usage": {"n1": {"cpu": "1"}}}, "a.yaml")
    b = decode_load_document({"metrics": {"x": {"n1": 3}}}, "b.yaml")
    both = combine([("a.yaml", a), ("b.yaml", b)])
    loaded = both.node("n1")
    assert loaded is not None and loaded.cpu_milli == 1000 and loaded.metric("x") == 3
    with pytest.raises(InputError, match="b.yaml: usage of node n1 is given in a.yaml too"):
        combine([("a.yaml", a), ("b.yaml", a)])


def _store(load: LoadSnapshot, nodes: int = 2) -> ClusterStore:
    store = ClusterStore()
    for i in range(1, nodes + 1):
        store.add_node(node(f"n{i}"))
    store.set_load(load)
    return store


def test_placed_pods_add_their_requests_until_values_catch_up() -> None:
    clock = [1000.0]
    store = ClusterStore()
    store.load.clock = lambda: clock[0]
    store.add_node(node("n1"))
    store.add_node(node("n2"))
    measured = {"n1": NodeLoad(usage=NodeUsage(1000, 2 * MI, at=995.0, window=20.0))}
    store.set_load(LoadSnapshot(measured, now=1000.0))
    info = store.snapshot().nodes[0]
    assert info.usage["cpu"] == 1000 and info.metrics_age == 5.0
    assert store.snapshot().nodes[1].metrics_age == NEVER_MEASURED  # no values: no guard passes
    store.assume(pod("p", cpu="500m", memory="100Mi"), "n1")
    assert store.snapshot().nodes[0].usage == {"cpu": 1500, "memory": (2 * MI + 100 * MI) * 1000}
    # a value whose window started before the binding does not hold the pod yet
    clock[0] = 1010.0
    measured = {"n1": NodeLoad(usage=NodeUsage(1200, 2 * MI, at=1010.0, window=20.0))}
    store.set_load(LoadSnapshot(measured, now=1010.0))
    assert store.snapshot().nodes[0].usage["cpu"] == 1700
    # one taken a window after it does: the estimate goes
    clock[0] = 1031.0
    measured = {"n1": NodeLoad(usage=NodeUsage(1600, 2 * MI, at=1031.0, window=20.0))}
    store.set_load(LoadSnapshot(measured, now=1031.0))
    assert store.snapshot().nodes[0].usage["cpu"] == 1600


def test_a_forgotten_binding_takes_its_estimate_back_and_unknown_nodes_are_ignored() -> None:
    measured = {
        "n1": NodeLoad(usage=NodeUsage(1000, None, at=0.0)),
        "ghost": NodeLoad(usage=NodeUsage(9000, None, at=0.0)),
    }
    store = _store(LoadSnapshot(measured, now=0.0))
    assert [n.name for n in store.snapshot().nodes] == ["n1", "n2"]
    generation = store.node_generation
    store.assume(pod("p", cpu="700m"), "n1")
    assert store.snapshot().nodes[0].usage["cpu"] == 1700
    store.forget("default/p")
    assert store.snapshot().nodes[0].usage["cpu"] == 1000
    store.set_load(LoadSnapshot(measured, now=0.0))  # the same values: no node changes
    assert store.node_generation == generation


LOAD_RULES = """
score cool:
    if not has(node.usage, "cpu") then 0
    else 100 - 100 * node.usage.cpu / node.allocatable.cpu

score hot_query:
    if has(node.metrics, "cpu_5m") and node.metrics_age < 1min then 100 - node.metrics["cpu_5m"] else 0

filter fresh:
    node.metrics_age <= 120 or not has(node.usage, "memory")

score memory_left:
    (node.allocatable.memory - node.usage.memory) / 1Gi + node.metrics["absent"]
"""


def test_compiled_rules_interpreter_and_columns_agree_on_load_fields() -> None:
    usage = {f"n{i}": NodeUsage(250 * i, (i % 3) * 2**30 if i % 3 else None, at=-10.0 * i) for i in range(1, 9)}
    metrics = {f"n{i}": {"cpu_5m": Sample(7.5 * i, at=-20.0 * (i % 4))} for i in range(2, 9, 2)}
    nodes = {name: NodeLoad(usage=u, metrics=metrics.get(name, {})) for name, u in usage.items()}
    store = _store(LoadSnapshot(nodes, now=0.0), nodes=10)
    snapshot = store.snapshot()
    checked = load(LOAD_RULES)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    bound = rules.bind(pod("incoming", cpu="100m"), snapshot)
    infos = list(snapshot.nodes)
    agree(checked, interp, bound, infos, LOAD_RULES)
    rows = np.arange(len(infos), dtype=np.intp)
    by_columns = engine.score_matrix(bound, NodeColumns(infos), rows)
    assert [tuple(r) for r in by_columns.tolist()] == [bound.score_vector(n) for n in infos]
    assert [bound.score_vector(n)[0] for n in infos[:3]] == [93, 87, 81]  # 250m, 500m, 750m of 4 cpu used
    bound.release()


def test_rule_test_files_read_node_metrics(tmp_path: Path) -> None:
    (tmp_path / "load.rules").write_text(LOAD_RULES, encoding="utf-8")
    (tmp_path / "nm.json").write_text(json.dumps(NODE_METRICS_LIST), encoding="utf-8")
    (tmp_path / "load.test.yaml").write_text(
        """
rules: [load.rules]
nodes:
  - {metadata: {name: n1}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
  - {metadata: {name: n2}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
nodeMetrics:
  usage: {n1: {cpu: "1"}, n2: {cpu: "3"}}
  metrics: {cpu_5m: {n1: 80, n2: 10}}
  age_seconds: {n2: 120}
cases:
  - name: the file's metrics
    pod: {metadata: {name: p}, spec: {containers: [{name: c}]}}
    expect:
      scores: {n1: {cool: 75, hot_query: 20}, n2: {cool: 25, hot_query: 0}}
  - name: the case's own
    nodeMetrics: {metrics: {cpu_5m: {n2: 10}}}
    pod: {metadata: {name: p}, spec: {containers: [{name: c}]}}
    expect:
      scores: {n1: {cool: 0, hot_query: 0}, n2: {cool: 0, hot_query: 90}}
""",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "rulesched", "test", str(tmp_path / "load.test.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_simulate_and_diff_read_node_metrics(tmp_path: Path) -> None:
    cluster = {
        "kind": "List",
        "items": [
            *(
                {"kind": "Node", "metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
                for i in (1, 2)
            ),
            *(
                {
                    "kind": "Pod",
                    "metadata": {"name": f"p{j}", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                }
                for j in range(3)
            ),
        ],
    }
    (tmp_path / "cluster.json").write_text(json.dumps(cluster), encoding="utf-8")
    (tmp_path / "nm.json").write_text(json.dumps(NODE_METRICS_LIST), encoding="utf-8")
    (tmp_path / "load.rules").write_text(
        'extends "default"\n' + LOAD_RULES.replace("score cool:", "score cool weight 10:")
    )
    base = [sys.executable, "-m", "rulesched"]
    files = [str(tmp_path / "cluster.json"), "--node-metrics", str(tmp_path / "nm.json")]
    done = subprocess.run(
        [*base, "simulate", *files, "--rules", str(tmp_path / "load.rules"), "--output", "json", "--explain"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    pods = json.loads(done.stdout)["pods"]
    placed = {p["pod"]: p["node"] for p in pods}
    # explain shows the values the rules read and their age (n2's: its estimate of p0 included)
    assert pods[0]["explanation"]["load"] == {
        "n2": {"cpu": 250, "memory": 2**30, "age": 30.0},
        "n1": {"cpu": 1500, "memory": 2048 * 1024, "age": 0.0},
    }
    assert pods[1]["explanation"]["load"]["n2"]["cpu"] == 1250
    # n2 uses 250m, n1 1.5 cpu: the first two go to n2 (each adding its 1 cpu estimate), the third to n1
    assert placed == {"default/p0": "n2", "default/p1": "n2", "default/p2": "n1"}
    done = subprocess.run(
        [*base, "diff", *files, "--new", str(tmp_path / "load.rules"), "--output", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr  # (the default rules spread to n1 first: p0 moves)
    changed = json.loads(done.stdout)["pods"]
    assert changed[0]["explanation"]["load"]["n2"] == {"cpu": 250, "memory": 2**30, "age": 30.0}
    bad = tmp_path / "bad.yaml"
    bad.write_text("usage: {n1: {cpu: [}\n", encoding="utf-8")
    done = subprocess.run(
        [*base, "simulate", str(tmp_path / "cluster.json"), "--node-metrics", str(bad)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "bad.yaml:1:" in done.stderr, done.stderr


def test_lint_warns_on_load_reads_without_a_presence_or_age_test(tmp_path: Path) -> None:
    path = tmp_path / "g.rules"
    path.write_text(
        'extends "default"\n'
        "let hot = node.usage.cpu\n"
        "score a:\n    100 - number(hot)\n"
        'score b:\n    if has(node.metrics, "x") then node.metrics["x"] else 0\n'
        'score c:\n    if node.metrics_age < 1min then node.metrics["x"] else 0\n'
        'filter d:\n    node.metrics["x"] < 90\n',
        encoding="utf-8",
    )
    found = [d for d in lint(LintSettings((str(path),))).diagnostics if d.code == "unguarded-load"]
    assert [(d.location.rsplit(":", 2)[-2], d.message.split(" reads")[0]) for d in found] == [
        ("2", "score 'a'"),  # at the read, in the let the rule uses
        ("10", "filter 'd'"),
    ]
    bundled = [
        str(ROOT / "rules" / f"{name}.rules") for name in ("target-load-packing", "load-variation-risk-balancing")
    ]
    assert not [d for d in lint(LintSettings(tuple(bundled))).diagnostics if d.code == "unguarded-load"]


def test_estimates_scale_requests_and_add_a_fixed_amount_per_metric() -> None:
    rules = EstimateRules(cpu_percent=85, memory_percent=70, per_pod={"x": 2.5})  # Koordinator's factors
    measured = {
        "n1": NodeLoad(usage=NodeUsage(1000, MI, at=0.0), metrics={"x": Sample(40.0, at=0.0), "y": Sample(1.0, 0.0)})
    }
    store = _store(LoadSnapshot(measured, estimates=rules, now=0.0))
    store.assume(pod("a", cpu="1", memory="100Mi"), "n1")
    store.assume(pod("b"), "n1")  # asking nothing: kube-scheduler's non-zero 100m and 200Mi
    info = store.snapshot().nodes[0]
    assert info.usage == {"cpu": 1000 + 850 + 85, "memory": (MI + 70 * MI + 140 * MI) * 1000}
    assert info.metrics == {"x": 45.0, "y": 1.0}  # y has no per-pod estimate


def test_live_values_place_pods_on_the_clock_and_count_ages_at_publication() -> None:
    clock = [1000.0]
    store = ClusterStore()
    store.load.clock = lambda: clock[0]
    store.add_node(node("n1"))
    usage = {"n1": NodeLoad(usage=NodeUsage(1000, None, at=990.0, window=20.0))}
    store.set_load(LoadSnapshot(usage, now=1000.0, live=True))
    clock[0] = 1015.0  # placed 15 s after the publication
    store.assume(pod("p", cpu="500m"), "n1")
    assert store.snapshot().nodes[0].metrics_age == 10.0  # (as published)
    # taken at 1030 over 20 s: its window started at 1010, before the placement at 1015: pending
    store.set_load(LoadSnapshot({"n1": NodeLoad(usage=NodeUsage(1100, None, 1030.0, 20.0))}, now=1030.0, live=True))
    assert store.snapshot().nodes[0].usage["cpu"] == 1600
    store.set_load(LoadSnapshot({"n1": NodeLoad(usage=NodeUsage(1400, None, 1036.0, 20.0))}, now=1036.0, live=True))
    assert store.snapshot().nodes[0].usage["cpu"] == 1400


_LOADS = st.fixed_dictionaries(
    {
        "cpu": st.one_of(st.none(), st.integers(0, 10**7)),
        "memory": st.one_of(st.none(), st.integers(0, 2**50)),
        "x": st.one_of(st.none(), st.floats(-1e12, 1e12, allow_nan=False), st.integers(-(2**60), 2**60).map(float)),
        "age": st.floats(0, 10**6, allow_nan=False),
    }
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.none(), _LOADS), min_size=1, max_size=40), st.sampled_from(["100m", "2", ""]))
def test_load_fields_agree_node_by_node_as_columns_and_in_the_interpreter(
    loads: list[dict[str, Any] | None], cpu: str
) -> None:
    measured = {}
    for i, drawn in enumerate(loads, start=1):
        if drawn is None:
            continue
        usage = None
        if drawn["cpu"] is not None or drawn["memory"] is not None:
            usage = NodeUsage(drawn["cpu"], drawn["memory"], at=-drawn["age"])
        metrics = {} if drawn["x"] is None else {"cpu_5m": Sample(drawn["x"], at=-drawn["age"])}
        measured[f"n{i}"] = NodeLoad(usage=usage, metrics=metrics)
    store = _store(LoadSnapshot(measured, now=0.0), nodes=len(loads))
    store.assume(pod("placed", cpu="1"), "n1")  # (an estimate on one node)
    snapshot = store.snapshot()
    checked = load(LOAD_RULES)
    rules, interp = RuleSet(checked), Interpreter(checked.notes, checked.lets)
    bound = rules.bind(pod("incoming", cpu=cpu), snapshot)
    infos = list(snapshot.nodes)
    agree(checked, interp, bound, infos, LOAD_RULES)
    rows = np.arange(len(infos), dtype=np.intp)
    try:
        by_columns = [tuple(r) for r in engine.score_matrix(bound, NodeColumns(infos), rows).tolist()]
    except OverflowError:  # (a total beyond int64: the cycle then ranks node by node)
        by_columns = None
    if by_columns is not None:
        assert by_columns == [bound.score_vector(n) for n in infos]
    bound.release()
