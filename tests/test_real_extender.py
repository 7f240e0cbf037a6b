"""The extender called by the real kube-scheduler 1.37 (tests/realk8s.py), as deploy/extender
sets it up: ``kubectl apply -k deploy/extender`` (its ServiceAccount, RBAC and rules ConfigMap),
the serving certificate made with the README's openssl commands (for
rulesched-extender.rulesched.svc and 10.96.0.88), ``rulesched extender`` with the
ServiceAccount's token, and kube-scheduler started with deploy/extender/scheduler-config.yaml
(only its kubeconfig, the extender's address and the CA file changed; ``nodeCacheCapable`` both
ways; ``bindVerb`` with rbac-bind.yaml). Pods end where the rules say: an underlay pod never on
the node with 10 underlay pods (filter), and on the node with fewer pods where kube-scheduler's
own scores tie (prioritize); preemption approved by the preempt verb; bindings by the extender."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml

from tests.extender_client import ExtenderProcess
from tests.helpers.realdra import devices, extended_class, extended_placed, extended_pod
from tests.realk8s import Kube

ROOT = Path(__file__).resolve().parents[1]
EXTENDER = ROOT / "deploy" / "extender"
UNDERLAY = {"network.example.com/mode": "underlay"}
SERVER_NAME = "rulesched-extender.rulesched.svc"


def certificates(d: Path) -> None:
    """The README's openssl commands ("Extender mode"), as written there."""
    commands = [
        "openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=rulesched-ca -keyout ca.key -out ca.crt",
        "openssl req -newkey rsa:2048 -nodes -subj /CN=rulesched-extender -keyout tls.key -out tls.csr"
        ' -addext "subjectAltName=DNS:rulesched-extender.rulesched.svc,IP:10.96.0.88"',
        "openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -copy_extensions copy"
        " -out tls.crt",
    ]
    readme = (ROOT / "README.md").read_text()
    for command in commands:
        assert " ".join(command.split()[:4]) in readme, f"the README no longer says {command!r}"
        subprocess.run(command, shell=True, cwd=d, check=True, capture_output=True)


def scheduler_config(port: int, ca: Path, node_cache: bool, bind: bool) -> dict[str, Any]:
    config = yaml.safe_load((EXTENDER / "scheduler-config.yaml").read_text())
    config = copy.deepcopy(config)
    del config["clientConnection"]  # (the test bed's kube-scheduler kubeconfig)
    (extender,) = config["extenders"]
    assert extender["tlsConfig"]["serverName"] == SERVER_NAME and extender["enableHTTPS"] is True
    extender["urlPrefix"] = f"https://127.0.0.1:{port}"
    extender["tlsConfig"]["caFile"] = str(ca)
    extender["nodeCacheCapable"] = node_cache
    if bind:
        extender["bindVerb"] = "bind"
    return dict(config)


class Setup:
    def __init__(self, k8s: Kube, extender: ExtenderProcess, tls: Path) -> None:
        self.k8s, self.extender, self.tls = k8s, extender, tls

    def metrics(self) -> str:
        pool = urllib3.HTTPSConnectionPool(
            "127.0.0.1", self.extender.port, ca_certs=str(self.tls / "ca.crt"), server_hostname=SERVER_NAME,
            assert_hostname=SERVER_NAME, retries=False,
        )  # fmt: skip
        return str(pool.request("GET", "/metrics").data.decode())

    def calls(self, verb: str) -> float:
        total = 0.0
        for line in self.metrics().splitlines():
            if (
                line.startswith("rulesched_extender_requests_total{")
                and f'verb="{verb}"' in line
                and 'code="200"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total


# (nodeCacheCapable, bindVerb): the extender's setups, each test run on those that can change its outcome
NODE_NAMES, WHOLE_NODES, BIND_VERB = (True, False), (False, False), (True, True)
WITHOUT_BIND = pytest.mark.parametrize(
    "setup", [NODE_NAMES, WHOLE_NODES], ids=["node-names", "whole-nodes"], indirect=True
)


@pytest.fixture(params=[NODE_NAMES, WHOLE_NODES, BIND_VERB], ids=["node-names", "whole-nodes", "bind-verb"])
def setup(request: pytest.FixtureRequest, k8s: Kube, tmp_path: Path) -> Iterator[tuple[Setup, bool, bool]]:
    node_cache, bind = request.param
    k8s.await_gone("rulesched")
    k8s.kubectl("apply", "-k", str(EXTENDER))
    if bind:
        k8s.kubectl("apply", "-f", str(EXTENDER / "rbac-bind.yaml"))
    assert k8s.wait(lambda: k8s._exists("/api/v1/namespaces/rulesched/serviceaccounts/rulesched-extender"), 30)
    token = k8s.token_kubeconfig("rulesched", "rulesched-extender", tmp_path / "extender.kubeconfig")
    certificates(tmp_path)
    args = ["--rules-configmap", "rulesched/rulesched-extender-rules", "--kubeconfig", token]
    args += ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    if bind:
        args += ["--bind-verb"]
    extender = ExtenderProcess(*args)
    try:
        yield Setup(k8s, extender, tmp_path), node_cache, bind
    finally:
        log = extender.stop()
        print(log[-5000:])
        k8s.kubectl("delete", "-k", str(EXTENDER), "--wait=false", check=False)


def test_kube_scheduler_calls_the_extender_and_pods_go_where_the_rules_say(setup: tuple[Setup, bool, bool]) -> None:
    s, node_cache, bind = setup
    k8s = s.k8s
    ns = k8s.namespace()
    for n in ("n1", "n2", "n3"):
        k8s.node(n, cpu="4", memory="16Gi")
    tiny = {"resources": {"requests": {"cpu": "1m", "memory": "1Mi"}}}
    for i in range(10):  # n1: the emptiest for kube-scheduler, but its 10 underlay IPs are taken
        k8s.pod(ns, f"underlay-{i}", scheduler="default-scheduler", metadata={"annotations": UNDERLAY},
                spec={"nodeName": "n1", "containers": [{"name": "c", "image": "x", **tiny}]})  # fmt: skip
    # n2 and n3 hold the same requests (2 cpu, 2Gi), n2 in 1 pod, n3 in 4: kube-scheduler's scores tie
    k8s.pod(ns, "big", scheduler="default-scheduler", spec={"nodeName": "n2", "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}]})  # fmt: skip
    for i in range(4):
        k8s.pod(ns, f"small-{i}", scheduler="default-scheduler", spec={"nodeName": "n3", "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]})  # fmt: skip
    assert k8s.wait(lambda: s.extender.proc.poll() is None and ready(s), 60), "".join(s.extender.log)[-3000:]
    mark = k8s.audit_mark()
    config = scheduler_config(s.extender.port, s.tls / "ca.crt", node_cache, bind)
    with k8s.kube_scheduler(config) as scheduler:
        for attempt in range(3):  # a tie broken at random would pass once in eight
            name = f"new-{attempt}"
            k8s.pod(ns, name, cpu="100m", scheduler="default-scheduler", metadata={"annotations": UNDERLAY})
            node = k8s.wait(lambda name=name: k8s.read_pod(ns, name)["spec"].get("nodeName"), 60)
            assert node == "n2", (node, scheduler.tail())
            k8s.delete(f"/api/v1/namespaces/{ns}/pods/{name}", grace=0)
            k8s.wait(lambda name=name: not any(p == name for p in k8s.pods(ns)), 10)
        assert s.calls("filter") >= 3 and s.calls("prioritize") >= 3
        if bind:
            assert s.calls("bind") >= 3
    binders = {e["user"]["username"] for e in k8s.audit(mark) if e["objectRef"].get("subresource") == "binding"
               and e["responseStatus"]["code"] == 201}  # fmt: skip
    expected = "system:serviceaccount:rulesched:rulesched-extender" if bind else "system:kube-scheduler"
    assert binders == {expected}


def ready(s: Setup) -> bool:
    pool = urllib3.HTTPSConnectionPool(
        "127.0.0.1", s.extender.port, ca_certs=str(s.tls / "ca.crt"), server_hostname=SERVER_NAME,
        assert_hostname=SERVER_NAME, retries=False,
    )  # fmt: skip
    try:
        return pool.request("GET", "/readyz").status == 200
    except urllib3.exceptions.HTTPError:
        return False


@WITHOUT_BIND  # (preemption does not depend on who binds)
def test_preemption_through_the_extenders_preempt_verb(setup: tuple[Setup, bool, bool]) -> None:
    """Two full nodes of low-priority pods; a high-priority pod: kube-scheduler proposes
    victims, the extender's preempt rule (lower priority may be evicted) keeps them, the victim
    is deleted (left terminating: no kubelet; the test removes it) and the pod bound."""
    s, node_cache, bind = setup
    k8s = s.k8s
    ns = k8s.namespace()
    k8s.create("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "ext-high"}, "value": 1000})
    for n in ("p1", "p2"):
        k8s.node(n, cpu="2")
        k8s.pod(ns, f"low-{n}", cpu="2", scheduler="default-scheduler", spec={"nodeName": n})
    assert k8s.wait(lambda: ready(s), 60)
    config = scheduler_config(s.extender.port, s.tls / "ca.crt", node_cache, bind)
    with k8s.kube_scheduler(config) as scheduler:
        k8s.pod(ns, "high", cpu="2", scheduler="default-scheduler", spec={"priorityClassName": "ext-high"})
        assert k8s.wait(lambda: any(p["metadata"].get("deletionTimestamp") for p in k8s.pods(ns).values()), 60), (
            scheduler.tail()
        )
        (victim,) = k8s.remove_terminating(ns)
        node = k8s.wait(lambda: k8s.read_pod(ns, "high")["spec"].get("nodeName"), 60)
        assert node == victim.removeprefix("low-"), (node, victim)
        assert s.calls("preempt") >= 1


@WITHOUT_BIND  # (who binds does not change what the filter answers)
def test_a_pod_asking_an_extended_resource_served_by_dra(setup: tuple[Setup, bool, bool]) -> None:
    """KEP-5004 with the extender in front: a DeviceClass serves `example.com/gpu` and node
    dra-1 publishes two GPUs (its allocatable has no `example.com/gpu`). With rules that check
    resources (`extends "default"`: NodeResourcesFit among them), the extender must not refuse
    dra-1 for lacking the resource: it watches DeviceClasses and leaves the devices to
    kube-scheduler, which allocates one and binds the pod there (the claim it made named in the
    pod's status). Before the extender knew classes it answered "Insufficient example.com/gpu"."""
    s, node_cache, bind = setup
    k8s = s.k8s
    ns = k8s.namespace()
    k8s.node("dra-1", cpu="4", memory="16Gi")
    assert k8s.wait(lambda: ready(s), 60), "".join(s.extender.log)[-3000:]
    patch = json.dumps({"data": {"policy.rules": 'extends "default"\n'}})
    k8s.kubectl("patch", "configmap", "rulesched-extender-rules", "-n", "rulesched", "--type=merge", "-p", patch)
    assert k8s.wait(lambda: any("rules reloaded" in line for line in s.extender.log), 60), "".join(s.extender.log)[
        -3000:
    ]
    config = scheduler_config(s.extender.port, s.tls / "ca.crt", node_cache, bind)
    with devices(k8s, "dra-1", 2), extended_class(k8s), k8s.kube_scheduler(config) as scheduler:
        extended_pod(k8s, ns, "ext", "default-scheduler")
        placed = k8s.wait(lambda: extended_placed(k8s, ns, "ext"), 60)
        assert placed, (k8s.read_pod(ns, "ext").get("status"), scheduler.tail(), "".join(s.extender.log)[-3000:])
        assert placed["spec"]["nodeName"] == "dra-1"
        assert s.calls("filter") >= 1
