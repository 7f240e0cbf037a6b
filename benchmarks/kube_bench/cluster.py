"""The benchmark's clusters on the real API server: the workloads, gen_cluster's objects in the
API's terms, building them on a test bed, and a watch on the pods (with the kubelet stand-in)."""

from __future__ import annotations

import concurrent.futures
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import urllib3

from tests.realk8s import Kube

NS = "default"
THREADS = 16


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # gen_cluster's workload
    nodes: int
    running: int
    pending: int
    # the measured pods created before the scheduler starts, which then drains them (as --drain
    # does for every workload): the same pods free of the creations' competition for the cores
    drain: bool = False


WORKLOADS = {
    w.name: w
    for w in (
        Workload("basic-1000", "basic", 1000, 1000, 3000),
        Workload("basic-5000", "basic", 5000, 1000, 5000),
        Workload("mixed", "mixed", 1000, 1000, 3000),
        Workload("preemption", "preemption", 500, 2500, 500),
        Workload("preemption-drained", "preemption", 500, 2500, 500, drain=True),
    )
}


# --- the cluster, in the real API's terms ------------------------------------------------------


def api_objects(cluster: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """gen_cluster's List as the real API takes it: ``spec.priority`` as a PriorityClass
    (Priority admission refuses a pod giving the integer itself), no uid or status on pods."""
    out: dict[str, list[dict[str, Any]]] = {"nodes": [], "running": [], "pending": [], "pdbs": [], "classes": []}
    priorities = set()
    for obj in cluster["items"]:
        kind = obj["kind"]
        if kind == "Node":
            out["nodes"].append(obj)
        elif kind == "PodDisruptionBudget":
            out["pdbs"].append(obj)
        elif kind == "Pod":
            spec = obj["spec"]
            if "priority" in spec:
                value = spec.pop("priority")
                priorities.add(value)
                spec["priorityClassName"] = f"bench-priority-{value}"
            obj["metadata"].pop("uid", None)
            obj.pop("status", None)
            out["running" if spec.get("nodeName") else "pending"].append(obj)
    out["classes"] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"bench-priority-{v}"},
         "value": v}
        for v in sorted(priorities)
    ]  # fmt: skip
    return out


def parallel(fn: Callable[[Any], Any], items: list[Any], threads: int = THREADS) -> None:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass


def build(kube: Kube, objects: dict[str, list[dict[str, Any]]], ready_pods: bool) -> None:
    """Nodes (untainted of the admission plugin's not-ready taint, as the node lifecycle
    controller would for a Ready node), PriorityClasses, PDBs and the running pods."""

    def add_node(obj: dict[str, Any]) -> None:
        body = dict(obj)
        body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "uid"}
        status = dict(obj["status"])
        status.setdefault("conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}])
        body["status"] = status
        created = kube.create("/api/v1/nodes", body)
        if created["spec"].get("taints", []) != obj["spec"].get("taints", []):
            kube.patch(f"/api/v1/nodes/{obj['metadata']['name']}", {"spec": {"taints": obj["spec"].get("taints")}})

    parallel(add_node, objects["nodes"])
    for pc in objects["classes"]:
        kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc)
    for pdb in objects["pdbs"]:
        kube.create(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", pdb)
    parallel(lambda p: kube.create(f"/api/v1/namespaces/{NS}/pods", p), objects["running"])
    if ready_pods:  # the disruption controller counts only Ready pods as healthy
        parallel(lambda p: kube.mark_running(NS, p["metadata"]["name"]), objects["running"])


# --- watching the pods ----------------------------------------------------------------------------


@dataclass
class Seen:
    bound: dict[str, tuple[float, str]] = field(default_factory=dict)  # name -> (when, node)
    unschedulable: dict[str, float] = field(default_factory=dict)  # name -> last time marked so
    deleted: dict[str, float] = field(default_factory=dict)
    nominated: dict[str, str] = field(default_factory=dict)
    last_change: float = 0.0


class PodWatch(threading.Thread):
    """A watch on the namespace's pods (its own connection), recording bindings, unschedulable
    marks, nominations and deletions as they arrive; and the kubelet stand-in: a pod given a
    deletionTimestamp (an eviction, a preemption's deletion) is deleted at once."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(daemon=True)
        self.kube = kube
        self.seen = Seen()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        pki = kube.dir / "pki"
        self.pool = urllib3.PoolManager(
            ca_certs=str(pki / "ca.crt"), cert_file=str(pki / "admin.crt"), key_file=str(pki / "admin.key"),
            retries=False,
        )  # fmt: skip
        self.version = kube.get(f"/api/v1/namespaces/{NS}/pods", limit=1)["metadata"]["resourceVersion"]
        self.killer = concurrent.futures.ThreadPoolExecutor(4)

    def run(self) -> None:
        while not self.stopping.is_set():
            url = (
                f"{self.kube.url}/api/v1/namespaces/{NS}/pods?watch=1&allowWatchBookmarks=true"
                f"&resourceVersion={self.version}&timeoutSeconds=600"
            )
            try:
                answer = self.pool.request(
                    "GET", url, preload_content=False, timeout=urllib3.Timeout(connect=5, read=None)
                )
                for line in answer:
                    if self.stopping.is_set():
                        return
                    self._event(json.loads(line))
            except (urllib3.exceptions.HTTPError, ValueError, OSError):
                time.sleep(0.2)

    def _event(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        meta = obj.get("metadata", {})
        if event["type"] == "ERROR":
            raise ValueError(obj)
        self.version = meta.get("resourceVersion", self.version)
        if event["type"] == "BOOKMARK":
            return
        name, now = meta["name"], time.monotonic()
        with self.lock:
            seen = self.seen
            if event["type"] == "DELETED":
                seen.deleted.setdefault(name, now)
                seen.last_change = now
                return
            node = obj["spec"].get("nodeName")
            if node and name not in seen.bound:
                seen.bound[name] = (now, node)
                seen.last_change = now
            nominated = obj.get("status", {}).get("nominatedNodeName")
            if nominated and seen.nominated.get(name) != nominated:
                seen.nominated[name] = nominated
                seen.last_change = now
            elif not nominated and not node and seen.nominated.pop(name, None) is not None:
                seen.last_change = now  # its nomination cleared: its preemption found no node any more
            for c in obj.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c["status"] == "False" and not node:
                    if name not in seen.unschedulable:
                        seen.last_change = now
                    seen.unschedulable[name] = now
        if meta.get("deletionTimestamp"):
            self.killer.submit(self.kube.delete, f"/api/v1/namespaces/{NS}/pods/{name}", 0)

    def stop(self) -> None:
        self.stopping.set()
        self.killer.shutdown(wait=False)


def settled(watch: PodWatch, names: list[str], quiet: float) -> bool:
    """Every pod bound, deleted or marked unschedulable, and nothing new for ``quiet`` seconds."""
    with watch.lock:
        s = watch.seen
        done = all(n in s.bound or n in s.deleted or n in s.unschedulable for n in names)
        return done and time.monotonic() - s.last_change > quiet
