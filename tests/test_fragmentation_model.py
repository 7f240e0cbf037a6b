"""The fragmentation benchmark's own parts (benchmarks/openb.py, fgd_reference.py, openb_to_k8s.py):
the paper's definitions worked by hand on small nodes, the arrival method, and the objects the
converter writes. The whole trace is not needed (bench_fragmentation.py checks the figures)."""

from __future__ import annotations

import math
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import fgd_reference as ref  # noqa: E402
import openb_to_k8s  # noqa: E402
from openb import GpuNode, TracePod, arrivals, typical_pods  # noqa: E402

# the target workload of these tests: half shared pods of 500 milli, 30% whole-GPU pods, 20% CPU pods
TYPICAL = [
    (0.5, TracePod("a", 1000, 0, 1, 500)),
    (0.3, TracePod("b", 2000, 0, 1, 1000)),
    (0.2, TracePod("c", 4000, 0, 0, 0)),
]


def node(gpus: list[int], cpu_left: int = 8000, cpu_cap: int = 8000, model: str = "T4", **kw: object) -> ref.Node:
    n = ref.Node(cpu_cap, cpu_left, 10**6, model, list(gpus), rank=0)
    for k, v in kw.items():
        setattr(n, k, v)
    return n


def test_fragmentation_counts_the_gpus_each_typical_pod_cannot_use() -> None:
    frag = ref.Fragmentation(TYPICAL)
    # a fits (GPU 0) and strands GPU 1's 300: 0.5 x 300; b fits and strands the same 300: 0.3 x 300;
    # c asks no GPU, so every free GPU milli counts: 0.2 x 1300
    assert frag.of("T4", 8000, [1000, 300]) == pytest.approx(150 + 90 + 260)
    # with 1500 cpus left b does not fit at all: all 1300 count for it
    assert frag.of("T4", 1500, [1000, 300]) == pytest.approx(150 + 390 + 260)
    assert frag.of("T4", 8000, [0, 0]) == 0


def test_fragmentation_counts_everything_for_pods_asking_another_model() -> None:
    frag = ref.Fragmentation([(1.0, TracePod("v", 1000, 0, 1, 500, ("V100M16",)))])
    assert frag.of("T4", 8000, [1000, 1000]) == 2000
    assert frag.of("V100M16", 8000, [1000, 300]) == 300


def test_fill_fragmentation_weighs_each_gpu_by_the_chance_no_typical_pod_fills_it() -> None:
    """FGD+'s measure: GPU by GPU, free milli x exp(-rate x the share of typical pods that fit the
    node and that GPU); FGD's is the same with 1 - share."""
    fill = ref.FillFragmentation(TYPICAL, rate=5)
    # GPU 0 (500 free): a fits it (0.5); GPU 1 (1000): a and b (0.8); c asks no GPU
    assert fill.of("T4", 8000, [500, 1000]) == pytest.approx(500 * math.exp(-2.5) + 1000 * math.exp(-4))
    assert ref.Fragmentation(TYPICAL).of("T4", 8000, [500, 1000]) == pytest.approx(500 * 0.5 + 1000 * 0.2)
    # a sliver no typical pod fits counts whole, as in FGD; so does everything once the cpus are gone
    assert fill.of("T4", 8000, [300, 0]) == pytest.approx(300)
    assert fill.of("T4", 500, [500, 1000]) == pytest.approx(1500)
    # with the rate near 0 it is FGD's: total - fill ~ rate x (total - FGD's)
    near = ref.FillFragmentation(TYPICAL, rate=1e-6)
    fgd = ref.Fragmentation(TYPICAL)
    assert (1500 - near.of("T4", 8000, [500, 1000])) / 1e-6 == pytest.approx(1500 - fgd.of("T4", 8000, [500, 1000]))


def test_fgd_plus_keeps_a_hole_that_a_common_pod_fits() -> None:
    """A 300-milli pod, a GPU with 500 left or a whole one. FGD fills the hole (500 counted half
    lost, as only a fits it; 200 left, lost whole, is a smaller step up than a whole GPU's 700
    that b no longer fits); FGD+ takes the whole GPU: the hole of 500 is likely filled by an a
    (half the workload), the 200 it would leave never is."""
    pod = TracePod("p", 1000, 0, 1, 300)
    hole, whole = node([500]), node([1000])
    fgd, fill = ref.Fragmentation(TYPICAL), ref.FillFragmentation(TYPICAL)
    # FGD: 250 -> 200 (+50): 51; 200 -> 350 (-150): 46
    assert (ref.fgd_score(fgd, hole, pod)[0], ref.fgd_score(fgd, whole, pod)[0]) == (51, 46)
    # FGD+: 500 e^-2.5 = 41 -> 200 (-159): 46; 1000 e^-4 = 18 -> 700 e^-2.5 = 57 (-39): 49
    assert (ref.fill_score(fill, hole, pod)[0] // 101, ref.fill_score(fill, whole, pod)[0] // 101) == (46, 49)


def test_fgd_gives_a_shared_pod_the_gpu_that_fragments_least() -> None:
    frag = ref.Fragmentation(TYPICAL)
    pod = TracePod("p", 500, 0, 1, 300)
    # GPU 0 -> [700, 300]: 150 + 300 + 200 = 650 (up 150 from 500): 100 x sigmoid(-0.15) = 46
    # GPU 1 -> [1000, 0]: 0 + 0 + 200 = 200 (down 300): 100 x sigmoid(0.3) = 57, the choice
    assert ref.fgd_score(frag, node([1000, 300]), pod) == (57, 1)
    # whole GPUs: [1000, 1000] -> [0, 1000]: a and b fit, nothing stranded: 0.2 x 1000 = 200 from 400
    assert ref.fgd_score(frag, node([1000, 1000]), TracePod("w", 500, 0, 1, 1000)) == (54, -1)


def test_packing_prefers_shared_gpus_then_used_nodes_then_small_free_nodes() -> None:
    shared = TracePod("s", 1000, 0, 1, 300)
    assert ref.packing_score(node([1000, 300]), shared) == 97  # 100 - (30% free on the GPU used)/10
    assert ref.packing_score(node([1000] * 8), shared) == 25  # all free: 33 - 8
    assert ref.packing_score(node([1000, 1000, 0, 0]), TracePod("w", 1000, 0, 2, 1000)) == 48  # 50 - 2
    assert ref.packing_score(node([1000]), TracePod("c", 1000, 0, 0, 0)) == 0


def test_clustering_bands_by_the_kinds_of_gpu_pods_on_the_node() -> None:
    shared = TracePod("s", 1000, 0, 1, 300)
    half = [1000, 1000, 1000, 1000, 0, 0, 0, 0]  # 4000 of 8000 milli free: 25 x 4000 // 8000 = 12
    assert ref.clustering_score(node(half, affinity=Counter({"share-gpu": 2})), shared) == 87
    assert ref.clustering_score(node(half, affinity=Counter({"share-gpu": 1, "1-gpu": 1})), shared) == 62
    assert ref.clustering_score(node(half, affinity=Counter({"1-gpu": 1})), shared) == 12
    assert ref.clustering_score(node([1000] * 8), shared) == 25


def test_bestfit_and_dotprod_by_hand() -> None:
    n = node([1000, 1000, 1000, 1000], cpu_left=64000, cpu_cap=96000)
    pod = TracePod("p", 32000, 0, 1, 1000)
    # 1 - (0.5 x 32000/128000 + 0.5 x 3000/8000) = 0.6875
    assert ref.bestfit_raw(n, pod) == 68
    # 1 - (64000/128000 x 32000/128000 + 4000/8000 x 1000/8000) / 2 = 0.90625
    assert ref.dotprod_score(n, pod) == 90
    assert ref.minmax([68, 70, 80]) == [0, 16, 100]
    assert ref.minmax([5, 5]) == [0, 0]


def test_typical_pods_take_the_commonest_shapes_to_95_percent() -> None:
    trace = [TracePod(f"p{i}", 1000, 64, 1, 500) for i in range(60)]
    trace += [TracePod(f"q{i}", 2000, 64, 1, 1000) for i in range(36)]
    trace += [TracePod(f"r{i}", 3000, 64, 0, 0) for i in range(4)]
    typical = typical_pods(trace)
    assert [(round(p, 4), t.cpu_milli) for p, t in typical] == [(0.625, 1000), (0.375, 2000)]


def test_arrivals_reach_the_ratio_and_are_reproducible() -> None:
    nodes = [GpuNode(f"n{i}", 8000, 1000, 2, "T4") for i in range(5)]  # 10 GPUs
    trace = [TracePod(f"p{i}", 1000, 64, 1, m) for i, m in enumerate((1000, 500, 250, 1000))]
    w = arrivals(trace, nodes, seed=7)
    asked = sum(p.total_gpu_milli for p in w.pods)
    assert asked <= 13_000 and asked > 13_000 - 1000
    assert sorted(p.name for p in w.pods[:4]) == ["p0", "p1", "p2", "p3"]  # the trace first, shuffled
    assert all("-tuned-" in p.name for p in w.pods[4:])
    assert sorted(w.node_rank) == list(range(5))
    assert arrivals(trace, nodes, seed=7) == w and arrivals(trace, nodes, seed=8) != w


def test_replay_never_overcommits_a_gpu_or_a_cpu() -> None:
    rng = random.Random(3)
    nodes = [GpuNode(f"n{i}", rng.choice((8000, 16000)), 10**6, rng.choice((1, 2, 4)), "T4") for i in range(8)]
    trace = [
        TracePod(f"p{i}", rng.choice((1000, 3000)), 64, *rng.choice(((1, 300), (1, 700), (1, 1000), (2, 1000), (0, 0))))
        for i in range(40)
    ]
    w = arrivals(trace, nodes, seed=1)
    for policy in ref.POLICIES:
        for tie in ("rank", "random"):
            out = ref.replay(nodes, w, typical_pods(trace), policy, seed=1, tie=tie)
            assert out.placed + out.failed == len(w.pods)
            assert out.allocated_milli == sorted(out.allocated_milli)
            allocated = sum(row[0] for row in out.gpus_by_model.values())
            assert allocated == out.allocated_milli[-1] <= sum(n.gpus for n in nodes) * 1000


def test_the_converter_writes_gpus_as_dra_devices_and_claims() -> None:
    nodes = [GpuNode("n0", 16000, 2048, 2, "V100M16")]
    pods = [
        TracePod("p0", 4000, 1024, 1, 470, ("V100M16", "V100M32")),
        TracePod("p1", 1000, 512, 0, 0),
        TracePod("p2", 8000, 1024, 2, 1000),
    ]
    items = list(openb_to_k8s.objects(nodes, pods, [0]))
    kinds = Counter(i["kind"] for i in items)
    assert kinds == {
        "Namespace": 1,
        "Node": 1,
        "DeviceClass": 1,
        "ResourceSlice": 1,
        "ResourceClaimTemplate": 2,
        "Pod": 3,
    }
    slice_ = next(i for i in items if i["kind"] == "ResourceSlice")
    assert slice_["spec"]["nodeName"] == "n0"
    assert slice_["spec"]["devices"][1] == {
        "name": "gpu-1",
        "attributes": {"model": {"string": "V100M16"}},
        "capacity": {"milli": {"value": "1000"}},
        "allowMultipleAllocations": True,
    }
    shared = next(i for i in items if i["kind"] == "ResourceClaimTemplate" and "470" in i["metadata"]["name"])
    exactly = shared["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["count"] == 1 and exactly["capacity"] == {"requests": {"milli": "470"}}
    assert (
        exactly["selectors"][0]["cel"]["expression"]
        == 'device.attributes["gpu.example.com"].model in ["V100M16", "V100M32"]'
    )
    pod0, pod1 = (i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] in ("p0", "p1"))
    assert pod0["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": shared["metadata"]["name"]}]
    assert "resourceClaims" not in pod1["spec"]
    extended = [i for i in openb_to_k8s.objects(nodes, pods, [0], gpus="extended") if i["kind"] in ("Node", "Pod")]
    assert extended[0]["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert extended[1]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
