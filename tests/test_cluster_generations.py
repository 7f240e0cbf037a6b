"""The change counters compiled rules stamp cached cluster-wide answers with, and the pod journal
position the per-domain indexes replay from: each change must move exactly the ones whose
answers it can change (rulesched.lang.builtins.topology VERSIONS, rulesched.lang.indexes)."""

from __future__ import annotations

import dataclasses

from rulesched.cluster.store import ClusterStore
from tests.upstream.harness import node, pod

ANTI = {
    "affinity": {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
}


def counters(state: ClusterStore) -> tuple[int, int, int]:
    return state.generation, state.pod_position, state.node_generation


def moved(before: tuple[int, int, int], after: tuple[int, int, int]) -> tuple[bool, bool, bool]:
    return tuple(a != b for a, b in zip(before, after, strict=True))  # type: ignore[return-value]


def test_each_change_moves_the_counters_it_should() -> None:
    state = ClusterStore.build([node("n1", {"kubernetes.io/hostname": "n1"})], [])
    cases = [
        ("add node", lambda: state.add_node(node("n2")), (True, False, True)),
        ("relabel node", lambda: state.update_node(node("n2", {"zone": "a"})), (True, False, True)),
        ("add plain pod", lambda: state.add_pod(pod("a", node_name="n1")), (True, True, False)),
        ("add pod with anti-affinity", lambda: state.add_pod(pod("b", spec=ANTI, node_name="n1")), (True, True, False)),
        ("remove plain pod", lambda: state.remove_pod("default/a"), (True, True, False)),
        ("remove pod with anti-affinity", lambda: state.remove_pod("default/b"), (True, True, False)),
        ("assume", lambda: state.assume(pod("c"), "n2"), (True, True, False)),
        ("forget", lambda: state.forget("default/c"), (True, True, False)),
        ("remove node", lambda: state.remove_node("n2"), (True, False, True)),
        ("namespaces", lambda: state.set_namespaces({"default": {"env": "x"}}), (True, False, True)),
    ]
    for name, change, expected in cases:
        before = counters(state)
        change()
        assert moved(before, counters(state)) == expected, name


def test_cached_existing_anti_affinity_answer_follows_a_new_pod() -> None:
    """A pod whose zone anti-affinity lands on n2 after the class was bound and n1's answer was
    cached must change n1's answer too, though n1 itself (and so its memo) did not change."""
    from tests.upstream.harness import default_rules

    zone = {"zone": "a"}
    state = ClusterStore.build([node("n1", zone), node("n2", zone), node("n3", {"zone": "b"})], [])
    incoming = pod("p", labels={"app": "x"})
    rules = default_rules()
    n1 = state.node_view("n1")
    assert rules.bind(incoming, state).first_failure(n1) is None
    anti_zone = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                ]
            }
        }
    }
    state.add_pod(pod("guard", spec=anti_zone, node_name="n2"))
    again = rules.bind(dataclasses.replace(incoming, name="p2"), state)
    failure = again.first_failure(n1)
    assert failure is not None and failure[1] == ("node(s) didn't satisfy existing pods anti-affinity rules",)
    assert again.first_failure(state.node_view("n3")) is None


def test_the_binding_news_confirms_an_assumption_without_a_change() -> None:
    """The informer's bound pod differs from the assumed one in its resourceVersion (the binding
    wrote it): the assumption is confirmed with no counter moved, so the cycle's tables keep
    the node's row (a field compared there made every binding a change)."""
    state = ClusterStore.build([node("n1", {"kubernetes.io/hostname": "n1"})], [])
    pending = dataclasses.replace(pod("c"), resource_version="7")
    state.assume(pending, "n1")
    before = counters(state)
    state.add_pod(dataclasses.replace(pending, node_name="n1", resource_version="8"))
    assert moved(before, counters(state)) == (False, False, False)
