"""Read a cluster from files of Kubernetes objects, for simulation without an API server.

The files are what ``kubectl get -o yaml`` or ``-o json`` prints: YAML streams (several documents,
empty ones ignored), JSON, and ``kind: List`` / ``PodList`` / ... wrappers, whose items often omit
``kind`` (:mod:`rulesched.simulate.documents` reads them, one object at a time). The path ``-``
(given once) is standard input, named ``<stdin>`` in messages. Nodes, Pods,
PodDisruptionBudgets, PriorityClasses and Namespaces are decoded, pod groups (scheduler-plugins'
``scheduling.x-k8s.io`` PodGroups, the workload API's ``scheduling.k8s.io`` PodGroups and
CompositePodGroups, whose priorities resolve at the end like pods'; Workloads are checked and
skipped, as kube-scheduler reads only the PodGroups: :mod:`rulesched.model.groups`), Services, ReplicaSets,
StatefulSets and ReplicationControllers for their selectors (system default spreading,
:mod:`rulesched.model.workloads`), and PersistentVolumes, PersistentVolumeClaims, StorageClasses
and CSINodes for the volume filters, and Dynamic Resource Allocation's DeviceClasses,
ResourceClaims, ResourceClaimTemplates and ResourceSlices (``resource.k8s.io/v1``); other kinds are counted into one warning, since a dump of a
namespace holds Deployments, ConfigMaps and more that scheduling does not need. Objects are
decoded as they are read and their raw form dropped, so memory holds the decoded cluster, not
the files' trees. A pod that has no ``spec.priority`` (or no ``spec.preemptionPolicy``) yet waits
for the end, when every PriorityClass of every file is known, so ``priorityClassName`` resolves
whatever the order; pods keep their file order. A pending pod's claims to be made from
ResourceClaimTemplates are made, as the resourceclaim controller would have
(:mod:`rulesched.semantics.dra_claims`). Finished pods (Succeeded, Failed) hold no
resources and are dropped. A pod bound to a node the files do not hold is an error, or, for dumps
of a live cluster (``kubectl get pods -A`` lists pods on nodes just deleted), set aside in
:attr:`ClusterObjects.skipped_pods` when asked to. Objects the API server would have refused
(names that are not DNS names, quantities beyond 2^63-1, pods without containers) are refused.

Every problem is an :class:`~rulesched.errors.InputError` of one line naming the file (and for
YAML syntax the line and column), so the command line can print it as is.

Speed matters: a 5,000-node, 11,000-pod dump must load well within two seconds. Hence JSON goes
through msgspec; YAML through libyaml's parser; one memo shares equal parts between pods; and
the garbage collector is paused while the load builds its hundreds of thousands of containers
(none of them cyclic), which alone more than halves the time.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO

from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError, ObjectError
from rulesched.model.decode import (
    decode_namespace,
    decode_node,
    decode_pdb,
    decode_pod,
    decode_priority_class,
)
from rulesched.model.decode_dra import (
    decode_device_class,
    decode_device_taint_rule,
    decode_resource_claim,
    decode_resource_claim_template,
    decode_resource_slice,
)
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.dra import EMPTY_DRA, DeviceTaintRule, DraState
from rulesched.model.fields import Memo
from rulesched.model.groups import (
    POD_GROUP_API,
    WORKLOAD_GROUP,
    PodGroup,
    decode_composite_pod_group,
    decode_pod_group,
    decode_workload,
)
from rulesched.model.load import LoadSnapshot
from rulesched.model.objects import Namespace, Node, Pod, PodDisruptionBudget, PriorityClass
from rulesched.model.storage import EMPTY_STORAGE, StorageState
from rulesched.model.workloads import (
    CONTROLLER_KINDS,
    NO_WORKLOADS,
    Controller,
    Service,
    Workloads,
    decode_controller,
    decode_service,
)
from rulesched.semantics.dra_claims import claims_from_templates
from rulesched.semantics.dra_taint_rules import TaintedSlices
from rulesched.simulate.documents import read_file, read_objects

_STORAGE_KINDS = ("PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode")
# DRA's kinds, each with the DraState map it goes to; read from resource.k8s.io/v1 (and v1beta2,
# the same shape); v1beta1's older shape is refused with a message.
_DRA_KINDS = {
    "DeviceClass": "classes",
    "ResourceClaim": "claims",
    "ResourceClaimTemplate": "templates",
    "ResourceSlice": "slices",
}
_DRA_GROUP = "resource.k8s.io"
_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"  # the path that means standard input
STDIN_NAME = "<stdin>"  # its name in messages


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
    groups: tuple[PodGroup, ...] = ()  # pod groups (gangs): PodGroups of both APIs, CompositePodGroups
    dra: DraState = EMPTY_DRA  # DeviceClasses, ResourceClaims, their templates, ResourceSlices

    @property
    def running_pods(self) -> tuple[Pod, ...]:
        """Pods bound to a node: they hold its resources."""
        return tuple(p for p in self.pods if p.node_name)

    @property
    def pending_pods(self) -> tuple[Pod, ...]:
        """Pods waiting for the scheduler."""
        return tuple(p for p in self.pods if not p.node_name)

    def store(
        self, *, running: Sequence[Pod] | None = None, provision: bool = False, load: LoadSnapshot | None = None
    ) -> ClusterStore:
        """A store holding these objects: the running pods (or ``running``, in their place), the
        budgets, namespaces, workloads and storage; ``provision``: claims may be provisioned
        (simulate's VolumeBinding); ``load``: measured node load."""
        return ClusterStore.build(
            self.nodes,
            self.running_pods if running is None else running,
            self.pdbs,
            {ns.name: ns.labels for ns in self.namespaces},
            self.workloads,
            storage=self.storage,
            provision=provision,
            load=load,
            dra=self.dra,
        )


def load_cluster(
    paths: Sequence[str | Path],
    *,
    skip_missing_nodes: bool = False,
    stdin: BinaryIO | None = None,
    edit: Callable[[str, Any], list[Any]] | None = None,
) -> ClusterObjects:
    """Load and decode the objects in ``paths`` (files, or directories of ``*.yaml``, ``*.yml``
    and ``*.json``; the string ``"-"`` is ``stdin``, by default :data:`sys.stdin`); raise
    :class:`InputError` on the first problem. A pod bound to a node not loaded is one, unless
    ``skip_missing_nodes``: then it goes to :attr:`ClusterObjects.skipped_pods`. ``edit``:
    what each object read becomes before it is decoded (``simulate --apply``: none, itself
    changed, or it and copies; :mod:`rulesched.simulate.apply`)."""
    if isinstance(paths, str | Path):  # one path given bare: not a sequence of characters
        paths = [paths]
    if sum(1 for p in paths if _is_stdin(p)) > 1:
        raise InputError(f"{STDIN_NAME}: '{STDIN}' given more than once; standard input can be read only once")
    collecting = gc.isenabled()
    gc.disable()
    try:
        loading = _Loading()
        for path in _expand(paths):
            if path is None:
                source, found = STDIN_NAME, read_objects(_read_stdin(stdin), STDIN_NAME, False)
            else:
                source, found = str(path), read_file(path, str(path))
            for _, kind, obj in found:
                if edit is None:
                    loading.add(kind, obj, source)
                else:
                    for changed in edit(kind, obj):
                        loading.add(kind, changed, source)
        return loading.finish(skip_missing_nodes)
    finally:
        if collecting:
            gc.enable()


def _api_group(obj: Any) -> str:
    """The API group of an object's ``apiVersion`` (PodGroup is a kind of several projects)."""
    version = obj.get("apiVersion") if isinstance(obj, dict) else None
    return version.split("/")[0] if isinstance(version, str) and "/" in version else ""


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


def _duplicate(kind: str, name: str, source: str, first: str) -> ObjectError:
    err = ObjectError(f"duplicate {kind} {name} (first in {first})", source=source)
    err.obj = f"{kind} {name}"
    return err


_Pending = tuple[str, dict[str, Any]]  # a pod decoded once every PriorityClass is known: (source, raw)


class _Loading:
    """The objects decoded so far, in file order, and what the end of the load resolves: pods
    waiting for PriorityClasses, pods' nodes, duplicates."""

    def __init__(self) -> None:
        self.memo: Memo = {}
        self.seen: dict[tuple[str, str], str] = {}  # (kind, name) -> the file it came from
        self.classes: dict[str, PriorityClass] = {}
        self.namespaces: list[Namespace] = []
        self.nodes: list[Node] = []
        self.pdbs: list[PodDisruptionBudget] = []
        self.pods: list[tuple[str, Pod | _Pending]] = []  # (source, pod or raw pod)
        self.services: list[Service] = []
        self.controllers: dict[str, list[Controller]] = {kind: [] for kind in CONTROLLER_KINDS}
        self.storage: dict[str, dict[str, Any]] = {kind: {} for kind in _STORAGE_KINDS}
        self.skipped: Counter[str] = Counter()
        self.groups: list[PodGroup] = []
        self.dra: dict[str, dict[str, Any]] = {name: {} for name in _DRA_KINDS.values()}
        self.taint_rules: dict[str, DeviceTaintRule] = {}  # applied to the slices' devices at the end
        self.native_groups: list[tuple[str, str, Any]] = []  # (source, kind, raw): decoded with the classes

    def unique(self, kind: str, name: str, source: str) -> None:
        first = self.seen.get((kind, name))
        if first is not None:
            raise _duplicate(kind, name, source, first)
        self.seen[kind, name] = source

    def add(self, kind: str, obj: Any, source: str) -> None:
        if kind == "Pod":
            if _needs_classes(obj):
                self.pods.append((source, (source, obj)))
            else:
                self.pods.append((source, self._pod(obj, source, None)))
        elif kind == "Node":
            node = decode_node(obj, source, memo=self.memo)
            self.unique("Node", node.name, source)
            self.nodes.append(node)
        elif kind == "PriorityClass":
            pc = decode_priority_class(obj, source)
            self.unique("PriorityClass", pc.name, source)
            self.classes[pc.name] = pc
        elif kind == "Namespace":
            namespace = decode_namespace(obj, source)
            self.unique("Namespace", namespace.name, source)
            self.namespaces.append(namespace)
        elif kind == "PodDisruptionBudget":
            pdb = decode_pdb(obj, source)
            self.unique("PodDisruptionBudget", pdb.key, source)
            self.pdbs.append(pdb)
        elif kind == "Service":
            service = decode_service(obj, source)
            self.unique("Service", service.key, source)
            self.services.append(service)
        elif kind in CONTROLLER_KINDS:
            controller = decode_controller(obj, kind, source)
            self.unique(kind, controller.key, source)
            self.controllers[kind].append(controller)
        elif kind == "PodGroup" and _api_group(obj) == POD_GROUP_API.split("/")[0]:
            group = decode_pod_group(obj, source)
            self.unique("PodGroup", group.key, source)
            self.groups.append(group)
        elif kind in ("PodGroup", "CompositePodGroup") and _api_group(obj) == WORKLOAD_GROUP:
            self.native_groups.append((source, kind, obj))
        elif kind == "Workload" and _api_group(obj) == WORKLOAD_GROUP:
            decode_workload(obj, source)  # (checked: the scheduler reads its PodGroups, never it)
            self.skipped[kind] += 1
        elif kind in _STORAGE_KINDS:
            value = _STORAGE_DECODERS[kind](obj, source)
            key = value.key if kind == "PersistentVolumeClaim" else value.name
            self.unique(kind, key, source)
            self.storage[kind][key] = value
        elif kind in _DRA_KINDS and _api_group(obj) == _DRA_GROUP:
            self._dra(kind, obj, source)
        elif kind == "DeviceTaintRule" and _api_group(obj) == _DRA_GROUP:
            rule = decode_device_taint_rule(obj, source)
            self.unique(kind, rule.name, source)
            self.taint_rules[rule.name] = rule
        else:
            self.skipped[kind] += 1

    def _dra(self, kind: str, obj: Any, source: str) -> None:
        if obj.get("apiVersion") == f"{_DRA_GROUP}/v1beta1":
            name = obj.get("metadata", {}).get("name", "") if isinstance(obj.get("metadata"), dict) else ""
            raise ObjectError(
                f"{_DRA_GROUP}/v1beta1 is not read (its requests and devices have another shape): "
                f"give the object as {_DRA_GROUP}/v1 (kubectl get {kind.lower()}s.v1.{_DRA_GROUP} -o yaml)",
                source=source,
                obj=f"{kind} {name}".strip(),
                field="apiVersion",
            )
        value = _DRA_DECODERS[kind](obj, source)
        key = value.key if kind in ("ResourceClaim", "ResourceClaimTemplate") else value.name
        self.unique(kind, key, source)
        self.dra[_DRA_KINDS[kind]][key] = value

    def _pod(self, obj: Any, source: str, classes: Mapping[str, PriorityClass] | None) -> Pod:
        pod = decode_pod(obj, source, classes, memo=self.memo, require_containers=True)
        self.unique("Pod", pod.key, source)
        return pod

    def finish(self, skip_missing_nodes: bool) -> ClusterObjects:
        for source, kind, obj in self.native_groups:
            decode = decode_pod_group if kind == "PodGroup" else decode_composite_pod_group
            group = decode(obj, source, self.classes)
            self.unique(kind, group.key, source)
            self.groups.append(group)
        node_names = {node.name for node in self.nodes}
        pods = []
        orphans = []
        for source, entry in self.pods:
            pod = entry if isinstance(entry, Pod) else self._pod(entry[1], source, self.classes)
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
            if not pod.node_name and pod.resource_claims:  # (the resourceclaim controller's part)
                pod, made = claims_from_templates(pod, self.dra["templates"], self.dra["claims"])
                for claim in made:
                    self.dra["claims"][claim.key] = claim
            pods.append(pod)
        return ClusterObjects(
            nodes=tuple(self.nodes),
            pods=tuple(pods),
            pdbs=tuple(self.pdbs),
            priority_classes=MappingProxyType(self.classes),
            namespaces=tuple(self.namespaces),
            warnings=_skipped_warning(self.skipped),
            skipped_pods=tuple(orphans),
            workloads=self._workloads(),
            storage=self._storage(),
            groups=tuple(self.groups),
            dra=self._dra_state(),
        )

    def _dra_state(self) -> DraState:
        d = self.dra
        if not any(d.values()):
            return EMPTY_DRA
        slices = TaintedSlices().load(d["slices"], self.taint_rules) if self.taint_rules else d["slices"]
        return DraState(d["classes"], d["claims"], d["templates"], slices)

    def _workloads(self) -> Workloads:
        """The Services and controllers, whose selectors system default spreading reads."""
        controllers = [c for kind in CONTROLLER_KINDS for c in self.controllers[kind]]
        if not self.services and not controllers:
            return NO_WORKLOADS
        return Workloads.of(self.services, controllers)

    def _storage(self) -> StorageState:
        """The storage objects, each kind by its key (claims by namespace/name)."""
        if not any(self.storage.values()):
            return EMPTY_STORAGE
        return StorageState(*(self.storage[kind] for kind in _STORAGE_KINDS))


_STORAGE_DECODERS: Mapping[str, Callable[[object, str], Any]] = MappingProxyType(
    {
        "PersistentVolume": decode_pv,
        "PersistentVolumeClaim": decode_pvc,
        "StorageClass": decode_storage_class,
        "CSINode": decode_csinode,
    }
)


_DRA_DECODERS: Mapping[str, Callable[[object, str], Any]] = MappingProxyType(
    {
        "DeviceClass": decode_device_class,
        "ResourceClaim": decode_resource_claim,
        "ResourceClaimTemplate": decode_resource_claim_template,
        "ResourceSlice": decode_resource_slice,
    }
)


def _needs_classes(obj: Any) -> bool:
    """Whether decoding a pod reads PriorityClasses: a pod read from the API has its priority
    and preemption policy set, so decodes at once; one written by hand may not."""
    spec = obj.get("spec") if type(obj) is dict else None
    return type(spec) is not dict or spec.get("priority") is None or spec.get("preemptionPolicy") is None


def _skipped_warning(skipped: Counter[str]) -> tuple[str, ...]:
    total = sum(skipped.values())
    if not total:
        return ()
    kinds = ", ".join(sorted(skipped))
    if total == 1:
        return (f"skipped 1 object of another kind ({kinds})",)
    return (f"skipped {total} objects of other kinds ({kinds})",)
