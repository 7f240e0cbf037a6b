"""A node and the pods on it, with the sums rules ask for kept up to date incrementally.

This is the object a rule's ``node`` variable reads (it satisfies
:class:`rulesched.lang.schema.NodeView`). Adding or removing a pod updates ``requested``,
``nonzero_requested``, ``free``, ``used_ports`` and ``claim_mounts`` in place and bumps ``generation``:
the engine's per-node caches (compiled rules' node-only values, bound rules' outcomes) are its
own, keyed by the node info's identity and generation; a node info holds none of them.

Once a snapshot holds a NodeInfo it is never changed again: the store changes a :meth:`clone`
instead (``epoch`` says which snapshot generation a NodeInfo was made in), so a cycle or an
extender request can read a snapshot's nodes while the store moves on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rulesched.model import ContainerPort, Node, Pod, Taint
from rulesched.model.dra import NodeDevice
from rulesched.model.load import NEVER_MEASURED, NO_METRICS, NO_USAGE


class NodeInfo:
    __slots__ = (
        "node",
        "name",
        "labels",
        "annotations",
        "allocatable",
        "capacity",
        "unschedulable",
        "taints",
        "images",
        "pods",
        "requested",
        "nonzero_requested",
        "free",
        "used_ports",
        "claim_mounts",
        "usage",
        "metrics",
        "metrics_age",
        "devices",
        "generation",
        "epoch",
    )

    def __init__(self, node: Node, pods: Iterable[Pod] = (), epoch: int = 0) -> None:
        self.pods: list[Pod] = []
        self.requested: dict[str, int] = {}
        self.nonzero_requested: dict[str, int] = {}
        self.used_ports: list[ContainerPort] = []
        # Claim volumes the pods mount (counted with repeats): at least the CSI volumes attached
        # here, which NodeVolumeLimits compares with the node's limits.
        self.claim_mounts = 0
        # Measured load (rulesched.cluster.load, with the estimates of pods placed since):
        # cpu and memory in milli-units, named metrics, and the oldest value's age in seconds.
        self.usage: Mapping[str, int] = NO_USAGE
        self.metrics: Mapping[str, float] = NO_METRICS
        self.metrics_age: float = NEVER_MEASURED
        # DRA devices the node reaches, with what claims hold of them (rulesched.cluster.dra)
        self.devices: tuple[NodeDevice, ...] = ()
        self.generation = 0
        self.epoch = epoch
        self.set_node(node)
        for pod in pods:
            self.add_pod(pod)

    def clone(self, epoch: int) -> NodeInfo:
        """A copy to change while this one stays as it is (a snapshot holds it)."""
        new = NodeInfo.__new__(NodeInfo)
        new.node, new.name, new.labels = self.node, self.name, self.labels
        new.annotations, new.allocatable, new.capacity = self.annotations, self.allocatable, self.capacity
        new.unschedulable, new.taints, new.images = self.unschedulable, self.taints, self.images
        new.pods = list(self.pods)
        new.requested = dict(self.requested)
        new.nonzero_requested = dict(self.nonzero_requested)
        new.free = dict(self.free)
        new.used_ports = list(self.used_ports)
        new.claim_mounts = self.claim_mounts
        new.usage, new.metrics, new.metrics_age = self.usage, self.metrics, self.metrics_age
        new.devices = self.devices
        new.generation = self.generation
        new.epoch = epoch
        return new

    def set_node(self, node: Node) -> None:
        """Replace the Node object (labels, taints, allocatable may all change)."""
        self.node = node
        self.name = node.name
        self.labels: Mapping[str, str] = node.labels
        self.annotations: Mapping[str, str] = node.annotations
        self.allocatable: Mapping[str, int] = node.allocatable
        self.capacity: Mapping[str, int] = node.capacity
        self.unschedulable = node.unschedulable
        self.taints: tuple[Taint, ...] = node.taints
        self.images: Mapping[str, int] = node.images
        self.free: dict[str, int] = {}
        self._refresh_free(self.allocatable.keys() | self.requested.keys())
        self._changed()

    def set_load(self, usage: Mapping[str, int], metrics: Mapping[str, float], age: float) -> bool:
        """The node's measured load changed (new values, or a placed pod's estimate); False
        when it is what the node already shows."""
        if usage == self.usage and metrics == self.metrics and age == self.metrics_age:
            return False
        self.usage, self.metrics, self.metrics_age = usage, metrics, age
        self._changed()
        return True

    def set_devices(self, devices: tuple[NodeDevice, ...]) -> bool:
        """The DRA devices the node reaches changed (slices, or what claims hold); False when
        they are what the node already shows."""
        if devices == self.devices:
            return False
        self.devices = devices
        self._changed()
        return True

    def add_pod(self, pod: Pod) -> None:
        self.pods.append(pod)
        _add(self.requested, pod.requests, 1)
        _add(self.nonzero_requested, pod.nonzero_requests, 1)
        self.used_ports.extend(pod.host_ports)
        if pod.volumes:
            self.claim_mounts += len(pod.claims)
        self._refresh_free(pod.requests.keys())
        self._changed()

    def remove_pod(self, pod: Pod) -> bool:
        """Remove a pod (matched by namespace/name); False if it was not here."""
        for i, present in enumerate(self.pods):
            if present is pod or (present.name == pod.name and present.namespace == pod.namespace):
                del self.pods[i]
                _add(self.requested, present.requests, -1)
                _add(self.nonzero_requested, present.nonzero_requests, -1)
                for port in present.host_ports:
                    self.used_ports.remove(port)
                if present.volumes:
                    self.claim_mounts -= len(present.claims)
                self._refresh_free(present.requests.keys())
                self._changed()
                return True
        return False

    def find_pod(self, key: str) -> Pod | None:
        namespace, _, name = key.partition("/")
        return next((p for p in self.pods if p.name == name and p.namespace == namespace), None)

    def _refresh_free(self, keys: Iterable[str]) -> None:
        allocatable, requested, free = self.allocatable, self.requested, self.free
        for key in keys:
            free[key] = allocatable.get(key, 0) - requested.get(key, 0)

    def _changed(self) -> None:
        self.generation += 1

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self.pods)})"


def _add(total: dict[str, int], amounts: Mapping[str, int], sign: int) -> None:
    for key, value in amounts.items():
        left = total.get(key, 0) + sign * value
        if left:
            total[key] = left
        else:
            total.pop(key, None)
