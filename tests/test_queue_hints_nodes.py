"""Queueing hints for a node added or changed (rulesched.scheduler.hints: NodeChangeHint): a
parked pod moves when one of the filters that failed it in its last attempt (its unschedulable
plugins) passes on the node now and failed there before the change. kube-scheduler 1.37.2's tables for the same event, each case
with its source (pkg/scheduler/framework/plugins/...: noderesources/fit_test.go
Test_isSchedulableAfterNodeChange, tainttoleration/taint_toleration_test.go
TestIsSchedulableAfterNodeChange, nodeaffinity/node_affinity_test.go
Test_isSchedulableAfterNodeChange, nodeunschedulable/node_unschedulable_test.go
TestIsSchedulableAfterNodeChange); the plugin under test there is the filter rule of the same
name in rules/default.rules here, the one that rejected the pod. Where the answers part, the
case says why. Upstream's "backoff-wrong-*-object" cases (a decoding error: Queue) have no
counterpart: the informer decodes a node before any hint sees it."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from rulesched.cluster.store import ClusterStore
from rulesched.kube.informer import Delta
from rulesched.mirror import Mirror
from rulesched.model import Node, Pod
from rulesched.model.groups import PodGroup
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.framework import Binding, SchedulerSettings
from rulesched.scheduler.hints import NodeChangeHint
from rulesched.scheduler.scheduler import Scheduler
from tests.upstream.harness import default_rules, node, pod


def P(name: str = "pod1", prio: int = 0, requests: Mapping[str, str] | None = None, **spec: Any) -> Pod:
    body = {
        "priority": prio,
        "containers": [{"name": "c", "image": "x", "resources": {"requests": dict(requests or {})}}],
    }
    return pod(name, spec={**body, **spec})


def N(
    name: str = "nodeA",
    allocatable: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    labels: Mapping[str, str] | None = None,
    unschedulable: bool = False,
) -> Node:
    return node(name, labels=labels, allocatable=allocatable or {"cpu": "4", "memory": "4Gi", "pods": "10"},
                taints=taints, unschedulable=unschedulable)  # fmt: skip


def helps(parked: Pod, new: Node, old: Node | None = None, rejected_by: Sequence[str] = ("NodeResourcesFit",)) -> bool:
    """The store as the informer leaves it after the change (``old`` replaced by ``new``), then
    the hint for ``new``'s name (told ``old``, as the loop tells it the Node the store held),
    for a pod ``rejected_by`` failed."""
    store = ClusterStore()
    if old is not None:
        store.add_node(old)
    store.add_node(new)
    before = {} if old is None else {new.name: old}
    hint = NodeChangeHint([new.name], store.snapshot(), lambda p: default_rules(), before)
    try:
        return hint(parked, frozenset(rejected_by))
    finally:
        hint.close()


def mem(q: str) -> dict[str, str]:
    return {"cpu": "4", "memory": q, "pods": "10"}


# --- noderesources/fit_test.go, Test_isSchedulableAfterNodeChange (memory for its extended resources:
# a pod asking for an extended resource may be served by DRA, which reads beyond the node: always queued)


def test_fit_skip_queue_on_node_add_without_sufficient_resources() -> None:
    """ "skip-queue-on-node-add-without-sufficient-resources": 2 asked, 1 there: QueueSkip."""
    assert helps(P(requests={"memory": "2Gi"}), N(allocatable=mem("1Gi"))) is False


def test_fit_skip_queue_on_node_add_without_required_resource_type() -> None:
    """ "skip-queue-on-node-add-without-required-resource-type" (cpu standing in for the
    extended resource the node lacks): QueueSkip."""
    assert helps(P(requests={"cpu": "1"}), N(allocatable={"memory": "4Gi", "pods": "10"})) is False


def test_fit_queue_on_node_add_with_sufficient_resources() -> None:
    """ "queue-on-node-add-with-sufficient-resources": Queue."""
    assert helps(P(requests={"memory": "2Gi"}), N(allocatable=mem("4Gi"))) is True


def test_fit_skip_queue_on_node_unrelated_changes() -> None:
    """ "skip-queue-on-node-unrelated-changes": the node fitted before and after, the requested
    resources not increased: QueueSkip (NodeResourcesFit passed there before the change too)."""
    old = N(allocatable={"cpu": "4", "memory": "2Gi", "pods": "10"})
    new = N(allocatable={"cpu": "3", "memory": "2Gi", "pods": "10"})
    assert helps(P(requests={"memory": "2Gi"}), new, old) is False


def test_fit_requested_resources_increase_on_a_node_that_fitted_skips_here() -> None:
    """ "queue-on-pod-requested-resources-increase": upstream's Queue (memory grew on a node the
    pod fits empty). Here NodeResourcesFit passed on the node before the change as after it, so
    the change moves nothing (the one difference, towards fewer retries: the module docstring)."""
    old = N(allocatable={"cpu": "4", "memory": "2Gi", "pods": "10"})
    new = N(allocatable={"cpu": "4", "memory": "3Gi", "pods": "10"})
    assert helps(P(requests={"memory": "2Gi"}), new, old) is False


def test_fit_resources_increase_on_a_node_its_pods_filled_queues() -> None:
    """The same increase on a node whose pods left the pod no room before: Queue (the fit
    fails before the change, with the pods the node holds, and passes after it)."""
    store = ClusterStore()
    old = N(allocatable={"cpu": "4", "memory": "2Gi", "pods": "10"})
    new = N(allocatable={"cpu": "4", "memory": "3Gi", "pods": "10"})
    store.add_node(new)
    store.add_pod(P("holder", requests={"memory": "1Gi"}, nodeName="nodeA"))
    hint = NodeChangeHint(["nodeA"], store.snapshot(), lambda p: default_rules(), {"nodeA": old})
    try:
        assert hint(P(requests={"memory": "2Gi"}), frozenset({"NodeResourcesFit"})) is True
    finally:
        hint.close()


def test_fit_skip_queue_on_node_changes_from_suitable_to_unsuitable() -> None:
    """ "skip-queue-on-node-changes-from-suitable-to-unsuitable": QueueSkip."""
    assert helps(P(requests={"memory": "2Gi"}), N(allocatable=mem("1Gi")), N(allocatable=mem("4Gi"))) is False


def test_fit_queue_on_node_changes_from_unsuitable_to_suitable() -> None:
    """ "queue-on-node-changes-from-unsuitable-to-suitable": Queue."""
    assert helps(P(requests={"memory": "2Gi"}), N(allocatable=mem("4Gi")), N(allocatable=mem("1Gi"))) is True


# --- tainttoleration/taint_toleration_test.go, TestIsSchedulableAfterNodeChange

TAINT = ("TaintToleration",)
TOLERATES_USER2 = [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}]


def taint(value: str) -> dict[str, str]:
    return {"key": "dedicated", "value": value, "effect": "NoSchedule"}


def test_taint_skip_queue_on_untoleratedtaint_node_added() -> None:
    """ "skip-queue-on-untoleratedtaint-node-added": QueueSkip."""
    assert helps(P(tolerations=TOLERATES_USER2), N(taints=[taint("user1")]), rejected_by=TAINT) is False


def test_taint_queue_on_toleratedtaint_node_added() -> None:
    """ "queue-on-toleratedtaint-node-added": Queue."""
    assert helps(P(tolerations=TOLERATES_USER2), N(taints=[taint("user2")]), rejected_by=TAINT) is True


def test_taint_skip_unrelated_change() -> None:
    """ "skip-unrelated-change": a second untolerated taint: QueueSkip."""
    new, old = N(taints=[taint("user1"), taint("user3")]), N(taints=[taint("user1")])
    assert helps(P(tolerations=TOLERATES_USER2), new, old, rejected_by=TAINT) is False


def test_taint_queue_on_taint_change() -> None:
    """ "queue-on-taint-change": the taint now tolerated: Queue."""
    assert (
        helps(P(tolerations=TOLERATES_USER2), N(taints=[taint("user2")]), N(taints=[taint("user1")]), rejected_by=TAINT)
        is True
    )


def test_taint_removed_from_a_node_still_too_small_queues_as_upstream() -> None:
    """The taint gone, the node still lacking the memory the pod asks: TaintToleration, which
    rejected the pod there, passes now: Queue (the retry fails on NodeResourcesFit, upstream's
    too)."""
    new, old = N(allocatable=mem("1Gi")), N(allocatable=mem("1Gi"), taints=[taint("user1")])
    assert helps(P(requests={"memory": "2Gi"}), new, old, rejected_by=TAINT) is True


def test_big_tainted_node_added_for_a_pod_too_big_elsewhere() -> None:
    """A pod that only lacked room (NodeResourcesFit rejected it) and a big node added with a
    taint it does not tolerate: NodeResourcesFit's hint answers Queue (tests/test_real_run.py's
    second FailedScheduling event, "0/2 nodes are available", comes of it on both schedulers);
    a pod the taint itself rejected before stays parked."""
    big_tainted = N(allocatable=mem("8Gi"), taints=[taint("user1")])
    assert helps(P(requests={"memory": "2Gi"}), big_tainted) is True
    assert helps(P(requests={"memory": "2Gi"}), big_tainted, rejected_by=TAINT) is False


# --- nodeaffinity/node_affinity_test.go, Test_isSchedulableAfterNodeChange

AFFINITY = ("NodeAffinity",)
AFFINITY_FOO_BAR: dict[str, Any] = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "foo", "operator": "In", "values": ["bar"]}]}]
            }
        }
    }
}


def test_affinity_skip_queue_on_add_not_matching() -> None:
    """ "skip queue on node add when nodes doesn't match Pod's node affinity": QueueSkip."""
    assert helps(P(**AFFINITY_FOO_BAR), N(), rejected_by=AFFINITY) is False


def test_affinity_queue_on_add_matching() -> None:
    """ "queue on node add when nodes matches Pod's node affinity": Queue."""
    assert helps(P(**AFFINITY_FOO_BAR), N(labels={"foo": "bar"}), rejected_by=AFFINITY) is True


def test_affinity_skip_unrelated_update_not_matching() -> None:
    """ "skip unrelated changes" (a capacity change of a node that does not match): QueueSkip."""
    assert helps(P(**AFFINITY_FOO_BAR), N(allocatable=mem("8Gi")), N(), rejected_by=AFFINITY) is False


def test_affinity_queue_on_label_change_to_matching() -> None:
    """ "queue on node label change that makes node match Pod's node affinity": Queue."""
    assert helps(P(**AFFINITY_FOO_BAR), N(labels={"foo": "bar"}), N(), rejected_by=AFFINITY) is True


def test_affinity_skip_unrelated_change_on_a_matching_node() -> None:
    """ "skip queue on node changes unrelated to Pod's node affinity" (the node matched before
    and after): QueueSkip."""
    assert (
        helps(
            P(**AFFINITY_FOO_BAR),
            N(labels={"foo": "bar"}, allocatable=mem("8Gi")),
            N(labels={"foo": "bar"}),
            rejected_by=AFFINITY,
        )
        is False
    )


# --- nodeunschedulable/node_unschedulable_test.go, TestIsSchedulableAfterNodeChange

CORDON = ("NodeUnschedulable",)


def test_unschedulable_skip_queue_on_unschedulable_node_added() -> None:
    """ "skip-queue-on-unschedulable-node-added": QueueSkip."""
    assert helps(P(), N(unschedulable=True), rejected_by=CORDON) is False


def test_unschedulable_queue_on_schedulable_node_added() -> None:
    """ "queue-on-schedulable-node-added": Queue."""
    assert helps(P(), N(), rejected_by=CORDON) is True


def test_unschedulable_skip_unrelated_change_unschedulable_true() -> None:
    """ "skip-unrelated-change-unschedulable-true": a taint added, still cordoned: QueueSkip."""
    not_ready = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    assert helps(P(), N(unschedulable=True, taints=[not_ready]), N(unschedulable=True), rejected_by=CORDON) is False


def test_unschedulable_queue_on_unschedulable_field_change() -> None:
    """ "queue-on-unschedulable-field-change": uncordoned: Queue."""
    assert helps(P(), N(), N(unschedulable=True), rejected_by=CORDON) is True


def test_unschedulable_cordoned_node_tolerated() -> None:
    """A pod tolerating the unschedulable taint fits a cordoned node (NodeUnschedulable's
    toleration clause): Queue."""
    tolerates = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    assert helps(P(tolerations=tolerates), N(unschedulable=True), rejected_by=CORDON) is True


# --- what rules, nominations and preemption add


def test_reads_beyond_its_node_always_queued() -> None:
    """A pod with pod affinity reads other nodes' pods: no single-node proof, Queue."""
    affinity: dict[str, Any] = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}}}  # fmt: skip
    assert helps(P(**affinity), N(unschedulable=True), rejected_by=("InterPodAffinity",)) is True


def test_no_known_rejecting_filter_queues() -> None:
    """A pod no filter rule is known to have failed (parked for another reason, or its rule
    set changed since): Queue, as upstream queues a pod without unschedulable plugins on any
    event."""
    cordoned = N(unschedulable=True)
    assert helps(P(), cordoned, rejected_by=()) is True
    assert helps(P(), cordoned, rejected_by=("NoSuchRule",)) is True


def test_evictable_pods_do_not_queue_on_a_node_change() -> None:
    """A node change that leaves the pod unfit there stays a QueueSkip even when the node holds
    pods it could evict (upstream's node hints ask fit alone; deletions and nominations ended
    are the events preemption waits on)."""
    store = ClusterStore()
    store.add_node(N(allocatable=mem("3Gi")))
    store.add_pod(pod("low", spec={"priority": 0, "containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"memory": "2Gi"}}}]}, node_name="nodeA"))  # fmt: skip
    hint = NodeChangeHint(["nodeA"], store.snapshot(), lambda p: default_rules())
    try:
        assert hint(P(prio=100, requests={"memory": "2Gi"}), frozenset({"NodeResourcesFit"})) is False
        assert hint.skipped == 1
    finally:
        hint.close()


def test_node_gone_before_the_hint_queues() -> None:
    """A node added then deleted in the same drain is not in the store: nothing can be proven,
    Queue."""
    store = ClusterStore()
    hint = NodeChangeHint(["gone"], store.snapshot(), lambda p: default_rules())
    try:
        assert hint(P(), frozenset({"NodeUnschedulable"})) is True
    finally:
        hint.close()


class _Binder:
    def bind(self, binding: Binding) -> bool:
        return True


class _Evictor:
    at_once = False

    def evict(
        self, pod: Pod, preemptor: Pod, group: PodGroup | None = None
    ) -> None:  # pragma: no cover - nothing preempted
        raise AssertionError("no eviction expected")


def test_scheduler_moves_only_the_pods_a_node_change_helps() -> None:
    """Through the scheduler and its queue: two pods parked unschedulable (one asking 2Gi, one
    asking for a label no node has); a label neither asks for added: both stay parked; the node
    grows to 4Gi: the first moves, the second stays parked; the label added then moves the
    second."""
    store = ClusterStore()
    store.add_node(N(allocatable=mem("1Gi")))
    s = Scheduler(default_rules(), store, SchedulerSettings(), _Binder(), _Evictor())
    big, picky = P("big", requests={"memory": "2Gi"}), P("picky", nodeSelector={"team": "a"})
    for p in (big, picky):
        s.add(p)
    for _ in range(2):
        assert s.schedule_one() is not None
    assert s.queue.counts()["unschedulable"] == 2
    small = N(allocatable=mem("1Gi"))
    store.add_node(N(allocatable=mem("1Gi"), labels={"zone": "z1"}))  # (nothing either filter reads)
    assert s.nodes_changed(Event.NODE_CHANGED, ["nodeA"], {"nodeA": small}) == 0
    assert s.queue.counts()["unschedulable"] == 2
    grown = N(allocatable=mem("4Gi"))
    store.add_node(grown)
    assert s.nodes_changed(Event.NODE_CHANGED, ["nodeA"], {"nodeA": small}) == 1
    assert s.queue.counts()["unschedulable"] == 1
    store.add_node(N(allocatable=mem("4Gi"), labels={"team": "a"}))
    assert s.nodes_changed(Event.NODE_CHANGED, ["nodeA"], {"nodeA": grown}) == 1
    assert s.queue.counts()["unschedulable"] == 0


def test_the_informer_reports_the_node_as_it_was_before_the_change() -> None:
    """rulesched.mirror: a node's update is reported with the Node the store held before it
    (what the hint judges the change against), though the store updates in place a node view no
    snapshot holds; a status heartbeat (nothing a filter reads) is no event at all."""
    store = ClusterStore()
    mirror = Mirror(None, store, lambda delta: None, threading.Event(), resources=())  # type: ignore[arg-type]

    def obj(labels: Mapping[str, str], heartbeat: str = "t0") -> dict[str, Any]:
        return {
            "kind": "Node",
            "metadata": {"name": "node-a", "labels": dict(labels)},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
            },
        }

    added = mirror.apply(Delta("Node", "ADDED", obj({})))
    assert (added.event, added.node, added.before) == (Event.NODE_ADDED, "node-a", None)
    changed = mirror.apply(Delta("Node", "MODIFIED", obj({"team": "a"})))
    assert (changed.event, changed.node) == (Event.NODE_CHANGED, "node-a")
    assert changed.before is not None and dict(changed.before.labels) == {}
    view = store.node_view("node-a")
    assert view is not None and dict(view.labels) == {"team": "a"}
    assert mirror.apply(Delta("Node", "MODIFIED", obj({"team": "a"}, heartbeat="t1"))).event is None
