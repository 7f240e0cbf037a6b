"""rulesched's protobuf writes (rulesched/kube/protobuf.py) taken by the real kube-apiserver 1.37:
a Binding binds the pod it names, uid and all; an Event posted as protobuf reads back, as JSON,
field for field as the same Event posted as JSON; a refused write's Status, answered in protobuf to a write whose answer is not read, still says
why.
"""

from __future__ import annotations

from typing import Any

import pytest

from rulesched.errors import ConflictError, NotFoundError
from rulesched.kube.api import KubeApi
from rulesched.kube.bodies import event_body
from rulesched.kube.channel import Channel
from rulesched.kube.resources import EVENTS, PODS
from tests.realk8s import Kube


def posted_event(k8s: Kube, ns: str, name: str) -> dict[str, Any]:
    found = k8s.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}")
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        found["metadata"].pop(key, None)
    return dict(found)


def test_bindings_and_events_sent_as_protobuf_read_back_as_sent(k8s: Kube) -> None:
    k8s.node("pb-node", cpu="4")
    ns = k8s.namespace("pb")
    pod = k8s.pod(ns, "p", scheduler="nobody")
    api = KubeApi(k8s.kubeconfig)
    assert api.protobuf
    api.bind(ns, "p", pod["metadata"]["uid"], "pb-node")
    assert k8s.read_pod(ns, "p")["spec"]["nodeName"] == "pb-node"
    with pytest.raises(ConflictError, match="already assigned"):  # (its Status answered in protobuf: read)
        api.bind(ns, "p", pod["metadata"]["uid"], "pb-node")
    regarding = {"kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": "p", "uid": pod["metadata"]["uid"]}
    related = dict(regarding, name="other", uid="u-2")
    bodies = [
        event_body(regarding, "Normal", "Scheduled", "Binding", "Successfully assigned ünïcode", "rs"),
        event_body(regarding, "Warning", "Preempted", "Preempting", "by other", "rs", related),
    ]
    bodies[1]["metadata"]["annotations"] = {"rulesched.io/why": "a test"}
    for body in bodies:
        sent_as_protobuf = api.create(EVENTS, ns, body)  # (answered in JSON)
        assert sent_as_protobuf["note"] == body["note"]
        twin = dict(body, metadata=dict(body["metadata"], name=body["metadata"]["name"] + "-json"))
        KubeApi(k8s.kubeconfig, protobuf=False).create(EVENTS, ns, twin)
        mine, theirs = posted_event(k8s, ns, body["metadata"]["name"]), posted_event(k8s, ns, twin["metadata"]["name"])
        theirs["metadata"]["name"] = mine["metadata"]["name"]
        assert mine == theirs
        assert mine["eventTime"] == body["eventTime"]
    assert api.protobuf  # (never refused)


def test_a_channels_protobuf_binding_is_taken_and_a_refusal_says_why(k8s: Kube) -> None:
    k8s.node("pb-node-2", cpu="4")
    ns = k8s.namespace("pb")
    pod = k8s.pod(ns, "q", scheduler="nobody")
    api = KubeApi(k8s.kubeconfig)
    channel = api.channel()
    assert isinstance(channel, Channel)
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "q", "namespace": ns, "uid": pod["metadata"]["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "pb-node-2"}}  # fmt: skip
    channel.send("POST", PODS.path(ns, "q", "binding"), body)
    channel.receive()
    assert k8s.read_pod(ns, "q")["spec"]["nodeName"] == "pb-node-2"
    missing = dict(body, metadata={"name": "gone", "namespace": ns})
    for answer in (True, False):  # (the refusal's Status in JSON, then in protobuf)
        channel.send("POST", PODS.path(ns, "gone", "binding"), missing, answer=answer)
        with pytest.raises(NotFoundError, match='pods "gone" not found'):
            channel.receive()
    assert api.protobuf
