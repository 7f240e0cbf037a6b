"""Property: inter-pod affinity sums shared between incoming pods (keyed by which running pods'
terms select the pod, rulesched.lang.builtins.affinity) equal the plain definition — every running
pod's every term tested against the incoming pod — for many classes of incoming pods interleaved,
with pods placed and removed and node labels changed in between, on one long-lived index store."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cluster.store import ClusterStore
from rulesched.lang.builtins import affinity
from rulesched.lang.context import EvalContext, new_index_store
from rulesched.model import Pod
from tests.helpers.profiles import examples
from tests.upstream.harness import node, pod

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"
APPS = ("web", "db", "cache")


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


@st.composite
def running_specs(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    kind = draw(st.sampled_from(["none", "none", "anti", "pref", "pref-anti", "aff"]))
    app, key = draw(st.sampled_from(APPS)), draw(st.sampled_from([ZONE, HOST]))
    if kind == "anti":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app, key)]}}
    elif kind == "aff":
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(app, key)]}}
    elif kind in ("pref", "pref-anti"):
        weighted = [{"weight": draw(st.integers(1, 100)), "podAffinityTerm": term(app, key)}]
        which = "podAffinity" if kind == "pref" else "podAntiAffinity"
        spec["affinity"] = {which: {"preferredDuringSchedulingIgnoredDuringExecution": weighted}}
    return spec


def reference(incoming: Pod, cluster: ClusterStore) -> tuple[Counter[Any], Counter[Any]]:
    """(score sums from running pods' terms, required anti-affinity counts), by the definition."""
    score: Counter[Any] = Counter()
    anti: Counter[Any] = Counter()
    namespaces = cluster.namespaces
    for info in cluster.nodes:
        labels = info.labels
        for other in info.pods:
            roles = [(t, affinity.HARD_POD_AFFINITY_WEIGHT, score) for t in other.pod_affinity]
            roles += [(w.term, w.weight, score) for w in other.preferred_pod_affinity]
            roles += [(w.term, -w.weight, score) for w in other.preferred_pod_anti_affinity]
            roles += [(t, 1, anti) for t in other.pod_anti_affinity]
            for raw, weight, counts in roles:
                resolved = affinity.resolve(other, raw)
                if resolved.topology_key in labels and resolved.matches(incoming, namespaces):
                    counts[(resolved.topology_key, labels[resolved.topology_key])] += weight
    nonzero = lambda c: Counter({k: v for k, v in c.items() if v})  # noqa: E731 - (+c drops negatives)
    return nonzero(score), nonzero(anti)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(running_specs(), min_size=1, max_size=12),
    steps=st.lists(
        st.tuples(st.sampled_from(APPS + ("other",)), st.sampled_from(["none", "place", "remove", "relabel"])),
        min_size=1,
        max_size=12,
    ),
)
def test_shared_affinity_sums_equal_the_definition(specs: list[dict[str, Any]], steps: list[tuple[str, str]]) -> None:
    cluster = ClusterStore.build(
        [node(f"n{i}", {ZONE: f"z{i % 2}", HOST: f"n{i}"}) for i in range(4)],
        [pod(f"r{i}", labels={"app": APPS[i % 3]}, node_name=f"n{i % 4}", spec=s) for i, s in enumerate(specs)],
    )
    indexes = new_index_store()  # one store across every incoming pod, as a session keeps it
    for k, (app, change) in enumerate(steps):
        incoming = pod(f"in{k}", labels={"app": app})
        ctx = EvalContext(incoming, cluster, indexes=indexes)
        score = affinity.score_index(ctx)
        existing = affinity.existing_anti_index(ctx)
        want_score, want_anti = reference(incoming, cluster)
        assert score is not None and existing is not None
        assert Counter(score.counts) == want_score
        assert Counter(existing.counts) == want_anti
        if change == "place":
            cluster.add_pod(pod(f"p{k}", labels={"app": app}, node_name=f"n{k % 4}", spec=specs[k % len(specs)]))
        elif change == "remove":
            placed = sorted(p.key for p in cluster.pods())
            if placed:
                cluster.remove_pod(placed[k % len(placed)])
        elif change == "relabel":
            info = cluster.nodes[k % 4]
            cluster.update_node(node(info.name, {ZONE: f"z{k % 3}", HOST: info.name}))
