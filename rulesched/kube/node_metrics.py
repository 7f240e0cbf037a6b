"""The ``metrics.k8s.io`` API (metrics-server's NodeMetrics, served through the API server's
aggregation layer) read through :class:`~rulesched.kube.api.KubeApi`: what ``kubectl top node``
shows, as each node's :class:`~rulesched.model.load.NodeUsage`.

One request lists every node's metrics (``GET /apis/metrics.k8s.io/v1beta1/nodes``, the RBAC verb
``list`` on ``nodes.metrics.k8s.io``), with its own timeout, so a slow aggregated API holds a
poller for at most that long. An item that does not decode (a server that sends an invalid quantity) is left out and
named in :attr:`NodeUsageList.skipped`; the others are used.
Next stage: :mod:`rulesched.loadsources` polls this into node load snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rulesched.errors import InputError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import NODE_METRICS
from rulesched.model.decode_load import decode_node_metrics
from rulesched.model.load import NodeUsage

GROUP_VERSION = NODE_METRICS.prefix


@dataclass(frozen=True)
class NodeUsageList:
    """One read: node name -> usage (``at`` no later than ``read_at``: a server clock ahead of
    ours does not make values younger than they are), and the problems of the items left out."""

    usage: Mapping[str, NodeUsage]
    read_at: float
    skipped: tuple[str, ...] = ()


def read_node_usage(api: KubeApi, timeout: float, now: float) -> NodeUsageList:
    """Every node's usage as ``metrics.k8s.io`` serves it now (``now``: the wall clock at the
    request). Raises :class:`KubeError` when the request fails (a 503 while metrics-server is
    down, a timeout) and :class:`InputError` when the answer is not a NodeMetricsList."""
    items = api.list(NODE_METRICS, timeout=timeout).items
    if not isinstance(items, list):
        raise InputError(f"GET {GROUP_VERSION}/nodes: expected a NodeMetricsList, got no items list")
    usage: dict[str, NodeUsage] = {}
    skipped: list[str] = []
    for i, item in enumerate(items):
        try:
            name, node = decode_node_metrics(item, f"{GROUP_VERSION}/nodes: items[{i}]")
        except InputError as err:
            skipped.append(str(err))
            continue
        at = min(node.at, now) if node.at else now
        usage[name] = NodeUsage(node.cpu_milli, node.memory_bytes, at, node.window)
    return NodeUsageList(MappingProxyType(usage), now, tuple(skipped))
