"""``rulesched extender`` exposed to whoever can reach it, over HTTP against the test API server:
names never reach a URL unchecked, the bind verb binds only what kube-scheduler could have
asked, preemption with rules that check no resources keeps kube-scheduler's victims, every API
call and every slow client has a deadline, hostile bodies get a 400 naming the field, the
extender calls exactly what its RBAC grants, and TLS with client certificates."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.errors import KubeError, NotFoundError, UnavailableError
from rulesched.kube.api import KubeApi
from rulesched.kube.resources import PODS
from tests.apiserver import TestApiServer
from tests.extender_client import ExtenderProcess, extender_args, preemption_args
from tests.helpers.kube import EXTENDER_NODES as NODES
from tests.helpers.kube import claim, claiming_pod, local_volume, storage_class, zonal_node
from tests.helpers.kube import extender_node as node
from tests.helpers.kube import extender_pod as pod
from tests.helpers.timing import Stopwatch, cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
EXTENDER_DEPLOY = ROOT / "deploy" / "extender"
UNDERLAY = {"network.example.com/mode": "underlay"}


def _underlay(p: dict[str, Any]) -> dict[str, Any]:
    p["metadata"]["annotations"] = dict(UNDERLAY)
    return p


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestApiServer, ExtenderProcess]]:
    """The shipped rules (deploy/extender/rules: no ``extends "default"``, so no resource
    checks), the informer cache, the bind verb on."""
    server = TestApiServer()
    for name in ("n1", "n2", "n3", "n4"):
        server.add("nodes", node(name))
    server.add("pods", pod("mine"))
    theirs = pod("theirs")
    theirs["spec"]["schedulerName"] = "other-scheduler"
    server.add("pods", theirs)
    server.add("pods", pod("slow"))
    server.add("pods", pod("running", "1", 0, "n1"))
    server.add("pods", pod("low-1", "3", 1, "n2"))
    server.add("pods", pod("vip", "3", 1000, "n3"))
    for i in range(10):  # n4's underlay IPs all taken, by pods of high priority
        server.add("pods", _underlay(pod(f"underlay-{i}", "100m", 1000, "n4")))
    server.add("pods", pod("low-2", "100m", 1, "n4"))
    folder = tmp_path_factory.mktemp("exposed")
    (folder / "config.yaml").write_text("request_timeout: 2\n")
    process = ExtenderProcess(
        "--kubeconfig",
        server.kubeconfig(str(folder / "kubeconfig")),
        "--rules",
        str(EXTENDER_DEPLOY / "rules"),
        "--bind-verb",
        "--config",
        str(folder / "config.yaml"),
    )
    process.wait_ready()
    yield server, process
    process.stop()
    server.stop()


def _binding(name: str, node_name: str, **fields: str) -> dict[str, str]:
    return {"PodName": name, "PodNamespace": "default", "PodUID": f"uid-{name}", "Node": node_name, **fields}


# --- names in URLs, and deadlines on API calls ------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("PodName", "p?watch=1"),
        ("PodName", "p?watch=true&timeoutSeconds=30"),
        ("PodName", "../../nodes/n1"),
        ("PodName", "a/b"),
        ("PodName", "p%3Fwatch%3D1"),
        ("PodName", "x" * 254),
        ("PodNamespace", "default?watch=1"),
        ("PodNamespace", "Default"),
        ("Node", "n1?watch=1"),
        ("Node", "n1#x"),
    ],
)
def test_a_name_never_turns_the_binding_into_another_request(
    exposed: tuple[TestApiServer, ExtenderProcess], field: str, value: str
) -> None:
    """``"p?watch=1"`` once made the pod lookup a watch that held the only worker for 30 s."""
    server, process = exposed
    before = len(server.store.requests)
    clock = Stopwatch()
    status, answer = process.post("/bind", {**_binding("mine", "n1"), field: value})
    assert status == 400 and answer["Error"].startswith(f"{field}: "), answer
    status, _ = process.post("/filter", extender_args(pod("next"), names=["n1"]))
    assert status == 200 and clock.stop() < clock.bound(1.0), str(clock)  # (1 s when quiet; a watch: 30 s)
    # nothing asked of the API server about a pod by name (informers only list and watch)
    assert [r for r in server.store.requests[before:] if "/pods/" in r[1]] == []


def test_the_api_adapter_escapes_names_and_bounds_each_call(
    exposed: tuple[TestApiServer, ExtenderProcess], tmp_path: Path
) -> None:
    server, _ = exposed
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    before = len(server.store.requests)
    with pytest.raises(NotFoundError):
        api.get(PODS, "default", "p?watch=1")  # a name that needs escaping: one GET, no query
    assert server.store.requests[before:] == [("GET", "/api/v1/namespaces/default/pods/p%3Fwatch%3D1")]
    for namespace, name in (("default", "a/b"), ("default", ".."), ("default", "50%"), ("Default", "p"), ("d", "")):
        with pytest.raises(KubeError) as refused:
            api.get(PODS, namespace, name)
        assert refused.value.status == 400
    assert len(server.store.requests) == before + 1  # refused before any request
    server.set_faults(delay=10.0)  # (its answer would come long after any bound below)
    try:
        clock = Stopwatch()
        with pytest.raises(UnavailableError):  # (the default timeout, 30 s, would have had the answer)
            api.get(PODS, "default", "mine", timeout=0.3)
        assert clock.stop() < clock.bound(1.5), str(clock)  # 1.5 s when quiet, the machine's slowdown on top
    finally:
        server.set_faults()
        api.close()


def test_a_slow_api_server_cannot_hold_the_bind_verb(exposed: tuple[TestApiServer, ExtenderProcess]) -> None:
    server, process = exposed
    server.set_faults(delay=5.0)
    try:
        clock = Stopwatch()
        status, answer = process.post("/bind", _binding("slow", "n1"))
        clock.stop()
    finally:
        server.set_faults()
    # The binding's budget is request_timeout - 1 s: its API call gives up within it, and says so
    # (had it waited for the answer, 5 s, the request's own 2 s deadline would have answered 503).
    assert status == 200 and "timed out" in answer["Error"].lower(), answer
    assert clock.stop() < clock.bound(2.5), str(clock)  # (2.5 s on a quiet machine)
    clock = Stopwatch()
    status, _ = process.post("/filter", extender_args(pod("next"), names=["n1"]))
    assert status == 200 and clock.stop() < clock.bound(1.0), str(clock)  # the worker is free


# --- the bind verb ------------------------------------------------------------------------------------


REFUSED = [
    (_binding("theirs", "n1"), 403, "pod default/theirs names scheduler 'other-scheduler'"),
    (_binding("nobody", "n1"), 403, "pod default/nobody is not a pending pod"),
    (_binding("mine", "ghost"), 403, "node ghost is not in rulesched's informer cache"),
    (_binding("mine", "n1", PodUID="uid-someone-else"), 403, "pod default/mine has UID uid-mine, not uid-some"),
    (_binding("running", "n2"), 403, "pod default/running is already bound to node n1"),
    (_binding("mine", "N1"), 400, "Node: not a valid node name: 'N1' is not a lower-case RFC 1123 subdomain"),
    (_binding("mine", "n1", PodNamespace="kube system"), 400, "PodNamespace: "),
]


def test_bind_binds_only_what_kube_scheduler_could_have_asked(exposed: tuple[TestApiServer, ExtenderProcess]) -> None:
    server, process = exposed
    bindings = server.store.bindings
    for message, code, words in REFUSED:
        status, answer = process.post("/bind", message)
        assert (status, answer["Error"][: len(words)]) == (code, words), answer
    assert server.store.bindings == bindings  # not one binding made
    status, answer = process.post("/bind", _binding("mine", "n2"))
    assert status == 200 and answer == {"Error": ""}
    assert server.store.objects["pods"]["default/mine"]["spec"]["nodeName"] == "n2"


# --- preemption with rules that check no resources ----------------------------------------------------


def test_preempt_with_rules_that_check_no_resources_keeps_kube_schedulers_victims(
    exposed: tuple[TestApiServer, ExtenderProcess],
) -> None:
    """deploy/extender/rules has no ``extends "default"``: it once reprieved every victim and
    answered an empty list, which kube-scheduler rejects ("expected at least one victim pod")."""
    _, process = exposed
    high = pod("high", "2", priority=100)
    proposal = {"n2": ["uid-low-1"], "n3": ["uid-vip"]}
    status, answer = process.post("/preempt", preemption_args(high, meta=proposal))
    assert status == 200
    # n2: as proposed; n3: its victim outranks the pod (the lower_priority rule forbids it)
    assert answer == {"NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "uid-low-1"}], "NumPDBViolations": 0}}}
    # an underlay pod: evicting low-2 from n4 leaves its 10 underlay IPs taken, which the rules
    # check: preempting there is in vain, and the node is dropped
    status, answer = process.post(
        "/preempt", preemption_args(_underlay(pod("net", priority=100)), meta={"n4": ["uid-low-2"]})
    )
    assert status == 200 and answer == {"NodeNameToMetaVictims": {}}


# --- hostile bodies -----------------------------------------------------------------------------------

QUANTITIES = ["1e400", "9" * 40, "1e19", "-1e400", "1e-400", "18446744073709551616", "NaN", "Infinity", "1E", "8Ei"]
BAD_BYTES = [b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xc0\xaf"]
names = st.text(max_size=80) | st.sampled_from(["p?watch=1", "../x", "a/b", "%2F", "n1", "mine", "x" * 300, ""])


def _bind_body(name: str, namespace: str, node_name: str) -> tuple[str, bytes]:
    return "/bind", json.dumps({"PodName": name, "PodNamespace": namespace, "Node": node_name}).encode()


def _deep_body(depth: int, where: str, path: str) -> tuple[str, bytes]:
    deep = b"[" * depth + b"]" * depth
    if where == "pod":
        return path, b'{"Pod": {"metadata": {"name": "p", "labels": ' + deep + b'}}, "NodeNames": ["n1"]}'
    if where == "node":
        return path, b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [' + deep + b"]}}"
    if where == "victims":
        return "/preempt", b'{"Pod": {"metadata": {"name": "p"}}, "NodeNameToVictims": {"n1": ' + deep + b"}}"
    return path, deep


def _bad_utf8_body(bad: bytes, where: int, path: str) -> tuple[str, bytes]:
    spots = [
        b'{"Pod": {"metadata": {"name": "p%s"}}, "NodeNames": ["n1"]}',
        b'{"Pod": {"metadata": {"name": "p", "labels": {"k%s": "v"}}}, "NodeNames": ["n1"]}',
        b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n1%s"]}',
        b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n%s"}}]}}',
        b'{"Po%sd": {"metadata": {"name": "p"}}, "NodeNames": ["n1"]}',
        b'{"PodName": "mine%s", "Node": "n1"}',
    ]
    body = spots[where] % bad
    return ("/bind" if b"PodName" in body else path), body


def _quantity_body(quantity: str, where: str, path: str) -> tuple[str, bytes]:
    if where == "pod":
        p = pod("p")
        p["spec"]["containers"][0]["resources"]["requests"] = {"memory": quantity}
        return path, json.dumps(extender_args(p, names=["n1"])).encode()
    n = node("huge")
    n["status"]["allocatable"]["cpu"] = quantity
    return path, json.dumps(extender_args(pod("p"), nodes=[n])).encode()


verbs = st.sampled_from(["/filter", "/prioritize", "/preempt"])
hostile = st.one_of(
    st.builds(_bind_body, names, names, names),
    st.builds(_deep_body, st.integers(300, 20_000), st.sampled_from(["pod", "node", "victims", "top"]), verbs),
    st.builds(_bad_utf8_body, st.sampled_from(BAD_BYTES), st.integers(0, 5), verbs),
    st.builds(_quantity_body, st.sampled_from(QUANTITIES), st.sampled_from(["pod", "node"]), verbs),
    st.builds(
        lambda n, p: (p, json.dumps(extender_args(pod("p"), names=n)).encode()), st.lists(names, max_size=4), verbs
    ),
)
FIELD_FIRST = re.compile(r"[A-Za-z][^\n:]*: \S")  # "field: problem", one line


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=hostile)
def test_hostile_bodies_get_400_naming_the_field_in_bounded_time(
    exposed: tuple[TestApiServer, ExtenderProcess], request: tuple[str, bytes]
) -> None:
    server, process = exposed
    path, body = request
    before = len(server.store.requests)
    started, cpu = time.monotonic(), cpu_seconds(process.proc.pid)
    status, data = process.request("POST", path, body)
    # Bounded work: the extender's CPU time for the body (a machine busy with other work slows
    # the answer, not this), and no waiting on anything (a lookup turned watch waits 30 s).
    assert cpu_seconds(process.proc.pid) - cpu < 1.5 and time.monotonic() - started < 20
    assert status in (200, 400) or (status, path) == (403, "/bind"), (status, data[:300])
    answer = json.loads(data)
    if status != 200:  # 400: "field: problem"; 403 (the bind verb refusing a pod): the reason
        error = answer["Error"]
        assert "\n" not in error and len(error) < 1000, error
        assert status == 403 or FIELD_FIRST.match(error), error
    assert [r for r in server.store.requests[before:] if "/pods/" in r[1]] == []  # (no binding, no lookup)


def test_the_server_lives_on_after_the_hostile_bodies_in_bounded_memory(
    exposed: tuple[TestApiServer, ExtenderProcess],
) -> None:
    _, process = exposed
    assert process.alive()
    status, answer = process.post("/filter", extender_args(pod("p"), names=["n1", "n2"]))
    assert status == 200 and answer["NodeNames"]
    assert _rss_mb(process.proc.pid) < 400  # (~100 MB at start; the hostile bodies leave nothing)


# --- slow and vanishing clients --------------------------------------------------------------------------


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes ``sock`` (a byte of ``trickle`` sent every 0.2 s), or
    None if it stays open that long."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < seconds:
        try:
            if trickle:
                sock.sendall(trickle)
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
    return None


def test_slow_headers_are_cut_and_a_vanishing_client_is_one_log_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("request_timeout: 1\n")
    process = ExtenderProcess("--config", str(tmp_path / "config.yaml"))
    try:
        with socket.create_connection((process.host, process.port), timeout=5) as sock:
            sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            clock = Stopwatch()
            took = _closed_within(sock, 60.0, trickle=b"a")  # a header that never ends
        # cut at the 1 s request timeout (2.5 s when quiet, the machine's slowdown on top), however
        # long the client keeps trickling; an idle timeout, reset by each byte, never cuts it
        assert took is not None and took < clock.bound(2.5), (took, str(clock))
        with socket.create_connection((process.host, process.port), timeout=5) as sock:
            sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            sock.sendall(b'{"Pod": {"metadata"')
            time.sleep(0.3)  # the handler is reading the body when the client goes
        time.sleep(0.3)
        assert process.alive()
        status, _ = process.post("/filter", extender_args(pod("p"), nodes=NODES[:1]))
        assert status == 200
    finally:
        log = process.stop()
    assert log.count("request headers incomplete after 1s") == 1, log
    assert log.count("the client went away mid-request") == 1, log
    assert "Traceback" not in log, log


# --- RBAC ---------------------------------------------------------------------------------------------

_RESOURCE_PATH = re.compile(r"/api/v1/(?P<core>.*)|/apis/(?P<group>[^/]+)/[^/]+/(?P<rest>.*)")


def _rbac_request(method: str, path: str) -> tuple[str | None, str, str, str]:
    """A request as RBAC sees it: (namespace, apiGroup, resource[/subresource], verb)."""
    url = urlsplit(path)
    match = _RESOURCE_PATH.fullmatch(url.path)
    assert match is not None, path
    group = match["group"] or ""
    parts = [unquote(p) for p in (match["core"] if match["core"] is not None else match["rest"]).split("/")]
    namespace = None
    if parts[0] == "namespaces" and len(parts) >= 3:
        namespace, parts = parts[1], parts[2:]
    resource_name, name = parts[0], parts[1] if len(parts) > 1 else None
    if len(parts) > 2:
        resource_name += "/" + parts[2]
    if method == "GET":
        verb = "get" if name else ("watch" if parse_qs(url.query).get("watch") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return namespace, group, resource_name, verb


def _granted(*files: Path) -> set[tuple[str | None, str, str, str]]:
    """(namespace or None for cluster-wide, apiGroup, resource, verb) of every role rule."""
    out = set()
    for file in files:
        for doc in yaml.safe_load_all(file.read_text()):
            if doc and doc["kind"] in ("ClusterRole", "Role"):
                scope = doc["metadata"].get("namespace") if doc["kind"] == "Role" else None
                for rule in doc["rules"]:
                    for group in rule["apiGroups"]:
                        for name in rule["resources"]:
                            out.update((scope, group, name, verb) for verb in rule["verbs"])
    return out


def test_the_extender_calls_exactly_what_its_rbac_grants(tmp_path: Path) -> None:
    """Informers, the rules ConfigMap and an event on it, bindings with volume choices and the
    undo of one: every request the extender makes is granted by deploy/extender's RBAC (with
    rbac-bind.yaml), and every grant is used."""
    server = TestApiServer()
    try:
        server.add("namespaces", {"metadata": {"name": "rulesched"}})
        rules = (EXTENDER_DEPLOY / "rules" / "policy.rules").read_text()
        server.add("configmaps", {"metadata": {"name": "rules", "namespace": "rulesched"}, "data": {"a.rules": rules}})
        server.add("nodes", zonal_node("node-a", "zone-a"))
        server.add("nodes", zonal_node("node-b", "zone-b"))
        server.add("storageclasses", storage_class("zonal", "csi.example.com", zones=["zone-b"]))
        server.add("storageclasses", storage_class("local", "kubernetes.io/no-provisioner"))
        server.add("persistentvolumes", local_volume("local-a", "node-a"))
        for name, cls in (("data-0", "zonal"), ("data-1", "zonal"), ("local-0", "local")):
            server.add("persistentvolumeclaims", claim(name, cls))
        for name, claimed in (("db-0", "data-0"), ("db-1", "data-1"), ("static-0", "local-0")):
            server.add("pods", claiming_pod(name, claimed))
        process = ExtenderProcess(
            "--kubeconfig",
            server.kubeconfig(str(tmp_path / "kubeconfig")),
            "--rules-configmap",
            "rulesched/rules",
            "--bind-verb",
            "--scheduler-name",
            "rulesched",
        )
        try:
            process.wait_ready()
            assert process.post("/bind", _binding("db-0", "node-b"))[1] == {"Error": ""}  # a claim annotated
            assert process.post("/bind", _binding("static-0", "node-a"))[1] == {"Error": ""}  # a volume bound
            server.set_faults(bind_conflict_rate=1.0)
            assert process.post("/bind", _binding("db-1", "node-b"))[1]["Error"]  # ... and taken back
            server.set_faults()
            records = server.store.objects["configmaps"]
            end = time.monotonic() + 20
            while "rulesched/rules-last-good" not in records and time.monotonic() < end:
                time.sleep(0.05)
            first = records["rulesched/rules-last-good"]["metadata"]["annotations"]["rulesched.io/rules-digest"]
            current = records["rulesched/rules"]
            server.update("configmaps", {**current, "data": {"a.rules": rules + "\n# v2\n"}})  # the record updated
            while time.monotonic() < end and (
                records["rulesched/rules-last-good"]["metadata"]["annotations"]["rulesched.io/rules-digest"] == first
            ):
                time.sleep(0.05)
            current = records["rulesched/rules"]
            server.update("configmaps", {**current, "data": {"a.rules": "filter broken:\n"}})
            end = time.monotonic() + 20
            while not server.store.objects["events"] and time.monotonic() < end:
                time.sleep(0.05)
            assert server.store.objects["events"], "no Warning event for the broken rules"
        finally:
            process.stop()
        used = {_rbac_request(method, path) for method, path in server.store.requests}
    finally:
        server.stop()
    granted = _granted(EXTENDER_DEPLOY / "rbac.yaml", EXTENDER_DEPLOY / "rbac-bind.yaml")
    not_granted = {u for u in used if (None, *u[1:]) not in granted and u not in granted}
    assert not_granted == set()
    unused = {g for g in granted if not any(u[1:] == g[1:] and g[0] in (None, u[0]) for u in used)}
    assert unused == set()


# --- TLS ---------------------------------------------------------------------------------------------


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _certificates(d: str) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it."""
    key = ["-newkey", "rsa:2048", "-nodes"]
    _openssl(
        "req", "-x509", *key, "-days", "1", "-subj", "/CN=test-ca", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt"
    )
    for who in ("server", "client"):
        san = ["-addext", "subjectAltName=IP:127.0.0.1"] if who == "server" else []
        _openssl("req", *key, "-subj", f"/CN={who}", "-keyout", f"{d}/{who}.key", "-out", f"{d}/{who}.csr", *san)
        _openssl(
            "x509", "-req", "-in", f"{d}/{who}.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key", "-CAcreateserial",
            "-days", "1", "-copy_extensions", "copy", "-out", f"{d}/{who}.crt",
        )  # fmt: skip


def test_tls_with_client_certificates(tmp_path: Path) -> None:
    import http.client
    import ssl

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = str(tmp_path)
    _certificates(d)
    process = ExtenderProcess(
        "--tls-cert", f"{d}/server.crt", "--tls-key", f"{d}/server.key", "--client-ca", f"{d}/ca.crt"
    )
    try:
        body = json.dumps(extender_args(pod("p"), nodes=NODES[:1])).encode()
        good = ssl.create_default_context(cafile=f"{d}/ca.crt")
        good.load_cert_chain(f"{d}/client.crt", f"{d}/client.key")
        conn = http.client.HTTPSConnection(process.host, process.port, context=good, timeout=10)
        conn.request("POST", "/filter", body=body)
        response = conn.getresponse()
        assert response.status == 200 and json.loads(response.read())["Nodes"]["items"][0]["metadata"]["name"] == "n1"
        # without a client certificate: the verbs refuse, the probes answer (the kubelet has none)
        anonymous = ssl.create_default_context(cafile=f"{d}/ca.crt")
        conn = http.client.HTTPSConnection(process.host, process.port, context=anonymous, timeout=10)
        conn.request("POST", "/filter", body=body)
        response = conn.getresponse()
        assert response.status == 403 and "client certificate" in json.loads(response.read())["Error"]
        conn.request("GET", "/readyz")
        assert conn.getresponse().status == 200
        # a certificate another CA signed fails the handshake
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=intruder",
                 "-keyout", f"{d}/other.key", "-out", f"{d}/other.crt")  # fmt: skip
        other = ssl.create_default_context(cafile=f"{d}/ca.crt")
        other.load_cert_chain(f"{d}/other.crt", f"{d}/other.key")
        conn = http.client.HTTPSConnection(process.host, process.port, context=other, timeout=10)
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            conn.request("POST", "/filter", body=body)
            conn.getresponse().read()
        assert process.proc.poll() is None
    finally:
        process.stop()
