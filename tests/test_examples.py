"""The example rule sets under rules/examples/<name>/: each policy.rules simulated on its
cluster.yaml gives the outcome its comments state."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from rulesched.simulate.load import load_cluster
from rulesched.simulate.report import Report
from rulesched.simulate.run import SimulateSettings, simulate

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "rules" / "examples"
NAMES = (
    "underlay-ip",
    "pod-capacity",
    "gpu-binpacking",
    "zone-spreading",
    "statefulset-zonal-volumes",
    "app-spreading",
    "gang-one-rack",
    "gang-topology",
    "team-quotas",
)


def run_example(name: str, rules: str | None = None, explain: bool = False) -> Report:
    folder = EXAMPLES / name
    cluster = folder / "cluster.yaml"
    settings = SimulateSettings(cluster=(str(cluster),), rules=(rules or str(folder),), explain=explain)
    return simulate(load_cluster([cluster]), settings)


def placements(report: Report) -> dict[str, str | None]:
    return {str(row["pod"]): row["node"] for row in report.rows()}  # type: ignore[misc]


def messages(report: Report) -> dict[str, str]:
    return {str(row["pod"]): str(row["message"]) for row in report.rows()}


def gpus_in_use(report: Report) -> dict[str, int]:
    return {n.name: n.requested.get("nvidia.com/gpu", 0) // 1000 for n in report.state.nodes}


# Folders that are libraries of alternative sets (each file `# rulesched: standalone`, with its
# own *.test.yaml), not one policy on one cluster: the FGD paper's baselines (issue 38)
LIBRARIES = {"gpu-baselines": ("random", "dot-product", "clustering", "packing", "best-fit")}


def test_every_example_has_a_policy_a_cluster_and_a_test() -> None:
    found = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())
    assert found == sorted((*NAMES, *LIBRARIES))
    for name in NAMES:
        assert (EXAMPLES / name / "cluster.yaml").is_file()
        first = next(
            line
            for line in (EXAMPLES / name / "policy.rules").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
        assert first == 'extends "default"'


def test_the_bundled_folder_lints_clean_as_a_library_of_sets() -> None:
    """``rulesched lint rules/`` as a user would type it (issue 34, item 3: it composed the
    alternative profiles into one set, 4 errors and 18 false unused-let). Each profile beside
    default.rules is marked ``# rulesched: standalone``: a set of its own; the examples'
    sub-folders are sets."""
    done = subprocess.run(
        [sys.executable, "-m", "rulesched", "lint", "--strict", "--format", "json", "rules/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert (result["errors"], result["warnings"]) == (0, 0), result["diagnostics"]
    sets = result["rule_sets"]
    bundled = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "rules").glob("*.rules"))
    assert ["rules/default.rules"] in sets and len(bundled) >= 4
    for path in bundled:
        assert [path] in sets, sets  # each profile alone
    # each example folder one set; a library's standalone files one each, and the file they share
    assert len(sets) == len(bundled) + len(NAMES) + sum(len(files) + 1 for files in LIBRARIES.values())
    for name, files in LIBRARIES.items():
        for file in files:
            assert [f"rules/examples/{name}/{file}.rules"] in sets, sets
            assert (EXAMPLES / name / f"{file}.test.yaml").is_file()


# --- underlay-ip -----------------------------------------------------------------------------------


def test_underlay_ip_limit_per_node() -> None:
    report = run_example("underlay-ip")
    # node-a had 2 of its 3 underlay IPs in use; node-b and node-c had none free
    assert placements(report) == {"net/underlay-1": "node-a", "net/underlay-2": None, "net/overlay-1": "node-b"}
    message = messages(report)["net/underlay-2"]
    assert message.startswith("0/3 nodes are available: 3 node has no free underlay IP.")
    assert "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod." in message
    underlay = {
        n.name: sum(p.annotations.get("network.example.com/mode") == "underlay" for p in n.pods)
        for n in report.state.nodes
    }
    assert underlay == {"node-a": 3, "node-b": 3, "node-c": 3}
    assert report.summary()["scheduled"] == 2 and report.summary()["unschedulable"] == 1


def test_underlay_ip_default_rules_have_no_such_limit() -> None:
    report = run_example("underlay-ip", rules="default")
    assert all(node is not None for node in placements(report).values())


# --- pod-capacity ----------------------------------------------------------------------------------


def test_pod_capacity_prefers_the_node_with_fewest_pods() -> None:
    report = run_example("pod-capacity", explain=True)
    assert {n.name: len(n.pods) for n in report.state.nodes} == {"node-a": 21, "node-b": 18, "node-c": 25}
    assert placements(report) == {"apps/new-pod": "node-b"}
    (row,) = report.rows()
    explanation = row["explanation"]
    assert isinstance(explanation, dict)
    scores = explanation["scores"]
    assert isinstance(scores, dict)
    # 100 - 100 * pods / 110, truncated, over 21, 17 and 25 pods
    assert {n: s["pod_capacity"] for n, s in scores.items()} == {"node-a": 80, "node-b": 84, "node-c": 77}
    assert all("NodeResourcesFit" not in s and "NodeResourcesBalancedAllocation" not in s for s in scores.values())


# --- gpu-binpacking --------------------------------------------------------------------------------


def test_gpu_pods_pack_onto_the_fullest_gpu_node() -> None:
    report = run_example("gpu-binpacking")
    assert placements(report) == {
        "ml/train-1": "gpu-b",  # 3 of 4 in use: the fullest that still fits
        "ml/train-2": "gpu-a",  # gpu-b is now full
        "ml/train-3": "gpu-a",  # 2 + 2 fills gpu-a
        "ml/train-4": "gpu-c",  # the only GPUs left
        "shop/web": "cpu-d",  # no GPU: the rule's guard leaves it to the defaults (and the taints)
    }
    assert gpus_in_use(report) == {"gpu-a": 4, "gpu-b": 4, "gpu-c": 1, "cpu-d": 0}


def test_gpu_binpacking_differs_from_default_spreading() -> None:
    report = run_example("gpu-binpacking", rules="default")
    assert placements(report)["ml/train-1"] == "gpu-c"  # LeastAllocated picks the emptiest node
    assert gpus_in_use(report)["gpu-b"] == 3


# --- zone-spreading --------------------------------------------------------------------------------


def zone_counts(report: Report) -> Counter[str]:
    return Counter(
        n.labels["topology.kubernetes.io/zone"]
        for n in report.state.nodes
        for p in n.pods
        if p.labels.get("app") == "web"
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_zone_spreading_keeps_zones_within_max_skew(seed: int) -> None:
    folder = EXAMPLES / "zone-spreading"
    settings = SimulateSettings(cluster=(str(folder / "cluster.yaml"),), rules=(str(folder),), seed=seed)
    report = simulate(load_cluster([folder / "cluster.yaml"]), settings)
    webs = {pod: node for pod, node in placements(report).items() if pod.startswith("shop/web-")}
    assert len(webs) == 7 and all(webs.values())
    counts = zone_counts(report)
    assert sum(counts.values()) == 10 and set(counts) == {"zone-a", "zone-b", "zone-c"}
    assert max(counts.values()) - min(counts.values()) <= 1, counts


def test_zone_spreading_policy_rejects_pods_that_do_not_spread() -> None:
    report = run_example("zone-spreading")
    assert placements(report)["shop/stray"] is None
    assert messages(report)["shop/stray"].startswith(
        "0/6 nodes are available: 6 pod must spread over topology.kubernetes.io/zone."
    )
    # without the policy, only the spread constraint (in the pods) keeps the zones even
    default = run_example("zone-spreading", rules="default")
    assert placements(default)["shop/stray"] is not None
    counts = zone_counts(default)
    assert max(counts.values()) - min(counts.values()) <= 1, counts


# --- statefulset-zonal-volumes -----------------------------------------------------------------------


def zone_of(report: Report, node: str | None) -> str:
    return next(n.labels["topology.kubernetes.io/zone"] for n in report.state.nodes if n.name == node)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_statefulset_replicas_spread_and_take_volumes_in_their_zones(seed: int) -> None:
    folder = EXAMPLES / "statefulset-zonal-volumes"
    settings = SimulateSettings(cluster=(str(folder / "cluster.yaml"),), rules=(str(folder),), seed=seed)
    report = simulate(load_cluster([folder / "cluster.yaml"]), settings)
    placed = placements(report)
    # db-0 runs in zone-a; the new replicas take the other two zones, db-2's zone-c replica
    # avoiding the spot node (the policy)
    assert {zone_of(report, placed["shop/db-1"]), zone_of(report, placed["shop/db-2"])} == {"zone-b", "zone-c"}
    assert "node-c2" not in placed.values()
    # each new claim was provisioned on its pod's zone, so the next pod on it lands there too
    storage = report.state.storage
    for replica in ("db-1", "db-2"):
        claim = storage.claims[f"shop/data-{replica}"]
        assert claim.bound
        volume = storage.volumes[claim.volume_name]
        zone = zone_of(report, placed[f"shop/{replica}"])
        assert volume.node_affinity is not None
        assert volume.node_affinity[0].match_expressions[0].values == (zone,)
    # the backup pod follows db-0's volume into zone-a; the pod whose claim is missing waits
    assert zone_of(report, placed["shop/backup-db-0"]) == "zone-a"
    assert placed["shop/report-0"] is None
    assert messages(report)["shop/report-0"].startswith(
        '0/6 nodes are available: 6 persistentvolumeclaim "data-report-0" not found.'
    )


def test_statefulset_default_rules_may_use_the_spot_node() -> None:
    """Without the policy, only the volumes constrain the replicas: zone-c has two candidates."""
    feasible = set()
    for seed in range(8):
        folder = EXAMPLES / "statefulset-zonal-volumes"
        settings = SimulateSettings(cluster=(str(folder / "cluster.yaml"),), rules=("default",), seed=seed)
        report = simulate(load_cluster([folder / "cluster.yaml"]), settings)
        feasible |= {node for pod, node in placements(report).items() if pod.startswith("shop/db-")}
    assert "node-c2" in feasible


def test_gang_one_rack_keeps_the_gang_in_one_rack() -> None:
    racks = {f"n{i}": f"r{i // 2}" for i in range(6)}
    placed = placements(run_example("gang-one-rack"))
    gang = {racks[str(node)] for pod, node in placed.items() if pod.startswith("default/mpi-")}
    assert len(gang) == 1 and all(placed[f"default/mpi-{i}"] for i in range(4))
    spread = placements(run_example("gang-one-rack", rules="default"))
    assert len({racks[str(node)] for pod, node in spread.items() if pod.startswith("default/mpi-")}) > 1


def test_gang_topology_keeps_the_job_in_one_block_and_each_gang_in_one_rack() -> None:
    placed = placements(run_example("gang-topology"))
    assert all(placed.values()), placed
    rack = {p: str(n).rsplit("-", 1)[0] for p, n in placed.items()}  # node a2-1: rack a2
    workers = {rack[p] for p in placed if "workers" in p}
    assert len(workers) == 1 and len({r[0] for r in rack.values()}) == 1  # one rack, one block
    assert not {"a1", "b2"} & set(rack.values())  # another job's rack, a draining switch
    # the defaults alone keep the topology (the objects ask for it) but not the policy's racks
    plain = placements(run_example("gang-topology", rules="default"))
    assert len({str(n).rsplit("-", 1)[0] for p, n in plain.items() if "workers" in p}) == 1


# --- app-spreading and team-quotas: rules over topology domains and the cluster ---------------------


def test_app_spreading_keeps_each_app_within_skew_1_over_zones() -> None:
    report = run_example("app-spreading")
    assert report.summary()["unschedulable"] == 0
    web = Counter(
        n.labels["topology.kubernetes.io/zone"] for n in report.state.nodes for p in n.pods if p.labels["app"] == "web"
    )
    assert sorted(web.values()) == [3, 3, 4], web
    assert placements(report)["shop/api-2"] in ("node-c1", "node-c2")  # the zone without an api pod
    assert not any(n.pods for n in report.state.nodes if n.name == "edge")


def test_team_quotas_evict_over_quota_pods_first() -> None:
    report = run_example("team-quotas")
    found = placements(report)
    assert found["ml/ml-2"] in ("gpu-2a", "gpu-2b") and found["ml/ml-3"] is None
    assert found["vision/vision-4"] is not None
    gpus: Counter[str] = Counter()
    for n in report.state.nodes:
        for p in n.pods:
            gpus[p.labels["team"]] += p.requests.get("nvidia.com/gpu", 0) // 1000
    assert gpus == {"ml": 7, "vision": 7}  # a vision pod of 4 GPUs was evicted for ml-2
    racks = Counter((n.labels["example.com/rack"], p.labels["team"]) for n in report.state.nodes for p in n.pods)
    assert racks[("rack-1", "ml")] == 2 and racks[("rack-2", "ml")] == 1
