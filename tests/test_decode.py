"""Decoding Kubernetes objects into model values: requests as kube-scheduler computes them, the
API server's defaults, priority resolution, and one-line errors that name file, object and field.

Request cases marked "upstream" are ported from k8s.io/component-helpers/resource/helpers_test.go
(TestPodResourceRequests, TestPodRequestsAndLimits); quantities are in milli-units.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields
from datetime import date, datetime
from typing import Any

import pytest

from rulesched.errors import ObjectError
from rulesched.model.decode import (
    decode_label_selector,
    decode_namespace,
    decode_node,
    decode_pdb,
    decode_pod,
    decode_priority_class,
)
from rulesched.model.objects import (
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodClaim,
    PriorityClass,
    Taint,
    Toleration,
)

Mi = 2**20 * 1000
Gi = 2**30 * 1000


def container(cpu: str | None = None, memory: str | None = None, **extra: Any) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    c: dict[str, Any] = {"name": extra.pop("name", "c"), "image": "app:1"}
    if requests:
        c["resources"] = {"requests": requests}
    c.update(extra)
    return c


def sidecar(cpu: str, name: str = "side") -> dict[str, Any]:
    return container(cpu, name=name, restartPolicy="Always")


def pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": containers or [container()], **spec}
    if init:
        body["initContainers"] = init
    return {"kind": "Pod", "metadata": {"name": "web-1"}, "spec": body}


# -- requests ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "expected"),
    [
        # upstream "nil options, larger init container"
        ([container("1")], [container("4")], None, {"cpu": 4000}),
        # upstream "nil options, larger containers"
        ([container("2"), container("3")], [container("2")], None, {"cpu": 5000}),
        # upstream "pod overhead included"
        (
            [container("2"), container("3")],
            [container("2")],
            {"cpu": "1", "memory": "1Gi"},
            {"cpu": 6000, "memory": Gi},
        ),
        # upstream "restartable init container": sidecar + regular container
        ([container("1")], [sidecar("1")], None, {"cpu": 2000}),
        # upstream "multiple restartable init containers": max(5, 3+2+1 + 1) = 7
        (
            [container("1")],
            [container("5"), sidecar("1", "s1"), sidecar("2", "s2"), sidecar("3", "s3")],
            None,
            {"cpu": 7000},
        ),
        # upstream "multiple restartable and regular init containers": init-2 needs 5 + (1+2)
        (
            [container("1")],
            [container("5"), sidecar("1", "s1"), sidecar("2", "s2"), container("5"), sidecar("3")],
            None,
            {"cpu": 8000},
        ),
        # upstream "restartable-init, init and regular": max(10 + 200, 10 + 100)
        ([container("100")], [sidecar("10"), container("200")], None, {"cpu": 210000}),
        # upstream "req-and-overhead"
        ([container("1", "10")], None, {"cpu": "5", "memory": "5"}, {"cpu": 6000, "memory": 15000}),
        # upstream "two container with overhead, massive init", overhead included
        (
            [container("1", "5"), container("4", "12")],
            [container("1", "5"), container("40", "120")],
            {"cpu": "3", "memory": "8"},
            {"cpu": 43000, "memory": 128000},
        ),
    ],
)
def test_requests_follow_component_helpers(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None,
    overhead: dict[str, str] | None,
    expected: dict[str, int],
) -> None:
    spec = {"overhead": overhead} if overhead else {}
    assert dict(decode_pod(pod(containers, init, **spec)).requests) == expected


def test_limits_stand_in_for_missing_requests() -> None:
    # upstream "just-limit-no-overhead" expects no requests from PodRequests itself, but the API
    # server defaults requests from limits before the scheduler sees the pod
    c = {"name": "c", "resources": {"limits": {"cpu": "9", "memory": "1Gi"}, "requests": {"cpu": "1"}}}
    assert dict(decode_pod(pod([c])).requests) == {"cpu": 1000, "memory": Gi}
    init = {"name": "i", "resources": {"limits": {"cpu": "3"}}}
    assert dict(decode_pod(pod([c], [init])).requests) == {"cpu": 3000, "memory": Gi}


def test_nonzero_requests_default_each_container_without_a_request() -> None:
    best_effort = decode_pod(pod([container(name="a"), container(name="b")]))
    assert dict(best_effort.requests) == {}
    assert dict(best_effort.nonzero_requests) == {"cpu": 200, "memory": 400 * Mi}
    # an explicit zero is a request: it stays zero
    zero = decode_pod(pod([container("0")]))
    assert dict(zero.nonzero_requests) == {"cpu": 0, "memory": 200 * Mi}
    # upstream "non missing container requests applied to init container"
    init_only = decode_pod(pod([container(name="a", cpu="100m", memory="1Mi")], [container("1")]))
    assert dict(init_only.nonzero_requests) == {"cpu": 1000, "memory": 200 * Mi}
    full = decode_pod(pod([container("250m", "64Mi")], overhead={"cpu": "50m"}))
    assert dict(full.nonzero_requests) == {"cpu": 300, "memory": 64 * Mi}
    assert dict(full.requests) == {"cpu": 300, "memory": 64 * Mi}


def test_pod_level_resources_replace_container_totals() -> None:
    obj = pod([container("1", name="a"), container(name="b")], resources={"requests": {"cpu": "3"}})
    decoded = decode_pod(obj)
    assert dict(decoded.requests) == {"cpu": 3000}
    # with pod-level resources, only what neither level names gets the non-zero default
    assert dict(decoded.nonzero_requests) == {"cpu": 3000, "memory": 400 * Mi}
    limited = pod([container(name="a")], resources={"limits": {"memory": "1Gi"}})
    assert dict(decode_pod(limited).requests) == {"memory": Gi}


def _resized(spec_cpu: str, status: list[dict[str, Any]], infeasible: bool) -> dict[str, Any]:
    obj = pod([container(spec_cpu, name="c1")])
    obj["status"] = {"phase": "Running", "containerStatuses": status}
    if infeasible:
        cond = {"type": "PodResizePending", "status": "True", "reason": "Infeasible"}
        obj["status"]["conditions"] = [cond]
    return obj


def test_in_place_resize_counts_the_larger_of_spec_and_status() -> None:
    actual = [{"name": "c1", "resources": {"requests": {"cpu": "2"}}}]
    # upstream "resized, no resize status" and "resized, infeasible"
    assert decode_pod(_resized("4", actual, infeasible=False)).requests["cpu"] == 4000
    assert decode_pod(_resized("4", actual, infeasible=True)).requests["cpu"] == 2000
    # upstream "resized, infeasible & in-progress"
    both = [{"name": "c1", "allocatedResources": {"cpu": "4"}, "resources": {"requests": {"cpu": "2"}}}]
    assert decode_pod(_resized("6", both, infeasible=True)).requests["cpu"] == 4000
    # upstream "aggregate request resolves max of sums instead of sum of maxes"
    obj = pod([container("1", name="c1"), container("2", name="c2")])
    obj["status"] = {
        "containerStatuses": [
            {"name": "c1", "allocatedResources": {"cpu": "2"}},
            {"name": "c2", "allocatedResources": {"cpu": "1"}},
        ]
    }
    assert decode_pod(obj).requests["cpu"] == 3000


def test_memo_shares_parts_without_confusing_types() -> None:
    memo: dict[Any, Any] = {}
    a = decode_pod(pod([container("1")], tolerations=[{"key": "k", "operator": "Exists"}]), memo=memo)
    b = decode_pod(pod([container("1")], tolerations=[{"key": "k", "operator": "Exists"}]), memo=memo)
    assert a.requests == b.requests and a.tolerations is b.tolerations
    seconds = {"key": "k", "operator": "Exists", "tolerationSeconds": 1}
    decode_pod(pod(tolerations=[seconds]), memo=memo)
    with pytest.raises(ObjectError, match="tolerationSeconds: expected an integer, got true"):
        decode_pod(pod(tolerations=[{**seconds, "tolerationSeconds": True}]), memo=memo)


# -- pods ------------------------------------------------------------------------------------


def test_pod_fields_and_defaults() -> None:
    obj = pod(
        [container("100m", ports=[{"containerPort": 80, "hostPort": 8080}, {"containerPort": 9}])],
        [
            container(name="setup", image="busybox", ports=[{"hostPort": 1}]),
            {
                **sidecar("10m"),
                "image": "reg:5000/proxy",
                "ports": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
            },
        ],
        nodeSelector={"disk": "ssd"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, {"key": "a", "value": "b"}],
        topologySpreadConstraints=[{"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
    )
    obj["metadata"].update(
        uid="u-1",
        labels={"app": "web"},
        creationTimestamp="2024-01-02T03:04:05Z",
        deletionTimestamp="2024-01-02T03:05:00Z",
        ownerReferences=[
            {"kind": "Other", "name": "x"},
            {"kind": "ReplicaSet", "name": "web-abc", "controller": True},
        ],
    )
    obj["status"] = {"nominatedNodeName": "n2", "startTime": "2024-01-02T03:04:06.5+00:00"}
    p = decode_pod(obj, "cluster.yaml")
    assert (p.namespace, p.key, p.uid, p.scheduler_name, p.phase) == (
        "default",
        "default/web-1",
        "u-1",
        "default-scheduler",
        "Pending",
    )
    assert (p.creation_timestamp, p.start_time) == (1704164645.0, 1704164646.5)
    assert p.deleting and p.owner == "ReplicaSet/web-abc" and p.nominated_node_name == "n2"
    assert dict(p.labels) == {"app": "web"} and dict(p.node_selector) == {"disk": "ssd"}
    assert p.required_node_affinity is None and p.priority == 0
    assert p.preemption_policy == "PreemptLowerPriority"
    # images as ImageLocality sees them: init containers first, normalized to a tag
    assert p.images == ("busybox:latest", "reg:5000/proxy:latest", "app:1")
    # host ports as GetHostPorts: sidecar init containers and containers, hostPort > 0
    assert p.host_ports == (ContainerPort(53, "UDP", "10.0.0.1"), ContainerPort(8080, "TCP", "0.0.0.0"))
    assert p.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"), Toleration("a", "Equal", "b"))
    (tsc,) = p.topology_spread_constraints
    assert (tsc.max_skew, tsc.min_domains, tsc.node_affinity_policy, tsc.node_taints_policy) == (
        2,
        1,
        "Honor",
        "Ignore",
    )
    assert tsc.label_selector is None


def test_host_network_makes_container_ports_host_ports() -> None:
    obj = pod([container(ports=[{"containerPort": 9100}])], hostNetwork=True)
    assert decode_pod(obj).host_ports == (ContainerPort(9100),)


def test_affinity() -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "preference": {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
                }
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaceSelector": {},
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ]
        },
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"topologyKey": "zone", "namespaces": ["db"]}}
            ]
        },
    }
    p = decode_pod(pod(affinity=affinity))
    assert p.required_node_affinity == (NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a", "b")),)),)
    (pref,) = p.preferred_node_affinity
    assert pref.weight == 5
    assert pref.preference.match_fields == (NodeSelectorRequirement("metadata.name", "NotIn", ("n1",)),)
    (anti,) = p.pod_anti_affinity
    assert anti.label_selector == LabelSelector((("app", "web"),))
    assert anti.namespace_selector == LabelSelector() and anti.match_label_keys == ("pod-template-hash",)
    (weighted,) = p.preferred_pod_affinity
    assert weighted.weight == 100 and weighted.term.namespaces == ("db",)
    assert weighted.term.label_selector is None and p.pod_affinity == ()
    empty = decode_pod(pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}))
    assert empty.required_node_affinity == ()


def test_priority_resolution() -> None:
    classes = {
        "high": PriorityClass("high", 1000, preemption_policy="Never"),
        "base": PriorityClass("base", 10, global_default=True),
        "low-default": PriorityClass("low-default", 5, global_default=True),
    }
    named = decode_pod(pod(priorityClassName="high"), "", classes)
    assert (named.priority, named.preemption_policy) == (1000, "Never")
    # no class named: the global default, the lowest-valued if several claim it
    assert decode_pod(pod(), "", classes).priority == 5
    assert decode_pod(pod(), "", None).priority == 0
    # a spec.priority already set by admission wins, and its policy stays
    set_already = pod(priorityClassName="gone", priority=7, preemptionPolicy="PreemptLowerPriority")
    assert decode_pod(set_already, "", classes).priority == 7
    assert decode_pod(pod(priorityClassName="system-node-critical")).priority == 2000001000
    with pytest.raises(ObjectError) as err:
        decode_pod(pod(priorityClassName="gone"), "c.yaml", classes)
    assert str(err.value) == (
        "c.yaml: Pod default/web-1: spec.priorityClassName: "
        "no PriorityClass named 'gone' (known: base, high, low-default)"
    )


# -- other kinds -----------------------------------------------------------------------------


def test_node() -> None:
    obj: dict[str, Any] = {
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}, "resourceVersion": "42"},
        "spec": {"unschedulable": True, "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": 110, "nvidia.com/gpu": "1"},
            "images": [{"names": ["nginx@sha256:1", "nginx:1.25"], "sizeBytes": 1000}, {"sizeBytes": 5}],
        },
    }
    n = decode_node(obj)
    assert n.allocatable is n.capacity  # allocatable defaults to capacity
    assert dict(n.capacity) == {"cpu": 4000, "memory": 16 * Gi, "pods": 110000, "nvidia.com/gpu": 1000}
    assert n.unschedulable and n.taints == (Taint("gpu", "", "NoSchedule"),)
    assert dict(n.images) == {"nginx@sha256:1": 1000, "nginx:1.25": 1000}
    assert n.resource_version == "42"
    obj["status"]["allocatable"] = {"cpu": "3500m"}
    assert dict(decode_node(obj).allocatable) == {"cpu": 3500}


def test_pdb_priority_class_namespace_and_selector() -> None:
    pdb = decode_pdb(
        {
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
            "status": {"disruptionsAllowed": 2},
        }
    )
    assert (pdb.key, pdb.disruptions_allowed) == ("shop/web", 2)
    assert pdb.selector == LabelSelector((), (LabelSelectorRequirement("app", "Exists"),))
    assert decode_pdb({"metadata": {"name": "x"}}).selector is None
    pc = decode_priority_class({"metadata": {"name": "p"}, "value": 5, "globalDefault": True})
    assert pc == PriorityClass("p", 5, True, "PreemptLowerPriority")
    ns = decode_namespace({"metadata": {"name": "shop", "labels": {"team": "a"}}})
    assert dict(ns.labels) == {"team": "a", "kubernetes.io/metadata.name": "shop"}
    assert decode_label_selector(None) is None


# -- errors ----------------------------------------------------------------------------------


def _error(obj: Any, decoder: Any = decode_pod, source: str = "cluster.yaml") -> str:
    with pytest.raises(ObjectError) as err:
        decoder(obj, source)
    return str(err.value)


def test_error_messages_name_file_object_and_field() -> None:
    prefix = "cluster.yaml: Pod default/web-1: "
    assert _error(pod([container("abc")])) == (
        prefix + "spec.containers[0].resources.requests.cpu: 'abc' is not a quantity (expected e.g. 500m, 2Gi, 1.5)"
    )
    assert _error(pod([{"name": "c", "resources": []}])) == (
        prefix + "spec.containers[0].resources: expected a mapping, got a list"
    )
    assert _error(pod(priority="5")) == prefix + "spec.priority: expected an integer, got the string '5'"
    assert _error(pod(containers=[container("-1")])) == (
        prefix + "spec.containers[0].resources.requests.cpu: '-1' is negative (resource amounts must be 0 or more)"
    )
    labelled = pod()
    labelled["metadata"]["labels"] = {"enabled": True}
    assert _error(labelled) == (
        prefix + 'metadata.labels.enabled: expected a string, got true (quote it in YAML: "true")'
    )
    labelled["metadata"]["labels"] = {"released": date(2024, 5, 1)}  # YAML's `released: 2024-05-01`
    assert _error(labelled) == (
        prefix
        + 'metadata.labels.released: expected a string, got the timestamp 2024-05-01 (quote it in YAML: "2024-05-01")'
    )
    selector = {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Contains"}]}, "topologyKey": "z"}
    assert _error(
        pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [selector]}})
    ) == (
        prefix + "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".labelSelector.matchExpressions[0].operator: 'Contains' is not one of In, NotIn, Exists, DoesNotExist"
    )
    no_values = {"matchExpressions": [{"key": "a", "operator": "In"}]}
    assert _error(
        pod(
            affinity={
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [no_values]}}
            }
        )
    ) == (
        prefix + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values: operator In needs at least one value"
    )
    timed = pod()
    timed["metadata"]["creationTimestamp"] = "yesterday"
    assert _error(timed) == (
        prefix + "metadata.creationTimestamp: 'yesterday' is not an RFC 3339 time (expected e.g. 2024-05-01T12:00:00Z)"
    )
    assert _error(pod(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "z"}])) == (
        prefix + "spec.topologySpreadConstraints[0].whenUnsatisfiable: missing (one of DoNotSchedule, ScheduleAnyway)"
    )


def test_errors_for_names_kinds_and_taints() -> None:
    assert _error({"kind": "Pod", "metadata": {}}) == "cluster.yaml: Pod: metadata.name: missing"
    assert _error(["not", "a", "pod"]) == "cluster.yaml: Pod: expected a mapping, got a list"
    assert _error({"metadata": "web"}) == "cluster.yaml: Pod: metadata: expected a mapping, got the string 'web'"
    node = {"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "NoWay"}]}}
    assert _error(node, decode_node, "n.yaml") == (
        "n.yaml: Node n1: spec.taints[0].effect: 'NoWay' is not one of NoSchedule, PreferNoSchedule, NoExecute"
    )
    assert _error({"metadata": {"name": "p"}}, decode_priority_class) == (
        "cluster.yaml: PriorityClass p: value: missing"
    )
    err = ObjectError("x")
    assert isinstance(err, Exception)


# what JSON and YAML can produce where a field is expected: YAML adds dates and non-string keys
_WRONG_VALUES: list[Any] = [
    None,
    0,
    -3,
    1.5,
    True,
    "x",
    "",
    [],
    [1],
    {},
    {"a": 1},
    {1: "a"},
    date(2024, 1, 1),
    datetime(2024, 1, 1, 12, 0),
]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _outcome(obj: Any, memo: dict[Any, Any] | None) -> object:
    """The decoded pod's fields, or the error's text: what a caller can observe."""
    try:
        decoded = decode_pod(obj, "f", memo=memo)
    except ObjectError as err:
        return str(err)
    return {f.name: dict(v) if isinstance(v := getattr(decoded, f.name), Mapping) else v for f in fields(decoded)}


def test_any_wrong_type_anywhere_is_an_object_error() -> None:
    """Replace every field of a rich pod with values of every JSON and YAML type: decoding
    either succeeds or raises ObjectError, never KeyError/TypeError/AttributeError, and a memo
    shared by all these pods never changes the outcome (no error is skipped by a memo hit)."""
    base = pod(
        [container("1", "1Gi", ports=[{"containerPort": 1, "hostPort": 2, "protocol": "TCP"}])],
        [sidecar("1")],
        overhead={"cpu": "1"},
        resources={"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}},
        tolerations=[{"key": "k", "operator": "Exists", "tolerationSeconds": 3}],
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "z",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"a": "b"}},
                "minDomains": 2,
            }
        ],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "z", "namespaces": ["a"]}}
                ]
            },
        },
        priorityClassName="system-node-critical",
        nodeName="n1",
    )
    base["metadata"].update(
        labels={"a": "b"},
        creationTimestamp="2024-01-01T00:00:00Z",
        ownerReferences=[{"kind": "K", "name": "n", "controller": True}],
    )
    base["status"] = {
        "phase": "Running",
        "containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "1"}}],
        "conditions": [{"type": "PodResizePending", "reason": "Deferred"}],
    }
    shared: dict[Any, Any] = {}
    assert isinstance(_outcome(base, shared), dict)
    for path in _paths(base):
        for wrong in _WRONG_VALUES:
            obj = copy.deepcopy(base)
            parent = obj
            for step in path[:-1]:
                parent = parent[step]
            parent[path[-1]] = wrong
            assert _outcome(obj, shared) == _outcome(obj, None), (path, wrong)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}], True),
        (
            [
                {"type": "Ready", "status": "True"},
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"},
            ],
            True,
        ),
        ([{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}], False),
        ([{"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}], False),
        ([], False),
        # rulesched's victim after the Eviction API rewrote DisruptionTarget: its own condition says so
        (
            [
                {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"},
                {"type": "rulesched.io/PreemptedByScheduler", "status": "True", "reason": "PreemptionByScheduler"},
            ],
            True,
        ),
        ([{"type": "rulesched.io/PreemptedByScheduler", "status": "False"}], False),
    ],
)
def test_preempted_by_scheduler_reads_the_disruption_target_condition(conditions: list, expected: bool) -> None:
    obj = pod()
    obj["status"] = {"conditions": conditions}
    assert decode_pod(obj, "cluster.yaml").preempted_by_scheduler is expected


def test_resource_claims_are_read_by_name() -> None:
    """spec.resourceClaims (Dynamic Resource Allocation): each entry's name, the claim or
    template it names and the claim made from the template (status.resourceClaimStatuses); a
    nameless one is an error naming the field."""
    obj = pod()
    obj["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
        {"name": "nic", "resourceClaimName": "shared-nic"},
    ]
    obj["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-1-gpu-x7k2p"}]}
    assert decode_pod(obj, "cluster.yaml").resource_claims == (
        PodClaim("gpu", template_name="one-gpu", generated="web-1-gpu-x7k2p"),
        PodClaim("nic", claim_name="shared-nic"),
    )
    assert decode_pod(pod(), "cluster.yaml").resource_claims == ()
    obj["spec"]["resourceClaims"] = [{"resourceClaimName": "x"}]
    with pytest.raises(ObjectError, match=r"spec\.resourceClaims\[0\]\.name: missing"):
        decode_pod(obj, "cluster.yaml")


def test_a_malformed_condition_is_a_one_line_error() -> None:
    obj = pod()
    obj["status"] = {"conditions": [{"type": 3}]}
    assert _error(obj) == (
        'cluster.yaml: Pod default/web-1: status.conditions[0].type: expected a string, got the number 3 (quote it in YAML: "3")'
    )
