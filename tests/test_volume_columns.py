"""The volume filters evaluated as columns agree with their node-by-node answers, and pods that
differ only in their own claims share one binding.

Column evaluation gives the four volume built-ins one answer everywhere, one per group of nodes
alike in a few labels, or (attach limits) a comparison of per-node claim counts against the
lowest CSINode limit, falling back to the node-by-node answer near a limit. A generated cluster
(zones, CSINodes with small limits or none, allocatable attach limits, running pods mounting
claims of a pool, static zonal volumes, bound and unbound claims) is asked both ways for pods
mounting one or two claims.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched import engine
from rulesched.cluster.store import ClusterStore
from rulesched.engine import Filters, NodeColumns
from rulesched.lang import load_rules_text
from rulesched.model import Pod
from tests.helpers.profiles import examples
from tests.upstream.harness import csinode, default_rules, node, pod, pv, pvc, storage, storage_class

ZONE = "topology.kubernetes.io/zone"
DRIVER = "csi.example.com"
CLAIMS = ("c0", "c1", "c2", "c3", "c4", "static-0", "static-1", "bound-0", "missing")


def _claim(name: str) -> Any:
    cls = "static" if name.startswith("static") else "zonal"
    spec = {"storageClassName": cls, "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if name.startswith("bound"):
        return pvc(name, spec={**spec, "volumeName": "pv-bound-0"}, phase="Bound", uid=f"uid-{name}")
    return pvc(name, spec=spec, uid=f"uid-{name}")


def _volume(name: str, zone: str, claim: str = "") -> Any:
    spec: dict[str, Any] = {
        "storageClassName": "static" if not claim else "zonal",
        "capacity": {"storage": "5Gi"},
        "accessModes": ["ReadWriteOnce"],
        "csi": {"driver": DRIVER, "volumeHandle": name},
        "nodeAffinity": {
            "required": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
            }
        },
    }
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim, "uid": f"uid-{claim}"}
    return pv(name, labels={ZONE: zone}, spec=spec, phase="Bound" if claim else "Available")


def _mounting(name: str, claims: list[str], node_name: str = "") -> Pod:
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod(name, spec={"volumes": volumes}, node_name=node_name)


@st.composite
def clusters(draw: Any) -> ClusterStore:
    zones = ["z1", "z2", "z3"]
    topologies = [{"matchLabelExpressions": [{"key": ZONE, "values": ["z1", "z2"]}]}]
    state = ClusterStore()
    state.set_storage(
        storage(
            volumes=[_volume("static-z1", "z1"), _volume("static-z3", "z3"), _volume("pv-bound-0", "z2", "bound-0")],
            claims=[_claim(c) for c in CLAIMS if c != "missing"],
            classes=[
                storage_class("zonal", provisioner=DRIVER, mode="WaitForFirstConsumer", topologies=topologies),
                storage_class("static", provisioner="kubernetes.io/no-provisioner", mode="WaitForFirstConsumer"),
            ],
        )
    )
    for i in range(draw(st.integers(1, 12))):
        name = f"n{i}"
        allocatable: dict[str, Any] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        attach = draw(st.sampled_from([None, None, 1, 3]))
        if attach is not None:
            allocatable[f"attachable-volumes-csi-{DRIVER}"] = str(attach)
        labels = {"kubernetes.io/hostname": name}
        zone = draw(st.sampled_from([*zones, None]))
        if zone is not None:
            labels[ZONE] = zone
        state.add_node(node(name, labels=labels, allocatable=allocatable))
        limit = draw(st.sampled_from([None, 0, 1, 2, 39]))
        if limit is not None:
            state.volumes.put("csinodes", name, csinode(name, {DRIVER: limit}))
        for j in range(draw(st.integers(0, 3))):
            claims = draw(st.lists(st.sampled_from(CLAIMS[:5]), min_size=0, max_size=2, unique=True))
            state.add_pod(_mounting(f"r{i}-{j}", claims, node_name=name))
    return state


SETTINGS = settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(clusters(), st.lists(st.lists(st.sampled_from(CLAIMS), min_size=1, max_size=2, unique=True), min_size=1))
def test_volume_filters_as_columns_agree_with_node_by_node(state: ClusterStore, wanted: list[list[str]]) -> None:
    rules = default_rules()
    snapshot = state.snapshot()
    nodes = list(snapshot.nodes)
    cols = NodeColumns(nodes)
    rows = np.arange(len(nodes), dtype=np.intp)
    for i, claims in enumerate(wanted):
        bound = rules.bind(_mounting(f"p{i}", claims), snapshot)
        expected = [bound.first_failure(n) is None for n in nodes]
        assert engine.filter_mask(bound, cols, rows, Filters.ALL).tolist() == expected, claims
        assert engine.filter_mask(bound, cols, rows, Filters.DYNAMIC).tolist() == [
            all(f.passes(n) for f in bound.dynamic_filters) for n in nodes
        ], claims
    assert engine.columns_of(bound) is not None and engine.columns_of(bound).evaluator.fallbacks.count == 0


def test_pods_differing_only_in_their_claims_share_a_binding() -> None:
    rules = default_rules()
    state = ClusterStore()
    state.add_node(node("n0"))
    snapshot = state.snapshot()
    a = rules.bind(_mounting("a", ["c0"]), snapshot)
    assert rules.bind(_mounting("b", ["c1"]), snapshot) is a
    assert rules.bind(_mounting("c", ["c0", "c1"]), snapshot) is not a  # len(pod.claims) differs


def test_a_rule_reading_claim_names_keeps_them_apart() -> None:
    rules = load_rules_text({"t.rules": 'filter NotScratch: not any(c in pod.claims where c == "scratch")\n'})
    state = ClusterStore()
    state.add_node(node("n0"))
    snapshot = state.snapshot()
    a = rules.bind(_mounting("a", ["c0"]), snapshot)
    scratch = rules.bind(_mounting("b", ["scratch"]), snapshot)
    assert scratch is not a
    assert scratch.first_failure(snapshot.nodes[0]) is not None and a.first_failure(snapshot.nodes[0]) is None
