"""Memory stays flat: 10 000 rule reloads and 100 000 scheduling cycles, with hundreds of pod
classes coming and going and pods bound and deleted, leave the process holding no more than it
held once its caches were warm.

Every cache is bounded: bound classes per session (LRU), node tables (LRU), per-domain indexes
(LRU), per-node answers (one entry per node per binding), node memos (one rule set's values per
node), the pod journal (trimmed). A swapped-out rule set takes its sessions and tables with it.
The test counts live objects and allocated memory blocks (after a full collection) rather than
bytes, so a leak of even small objects per reload or per cycle shows, and it also checks the
bounds directly.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import sys
import weakref
from collections import deque

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, RulesHandle
from rulesched.lang.frontend.files import check_texts
from rulesched.model import Pod
from rulesched.scheduler.framework import Binding, SchedulerSettings
from rulesched.scheduler.scheduler import Scheduler
from tests.upstream.harness import node, pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
# A small set with the cluster-wide built-ins (indexes, memos, columns): compiling the whole
# default profile 10 000 times would take most of a CI run.
POLICY = """
filter fits: all(r in keys(pod.requests) where pod.requests[r] <= node.free[r]) else "Insufficient resources"
filter roomy: node.allocatable.cpu - node.requested.cpu > 1 else "too small"
filter spread: spread_ok(node) else "node(s) didn't match pod topology spread constraints"
filter anti: existing_anti_affinity_ok(node) and pod_anti_affinity_ok(node) else "node(s) didn't satisfy anti-affinity"
score least weight 1:
    (100 * node.free.cpu / node.allocatable.cpu + 100 * node.free.memory / node.allocatable.memory) / 2
score images weight 1:
    image_locality(node)
"""
EXTRA = "score fewest weight 2 normalize reverse:\n    len(node.pods)\n"
RELOADS, CYCLES_PER_RELOAD, CLASSES = 10_000, 10, 700


class Binder:
    def bind(self, binding: Binding) -> bool:
        return True


class Clock:
    now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


def pending(i: int) -> Pod:
    """Most pods from a few hot classes; every tenth from CLASSES others (more than a session
    keeps), some of them spreading or repelling."""
    c = (1, 2, 4)[i % 3] if i % 10 else 20 + (i // 10) % CLASSES
    return dataclasses.replace(template(c), name=f"p{i}")


@functools.cache
def template(c: int) -> Pod:
    spec = {
        "containers": [
            {"name": "c", "image": f"img:{c % 5}", "resources": {"requests": {"cpu": f"{10 + c}m", "memory": "64Mi"}}}
        ]
    }
    labels = {"app": f"a{c % 40}"}
    if c % 3 == 0:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 3,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": labels},
            }
        ]
    if c % 5 == 0:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "never"}}, "topologyKey": HOST}
                ]
            }
        }
    return pod(f"class{c}", labels=labels, spec=spec)


def live() -> tuple[int, int]:
    """Objects the collector tracks, and memory blocks allocated (which also counts objects it
    does not track, such as the plain keys of a memo)."""
    gc.collect()
    return len(gc.get_objects()), sys.getallocatedblocks()


@pytest.mark.slow  # ~25 s: the reloads and cycles are the point
def test_memory_is_flat_over_reloads_and_cycles() -> None:
    store = ClusterStore()
    for i in range(12):
        store.add_node(
            node(
                f"n{i}",
                {ZONE: f"z{i % 3}", HOST: f"n{i}"},
                {"cpu": "64", "memory": "256Gi", "pods": "500"},
                images=[([f"img:{i % 5}"], 300_000_000)],
            )
        )
    for i in range(4):  # never chosen, so never changed: their memos see every rule set
        store.add_node(node(f"tiny{i}", {ZONE: "z0", HOST: f"tiny{i}"}, {"cpu": "500m", "memory": "1Gi", "pods": "10"}))
    checked = [check_texts({"p.rules": POLICY}).checked, check_texts({"p.rules": POLICY + EXTRA}).checked]
    handle = RulesHandle(RuleSet(checked[0]))
    scheduler = Scheduler(handle, store, SchedulerSettings(), Binder(), clock=Clock())
    placed: deque[str] = deque()
    swapped_out: deque[weakref.ref[RuleSet]] = deque(maxlen=100)
    count = 0
    checkpoints = {}
    for reload in range(RELOADS):
        old = handle.swap(RuleSet(checked[reload % 2]))
        swapped_out.append(weakref.ref(old))
        del old
        for _ in range(CYCLES_PER_RELOAD):
            scheduler.add(pending(count))
            count += 1
            result = scheduler.schedule_one()
            assert result is not None and result.node is not None, result
            placed.append(result.pod.key)
            if len(placed) > 100:  # pods come and go: the cluster never fills
                assert store.remove_pod(placed.popleft()) is not None
        if reload in (2_000, RELOADS - 1):
            checkpoints[reload] = live()
    assert count == RELOADS * CYCLES_PER_RELOAD
    (warm_objects, warm_blocks), (objects, blocks) = checkpoints[2_000], checkpoints[RELOADS - 1]
    assert objects - warm_objects < 0.02 * warm_objects, f"{objects - warm_objects} more objects after 8 000 reloads"
    assert blocks - warm_blocks < 0.02 * warm_blocks, f"{blocks - warm_blocks} more memory blocks after 8 000 reloads"
    # The bounds themselves.
    alive = sum(1 for ref in swapped_out if ref() is not None)
    assert alive <= 1, f"{alive} swapped-out rule sets still alive"
    session = handle.rules.session()
    assert len(session.classes) <= 512 and len(session.indexes) <= 128
    memos = handle.rules.node_memos
    assert len(memos.entries) <= len(store.nodes) and max(len(memos.values(info)) for info in store.nodes) <= 64
    assert len(scheduler.cycle.framework.tables) <= 64
    assert store.pod_position - store.journal.start <= 2 * 4096
