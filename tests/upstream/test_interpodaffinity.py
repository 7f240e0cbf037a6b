"""kube-scheduler's InterPodAffinity unit tests, run through rules/default.rules.

Ported from pkg/scheduler/framework/plugins/interpodaffinity: filtering_test.go
(TestRequiredAffinitySingleNode, TestRequiredAffinityMultipleNodes) and scoring_test.go
(TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight). Test ids are the
upstream test names. Upstream's namespace "" is rulesched's "default" (the decoder defaults it).
A PreFilter/PreScore "Skip" is asserted as what it means for the cycle: the filter passes, every
score is 0.

Not ported: "PodAffinity fails PreFilter with an invalid affinity label syntax",
"PodAntiAffinity fails PreFilter with an invalid antiaffinity label syntax", "invalid Affinity
fails PreScore", "invalid AntiAffinity fails PreScore" (label value syntax validation is the API
server's job, not the rules'); "Ignore preferred terms of existing pods" and "with zero weight"
(InterPodAffinityArgs ignorePreferredTermsOfExistingPods / hardPodAffinityWeight are not
configurable: rulesched uses the defaults, false and 1).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.upstream.harness import UNRESOLVABLE, UNSCHEDULABLE, filter_status, node, normalized_scores, pod, state

AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXIST = "node(s) didn't satisfy existing pods anti-affinity rules"


def status(reason: str | None) -> tuple[str, tuple[str, ...]] | None:
    """Upstream's status for a reason: only the pod's own affinity is UnschedulableAndUnresolvable."""
    return None if reason is None else (UNRESOLVABLE if reason == AFF else UNSCHEDULABLE, (reason,))


NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}
_names = itertools.count()


def In(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def NotIn(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def Ex(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def DNE(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "DoesNotExist"}


def T(
    topo: str, *exprs: dict[str, Any], nss: list[str] | None = None, nsel: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A PodAffinityTerm: label selector of ANDed expressions, topology key, namespaces."""
    term: dict[str, Any] = {"labelSelector": {"matchExpressions": list(exprs)}, "topologyKey": topo}
    if nss is not None:
        term["namespaces"] = nss
    if nsel is not None:
        term["namespaceSelector"] = nsel
    return term


def mk(
    labels: dict[str, str] | None = None,
    ns: str = "default",
    on: str = "",
    aff: tuple = (),
    anti: tuple = (),
    paff: tuple = (),
    panti: tuple = (),
) -> Any:
    """A pod (on node ``on`` if given) with required terms and (weight, term) preferred terms."""
    affinity: dict[str, Any] = {}
    for key, req, pref in (("podAffinity", aff, paff), ("podAntiAffinity", anti, panti)):
        if req or pref:
            affinity[key] = {
                "requiredDuringSchedulingIgnoredDuringExecution": list(req),
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": w, "podAffinityTerm": t} for w, t in pref
                ],
            }
    return pod(f"p{next(_names)}", ns, spec={"affinity": affinity} if affinity else None, labels=labels, node_name=on)


S1, S2 = {"security": "S1"}, {"security": "S2"}
SVC = {"service": "securityscan"}
TEAM1 = {"matchExpressions": [In("team", "team1")]}

# --- TestRequiredAffinitySingleNode: node1 {region: r1, zone: z11} ---------------------------------

SINGLE = [
    (
        "A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
        mk(),
        [],
        None,
    ),
    (
        "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that matches the existing pod",
        mk(S1, aff=[T("region", In("service", "securityscan", "value2"))]),
        [mk(SVC, on="node1")],
        None,
    ),
    (
        "satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in operator in labelSelector that matches the existing pod",
        mk(S1, aff=[T("region", NotIn("service", "securityscan3", "value3"))]),
        [mk(SVC, on="node1")],
        None,
    ),
    # upstream leaves topologyKey empty here (the API rejects that); any key gives the same result
    (
        "Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
        mk(S1, aff=[T("region", In("service", "securityscan", "value2"), nss=["DiffNameSpace"])]),
        [mk(SVC, ns="ns", on="node1")],
        AFF,
    ),
    (
        "Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
        mk(SVC, aff=[T("region", In("service", "antivirusscan", "value2"))]),
        [mk(SVC, on="node1")],
        AFF,
    ),
    (
        "satisfies the PodAffinity with different label Operators in multiple RequiredDuringSchedulingIgnoredDuringExecution ",
        mk(
            S1,
            aff=[
                T("region", Ex("service"), DNE("wrongkey")),
                T("region", In("service", "securityscan"), NotIn("service", "WrongValue")),
            ],
        ),
        [mk(SVC, on="node1")],
        None,
    ),
    (
        "The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the node because one of the matchExpression item don't match.",
        mk(
            S1,
            aff=[
                T("region", Ex("service"), DNE("wrongkey")),
                T("region", In("service", "securityscan2"), NotIn("service", "WrongValue")),
            ],
        ),
        [mk(SVC, on="node1")],
        AFF,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity with the existing pod",
        mk(
            S1,
            aff=[T("region", In("service", "securityscan", "value2"))],
            anti=[T("node", In("service", "antivirusscan", "value2"))],
        ),
        [mk(SVC, on="node1")],
        None,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
        mk(
            S1,
            aff=[T("region", In("service", "securityscan", "value2"))],
            anti=[T("node", In("service", "antivirusscan", "value2"))],
        ),
        [mk(SVC, on="node1", anti=[T("node", In("service", "antivirusscan", "value2"))])],
        None,
    ),
    (
        "satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
        mk(
            S1,
            aff=[T("region", In("service", "securityscan", "value2"))],
            anti=[T("zone", In("service", "securityscan", "value2"))],
        ),
        [mk(SVC, on="node1")],
        ANTI,
    ),
    (
        "satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        mk(
            SVC,
            aff=[T("region", In("service", "securityscan", "value2"))],
            anti=[T("node", In("service", "antivirusscan", "value2"))],
        ),
        [mk(SVC, on="node1", anti=[T("zone", In("service", "securityscan", "value2"))])],
        EXIST,
    ),
    (
        "pod matches its own Label in PodAffinity and that matches the existing pod Labels",
        mk(SVC, aff=[T("region", NotIn("service", "securityscan", "value2"))]),
        [mk(SVC, on="node2")],
        AFF,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. doesn't satisfy PodAntiAffinity symmetry with the existing pod",
        mk(SVC),
        [mk(SVC, on="node1", anti=[T("zone", In("service", "securityscan", "value2"))])],
        EXIST,
    ),
    (
        "verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. satisfy PodAntiAffinity symmetry with the existing pod",
        mk(SVC),
        [mk(SVC, on="node1", anti=[T("zone", NotIn("service", "securityscan", "value2"))])],
        None,
    ),
    (
        "satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with incoming pod",
        mk(SVC, anti=[T("region", Ex("service")), T("region", Ex("security"))]),
        [mk(S1, on="node1", anti=[T("zone", Ex("security"))])],
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on AffinityTerms",
        mk(SVC, anti=[T("zone", Ex("service")), T("zone", Ex("security"))]),
        [mk(S1, on="node1", anti=[T("zone", Ex("security"))])],
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on AffinityTerms",
        mk(S1, anti=[T("zone", Ex("security"))]),
        [mk(SVC, on="node1", anti=[T("zone", Ex("service")), T("zone", Ex("security"))])],
        EXIST,
    ),
    (
        "PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on AffinityTerms",
        mk({"abc": "", "xyz": ""}, anti=[T("zone", Ex("abc")), T("zone", Ex("def"))]),
        [mk({"def": "", "xyz": ""}, on="node1", anti=[T("zone", Ex("abc")), T("zone", Ex("def"))])],
        ANTI,
    ),
    (
        "PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on AffinityTerms",
        mk({"def": "", "xyz": ""}, anti=[T("zone", Ex("abc")), T("zone", Ex("def"))]),
        [mk({"abc": "", "xyz": ""}, on="node1", anti=[T("zone", Ex("abc")), T("zone", Ex("def"))])],
        ANTI,
    ),
    (
        "affinity with NamespaceSelector",
        mk(S1, aff=[T("region", In("service", "securityscan", "value2"), nsel=TEAM1)]),
        [mk(SVC, ns="subteam1.team1", on="node1")],
        None,
    ),
    (
        "affinity with non-matching NamespaceSelector",
        mk(S1, aff=[T("region", In("service", "securityscan", "value2"), nsel=TEAM1)]),
        [mk(SVC, ns="subteam1.team2", on="node1")],
        AFF,
    ),
    (
        "anti-affinity with matching NamespaceSelector",
        mk(S1, ns="subteam1.team1", anti=[T("zone", In("service", "securityscan", "value2"), nsel=TEAM1)]),
        [mk(SVC, ns="subteam2.team1", on="node1")],
        ANTI,
    ),
    (
        "anti-affinity with matching all NamespaceSelector",
        mk(S1, ns="subteam1.team1", anti=[T("zone", In("service", "securityscan", "value2"), nsel={})]),
        [mk(SVC, ns="subteam2.team1", on="node1")],
        ANTI,
    ),
    (
        "anti-affinity with non-matching NamespaceSelector",
        mk(S1, ns="subteam1.team1", anti=[T("zone", In("service", "securityscan", "value2"), nsel=TEAM1)]),
        [mk(SVC, ns="subteam1.team2", on="node1")],
        None,
    ),
]


@pytest.mark.parametrize(("incoming", "pods", "want"), [pytest.param(*c[1:], id=c[0]) for c in SINGLE])
def test_required_affinity_single_node(incoming: Any, pods: list, want: str | None) -> None:
    nodes = [node("node1", {"region": "r1", "zone": "z11"})]
    if any(p.node_name == "node2" for p in pods):  # upstream's snapshot holds the pod, not node2
        nodes.append(node("node2"))
    cluster = state(nodes, pods, namespaces=NAMESPACES)
    got = filter_status(incoming, cluster, "node1", "InterPodAffinity")
    assert got == status(want)


# --- TestRequiredAffinityMultipleNodes ------------------------------------------------------------

CHINA, CHINA_AZ1, INDIA = {"region": "China"}, {"region": "China", "az": "az1"}, {"region": "India"}


def three(r1: dict, r2: dict, r3: dict | None = None, names: str = "ABC") -> list[tuple[str, dict]]:
    out = [(f"node{names[0]}", r1), (f"node{names[1]}", r2)]
    return out + ([(f"node{names[2]}", r3)] if r3 is not None else [])


def rz(zone: str, host: str, region: str = "r1") -> dict[str, str]:
    return {"region": region, "zone": zone, "hostname": host}


FOO, BAR, FOOBAR = {"foo": ""}, {"bar": ""}, {"foo": "", "bar": ""}
MULTI = [
    (
        "A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them has an existing pod that matches the affinity rules",
        mk(aff=[T("region", In("foo", "bar"))]),
        [mk({"foo": "bar"}, on="node1")],
        [("node1", CHINA), ("node2", CHINA_AZ1), ("node3", INDIA)],
        [None, None, AFF],
    ),
    (
        "The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of the collection should not be blocked from being scheduled onto any node, even there's no existing pod that matches the rule anywhere.",
        mk(
            {"foo": "bar", "service": "securityscan"},
            aff=[T("zone", In("foo", "bar")), T("zone", In("service", "securityscan"))],
        ),
        [mk({"foo": "bar"}, on="nodeA")],
        three({"zone": "az1", "hostname": "h1"}, {"zone": "az2", "hostname": "h2"}),
        [None, None],
    ),
    (
        "The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
        mk(
            {"foo": "bar", "service": "securityscan"},
            aff=[T("zone", In("foo", "bar")), T("zone", In("service", "securityscan"))],
        ),
        [mk({"foo": "bar"}, on="nodeA")],
        three({"zoneLabel": "az1", "hostname": "h1"}, {"zoneLabel": "az2", "hostname": "h2"}),
        [AFF, AFF],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
        mk(anti=[T("region", In("foo", "abc"))]),
        [mk({"foo": "abc"}, on="nodeA")],
        three({"region": "r1", "hostname": "nodeA"}, {"region": "r1", "hostname": "nodeB"}),
        [ANTI, ANTI],
    ),
    (
        "This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
        mk(anti=[T("region", In("foo", "abc")), T("zone", In("service", "securityscan"))]),
        [mk({"foo": "abc", "service": "securityscan"}, on="nodeA")],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [ANTI, ANTI],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
        mk(anti=[T("region", In("foo", "abc"))]),
        [mk({"foo": "abc"}, on="nodeA")],
        three(CHINA, CHINA_AZ1, INDIA),
        [ANTI, ANTI, None],
    ),
    (
        "NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC has an existing pod that match the inter pod affinity rule but in different namespace)",
        mk({"foo": "123"}, ns="NS1", anti=[T("region", In("foo", "bar"))]),
        [mk({"foo": "bar"}, ns="NS1", on="nodeA"), mk(ns="NS2", on="nodeC", anti=[T("region", In("foo", "123"))])],
        three(CHINA, CHINA_AZ1, INDIA),
        [ANTI, ANTI, None],
    ),
    (
        "Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector of the term is firstly checked, and then topologyKey of the term is also checked",
        mk(FOO),
        [mk(on="nodeA", anti=[T("invalid-node-label", Ex("foo"))])],
        three(rz("z1", "nodeA"), rz("z1", "nodeB")),
        [None, None],
    ),
    (
        "Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
        mk(anti=[T("invalid-node-label", Ex("foo"))]),
        [mk(FOO, on="nodeA")],
        three(rz("z1", "nodeA"), rz("z1", "nodeB")),
        [None, None],
    ),
    (
        "Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each existingPod's terms on all nodes",
        mk(FOOBAR),
        [mk(on="nodeA", anti=[T("zone", Ex("foo"))]), mk(on="nodeA", anti=[T("region", Ex("bar"))])],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [EXIST, EXIST],
    ),
    (
        "Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one anti-affinity rule of existingPod",
        mk(anti=[T("zone", Ex("foo")), T("region", Ex("bar"))]),
        [mk(FOO, on="nodeA"), mk(BAR, on="nodeB")],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [ANTI, ANTI],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
        mk(FOOBAR),
        [mk(on="nodeA", anti=[T("invalid-node-label", Ex("foo")), T("zone", Ex("bar"))])],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [EXIST, None],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when one term has invalid topologyKey",
        mk(anti=[T("invalid-node-label", Ex("foo")), T("zone", Ex("bar"))]),
        [mk(FOOBAR, on="nodeA")],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [ANTI, None],
    ),
    (
        "Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
        mk(FOOBAR),
        [mk(on="nodeA", anti=[T("region", Ex("foo")), T("zone", Ex("bar"))])],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [EXIST, EXIST],
    ),
    (
        "Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a single term match - case when all terms have valid topologyKey",
        mk(anti=[T("region", Ex("foo")), T("zone", Ex("bar"))]),
        [mk(FOOBAR, on="nodeA")],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [ANTI, ANTI],
    ),
    (
        "Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term matches incoming pod, so incoming pod can only be scheduled to nodeC",
        mk(FOOBAR),
        [
            mk(on="nodeA", anti=[T("zone", Ex("foo")), T("zone", Ex("labelA"))]),
            mk(on="nodeB", anti=[T("zone", Ex("bar")), T("zone", Ex("labelB"))]),
        ],
        three(rz("z1", "nodeA"), rz("z2", "nodeB"), rz("z3", "nodeC")),
        [EXIST, EXIST, None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match",
        mk(aff=[T("region", Ex("foo")), T("zone", Ex("bar"))]),
        [mk(FOOBAR, on="nodeA")],
        three(rz("z1", "nodeA"), rz("z1", "nodeB")),
        [None, None],
    ),
    (
        "Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all topologyKeys match, and the match logic should be satisfied on the same pod",
        mk(aff=[T("region", Ex("foo")), T("zone", Ex("bar"))]),
        [mk(FOO, on="nodeA"), mk(BAR, on="nodeB")],
        three(rz("z1", "nodeA"), rz("z2", "nodeB")),
        [AFF, AFF],
    ),
]


@pytest.mark.parametrize(("incoming", "pods", "nodes", "want"), [pytest.param(*c[1:], id=c[0]) for c in MULTI])
def test_required_affinity_multiple_nodes(incoming: Any, pods: list, nodes: list, want: list) -> None:
    cluster = state([node(n, labels) for n, labels in nodes], pods, namespaces={"NS1": {}})
    got = [filter_status(incoming, cluster, n, "InterPodAffinity") for n, _ in nodes]
    assert got == [status(w) for w in want]


# --- TestPreferredAffinity, TestPreferredAffinityWithHardPodAffinitySymmetricWeight ---------------

AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}
WITH_S1 = [(5, T("region", In("security", "S1")))]
WITH_S2 = [(6, T("region", In("security", "S2")))]
AFF3 = [
    (8, T("region", NotIn("security", "S1"), In("security", "S2"))),
    (2, T("region", Ex("security"), DNE("wrongkey"))),
]
HARD = [T("region", In("security", "S1", "value2")), T("region", Ex("security"), DNE("wrongkey"))]
AWAY_S1, AWAY_S2 = [(5, T("az", In("security", "S1")))], [(5, T("az", In("security", "S2")))]
STAY_S1_AWAY_S2 = {"paff": [(8, T("region", In("security", "S1")))], "panti": AWAY_S2}
NSSEL = [(5, T("region", In("security", "S1"), nss=["subteam2.team2"], nsel=TEAM1))]
NS_PODS = [
    ("subteam1.team1", "node1"),
    ("subteam1.team1", "node1"),
    ("subteam1.team2", "node1"),
    ("subteam2.team1", "node2"),
]
NS_PODS2 = [
    ("subteam1.team1", "node1"),
    ("subteam1.team1", "node1"),
    ("subteam2.team2", "node1"),
    ("subteam2.team1", "node2"),
]
N3 = [CHINA, INDIA, AZ1]


def on(*specs: tuple) -> list:
    """Existing pods: (node, labels) or (node, labels, affinity kwargs)."""
    return [mk(s[1], on=s[0], **(s[2] if len(s) > 2 else {})) for s in specs]


PREFERRED = [
    ("all nodes are same priority as Affinity is nil", mk(S1), [], N3, [0, 0, 0]),
    (
        "Affinity: pod that matches topology key & pods in nodes will get high score comparing to otherswhich doesn't match either pods in nodes or in topology key",
        mk(S1, paff=WITH_S1),
        on(("node1", S1), ("node2", S2), ("node3", S1)),
        N3,
        [100, 0, 0],
    ),
    (
        "All the nodes that have the same topology key & label value with one of them has an existing pod that match the affinity rules, have the same score",
        mk(paff=WITH_S1),
        on(("node1", S1)),
        [CHINA, CHINA_AZ1, INDIA],
        [100, 100, 0],
    ),
    (
        "Affinity: nodes in one region has more matching pods comparing to other region, so the region which has more matches will get high score",
        mk(S1, paff=WITH_S2),
        on(*[(n, S2) for n in ("node1", "node1", "node2", "node3", "node4", "node5")]),
        [CHINA, INDIA, CHINA, CHINA, INDIA],
        [100, 0, 100, 100, 0],
    ),
    (
        "Affinity: different Label operators and values for pod affinity scheduling preference, including some match failures ",
        mk(S1, paff=AFF3),
        on(("node1", S1), ("node2", S2), ("node3", S1)),
        N3,
        [20, 100, 0],
    ),
    (
        "Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        mk(S2),
        on(("node1", S1, {"paff": WITH_S1}), ("node2", S2, {"paff": WITH_S2})),
        N3,
        [0, 100, 0],
    ),
    (
        "Affinity symmetry with namespace selector",
        mk(S1, ns="subteam1.team1"),
        on(("node1", S1, {"paff": NSSEL}), ("node2", S2, {"paff": WITH_S2})),
        N3,
        [100, 0, 0],
    ),
    (
        "AntiAffinity symmetry with namespace selector",
        mk(S1, ns="subteam1.team1"),
        on(("node1", S1, {"panti": NSSEL}), ("node2", S2, {"paff": WITH_S2})),
        N3,
        [0, 100, 100],
    ),
    (
        "Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
        mk(S1),
        on(("node1", S1, {"aff": HARD}), ("node2", S2, {"aff": HARD})),
        N3,
        [100, 100, 0],
    ),
    (
        "Anti Affinity: pod that does not match existing pods in node will get high score ",
        mk(S1, panti=AWAY_S1),
        on(("node1", S1), ("node2", S2)),
        [AZ1, CHINA],
        [0, 100],
    ),
    (
        "Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score comparing to others ",
        mk(S1, panti=AWAY_S1),
        on(("node1", S1), ("node2", S1)),
        [AZ1, CHINA],
        [0, 100],
    ),
    (
        "Anti Affinity: one node has more matching pods comparing to other node, so the node which has more unmatches will get high score",
        mk(S1, panti=AWAY_S1),
        on(("node1", S1), ("node1", S1), ("node2", S2)),
        [AZ1, INDIA],
        [0, 100],
    ),
    (
        "Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
        mk(S2),
        on(("node1", S1, {"panti": AWAY_S2}), ("node2", S2, {"panti": AWAY_S1})),
        [AZ1, AZ2],
        [0, 100],
    ),
    (
        "Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity",
        mk(S1, **STAY_S1_AWAY_S2),
        on(("node1", S1), ("node2", S1)),
        [CHINA, AZ1],
        [100, 0],
    ),
    (
        "Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing pods have the same labels",
        mk(S1, **STAY_S1_AWAY_S2),
        on(*[(n, S1) for n in ("node1", "node1", "node2", "node3", "node3", "node4", "node5")]),
        [CHINA_AZ1, INDIA, CHINA, CHINA, INDIA],
        [100, 0, 100, 100, 0],
    ),
    (
        "Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod affinity & anti affinity & symmetry",
        mk(S1, **STAY_S1_AWAY_S2),
        on(("node1", S1), ("node2", S2), ("node3", None, STAY_S1_AWAY_S2), ("node4", None, {"panti": AWAY_S1})),
        [CHINA, AZ1, INDIA, AZ2],
        [100, 0, 100, 0],
    ),
    (
        "Avoid panic when partial nodes in a topology don't have pods with affinity",
        mk(S1),
        on(("node1", S1), ("node2", None, STAY_S1_AWAY_S2)),
        [CHINA, CHINA],
        [0, 0],
    ),
    (
        "Affinity with pods matching NamespaceSelector",
        mk(S1, ns="subteam1.team1", paff=NSSEL),
        [mk(S1, ns=ns, on=n) for ns, n in NS_PODS],
        [CHINA, INDIA],
        [100, 0],
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        mk(S1, ns="subteam1.team1", paff=NSSEL),
        [mk(S1, ns=ns, on=n) for ns, n in NS_PODS2],
        [CHINA, INDIA],
        [100, 0],
    ),
    (
        "Affinity with pods matching NamespaceSelector",
        mk(S1, ns="subteam1.team1", panti=NSSEL),
        [mk(S1, ns=ns, on=n) for ns, n in NS_PODS],
        [CHINA, INDIA],
        [0, 100],
    ),
    (
        "Affinity with pods matching both NamespaceSelector and Namespaces fields",
        mk(S1, ns="subteam1.team1", panti=NSSEL),
        [mk(S1, ns=ns, on=n) for ns, n in NS_PODS2],
        [CHINA, INDIA],
        [0, 100],
    ),
    (
        "Do not ignore preferred terms of existing pods",
        mk(S2),
        on(("node1", S1, STAY_S1_AWAY_S2), ("node2", S2, {"paff": WITH_S2})),
        [CHINA, INDIA],
        [0, 100],
    ),
    ("No nodes to score", mk(S2), [], [], []),
]
# TestPreferredAffinityWithHardPodAffinitySymmetricWeight (upstream namespace "" is "default")
SVC_S1 = {"service": "S1"}
HARD_NS = [T("region", In("service", "S1"), nss=["default", "subteam2.team2"], nsel=TEAM1)]
HARD_PODS = [("node1", None, {"aff": HARD_NS}), ("node2", None, {"aff": HARD_NS})]
PREFERRED += [
    ("with default weight", mk(SVC_S1), on(*HARD_PODS), N3, [100, 100, 0]),
    ("with no matching namespace", mk(SVC_S1, ns="subteam1.team2"), on(*HARD_PODS), N3, [0, 0, 0]),
    ("with matching NamespaceSelector", mk(SVC_S1, ns="subteam1.team1"), on(*HARD_PODS), N3, [100, 100, 0]),
    ("with matching Namespaces", mk(SVC_S1, ns="subteam2.team2"), on(*HARD_PODS), N3, [100, 100, 0]),
]


@pytest.mark.parametrize(("incoming", "pods", "labels", "want"), [pytest.param(*c[1:], id=c[0]) for c in PREFERRED])
def test_preferred_affinity(incoming: Any, pods: list, labels: list, want: list) -> None:
    names = [f"node{i + 1}" for i in range(len(labels))]
    cluster = state([node(n, lab) for n, lab in zip(names, labels, strict=True)], pods, namespaces=NAMESPACES)
    assert normalized_scores(incoming, cluster, "InterPodAffinity") == dict(zip(names, want, strict=True))
