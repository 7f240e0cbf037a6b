"""``rulesched extender`` over HTTP, in its own process, sent what kube-scheduler sends: bodies in
Go field case and in lower case, full-node and node-cache-capable modes, every bad input with
its status code, and arbitrary JSON that must never break the server."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess, extender_args, lower_keys, preemption_args
from tests.helpers.kube import EXTENDER_NODES as NODES
from tests.helpers.kube import claim, claiming_pod, local_volume, storage_class, zonal_node
from tests.helpers.kube import extender_node as node
from tests.helpers.kube import extender_pod as pod
from tests.helpers.profiles import examples
from tests.helpers.timing import Stopwatch

FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
PROTECT = 'preempt Protected when pod.preemption_policy != "Never":\n    victim.labels["protected"] != "true"\n'


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderProcess]:
    """No cache: nodes come in the requests."""
    folder = tmp_path_factory.mktemp("ext")
    (folder / "protect.rules").write_text(PROTECT)
    config = folder / "config.yaml"
    config.write_text("request_timeout: 2\nmax_body_bytes: 200000000\n")
    process = ExtenderProcess("--rules", "default", "--rules", str(folder / "protect.rules"), "--config", str(config))
    yield process
    process.stop()


@pytest.mark.parametrize("case", ["go", "lower"])
def test_filter_full_nodes_answers_in_go_field_names(plain: ExtenderProcess, case: str) -> None:
    message = extender_args(pod("p"), nodes=NODES)
    status, answer = plain.post("/filter", lower_keys(message) if case == "lower" else message)
    assert status == 200
    assert set(answer) == FILTER_KEYS | {"ReasonCodes"}  # (a field kube-scheduler's decoder skips)
    assert answer["Error"] == "" and answer["NodeNames"] is None
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n1"]
    assert answer["Nodes"]["items"][0] == NODES[0]  # the node as it came, byte for byte
    # preemption cannot help on a cordoned node, a node smaller than the pod, or an untolerated
    # taint (kube-scheduler's UnschedulableAndUnresolvable); it can on a node out of pod slots
    assert answer["FailedNodes"] == {"n5": "Too many pods"}
    assert answer["FailedAndUnresolvableNodes"] == {
        "n2": "node(s) were unschedulable",
        "n3": "Insufficient cpu",
        "n4": "node(s) had untolerated taint {dedicated: gpu}",
    }
    # the same failures as reason codes, one per (rule, reason), with their parts
    codes = {(c["code"], c["rule"]): c for c in answer["ReasonCodes"]}
    assert set(codes) == {
        ("NodeUnschedulable", "NodeUnschedulable"),
        ("InsufficientResource", "NodeResourcesFit"),
        ("TaintNotTolerated", "TaintToleration"),
        ("TooManyPods", "NodeResourcesFit"),
    }
    taint = codes["TaintNotTolerated", "TaintToleration"]
    assert (taint["key"], taint["value"], taint["nodes"], taint["unresolvable"]) == ("dedicated", "gpu", 1, True)
    cpu = codes["InsufficientResource", "NodeResourcesFit"]
    assert (cpu["resource"], cpu["unit"], cpu["nearest"], cpu["unresolvable"]) == ("cpu", "cores", "n3", True)
    assert codes["TooManyPods", "NodeResourcesFit"]["unresolvable"] is False


def test_prioritize_full_nodes_keeps_the_rules_order(plain: ExtenderProcess) -> None:
    busy = node("busy")
    busy["status"]["allocatable"]["cpu"] = busy["status"]["capacity"]["cpu"] = "1"
    nodes = [node("big", cpu="16"), node("mid", cpu="4"), busy]
    status, answer = plain.post("/prioritize", extender_args(pod("p"), nodes=nodes))
    assert status == 200
    assert [set(h) for h in answer] == [{"Host", "Score"}] * 3
    scores = {h["Host"]: h["Score"] for h in answer}
    assert all(0 <= s <= 10 for s in scores.values())
    assert scores["big"] > scores["mid"] > scores["busy"]  # LeastAllocated decides
    status, lower = plain.post("/prioritize", lower_keys(extender_args(pod("p"), nodes=nodes)))
    assert lower == answer


def test_preempt_full_pods_keeps_kube_schedulers_victims_or_drops_the_node(plain: ExtenderProcess) -> None:
    nodes = [node("v1", cpu="1"), node("v2", cpu="1"), node("v3", cpu="100m")]
    plain.post("/filter", extender_args(pod("warm"), nodes=nodes))  # kube-scheduler filters first
    low_a, low_b = pod("low-a", "500m", 1, "v1"), pod("low-b", "500m", 2, "v1")
    guarded = pod("guarded", "1", 1, "v2", protected="true")
    tiny = pod("tiny", "50m", 1, "v3")
    high = pod("high", "500m", priority=100)
    proposal = {"v1": [low_a, low_b], "v2": [guarded], "v3": [tiny]}
    for message in (preemption_args(high, victims=proposal), lower_keys(preemption_args(high, victims=proposal))):
        status, answer = plain.post("/preempt", message)
        assert status == 200, answer
        # v1: kube-scheduler's victims as proposed (it reprieved what its profile allowed; the
        # extender reprieves nothing). v2: its victim is protected by a preempt rule. v3: the pod
        # fails the rules there (100m of cpu) even with its victim gone.
        assert answer == {
            "NodeNameToMetaVictims": {
                "v1": {"Pods": [{"UID": "uid-low-a"}, {"UID": "uid-low-b"}], "NumPDBViolations": 0}
            }
        }


def test_preempt_never_policy_proposes_nothing(plain: ExtenderProcess) -> None:
    high = pod("high", "500m", priority=100)
    high["spec"]["preemptionPolicy"] = "Never"
    status, answer = plain.post("/preempt", preemption_args(high, victims={"v1": [pod("x", "1", 0, "v1")]}))
    assert status == 200 and answer == {"NodeNameToMetaVictims": {}}


def test_node_names_without_a_cache_is_a_clear_400(plain: ExtenderProcess) -> None:
    status, answer = plain.post("/filter", extender_args(pod("p"), names=["n1"]))
    assert status == 400 and "informer cache" in answer["Error"]


def test_the_bind_verb_is_off_unless_configured(plain: ExtenderProcess) -> None:
    message = {"PodName": "p", "PodNamespace": "default", "PodUID": "u", "Node": "n1"}
    status, answer = plain.post("/bind", message)
    assert status == 403 and "bind verb is off" in answer["Error"]


BAD = [
    ("/filter", b"{", 400, "malformed JSON"),
    ("/filter", b"[1, 2]", 400, "expected object"),
    ("/filter", b'{"Pod": 3, "NodeNames": []}', 400, "Pod: expected an object"),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", '
        b'"resources": {"requests": {"cpu": "lots"}}}]}}, "Nodes": {"items": []}}',
        400,
        "spec.containers[0].resources.requests.cpu",
    ),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n"}, '
        b'"status": {"allocatable": {"cpu": []}}}]}}',
        400,
        "Nodes.items[0]",
    ),
    (  # quantities and names as the API server validates them (the model's checks, every face)
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", '
        b'"resources": {"requests": {"cpu": "1e400"}}}]}}, "Nodes": {"items": []}}',
        400,
        "spec.containers[0].resources.requests.cpu: '1e400' is too large",
    ),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p\\u0000x"}}, "Nodes": {"items": []}}',
        400,
        "metadata.name: 'p\\x00x'",
    ),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "N\\n1"}}]}}',
        400,
        "Nodes.items[0]: Node: metadata.name: 'N\\n1' is not",
    ),
    ("/filter", b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": 5}}', 400, "Nodes.items"),
    ("/filter", b'{"Pod": {"metadata": {"name": "p"}}}', 400, "neither Nodes nor NodeNames"),
    ("/prioritize", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": [1]}', 400, "NodeNames[0]"),
    (
        "/preempt",
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToVictims": {"n": {"Pods": 3}}}',
        400,
        "NodeNameToVictims[n].Pods",
    ),
    (
        "/preempt",
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": 1}]}}}',
        400,
        "UID",
    ),
    (  # the offset is found by rulesched: msgspec 0.23 raises a DecodeError naming none
        "/filter",
        b'{"Pod": {"metadata": {"name": "p\xff"}}, "Nodes": {"items": []}}',
        400,
        "Pod: malformed JSON: not UTF-8 (byte 24 of its value)",
    ),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n\xff"}}]}}',
        400,
        "Nodes.items[0]: malformed JSON: not UTF-8 (byte 24 of its value)",
    ),
    ("/preempt", b'{"P\xffod": {}}', 400, "ExtenderPreemptionArgs: malformed JSON: not UTF-8 (byte 3 of the body)"),
    (
        "/filter",
        b'{"Pod": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
        400,
        "ExtenderArgs: malformed JSON: nested too deeply",
    ),
    (
        "/prioritize",
        b'{"Pod": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", '
        b'"resources": {"requests": {"memory": "1e400"}}}]}}, "Nodes": {"items": []}}',
        400,
        "Pod default/p: spec.containers[0].resources.requests.memory: '1e400' is too large (at most 2^63-1)",
    ),
    (
        "/filter",
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n"}, '
        b'"status": {"allocatable": {"cpu": "1e400"}}}]}}',
        400,
        "Nodes.items[0]: Node n: status.allocatable.cpu: '1e400' is too large (at most 2^63-1)",
    ),
]


@pytest.mark.parametrize(("path", "body", "status", "words"), BAD, ids=[f"{p}-{i}" for i, (p, *_) in enumerate(BAD)])
def test_bad_requests_get_400_naming_the_field(
    plain: ExtenderProcess, path: str, body: bytes, status: int, words: str
) -> None:
    got, data = plain.request("POST", path, body)
    answer = json.loads(data)
    assert got == status and words in answer["Error"], answer
    assert "\n" not in answer["Error"] and "Traceback" not in answer["Error"]


def test_readyz_reads_as_runs(plain: ExtenderProcess) -> None:
    """``ok: rules HASH``, as ``rulesched run``'s /readyz (issue 34, item 14: the extender said
    only ``rules HASH``; test_run_e2e checks run's)."""
    status, body = plain.request("GET", "/readyz")
    assert status == 200 and re.fullmatch(rb"ok: rules [0-9a-f]{16}", body), body


def test_unknown_path_wrong_method_and_big_body(tmp_path: Path) -> None:
    process = ExtenderProcess("--max-body-bytes", "1000")
    try:
        status, data = process.request("POST", "/nope", b"{}")
        assert status == 404 and "Error" in json.loads(data)
        status, data = process.request("GET", "/filter")
        assert status == 405 and "Error" in json.loads(data)
        status, data = process.request("POST", "/filter", b'{"Pod": "' + b"x" * 5000 + b'"}')
        assert status == 413 and "Error" in json.loads(data)
        assert process.alive()
        status, data = process.request("GET", "/metrics")
        text = data.decode()
        assert 'rulesched_extender_requests_total{code="404",verb="other"} 1.0' in text
        assert 'rulesched_extender_requests_total{code="413",verb="other"} 1.0' in text
    finally:
        process.stop()


def test_a_stalled_request_is_answered_within_the_timeout(plain: ExtenderProcess) -> None:
    """A client that promises a body and stops sending gets 503 at the deadline (2 s here)."""
    clock = Stopwatch()
    with socket.create_connection((plain.host, plain.port), timeout=60) as sock:
        sock.sendall(
            b'POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"Pod":'
        )
        reply = b""
        while b"no answer" not in reply:  # (the head and the body may come in separate reads)
            chunk = sock.recv(4096)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 503"), reply[:100]
    assert b"no answer within 2s" in reply
    assert clock.stop() < clock.bound(5.0), str(clock)  # (5 s when quiet, the machine's slowdown on top)
    assert plain.alive()


def test_concurrent_requests_all_answered_right(plain: ExtenderProcess) -> None:
    results: list[Any] = []

    def client(i: int) -> None:
        conn = plain.connection()
        for _ in range(10):
            nodes = [node(f"c{i}-{k}", cpu="1" if k % 2 else "8") for k in range(20)]
            status, answer = plain.post("/filter", extender_args(pod(f"p{i}", cpu="2"), nodes=nodes), conn)
            results.append(
                (
                    status,
                    sorted(n["metadata"]["name"] for n in answer["Nodes"]["items"]),
                    sorted(f"c{i}-{k}" for k in range(0, 20, 2)),
                )
            )
        conn.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 60
    assert all(status == 200 and got == want for status, got, want in results)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
envelope_keys = st.sampled_from(
    [
        "Pod",
        "pod",
        "Nodes",
        "NodeNames",
        "nodenames",
        "NodeNameToVictims",
        "NodeNameToMetaVictims",
        "PodName",
        "Node",
        "PodUID",
        "items",
    ]
)
messages = st.one_of(
    json_values,
    st.dictionaries(envelope_keys, json_values, max_size=4),
    st.builds(lambda p, n: {"Pod": p, "Nodes": {"items": n}}, json_values, st.lists(json_values, max_size=3)),
    st.builds(
        lambda p, v: {"Pod": p, "NodeNameToVictims": {"n": {"Pods": v}}}, json_values, st.lists(json_values, max_size=3)
    ),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/filter", "/prioritize", "/preempt", "/bind"]), message=messages)
def test_arbitrary_json_never_breaks_the_server(plain: ExtenderProcess, path: str, message: Any) -> None:
    status, data = plain.request("POST", path, json.dumps(message).encode())
    assert status in (200, 400) or (status, path) == (403, "/bind"), (status, data[:300])  # (bind: off here)
    answer = json.loads(data)
    if status != 200:
        assert isinstance(answer, dict) and answer["Error"]


def test_server_survives_the_fuzzing(plain: ExtenderProcess) -> None:
    assert plain.alive()
    status, _ = plain.post("/filter", extender_args(pod("p"), nodes=NODES))
    assert status == 200


# --- node-cache-capable, with the informer cache on the test API server ----------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestApiServer, ExtenderProcess]]:
    server = TestApiServer()
    for i in range(5000):
        spec: dict[str, Any] = {}
        if i % 10 == 3:
            spec["unschedulable"] = True
        if i % 10 == 7:
            spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
        server.add("nodes", node(f"node-{i}", cpu="100m" if i % 10 == 5 else "4", **spec))
    server.add("pods", pod("low-1", "2", 1, "node-0"))
    server.add("pods", pod("low-2", "1500m", 2, "node-0"))
    server.add("pods", pod("guarded", "4", 1, "node-1", protected="true"))
    folder = tmp_path_factory.mktemp("cache")
    (folder / "protect.rules").write_text(PROTECT)
    kubeconfig = server.kubeconfig(str(folder / "kubeconfig"))
    process = ExtenderProcess(
        "--kubeconfig", kubeconfig, "--rules", "default", "--rules", str(folder / "protect.rules"), "--bind-verb"
    )
    process.wait_ready()
    yield server, process
    process.stop()
    server.stop()


def _wait_for(process: ExtenderProcess, message: dict[str, Any], check: Any, seconds: float = 20.0) -> Any:
    """The informer cache catches up asynchronously: ask until the answer passes ``check``."""
    end = time.monotonic() + seconds
    while True:
        status, answer = process.post("/filter", message)
        if status == 200 and check(answer) or time.monotonic() > end:
            return answer
        time.sleep(0.1)


@pytest.mark.parametrize("case", ["go", "lower"])
def test_filter_5000_node_names(cluster: tuple[TestApiServer, ExtenderProcess], case: str) -> None:
    _, process = cluster
    names = [f"node-{i}" for i in range(5000)] + ["node-unknown"]
    message = extender_args(pod("p", cpu="1"), names=names)
    status, answer = process.post("/filter", lower_keys(message) if case == "lower" else message)
    assert status == 200
    assert set(answer) == FILTER_KEYS | {"ReasonCodes"} and answer["Nodes"] is None and answer["Error"] == ""
    failing = {
        3: "node(s) were unschedulable",
        5: "Insufficient cpu",
        7: "node(s) had untolerated taint {dedicated: gpu}",
    }
    # node-0 holds 3.5 of its 4 CPUs, node-1 all 4
    expected_pass = [f"node-{i}" for i in range(5000) if i % 10 not in failing and i not in (0, 1)]
    assert answer["NodeNames"] == expected_pass
    # every failure of the cycled nodes is unresolvable (node-5 has 100m of cpu in all); node-0 and
    # node-1 are full of pods that preemption might evict
    expected_unresolvable = {f"node-{i}": failing[i % 10] for i in range(5000) if i % 10 in failing}
    assert answer["FailedAndUnresolvableNodes"] == expected_unresolvable
    assert answer["FailedNodes"] == {
        "node-0": "Insufficient cpu",
        "node-1": "Insufficient cpu",
        "node-unknown": "node is not in rulesched's informer cache",
    }
    counted = {(c["code"], c["message"]): c["nodes"] for c in answer["ReasonCodes"]}
    assert counted == {  # (a node not in the cache is no filter's failure: not counted)
        ("NodeUnschedulable", "node(s) were unschedulable"): 500,
        ("InsufficientResource", "Insufficient cpu"): 502,
        ("TaintNotTolerated", "node(s) had untolerated taint {dedicated: gpu}"): 500,
    }


def test_prioritize_node_names(cluster: tuple[TestApiServer, ExtenderProcess]) -> None:
    _, process = cluster
    status, answer = process.post(
        "/prioritize", extender_args(pod("p", cpu="100m"), names=["node-0", "node-2", "node-4"])
    )
    assert status == 200
    scores = {h["Host"]: h["Score"] for h in answer}
    assert scores["node-2"] == scores["node-4"] == 10 and scores["node-0"] < 10  # node-0 is busy


def test_preempt_meta_victims_from_the_cache(cluster: tuple[TestApiServer, ExtenderProcess]) -> None:
    _, process = cluster
    high = pod("high", "2", priority=100)
    message = preemption_args(
        high, meta={"node-0": ["uid-low-1", "uid-low-2"], "node-1": ["uid-guarded"], "node-2": ["uid-not-there"]}
    )
    for m in (message, lower_keys(message)):
        status, answer = process.post("/preempt", m)
        assert status == 200, answer
        # node-0: kube-scheduler's victims stand. node-1: its only victim is protected. node-2:
        # the cache knows no such pod.
        assert answer == {
            "NodeNameToMetaVictims": {
                "node-0": {"Pods": [{"UID": "uid-low-1"}, {"UID": "uid-low-2"}], "NumPDBViolations": 0}
            }
        }


def test_cache_follows_the_cluster_and_bind_goes_through_the_api(
    cluster: tuple[TestApiServer, ExtenderProcess],
) -> None:
    server, process = cluster
    server.add("nodes", node("node-new"))
    message = extender_args(pod("p", cpu="1"), names=["node-new"])
    answer = _wait_for(process, message, lambda a: a["NodeNames"] == ["node-new"])
    assert answer["NodeNames"] == ["node-new"]
    server.add("pods", pod("bound-here", "4", 0, "node-new"))
    answer = _wait_for(process, message, lambda a: a["NodeNames"] == [])
    assert answer["FailedNodes"] == {"node-new": "Insufficient cpu"}
    server.add("pods", pod("to-bind"))
    binding = {"PodName": "to-bind", "PodNamespace": "default", "PodUID": "uid-to-bind", "Node": "node-4"}
    end = time.monotonic() + 20
    while True:  # until the informer cache has the new pending pod
        status, result = process.post("/bind", binding)
        if status != 403 or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert status == 200 and result == {"Error": ""}
    assert server.store.objects["pods"]["default/to-bind"]["spec"]["nodeName"] == "node-4"
    status, result = process.post(
        "/bind", {"PodName": "to-bind", "PodNamespace": "default", "PodUID": "uid-to-bind", "Node": "node-6"}
    )
    # already bound: refused from the cache (403), or the API server's conflict passed on (200)
    assert status in (200, 403) and "already" in result["Error"]


def test_explain_on_the_extenders_snapshot(cluster: tuple[TestApiServer, ExtenderProcess]) -> None:
    """/debug/explain on the extender: a pending pod of the informer cache, on 5000 nodes."""
    server, process = cluster
    server.add("pods", pod("waiting", cpu="8"))
    end = time.monotonic() + 20
    while True:  # until the informer cache has it
        with socket.create_connection((process.host, process.port), timeout=30) as conn:
            conn.sendall(
                b"GET /debug/explain?pod=default/waiting&node=node-0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            raw = b"".join(iter(lambda: conn.recv(65536), b""))
        head, _, body = raw.partition(b"\r\n\r\n")
        if b" 404 " not in head.split(b"\r\n")[0] or time.monotonic() > end:
            break
        time.sleep(0.1)
    assert b" 200 " in head.split(b"\r\n")[0], raw[:300]
    answer = json.loads(body)
    assert answer["nodes"] >= 5000 and answer["feasible"] == 0
    reasons = {(g["rule"], g["reason"]): g["nodes"] for g in answer["reasons"]}
    assert reasons[("NodeResourcesFit", "Insufficient cpu")] >= 5000  # every node, the cordoned ones too
    assert reasons[("NodeUnschedulable", "node(s) were unschedulable")] == 500
    node0 = next(d for d in answer["detailed"] if d["node"] == "node-0")
    assert [b["expression"] for f in node0["failures"] for b in f["blame"]] == [
        'pod.requests["cpu"] (8) <= node.free["cpu"] (500m)'
    ]


# --- bind with volumes -----------------------------------------------------------------------------

SELECTED_NODE = "volume.kubernetes.io/selected-node"


@pytest.fixture(scope="module")
def volumes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestApiServer, ExtenderProcess]]:
    """Two zones; a class provisioning in zone-b only, a local class with a volume on node-a."""
    server = TestApiServer()
    server.add("nodes", zonal_node("node-a", "zone-a"))
    server.add("nodes", zonal_node("node-b", "zone-b"))
    server.add("storageclasses", storage_class("zonal", "csi.example.com", zones=["zone-b"]))
    server.add("storageclasses", storage_class("local", "kubernetes.io/no-provisioner"))
    server.add("persistentvolumes", local_volume("local-a", "node-a"))
    for name, cls in (("data-0", "zonal"), ("data-1", "zonal"), ("local-0", "local")):
        server.add("persistentvolumeclaims", claim(name, cls))
    server.add("pods", claiming_pod("db-0", "data-0"))
    server.add("pods", claiming_pod("static-0", "local-0"))
    server.add("pods", claiming_pod("unlucky", "data-1"))  # its binding will conflict (a fault)
    folder = tmp_path_factory.mktemp("volumes")
    process = ExtenderProcess(
        "--kubeconfig",
        server.kubeconfig(str(folder / "kubeconfig")),
        "--rules",
        "default",
        "--bind-verb",
        "--scheduler-name",
        "rulesched",  # (the pods of tests.test_run_volumes name it)
    )
    process.wait_ready()
    yield server, process
    process.stop()
    server.stop()


def _binding(name: str, node: str) -> dict[str, str]:
    return {"PodName": name, "PodNamespace": "default", "PodUID": f"uid-{name}", "Node": node}


def test_bind_annotates_a_claim_to_provision_with_the_node(volumes: tuple[TestApiServer, ExtenderProcess]) -> None:
    server, process = volumes
    status, answer = process.post("/filter", extender_args(claiming_pod("db-0", "data-0"), names=["node-a", "node-b"]))
    assert status == 200 and answer["NodeNames"] == ["node-b"]  # the class provisions in zone-b only
    status, result = process.post("/bind", _binding("db-0", "node-b"))
    assert status == 200 and result == {"Error": ""}
    assert server.store.objects["pods"]["default/db-0"]["spec"]["nodeName"] == "node-b"
    annotations = server.store.objects["persistentvolumeclaims"]["default/data-0"]["metadata"]["annotations"]
    assert annotations[SELECTED_NODE] == "node-b"


def test_bind_binds_a_static_volume_to_the_claim(volumes: tuple[TestApiServer, ExtenderProcess]) -> None:
    server, process = volumes
    # (no filter request before: the pod comes from the informer cache)
    status, result = process.post("/bind", _binding("static-0", "node-a"))
    assert status == 200 and result == {"Error": ""}
    assert server.store.objects["pods"]["default/static-0"]["spec"]["nodeName"] == "node-a"
    ref = server.store.objects["persistentvolumes"]["local-a"]["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "local-0", "uid-local-0")
    assert server.store.objects["persistentvolumeclaims"]["default/local-0"]["spec"]["volumeName"] == "local-a"


def test_a_failed_bind_takes_the_volume_choice_back(volumes: tuple[TestApiServer, ExtenderProcess]) -> None:
    server, process = volumes
    server.set_faults(bind_conflict_rate=1.0)  # the API server answers the binding 409
    try:
        status, result = process.post("/bind", _binding("unlucky", "node-b"))
    finally:
        server.set_faults()
    assert status == 200 and "already assigned" in result["Error"]
    changes = [obj for _, plural, _, obj in server.store.history if plural == "persistentvolumeclaims"]
    made = [o for o in changes if o["metadata"]["name"] == "data-1"]
    assert any(SELECTED_NODE in (o["metadata"].get("annotations") or {}) for o in made)  # made, then
    current = server.store.objects["persistentvolumeclaims"]["default/data-1"]
    assert SELECTED_NODE not in (current["metadata"].get("annotations") or {})  # taken back
