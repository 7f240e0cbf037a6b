"""Cluster files' bytes to the Kubernetes objects in them, one at a time, within bounded memory.

What ``kubectl get -o yaml`` prints is usually one document, a ``kind: List`` whose ``items``
hold every object, and a dump of a big cluster runs to hundreds of megabytes. Building that
document's whole tree first (and PyYAML's node graph under it) took 38 times the file's size, so
both readers here hand out the items one by one: YAML by building each item of the top-level
``items`` sequence on its own (:mod:`rulesched.yamlreader`; a file past 64 KiB is parsed
from the disk as it is read), JSON by splitting the document with msgspec into the raw bytes of
each item and decoding one item at a time. Like kubectl (``Unstructured.IsList``), any document
with a top-level ``items`` list is a list; items without a ``kind`` take the list's (``PodList``
-> ``Pod``), known once the document ends (kubectl prints ``kind`` after ``items``).

Hostile input is bounded: YAML aliases may not expand the document beyond what go-yaml (kubectl's
YAML decoder) allows -- more than 100 nodes by alias and above 99% of a document up to 400 000
nodes, falling to 10% at 4 000 000 ("excessive aliasing"); a recursive alias, an integer of more
than 64 characters and nesting deeper than the interpreter's stack are refused; so are JSON
numbers msgspec cannot hold. Every problem is an :class:`~rulesched.errors.InputError` of one
line naming the file and, where the parser knows it, line and column.
Next stage: :mod:`rulesched.simulate.load` decodes each object as it comes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import yaml
from yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent, StreamEndEvent

from rulesched.errors import InputError
from rulesched.model.fields import describe
from rulesched.model.utf8 import first_invalid_utf8
from rulesched.yamlreader import PLAIN_MAP, Unusual, YamlReader, one_line, yaml_problem

Found = tuple[str, str, Any]  # (label, kind, object): "document 1 (line 1): items[3]", "Pod", {...}

_NON_SPACE = re.compile(rb"[^ \t\r\n]")
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16 = (b"\xff\xfe", b"\xfe\xff")  # byte order marks
_HEAD = 1 << 16  # bytes of a file looked at before choosing how to read it

# -- the whole file ---------------------------------------------------------------------------


def read_file(file: Path, path: str) -> Iterator[Found]:
    """Every object in a file (``path`` names it): JSON when it is named ``.json`` or starts
    with ``{`` or ``[`` and parses as JSON, else YAML, which is parsed from the disk as it is
    read rather than from a copy of the whole file in memory."""
    try:
        with file.open("rb") as stream:
            head = stream.read(_HEAD)
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    json_only = file.suffix.lower() == ".json"
    text = head.removeprefix(_UTF8_BOM)
    first = _NON_SPACE.search(text)
    if len(head) < _HEAD or json_only or head[:2] in _UTF16 or first is None or text[first.start()] in b"{[":
        yield from read_objects(_read(file, path), path, json_only)
    else:
        yield from _yaml_objects(lambda: file.open("rb"), path)


def _read(file: Path, path: str) -> bytes:
    try:
        return file.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None


def read_objects(data: bytes, path: str, json_only: bool) -> Iterator[Found]:
    """Every object in one file's bytes (``path`` names it in labels and errors): JSON when
    ``json_only`` (a ``.json`` file) or when it starts with ``{`` or ``[`` and parses as JSON,
    else YAML."""
    data = _utf8(data, path)
    first = _NON_SPACE.search(data)
    if first is None:
        what = "input" if path == "<stdin>" else "file"
        raise InputError(f"{path}: empty {what}; expected Kubernetes objects")
    if json_only or data[first.start() : first.start() + 1] in (b"{", b"["):
        try:
            documents = _json_documents(data, path)
        except _NotJson:
            if json_only:
                raise InputError(_json_problem(data, path)) from None
        else:
            yield from documents
            return
    yield from _yaml_objects(data, path)


def _utf8(data: bytes, path: str) -> bytes:
    """The bytes as UTF-8: kubectl's output redirected by Windows PowerShell is UTF-16 with a
    byte order mark; a UTF-8 byte order mark is dropped."""
    if data[:2] in _UTF16:
        try:
            return data.decode("utf-16").encode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"{path}: not a text file (no UTF-16 text: byte {err.start} is invalid)") from None
    return data[3:] if data.startswith(_UTF8_BOM) else data


# -- JSON -------------------------------------------------------------------------------------


class _NotJson(Exception):
    """msgspec could not read the document: the standard library's parser says why, or the
    text is YAML."""


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
_ANY = msgspec.json.Decoder()


def _json_documents(data: bytes, path: str) -> Iterator[Found]:
    """The objects of a JSON document: a List's items decoded one at a time. Raises _NotJson
    (before yielding anything) when the document does not parse."""
    try:
        top = _TOP.decode(data)
        rest = {key: _ANY.decode(raw) for key, raw in top.items() if key != "items"}
        items = _ITEMS.decode(top["items"]) if "items" in top else None
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        # not a mapping, a number msgspec cannot hold, items not a list, ...: the standard
        # library reads it whole, or says where it is wrong
        try:
            whole = json.loads(data)
        except (ValueError, RecursionError):
            raise _NotJson from None
        return _objects(whole, f"{path}: document 1")
    return _json_items(rest, items, data, path)


def _json_items(rest: dict[str, Any], items: list[msgspec.Raw] | None, data: bytes, path: str) -> Iterator[Found]:
    label = f"{path}: document 1"
    if items is None:
        yield from _objects(rest, label)
        return
    kind = _list_kind(rest, label)
    for i, raw in enumerate(items):
        item_label = f"{label}: items[{i}]"
        try:
            item = _ANY.decode(raw)
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as err:
            # A string that is not UTF-8 (splitting into items looks at no string's bytes):
            # msgspec 0.23 says so with a DecodeError, older releases with a UnicodeDecodeError.
            bad = None if isinstance(err, msgspec.ValidationError | RecursionError) else first_invalid_utf8(data)
            if bad is not None:
                raise InputError(f"{path}: not a text file (no UTF-8 text: byte {bad} is invalid)") from None
            item = _json_item_slowly(bytes(raw), item_label)
        yield from _objects(item, item_label, kind)


def _json_item_slowly(raw: bytes, label: str) -> Any:
    """An item msgspec refused (a number out of its range, nesting too deep): the standard
    library reads infinities and long integers, and the decoders say which field is wrong."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise InputError(f"{label}: nested too deeply") from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise InputError(f"{label}: invalid JSON: {str(err).split(':')[0]}") from None


def _json_problem(data: bytes, path: str) -> str:
    """Why a file named ``.json`` is not JSON, located by the standard library's parser."""
    bad = first_invalid_utf8(data)
    if bad is not None:
        return f"{path}: not a text file (no UTF-8 text: byte {bad} is invalid)"
    try:
        json.loads(data)
    except json.JSONDecodeError as err:
        return f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}"
    except RecursionError:
        return f"{_deepest(data, path)}: invalid JSON: nested too deeply"
    except ValueError as err:
        return f"{path}: invalid JSON: {str(err).split(':')[0]}"
    return f"{path}: invalid JSON"  # pragma: no cover - msgspec and json disagree otherwise


_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_DEEP = 500  # levels: far beyond any Kubernetes object, well within what the parsers manage


def _deepest(data: bytes, path: str) -> str:
    """``path:line:column`` of the bracket that opens level ``_DEEP`` (strings skipped)."""
    depth = 0
    for token in _JSON_TOKEN.finditer(data):
        first = token.group()[:1]
        if first in (b"[", b"{"):
            depth += 1
            if depth == _DEEP:
                offset = token.start()
                line = data.count(b"\n", 0, offset) + 1
                column = offset - data.rfind(b"\n", 0, offset)
                return f"{path}:{line}:{column}"
        elif first in (b"]", b"}"):
            depth -= 1
    return path


# -- YAML -------------------------------------------------------------------------------------


def _yaml_objects(source: bytes | Callable[[], BinaryIO], path: str) -> Iterator[Found]:
    """The objects of a YAML stream (bytes, or a function opening the file): built straight
    from the parser's events, or, once that meets an anchor, an alias or a tag, composed from
    the start (skipping what was handed out)."""
    handed = 0
    try:
        for found in _yaml_pass(source, path, fast=True):
            handed += 1
            yield found
        return
    except Unusual:
        pass
    for n, found in enumerate(_yaml_pass(source, path, fast=False)):
        if n >= handed:
            yield found


def _yaml_pass(source: bytes | Callable[[], BinaryIO], path: str, fast: bool) -> Iterator[Found]:
    stream = source if isinstance(source, bytes) else source()
    reader = YamlReader(stream, fast)
    try:
        reader.get_event()  # StreamStart
        number = 0
        while not reader.check_event(StreamEndEvent):
            number += 1
            line = reader.peek().start_mark.line + 1
            reader.get_event()  # DocumentStart
            label = f"{path}: document {number} (line {line})"
            yield from _yaml_document(reader, label)
            reader.get_event()  # DocumentEnd
            reader._start_document()
    except yaml.MarkedYAMLError as err:
        raise InputError(yaml_problem(err, path)) from None
    except yaml.YAMLError as err:  # ReaderError: bytes that are not UTF-8, characters YAML forbids
        data = stream if isinstance(stream, bytes) else _read(Path(stream.name), path)
        raise InputError(_reader_problem(data, path, err)) from None
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None
    except RecursionError:
        where = path
        try:
            mark = reader.peek().start_mark
            where = f"{path}:{mark.line + 1}:{mark.column + 1}"
        except (yaml.YAMLError, RecursionError):  # pragma: no cover - the parser itself failed
            pass
        raise InputError(f"{where}: invalid YAML: nested too deeply") from None
    finally:
        reader.dispose()
        if not isinstance(stream, bytes):
            stream.close()
    if not reader.documents:
        raise InputError(f"{path}: no Kubernetes objects found (only comments or '---')")


def _yaml_document(reader: YamlReader, label: str) -> Iterator[Found]:
    """The objects of one document whose DocumentStart was read; its DocumentEnd is left.
    A top-level mapping is read key by key, and its ``items`` item by item."""
    event = reader.peek()
    if not isinstance(event, MappingStartEvent) or event.anchor is not None or event.tag not in PLAIN_MAP:
        doc = reader.next_value()
        if doc is not None:
            reader.documents += 1
            yield from _objects(doc, label)
        return
    reader.documents += 1
    reader.get_event()  # MappingStart
    rest: dict[Any, Any] = {}
    kindless: list[tuple[str, Any]] = []  # items waiting for the list's kind
    listed = False
    merged: list[Any] = []  # values of merge keys (<<: *defaults)
    while not reader.check_event(MappingEndEvent):
        key, merge = reader.next_key()
        if merge:
            merged.append(reader.next_value())
        elif key == "items" and reader.check_event(SequenceStartEvent) and reader.peek().anchor is None:
            if listed:
                raise InputError(f"{label}: items: given twice")
            listed = True
            reader.get_event()  # SequenceStart
            index = 0
            while not reader.check_event(SequenceEndEvent):
                item = reader.next_value()
                item_label = f"{label}: items[{index}]"
                index += 1
                if type(item) is dict and type(item.get("kind")) is str and item["kind"]:
                    yield from _objects(item, item_label)
                else:
                    kindless.append((item_label, item))
            reader.get_event()  # SequenceEnd
        else:
            value = reader.next_value()
            try:
                rest[key] = value
            except TypeError:  # a key YAML allows and a mapping cannot hold
                raise InputError(f"{label}: a key that is {describe(key)}") from None
    reader.get_event()  # MappingEnd
    _merge(rest, merged, label)
    if not listed:
        yield from _objects(rest, label)
        return
    kind = _list_kind(rest, label)
    for item_label, item in kindless:
        yield from _objects(item, item_label, kind)


def _merge(into: dict[Any, Any], merged: list[Any], label: str) -> None:
    """Merge keys at the top level as YAML's merge type has them: keys given explicitly win,
    then the first mapping merged that has the key."""
    for value in merged:
        for mapping in value if type(value) is list else [value]:
            if type(mapping) is not dict:
                raise InputError(f"{label}: <<: expected a mapping or a list of mappings to merge")
            for key, item in mapping.items():
                into.setdefault(key, item)


# -- lists ------------------------------------------------------------------------------------


def _list_kind(top: dict[Any, Any], label: str) -> str:
    """The kind of a document holding ``items``: a string (``List``, ``PodList``, ...)."""
    kind = top.get("kind")
    if type(kind) is not str or not kind:
        problem = "missing" if kind is None else f"expected a string, got {describe(kind)}"
        raise InputError(f"{label}: kind: {problem}")
    return kind


def _objects(doc: Any, label: str, list_kind: str = "") -> Iterator[Found]:
    """``(label, kind, object)`` for a document or item, unwrapping lists (anything with an
    ``items`` list, as kubectl's ``IsList``; a ``*List`` with ``items: null`` is empty); an
    item of a ``PodList`` without ``kind`` is a Pod."""
    if type(doc) is not dict:
        raise InputError(f"{label} is {describe(doc)}, not an object (a mapping with a kind)")
    kind = doc.get("kind")
    if kind is None and list_kind.endswith("List") and list_kind != "List":
        kind = list_kind[: -len("List")]
    items = doc.get("items")
    if type(items) is list or (items is None and "items" in doc and type(kind) is str and kind.endswith("List")):
        kind = _list_kind(doc, label)
        for i, item in enumerate(items or ()):
            yield from _objects(item, f"{label}: items[{i}]", kind)
        return
    if type(kind) is not str or not kind:
        problem = "missing" if kind is None else f"expected a string, got {describe(kind)}"
        raise InputError(f"{label}: kind: {problem}")
    if kind.endswith("List") and "items" in doc:
        raise InputError(f"{label}: items: expected a list, got {describe(items)}")
    yield label, kind, doc


def _reader_problem(data: bytes, path: str, err: yaml.YAMLError) -> str:
    position = getattr(err, "position", None)
    where = path
    if isinstance(position, int):
        bad = first_invalid_utf8(data)
        if bad is not None and bad <= position + 4:
            return f"{path}: not a text file (no UTF-8 text: byte {bad} is invalid)"
        line = data.count(b"\n", 0, position) + 1
        column = position - data.rfind(b"\n", 0, position)
        where = f"{path}:{line}:{column}"
    return f"{where}: invalid YAML: {one_line(str(err))}"
