"""Read a cluster from files of Kubernetes objects, for simulation without an API server.

The files are what ``kubectl get -o yaml`` or ``-o json`` prints: YAML streams (several documents,
empty ones ignored), JSON, and ``kind: List`` / ``PodList`` / ... wrappers, whose items often omit
``kind``. The path ``-`` (given once) is standard input, named ``<stdin>`` in messages. Nodes,
Pods, PodDisruptionBudgets, PriorityClasses and Namespaces are decoded, Services, ReplicaSets,
StatefulSets and ReplicationControllers for their selectors (system default spreading,
:mod:`rulesched.model.workloads`), and PersistentVolumes, PersistentVolumeClaims, StorageClasses
and CSINodes for the volume filters; other kinds are counted into one warning, since a dump of a
namespace holds Deployments, ConfigMaps and more that scheduling does not need. PriorityClasses
are decoded before any pod, across all files, so
``priorityClassName`` resolves whatever the order. Finished pods (Succeeded, Failed) hold no
resources and are dropped. A pod bound to a node the files do not hold is an error, or, for dumps
of a live cluster (``kubectl get pods -A`` lists pods on nodes just deleted), set aside in
:attr:`ClusterObjects.skipped_pods` when asked to.

Every problem is an :class:`~rulesched.errors.InputError` of one line naming the file (and for
YAML syntax the line and column), so the command line can print it as is.

Speed matters: a 5,000-node, 11,000-pod dump must load well within two seconds. Hence JSON goes
through :mod:`json`; YAML through libyaml's parser; one memo shares equal parts between pods; and
the garbage collector is paused while the load builds its hundreds of thousands of containers
(none of them cyclic), which alone more than halves the time.
"""

from __future__ import annotations

import gc
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from rulesched.errors import InputError, ObjectError
from rulesched.model.decode import (
    decode_namespace,
    decode_node,
    decode_pdb,
    decode_pod,
    decode_priority_class,
)
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.fields import Memo, describe
from rulesched.model.objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
from rulesched.model.storage import EMPTY_STORAGE, StorageState
from rulesched.model.workloads import CONTROLLER_KINDS, NO_WORKLOADS, Workloads, decode_controller, decode_service

_STORAGE_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")
_KINDS = (
    "PriorityClass",
    "Namespace",
    "Node",
    "PodDisruptionBudget",
    "Pod",
    "Service",
    *CONTROLLER_KINDS,
    *_STORAGE_KINDS,
)
_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"  # the path that means standard input
STDIN_NAME = "<stdin>"  # its name in messages

try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _Loader: Any = yaml.SafeLoader
else:

    class _CLoader(CParser, Composer, SafeConstructor, Resolver):
        """libyaml's parser with PyYAML's own composer. ``yaml.CSafeLoader`` composes in C by
        recursion and crashes the interpreter (SIGSEGV) on deeply nested input such as a line of
        100,000 ``[``; the Python composer raises RecursionError instead, at about the same
        speed, since constructing the values dominates either way."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        check_node = Composer.check_node
        get_node = Composer.get_node
        get_single_node = Composer.get_single_node

    _Loader = _CLoader


@dataclass(frozen=True, slots=True)
class ClusterObjects:
    """Everything a simulation starts from. ``pods`` holds bound pods (``spec.nodeName`` set,
    every one on a loaded node) and pending ones, in file order; ``skipped_pods`` the pods bound
    to nodes that were not loaded, when :func:`load_cluster` was asked to skip them."""

    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=lambda: MappingProxyType({}))
    namespaces: tuple[Namespace, ...] = ()
    warnings: tuple[str, ...] = ()
    skipped_pods: tuple[Pod, ...] = ()
    workloads: Workloads = NO_WORKLOADS  # Services and controllers: their selectors
    storage: StorageState = EMPTY_STORAGE

    @property
    def running_pods(self) -> tuple[Pod, ...]:
        """Pods bound to a node: they hold its resources."""
        return tuple(p for p in self.pods if p.node_name)

    @property
    def pending_pods(self) -> tuple[Pod, ...]:
        """Pods waiting for the scheduler."""
        return tuple(p for p in self.pods if not p.node_name)


def load_cluster(
    paths: Sequence[str | Path], *, skip_missing_nodes: bool = False, stdin: BinaryIO | None = None
) -> ClusterObjects:
    """Load and decode the objects in ``paths`` (files, or directories of ``*.yaml``, ``*.yml``
    and ``*.json``; the string ``"-"`` is ``stdin``, by default :data:`sys.stdin`); raise
    :class:`InputError` on the first problem. A pod bound to a node not loaded is one, unless
    ``skip_missing_nodes``: then it goes to :attr:`ClusterObjects.skipped_pods`."""
    if isinstance(paths, str | Path):  # one path given bare: not a sequence of characters
        paths = [paths]
    if sum(1 for p in paths if _is_stdin(p)) > 1:
        raise InputError(f"{STDIN_NAME}: '{STDIN}' given more than once; standard input can be read only once")
    collecting = gc.isenabled()
    gc.disable()
    try:
        found: dict[str, list[tuple[str, Any]]] = {kind: [] for kind in _KINDS}
        skipped: Counter[str] = Counter()
        for path in _expand(paths):
            if path is None:
                source, data, suffix = STDIN_NAME, _read_stdin(stdin), ""
            else:
                source, data, suffix = str(path), _read(path), path.suffix.lower()
            for label, doc in _documents(data, source, suffix):
                for kind, obj in _objects(doc, f"{source}: {label}"):
                    if kind in found:
                        found[kind].append((source, obj))
                    else:
                        skipped[kind] += 1
        return _decode(found, skipped, skip_missing_nodes)
    finally:
        if collecting:
            gc.enable()


def _is_stdin(given: str | Path) -> bool:
    return isinstance(given, str) and given == STDIN  # Path("-") stays a file of that name


def _expand(paths: Sequence[str | Path]) -> Iterator[Path | None]:
    """The files to read, in order; ``None`` for standard input."""
    for given in paths:
        if _is_stdin(given):
            yield None
            continue
        path = Path(given)
        if path.is_dir():
            yield from sorted(p for p in path.iterdir() if p.suffix.lower() in _SUFFIXES)
        else:
            yield path


def _documents(data: bytes, path: str, suffix: str) -> list[tuple[str, Any]]:
    """The non-empty documents of one file (``path`` names it, ``suffix`` is its lower-case
    extension), each with a label (``document 2 (line 14)``)."""
    text = _text(data, path)
    start = text.lstrip()[:1]
    if not start:
        what = "input" if path == STDIN_NAME else "file"
        raise InputError(f"{path}: empty {what}; expected Kubernetes objects")
    if suffix == ".json":
        return [("document 1", _json(text, path))]
    if start in ("{", "["):
        try:
            return [("document 1", json.loads(text))]
        except (ValueError, RecursionError):
            pass  # YAML in flow style, or broken: YAML's verdict names line and column
    docs = _yaml(text, path)
    if not docs:
        raise InputError(f"{path}: no Kubernetes objects found (only comments or '---')")
    return docs


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None


def _read_stdin(stream: BinaryIO | None) -> bytes:
    if stream is None:
        stdin = sys.stdin
        if stdin is None:  # started with standard input closed
            raise InputError(f"{STDIN_NAME}: cannot read: no standard input")
        buffer = getattr(stdin, "buffer", None)
        if buffer is None:  # a text stream standing in for stdin
            return stdin.read().encode("utf-8")
        stream = buffer
    try:
        return stream.read()
    except OSError as err:
        raise InputError(f"{STDIN_NAME}: cannot read: {err.strerror or err}") from None


def _text(data: bytes, path: str) -> str:
    # kubectl's output redirected by Windows PowerShell is UTF-16 with a byte order mark
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a text file (no {encoding.upper()} text: byte {err.start} is invalid)") from None


def _json(text: str, path: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid JSON: nested too deeply") from None


def _yaml(text: str, path: str) -> list[tuple[str, Any]]:
    loader = _Loader(text)
    docs: list[tuple[str, Any]] = []
    number = 0
    try:
        while loader.check_data():
            number += 1
            line = loader.peek_event().start_mark.line + 1
            doc = loader.get_data()
            if doc is not None:
                docs.append((f"document {number} (line {line})", doc))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = err.problem or "malformed"
        if err.context:
            problem += f" ({err.context})"
        raise InputError(f"{where}: invalid YAML: {_one_line(problem)}") from None
    except yaml.YAMLError as err:  # ReaderError: characters YAML does not allow
        position = getattr(err, "position", None)
        where = path
        if isinstance(position, int):
            line = text.count("\n", 0, position) + 1
            where = f"{path}:{line}:{position - text.rfind(chr(10), 0, position)}"
        raise InputError(f"{where}: invalid YAML: {_one_line(str(err))}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid YAML: nested too deeply") from None
    finally:
        loader.dispose()
    return docs


def _one_line(text: str) -> str:
    return text.splitlines()[0] if text else text


def _objects(doc: Any, label: str, list_kind: str = "") -> Iterator[tuple[str, Any]]:
    """``(kind, object)`` for a document, unwrapping ``*List`` documents; an item of a
    ``PodList`` without ``kind`` is a Pod."""
    if type(doc) is not dict:
        raise InputError(f"{label} is {describe(doc)}, not an object (a mapping with a kind)")
    kind = doc.get("kind")
    if kind is None and list_kind.endswith("List") and list_kind != "List":
        kind = list_kind[: -len("List")]
    if type(kind) is not str or not kind:
        problem = "missing" if kind is None else f"expected a string, got {describe(kind)}"
        raise InputError(f"{label}: kind: {problem}")
    if kind.endswith("List") and "items" in doc:
        items = doc["items"] or []
        if type(items) is not list:
            raise InputError(f"{label}: items: expected a list, got {describe(items)}")
        for i, item in enumerate(items):
            yield from _objects(item, f"{label}: items[{i}]", kind)
    else:
        yield kind, doc


def _duplicate(kind: str, name: str, source: str, first: str) -> ObjectError:
    err = ObjectError(f"duplicate {kind} {name} (first in {first})", source=source)
    err.obj = f"{kind} {name}"
    return err


def _decode(
    found: dict[str, list[tuple[str, Any]]], skipped: Counter[str], skip_missing_nodes: bool = False
) -> ClusterObjects:
    memo: Memo = {}
    seen: dict[tuple[str, str], str] = {}  # (kind, name) -> the file it came from

    def unique(kind: str, name: str, source: str) -> None:
        first = seen.get((kind, name))
        if first is not None:
            raise _duplicate(kind, name, source, first)
        seen[kind, name] = source

    classes: dict[str, PriorityClass] = {}
    for source, obj in found["PriorityClass"]:
        pc = decode_priority_class(obj, source)
        unique("PriorityClass", pc.name, source)
        classes[pc.name] = pc
    namespaces = []
    for source, obj in found["Namespace"]:
        namespaces.append(decode_namespace(obj, source))
        unique("Namespace", namespaces[-1].name, source)
    nodes = []
    for source, obj in found["Node"]:
        nodes.append(decode_node(obj, source, memo=memo))
        unique("Node", nodes[-1].name, source)
    pdbs = []
    for source, obj in found["PodDisruptionBudget"]:
        pdbs.append(decode_pdb(obj, source))
        unique("PodDisruptionBudget", pdbs[-1].key, source)
    node_names = {node.name for node in nodes}
    pods = []
    orphans = []
    for source, obj in found["Pod"]:
        pod = decode_pod(obj, source, classes, memo=memo)
        unique("Pod", pod.key, source)
        if pod.phase in ("Succeeded", "Failed"):
            continue
        if pod.node_name and pod.node_name not in node_names:
            if skip_missing_nodes:
                orphans.append(pod)
                continue
            raise ObjectError(
                f"node {pod.node_name!r} does not exist in the files loaded",
                source=source,
                obj=f"Pod {pod.key}",
                field="spec.nodeName",
            )
        pods.append(pod)
    workloads = _workloads(found, unique)
    return ClusterObjects(
        nodes=tuple(nodes),
        pods=tuple(pods),
        pdbs=tuple(pdbs),
        priority_classes=MappingProxyType(classes),
        namespaces=tuple(namespaces),
        warnings=_skipped_warning(skipped),
        skipped_pods=tuple(orphans),
        workloads=workloads,
        storage=_storage(found, unique),
    )


def _workloads(found: dict[str, list[tuple[str, Any]]], unique: Callable[[str, str, str], None]) -> Workloads:
    """The Services and controllers, whose selectors system default spreading reads."""
    if not found["Service"] and not any(found[kind] for kind in CONTROLLER_KINDS):
        return NO_WORKLOADS
    services = []
    for source, obj in found["Service"]:
        services.append(decode_service(obj, source))
        unique("Service", services[-1].key, source)
    controllers = []
    for kind in CONTROLLER_KINDS:
        for source, obj in found[kind]:
            controllers.append(decode_controller(obj, kind, source))
            unique(kind, controllers[-1].key, source)
    return Workloads.of(services, controllers)


def _storage(found: dict[str, list[tuple[str, Any]]], unique: Any) -> StorageState:
    """The storage objects, each kind by its key (claims by namespace/name)."""
    if not any(found[kind] for kind in _STORAGE_KINDS):
        return EMPTY_STORAGE
    maps: list[dict[str, Any]] = []
    decoders: tuple[Callable[[object, str], Any], ...] = (decode_pv, decode_pvc, decode_storage_class, decode_csinode)
    for kind, decode in zip(_STORAGE_KINDS, decoders, strict=True):
        objects: dict[str, Any] = {}
        for source, obj in found[kind]:
            value = decode(obj, source)
            key = value.key if kind == "PersistentVolumeClaim" else value.name
            unique(kind, key, source)
            objects[key] = value
        maps.append(objects)
    return StorageState(*maps)


def _skipped_warning(skipped: Counter[str]) -> tuple[str, ...]:
    total = sum(skipped.values())
    if not total:
        return ()
    kinds = ", ".join(sorted(skipped))
    if total == 1:
        return (f"skipped 1 object of another kind ({kinds})",)
    return (f"skipped {total} objects of other kinds ({kinds})",)
