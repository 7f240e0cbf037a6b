"""Node load from what the API serves and what people write: ``metrics.k8s.io`` NodeMetrics
objects, and the simple name -> node -> value format of node metrics files.

A NodeMetrics object (``kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes`` prints a
NodeMetricsList of them) has ``metadata.name``, ``timestamp`` (RFC 3339), ``window`` (a Go
duration: ``20.044s``, ``1m0s``) and ``usage.cpu``/``usage.memory`` quantities (``123456789n``,
``2048Ki``). The simple format is a mapping::

    usage:                      # node -> cpu and memory in use (either may be left out)
      n1: {cpu: 1500m, memory: 3Gi}
    metrics:                    # metric name -> node -> value
      cpu_5m: {n1: 41.5, n2: 80}
    age_seconds: {n1: 30}       # node -> how old its values are (default 0)
    pod_estimates: {cpu_5m: 2.5}  # metric name -> what each pod placed adds (default nothing)

A file's values are placed in time relative to the file itself, so a run never depends on when it
happens: the simple format's are ``age_seconds`` old, a NodeMetricsList's as old as their
timestamp is before the newest one in it; the snapshot's ``now`` is 0 and every ``at`` is
minus the age. Every problem is an :class:`~rulesched.errors.ObjectError` of one line naming the
file and field.
Next stage: :mod:`rulesched.cluster.load` (the store carries them);
:mod:`rulesched.kube.node_metrics` reads the API's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from rulesched.errors import InputError, ObjectError
from rulesched.model.fields import Where, describe, get_map, get_str, get_time, join_key, quantity
from rulesched.model.load import (
    DEFAULT_ESTIMATES,
    EstimateRules,
    LoadSnapshot,
    NodeLoad,
    NodeUsage,
    Sample,
    metric_name_problem,
)
from rulesched.model.names import dns1123_subdomain, shown

NODE_METRICS_KINDS = ("NodeMetrics", "NodeMetricsList", "List")
SIMPLE_KEYS = ("usage", "metrics", "age_seconds", "pod_estimates")
_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_GO_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(h|ms|m|s|us|µs|μs|ns)")
_MILLI = 1000


def go_duration(text: str) -> float:
    """A Go ``time.Duration`` as Go prints and parses it (``20.044s``, ``1m0.5s``, ``500ms``,
    ``0s``) in seconds; ValueError when it is not one (or is negative)."""
    if text == "0":
        return 0.0
    position, total = 0, 0.0
    if not text:
        raise ValueError("empty duration")
    while position < len(text):
        match = _GO_PART.match(text, position)
        if match is None or match[1] in ("", "."):
            raise ValueError(f"{shown(text)} is not a duration (expected e.g. 20.044s, 1m0s, 500ms)")
        total += float(match[1]) * _GO_UNITS[match[2]]
        position = match.end()
    return total


def _number(value: object, where: Where, at: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise where.error(f"expected a number, got {describe(value)}", at)
    number = float(value)
    if not math.isfinite(number):
        raise where.error(f"{value!r} is not a finite number", at)
    return number


def _node_name(name: object, where: Where, at: str) -> str:
    if not isinstance(name, str):
        raise where.error(f"node names are strings, got {describe(name)}", at)
    problem = dns1123_subdomain(name)
    if problem:
        raise where.error(f"node name {problem}", join_key(at, name))
    return name


def _bytes(milli: int) -> int:
    return -(-milli // _MILLI)  # (memory is read in milli-bytes: round a fraction up, as MilliValue does)


# --- metrics.k8s.io -------------------------------------------------------------------------------


def decode_node_metrics(obj: Any, source: str) -> tuple[str, NodeUsage]:
    """One NodeMetrics object: its node's name and usage (``at``: its timestamp, 0 when it has
    none; ``window``: its window, 0 when it has none)."""
    if type(obj) is not dict:
        raise ObjectError(f"expected a mapping, got {describe(obj)}", source=source, obj="NodeMetrics")
    where = Where(source, "NodeMetrics")
    meta = get_map(obj, "metadata", where, "")
    name = get_str(meta, "name", where, "metadata")
    if not name:
        raise where.error("missing", "metadata.name")
    problem = dns1123_subdomain(name)
    if problem:
        raise where.error(problem, "metadata.name")
    where.obj = f"NodeMetrics {name}"
    at = get_time(obj, "timestamp", where, "")
    window = 0.0
    raw_window = obj.get("window")
    if raw_window is not None:
        if not isinstance(raw_window, str):
            raise where.error(f"expected a duration such as 20.044s, got {describe(raw_window)}", "window")
        try:
            window = go_duration(raw_window)
        except ValueError as err:
            raise where.error(str(err), "window") from None
    usage = get_map(obj, "usage", where, "")
    cpu = quantity(usage["cpu"], where, "usage.cpu") if "cpu" in usage else None
    memory = _bytes(quantity(usage["memory"], where, "usage.memory")) if "memory" in usage else None
    if cpu is None and memory is None:
        raise where.error("missing: expected cpu and memory", "usage")
    return name, NodeUsage(cpu, memory, at, window)


def _node_metrics_items(doc: Mapping[str, Any], source: str) -> list[tuple[str, NodeUsage]]:
    kind = doc.get("kind")
    if kind == "NodeMetrics":
        return [decode_node_metrics(doc, source)]
    items = doc.get("items")
    if not isinstance(items, list):
        raise InputError(f"{source}: items: expected a list of NodeMetrics, got {describe(items)}")
    found = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("kind", "NodeMetrics") != "NodeMetrics":
            raise InputError(f"{source}: items[{i}].kind: expected NodeMetrics, got {describe(item.get('kind'))}")
        found.append(decode_node_metrics(item, f"{source}: items[{i}]"))
    return found


# --- files ----------------------------------------------------------------------------------------


def decode_load_document(doc: Any, source: str) -> LoadSnapshot:
    """A node metrics document: a NodeMetricsList (or NodeMetrics, or a ``List`` of them), or
    the simple format; ``source`` names it in errors (``metrics.yaml``, ``t.test.yaml: nodeMetrics``)."""
    if type(doc) is not dict:
        raise InputError(
            f"{source}: expected a NodeMetricsList or a mapping with usage and metrics, got {describe(doc)}"
        )
    if "kind" in doc:
        kind = doc["kind"]
        if kind not in NODE_METRICS_KINDS:
            raise InputError(f"{source}: kind: expected NodeMetricsList or NodeMetrics, got {describe(kind)}")
        return _relative(_node_metrics_items(doc, source), source)
    return _simple(doc, source)


def _relative(found: Sequence[tuple[str, NodeUsage]], source: str) -> LoadSnapshot:
    """A NodeMetricsList's usage, each value as old as its timestamp is before the newest one
    (a value without a timestamp: the newest)."""
    newest = max((usage.at for _, usage in found if usage.at), default=0.0)
    nodes: dict[str, NodeLoad] = {}
    for name, usage in found:
        if name in nodes:
            raise InputError(f"{source}: NodeMetrics {name}: given twice")
        at = usage.at - newest if usage.at else 0.0
        nodes[name] = NodeLoad(usage=NodeUsage(usage.cpu_milli, usage.memory_bytes, at, usage.window))
    return LoadSnapshot(MappingProxyType(nodes), now=0.0)


def _simple(doc: Mapping[str, Any], source: str) -> LoadSnapshot:
    where = Where(source, "")
    for key in doc:
        if key not in SIMPLE_KEYS:
            raise where.error(f"unknown field (expected {', '.join(SIMPLE_KEYS)}, or a NodeMetricsList)", str(key))
    ages: dict[str, float] = {}
    for name, age in get_map(doc, "age_seconds", where, "").items():
        node = _node_name(name, where, "age_seconds")
        ages[node] = _number(age, where, join_key("age_seconds", node))
        if ages[node] < 0:
            raise where.error("an age cannot be negative", join_key("age_seconds", node))
    usage: dict[str, NodeUsage] = {}
    for name, raw in get_map(doc, "usage", where, "").items():
        node = _node_name(name, where, "usage")
        at = join_key("usage", node)
        if type(raw) is not dict:
            raise where.error(f"expected a mapping with cpu and memory, got {describe(raw)}", at)
        for key in raw:
            if key not in ("cpu", "memory"):
                raise where.error("unknown field (expected cpu, memory)", join_key(at, str(key)))
        cpu = quantity(raw["cpu"], where, f"{at}.cpu") if "cpu" in raw else None
        memory = _bytes(quantity(raw["memory"], where, f"{at}.memory")) if "memory" in raw else None
        if cpu is None and memory is None:
            raise where.error("missing: expected cpu, memory or both", at)
        usage[node] = NodeUsage(cpu, memory, -ages.get(node, 0.0))
    metrics: dict[str, dict[str, Sample]] = {}
    for metric, values in get_map(doc, "metrics", where, "").items():
        problem = metric_name_problem(metric)
        if problem:
            raise where.error(problem, join_key("metrics", str(metric)))
        at = join_key("metrics", metric)
        if type(values) is not dict:
            raise where.error(f"expected a mapping of node names to values, got {describe(values)}", at)
        for name, value in values.items():
            node = _node_name(name, where, at)
            sample = Sample(_number(value, where, join_key(at, node)), -ages.get(node, 0.0))
            metrics.setdefault(node, {})[metric] = sample
    per_pod: dict[str, float] = {}
    for metric, value in get_map(doc, "pod_estimates", where, "").items():
        problem = metric_name_problem(metric)
        if problem:
            raise where.error(problem, join_key("pod_estimates", str(metric)))
        per_pod[metric] = _number(value, where, join_key("pod_estimates", metric))
    nodes = {
        node: NodeLoad(usage=usage.get(node), metrics=MappingProxyType(metrics.get(node, {})))
        for node in sorted(usage.keys() | metrics.keys())
    }
    estimates = EstimateRules(per_pod=MappingProxyType(per_pod)) if per_pod else DEFAULT_ESTIMATES
    return LoadSnapshot(MappingProxyType(nodes), estimates=estimates, now=0.0)


def combine(parts: Sequence[tuple[str, LoadSnapshot]]) -> LoadSnapshot:
    """Several files' snapshots as one (each names its file); a node's usage, or one metric of a
    node, given by two of them is an error naming both."""
    if len(parts) == 1:
        return parts[0][1]
    nodes: dict[str, NodeLoad] = {}
    usage_from: dict[str, str] = {}
    metric_from: dict[tuple[str, str], str] = {}
    per_pod: dict[str, float] = {}
    for source, snapshot in parts:
        for name, load in snapshot.nodes.items():
            known = nodes.get(name, NodeLoad())
            if load.usage is not None:
                if name in usage_from:
                    raise InputError(f"{source}: usage of node {name} is given in {usage_from[name]} too")
                usage_from[name] = source
            for metric in load.metrics:
                if (name, metric) in metric_from:
                    raise InputError(
                        f"{source}: metric {metric} of node {name} is given in {metric_from[name, metric]} too"
                    )
                metric_from[name, metric] = source
            nodes[name] = NodeLoad(
                usage=load.usage or known.usage, metrics=MappingProxyType({**known.metrics, **load.metrics})
            )
        per_pod.update(snapshot.estimates.per_pod)
    estimates = EstimateRules(per_pod=MappingProxyType(per_pod)) if per_pod else DEFAULT_ESTIMATES
    return LoadSnapshot(MappingProxyType(nodes), estimates=estimates, now=0.0)
