"""A named Prometheus instant query over HTTP: ``GET /api/v1/query?query=...``, one value per node.

The request goes through urllib3, already installed as the Kubernetes client's transport: the
poller is a plain thread making one blocking request per interval, which urllib3 does with a
connect and a read timeout and a kept-alive connection; aiohttp (also a dependency, for the
extender's server) would need an event loop on that thread for no gain. No retries (the next
read comes an interval later); Prometheus is also told the timeout (its ``timeout`` parameter),
so it stops evaluating a query nobody waits for.

The answer must be a ``vector`` (a scalar or a matrix is an error naming the query's result
type). Each series names its node by ``node_label`` (through ``node_pattern``'s first group, when
given: ``n1:9100`` -> ``n1``); its value, a string Prometheus writes (``"41.5"``, ``"NaN"``), is
read as a float, and its timestamp (the query's evaluation time) is when it was taken. Series
without the label, whose label does not match the pattern, or whose value is not a finite number
are left out and counted, as are nodes two series name (the query should aggregate by node:
which one to believe is not for rulesched to guess). Answers are bounded: at most
:data:`MAX_BODY` bytes and :data:`MAX_SERIES` series.
Next stage: :mod:`rulesched.loadsources.poller` publishes the values.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import urllib3

from rulesched import __version__
from rulesched.loadsources.settings import PrometheusSettings
from rulesched.model.load import Sample

MAX_BODY = 32 * 2**20  # bytes of an answer: ~200 000 series of a few labels
MAX_SERIES = 100_000


class SourceError(Exception):
    """A read that gave nothing usable: one line saying why."""


@dataclass(frozen=True)
class QueryResult:
    """node -> its value; ``left_out``: why series were not used, and how many."""

    values: Mapping[str, Sample]
    left_out: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


class PrometheusQuery:
    """One source's query, asked of its Prometheus through a connection pool of its own."""

    def __init__(self, settings: PrometheusSettings) -> None:
        self.settings = settings
        self._url = settings.url.rstrip("/") + "/api/v1/query"
        self._pattern = settings.pattern
        self._window = settings.window if settings.window is not None else settings.interval
        timeout = urllib3.Timeout(connect=settings.timeout, read=settings.timeout)
        options: dict[str, Any] = {"ca_certs": settings.ca_file} if settings.ca_file else {}
        self._pool = urllib3.PoolManager(num_pools=1, maxsize=1, retries=False, timeout=timeout, **options)

    def close(self) -> None:
        self._pool.clear()

    def read(self, now: float) -> QueryResult:
        """Ask now (``now``: the wall clock); SourceError when no usable answer came."""
        settings = self.settings
        headers = {"Accept": "application/json", "User-Agent": f"rulesched/{__version__}"}
        if settings.bearer_token_file:
            try:
                token = Path(settings.bearer_token_file).read_text(encoding="utf-8").strip()
            except OSError as err:
                raise SourceError(f"cannot read bearer_token_file {settings.bearer_token_file}: {err}") from None
            headers["Authorization"] = f"Bearer {token}"
        # (Prometheus parses durations as whole numbers with a unit: "0.2s" is refused, "200ms" is not)
        fields = {"query": settings.query, "timeout": f"{max(1, round(settings.timeout * 1000))}ms"}
        try:
            response = self._pool.request("GET", self._url, fields=fields, headers=headers, preload_content=False)
            try:
                body = response.read(MAX_BODY + 1)
            finally:
                response.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise SourceError(f"GET {self._url}: {err}") from None
        if len(body) > MAX_BODY:
            raise SourceError(f"GET {self._url}: the answer is larger than {MAX_BODY} bytes")
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            raise SourceError(f"GET {self._url}: {response.status}: the answer is not JSON") from None
        if response.status != 200 or not isinstance(answer, dict) or answer.get("status") != "success":
            problem = answer.get("error") if isinstance(answer, dict) else None
            raise SourceError(f"GET {self._url}: {response.status}: {str(problem or 'no result')[:300]}")
        return parse_vector(answer.get("data"), settings.node_label, self._pattern, self._window, now)


def parse_vector(data: Any, label: str, pattern: Any, window: float, now: float) -> QueryResult:
    """An instant query's ``data`` as node -> sample (see the module's docstring)."""
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise SourceError(f"the query gives a {kind or 'malformed result'}, not a vector (one series per node)")
    result = data.get("result")
    if not isinstance(result, list):
        raise SourceError("the query's result is not a list of series")
    if len(result) > MAX_SERIES:
        raise SourceError(f"the query gives {len(result)} series (at most {MAX_SERIES}): aggregate it by node")
    values: dict[str, Sample] = {}
    twice: set[str] = set()
    left_out: Counter[str] = Counter()
    for series in result:
        metric = series.get("metric") if isinstance(series, dict) else None
        name = metric.get(label) if isinstance(metric, dict) else None
        if not isinstance(name, str) or not name:
            left_out[f"no {label} label"] += 1
            continue
        if pattern is not None:
            match = pattern.fullmatch(name)
            if match is None:
                left_out[f"{label} not matching node_pattern"] += 1
                continue
            name = match.group(1) if match.re.groups else match.group(0)
        sample = _sample(series.get("value"), window, now)
        if sample is None:
            left_out["not a finite number"] += 1
            continue
        if name in values or name in twice:
            twice.add(name)
            values.pop(name, None)
            left_out["node given by several series"] += 1
            continue
        values[name] = sample
    return QueryResult(MappingProxyType(values), MappingProxyType(dict(left_out)))


def _sample(value: Any, window: float, now: float) -> Sample | None:
    if not isinstance(value, list) or len(value) != 2:
        return None
    at, text = value
    try:
        number = float(text) if isinstance(text, str) else math.nan
        taken = float(at)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or not math.isfinite(taken):
        return None
    return Sample(number, min(taken, now), window)
