"""Scraping /metrics and reading samples out of it."""

from __future__ import annotations

import urllib.request

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())


def families(text: str) -> dict[str, Metric]:
    """Parsed families by their exposed name (the parser drops a counter's ``_total``)."""
    found = {}
    for family in text_string_to_metric_families(text):
        found[family.name + ("_total" if family.type == "counter" else "")] = family
    return found


def value(family: Metric, suffix: str = "", **labels: str) -> float:
    return sum(
        s.value
        for s in family.samples
        if s.name == family.name + suffix and all(s.labels.get(k) == v for k, v in labels.items())
    )
