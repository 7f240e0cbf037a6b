"""Property: the extender's answers (node tables, caches carried across requests, the shortcut for
reasons) equal a fresh evaluation of the same rules, node by node, for every request of a
sequence over a cluster that changes between requests."""

from __future__ import annotations

import json
import zlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.extender.service import Extender, priority_levels
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
