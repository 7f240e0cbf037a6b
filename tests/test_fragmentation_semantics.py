"""rulesched.semantics.fragmentation, the FGD paper's fragmentation measure on DRA-like devices:
a table of nodes worked by hand (the first cases are tests/test_fragmentation_model.py's, worked
for the reference model in benchmarks/fgd_reference.py), and a property: on any node of the
trace's kind the measure equals the reference model's (``Fragmentation.of``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.semantics.fragmentation import Ask, Shape, Slot, fits, mix, node_fragmentation, stranded

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import fgd_reference as ref  # noqa: E402
from openb import TracePod, typical_pods  # noqa: E402


# half shared pods of 500 milli, 30% whole-GPU pods (1000 milli asked), 20% CPU pods
def milli(count: int, amount: int, *selectors: str) -> Ask:
    return Ask(count, (("milli", amount),), selectors)


MIX = [
    (0.5, Shape(1000, (milli(1, 500),))),
    (0.3, Shape(2000, (milli(1, 1000),))),
    (0.2, Shape(4000)),
]


def slots(*free: int, total: int = 1000) -> list[Slot]:
    return [Slot(f, total, "milli") for f in free]


# (case, mix, cpu free, devices, accepts per shape (None: all), expected fragmentation, stranded)
CASES = [
    # test_fragmentation_model: a fits (GPU 0) and cannot use GPU 1's 300: 0.5 x 300; b the
    # same: 0.3 x 300; c asks no GPU: 0.2 x 1300
    ("each shape's unusable GPUs", MIX, 8000, slots(1000, 300), None, 150 + 90 + 260, 0),
    # with 1500 cpus left b does not fit at all: all 1300 count for it
    ("a shape short of cpu counts everything", MIX, 1500, slots(1000, 300), None, 150 + 390 + 260, 0),
    ("nothing free, nothing fragmented", MIX, 8000, slots(0, 0), None, 0, 0),
    # test_fragmentation_model: pods asking another model (its selector refuses the node's GPUs)
    (
        "another model's pods: everything",
        [(1.0, Shape(1000, (milli(1, 500),)))],
        8000,
        slots(1000, 1000),
        [[[False, False]]],
        2000,
        2000,
    ),
    ("its own model: the sliver", [(1.0, Shape(1000, (milli(1, 500),)))], 8000, slots(1000, 300), None, 300, 0),
    # beyond the paper's one-model nodes: a device the selector refuses is lost to that shape
    (
        "a refused device on a fitting node",
        [(1.0, Shape(0, (milli(1, 500),)))],
        8000,
        slots(1000, 1000),
        [[[True, False]]],
        1000,
        0,
    ),
    # two GPUs asked, one has room: the shape does not fit, so all of it counts (and is stranded)
    ("too few devices", [(1.0, Shape(0, (milli(2, 1000),)))], 8000, slots(1000, 600), None, 1600, 1600),
    # a whole device (no capacity asked) takes only a device nothing holds
    ("a whole device", [(1.0, Shape(0, (Ask(1),)))], 8000, slots(1000, 999), None, 999, 0),
    ("no whole device left", [(1.0, Shape(0, (Ask(1),)))], 8000, slots(999, 999), None, 1998, 1998),
    # allocationMode All: every accepted device whole
    ("All: every device free", [(1.0, Shape(0, (Ask(0),)))], 8000, slots(1000, 1000), None, 0, 0),
    ("All: one held in part", [(1.0, Shape(0, (Ask(0),)))], 8000, slots(1000, 500), None, 1500, 1500),
    # a device measured in itself (no capacity, or several drivers): free is 1 or 0, and a
    # capacity ask takes it whole
    ("devices counted whole", [(1.0, Shape(0, (milli(1, 500),)))], 8000, [Slot(1, 1), Slot(0, 1)], None, 0, 0),
    # a device measured in a capacity the request does not name is taken whole
    ("another unit: taken whole", [(1.0, Shape(0, (milli(1, 500),)))], 8000, [Slot(8, 16, "memory")], None, 8, 8),
    # a CPU-only mix strands everything (no shape asking devices fits), weighed in full
    ("a CPU-only mix", [(1.0, Shape(100))], 8000, slots(1000, 300), None, 1300, 1300),
]


@pytest.mark.parametrize(
    ("target", "cpu", "devices", "accepts", "want", "want_stranded"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_fragmentation_table(
    target: list[tuple[float, Shape]],
    cpu: int,
    devices: list[Slot],
    accepts: list[list[list[bool]]] | None,
    want: float,
    want_stranded: int,
) -> None:
    assert sum(node_fragmentation(target, cpu, devices, accepts)) == pytest.approx(want)
    assert sum(stranded(target, cpu, devices, accepts)) == want_stranded


def test_fragmentation_is_counted_per_device() -> None:
    # 0.5 x 300 + 0.3 x 300 on GPU 1; the CPU pods' 0.2 on both
    assert node_fragmentation(MIX, 8000, slots(1000, 300)) == pytest.approx([200, 300])


def test_a_node_of_two_drivers_counts_each_device_in_its_unit() -> None:
    # a GPU (milli) and a NIC (itself) the GPU request's selectors refuse: the NIC's one device is
    # fragmented for the GPU pods, nothing of the GPU
    gpu_pods = [(1.0, Shape(0, (milli(1, 500),)))]
    devices = [Slot(1000, 1000, "milli"), Slot(1, 1)]
    assert node_fragmentation(gpu_pods, 0, devices, [[[True, False]]]) == [0, 1]


def test_fits_needs_every_request() -> None:
    two = Shape(0, (milli(1, 500), Ask(1)))
    assert fits(two, 0, slots(1000, 500))
    assert not fits(two, 0, slots(500, 500))


def test_the_mix_takes_the_commonest_shapes_to_95_percent() -> None:
    # test_fragmentation_model's typical-pods case: 60 + 36 of 100 pods cover 95%; the 4 CPU pods are left out
    shapes = [Shape(1000, (milli(1, 500),))] * 60 + [Shape(2000, (milli(1, 1000),))] * 36 + [Shape(3000)] * 4
    assert [(round(p, 4), s.cpu) for p, s in mix(shapes)] == [(0.625, 1000), (0.375, 2000)]
    assert [s.cpu for _, s in mix(shapes, popularity=1.0)] == [1000, 2000, 3000]
    # equal counts: the larger shape first (cpu, then the milli asked), as the paper's sort
    assert [s.cpu for _, s in mix([Shape(1), Shape(2), Shape(2, (milli(1, 5),))], 1.0)] == [2, 2, 1]
    assert mix([Shape(1), Shape(2), Shape(2, (milli(1, 5),))], 1.0)[0][1].asks == (milli(1, 5),)


pods = st.builds(
    lambda cpu, kind, milli, num, spec: (
        TracePod("p", cpu, 0, 0, 0) if kind == 0 else TracePod("p", cpu, 0, num if milli == 1000 else 1, milli, spec)
    ),
    st.sampled_from([1000, 4000, 8000, 16000]),
    st.integers(0, 3),
    st.sampled_from([100, 250, 500, 700, 1000]),
    st.integers(1, 4),
    st.sampled_from([(), ("T4",), ("A100", "V100")]),
)


@settings(max_examples=150, deadline=None)
@given(
    trace=st.lists(pods, min_size=1, max_size=40),
    model=st.sampled_from(["T4", "A100", "P100"]),
    cpu=st.integers(0, 20000),
    free=st.lists(st.sampled_from([0, 50, 250, 500, 700, 1000]), min_size=1, max_size=8),
)
def test_equals_the_reference_model(trace: list[TracePod], model: str, cpu: int, free: list[int]) -> None:
    """The reference model's ``Fragmentation.of`` over the trace's typical pods, and the
    semantics over the same pods' shapes (a model the pod does not accept: its selector refuses
    every device), agree on any node."""
    want = ref.Fragmentation(typical_pods(trace)).of(model, cpu, free)

    def shape(p: TracePod) -> Shape:
        return Shape(p.cpu_milli, (milli(p.num_gpu, p.gpu_milli, *p.gpu_spec),) if p.num_gpu else ())

    target = mix(shape(p) for p in trace)
    accepts = [[[not a.selectors or model in a.selectors] * len(free) for a in s.asks] for _, s in target]
    assert sum(node_fragmentation(target, cpu, slots(*free), accepts)) == pytest.approx(want)
