"""The live load sources of ``rulesched run``: one thread per source reads it every ``interval``
and publishes every node's values as one :class:`~rulesched.model.load.LoadSnapshot`.

The scheduler never waits on a source: pollers run on threads of their own, and each publication
goes to the loop's inbox like an informer's event, applied between cycles
(:meth:`rulesched.cluster.store.ClusterStore.set_load`). A read that fails (the source down, a
timeout: at most the source's ``timeout``, which is at most its ``interval``) keeps the source's
last values; every publication drops the values older than their source's ``max_age``, so rules
see them as absent (``has()`` false, reads 0) until the source answers again. A failure is logged
once when it starts (and again when its message changes), its recovery once. A node a source
names that the cluster does not hold is ignored by the store.

Each publication says when it was made (``now``): ``node.metrics_age`` counts from the value's
own time to then, and stays as published until the next publication (at most the shortest
interval later), so compiled rules may cache what they read of a node between publications.
Next stage: :meth:`rulesched.cluster.store.ClusterStore.set_load` puts the values on the nodes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from rulesched.errors import InputError, KubeError
from rulesched.kube.api import KubeApi
from rulesched.kube.node_metrics import read_node_usage
from rulesched.loadsources.prometheus import PrometheusQuery, SourceError
from rulesched.loadsources.settings import (
    LoadSourceSettings,
    MetricsApiSettings,
    PrometheusSettings,
    estimate_rules,
)
from rulesched.model.load import LoadSnapshot, NodeLoad, NodeUsage, Sample

log = logging.getLogger(__name__)


class LoadSources:
    """The pollers of every configured source, and the values they last read."""

    def __init__(
        self,
        sources: tuple[LoadSourceSettings, ...],
        api: KubeApi | None,
        publish: Callable[[LoadSnapshot], None],
        stop: threading.Event,
        clock: Callable[[], float] = time.time,
        on_read: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.sources = sources
        self._api = api
        self._publish = publish
        self._stop = stop
        self._clock = clock
        self._on_read = on_read  # (source name, whether the read gave values): the /metrics counter
        self._estimates = estimate_rules(sources)
        self._lock = threading.Lock()
        self._usage: Mapping[str, NodeUsage] = MappingProxyType({})
        self._metrics: dict[str, Mapping[str, Sample]] = {}  # metric name -> node -> sample
        self._version = 0
        self._threads: list[threading.Thread] = []
        self.reads: dict[str, int] = dict.fromkeys((s.name for s in sources), 0)  # successful reads
        self.failures: dict[str, int] = dict.fromkeys((s.name for s in sources), 0)

    def start(self) -> None:
        for source in self.sources:
            thread = threading.Thread(target=self._poll, args=(source,), name=f"load-{source.name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # --- one source ----------------------------------------------------------------------------
    def _poll(self, source: LoadSourceSettings) -> None:
        query = PrometheusQuery(source) if isinstance(source, PrometheusSettings) else None
        failing = ""
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    self._read(source, query)
                except (SourceError, KubeError, InputError) as err:
                    self.failures[source.name] += 1
                    if self._on_read is not None:
                        self._on_read(source.name, False)
                    message = str(err)
                    if message != failing:
                        log.warning(
                            "load source %s: %s; keeping its last values until they are %gs old",
                            source.name,
                            message,
                            source.max_age,
                            extra={"source": source.name},
                        )
                    failing = message
                else:
                    self.reads[source.name] += 1
                    if self._on_read is not None:
                        self._on_read(source.name, True)
                    if failing:
                        log.info("load source %s answers again", source.name, extra={"source": source.name})
                    failing = ""
                self._publish(self.snapshot())
                self._stop.wait(max(0.0, source.interval - (time.monotonic() - started)))
        finally:
            if query is not None:
                query.close()

    def _read(self, source: LoadSourceSettings, query: PrometheusQuery | None) -> None:
        now = self._clock()
        if isinstance(source, MetricsApiSettings):
            if self._api is None:
                raise SourceError("no Kubernetes API to read metrics.k8s.io from")
            listed = read_node_usage(self._api, source.timeout, now)
            for problem in listed.skipped[:1]:
                log.warning("load source %s: left out: %s", source.name, problem, extra={"source": source.name})
            usage = listed.usage
            if source.window is not None:
                usage = {n: NodeUsage(u.cpu_milli, u.memory_bytes, u.at, source.window) for n, u in usage.items()}
            with self._lock:
                self._usage = MappingProxyType(dict(usage))
            return
        assert query is not None
        result = query.read(now)
        if result.left_out:
            left = ", ".join(f"{why}: {count}" for why, count in sorted(result.left_out.items()))
            log.debug("load source %s: series left out (%s)", source.name, left, extra={"source": source.name})
        with self._lock:
            self._metrics[source.name] = result.values

    # --- publishing ------------------------------------------------------------------------------
    def snapshot(self) -> LoadSnapshot:
        """Every source's last values, without those older than their source's ``max_age``."""
        now = self._clock()
        limits = {s.name: s.max_age for s in self.sources}
        with self._lock:
            usage, metrics = self._usage, dict(self._metrics)
            self._version += 1
            version = self._version
        nodes: dict[str, tuple[NodeUsage | None, dict[str, Sample]]] = {}
        usage_limit = next((s.max_age for s in self.sources if isinstance(s, MetricsApiSettings)), 0.0)
        for node, value in usage.items():
            if now - value.at <= usage_limit:
                nodes[node] = (value, {})
        for name, values in metrics.items():
            limit = limits[name]
            for node, sample in values.items():
                if now - sample.at <= limit:
                    nodes.setdefault(node, (None, {}))[1][name] = sample
        loads = {node: NodeLoad(usage=value, metrics=MappingProxyType(named)) for node, (value, named) in nodes.items()}
        return LoadSnapshot(MappingProxyType(loads), version, self._estimates, now, live=True)
