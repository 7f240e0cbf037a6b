"""rulesched/kube/protobuf.py's bytes, read back by the protobuf package's own parser (upb),
against message descriptors written here from k8s.io/api's and k8s.io/apimachinery's
generated.proto (v0.37.2): runtime.Unknown's envelope, core/v1 Binding and ObjectReference,
meta/v1 ObjectMeta and MicroTime, events/v1 Event. tests/test_real_protobuf.py sends the same
bytes to the real API server.
"""

from __future__ import annotations

import string
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given
from hypothesis import strategies as st

from rulesched.errors import KubeError
from rulesched.kube import protobuf
from rulesched.kube.api import KubeApi
from rulesched.kube.bodies import binding_body, event_body
from rulesched.kube.resources import PODS
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod

MERGE = "application/merge-patch+json"

F = descriptor_pb2.FieldDescriptorProto
STRING, INT64, INT32, BYTES, MESSAGE = F.TYPE_STRING, F.TYPE_INT64, F.TYPE_INT32, F.TYPE_BYTES, F.TYPE_MESSAGE
MESSAGES: dict[str, list[tuple[str, int, int, str]]] = {  # name -> (field, number, type, message type)
    "TypeMeta": [("apiVersion", 1, STRING, ""), ("kind", 2, STRING, "")],
    "Unknown": [
        ("typeMeta", 1, MESSAGE, "TypeMeta"),
        ("raw", 2, BYTES, ""),
        ("contentEncoding", 3, STRING, ""),
        ("contentType", 4, STRING, ""),
    ],
    "Entry": [("key", 1, STRING, ""), ("value", 2, STRING, "")],
    "ObjectMeta": [
        ("name", 1, STRING, ""),
        ("generateName", 2, STRING, ""),
        ("namespace", 3, STRING, ""),
        ("uid", 5, STRING, ""),
        ("resourceVersion", 6, STRING, ""),
        ("labels", 11, MESSAGE, "Entry"),
        ("annotations", 12, MESSAGE, "Entry"),
    ],
    "ObjectReference": [
        ("kind", 1, STRING, ""),
        ("namespace", 2, STRING, ""),
        ("name", 3, STRING, ""),
        ("uid", 4, STRING, ""),
        ("apiVersion", 5, STRING, ""),
        ("resourceVersion", 6, STRING, ""),
        ("fieldPath", 7, STRING, ""),
    ],
    "Binding": [("metadata", 1, MESSAGE, "ObjectMeta"), ("target", 2, MESSAGE, "ObjectReference")],
    "MicroTime": [("seconds", 1, INT64, ""), ("nanos", 2, INT32, "")],
    "Event": [
        ("metadata", 1, MESSAGE, "ObjectMeta"),
        ("eventTime", 2, MESSAGE, "MicroTime"),
        ("reportingController", 4, STRING, ""),
        ("reportingInstance", 5, STRING, ""),
        ("action", 6, STRING, ""),
        ("reason", 7, STRING, ""),
        ("regarding", 8, MESSAGE, "ObjectReference"),
        ("related", 9, MESSAGE, "ObjectReference"),
        ("note", 10, STRING, ""),
        ("type", 11, STRING, ""),
    ],
    "Status": [
        ("status", 2, STRING, ""),
        ("message", 3, STRING, ""),
        ("reason", 4, STRING, ""),
        ("code", 6, INT32, ""),
    ],
}
REPEATED = {("ObjectMeta", "labels"), ("ObjectMeta", "annotations")}  # (map entries, read as a list)


def _classes() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="k8s_test.proto", package="k8stest", syntax="proto2")
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, kind, type_name in fields:
            label = F.LABEL_REPEATED if (name, field) in REPEATED else F.LABEL_OPTIONAL
            added = message.field.add(name=field, number=number, type=kind, label=label)
            if type_name:
                added.type_name = f".k8stest.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"k8stest.{name}")) for name in MESSAGES}


CLASSES = _classes()


def read(data: bytes) -> tuple[tuple[str, str], Any]:
    """(apiVersion, kind) and the object's message."""
    assert data[:4] == b"k8s\x00"
    unknown = CLASSES["Unknown"].FromString(data[4:])
    assert unknown.contentEncoding == "" and unknown.contentType == ""
    kind = unknown.typeMeta.kind
    return (unknown.typeMeta.apiVersion, kind), CLASSES[kind].FromString(unknown.raw)


def test_a_binding_reads_back_field_by_field() -> None:
    body = binding_body("team-a", "web-1", "uid-9", "node-3")
    (version, kind), binding = read(protobuf.encode(body))
    assert protobuf.decode(protobuf.encode(body)) == body
    assert (version, kind) == ("v1", "Binding")
    assert (binding.metadata.name, binding.metadata.namespace, binding.metadata.uid) == ("web-1", "team-a", "uid-9")
    assert (binding.target.apiVersion, binding.target.kind, binding.target.name) == ("v1", "Node", "node-3")


names = st.text(string.ascii_lowercase + string.digits + "-.", min_size=1, max_size=60)
notes = st.text(max_size=300)  # (any Unicode: UTF-8 on the wire)


@given(
    name=names,
    namespace=names,
    uid=st.uuids().map(str),
    note=notes,
    reason=st.sampled_from(["Scheduled", "FailedScheduling", "Preempted"]),
    related=st.booleans(),
    annotations=st.dictionaries(names, notes, max_size=3),
    moment=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)),
)
def test_an_event_reads_back_field_by_field(
    name: str,
    namespace: str,
    uid: str,
    note: str,
    reason: str,
    related: bool,
    annotations: dict[str, str],
    moment: datetime,
) -> None:
    regarding = {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": name, "uid": uid}
    other = {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "preemptor", "uid": "u2"}
    body = event_body(regarding, "Normal", reason, "Binding", note, "default-scheduler", other if related else None)
    body["eventTime"] = moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if annotations:
        body["metadata"]["annotations"] = annotations
    (version, kind), event = read(protobuf.encode(body))
    assert (version, kind) == ("events.k8s.io/v1", "Event")
    assert (event.metadata.name, event.metadata.namespace) == (body["metadata"]["name"], namespace)
    assert {e.key: e.value for e in event.metadata.annotations} == annotations
    assert (event.reason, event.type, event.action, event.note) == (reason, "Normal", "Binding", body["note"])
    assert (event.reportingController, event.reportingInstance) == ("default-scheduler", "default-scheduler")
    got = {f: getattr(event.regarding, f) for f in regarding}
    assert got == regarding
    assert event.HasField("related") == related
    if related:
        assert event.related.name == "preemptor"
    when = datetime.fromtimestamp(event.eventTime.seconds, UTC).replace(microsecond=event.eventTime.nanos // 1000)
    assert when == moment.replace(tzinfo=UTC)
    assert protobuf.decode(protobuf.encode(body)) == body  # (and the module's own reading: the fake server's)


@pytest.mark.parametrize(
    "body",
    [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},  # a kind it does not encode
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "labels": {"a": 1}}},  # not a string
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "finalizers": ["x"]}},  # a field it lacks
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "series": {"count": 2}},
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "eventTime": "2026-12-02T10:00:00"},  # no zone
    ],
)
def test_what_it_cannot_encode_whole_raises_rather_than_dropping_a_field(body: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        protobuf.encode(body)


@pytest.mark.parametrize("data", [b"", b"{}", b"k8s\x00\x0a\x05", b"k8s\x00\x0a\x00\x12\x00", b"k8s\x00\x0b"])
def test_what_is_not_a_whole_known_message_does_not_decode(data: bytes) -> None:
    with pytest.raises(ValueError):
        protobuf.decode(data)


def test_a_refused_requests_status_is_read() -> None:
    status = CLASSES["Status"](status="Failure", message='pods "p" not found', reason="NotFound", code=404)
    meta = CLASSES["TypeMeta"](apiVersion="v1", kind="Status")
    data = b"k8s\x00" + CLASSES["Unknown"](typeMeta=meta, raw=status.SerializeToString()).SerializeToString()
    assert protobuf.status_message(data) == ('pods "p" not found', 404)
    assert protobuf.status_message(b'{"message": "json"}') is None
    assert protobuf.status_message(b"k8s\x00\xff") is None


# --- through the adapter, against the fake API server (tests/apiserver.py) ------------------------


def test_bindings_and_events_go_as_protobuf_the_rest_as_json(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("n1"))
    server.add("pods", pod("a"))
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    api.bind("default", "a", "uid-a", "n1")
    regarding = {"kind": "Pod", "apiVersion": "v1", "namespace": "default", "name": "a", "uid": "uid-a"}
    api.post_event(regarding, "Normal", "Scheduled", "Binding", "assigned", "rulesched")
    api.patch_pod_status("default", "a", {"status": {"nominatedNodeName": None}})
    kinds = {path.rsplit("/", 1)[-1]: kind for _, path, kind in server.store.bodies}
    assert kinds == {"binding": protobuf.CONTENT_TYPE, "events": protobuf.CONTENT_TYPE, "status": MERGE}
    assert server.store.objects["pods"]["default/a"]["spec"]["nodeName"] == "n1"
    (event,) = server.store.objects["events"].values()
    assert (event["note"], event["regarding"]) == ("assigned", regarding)


def test_a_server_that_refuses_protobuf_gets_json_from_then_on(server: TestApiServer, tmp_path: Path) -> None:
    """A blocking call sends the refused request again as JSON at once; a channel's request
    fails (the binding is retried by the scheduler, as after any failure) and the next goes as
    JSON."""
    server.add("nodes", node("n1"))
    for name in ("a", "b", "c"):
        server.add("pods", pod(name))
    server.set_faults(refuse_protobuf=True)
    kubeconfig = server.kubeconfig(str(tmp_path / "kubeconfig"))
    api = KubeApi(kubeconfig)
    api.bind("default", "a", "uid-a", "n1")
    assert not api.protobuf
    assert [k for _, _, k in server.store.bodies] == [protobuf.CONTENT_TYPE, "application/json"]
    api = KubeApi(kubeconfig)
    channel = api.channel()
    assert channel is not None
    for name in ("b", "c"):
        body = binding_body("default", name, f"uid-{name}", "n1")
        channel.send("POST", PODS.path("default", name, "binding"), body)
        if name == "b":
            with pytest.raises(KubeError, match="415"):
                channel.receive()
        else:
            channel.receive()
    assert not api.protobuf
    bound = {k: p["spec"].get("nodeName") for k, p in server.store.objects["pods"].items()}
    assert bound == {"default/a": "n1", "default/b": None, "default/c": "n1"}


def test_the_answers_not_read_are_asked_for_in_protobuf(server: TestApiServer, tmp_path: Path) -> None:
    """A status patch, a deletion, an eviction: the server answers with the whole pod (or a
    Status), which rulesched never reads, so it is asked for in protobuf first (cheaper for the
    server to encode), JSON where the kind has none; a read still asks for JSON."""
    server.add("nodes", node("n1"))
    for name in ("a", "b"):
        server.add("pods", pod(name))
    api = KubeApi(server.kubeconfig(str(tmp_path / "kubeconfig")))
    accepts: list[tuple[str, str]] = []
    send = api._transport.request

    def recording(method: str, url: str, data: Any, headers: dict[str, str], timeout: Any) -> Any:
        accepts.append((method, headers["Accept"]))
        return send(method, url, data, headers, timeout)

    api._transport.request = recording  # type: ignore[method-assign]
    api.patch_pod_status("default", "a", {"status": {"nominatedNodeName": "n1"}}, strategic=True)
    api.delete(PODS, "default", "b")
    api.get(PODS, "default", "a")
    assert accepts == [
        ("PATCH", "application/vnd.kubernetes.protobuf, application/json"),
        ("DELETE", "application/vnd.kubernetes.protobuf, application/json"),
        ("GET", "application/json"),
    ]
    assert server.store.objects["pods"]["default/a"]["status"]["nominatedNodeName"] == "n1"
    assert "default/b" not in server.store.objects["pods"]
