"""Preemption's dry-run columns (rulesched.engine.dryrun_columns.DryRunColumns): the tried nodes'
free and requested resources, pod counts and host ports with some of their pods taken off and
some put back, against the same nodes' own columns with exactly those pods removed; and what
is kept per node between dry runs (the sums of the pods off, their host ports) follows the list
of pods off, read again only while it is the same list."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.engine import NodeColumns
from rulesched.engine.arrays import Unsupported
from rulesched.engine.columns import Path
from rulesched.engine.dryrun_columns import DryRunColumns
from rulesched.lang.evaluation.stages import NodeMemos
from rulesched.lang.schema import NODE, RECORDS
from rulesched.lang.types import NUMBER, QUANTITY
from rulesched.model import ContainerPort, Node, Pod

_FIELDS = RECORDS[NODE]
COLUMNS = [
    (Path((("field", _FIELDS["free"].get), ("key", "cpu", 0))), QUANTITY),
    (Path((("field", _FIELDS["requested"].get), ("key", "memory", 0))), QUANTITY),
    (Path((("field", _FIELDS["pods"].get), ("len",))), NUMBER),
]
PORTS = Path((("field", _FIELDS["used_ports"].get),))


class Counted(Mapping[str, int]):
    """A pod's requests that count how often they are read."""

    reads = 0

    def __init__(self, amounts: dict[str, int]) -> None:
        self._amounts = amounts

    def __getitem__(self, key: str) -> int:
        Counted.reads += 1
        return self._amounts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)


def _pod(name: str, cpu: int, memory: int, node: str, port: bool = False) -> Pod:
    return Pod(
        name,
        node_name=node,
        requests={"cpu": cpu, "memory": memory},
        host_ports=(ContainerPort(8080),) if port else (),
    )


def _node(i: int, pods: list[Pod]) -> NodeInfo:
    return NodeInfo(Node(f"n{i}", allocatable={"cpu": 64000, "memory": 2**36, "pods": 110}), pods)


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 2**30), st.booleans(), st.booleans()), max_size=5),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.integers(0, 5), max_size=6),
    st.booleans(),
)
def test_columns_as_the_nodes_with_those_pods_removed(
    shapes: list[list[tuple[int, int, bool, bool]]], back: list[int], twice: bool
) -> None:
    """Each node's pods marked off (every one, some, or none: partial rows read the sums of the
    pods off, whole rows the node's own), then the k-th pod off of some rows put back."""
    nodes, off = [], []
    for i, pods in enumerate(shapes):
        made = [_pod(f"p{i}-{j}", c, m, f"n{i}", port) for j, (c, m, port, _) in enumerate(pods)]
        nodes.append(_node(i, made))
        off.append([p for p, (_, _, _, gone) in zip(made, pods, strict=True) if gone])
    base = NodeColumns(nodes)
    rows = np.arange(len(nodes), dtype=np.intp)
    memos = NodeMemos()
    for _ in range(2 if twice else 1):  # (the second time from what the first kept)
        cols = DryRunColumns(nodes, base, rows, off, memos=memos)
        removed = [set(map(id, pods)) for pods in off]
        _agree(cols, nodes, removed, rows)  # (read before a put: what put changes is read anew)
        # put back the k-th pod off of each row listed (each row once)
        chosen = {i % len(nodes): k for k, i in enumerate(back) if off[i % len(nodes)]}
        if chosen:
            step = np.array(sorted(chosen), dtype=np.intp)
            at = np.array([cols.starts[i] + chosen[i] % len(off[i]) for i in sorted(chosen)], dtype=np.intp)
            cols.put(at, step, 1)
            for i, j in zip(step.tolist(), at.tolist(), strict=True):
                removed[i].discard(id(cols.flat[j]))
        _agree(cols, nodes, removed, rows)
        holding = any(p.host_ports for i, pods in enumerate(off) for p in pods if id(p) in removed[i])
        if holding:
            with pytest.raises(Unsupported):
                cols.column(PORTS, None)
        else:
            cols.column(PORTS, None)


def _agree(cols: DryRunColumns, nodes: list[NodeInfo], removed: list[set[int]], rows: np.ndarray) -> None:
    """The columns and their bounds are those of the nodes without the pods in ``removed``."""
    left = [NodeInfo(n.node, [p for p in n.pods if id(p) not in removed[i]]) for i, n in enumerate(nodes)]
    truth = NodeColumns(left)
    for path, kind in COLUMNS:
        expected = truth.column(path, kind)[rows]
        assert cols.column(path, kind).tolist() == expected.tolist(), path
        assert cols.bound(path, kind) == int(np.abs(expected).max()), path


def test_kept_sums_are_read_again_while_the_pods_off_are_the_same_list() -> None:
    """A node whose pods off are the same list reads the kept sums; another list is summed anew."""
    pods = [Pod(f"p{j}", node_name="n0", requests=Counted({"cpu": 100 * (j + 1), "memory": 1})) for j in range(3)]
    nodes = [_node(0, pods)]
    base, rows, memos = NodeColumns(nodes), np.zeros(1, dtype=np.intp), NodeMemos()
    free = COLUMNS[0]
    off = [pods[:2]]  # (a partial row: the third pod stays)
    Counted.reads = 0
    assert DryRunColumns(nodes, base, rows, off, memos=memos).column(*free).tolist() == [64000 - 600 + 300]
    first = Counted.reads
    assert first > 0
    Counted.reads = 0
    assert DryRunColumns(nodes, base, rows, off, memos=memos).column(*free).tolist() == [64000 - 600 + 300]
    assert Counted.reads == 0
    other = [pods[1:]]
    assert DryRunColumns(nodes, base, rows, other, memos=memos).column(*free).tolist() == [64000 - 600 + 500]
    assert Counted.reads > 0


def test_requests_beyond_int64_are_left_to_the_node_by_node_dry_run() -> None:
    huge = [Pod(f"p{j}", node_name="n0", requests={"cpu": 2**62}) for j in range(2)]
    nodes = [_node(0, [*huge, Pod("small", node_name="n0", requests={"cpu": 1})])]
    cols = DryRunColumns(nodes, NodeColumns(nodes), np.zeros(1, dtype=np.intp), [huge])
    with pytest.raises((Unsupported, OverflowError)):
        cols.column(*COLUMNS[0])


def test_a_row_with_no_pods_off_beside_rows_holding_ports() -> None:
    """Per row, the host ports of its own pods off only (a row with none off reads none)."""
    held = [_pod("a", 1, 1, "n0", port=True)]
    nodes = [_node(0, held), _node(1, [_pod("b", 1, 1, "n1")]), _node(2, [_pod("c", 1, 1, "n2", port=True)])]
    rows = np.arange(3, dtype=np.intp)
    cols = DryRunColumns([nodes[1], nodes[0]], NodeColumns(nodes), rows[[1, 0]], [[], held])
    with pytest.raises(Unsupported):  # (row 1's pod off holds one)
        cols.column(PORTS, None)
    alone = DryRunColumns([nodes[1], nodes[2]], NodeColumns(nodes), rows[[1, 2]], [[], []])
    assert len(alone.column(PORTS, None)) == 2
    cols.put(np.array([0], dtype=np.intp), np.array([1], dtype=np.intp), 1)  # (back: nothing off holds one)
    assert len(cols.column(PORTS, None)) == 2
