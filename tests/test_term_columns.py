"""Node affinity terms evaluated as columns (``term_matches`` once per group of nodes alike in the
labels a term names) score as node by node: every operator, labels absent, terms naming
fields (the node's name: node by node), several terms per pod."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched import engine
from rulesched.cluster.store import ClusterStore
from rulesched.engine import NodeColumns
from tests.upstream.harness import default_rules, node, pod

KEYS = ("zone", "size", "gen")
VALUES = ("1", "2", "3", "a")

requirement = st.one_of(
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(KEYS),
            "operator": st.sampled_from(["In", "NotIn"]),
            "values": st.lists(st.sampled_from(VALUES), min_size=1, max_size=2),
        }
    ),
    st.fixed_dictionaries({"key": st.sampled_from(KEYS), "operator": st.sampled_from(["Exists", "DoesNotExist"])}),
    st.fixed_dictionaries(
        {
            "key": st.sampled_from(KEYS),
            "operator": st.sampled_from(["Gt", "Lt"]),
            "values": st.sampled_from([["1"], ["2"]]),
        }
    ),
)
term = st.fixed_dictionaries(
    {"matchExpressions": st.lists(requirement, max_size=3)},
    optional={"matchFields": st.just([{"key": "metadata.name", "operator": "In", "values": ["n1", "n4"]}])},
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3), min_size=1, max_size=80),
    st.lists(st.tuples(st.integers(1, 100), term), min_size=1, max_size=3),
)
def test_preferred_node_affinity_scores_as_columns(
    labels: list[dict[str, str]], preferred: list[tuple[int, Any]]
) -> None:
    nodes = [node(f"n{i}", labels=lab) for i, lab in enumerate(labels)]
    store = ClusterStore.build(nodes, [])
    snapshot = store.snapshot()
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": w, "preference": t} for w, t in preferred]
        }
    }
    incoming = pod("p", spec={"affinity": affinity, "containers": [{"name": "c", "image": "busybox"}]})
    bound = default_rules().bind(incoming, snapshot)
    index = [s.name for s in bound.scores].index("NodeAffinity")
    rows = np.arange(len(nodes), dtype=np.intp)
    got = engine.score_column(bound, NodeColumns(snapshot.nodes), rows, index)
    assert got is not None
    assert got.tolist() == [bound.scores[index].score(n) for n in snapshot.nodes]
