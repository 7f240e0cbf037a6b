"""`simulate` and the cyclic collector (issue 38's speed target, benchmarks/README.md): the loaded
cluster, and what the run kept, are frozen (``gc.freeze``) so that no collection walks them to free
nothing, after the run or at interpreter exit; an earlier run's frozen objects go back to the
collector at the next run, so runs one after another in one process hold one run's objects at
most; and freezing frees nothing a caller still holds: the same outputs whatever was frozen."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from rulesched.simulate.load import load_cluster
from rulesched.simulate.report import Report
from rulesched.simulate.run import SimulateSettings, simulate

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
SETTINGS = SimulateSettings(cluster=(str(CLUSTER),), seed=3)


class _Cyclic:
    """Garbage only the cyclic collector frees (it refers to itself)."""

    def __init__(self) -> None:
        self.me = self


def _outputs(report: Report) -> tuple[object, ...]:
    """What a report says, its timings aside."""
    summary = {k: v for k, v in report.summary().items() if not k.endswith("_seconds")}
    return report.rows(), summary, [(n.name, n.requested) for n in report.state.nodes]


def _tracked(obj: object) -> bool:
    """Whether the collector's generations hold ``obj`` (a frozen object is in none of them)."""
    return any(o is obj for o in gc.get_objects())


def test_what_the_run_kept_is_frozen_and_the_next_run_lets_go_of_what_was_dropped() -> None:
    made_in_run: list[_Cyclic] = []  # (garbage in a cycle, made while pods are scheduled)
    report = simulate(load_cluster([CLUSTER]), SETTINGS, progress=lambda _: made_in_run.append(_Cyclic()))
    made = [h.last for h in report.history.values()]  # (each pod's last cycle: made by the run)
    assert made and not any(_tracked(m) for m in made) and not _tracked(report.state)
    gone = weakref.ref(made_in_run[0])
    expected = _outputs(report)
    del report, made
    made_in_run.clear()
    gc.collect()
    assert gone() is not None  # frozen: no collection frees it, though nothing holds it
    again = simulate(load_cluster([CLUSTER]), SETTINGS)
    assert gone() is None  # the next run gave it back to the collector, which freed it
    assert not _tracked(again.state)
    assert _outputs(again) == expected


def test_freezing_frees_nothing_a_caller_holds() -> None:
    """A report kept across later runs (on the same loaded objects) reads the same after them,
    and every run's outputs are the same as the first's."""
    objects = load_cluster([CLUSTER])
    first = simulate(objects, SETTINGS)
    expected = _outputs(first)
    for _ in range(2):
        assert _outputs(simulate(objects, SETTINGS)) == expected
    gc.collect()
    assert _outputs(first) == expected


def test_a_first_run_in_a_process_freezes_without_collecting_and_the_next_collects() -> None:
    """With nothing frozen before (`rulesched simulate`: one run a process), the run does not walk
    the loaded cluster to free the little garbage there is: it stays frozen until the next run."""
    gc.unfreeze()
    gc.collect()
    garbage = _Cyclic()
    gone = weakref.ref(garbage)
    del garbage
    simulate(load_cluster([CLUSTER]), SETTINGS)
    gc.collect()
    assert gone() is not None
    simulate(load_cluster([CLUSTER]), SETTINGS)
    assert gone() is None
