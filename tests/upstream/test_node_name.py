"""NodeName Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodename/node_name_test.go (TestNodeName). Every case is ported
(upstream's nameless node in "no host specified" is named here: rulesched nodes need a name, and
the pod names none).
"""

from __future__ import annotations

import pytest

from tests.upstream.harness import UNRESOLVABLE, filter_status, node, pod, state

CASES = [
    ("no host specified", "", "node", None),
    ("host matches", "foo", "foo", None),
    ("host doesn't match", "bar", "foo", ("node(s) didn't match the requested node name",)),
]


@pytest.mark.parametrize(("pod_node", "node_name", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_node_name(pod_node: str, node_name: str, want: tuple[str, ...] | None) -> None:
    # st.MakePod().Node(x) sets spec.nodeName on a pod that is still being scheduled
    incoming = pod("p", spec={"nodeName": pod_node} if pod_node else None)
    cluster = state([node(node_name)])
    # every failure of this plugin is UnschedulableAndUnresolvable upstream
    assert filter_status(incoming, cluster, node_name, rule="NodeName") == (
        None if want is None else (UNRESOLVABLE, want)
    )
