"""The scheduler's hot writes (a Binding, an events.k8s.io/v1 Event) in Kubernetes' protobuf
encoding, and the Status of a refused one read back.

kube-apiserver takes every built-in kind as ``application/vnd.kubernetes.protobuf``: the magic
``k8s\\x00`` and a ``runtime.Unknown`` message (the object's apiVersion and kind, and the
object's own message as bytes). client-go sends kube-scheduler's writes that way; decoding
protobuf costs the server less than JSON (which it also decodes a second time, strictly, to
warn of unknown fields), and so does encoding its answer when the request asks for protobuf
back. The few messages rulesched sends are encoded here by hand over the wire format (field
numbers from k8s.io/api's and k8s.io/apimachinery's generated.proto, v0.37.2): no generated
classes, no protobuf library. A field this module does not know raises ValueError, so a body
grown later is sent as JSON rather than with a field left out (:func:`encode`'s callers fall
back). tests/test_kube_protobuf.py checks the bytes against the wire format;
tests/test_real_protobuf.py round-trips them through the real API server.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
# Accept for an answer not read: protobuf, else JSON (the server's choice: custom resources have no protobuf)
ACCEPT_UNREAD = f"{CONTENT_TYPE}, application/json"
MAGIC = b"k8s\x00"

_STRING, _MAP, _MICROTIME = "string", "map", "microtime"
# JSON name -> (field number, type: one of the above or another message's name)
_MESSAGES: dict[str, dict[str, tuple[int, str]]] = {
    "ObjectMeta": {
        "name": (1, _STRING),
        "generateName": (2, _STRING),
        "namespace": (3, _STRING),
        "uid": (5, _STRING),
        "resourceVersion": (6, _STRING),
        "labels": (11, _MAP),
        "annotations": (12, _MAP),
    },
    "ObjectReference": {
        "kind": (1, _STRING),
        "namespace": (2, _STRING),
        "name": (3, _STRING),
        "uid": (4, _STRING),
        "apiVersion": (5, _STRING),
        "resourceVersion": (6, _STRING),
        "fieldPath": (7, _STRING),
    },
    "Binding": {"metadata": (1, "ObjectMeta"), "target": (2, "ObjectReference")},
    "Event": {
        "metadata": (1, "ObjectMeta"),
        "eventTime": (2, _MICROTIME),
        "reportingController": (4, _STRING),
        "reportingInstance": (5, _STRING),
        "action": (6, _STRING),
        "reason": (7, _STRING),
        "regarding": (8, "ObjectReference"),
        "related": (9, "ObjectReference"),
        "note": (10, _STRING),
        "type": (11, _STRING),
    },
}
# (apiVersion, kind) -> the object's message
KINDS = {("v1", "Binding"): "Binding", ("events.k8s.io/v1", "Event"): "Event"}


def encode(body: Mapping[str, Any]) -> bytes:
    """``body`` (a JSON object of a kind in :data:`KINDS`, apiVersion and kind set) as the
    request body of ``Content-Type: application/vnd.kubernetes.protobuf``. ValueError for a
    kind or a field it does not know."""
    api_version, kind = body.get("apiVersion"), body.get("kind")
    message = KINDS.get((str(api_version), str(kind)))
    if message is None:
        raise ValueError(f"no protobuf encoding here for {api_version} {kind}")
    fields = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}
    type_meta = _string(1, str(api_version)) + _string(2, str(kind))
    return MAGIC + _bytes(1, type_meta) + _bytes(2, _message(message, fields))


def _message(name: str, fields: Mapping[str, Any]) -> bytes:
    schema = _MESSAGES[name]
    out: list[bytes] = []
    for key, value in fields.items():
        if value is None:
            continue
        found = schema.get(key)
        if found is None:
            raise ValueError(f"no protobuf field here for {name}.{key}")
        number, kind = found
        if kind == _STRING:
            out.append(_bytes(number, _text(name, key, value).encode()))
        elif kind == _MAP:
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}.{key} is not a mapping")
            for k, v in sorted(value.items()):  # (as Go's generated code writes maps: sorted)
                entry = _bytes(1, _text(name, key, k).encode()) + _bytes(2, _text(name, key, v).encode())
                out.append(_bytes(number, entry))
        elif kind == _MICROTIME:
            out.append(_bytes(number, _micro_time(_text(name, key, value))))
        else:
            if not isinstance(value, Mapping):
                raise ValueError(f"{name}.{key} is not an object")
            out.append(_bytes(number, _message(kind, value)))
    return b"".join(out)


def _text(name: str, key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}.{key} is not a string")
    return value


def _micro_time(text: str) -> bytes:
    """metav1.MicroTime {seconds = 1, nanos = 2} from its JSON form (RFC 3339, microseconds)."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone")
    seconds = calendar.timegm(moment.utctimetuple())  # (whole seconds: the microseconds are nanos')
    nanos = moment.microsecond * 1000
    return _varint_field(1, seconds) + (_varint_field(2, nanos) if nanos else b"")


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # (int64 as protobuf writes it: two's complement, ten bytes)
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _bytes(number: int, data: bytes) -> bytes:
    """A length-delimited field (a string, bytes, a message). The binding process encodes one
    binding and one event a pod: the tag is looked up, a short length is one byte."""
    size = len(data)
    return _TAGS[number] + (bytes((size,)) if size < 0x80 else _varint(size)) + data


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode())


_TAGS = {number: _varint(number << 3 | 2) for number in range(1, 16)}  # (every field number here)


# --- reading back ----------------------------------------------------------------------------------


def decode(data: bytes) -> dict[str, Any]:
    """:func:`encode`'s inverse: the JSON object of a body of a kind in :data:`KINDS` (the fake
    API server of the tests reads the scheduler's writes with it). ValueError for anything else."""
    if not data.startswith(MAGIC):
        raise ValueError("not Kubernetes protobuf (no k8s\\x00)")
    try:
        unknown = _fields(data[len(MAGIC) :])
        type_meta = _fields(_as_bytes(unknown.get(1, b"")))
        api_version = _as_bytes(type_meta.get(1, b"")).decode()
        kind = _as_bytes(type_meta.get(2, b"")).decode()
        message = KINDS.get((api_version, kind))
        if message is None:
            raise ValueError(f"no protobuf decoding here for {api_version} {kind}")
        return {"apiVersion": api_version, "kind": kind, **_read(message, _as_bytes(unknown.get(2, b"")))}
    except (IndexError, UnicodeDecodeError) as err:
        raise ValueError(f"not a whole message: {err}") from None


def _read(name: str, data: bytes) -> dict[str, Any]:
    by_number = {number: (key, kind) for key, (number, kind) in _MESSAGES[name].items()}
    out: dict[str, Any] = {}
    for number, value in _all_fields(data):
        found = by_number.get(number)
        if found is None:
            continue  # (a field this module does not know: as a decoder ignores unknown fields)
        key, kind = found
        if kind == _STRING:
            out[key] = _as_bytes(value).decode()
        elif kind == _MAP:
            entry = _fields(_as_bytes(value))
            out.setdefault(key, {})[_as_bytes(entry.get(1, b"")).decode()] = _as_bytes(entry.get(2, b"")).decode()
        elif kind == _MICROTIME:
            moment = _fields(_as_bytes(value))
            seconds, nanos = moment.get(1, 0), moment.get(2, 0)
            if not isinstance(seconds, int) or not isinstance(nanos, int):
                raise ValueError(f"{name}.{key} is not a time")
            seconds -= (seconds >> 63) << 64  # (int64: two's complement)
            when = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
            out[key] = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        else:
            out[key] = _read(kind, _as_bytes(value))
    return out


def _as_bytes(value: bytes | int) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("a number where bytes belong")
    return value


def status_message(data: bytes) -> tuple[str, int] | None:
    """(message, code) of a metav1.Status answered in protobuf (a refused request's body), or
    None when ``data`` is not one."""
    if not data.startswith(MAGIC):
        return None
    try:
        unknown = _fields(data[len(MAGIC) :])
        raw = unknown.get(2)
        if not isinstance(raw, bytes):
            return None
        status = _fields(raw)
    except (IndexError, ValueError):
        return None
    message, code = status.get(3, b""), status.get(6, 0)
    if not isinstance(message, bytes) or not isinstance(code, int):
        return None
    return message.decode("utf-8", "replace"), code


def _fields(data: bytes) -> dict[int, bytes | int]:
    """A message's top-level fields (the last of each number)."""
    return dict(_all_fields(data))


def _all_fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """A message's top-level fields in order (a map's entries repeat their number): varints and
    length-delimited bytes; ValueError for any other wire type."""
    out: list[tuple[int, bytes | int]] = []
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _read_varint(data, i)
            if i + size > len(data):
                raise ValueError("truncated")
            out.append((number, data[i : i + size]))
            i += size
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
