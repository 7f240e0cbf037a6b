"""A property of explain's fixes: over generated clusters where a pod fits nowhere, every fix
shown, made on the cluster's objects and simulated (``simulate --apply``'s path, apart from the
trial explain checked it with), schedules the pod; and no smaller set of the changes explain
knows (brute force, up to the smallest fix's size) schedules it.

The clusters: a few nodes of 1-4 cpus, some labelled, tainted, cordoned or holding 3 pods at
most, running pods of two priorities, a PriorityClass, and a pending pod with a node selector or
a toleration now and then (tests/helpers/fixcheck.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.fixcheck import check, explain_fixes, generate, least_change, write
from tests.helpers.profiles import examples


@given(seed=st.integers(0, 2**32 - 1), nodes=st.integers(2, 5))
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_fix_schedules_the_pod_and_none_smaller_does(tmp_path: Path, seed: int, nodes: int) -> None:
    path = write(generate(seed, nodes=nodes), tmp_path / f"c{seed}.json")
    answer = explain_fixes(path)
    if answer["feasible"]:
        return  # (it fits: nothing to fix)
    checked = check(path, answer)
    unsound = [c.fix["summary"] for c in checked if c.placed is None]
    assert not unsound, unsound
    sizes = [c.fix["size"] for c in checked]
    assert sizes == sorted(sizes)  # smallest first
    if sizes:  # nothing smaller among the changes brute force knows (it may not know the fix's own)
        least = least_change(path, limit=sizes[0])
        assert least is None or least >= sizes[0] - 1e-9, (least, [c.fix["summary"] for c in checked])
