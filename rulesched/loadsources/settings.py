"""``load_sources:`` in ``rulesched run --config``: where node load comes from, and how often.

Each entry is one source, read by a poller thread of its own every ``interval``::

    load_sources:
      - kind: metrics-api          # metrics.k8s.io NodeMetrics (metrics-server), through the API server
        interval: 15s
        max_age: 60s
      - kind: prometheus           # one PromQL instant query, one value per node
        name: cpu_5m               # the metric's name (what rules will call it)
        url: http://prometheus.monitoring:9090
        query: 100 * (1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[5m])))
        node_label: node           # the series label that names the node
        interval: 30s
        max_age: 120s

Common keys: ``interval`` (between reads), ``max_age`` (a value older than this is dropped:
rules see it as absent; at least ``interval``), ``timeout`` (per request; at most ``interval``),
``window`` (how long a value averages over, which decides how long a placed pod's estimate lasts:
``metrics-api``'s default is each value's own window as metrics-server reports it, a query's the
``interval``; give the query's range, ``5m`` above). ``metrics-api`` also takes ``cpu_percent``
and ``memory_percent`` (how much of a placed pod's requests to add to its node's usage until
metrics catch up; 100). ``prometheus`` takes ``name``, ``url``, ``query`` (required),
``node_label`` (default ``node``), ``node_pattern`` (a regular expression the label's value must
match whole, its first group being the node name: ``instance`` values such as ``n1:9100`` with
``(.*):[0-9]+``), ``pod_estimate`` (what each placed pod adds to the value until it catches up;
none by default), ``bearer_token_file`` (read for every request: tokens rotate) and ``ca_file``.

The key's name says what the list holds: sources of node load, as ``profiles:`` holds profiles.
Durations are written as elsewhere in ``--config`` (``15s``, ``500ms``, ``1m``, or seconds).
Mistakes are one line naming the file and the entry (``config.yaml: load_sources[1].interval:
...``); at most one ``metrics-api`` source, and each ``prometheus`` name once.
Next stage: :mod:`rulesched.loadsources.poller` reads each source on its own thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rulesched.config import seconds
from rulesched.errors import ConfigError
from rulesched.model.load import EstimateRules, metric_name_problem

METRICS_API = "metrics-api"
PROMETHEUS = "prometheus"
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_MIN_INTERVAL = 1.0  # seconds: polling faster than the sources refresh only loads them


@dataclass(frozen=True)
class MetricsApiSettings:
    """The ``metrics.k8s.io`` API: every node's cpu and memory usage (``kubectl top node``).
    metrics-server refreshes every 15 s by default (``--metric-resolution``)."""

    interval: float = 15.0
    max_age: float = 60.0
    timeout: float = 5.0
    window: float | None = None  # None: each value's own window, as metrics-server reports it
    cpu_percent: int = 100
    memory_percent: int = 100

    @property
    def name(self) -> str:
        return METRICS_API


@dataclass(frozen=True)
class PrometheusSettings:
    """One named PromQL instant query giving a value per node, matched by ``node_label``."""

    name: str
    url: str
    query: str
    node_label: str = "node"
    node_pattern: str | None = None  # the label's value must match it whole; group 1 is the node name
    interval: float = 30.0
    max_age: float = 120.0
    timeout: float = 5.0
    window: float | None = None  # None: the interval
    pod_estimate: float | None = None
    bearer_token_file: str | None = None
    ca_file: str | None = None

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return re.compile(self.node_pattern) if self.node_pattern is not None else None


LoadSourceSettings = MetricsApiSettings | PrometheusSettings
_DURATIONS = ("interval", "max_age", "timeout", "window")


def estimate_rules(sources: tuple[LoadSourceSettings, ...]) -> EstimateRules:
    """What the sources say a placed pod adds to its node's values."""
    per_pod = {s.name: s.pod_estimate for s in sources if isinstance(s, PrometheusSettings) and s.pod_estimate}
    api = next((s for s in sources if isinstance(s, MetricsApiSettings)), MetricsApiSettings())
    return EstimateRules(api.cpu_percent, api.memory_percent, per_pod)


def parse_load_sources(path: str, raw: Any) -> tuple[LoadSourceSettings, ...]:
    """The ``load_sources:`` list of the ``--config`` file at ``path`` (keys in snake_case or
    dashed); a mistake is a one-line ConfigError naming the file and entry."""
    where = f"{path}: load_sources"
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(
            f"{where}: expected a list of sources ({{kind: metrics-api, ...}}, {{kind: prometheus, ...}})"
        )
    sources: list[LoadSourceSettings] = []
    names: dict[str, int] = {}
    for i, entry in enumerate(raw):
        source = _source(f"{where}[{i}]", entry)
        if source.name in names:
            what = "a second metrics-api source" if source.name == METRICS_API else f"duplicate name {source.name!r}"
            raise ConfigError(f"{where}[{i}]: {what} (load_sources[{names[source.name]}] has it)")
        names[source.name] = i
        sources.append(source)
    return tuple(sources)


def _source(where: str, entry: Any) -> LoadSourceSettings:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping with kind: metrics-api or prometheus, got {entry!r}")
    values = {str(k).replace("-", "_"): v for k, v in entry.items()}
    kind = values.pop("kind", None)
    settings: type[MetricsApiSettings] | type[PrometheusSettings]
    if kind == METRICS_API:
        settings = MetricsApiSettings
    elif kind == PROMETHEUS:
        settings = PrometheusSettings
    else:
        raise ConfigError(f"{where}.kind: expected metrics-api or prometheus, got {kind!r}")
    known = [f.name for f in dataclasses.fields(settings)]
    for key in values:
        if key not in known:
            raise ConfigError(f"{where}: unknown setting {key!r} for kind {kind} (known: kind, {', '.join(known)})")
    for key in _DURATIONS:
        if key in values and values[key] is not None:
            values[key] = _duration(f"{where}.{key}", values[key])
    if settings is PrometheusSettings:
        _check_prometheus(where, values)
    else:
        for key in ("cpu_percent", "memory_percent"):
            value = values.get(key, 100)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{where}.{key}: expected a whole number of percent, 0 or more, got {value!r}")
    if "timeout" not in values:  # (the default, but never longer than the interval)
        values["timeout"] = min(settings.timeout, values.get("interval", settings.interval))
    source = settings(**values)
    _check_timing(where, source)
    return source


def _duration(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where}: expected a duration (15s, 500ms, 1m), got {value!r}")
    try:
        return seconds(value) if isinstance(value, str) else float(value)
    except argparse.ArgumentTypeError as err:
        raise ConfigError(f"{where}: {err}") from None


def _check_timing(where: str, source: LoadSourceSettings) -> None:
    if not source.interval >= _MIN_INTERVAL:
        raise ConfigError(f"{where}.interval: {source.interval:g}s: expected at least {_MIN_INTERVAL:g}s")
    if not source.max_age >= source.interval:
        raise ConfigError(
            f"{where}.max_age: {source.max_age:g}s is shorter than the interval ({source.interval:g}s): "
            "every value would be dropped before the next read"
        )
    if not 0 < source.timeout <= source.interval:
        raise ConfigError(f"{where}.timeout: {source.timeout:g}s: expected more than 0 and at most the interval")
    if source.window is not None and not source.window >= 0:
        raise ConfigError(f"{where}.window: {source.window:g}s: expected 0 or more")


def _check_prometheus(where: str, values: Mapping[str, Any]) -> None:
    for key in ("name", "url", "query"):
        if not isinstance(values.get(key), str) or not values[key].strip():
            raise ConfigError(f"{where}.{key}: required (a string)")
    problem = metric_name_problem(values["name"])
    if problem:
        raise ConfigError(f"{where}.name: {problem}")
    url = values["url"]
    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise ConfigError(f"{where}.url: {url!r}: expected http://HOST:PORT or https://... (Prometheus's address)")
    label = values.get("node_label", "node")
    if not isinstance(label, str) or _LABEL_NAME.fullmatch(label) is None:
        raise ConfigError(f"{where}.node_label: {label!r} is not a Prometheus label name")
    pattern = values.get("node_pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise ConfigError(f"{where}.node_pattern: expected a regular expression, got {pattern!r}")
        try:
            re.compile(pattern)
        except re.error as err:
            raise ConfigError(f"{where}.node_pattern: {pattern!r} is not a regular expression: {err}") from None
    estimate = values.get("pod_estimate")
    if estimate is not None and (
        isinstance(estimate, bool) or not isinstance(estimate, int | float) or not math.isfinite(estimate)
    ):
        raise ConfigError(f"{where}.pod_estimate: expected a number, got {estimate!r}")
    for key in ("bearer_token_file", "ca_file"):
        if values.get(key) is not None and not isinstance(values[key], str):
            raise ConfigError(f"{where}.{key}: expected a file path, got {values[key]!r}")
