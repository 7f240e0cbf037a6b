"""Properties of the extender in process: its answers (node tables, caches carried across requests,
the shortcut for reasons) equal a fresh evaluation of the same rules, node by node, for every
request of a sequence over a cluster that changes between requests; its preemption answers keep
kube-scheduler's victims or drop the node, with rules that check no resources too; what
full-node requests make it hold is bounded in bytes."""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.extender.service import Extender, priority_levels
from rulesched.extender.wire import NodeCache
from rulesched.lang import RulesHandle, load_rules, resolve_rules_path
from rulesched.model.decode import decode_node, decode_pod
from rulesched.scheduler.evaluate import score_nodes
from tests.helpers.profiles import examples

ZONES = ("z1", "z2", "z3")
RULES = load_rules([resolve_rules_path("default")])


@st.composite
def node_objects(draw: st.DrawFn, index: int) -> dict[str, Any]:
    name = f"n{index}"
    labels = {"kubernetes.io/hostname": name}
    if draw(st.booleans()) or index % 4:
        labels["topology.kubernetes.io/zone"] = draw(st.sampled_from(ZONES))
    spec: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 0:
        spec["unschedulable"] = True
    if draw(st.integers(0, 4)) == 0:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    cpu = draw(st.sampled_from(["500m", "1", "2", "4"]))
    obj = {
        "metadata": {"name": name, "uid": f"u-{name}", "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"}},
    }
    # as the API server: another content, another resourceVersion
    obj["metadata"]["resourceVersion"] = str(zlib.crc32(json.dumps(obj, sort_keys=True).encode()))
    return obj


@st.composite
def pod_objects(draw: st.DrawFn, name: str, node_name: str | None = None) -> dict[str, Any]:
    app = draw(st.sampled_from(["web", "db"]))
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": {"cpu": draw(st.sampled_from(["100m", "700m", "1500m"]))}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    else:
        if draw(st.booleans()):
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                    "labelSelector": {"matchLabels": {"app": app}},
                }
            ]
        if draw(st.booleans()):
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if draw(st.integers(0, 3)) == 0:
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": draw(st.sampled_from(ZONES))}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": {"app": app}},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Requests, each with the cluster's nodes of that moment, and the running pods."""
    count = draw(st.integers(1, 12))
    nodes = [draw(node_objects(i)) for i in range(count)]
    running = [
        draw(pod_objects(f"r{i}", f"n{draw(st.integers(0, count - 1))}")) for i in range(draw(st.integers(0, 10)))
    ]
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):  # a node changes between requests
            i = draw(st.integers(0, count - 1))
            nodes = [*nodes[:i], draw(node_objects(i)), *nodes[i + 1 :]]
        steps.append(list(nodes))
    pods = [draw(pod_objects(f"p{i}")) for i in range(len(steps))]
    return running, steps, pods


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_filter_and_prioritize_equal_a_fresh_evaluation(scenario: Any) -> None:
    running, steps, pods = scenario
    extender = Extender(RulesHandle(RULES))
    for p in running:
        extender.store.upsert_pod(decode_pod(p))
    for nodes, p in zip(steps, pods, strict=True):
        body = json.dumps({"Pod": p, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}).encode()
        filtered = json.loads(extender.filter(body).body)
        prioritized = json.loads(extender.prioritize(body).body)

        # the reference: a fresh store and rule set, every node evaluated by itself
        store = ClusterStore()
        for n in nodes:
            store.add_node(decode_node(n))
        for r in running:
            store.upsert_pod(decode_pod(r))
        reference = load_rules([resolve_rules_path("default")])
        snapshot = store.snapshot()
        bound = reference.bind(decode_pod(p), snapshot)
        expected: dict[bool, dict[str, str]] = {False: {}, True: {}}  # unresolvable? -> node -> why
        feasible = []
        for info in snapshot.nodes:
            failure = bound.first_failure(info)
            if failure is None:
                feasible.append(info.name)
            else:
                expected[failure[0].unresolvable(info)][info.name] = ", ".join(failure[1])
        assert [n["metadata"]["name"] for n in filtered["Nodes"]["items"]] == feasible
        assert filtered["FailedNodes"] == expected[False]
        assert filtered["FailedAndUnresolvableNodes"] == expected[True]
        totals = [int(t) for t in score_nodes(bound, snapshot.nodes).totals]
        assert [h["Host"] for h in prioritized] == [info.name for info in snapshot.nodes]
        assert [h["Score"] for h in prioritized] == priority_levels(totals)


@given(st.lists(st.integers(-(10**6), 10**6), max_size=40))
def test_priority_levels_keep_order_within_0_to_10(totals: list[int]) -> None:
    levels = priority_levels(totals)
    assert len(levels) == len(totals) and all(0 <= v <= 10 for v in levels)
    for a, la in zip(totals, levels, strict=True):
        for b, lb in zip(totals, levels, strict=True):
            if a < b:
                assert la <= lb
            if a == b:
                assert la == lb
    distinct = len(set(totals))
    if 1 < distinct <= 11:  # every distinct total its own level, best at 10, worst at 0
        assert len(set(levels)) == distinct and max(levels) == 10 and min(levels) == 0
    if totals:
        assert levels[totals.index(max(totals))] == 10


# --- preemption with rules that check no resources ---------------------------------------------------

PARTIAL = load_rules(["deploy/extender/rules"])  # the shipped extender rules: no extends "default"


@st.composite
def proposals(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """A preemptor and kube-scheduler's proposal: per node, some of its pods (higher or lower
    priority than the preemptor, underlay or not)."""
    count = draw(st.integers(1, 5))
    nodes = [draw(node_objects(i)) for i in range(count)]
    victims: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        for k in range(draw(st.integers(0, 12))):
            victim = draw(pod_objects(f"v{i}-{k}", f"n{i}"))
            victim["spec"]["priority"] = draw(st.sampled_from([0, 10, 1000]))
            if draw(st.booleans()):
                victim["metadata"]["annotations"] = {"network.example.com/mode": "underlay"}
            victims.setdefault(f"n{i}", []).append(victim)
    preemptor = draw(pod_objects("preemptor"))
    preemptor["spec"]["priority"] = 100
    if draw(st.booleans()):
        preemptor["metadata"]["annotations"] = {"network.example.com/mode": "underlay"}
    return preemptor, victims, nodes


@settings(max_examples=60, deadline=None)
@given(proposals())
def test_preempt_keeps_or_drops_nodes_and_never_answers_one_empty(scenario: Any) -> None:
    """Every node answered is one kube-scheduler proposed, with its victims exactly as proposed
    (never an empty list: kube-scheduler fails the preemption on one); a node is dropped only for
    a victim a rule protects or for the rules' filters failing there with the victims gone."""
    preemptor, victims, nodes = scenario
    extender = Extender(RulesHandle(PARTIAL))
    extender.filter(json.dumps({"Pod": preemptor, "Nodes": {"metadata": {}, "items": nodes}}).encode())
    body = {"Pod": preemptor, "NodeNameToVictims": {n: {"Pods": v, "NumPDBViolations": 0} for n, v in victims.items()}}
    answer = json.loads(extender.preempt(json.dumps(body).encode()).body)["NodeNameToMetaVictims"]
    for name, chosen in answer.items():
        assert [p["UID"] for p in chosen["Pods"]] == [v["metadata"]["uid"] for v in victims[name]] != []
    for name, proposed in victims.items():
        protected = any(v["spec"]["priority"] >= 100 for v in proposed)
        # (without a cache a node holds only the proposed victims: gone, nothing is left to fail)
        assert (name in answer) == (bool(proposed) and not protected), (name, answer)


def test_node_cache_is_bounded_in_bytes() -> None:
    cache = NodeCache(max_bytes=1_000_000)
    padding = "x" * 20_000
    for i in range(300):  # 300 distinct nodes of 20 kB: 6 MB of JSON
        raw = msgspec.Raw(json.dumps({"metadata": {"name": f"n{i}", "annotations": {"pad": padding}}}).encode())
        node = cache.get(raw, "node")
        assert cache.bytes <= 1_000_000 and len(cache) <= 50
        assert cache.get(raw, "node") is node  # the latest is held
    first = msgspec.Raw(json.dumps({"metadata": {"name": "n0", "annotations": {"pad": padding}}}).encode())
    assert cache.get(first, "node").name == "n0"  # let go long ago: decoded again


def test_nodes_requests_sent_leave_the_store_with_the_cache() -> None:
    """Full-node requests cannot make the extender hold more nodes than its byte bound."""
    extender = Extender(RulesHandle(RULES), node_cache_bytes=200_000)
    padding = "x" * 20_000
    for i in range(100):  # distinct names: without the bound, 100 nodes in the store for node_ttl
        obj = {
            "metadata": {"name": f"big-{i}", "annotations": {"pad": padding}},
            "status": {"allocatable": {"cpu": "1"}},
        }
        body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [obj]}}).encode()
        assert extender.filter(body).status == 200
        assert len(extender.store.snapshot().nodes) <= 10
