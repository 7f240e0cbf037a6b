"""Selector values the API server would reject as label values make the term match nothing, as
upstream: a required node affinity term with one goes nowhere, an anti-affinity selector with one
repels nothing, a topology spread selector with one counts nothing."""

from __future__ import annotations

import pytest

from rulesched.cluster.store import ClusterStore
from rulesched.model.parts import valid_label_value
from tests.upstream.harness import default_rules, node, pod

ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("web", True),
        ("", True),
        ("a.b-c_d", True),
        ("x" * 63, True),
        ("x" * 64, False),
        ("a b", False),
        ("-web", False),
        ("web-", False),
        ("a/b", False),
        ("ü", False),
    ],
)
def test_label_values(value: str, valid: bool) -> None:
    assert valid_label_value(value) is valid


def failure(spec: dict, running: list | None = None) -> str | None:
    n1 = node("n1", {ZONE: "z1", "kubernetes.io/hostname": "n1"})
    store = ClusterStore.build([n1], running or [])
    bound = default_rules().bind(pod("p", labels={"app": "web"}, spec=spec), store.snapshot())
    found = bound.first_failure(store.snapshot().nodes[0])
    return None if found is None else found[0].name


def test_a_required_node_affinity_term_with_a_bad_value_matches_no_node() -> None:
    term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1", "not a value"]}]}
    spec = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }
    assert failure(spec) == "NodeAffinity"
    good = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}
    ok = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [good]}}}
    }
    assert failure(ok) is None


def test_an_anti_affinity_selector_with_a_bad_value_repels_nothing() -> None:
    running = [pod("r", labels={"app": "web"}, node_name="n1")]
    for values, expected in ((["web"], "InterPodAffinity"), (["web", "bad value"], None)):
        term = {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": values}]},
            "topologyKey": "kubernetes.io/hostname",
        }
        spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
        assert failure(spec, running) == expected
