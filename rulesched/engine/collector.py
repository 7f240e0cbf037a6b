"""The cyclic garbage collector's settings while pods are scheduled, for every face that schedules.

A scheduling process keeps most of what it loads (the cluster, the rules, the queue) for as long
as it runs, and its cycles make and drop many small objects, few of them in reference cycles. At
CPython's default thresholds the collector walks the kept objects again and again to free
nothing: :func:`freeze_loaded` moves what is loaded out of its sight, :func:`run_thresholds`
collects the young generation as seldom as Go's collector would. ``rulesched simulate`` runs
under :func:`collecting_seldom`; ``rulesched run`` freezes what its first lists loaded and keeps
these thresholds from then on (:func:`keep_loaded`). (The extender freezes each large batch its
informers deliver: rulesched.extender.service.)
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_loaded() -> None:
    """Freeze (:func:`gc.freeze`) every object the collector tracks now: the loaded cluster lives
    as long as the run, and the collector would walk it again at every full collection (it costs
    more the bigger the cluster) to free nothing. What an earlier run froze goes back
    first and is collected if its caller has dropped it since, so that runs one after another in
    one process (tests, bench_fragmentation's workers) hold one run's objects at most, not every
    run's. With nothing frozen before (`rulesched simulate`: one run a process) there is no such
    collection: it walked the whole loaded cluster (~0.2 CPU s on the openb trace) to free a few
    thousand objects of the rules' compile and the imports, which stay frozen instead (until the
    next run, or the process's exit); :func:`rulesched.simulate.load.load_cluster` makes no cycles."""
    if gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
    gc.freeze()


# The cyclic collector's thresholds while pods are scheduled: a cycle makes and drops many
# small objects (bindings' lets, score rows, allocations), few of them in reference cycles, and
# at CPython's default (a young collection every 700 allocations, older ones every 10 of those)
# the openb replay spent about a tenth of its CPU time collecting (2.9 s of 27, 1,739
# collections); at these, 0.7 s (21), peak RSS the same.
RUN_GC_THRESHOLDS = (50_000, 20, 10)


def run_thresholds() -> tuple[int, int, int]:
    """:data:`RUN_GC_THRESHOLDS`, the young generation's grown to the objects frozen before the
    run (the loaded cluster, the rules, the queue, the process's modules), as Go's collector
    lets its heap grow by as much as is live (GOGC=100). A young collection walks every object
    made since the last and still alive, and a run keeps most of what it makes (caches, the
    history): the openb replay's 15 young collections walked ~750,000 objects (0.4-0.5 CPU s)
    to free 684; with ~280,000 frozen, 2 walk ~550,000 (~0.28 s). Cyclic garbage still waits at
    most as many allocations as the cluster has objects."""
    young, middle, old = RUN_GC_THRESHOLDS
    return max(young, gc.get_freeze_count()), middle, old


@contextmanager
def collecting_seldom(
    thresholds: tuple[int, int, int] = RUN_GC_THRESHOLDS, *, then_freeze: bool = False
) -> Iterator[None]:
    """The collector's thresholds set to ``thresholds`` for the block, then put back;
    ``then_freeze``: every object tracked then is frozen (:func:`gc.freeze`) first, also when
    the block fails, so that no collection at the restored thresholds walks what the block kept.
    Frozen objects are never collected until :func:`gc.unfreeze` (the next
    :func:`rulesched.simulate.run.simulate` calls it), though refcounting frees them as ever."""
    before = gc.get_threshold()
    gc.set_threshold(*thresholds)
    try:
        yield
    finally:
        if then_freeze:
            gc.freeze()
        gc.set_threshold(*before)


def keep_loaded() -> tuple[int, int, int]:
    """For a process that schedules from now on, for as long as it runs (``rulesched run`` once
    its caches synced): freeze what it holds (the first lists, the rules, the modules) and
    collect at :func:`run_thresholds` from now on; returns the thresholds before, for
    :func:`let_go`. No collection first: it would walk all of it to free the few thousand
    objects the imports and the rules' compile left, which stay frozen instead (and a test
    process running loop after loop paid a full collection of its whole heap at each start: the
    suite took 2 minutes longer). A reference cycle among the frozen objects that becomes garbage
    later is never collected (refcounting frees the rest): what can stay so is bounded by what
    was loaded. At CPython's defaults the live preemption benchmark's scheduling process spent
    ~590 ms of its measured phase in 397 collections, 3 of them full (benchmarks/README.md, Run 29)."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*run_thresholds())
    return before


def let_go(before: tuple[int, int, int]) -> None:
    """Undo :func:`keep_loaded` (the loop has stopped: in a process running loops one after
    another, as the tests do, what one loop froze is the collector's again)."""
    gc.unfreeze()
    gc.set_threshold(*before)
