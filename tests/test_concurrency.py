"""Evaluations run concurrently: several threads filter and score many pods against one
snapshot while the store that made it receives events and a reload swaps the rules. Each
thread reads the rules once per evaluation from the handle; every result must equal the one a
single thread computes alone with a separately loaded copy of the same rule set.

What this guards: snapshots the store never changes under a reader, sessions (bound classes,
their per-node caches, per-domain indexes) that belong to one thread, and node memos that two
rule sets may share a node for.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from rulesched.cluster.snapshot import Snapshot
from rulesched.cluster.store import ClusterStore
from rulesched.lang import RuleSet, RulesHandle, load_rules, load_rules_text, resolve_rules_path
from rulesched.model import Pod
from rulesched.scheduler.evaluate import filter_nodes, score_nodes
from tests.upstream.harness import node, pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
CROWD = 'extends "default"\n\nscore crowd weight 3:\n    100 - len(node.pods)\n'


def requests(cpu: str, memory: str = "256Mi") -> dict[str, Any]:
    return {
        "containers": [{"name": "c", "image": "nginx:1.0", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }


def build_store(rng: random.Random) -> ClusterStore:
    store = ClusterStore()
    for i in range(30):
        store.add_node(
            node(
                f"n{i}",
                {ZONE: f"z{i % 3}", HOST: f"n{i}", "disk": "ssd" if i % 4 else "hdd"},
                {"cpu": "4", "memory": "8Gi", "pods": "110"},
                taints=[{"key": "gpu", "value": "x", "effect": "NoSchedule"}] if i % 7 == 0 else (),
                images=[(["nginx:1.0"], 200_000_000)] if i % 2 else (),
            )
        )
    for i in range(60):
        spec = requests(rng.choice(["100m", "250m", "500m"]))
        if i % 5 == 0:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": HOST}
                    ]
                }
            }
        store.add_pod(
            pod(f"r{i}", labels={"app": rng.choice(["web", "db"])}, spec=spec, node_name=f"n{rng.randrange(30)}")
        )
    return store


def pending() -> list[Pod]:
    web = {"app": "web"}
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": web},
            }
        ]
    }
    soft = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 2,
                "topologyKey": HOST,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": web},
            }
        ]
    }
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": web}, "topologyKey": ZONE}
                ]
            }
        }
    }
    preferred = {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": HOST},
                    }
                ]
            }
        }
    }
    shapes = [
        {},
        spread,
        soft,
        anti,
        preferred,
        {"nodeSelector": {"disk": "ssd"}},
        {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
    ]
    pods = []
    for i in range(28):
        spec = {**requests(["100m", "1", "3"][i % 3]), **shapes[i % len(shapes)]}
        pods.append(pod(f"p{i}", labels=web if i % 2 else {"app": "db"}, spec=spec))
    return pods


Result = tuple[
    tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, tuple[tuple[str, int], ...]], ...]
]


def evaluate(rules: RuleSet, p: Pod, snapshot: Snapshot) -> Result:
    bound = rules.session().bind(p, snapshot)
    filtered = filter_nodes(bound, snapshot.nodes, explain=True)
    scored = score_nodes(bound, filtered.feasible, explain=True) if filtered.feasible else None
    per_node = scored.per_node or {} if scored is not None else {}
    return (
        tuple(n.name for n in filtered.feasible),
        tuple(sorted((filtered.failed or {}).items())),
        tuple(sorted((n, tuple(sorted(s.items()))) for n, s in per_node.items())),
    )


def churn(store: ClusterStore, rng: random.Random, step: int) -> None:
    """One informer event, of the kinds that touch what a snapshot holds."""
    kind = rng.randrange(4)
    names = [n.name for n in store.nodes]
    if kind == 0:
        store.add_pod(pod(f"c{step}", labels={"app": "web"}, spec=requests("100m"), node_name=rng.choice(names)))
    elif kind == 1:
        keys = sorted(p.key for p in store.pods())
        store.remove_pod(rng.choice(keys))
    elif kind == 2:
        name = rng.choice(names)
        store.update_node(
            node(name, {ZONE: f"z{rng.randrange(3)}", HOST: name}, {"cpu": "8", "memory": "16Gi", "pods": "110"})
        )
    else:
        store.add_node(node(f"x{step}", {ZONE: "z0", HOST: f"x{step}"}))


@pytest.fixture
def busy_switching() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads interleave far more often than by default
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def test_threads_agree_with_one_thread_while_the_store_changes_and_rules_swap(busy_switching: None) -> None:
    rng = random.Random(7)
    store = build_store(rng)
    snapshot = store.snapshot()
    pods = pending()
    default_path = resolve_rules_path("default")
    # The references: separately loaded sets (no cache shared), one thread, nothing changing.
    reference = {}
    for rules in (load_rules([default_path]), load_rules_text({"crowd.rules": CROWD})):
        reference[rules.digest] = [evaluate(rules, p, snapshot) for p in pods]
    assert len(reference) == 2
    sets = [load_rules([default_path]), load_rules_text({"crowd.rules": CROWD})]
    handle = RulesHandle(sets[0])
    done = threading.Event()
    seen: list[list[tuple[str, int, Result]]] = [[] for _ in range(4)]
    failures: list[BaseException] = []

    def work(slot: int) -> None:
        order = random.Random(slot)
        try:
            rounds = 0
            while not done.is_set() or rounds < 2:
                for i in order.sample(range(len(pods)), len(pods)):
                    rules = handle.rules  # once per evaluation, as a request or a cycle does
                    seen[slot].append((rules.digest, i, evaluate(rules, pods[i], snapshot)))
                rounds += 1
        except BaseException as err:  # noqa: BLE001 - reported by the main thread
            failures.append(err)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(4)]
    for t in threads:
        t.start()
    for step in range(300):
        churn(store, rng, step)
        if step % 10 == 0:
            store.snapshot()  # other readers take snapshots too
        if step % 25 == 0:  # a reload: sometimes a brand-new compile of the same text
            fresh = load_rules_text({"crowd.rules": CROWD}) if step % 50 == 0 else sets[(step // 25) % 2]
            handle.swap(fresh)
    done.set()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures
    total = 0
    for results in seen:
        for digest, i, result in results:
            assert result == reference[digest][i], (digest, pods[i].name)
            total += 1
    assert total >= 4 * 2 * len(pods)
    assert {digest for results in seen for digest, _, _ in results} == set(reference)  # both sets were read
    assert store.snapshot() is not snapshot and len(store.nodes) > len(snapshot.nodes)  # the store did move on
