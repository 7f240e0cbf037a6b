"""Services and pod controllers (ReplicaSets, StatefulSets, ReplicationControllers): only what
system default topology spreading needs of them — which pods they select.

kube-scheduler spreads a pod that has no topology spread constraints of its own by default
constraints whose selector is the union of the selectors of the Services selecting the pod and
of the pod's controlling ReplicaSet, StatefulSet or ReplicationController (see
:mod:`rulesched.lang.builtins.spread_defaults`). :class:`Workloads` holds those selectors, by
namespace, as one immutable value: a change makes a new one, so its identity versions every
answer computed from it. Deployments, Jobs and the rest are not needed: a Deployment's pods are
owned by its ReplicaSets.
Next stage: :mod:`rulesched.cluster.store` keeps the current :class:`Workloads`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rulesched.model.fields import get_map, get_str_map, object_metadata
from rulesched.model.names import dns1035_label
from rulesched.model.objects import EMPTY, LabelSelector
from rulesched.model.parts import label_selector

# The controller kinds upstream's DefaultSelector looks up, and the API group of each.
CONTROLLER_KINDS: Mapping[str, str] = MappingProxyType(
    {"ReplicaSet": "apps", "StatefulSet": "apps", "ReplicationController": ""}
)


@dataclass(frozen=True, slots=True)
class Service:
    name: str
    namespace: str
    # spec.selector; empty when absent (a Service without a selector selects no pod, and one
    # with an empty selector adds no label to a default selector: the same to spreading)
    selector: Mapping[str, str] = field(default_factory=lambda: EMPTY)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Controller:
    """A ReplicaSet, StatefulSet or ReplicationController. A ReplicationController's selector
    (a plain label map) is kept as ``match_labels``."""

    kind: str
    name: str
    namespace: str
    selector: LabelSelector | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, eq=False)
class Workloads:
    """Every Service (by namespace) and controller (by kind, namespace and name). Compared by
    identity: a change is a new value (:meth:`with_service` and friends)."""

    services: Mapping[str, tuple[Service, ...]] = field(default_factory=lambda: MappingProxyType({}))
    controllers: Mapping[tuple[str, str, str], Controller] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, services: Iterable[Service] = (), controllers: Iterable[Controller] = ()) -> Workloads:
        by_namespace: dict[str, list[Service]] = {}
        for s in services:
            by_namespace.setdefault(s.namespace, []).append(s)
        return cls(
            MappingProxyType({ns: tuple(found) for ns, found in by_namespace.items()}),
            MappingProxyType({(c.kind, c.namespace, c.name): c for c in controllers}),
        )

    def __bool__(self) -> bool:
        return bool(self.services or self.controllers)

    def services_in(self, namespace: str) -> tuple[Service, ...]:
        return self.services.get(namespace, ())

    def controller(self, kind: str, namespace: str, name: str) -> Controller | None:
        return self.controllers.get((kind, namespace, name))

    def with_service(self, service: Service) -> Workloads:
        """This with ``service`` added or replaced; ``self`` when it is already here as is."""
        present = self.services_in(service.namespace)
        if service in present:
            return self
        kept = tuple(s for s in present if s.name != service.name)
        return self._services(service.namespace, (*kept, service))

    def without_service(self, namespace: str, name: str) -> Workloads:
        present = self.services_in(namespace)
        kept = tuple(s for s in present if s.name != name)
        return self if len(kept) == len(present) else self._services(namespace, kept)

    def _services(self, namespace: str, services: tuple[Service, ...]) -> Workloads:
        changed = dict(self.services)
        if services:
            changed[namespace] = services
        else:
            changed.pop(namespace, None)
        return Workloads(MappingProxyType(changed), self.controllers)

    def with_controller(self, controller: Controller) -> Workloads:
        key = (controller.kind, controller.namespace, controller.name)
        if self.controllers.get(key) == controller:
            return self  # (a status update: the selector is immutable in the API)
        return Workloads(self.services, MappingProxyType({**self.controllers, key: controller}))

    def without_controller(self, kind: str, namespace: str, name: str) -> Workloads:
        key = (kind, namespace, name)
        if key not in self.controllers:
            return self
        changed = dict(self.controllers)
        del changed[key]
        return Workloads(self.services, MappingProxyType(changed))


NO_WORKLOADS = Workloads()


# --- decoding --------------------------------------------------------------------------------


def decode_service(obj: object, source: str = "", *, names: bool = True) -> Service:
    """A Service: its name, namespace and ``spec.selector``."""
    obj, _, name, namespace, where = object_metadata(
        obj, "Service", source, True, name_format=dns1035_label, names=names
    )
    spec = get_map(obj, "spec", where, "")
    return Service(name, namespace, get_str_map(spec, "selector", where, "spec"))


def decode_controller(obj: object, kind: str, source: str = "", *, names: bool = True) -> Controller:
    """A ReplicaSet or StatefulSet (``spec.selector``, a label selector) or a
    ReplicationController (``spec.selector``, a label map)."""
    if kind not in CONTROLLER_KINDS:
        raise ValueError(f"not a controller kind: {kind}")
    obj, _, name, namespace, where = object_metadata(obj, kind, source, True, names=names)
    spec: Mapping[str, Any] = get_map(obj, "spec", where, "")
    if kind == "ReplicationController":
        labels = get_str_map(spec, "selector", where, "spec")
        return Controller(kind, name, namespace, LabelSelector(tuple(labels.items())))
    return Controller(kind, name, namespace, label_selector(spec.get("selector"), where, "spec.selector"))
