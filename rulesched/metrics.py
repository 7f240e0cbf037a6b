"""What ``rulesched run`` and ``rulesched extender`` share on ``/metrics``: a registry per server
that never exposes ``_created`` series, kube-scheduler's histogram buckets and help-text
conventions, the Kubernetes client's request metrics and the process collector.

Names, types, labels and buckets follow Kubernetes' component-base so that dashboards and alerts
written for kube-scheduler (kubernetes-mixin) read rulesched unchanged: a metric's stability
(ALPHA, BETA, STABLE) is the ``[STABLE] `` prefix of its help text, as there; histogram buckets
are upstream's ``ExponentialBuckets(start, factor, count)``.

prometheus-client adds a ``<name>_created`` sample to every counter and histogram; its switch
(``disable_created_metrics``) is process-wide state, so instead each server's :class:`Registry`
collects from a private registry and leaves those samples out, for this server alone. Nothing
here is global: two servers in one process (tests) never share a metric.
Next stage: :mod:`rulesched.run.ops` (the scheduler's metrics) and
:mod:`rulesched.extender.server` use these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, Summary
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

# The types whose samples prometheus-client follows with a ``_created`` one.
_WITH_CREATED = frozenset({"counter", "histogram", "summary"})


def readiness_body(ready: bool, detail: str) -> str:
    """``/readyz``'s text, the same for ``run`` and the extender: ``ok: rules HASH`` or
    ``not ready: WHY`` (the status, 200 or 503, says it to a probe; the text to a person)."""
    return f"{'ok' if ready else 'not ready'}: {detail}"


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ``ExponentialBuckets``: ``count`` bounds, the first ``start``, each
    ``factor`` times the one before, multiplied step by step as Go does (so each bound is the
    same float64, and prints the same, as kube-scheduler's)."""
    bounds = []
    for _ in range(count):
        bounds.append(start)
        start *= factor
    return tuple(bounds)


def alpha(text: str) -> str:
    """Help text of an ALPHA metric (component-base's default stability), as upstream shows it."""
    return f"[ALPHA] {text}"


def beta(text: str) -> str:
    return f"[BETA] {text}"


def stable(text: str) -> str:
    return f"[STABLE] {text}"


class _WithoutCreated:
    """The families of ``inner``, less the ``_created`` samples of counters and histograms."""

    def __init__(self, inner: CollectorRegistry) -> None:
        self._inner = inner

    def collect(self) -> Iterable[Metric]:
        for family in self._inner.collect():
            if family.type in _WITH_CREATED:
                created = family.name + "_created"
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = [s for s in family.samples if s.name != created]
                yield kept
            else:
                yield family


class Registry(CollectorRegistry):
    """What a server exposes. Metrics register in :attr:`metrics` (pass it as ``registry=``);
    this registry, given to prometheus-client's exposition, serves them without ``_created``
    series (``?name[]=`` restrictions included)."""

    def __init__(self) -> None:
        super().__init__(support_collectors_without_names=True)
        self.metrics = CollectorRegistry()
        self.register(_WithoutCreated(self.metrics))

    def add(self, collector: Collector) -> None:
        """Register a custom collector (one computing its values at scrape time)."""
        self.metrics.register(collector)


class Labelled:
    """``metric.labels(*values)`` (values in the order of the metric's label names), each child
    looked up once: prometheus-client validates the values and takes a lock on every call (~5 us,
    several times per scheduled pod). The children are the metric's own; none is ever removed."""

    def __init__(self, metric: Counter | Histogram | Summary) -> None:
        self.metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        found = self._children.get(values)
        if found is None:
            found = self._children[values] = self.metric.labels(*values)
        return found


class RestClientMetrics:
    """client-go's request metrics (component-base's ``restclient`` adapter): one count per API
    request by status code (``<error>`` when no answer came), method and host; the latency of the
    requests that are answered whole (watches are counted, not timed, as client-go does).
    :meth:`observe` is the :class:`rulesched.kube.api.KubeApi` observer."""

    def __init__(self, registry: Registry) -> None:
        r = registry.metrics
        self.requests = Counter(
            "rest_client_requests",
            alpha("Number of HTTP requests, partitioned by status code, method, and host."),
            ["code", "method", "host"],
            registry=r,
        )
        self.latency = Histogram(
            "rest_client_request_duration_seconds",
            alpha("Request latency in seconds. Broken down by verb, and host."),
            ["verb", "host"],
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
            registry=r,
        )

        self._requests, self._latency = Labelled(self.requests), Labelled(self.latency)
        self._hosts: dict[str, str] = {}

    def observe(self, method: str, url: str, code: str, seconds: float | None) -> None:
        host = self._hosts.get(url)
        if host is None:
            host = self._hosts[url] = urlsplit(url).netloc or "none"
        self._requests(code, method, host).inc()
        if seconds is not None:
            self._latency(method, host).observe(seconds)


def add_process_collector(registry: Registry) -> None:
    """``process_*``: CPU seconds, resident memory, open files, start time (as Go's collector)."""
    ProcessCollector(registry=registry.metrics)


def add_helper_process_collector(registry: Registry, namespace: str, pid: Callable[[], int | None]) -> None:
    """``NAMESPACE_process_*``: the same figures for a helper process of this one, whose ``pid``
    (None: there is none now, and nothing is reported)."""
    ProcessCollector(namespace=namespace, pid=lambda: pid() or "none", registry=registry.metrics)
