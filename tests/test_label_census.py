"""Spreading's domain counts and inter-pod affinity's score sums built from the label census (spreading.LabelCensus: pods by label and
node, kept as pods come and go) equal those the walk over every pod builds: selectors with one
or several labels, pods of other namespaces, terminating pods, nodes without the keys, hostname
and zone keys, replayed changes, and a fork that changes apart from its parent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rulesched.lang.builtins.affinity as affinity_module
from rulesched.lang.builtins.affinity import score_index
from rulesched.lang.builtins.spreading import _DomainCounts
from rulesched.lang.context import EvalContext
from rulesched.lang.indexes import LabelCensus
from rulesched.model import LabelSelector
from rulesched.semantics.spreading import Constraint
from tests.upstream.harness import node, pod, state

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def _pod(name: str, labels: dict[str, str], namespace: str, node_name: str, deleting: bool) -> Any:
    meta: dict[str, Any] = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {}
    return pod(name, namespace, labels=labels, node_name=node_name, **meta)


labels = st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"]), max_size=2)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["z1", "z2", None]), min_size=1, max_size=10),
    st.lists(st.tuples(st.integers(0, 9), labels, st.sampled_from(["default", "other"]), st.booleans()), max_size=30),
    st.lists(st.tuples(st.integers(0, 9), labels), max_size=6),
    st.sampled_from([(("app", "a"),), (("app", "a"), ("tier", "b")), (("tier", "a"),)]),
    st.booleans(),
)
def test_census_counts_equal_the_walk(
    zones: list[str | None],
    running: list[tuple[int, dict[str, str], str, bool]],
    later: list[tuple[int, dict[str, str]]],
    match: tuple[tuple[str, str], ...],
    require_all: bool,
) -> None:
    nodes = [node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: z} if z else {})}) for i, z in enumerate(zones)]
    pods = [_pod(f"r{j}", lab, ns, f"n{n % len(nodes)}", dead) for j, (n, lab, ns, dead) in enumerate(running)]
    cluster = state(nodes, pods)
    selector = LabelSelector(match_labels=match)
    constraints = tuple(Constraint(1, key, selector, 1, False, False) for key in (ZONE, HOST))
    owner = pod("owner", "default")
    snapshot = cluster.snapshot()
    census = LabelCensus()
    census.build(snapshot)
    walked = _DomainCounts(owner, constraints, require_all)
    walked.build(snapshot)
    counted = _DomainCounts(owner, constraints, require_all, census)
    counted.build(snapshot)
    assert counted.counts == walked.counts
    fork = census.fork()
    position = snapshot.pod_position
    for k, (n, lab) in enumerate(later):  # pods come: both replay the changes
        cluster.add_pod(_pod(f"l{k}", lab, "default", f"n{n % len(nodes)}", False))
    changes = cluster.snapshot().pod_changes(position)
    assert changes is not None
    for sign, p, where in changes:
        walked.apply(sign, p, where)
        counted.apply(sign, p, where)
        fork.apply(sign, p, where)
    assert counted.counts == walked.counts
    again = _DomainCounts(owner, constraints, require_all, fork)
    again.build(cluster.snapshot())
    fresh = _DomainCounts(owner, constraints, require_all)
    fresh.build(cluster.snapshot())
    assert again.counts == fresh.counts == walked.counts


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["z1", "z2", None]), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 7), labels, st.sampled_from(["default", "other"]), st.booleans()), max_size=25),
    st.lists(
        st.tuples(
            st.sampled_from([(("app", "a"),), (("app", "a"), ("tier", "b"))]),
            st.sampled_from([ZONE, HOST]),
            st.sampled_from([[], ["default", "other"]]),
            st.integers(-50, 50),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_interpod_score_index_from_the_census_equals_the_walk(
    zones: list[str | None],
    running: list[tuple[int, dict[str, str], str, bool]],
    terms: list[tuple[tuple[tuple[str, str], ...], str, list[str], int]],
) -> None:
    nodes = [node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: z} if z else {})}) for i, z in enumerate(zones)]
    pods = [_pod(f"r{j}", lab, ns, f"n{n % len(nodes)}", dead) for j, (n, lab, ns, dead) in enumerate(running)]
    # one running pod whose preferred term selects the incoming pod (the running pods' side)
    back = {"podAffinityTerm": {"labelSelector": {"matchLabels": {"role": "in"}}, "topologyKey": ZONE}, "weight": 7}
    spec = {"affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [back]}}}
    pods.append(pod("back", spec=dict(spec, containers=[{"name": "c", "image": "busybox"}]), node_name="n0"))
    snapshot = state(nodes, pods).snapshot()
    preferred = [
        {
            "podAffinityTerm": {"labelSelector": {"matchLabels": dict(match)}, "topologyKey": key, "namespaces": ns},
            "weight": abs(w) or 1,
        }
        for match, key, ns, w in terms
    ]
    anti = [dict(p, weight=p["weight"]) for p in preferred[:1]]
    affinity = {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": anti},
    }
    incoming = pod(
        "incoming",
        spec={"affinity": affinity, "containers": [{"name": "c", "image": "busybox"}]},
        labels={"role": "in"},
    )
    counted = score_index(EvalContext(incoming, snapshot))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(affinity_module, "_countable", lambda term: False)
        walked = score_index(EvalContext(incoming, snapshot))
    assert counted is not None and walked is not None
    assert counted.counts == walked.counts
