"""Doubles for driving the core scheduler by hand: a binder whose answers come later, an
observer and an evictor that record, a clock tests move."""

from __future__ import annotations

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.framework import Binding, CycleResult
from rulesched.scheduler.scheduler import Observer, Scheduler
from tests.upstream.harness import node


def cpu(request: str, **kw: object) -> dict[str, object]:
    return {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": request}}}], **kw}


class Later:
    """A binder whose answers come later, as the API server's do."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.bindings: list[Binding] = []

    def bind(self, binding: Binding) -> bool | None:
        self.calls.append((binding.pod.key, binding.node))
        self.bindings.append(binding)
        return None


class Seen(Observer):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def attempted(self, result: CycleResult) -> None:
        self.events.append(("attempted", result.pod.key))

    def bound(self, pod: Pod, node: str) -> None:
        self.events.append(("bound", pod.key))

    def bind_failed(self, pod: Pod, node: str, reason: str) -> None:
        self.events.append(("failed", pod.key))


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recording:
    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, pod: Pod, preemptor: Pod, group: PodGroup | None = None) -> None:
        self.evicted.append(pod.key)


class Ticks:
    """A clock one tick further at every read."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def cluster(nodes: int, cpus: str = "4") -> ClusterStore:
    store = ClusterStore(assumed_ttl=30.0)
    for i in range(nodes):
        store.add_node(node(f"n{i:03}", allocatable={"cpu": cpus, "memory": "16Gi", "pods": "110"}))
    return store


def requeued(scheduler: Scheduler, key: str) -> bool:
    # (a cycle given up is an error: the error backoff queue)
    return any(e.pod.key == key for e in scheduler.queue._error_backoff)
