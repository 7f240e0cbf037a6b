"""kube-scheduler's PodTopologySpread unit tests, run through rules/default.rules.

Ported from pkg/scheduler/framework/plugins/podtopologyspread: filtering_test.go
(TestSingleConstraint, TestMultipleConstraints) and scoring_test.go (TestPodTopologySpreadScore, and
TestPreScoreSkip's first case).
Test ids are the upstream test names. Upstream's filter tables give status codes, compared here
with the reasons: Success is "passes", Unschedulable comes with "node(s) didn't match pod topology
spread constraints" and UnschedulableAndUnresolvable (the filter's unresolvable clause) with the
same reason and " (missing required label)". Upstream score
tests pass the candidate nodes to PreScore; so do these (``feasible``), with the "failed" nodes in
the cluster but not scored. Upstream runs a few tables with the NodeInclusionPolicy feature
disabled; with default policies that is the same as enabled, which is what rulesched implements.

System default spreading (upstream's default ``defaultingType: System``): TestPodTopologySpreadScore
"system defaulting, nodes don't have zone, pods match service", and TestPreScoreStateEmptyNodes
"system default constraints and a replicaset" (upstream compares the PreScore state; so do these,
through the state ``spread_score`` computes). Upstream's ``objs`` (Services, ReplicaSets) are the
cluster's workloads here. Two cases written for configured (List) default constraints are ported
with the system defaults in their place, keeping what they check: TestPreScoreSkip "default
constraints and a replicaset that doesn't match" (the pod's owner is not in the cluster: skipped)
and TestPreScoreStateEmptyNodes "default constraints and a replicaset, but pod has constraints"
(the pod's own constraints win). Not ported: the rest of TestPreScoreStateEmptyNodes (configured
default constraints, which rulesched does not support, and states whose scores the score table
already checks) and "matchLabelKeys ignored when feature gate disabled"
(MatchLabelKeysInPodTopologySpread is on by default and not switchable in rulesched).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from rulesched.lang.builtins.spreading import _spread_score_state
from rulesched.model import LabelSelector, LabelSelectorRequirement
from tests.upstream.harness import (
    UNRESOLVABLE,
    UNSCHEDULABLE,
    bind,
    controller,
    filter_status,
    node,
    normalized_scores,
    owned_by,
    pod,
    service,
    state,
)

SKEW = "node(s) didn't match pod topology spread constraints"
MISSING = SKEW + " (missing required label)"
WANT = {"S": None, "U": (UNSCHEDULABLE, (SKEW,)), "UU": (UNRESOLVABLE, (MISSING,))}
HOST = "kubernetes.io/hostname"
FOO_SEL, BAR_SEL = (
    {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
    {"matchExpressions": [{"key": "bar", "operator": "Exists"}]},
)
FOO, BAR, FOOBAR = {"foo": ""}, {"bar": ""}, {"foo": "", "bar": ""}
UNSCHEDULABLE = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


def C(
    skew: int,
    key: str,
    sel: Any = FOO_SEL,
    hard: bool = True,
    min_domains: int | None = None,
    affinity: str | None = None,
    taints: str | None = None,
    keys: list[str] | None = None,
) -> dict[str, Any]:
    """st.SpreadConstraint(maxSkew, topologyKey, whenUnsatisfiable, selector, minDomains,
    nodeAffinityPolicy, nodeTaintsPolicy, matchLabelKeys); ``sel=None`` is a null selector."""
    c: dict[str, Any] = {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
    }
    for field, value in (
        ("labelSelector", sel),
        ("minDomains", min_domains),
        ("nodeAffinityPolicy", affinity),
        ("nodeTaintsPolicy", taints),
        ("matchLabelKeys", keys),
    ):
        if value is not None:
            c[field] = value
    return c


def P(
    labels: dict[str, str],
    *constraints: dict[str, Any],
    selector: dict[str, str] | None = None,
    affinity: tuple[str, str, list[str]] | None = None,
) -> Any:
    """The incoming pod "p": labels, constraints, nodeSelector, one required node affinity
    expression (key, operator, values)."""
    spec: dict[str, Any] = {"topologySpreadConstraints": list(constraints)}
    if selector is not None:
        spec["nodeSelector"] = selector
    if affinity is not None:
        key, op, values = affinity
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": op, "values": values}]}]
                }
            }
        }
    return pod("p", spec=spec, labels=labels)


def E(name: str, on: str, labels: dict[str, str] = FOO, ns: str = "default", terminating: bool = False) -> Any:
    meta = {"deletionTimestamp": "2024-01-01T00:00:00Z"} if terminating else {}
    return pod(name, ns, labels=labels, node_name=on, **meta)


def spread(**counts: int) -> list[Any]:
    """``spread(a=2, y=3)``: pods p-a1, p-a2 on node-a and p-y1..p-y3 on node-y, labelled foo."""
    return [E(f"p-{n}{i}", f"node-{n}") for n, k in counts.items() for i in range(1, k + 1)]


def N(name: str, taints: list | None = None, **labels: str) -> Any:
    return node(name, dict(labels), taints=taints or ())


def zn(*specs: str, key: str = "node", **extra: str) -> list[Any]:
    """Nodes "a:zone1" -> node-a {zone: zone1, node: node-a}; "a" -> node-a {node: node-a}."""
    out = []
    for s in specs:
        name, _, zone = s.partition(":")
        labels = {"zone": zone} if zone else {}
        out.append(node(f"node-{name}", {**labels, key: f"node-{name}", **extra}))
    return out


ABXY = zn("a:zone1", "b:zone1", "x:zone2", "y:zone2")
ABC = zn("a", "b", "c")
FOO_NODES = [
    N("node-a", node="node-a", foo=""),
    N("node-b", node="node-b", foo=""),
    N("node-x", node="node-x", foo=""),
    N("node-y", node="node-y"),
]
TAINTED = FOO_NODES[:3] + [N("node-y", UNSCHEDULABLE, node="node-y")]
AB_Y = [E("p-b1", "node-a"), E("p-b2", "node-b"), E("p-y1", "node-y")]

SINGLE = [
    ("no existing pods", P(FOO, C(1, "zone")), ABXY, [], "S S S S"),
    ("no existing pods, incoming pod doesn't match itself", P(FOO, C(1, "zone", BAR_SEL)), ABXY, [], "S S S S"),
    (
        "existing pods in a different namespace do not count",
        P(FOO, C(1, "zone")),
        ABXY,
        [E("p-a1", "node-a", ns="ns1"), E("p-b1", "node-a", ns="ns2"), *spread(x=1, y=1)],
        "S S U U",
    ),
    ("existing pods do not match null selector", P(FOO, C(1, "zone", None)), ABXY, spread(x=1, y=1), "S S S S"),
    ("pods spread across zones as 3/3, all nodes fit", P(FOO, C(1, "zone")), ABXY, spread(a=2, b=1, y=3), "S S S S"),
    (
        "pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
        P(FOO, C(1, "zone")),
        [ABXY[0], node("node-b", {"zon": "zone1", "node": "node-b"}), *ABXY[2:]],
        spread(a=1, b=1, x=1, y=1),
        "S UU U U",
    ),
    (
        "pod cannot be scheduled as all nodes don't have label 'rack'",
        P(FOO, C(1, "rack")),
        [ABXY[0], ABXY[2]],
        [],
        "UU UU",
    ),
    (
        "pods spread across nodes as 2/1/0/3, only node-x fits",
        P(FOO, C(1, "node")),
        ABXY,
        spread(a=2, b=1, y=3),
        "U U S U",
    ),
    (
        "pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
        P(FOO, C(2, "node")),
        ABXY,
        spread(a=2, b=1, y=3),
        "U S S U",
    ),
    (
        "pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
        P(BAR, C(1, "node")),
        ABXY,
        spread(a=2, b=1, y=3),
        "U S S U",
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
        P(FOO, C(1, "node"), affinity=("node", "In", ["node-a", "node-y"])),
        ABXY,
        spread(a=2, b=1, y=3),
        "S S S U",
    ),
    (
        "terminating Pods should be excluded",
        P(FOO, C(1, "node")),
        zn("a", "b"),
        [E("p-a", "node-a", terminating=True), E("p-b", "node-b")],
        "S U",
    ),
    (
        "incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
        P(FOO, C(1, "zone"), affinity=("node", "NotIn", ["node-b"])),
        ABXY,
        spread(b=2, y=1),
        "S S U U",
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third node fits",
        P(FOO, C(2, "node", min_domains=4)),
        ABC,
        spread(a=2, b=2, c=1),
        "U U S",
    ),
    (
        "pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all nodes fit",
        P(FOO, C(2, "node", min_domains=2)),
        ABC,
        spread(a=2, b=2, c=1),
        "S S S",
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and fourth nodes fit",
        P(FOO, C(2, "zone", min_domains=3)),
        ABXY,
        AB_Y,
        "U U S S",
    ),
    (
        "pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes fit",
        P(FOO, C(2, "zone", min_domains=1)),
        ABXY,
        AB_Y,
        "S S S S",
    ),
    ("NodeAffinityPolicy honored with labelSelectors", P(FOO, C(1, "node"), selector=FOO), FOO_NODES, AB_Y, "U U S S"),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        P(FOO, C(1, "node", affinity="Ignore"), selector=FOO),
        FOO_NODES,
        AB_Y,
        "U U S U",
    ),
    (
        "NodeAffinityPolicy honored with nodeAffinity",
        P(FOO, C(1, "node"), affinity=("foo", "In", [""])),
        FOO_NODES,
        AB_Y,
        "U U S S",
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        P(FOO, C(1, "node", affinity="Ignore"), affinity=("foo", "In", [""])),
        FOO_NODES,
        AB_Y,
        "U U S U",
    ),
    ("NodeTaintsPolicy honored", P(FOO, C(1, "node", taints="Honor")), TAINTED, AB_Y, "U U S S"),
    ("NodeTaintsPolicy ignored", P(FOO, C(1, "node")), TAINTED, AB_Y, "U U S U"),
]

ZONE_NODE = (C(1, "zone"), C(1, "node"))
FOO_ZONES = [
    N("node-a", zone="zone1", node="node-a", foo=""),
    N("node-b", zone="zone1", node="node-b", foo=""),
    N("node-x", zone="zone2", node="node-x", foo=""),
]
AB_Y1 = spread(a=1, b=1, y=1)
MULTIPLE = [
    (
        "two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
        P(FOO, *ZONE_NODE),
        ABXY,
        spread(a=2, b=1, y=3),
        "U U S U",
    ),
    (
        "two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
        P(FOO, *ZONE_NODE),
        ABXY,
        spread(a=2, b=1, y=4),
        "U U U U",
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
        P(FOOBAR, C(1, "zone"), C(1, "node", BAR_SEL)),
        ABXY,
        [E("p-a1", "node-a"), E("p-y1", "node-y", BAR)],
        "U U S U",
    ),
    (
        "Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
        P(FOOBAR, C(1, "zone"), C(1, "node", BAR_SEL)),
        ABXY,
        [E("p-a1", "node-a"), E("p-x1", "node-x", BAR), E("p-y1", "node-y", BAR)],
        "U U U U",
    ),
    (
        "Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
        P(FOOBAR, C(1, "zone"), C(1, "node", BAR_SEL)),
        ABXY,
        [
            E("p-a1", "node-a"),
            E("p-a2", "node-a", FOOBAR),
            E("p-y1", "node-y"),
            E("p-y2", "node-y", FOOBAR),
            E("p-y3", "node-y"),
        ],
        "U S U U",
    ),
    (
        "Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
        P(BAR, C(1, "zone"), C(1, "node", BAR_SEL)),
        ABXY,
        [E("p-a1", "node-a"), E("p-x1", "node-x", BAR), E("p-y1", "node-y", BAR)],
        "S S U U",
    ),
    (
        "two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
        P(FOO, *ZONE_NODE),
        [*ABXY[:2], N("node-x", zone="zone2"), ABXY[3]],
        [E("p-a1", "node-a"), E("p-y3", "node-y")],
        "U S UU U",
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
        P(FOO, C(1, "zone"), C(1, "node", affinity="Ignore"), selector=FOO),
        [*FOO_ZONES, N("node-y", zone="zone2", node="node-y")],
        AB_Y1,
        "U U S U",
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
        P(FOO, C(1, "zone", taints="Honor"), C(1, "node")),
        [*FOO_ZONES, N("node-y", UNSCHEDULABLE, zone="zone2", node="node-y")],
        AB_Y1,
        "U U S U",
    ),
    (
        "two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
        P(FOO, *ZONE_NODE, selector=FOO),
        [
            FOO_ZONES[0],
            N("node-b", zone="zone1", node="node-b"),
            FOO_ZONES[2],
            N("node-y", UNSCHEDULABLE, zone="zone2", node="node-y", foo=""),
        ],
        AB_Y1,
        "U S S U",
    ),
    (
        "two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
        P(FOO, C(1, "zone", taints="Honor"), C(1, "node", affinity="Ignore"), selector=FOO),
        [
            FOO_ZONES[0],
            N("node-b", zone="zone1", node="node-b"),
            FOO_ZONES[2],
            N("node-y", UNSCHEDULABLE, zone="zone2", node="node-y", foo=""),
        ],
        AB_Y1,
        "U U S U",
    ),
]


def _filter_case(c: tuple) -> Any:
    return pytest.param(*c[1:], id=c[0])


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "codes"), [_filter_case(c) for c in SINGLE] + [_filter_case(c) for c in MULTIPLE]
)
def test_filter(incoming: Any, nodes: list, pods: list, codes: str) -> None:
    """TestSingleConstraint, then TestMultipleConstraints."""
    cluster = state(nodes, pods)
    got = {n.name: filter_status(incoming, cluster, n.name, "PodTopologySpread") for n in nodes}
    assert got == {n.name: WANT[code] for n, code in zip(nodes, codes.split(), strict=True)}


# --- TestPodTopologySpreadScore -------------------------------------------------------------------

HOSTS = zn("a", "b", "c", "d", key=HOST)
SOFT_HOST, SOFT_ZONE = C(1, HOST, hard=False), C(1, "zone", hard=False)
ZONES_H = zn("a:zone1", "b:zone1", "x:zone2", "y:zone2", key=HOST)
FOO_ABC = [N("node-a", node="node-a", foo=""), N("node-b", node="node-b", foo=""), N("node-c", node="node-c")]
ABC_TAINT = [*zn("a", "b"), N("node-c", UNSCHEDULABLE, node="node-c")]
SELECTORS = [E("p-a1", "node-a"), E("p-b1", "node-b", FOOBAR), E("p-y1", "node-y"), E("p-y2", "node-y", BAR)]
ZONES_CD = zn("a:zone1", "b:zone1", "c:zone2", "d:zone2", key=HOST)
A2B1C1 = spread(a=2, b=1, c=1)
BAZ = {"foo": "", "bar": "", "baz": ""}

SCORE = [
    # TestPreScoreSkip: without ScheduleAnyway constraints the plugin is skipped (no score)
    ("the pod doesn't have soft topology spread Constraints", P({}), HOSTS[:2], [], None, [0, 0]),
    ("one constraint on node, no existing pods", P(FOO, SOFT_HOST), HOSTS[:2], [], None, [100, 100]),
    (
        "one constraint on node, only one node is candidate",
        P(FOO, SOFT_HOST),
        HOSTS[:2],
        spread(a=2, b=1),
        ["node-a"],
        [100],
    ),
    (
        "one constraint on node, all nodes have the same number of matching pods",
        P(FOO, SOFT_HOST),
        HOSTS[:2],
        spread(a=1, b=1),
        None,
        [100, 100],
    ),
    (
        "one constraint on node, all 4 nodes are candidates",
        P(FOO, SOFT_HOST),
        HOSTS,
        spread(a=2, b=1, d=3),
        None,
        [20, 60, 100, 0],
    ),
    (
        "one constraint on node, null selector",
        P(FOO, C(1, HOST, None, hard=False)),
        HOSTS,
        spread(a=2, b=1, d=3),
        None,
        [100, 100, 100, 100],
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=2",
        P(FOO, C(2, HOST, hard=False)),
        HOSTS,
        spread(a=2, b=1, d=3),
        None,
        [33, 66, 100, 16],
    ),
    (
        "one constraint on node, all 4 nodes are candidates, maxSkew=3",
        P(FOO, C(3, HOST, hard=False)),
        HOSTS,
        spread(a=4, b=3, c=2, d=1),
        None,
        [44, 66, 77, 100],
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates",
        P(FOO, SOFT_HOST),
        zn("a", "b", "x", "y", key=HOST),
        spread(a=4, b=2, x=1, y=3),
        ["node-a", "node-b", "node-x"],
        [33, 83, 100],
    ),
    (
        "one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
        P(FOO, SOFT_HOST),
        [*zn("a", key=HOST), N("node-b", n="node-b"), *zn("x", "y", key=HOST)],
        spread(a=4, b=2, x=1, y=3),
        ["node-a", "node-b", "node-x"],
        [16, 0, 100],
    ),
    (
        "one constraint on zone, 3 out of 4 nodes are candidates",
        P(FOO, SOFT_ZONE),
        ZONES_H,
        spread(a=4, b=2, x=1, y=3),
        ["node-a", "node-b", "node-x"],
        [75, 75, 100],
    ),
    (
        "two Constraints on zone and node, 2 out of 4 nodes are candidates",
        P(FOO, SOFT_ZONE, SOFT_HOST),
        ZONES_H,
        spread(a=2, b=1, x=2, y=4),
        ["node-a", "node-x"],
        [100, 63],
    ),
    (
        "two Constraints on zone and node, with different labelSelectors",
        P(FOOBAR, SOFT_ZONE, C(1, HOST, BAR_SEL, hard=False)),
        ZONES_H,
        SELECTORS,
        None,
        [60, 20, 100, 60],
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
        P(FOOBAR, SOFT_ZONE, C(1, HOST, BAR_SEL, hard=False)),
        ZONES_H,
        [E("p-b1", "node-b", BAR), E("p-x1", "node-x"), E("p-y1", "node-y", FOOBAR)],
        None,
        [100, 60, 40, 0],
    ),
    (
        "two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
        P(FOOBAR, SOFT_ZONE, C(1, HOST, BAR_SEL, hard=False)),
        ZONES_H,
        SELECTORS,
        ["node-a", "node-b", "node-x"],
        [50, 25, 100],
    ),
    (
        "existing pods in a different namespace do not count",
        P(FOO, SOFT_HOST),
        HOSTS[:2],
        [E("p-a1", "node-a", ns="ns1"), E("p-a2", "node-a"), *spread(b=2)],
        None,
        [100, 33],
    ),
    (
        "terminating Pods should be excluded",
        P(FOO, SOFT_HOST),
        HOSTS[:2],
        [E("p-a", "node-a", terminating=True), E("p-b", "node-b")],
        None,
        [100, 0],
    ),
    (
        "minDomains has no effect when ScheduleAnyway",
        P(FOO, C(2, "node", hard=False, min_domains=10)),
        ABC,
        spread(a=2, b=2, c=1),
        None,
        [75, 75, 100],
    ),
    (
        "NodeAffinityPolicy honoed with labelSelectors",
        P(FOO, C(1, "node", hard=False), selector=FOO),
        FOO_ABC,
        A2B1C1,
        None,
        [0, 33, 100],
    ),
    (
        "NodeAffinityPolicy ignored with labelSelectors",
        P(FOO, C(1, "node", hard=False, affinity="Ignore"), selector=FOO),
        FOO_ABC,
        A2B1C1,
        None,
        [66, 100, 100],
    ),
    (
        "NodeAffinityPolicy honoed with nodeAffinity",
        P(FOO, C(1, "node", hard=False), affinity=("foo", "In", [""])),
        FOO_ABC,
        A2B1C1,
        None,
        [0, 33, 100],
    ),
    (
        "NodeAffinityPolicy ignored with nodeAffinity",
        P(FOO, C(1, "node", hard=False, affinity="Ignore"), affinity=("foo", "In", [""])),
        FOO_ABC,
        A2B1C1,
        None,
        [66, 100, 100],
    ),
    (
        "NodeTaintsPolicy honored",
        P(FOO, C(1, "node", hard=False, taints="Honor")),
        ABC_TAINT,
        A2B1C1,
        None,
        [0, 33, 100],
    ),
    ("NodeTaintsPolicy ignored", P(FOO, C(1, "node", hard=False)), ABC_TAINT, A2B1C1, None, [66, 100, 100]),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
        P(FOOBAR, C(1, "zone", {}, hard=False, keys=["foo"]), C(1, HOST, {}, hard=False, keys=["bar"])),
        ZONES_CD,
        [E("p-a1", "node-a"), E("p-b1", "node-b", FOOBAR), E("p-y1", "node-c"), E("p-y2", "node-c", BAR)],
        None,
        [60, 20, 60, 100],
    ),
    (
        "matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
        P(BAZ, SOFT_ZONE, C(1, HOST, BAR_SEL, hard=False, keys=["baz"])),
        ZONES_CD,
        [
            E("p-a1", "node-a"),
            E("p-b1", "node-b", BAZ),
            E("p-c1", "node-c"),
            E("p-c2", "node-c", BAR),
            E("p-d3", "node-c", {"bar": "", "baz": ""}),
        ],
        None,
        [60, 20, 60, 100],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "feasible", "want"), [pytest.param(*c[1:], id=c[0]) for c in SCORE]
)
def test_pod_topology_spread_score(incoming: Any, nodes: list, pods: list, feasible: list | None, want: list) -> None:
    names = feasible if feasible is not None else [n.name for n in nodes]
    got = normalized_scores(incoming, state(nodes, pods), "PodTopologySpread", feasible=names)
    assert got == dict(zip(names, want, strict=True))


# --- system default spreading (upstream runs these tables with DefaultingType: System) ----------

ZONE = "topology.kubernetes.io/zone"
FOO_EXISTS = LabelSelector((), (LabelSelectorRequirement("foo", "Exists"),))
FOO_TAR = {"foo": "tar", "baz": "sup"}
MARS = [
    node("node-a", {HOST: "node-a", ZONE: "mars"}),
    node("node-b", {HOST: "node-b", ZONE: "mars"}),
    node("node-c", {HOST: "node-c"}),  # nodes without a zone are not left out: a zone "" of their own
    node("node-d", {HOST: "node-d"}),
]

SYSTEM_SCORE = [
    (
        "system defaulting, nodes don't have zone, pods match service",
        pod("p", labels=FOO),
        HOSTS,
        spread(a=4, b=3, c=2, d=1),
        [service("svc", selector=FOO)],
        [44, 66, 77, 100],
    ),
    # TestPreScoreSkip "default constraints and a replicaset that doesn't match", with the system
    # defaults for the listed ones: the pod's owner rs2 is not in the cluster, so nothing selects
    # it and the plugin skips it (0; a scored lone node would get 100).
    (
        "system defaults and a replicaset that doesn't match",
        pod("p", labels={"foo": "bar", "baz": "sup"}, **owned_by("ReplicaSet", "rs2")),
        HOSTS[:1],
        [],
        [controller("ReplicaSet", "rs1", selector={"matchExpressions": [{"key": "tar", "operator": "Exists"}]})],
        [0],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "pods", "objs", "want"), [pytest.param(*c[1:], id=c[0]) for c in SYSTEM_SCORE]
)
def test_system_default_score(incoming: Any, nodes: list, pods: list, objs: list, want: list) -> None:
    names = [n.name for n in nodes]
    got = normalized_scores(incoming, state(nodes, pods, workloads=objs), "PodTopologySpread", feasible=names)
    assert got == dict(zip(names, want, strict=True))


def _prescore(incoming: Any, cluster: Any) -> Any:
    bound = bind(incoming, cluster)
    bound.ctx.feasible = list(cluster.nodes)
    return _spread_score_state(bound.ctx)


def test_system_default_constraints_and_a_replicaset() -> None:
    """TestPreScoreStateEmptyNodes "system default constraints and a replicaset"."""
    rs1 = controller("ReplicaSet", "rs1", selector=FOO_SEL)
    got = _prescore(pod("p", labels=FOO_TAR, **owned_by("ReplicaSet", "rs1")), state(MARS, workloads=[rs1]))
    assert [(c.max_skew, c.topology_key, c.selector, c.min_domains) for c in got.constraints] == [
        (3, HOST, FOO_EXISTS, 1),
        (5, ZONE, FOO_EXISTS, 1),
    ]
    assert [(c.honor_affinity, c.honor_taints) for c in got.constraints] == [(True, False)] * 2
    assert got.ignored == frozenset()
    assert got.counts == [{}, {"mars": 0, "": 0}]
    assert got.weights == [math.log(4 + 2), math.log(2 + 2)]


def test_system_defaults_and_a_replicaset_but_pod_has_constraints() -> None:
    """TestPreScoreStateEmptyNodes "default constraints and a replicaset, but pod has
    constraints", with the system defaults for the listed ones: the pod's own soft constraints
    are scored, the defaults are not."""
    rs1 = controller("ReplicaSet", "rs1", selector=FOO_SEL)
    incoming = pod(
        "p",
        spec={
            "topologySpreadConstraints": [
                C(1, "zone", BAR_SEL),
                C(2, "planet", {"matchLabels": {"baz": "sup"}}, hard=False),
            ]
        },
        labels={"foo": "bar", "baz": "sup"},
        **owned_by("ReplicaSet", "rs1"),
    )
    got = _prescore(incoming, state([node("node-a", {"planet": "mars", "galaxy": "andromeda"})], workloads=[rs1]))
    assert [(c.max_skew, c.topology_key, c.selector) for c in got.constraints] == [
        (2, "planet", LabelSelector((("baz", "sup"),)))
    ]
    assert got.counts == [{"mars": 0}]
    assert got.weights == [math.log(1 + 2)]
