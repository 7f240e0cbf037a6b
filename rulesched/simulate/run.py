"""``rulesched simulate``: schedule a cluster read from files, then report placements.

cluster files -> :func:`rulesched.simulate.load.load_cluster` -> :class:`ClusterStore` ->
:class:`rulesched.simulate.driver.Simulation` (the live scheduler's queue, cycle and preemption
on virtual time; binding always succeeds) -> :mod:`rulesched.simulate.report`.

A long run (more than :data:`PROGRESS_MIN_PODS` pods to schedule) draws a progress bar on stderr
when stderr is a terminal, never otherwise (pipes, CI, tests): see :func:`wants_progress`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from rulesched.engine import collecting_seldom, freeze_loaded, run_thresholds
from rulesched.errors import InputError
from rulesched.lang import load_rules, resolve_rules_path, startup_warning
from rulesched.model import Pod
from rulesched.scheduler.changes import Change, changed_rules
from rulesched.scheduler.framework import (
    EXPLAIN_FULL,
    EXPLAIN_SUMMARY,
    MIN_CANDIDATE_NODES_ABSOLUTE,
    MIN_CANDIDATE_NODES_PERCENTAGE,
    SchedulerSettings,
    check_percentage_of_nodes_to_score,
    check_sampling,
)
from rulesched.simulate.apply import read_edits
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import ClusterObjects, load_cluster
from rulesched.simulate.node_metrics import read_node_metrics
from rulesched.simulate.report import Provenance, Report, render_summary, render_table, write_json

log = logging.getLogger(__name__)

PROGRESS_MIN_PODS = 500  # more pods to schedule than this: a progress bar, when stderr is a terminal
_NAMED_SKIPPED = 3  # pods named in the warning about pods bound to missing nodes


@dataclass(frozen=True)
class SimulateSettings:
    """``rulesched simulate``'s options. ``cluster`` paths may include ``-`` (standard input)
    once; ``strict`` makes a pod bound to a node missing from them an error, not a warning."""

    cluster: tuple[str, ...]
    rules: tuple[str, ...] = ("default",)
    output: str = "table"
    explain: bool = False
    explain_full: bool = False  # with explain: every evaluated node's reasons and scores in JSON
    nodes: int | None = None  # node rows in table and HTML output: None the default, 0 all, N the busiest N
    seed: int = 0
    percentage_of_nodes_to_score: int = 0
    scheduler_name: str | None = None
    strict: bool = False
    node_metrics: tuple[str, ...] = ()  # --node-metrics files (rulesched.simulate.node_metrics)
    min_candidate_nodes_percentage: int = MIN_CANDIDATE_NODES_PERCENTAGE  # (DefaultPreemptionArgs)
    min_candidate_nodes_absolute: int = MIN_CANDIDATE_NODES_ABSOLUTE
    apply: str | None = None  # --apply: a fix's changes made first (rulesched.simulate.apply)
    device_group: str = "model"  # --device-group: the attribute the devices table groups by


def pods_to_schedule(objects: ClusterObjects, settings: SimulateSettings) -> list[Pod]:
    """The pending pods the run reports, in input order (those naming ``--scheduler-name``);
    those being deleted among them are reported but never attempted (see
    :meth:`rulesched.simulate.driver.Simulation.add`)."""
    return [
        p
        for p in objects.pending_pods
        if settings.scheduler_name is None or p.scheduler_name == settings.scheduler_name
    ]


def wants_progress(pods: int, stderr_is_tty: bool) -> bool:
    """Whether to draw a progress bar for a run that attempts ``pods`` pods: only on a terminal,
    and only when the run is long enough to need one."""
    return stderr_is_tty and pods > PROGRESS_MIN_PODS


def skipped_warning(skipped: Sequence[Pod]) -> str:
    """The one warning line for pods left out as bound to nodes missing from the files."""
    named = [f"{p.key} on {p.node_name}" for p in skipped[:_NAMED_SKIPPED]]
    if len(skipped) > _NAMED_SKIPPED:
        named.append(f"+{len(skipped) - _NAMED_SKIPPED} more")
    what = "1 pod bound to a node" if len(skipped) == 1 else f"{len(skipped)} pods bound to nodes"
    return f"skipped {what} missing from the cluster files ({', '.join(named)}); --strict makes this an error"


def simulate(
    objects: ClusterObjects,
    settings: SimulateSettings,
    progress: Callable[[int], None] | None = None,
    rule_changes: Sequence[Change] = (),
) -> Report:
    """Schedule ``objects``' pending pods with ``settings``' rules (changed by ``rule_changes``:
    ``--apply``'s changes to the rules); ``progress`` (see :meth:`Simulation.run`) hears of each
    pod's first attempt."""
    check_sampling(settings.min_candidate_nodes_percentage, settings.min_candidate_nodes_absolute)
    check_percentage_of_nodes_to_score(settings.percentage_of_nodes_to_score)
    freeze_loaded()
    rules = load_rules([resolve_rules_path(r) for r in settings.rules])
    try:
        rules = changed_rules(rules, rule_changes) or rules
    except ValueError as error:
        raise InputError(f"{settings.apply}: {error}") from None
    unfit = startup_warning(rules.checked, rules.files)
    if unfit is not None:
        log.warning(unfit, extra={"rules": rules.digest})
    store = objects.store(provision=True, load=read_node_metrics(settings.node_metrics))
    scheduler_settings = SchedulerSettings(
        percentage_of_nodes_to_score=settings.percentage_of_nodes_to_score,
        seed=settings.seed,
        explanation=(EXPLAIN_FULL if settings.explain_full else EXPLAIN_SUMMARY) if settings.explain else "",
        scheduler_name=settings.scheduler_name,
        min_candidate_nodes_percentage=settings.min_candidate_nodes_percentage,
        min_candidate_nodes_absolute=settings.min_candidate_nodes_absolute,
    )
    simulation = Simulation(rules, store, scheduler_settings)
    # (then frozen too: the rules, the store and the queue live as long as the run)
    with collecting_seldom(then_freeze=True):  # (a full collection while queueing walked the whole loaded cluster)
        for group in objects.groups:
            simulation.add_group(group)
        pending = pods_to_schedule(objects, settings)
        for pod in pending:
            simulation.add(pod)
    started = time.perf_counter()
    # What the run made and kept (its caches, the cluster's state, the history the report reads)
    # lives as long as the report: frozen too when the run ends. Otherwise the first collection
    # at the restored thresholds walks all of it to free nothing (0.4 CPU s after the openb
    # replay) and, in `rulesched simulate`, so do the collections at interpreter exit (1.5 s).
    with collecting_seldom(run_thresholds(), then_freeze=True):
        simulation.run(progress)
    elapsed = time.perf_counter() - started
    explaining = simulation.recorder.explain_seconds  # timed apart by each cycle: not scheduling
    provenance = Provenance(
        tuple(str(f) for f in rules.files),
        rules.digest,
        settings.cluster,
        settings.seed,
        settings.percentage_of_nodes_to_score,
        settings.scheduler_name,
    )
    return Report(
        pending,
        simulation.history,
        store,
        simulation.evicted,
        max(0.0, elapsed - explaining),
        settings.explain,
        len(objects.skipped_pods),
        provenance=provenance,
        explain_seconds=explaining,
        explain_full=settings.explain_full,
        nodes=settings.nodes,
        device_group=settings.device_group,
    )


def simulate_command(settings: SimulateSettings) -> int:
    started = time.perf_counter()
    edits = read_edits(settings.apply) if settings.apply else None
    objects = load_cluster(
        settings.cluster, skip_missing_nodes=not settings.strict, edit=edits.edit if edits is not None else None
    )
    rule_changes = edits.rule_changes if edits is not None else ()
    for warning in objects.warnings:
        log.warning(warning)
    if objects.skipped_pods:
        log.warning(skipped_warning(objects.skipped_pods))
    log.info(
        "loaded %d nodes and %d pods in %.2fs", len(objects.nodes), len(objects.pods), time.perf_counter() - started
    )
    attempts = sum(1 for p in pods_to_schedule(objects, settings) if not p.scheduling_gates and not p.deleting)
    if wants_progress(attempts, _stderr_is_tty()):
        with _progress_bar(attempts) as advance:
            report = simulate(objects, settings, advance, rule_changes)
    else:
        report = simulate(objects, settings, rule_changes=rule_changes)
    if settings.output == "json":
        write_json(report, sys.stdout)
        print()
    elif settings.output == "summary":
        print(render_summary(report))
    elif settings.output == "html":
        from rulesched.simulate.html import render_html  # (only this output needs it)

        print(render_html(report))
    else:
        print(render_table(report))
    return 0


def _stderr_is_tty() -> bool:
    stderr = sys.stderr
    return stderr is not None and stderr.isatty()


@contextmanager
def _progress_bar(total: int) -> Iterator[Callable[[int], None]]:
    """A transient bar on stderr (gone once the run ends), advanced with the pods attempted."""
    from rich.console import Console  # imported only when a bar is drawn
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("scheduling"), BarColumn(), MofNCompleteColumn(), TextColumn("pods"), TimeElapsedColumn())
    step = max(1, total // 200)  # redraw data at most ~200 times: the bar costs nothing measurable
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("scheduling", total=total)

        def advance(done: int) -> None:
            if done % step == 0 or done >= total:
                bar.update(task, completed=done)

        yield advance
