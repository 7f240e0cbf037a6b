"""NodeUnschedulable Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable_test.go (TestNodeUnschedulable).
Every case is ported.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import UNRESOLVABLE, filter_status, node, pod, state

CASES = [
    (
        "Does not schedule pod to unschedulable node (node.Spec.Unschedulable==true)",
        pod("p"),
        True,
        ("node(s) were unschedulable",),
    ),
    ("Schedule pod to normal node", pod("p"), False, None),
    (
        "Schedule pod with toleration to unschedulable node (node.Spec.Unschedulable==true)",
        pod("p", spec={"tolerations": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
        True,
        None,
    ),
]


@pytest.mark.parametrize(("incoming", "unschedulable", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_node_unschedulable(incoming: Any, unschedulable: bool, want: tuple[str, ...] | None) -> None:
    cluster = state([node("node", unschedulable=unschedulable)])
    # every failure of this plugin is UnschedulableAndUnresolvable upstream
    assert filter_status(incoming, cluster, "node", rule="NodeUnschedulable") == (
        None if want is None else (UNRESOLVABLE, want)
    )
