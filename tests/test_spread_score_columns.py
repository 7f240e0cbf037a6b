"""PodTopologySpread's score over many nodes at once (spreading.spread_score_columns) equals
spread_score node by node, and existing pods' anti-affinity and InterPodAffinity's score as
columns their node-by-node answers: system default spreading (hostname and zone, nodes without a zone
counted by hostname alone), the pod's own ScheduleAnyway constraints (every key required),
selectors in other namespaces, pods coming and going between asks (the columns catch up)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.engine import NodeColumns
from rulesched.lang.builtins.affinity import (
    existing_anti_affinity_columns,
    existing_anti_affinity_ok,
    inter_pod_affinity_score,
    inter_pod_affinity_score_columns,
)
from rulesched.lang.builtins.spreading import spread_score, spread_score_columns
from rulesched.lang.context import EvalContext
from tests.upstream.harness import node, pod, service, state

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def _pod(name: str, app: str, namespace: str = "default", node_name: str = "", soft: bool = False) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if soft:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 2,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
            for key in (ZONE, HOST)
        ]
    return pod(name, namespace, spec, labels={"app": app}, node_name=node_name)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["z1", "z2", "z3", None]), min_size=1, max_size=12),
    st.lists(
        st.tuples(st.integers(0, 11), st.sampled_from(["web", "db"]), st.sampled_from(["default", "other"])),
        max_size=40,
    ),
    st.lists(st.tuples(st.integers(0, 11), st.sampled_from(["web", "db"])), max_size=8),
    st.booleans(),
)
def test_spread_score_columns_equal_spread_score(
    zones: list[str | None], running: list[tuple[int, str, str]], later: list[tuple[int, str]], soft: bool
) -> None:
    nodes = [node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: z} if z else {})}) for i, z in enumerate(zones)]
    pods = [_pod(f"r{j}", app, ns, f"n{n % len(nodes)}") for j, (n, app, ns) in enumerate(running)]
    cluster: ClusterStore = state(nodes, pods, workloads=[service("s", selector={"app": "web"})])
    cols = NodeColumns(cluster.snapshot().nodes)
    for step in range(2):
        snapshot = cluster.snapshot()
        cols.update(list(range(len(snapshot.nodes))) if step else [], snapshot.nodes)
        for incoming in (_pod("p", "web", soft=soft), _pod("q", "db", "other", soft=soft)):
            ctx = EvalContext(incoming, snapshot)
            ctx.feasible = list(snapshot.nodes)
            rows = np.arange(len(snapshot.nodes), dtype=np.intp)
            assert list(spread_score_columns(ctx, cols, rows)) == [spread_score(ctx, n) for n in snapshot.nodes]
            few = rows[::2]
            assert list(spread_score_columns(ctx, cols, few)) == [spread_score(ctx, snapshot.nodes[r]) for r in few]
        for k, (n, app) in enumerate(later):  # pods come: the columns catch up when next read
            cluster.add_pod(_pod(f"l{k}", app, node_name=f"n{n % len(nodes)}"))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["z1", "z2", None]), min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 11), st.sampled_from([HOST, ZONE]), st.sampled_from(["web", "db"])), max_size=20),
)
def test_existing_anti_affinity_columns_equal_node_by_node(
    zones: list[str | None], running: list[tuple[int, str, str]]
) -> None:
    nodes = [node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: z} if z else {})}) for i, z in enumerate(zones)]
    pods = []
    for j, (n, key, app) in enumerate(running):
        anti = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
                ]
            }
        }
        spec = {"affinity": anti, "containers": [{"name": "c", "image": "busybox"}]}
        pods.append(pod(f"r{j}", spec=spec, labels={"app": "x"}, node_name=f"n{n % len(nodes)}"))
    snapshot = state(nodes, pods).snapshot()
    cols = NodeColumns(snapshot.nodes)
    rows = np.arange(len(snapshot.nodes), dtype=np.intp)
    for app in ("web", "db", "other"):
        ctx = EvalContext(_pod("p", app), snapshot)
        assert list(existing_anti_affinity_columns(ctx, cols, rows)) == [
            existing_anti_affinity_ok(ctx, n) for n in snapshot.nodes
        ]


def _preferring(name: str, app: str, key: str, weight: int, anti: bool, node_name: str = "") -> Any:
    term = {"weight": weight, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}}
    kind = "podAntiAffinity" if anti else "podAffinity"
    affinity = {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    spec = {"affinity": affinity, "containers": [{"name": "c", "image": "busybox"}]}
    return pod(name, spec=spec, labels={"app": app}, node_name=node_name)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["z1", "z2", None]), min_size=1, max_size=12),
    st.lists(
        st.tuples(st.integers(0, 11), st.sampled_from([HOST, ZONE]), st.sampled_from(["web", "db"]), st.booleans()),
        max_size=20,
    ),
)
def test_inter_pod_affinity_score_columns_equal_node_by_node(
    zones: list[str | None], running: list[tuple[int, str, str, bool]]
) -> None:
    """Both ways: the incoming pod's preferences about running pods, and running pods'
    preferences that select it; hostname and zone keys, nodes without a zone."""
    nodes = [node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: z} if z else {})}) for i, z in enumerate(zones)]
    pods = [
        _preferring(f"r{j}", app, key, 10 + j, anti, f"n{n % len(nodes)}")
        for j, (n, key, app, anti) in enumerate(running)
    ]
    snapshot = state(nodes, pods).snapshot()
    cols = NodeColumns(snapshot.nodes)
    rows = np.arange(len(snapshot.nodes), dtype=np.intp)
    for incoming in (_preferring("p", "web", ZONE, 7, False), _preferring("q", "db", HOST, 5, True), _pod("s", "web")):
        ctx = EvalContext(incoming, snapshot)
        expected = [inter_pod_affinity_score(ctx, n) for n in snapshot.nodes]
        assert inter_pod_affinity_score_columns(ctx, cols, rows) == expected
        few = rows[1::2]
        assert inter_pod_affinity_score_columns(ctx, cols, few) == [expected[r] for r in few]
