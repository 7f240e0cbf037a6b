"""The per-domain counts spreading and inter-pod affinity keep (rulesched.lang.indexes) give the
answers a freshly built cluster gives: after a few pod changes (replayed from the journal), after
more changes than the journal keeps (rebuilt), and after a node's labels change (rebuilt)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rulesched.cluster import journal as journal_module
from rulesched.cluster.store import ClusterStore
from rulesched.lang.builtins import topology
from rulesched.lang.context import EvalContext, new_index_store
from rulesched.model import Node, Pod
from tests.upstream.harness import node, pod

ZONE = "topology.kubernetes.io/zone"
SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
}
ANTI = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": ZONE}
            ]
        }
    }
}
BUILTINS = ("spread_ok", "pod_anti_affinity_ok", "existing_anti_affinity_ok", "pod_affinity_ok")


def nodes() -> list[Node]:
    return [node(f"n{i}", {ZONE: f"z{i % 3}", "kubernetes.io/hostname": f"n{i}"}) for i in range(6)]


def running(i: int, node_name: str, spec: dict[str, Any] | None = None) -> Pod:
    return pod(f"r{i}", labels={"app": "web" if i % 2 else "db"}, node_name=node_name, spec=spec)


_INDEXES: dict[object, Any] = {}  # per cluster, one session's index store: answers replay it


def answers(incoming: Pod, cluster: ClusterStore) -> dict[str, list[bool]]:
    ctx = EvalContext(incoming, cluster, indexes=_INDEXES.setdefault(cluster.history, new_index_store()))
    return {name: [getattr(topology, name)(ctx, n) for n in cluster.nodes] for name in BUILTINS}


def fresh(cluster: ClusterStore) -> ClusterStore:
    return ClusterStore.build([n.node for n in cluster.nodes], list(cluster.pods()))


INCOMING = [
    pod("spread", labels={"app": "web"}, spec=SPREAD),
    pod("anti", labels={"app": "web"}, spec=ANTI),
    pod("plain", labels={"app": "web"}),
]


def churn(cluster: ClusterStore, start: int, count: int) -> None:
    """Add web and db pods round the nodes (some repelling web pods in their zone)..."""
    for i in range(start, start + count):
        cluster.add_pod(running(i, f"n{(i * 7) % 6}", ANTI if i % 4 == 1 else None))


def unchurn(cluster: ClusterStore, start: int, count: int) -> None:
    """... and take them away again."""
    for i in range(start, start + count):
        cluster.remove_pod(f"default/r{i}")


@pytest.mark.parametrize("incoming", INCOMING, ids=lambda p: p.name)
def test_replayed_counts_match_a_fresh_cluster(incoming: Pod) -> None:
    cluster = ClusterStore.build(nodes(), [running(i, f"n{i % 6}") for i in range(4)])
    initial = answers(incoming, cluster)  # indexes built
    assert initial == answers(incoming, fresh(cluster))
    for step in range(4):
        churn(cluster, 10 + 2 * step, 2)
        assert answers(incoming, cluster) == answers(incoming, fresh(cluster)), step
    for step in range(4):
        unchurn(cluster, 10 + 2 * step, 2)
        assert answers(incoming, cluster) == answers(incoming, fresh(cluster)), step
    assert answers(incoming, cluster) == initial


@pytest.mark.parametrize("incoming", INCOMING, ids=lambda p: p.name)
def test_counts_are_rebuilt_past_the_journal_or_after_a_node_change(
    incoming: Pod, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_module, "JOURNAL_KEEP", 4)
    cluster = ClusterStore.build(nodes(), [running(i, f"n{i % 6}") for i in range(4)])
    before = answers(incoming, cluster)
    churn(cluster, 100, 20)  # far more changes than the journal keeps
    unchurn(cluster, 100, 8)
    assert cluster.pod_changes(0) is None
    after = answers(incoming, cluster)
    assert after == answers(incoming, fresh(cluster))
    moved = cluster.nodes[0].node
    cluster.update_node(dataclasses.replace(moved, labels={**moved.labels, ZONE: "z9"}))
    assert answers(incoming, cluster) == answers(incoming, fresh(cluster))
    assert before != after or incoming.name == "plain"  # the churn did change the answers
