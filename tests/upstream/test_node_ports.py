"""NodePorts Filter, ported from kube-scheduler's
pkg/scheduler/framework/plugins/nodeports/node_ports_test.go (TestNodePorts). Every case is ported.
Pods are upstream's newPod("m1", "PROTOCOL/HOST_IP/HOST_PORT", ...): one container holding the
ports; the existing one runs on the node.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.upstream.harness import UNSCHEDULABLE, filter_status, node, pod, state

REASON = ("node(s) didn't have free ports for the requested pod ports",)


def new_pod(*ports: str, name: str = "p", node_name: str = "") -> Any:
    container_ports = []
    for p in ports:
        protocol, host_ip, host_port = p.split("/")
        container_ports.append({"hostIP": host_ip, "hostPort": int(host_port), "protocol": protocol})
    return pod(
        name,
        spec={"containers": [{"name": "container", "image": "pause", "ports": container_ports}]},
        node_name=node_name,
    )


CASES = [
    ("skip filter", pod("p"), (), None),
    ("other port", new_pod("UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/9090",), None),
    ("same udp port", new_pod("UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), REASON),
    ("same tcp port", new_pod("TCP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), REASON),
    ("different host ip", new_pod("TCP/127.0.0.1/8080"), ("TCP/127.0.0.2/8080",), None),
    ("different protocol", new_pod("UDP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), None),
    ("second udp port conflict", new_pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), REASON),
    (
        "first tcp port conflict",
        new_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
        REASON,
    ),
    ("first tcp port conflict due to 0.0.0.0 hostIP", new_pod("TCP/0.0.0.0/8001"), ("TCP/127.0.0.1/8001",), REASON),
    (
        "TCP hostPort conflict due to 0.0.0.0 hostIP",
        new_pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        ("TCP/127.0.0.1/8001",),
        REASON,
    ),
    ("second tcp port conflict to 0.0.0.0 hostIP", new_pod("TCP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001",), REASON),
    ("second different protocol", new_pod("UDP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001",), None),
    (
        "UDP hostPort conflict due to 0.0.0.0 hostIP",
        new_pod("UDP/127.0.0.1/8001"),
        ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"),
        REASON,
    ),
]


@pytest.mark.parametrize(("incoming", "used", "want"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_node_ports(incoming: Any, used: tuple[str, ...], want: tuple[str, ...] | None) -> None:
    pods = [new_pod(*used, name="existing", node_name="m1")] if used else []
    cluster = state([node("m1")], pods)
    # every failure of this plugin is Unschedulable (evicting the pods holding the ports frees them) upstream
    assert filter_status(incoming, cluster, "m1", rule="NodePorts") == (None if want is None else (UNSCHEDULABLE, want))
