"""`simulate` reports DRA devices (issue 38): per driver and model the devices, those held whole
and in part, each capacity allocated of its total, and fragmentation against the input's pods
(rulesched.semantics.fragmentation, the FGD paper's measure), in the table, the JSON summary and
`--output summary`; not at all without devices. On a small cluster of the openb trace's kind the
figure equals the benchmark harness's (benchmarks/fgd_reference.py) on the same end state."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from rulesched.cli import main
from tests.helpers.dra_files import CLAIMS, GPU_CLASS, gpus, node, pod, template, write

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import bench_fragmentation as bench  # noqa: E402
import fgd_reference as ref  # noqa: E402
from openb import arrivals, typical_pods  # noqa: E402

from tests.helpers.openb_cluster import NODES, gpus_left, trace  # noqa: E402


def cluster(tmp_path: Path) -> Path:
    """n1: two A100s, n2: one T4 (devices without capacity: counted in devices); three pods of
    one GPU each and a CPU pod. A running pod holds nothing."""
    items = [node("n1"), node("n2"), GPU_CLASS, gpus("n1", 2), gpus("n2", 1, "T4"), template()]
    items += [pod(f"train-{i}", resourceClaims=CLAIMS) for i in range(2)]
    items += [pod("web", cpu="500m")]
    return write(tmp_path, items)


def test_the_table_shows_devices_per_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(cluster(tmp_path))]) == 0
    out = capsys.readouterr().out
    table = out[out.index("DRIVER") :].splitlines()
    assert table[0].split() == [
        "DRIVER", "MODEL", "DEVICES", "ALLOCATED", "PARTLY", "FREE", "devices", "FRAGMENTED", "STRANDED"
    ]  # fmt: skip
    rows = {line.split()[1]: line.split() for line in table[1:3]}
    # two GPU pods on three GPUs: the one left free is fragmented for the CPU pod's third of the
    # mix (it asks no device), and for none of the GPU pods (their shape fits where it is)
    free_a100 = rows["A100"][2:] == ["2", "2", "0", "0", "0.0", "0"]
    free_t4 = rows["T4"][2:] == ["1", "0", "0", "1", "0.3", "0"]
    assert (free_a100 and free_t4) or (
        rows["A100"][2:] == ["2", "1", "0", "1", "0.3", "0"] and rows["T4"][2:] == ["1", "1", "0", "0", "0.0", "0"]
    ), table
    assert table[3].split() == ["total", "3", "2", "0", "1", "0.3", "0"]  # (no driver)
    assert "commonest 2 shapes" in table[4] and "of the 3 pods" in table[4]


def test_json_and_summary_give_the_same_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = cluster(tmp_path)
    assert main(["simulate", str(path), "--output", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["summary"]["devices"]
    assert devices["group_by"] == "model" and devices["measure"] == "devices"
    assert devices["target_workload"] == {"shapes": 2, "pods": 3}
    assert [(g["driver"], g["value"], g["devices"]) for g in devices["groups"]] == [
        ("gpu.example.com", "A100", 2),
        ("gpu.example.com", "T4", 1),
    ]
    total = devices["total"]
    assert (total["devices"], total["allocated"], total["partly_allocated"], total["free"]) == (3, 2, 0, 1)
    assert total["fragmented"] == pytest.approx(1 / 3, abs=0.05) and total["stranded"] == 0
    assert main(["simulate", str(path), "--output", "summary"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "devices: 2 allocated, 0 partly of 3, 0.3 devices fragmented, 0 stranded"


def test_nodes_alike_but_for_their_cpu_count_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three nodes of two idle A100s; n2's cpu all taken by a running pod. The mix: that pod's
    shape (no device: every free GPU is lost to it) and a gated GPU pod's (one GPU, one cpu: it
    fits n1 and n3, not n2). n1 and n3 count a GPU each (half the mix), n2 both, stranded too:
    the report, which works out nodes alike once, tells n2 from the others by its cpu."""
    items = [node("n1"), node("n2"), node("n3"), GPU_CLASS, template(), *(gpus(n, 2) for n in ("n1", "n2", "n3"))]
    items += [
        pod("busy", node_name="n2", cpu="4"),
        pod("later", resourceClaims=CLAIMS, schedulingGates=[{"name": "g"}]),
    ]
    assert main(["simulate", str(write(tmp_path, items)), "--output", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["summary"]["devices"]["total"]
    assert (devices["devices"], devices["fragmented"], devices["stranded"]) == (6, 4.0, 2)


def test_device_group_names_the_attribute(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(cluster(tmp_path)), "--output", "json", "--device-group", "vendor"]) == 0
    devices = json.loads(capsys.readouterr().out)["summary"]["devices"]
    assert [(g["value"], g["devices"]) for g in devices["groups"]] == [("-", 3)]


def test_drivers_of_different_units_each_count_in_their_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """GPUs without capacity (counted as devices) beside NICs with a capacity `bandwidth` of 10
    (counted in it): each group in its unit, the total without the figures that would mix them,
    the summary line with one figure per unit."""
    nics = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-nics"},
        "spec": {
            "driver": "nic.example.com",
            "nodeName": "n1",
            "pool": {"name": "n1-nics", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"nic-{i}", "capacity": {"bandwidth": {"value": "10"}}} for i in range(2)],
        },
    }
    path = write(tmp_path, [node("n1"), GPU_CLASS, gpus("n1", 2), nics, template(), pod("a", resourceClaims=CLAIMS)])
    assert main(["simulate", str(path), "--output", "json"]) == 0
    devices = json.loads(capsys.readouterr().out)["summary"]["devices"]
    assert devices["measure"] is None
    units = {g["driver"]: (g["measure"], g["free"]) for g in devices["groups"]}
    assert units == {"gpu.example.com": ("devices", 1), "nic.example.com": ("bandwidth", 20)}
    assert "fragmented" not in devices["total"] and devices["total"]["devices"] == 4
    assert main(["simulate", str(path)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("DRIVER") :].splitlines()
    assert table[0].split()[-3:] == ["FREE", "FRAGMENTED", "STRANDED"]
    nic = next(line for line in table if line.startswith("nic.example.com"))
    assert nic.split()[-6:] == ["20", "bandwidth", "20.0", "bandwidth", "0", "bandwidth"]
    assert table[3].split()[-3:] == ["-", "-", "-"]  # the total
    assert main(["simulate", str(path), "--output", "summary"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert "devices fragmented" in line and "bandwidth fragmented" in line


def test_html_has_the_devices_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(cluster(tmp_path)), "--output", "html"]) == 0
    html = capsys.readouterr().out
    assert "<h2>Devices</h2>" in html and "<td>A100</td>" in html and "<th>FRAGMENTED</th>" in html
    assert "<script" not in html


def test_no_devices_no_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, [node("n1"), pod("web")])
    assert main(["simulate", str(path)]) == 0
    assert "DRIVER" not in capsys.readouterr().out
    assert main(["simulate", str(path), "--output", "json"]) == 0
    assert "devices" not in json.loads(capsys.readouterr().out)["summary"]
    assert main(["simulate", str(path), "--output", "summary"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert main(["simulate", str(path), "--output", "html"]) == 0
    assert "<h2>Devices</h2>" not in capsys.readouterr().out


@pytest.mark.parametrize("arrived", [None, 6])
def test_fragmentation_equals_the_harness_on_a_trace_subset(arrived: int | None) -> None:
    """Twelve nodes of the trace's kinds (GPUs with capacity `milli`, shared), the paper's
    arrivals of 200 trace-like pods through the FGD rules: the report's fragmentation is the
    reference model's measure over the same end state (each node's cpu and GPUs left) against
    the typical pods of the same pods; milli allocated is what the claims hold. With the first
    6 arrivals only, nodes of a kind stay alike (untouched): the report works their figures
    out once, and they are still each node's."""
    workload = arrivals(trace(), NODES, 42)
    workload = dataclasses.replace(workload, pods=workload.pods[:arrived])
    placed, report = bench.place_with_rules(NODES, workload, bench.Run("t", "gpu-fragmentation", 42, "rules", "random"))
    devices = report.devices
    assert devices is not None and devices.measure == "milli"
    left = gpus_left(report)
    cpu = {info.name: info.free["cpu"] for info in report.state.nodes}
    frag = ref.Fragmentation(typical_pods(list(workload.pods)))
    want = sum(frag.of(n.model, cpu[n.name], left[n.name]) for n in NODES)
    assert want > 0
    assert devices.total.fragmented / 1000 == pytest.approx(want)
    by_model: dict[str, list[int]] = {}
    for n in NODES:
        row = by_model.setdefault(n.model, [0, 0])
        row[0] += 1000 * n.gpus - sum(left[n.name])
        row[1] += 1000 * n.gpus
    got = {g.value: [v // 1000 for v in g.capacity["milli"]] for g in devices.groups}
    assert got == by_model
    assert devices.pods == len(workload.pods)
    if arrived is None:
        assert sum(n is not None for n in placed.values()) < len(workload.pods)
    else:  # (nodes alike at the end: of one model, with the same cpu and GPUs left)
        ends = [(n.model, cpu[n.name], tuple(left[n.name])) for n in NODES]
        assert len(set(ends)) < len(ends)


def test_the_harness_reports_simulates_fragmentation_for_rules_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_fragmentation's rules runs carry the fragmentation simulate reports (they gave 0):
    the reference model's measure over the run's end state, against the arrivals' typical pods."""
    reports = []
    place = bench.place_with_rules

    def keep(*args: object) -> object:
        reports.append(place(*args))  # type: ignore[arg-type]
        return reports[-1]

    monkeypatch.setattr(bench, "place_with_rules", keep)
    workload = arrivals(trace(), NODES, 42)
    out = bench.replay_rules(NODES, workload, bench.Run("t", "gpu-fragmentation", 42, "rules", "random"))
    ((_, report),) = reports
    left = gpus_left(report)
    cpu = {info.name: info.free["cpu"] for info in report.state.nodes}
    frag = ref.Fragmentation(typical_pods(list(workload.pods)))
    want = sum(frag.of(n.model, cpu[n.name], left[n.name]) for n in NODES)
    assert want > 1000
    assert out.frag_milli == pytest.approx(want)
    assert 0 < out.placed < len(workload.pods)
