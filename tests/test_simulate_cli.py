"""``rulesched simulate`` as a user runs it: a subprocess, its exit status, stdout and stderr."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
PENDING = ["shop/web-1", "ml/trainer", "shop/api", "shop/payments", "shop/giant"]
POD_KEYS = {"pod", "node", "message", "nominated", "victims"}
SUMMARY_KEYS = {"gated", "scheduled", "unschedulable", "terminating", "preempted", "skipped", "scheduling_seconds"}
PROVENANCE_KEYS = {"rules", "digest", "inputs", "seed", "percentage_of_nodes_to_score", "scheduler_name", "version"}


def rulesched(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rulesched", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def simulate_json(*args: str | Path) -> dict[str, Any]:
    done = rulesched("simulate", *args, "--output", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def placements(result: dict[str, Any]) -> dict[str, str | None]:
    return {row["pod"]: row["node"] for row in result["pods"]}


def write_list(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110") -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m", node_name: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


# --- the bundled example ---------------------------------------------------------------------------


def test_table_has_a_row_per_pending_pod_and_node_utilisation() -> None:
    done = rulesched("simulate", CLUSTER)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["POD", "NODE", "NOMINATED", "VICTIMS", "MESSAGE"]
    blank = lines.index("")
    assert [line.split()[0] for line in lines[1:blank]] == PENDING
    nodes_header = lines[blank + 1]
    # ml/trainer asks for a GPU: a column of its own, "-" on nodes without any
    assert nodes_header.split() == ["NODE", "CPU", "MEMORY", "PODS", "nvidia.com/gpu"]
    node_rows = lines[blank + 2 : lines.index("", blank + 1)]
    assert [r.split()[0] for r in node_rows] == ["small-a", "large-b", "gpu-c", "cordoned-d"]
    for row in node_rows:
        assert re.fullmatch(r"\S+\s+(\d+%|-)\s+(\d+%|-)\s+\d+/\d+\s+(\d+/\d+|-)", row), row
    assert node_rows[2].split()[-1] == "2/4"
    assert re.fullmatch(r"4 scheduled, 1 unschedulable, 2 preempted in \d+\.\d{3}s", lines[-1])


def test_json_has_exactly_the_documented_shape() -> None:
    result = simulate_json(CLUSTER)
    assert set(result) == {"pods", "summary"}
    assert [row["pod"] for row in result["pods"]] == PENDING
    for row in result["pods"]:
        assert set(row) == POD_KEYS
        assert isinstance(row["message"], str) and isinstance(row["victims"], list)
        assert row["node"] is None or isinstance(row["node"], str)
        assert row["nominated"] is None or isinstance(row["nominated"], str)
    assert set(result["summary"]) == SUMMARY_KEYS | PROVENANCE_KEYS
    summary = result["summary"]
    assert (summary["scheduled"], summary["unschedulable"], summary["preempted"]) == (4, 1, 2)
    assert isinstance(summary["scheduling_seconds"], float)
    assert placements(result) == {
        "shop/web-1": "large-b",
        "ml/trainer": "gpu-c",
        "shop/api": "large-b",
        "shop/payments": "large-b",
        "shop/giant": None,
    }
    victims = {row["pod"]: row["victims"] for row in result["pods"]}
    assert sorted(victims["shop/api"] + victims["shop/payments"]) == ["jobs/batch-1", "jobs/batch-2"]


def test_explain_full_adds_every_nodes_filtered_and_scores() -> None:
    result = simulate_json(CLUSTER, "--explain-full")
    for row in result["pods"]:
        assert set(row) == POD_KEYS | {"explanation", "reason_codes", "filtered", "scores", "unresolvable"}
    rows = {row["pod"]: row for row in result["pods"]}
    assert rows["shop/giant"]["filtered"]["cordoned-d"] == ["node(s) were unschedulable"]
    assert sorted(rows["shop/giant"]["filtered"]["small-a"]) == ["Insufficient cpu", "Insufficient memory"]
    # cordoned, and smaller than giant even empty: preemption cannot help on any of them
    assert rows["shop/giant"]["unresolvable"] == sorted(rows["shop/giant"]["filtered"])
    web = rows["shop/web-1"]
    assert "small-a" in web["filtered"]  # anti-affinity with web-0
    # evicting web-0 would help on small-a; not on the cordoned node
    assert "small-a" not in web["unresolvable"] and "cordoned-d" in web["unresolvable"]
    assert web["node"] in web["scores"] and "small-a" not in web["scores"]
    weights = {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesFit": 1,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    for per_node in web["scores"].values():
        assert per_node["total"] == sum(weights[k] * v for k, v in per_node.items() if k != "total")
    assert max(web["scores"], key=lambda n: web["scores"][n]["total"]) == web["node"]


def test_the_same_cluster_as_json_gives_the_same_placements(tmp_path: Path) -> None:
    as_json = tmp_path / "cluster.json"
    as_json.write_text(json.dumps(yaml.safe_load(CLUSTER.read_text())))
    assert placements(simulate_json(as_json)) == placements(simulate_json(CLUSTER))


# --- message format --------------------------------------------------------------------------------


def test_unschedulable_message_counts_and_sorts_reasons_then_preemption() -> None:
    rows = {row["pod"]: row for row in simulate_json(CLUSTER)["pods"]}
    message = rows["shop/giant"]["message"]
    match = re.fullmatch(r"0/4 nodes are available: (.*)\. (preemption: .*)", message)
    assert match, message
    reasons = match.group(1).split(", ")
    assert reasons == sorted(reasons)
    # the gpu node is tainted as well as too small: its first failing filter in kube-scheduler's
    # order (TaintToleration before NodeResourcesFit) names the taint
    assert reasons == [
        "1 node(s) had untolerated taint {nvidia.com/gpu: present}",
        "1 node(s) were unschedulable",
        "2 Insufficient cpu",
        "2 Insufficient memory",
    ]
    # giant asks for more than any node has in all, cordoned-d is cordoned and the gpu node
    # tainted: every failure is unresolvable, so preemption tries no node
    assert match.group(2) == "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."


def test_preemption_that_cannot_help_is_reported(tmp_path: Path) -> None:
    cluster = write_list(
        tmp_path / "c.yaml",
        [node("n1", cpu="2"), pod("low", cpu="1", node_name="n1", priority=-5), pod("big", cpu="8", priority=100)],
    )
    (row,) = simulate_json(cluster)["pods"]
    assert row["node"] is None and row["victims"] == [] and row["nominated"] is None
    assert row["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


# --- options ---------------------------------------------------------------------------------------


def test_seed_makes_tie_breaking_reproducible(tmp_path: Path) -> None:
    # eight identical nodes, pods that request nothing: every cycle is an eight-way tie
    cluster = write_list(
        tmp_path / "ties.yaml", [node(f"n{i}") for i in range(8)] + [pod(f"p{i}", cpu="0") for i in range(12)]
    )
    runs = {seed: placements(simulate_json(cluster, "--seed", str(seed))) for seed in range(3)}
    assert runs[1] == placements(simulate_json(cluster, "--seed", "1"))
    assert len({tuple(r.values()) for r in runs.values()}) > 1, "seeds should break ties differently"


def test_scheduler_name_restricts_the_pods_scheduled(tmp_path: Path) -> None:
    cluster = write_list(
        tmp_path / "c.yaml",
        [node("n1"), pod("mine", schedulerName="rulesched"), pod("theirs"), pod("other", schedulerName="other")],
    )
    assert set(placements(simulate_json(cluster))) == {"default/mine", "default/theirs", "default/other"}
    only = simulate_json(cluster, "--scheduler-name", "rulesched")
    assert placements(only) == {"default/mine": "n1"}
    assert only["summary"]["scheduled"] == 1
    assert set(placements(simulate_json(cluster, "--scheduler-name", "default-scheduler"))) == {"default/theirs"}


def test_rules_folder(tmp_path: Path) -> None:
    folder = ROOT / "rules" / "examples" / "underlay-ip"
    result = simulate_json(folder / "cluster.yaml", "--rules", folder)
    assert placements(result)["net/underlay-2"] is None
    assert "node has no free underlay IP" in result["pods"][1]["message"]
    # several --rules compose in order: a later file can disable an earlier one's rule
    extra = tmp_path / "lift.rules"
    extra.write_text("disable filter underlay_ips\n")
    lifted = simulate_json(folder / "cluster.yaml", "--rules", folder / "policy.rules", "--rules", extra)
    assert placements(lifted)["net/underlay-2"] is not None


# --- bad input: one line on stderr naming the file, no traceback ------------------------------------
# (a pod bound to a missing node is skipped with a warning, an error only with --strict: test_simulate_ux)

OBJECTS = "kind: List\nitems:\n- {kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '4', pods: '10'}}}\n"

BAD = {
    "yaml": ("c.yaml", "kind: List\nitems:\n- {kind: Node, metadata: {name: a}\n", ["invalid YAML", "c.yaml:4:"]),
    "json": ("c.json", '{"kind": "List", "items": [}', ["invalid JSON", "c.json:1:"]),
    "quantity": (
        "c.yaml",
        OBJECTS + "- {kind: Pod, metadata: {name: p1}, spec: {containers: "
        "[{name: c, image: x, resources: {requests: {cpu: lots}}}]}}\n",
        ["Pod default/p1", "spec.containers[0].resources.requests.cpu", "'lots' is not a quantity"],
    ),
    "duplicate-node": ("c.yaml", OBJECTS + "- {kind: Node, metadata: {name: n1}}\n", ["duplicate Node n1"]),
    "not-objects": ("c.yaml", "- just\n- a list\n", ["document 1", "not an object"]),
    "comments-only": ("c.yaml", "# nothing\n---\n", ["no Kubernetes objects"]),
    "empty": ("c.yaml", "", ["empty file"]),
}


def assert_one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert done.stdout == ""


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_cluster_file(tmp_path: Path, case: str) -> None:
    name, text, needles = BAD[case]
    path = tmp_path / name
    path.write_text(text)
    assert_one_line_error(rulesched("simulate", path), str(path), *needles)


def test_cluster_file_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    assert_one_line_error(rulesched("simulate", path), str(path), "cannot read")


def test_rules_file_with_an_error(tmp_path: Path) -> None:
    """Lint's diagnostics (source line, caret, hint), then the one-line summary."""
    rules = tmp_path / "site.rules"
    rules.write_text('extends "default"\n\nscore gpu_free: node.free.gpu\n')
    done = rulesched("simulate", CLUSTER, "--rules", rules)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    *diagnostics, summary = done.stderr.strip().splitlines()
    assert summary.startswith(f"rulesched: {rules}:3:") and "'gpu'" in summary
    assert diagnostics[0].startswith(f"{rules}:3:17: error:") and any("^" in line for line in diagnostics)


def test_rules_path_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(rulesched("simulate", CLUSTER, "--rules", tmp_path / "none.rules"), "none.rules")
