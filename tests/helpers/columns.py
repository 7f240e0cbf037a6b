"""A deliberately broken column engine, to show the tests catch one (tests/conftest.py's
``--break-columns OP`` and tests/test_column_fallbacks.py), and a small cluster to break it on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rulesched import engine
from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.engine import NodeColumns, vectorise
from rulesched.lang import BoundRules, RuleSet, load_rules_text
from tests.upstream.harness import node, pod


class DeliberatelyBroken(RuntimeError):
    """What a deliberately broken column evaluation raises."""


def break_columns(monkeypatch: pytest.MonkeyPatch, operator: str) -> None:
    """Make every column evaluation of the binary ``operator`` (``<``, ``+``, ``==``...) raise;
    evaluations of it over known values (the interpreter's, node by node) are untouched."""
    real = vectorise.binary

    def broken(op: str, *args: Any) -> Any:
        if op == operator:
            raise DeliberatelyBroken(f"column evaluation of {op!r} deliberately broken")
        return real(op, *args)

    monkeypatch.setattr(vectorise, "binary", broken)


ROOMY = """
filter roomy:
    len(node.pods) < 3
    else "too many pods"

filter huge:
    len(node.pods) <= 100000000000000000000000
    else "beyond int64: never evaluated as columns"

score light weight 2:
    100 - 10 * len(node.pods)
"""


def roomy_cluster() -> tuple[RuleSet, Snapshot]:
    """Rules with one filter comparing with ``<`` (``roomy``) and one whose constant numpy cannot
    hold (``huge``: its column evaluation raises Unsupported, a planned fallback), and five nodes
    running 0 to 4 pods."""
    state = ClusterStore()
    for i in range(5):
        state.add_node(node(f"n{i}"))
        for j in range(i):
            state.add_pod(pod(f"r{i}-{j}", node_name=f"n{i}"))
    return load_rules_text({"roomy.rules": ROOMY}), state.snapshot()


def column_answers(rules: RuleSet, snapshot: Snapshot) -> tuple[list[bool], list[bool], BoundRules]:
    """The filters' answers on every node of the snapshot as columns, then node by node."""
    nodes = list(snapshot.nodes)
    bound = rules.bind(pod("incoming"), snapshot)
    mask = engine.filter_mask(bound, NodeColumns(nodes), np.arange(len(nodes), dtype=np.intp))
    return mask.tolist(), [bound.first_failure(n) is None for n in nodes], bound
