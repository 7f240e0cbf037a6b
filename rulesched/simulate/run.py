"""``rulesched simulate``: schedule a cluster read from files, then report placements.

cluster files -> :func:`rulesched.simulate.load.load_cluster` -> :class:`ClusterStore` ->
:class:`rulesched.simulate.driver.Simulation` (the live scheduler's queue, cycle and preemption
on virtual time; binding always succeeds) -> :mod:`rulesched.simulate.report`.
"""

from __future__ import annotations

import gc
import logging
import time
from dataclasses import dataclass

from rulesched.cluster.store import ClusterStore
from rulesched.lang import load_rules, resolve_rules_path
from rulesched.scheduler.framework import SchedulerSettings
from rulesched.simulate.driver import Simulation
from rulesched.simulate.load import ClusterObjects, load_cluster
from rulesched.simulate.report import Report, render_json, render_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SimulateSettings:
    cluster: tuple[str, ...]
    rules: tuple[str, ...] = ("default",)
    output: str = "table"
    explain: bool = False
    seed: int = 0
    percentage_of_nodes_to_score: int = 0
    scheduler_name: str | None = None


def simulate(objects: ClusterObjects, settings: SimulateSettings) -> Report:
    rules = load_rules([resolve_rules_path(r) for r in settings.rules])
    store = ClusterStore.build(
        objects.nodes,
        objects.running_pods,
        objects.pdbs,
        {ns.name: ns.labels for ns in objects.namespaces},
    )
    scheduler_settings = SchedulerSettings(
        percentage_of_nodes_to_score=settings.percentage_of_nodes_to_score,
        seed=settings.seed,
        explain=settings.explain,
        scheduler_name=settings.scheduler_name,
    )
    simulation = Simulation(rules, store, scheduler_settings)
    pending = [
        p
        for p in objects.pending_pods
        if settings.scheduler_name is None or p.scheduler_name == settings.scheduler_name
    ]
    for pod in pending:
        simulation.add(pod)
    # The loaded cluster lives as long as the run: keep the cyclic collector from walking it
    # again at every full collection (it costs more the bigger the cluster).
    gc.collect()
    gc.freeze()
    started = time.perf_counter()
    simulation.run()
    elapsed = time.perf_counter() - started
    return Report(pending, simulation.history, store, simulation.evicted, elapsed, settings.explain)


def simulate_command(settings: SimulateSettings) -> int:
    started = time.perf_counter()
    objects = load_cluster(settings.cluster)
    for warning in objects.warnings:
        log.warning(warning)
    log.info(
        "loaded %d nodes and %d pods in %.2fs", len(objects.nodes), len(objects.pods), time.perf_counter() - started
    )
    report = simulate(objects, settings)
    print(render_json(report) if settings.output == "json" else render_table(report))
    return 0
