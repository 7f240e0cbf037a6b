"""Queueing hints: whether a running pod's going, or a node's change, may make a parked pod
schedulable.

kube-scheduler 1.37 asks each plugin that rejected a parked pod whether an event may help it
(QueueingHintFn). For an assigned pod's deletion NodeResourcesFit answers Queue for any pod that
was on a node or nominated to one (noderesources/fit.go isSchedulableAfterAssignedPodDelete), so
there every deletion moves every pod the resource fit rejected, wherever the room appears. Rules
are user-written, so rulesched cannot know from a rule's name what it reads; it asks the rules
themselves, on the one node the deletion changed:

A pod ``gone`` left node N (deleted, finished, its assumption dropped, or a nomination to N
ended; the deletions the informers report together are judged together, each on its node). For a parked pod P
whose filters each read only the node they judge (:func:`rulesched.engine.only_its_node`:
the node's own fields and pods; nothing of other nodes, domains or the cluster), N is the only node whose answer for P changed, so P's next attempt can differ from its
last only on N: by fitting there, or by its preemption finding victims there. The requeue is
skipped only when both are ruled out on the cluster as it is now:

- P does not fit N, judged as its cycle judges it (without and with the pods nominated to N of
  its priority or higher: :class:`rulesched.scheduler.nominator.ReservedCheck`), and
- its preemption cannot use N: the filter failing it there says ``unresolvable`` (preemption
  passes such a node over), or no pod left on N is one P may evict (every applicable preempt
  rule allows it), or no preempt rule applies to P (its dry run on N would remove nothing and
  be the same check), or its next cycle will not preempt at all (victims of its earlier
  preemption are still leaving: it waits for them, as upstream's PodEligibleToPreemptOthers
  keeps it from preempting again; their going is itself such an event).

Anything else is requeued: a pod reading more than its node (pod affinity, spreading, domain and
cluster aggregates), with volumes or resource claims, of a pod group, an error in a rule, a node
not found. Since every skipped event is proven not to help when it happens, and the store holds
every change since, the proof is always about the cluster as it is. A nomination that ends
without its pod placed frees the room it reserved on its node: the scheduler asks the same hint
then, for the parked pods of its priority or lower (upstream's Update handler moves those, with
getLEPriorityPreCheck), so the check above may count on the nominations it sees.

A node added or changed (its labels, taints, allocatable or schedulability: what
:func:`rulesched.mirror.relevant` reports) is judged as kube-scheduler judges it: each plugin
that rejected the parked pod in its last attempt (its unschedulable plugins) is asked whether the
pod now passes that plugin's own check on the node (noderesources/fit.go, tainttoleration,
nodeaffinity, nodeunschedulable: isSchedulableAfterNodeChange), and one Queue moves it. Here
the plugins are the filter rules that failed the pod (``rejected_by``), each evaluated alone on
the node; preemption is not asked (upstream's node hints ask fit alone). So a taint removed from
a node the pod still lacks room on moves it (the taint's filter passes now), to fail again, as
upstream's TaintToleration does; a new node failing the pod only on a filter that did not
reject it before moves it too (its FailedScheduling message then counts the new node, as
kube-scheduler's). A change that leaves the filter's answer as it was moves nothing: a changed
node is judged twice, as it is now and as it was before the change (``before``: the Node the
store held, with the pods it holds now), and the filter must fail there before and pass now, as
upstream's hints skip a change unrelated to their check (fit.go's
"skip-queue-on-node-unrelated-changes", tainttoleration's "skip-unrelated-change", nodeaffinity's
"skip queue on node changes unrelated to Pod's node affinity"). One difference is left, towards
fewer retries: NodeResourcesFit's hint queues a pod whenever a resource it asks for grew on a node
it fits empty, even one it fitted before the change ("queue-on-pod-requested-resources-increase");
here a node whose fit the change leaves passing moves nothing: the pod's next attempt would find
this node as its filters judged it before.
Next stage: :meth:`rulesched.scheduler.queue.SchedulingQueue.move` keeps parked what this rules out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from rulesched.cluster.nodeinfo import NodeInfo
from rulesched.cluster.snapshot import Snapshot
from rulesched.engine import only_its_node
from rulesched.lang import RuleSet, Session
from rulesched.model import Node, Pod
from rulesched.scheduler.nominator import Reserved, ReservedCheck

log = logging.getLogger(__name__)


EMPTY_BEFORE: Mapping[str, Node] = MappingProxyType({})


def as_before(node: NodeInfo, old: Node) -> NodeInfo:
    """The node view as it was before a change of its Node: ``old`` with the pods it holds now
    (a copy; the snapshot's view stays as it is). The pods' own comings and goings are judged
    by their own hint, on the node as it is now."""
    was = node.clone(node.epoch)
    was.set_node(old)
    return was


def reads_beyond_its_node(pod: Pod) -> bool:
    """Whether the pod asks for what its filters judge from more than one node's pods and
    resources (claims, volumes, pod (anti-)affinity, spreading) or belongs to a pod group: no
    single-node proof then."""
    return bool(
        pod.resource_claims
        or pod.extended_requests
        or pod.extended_claim
        or pod.volumes
        or pod.pod_affinity
        or pod.pod_anti_affinity
        or pod.topology_spread_constraints
        or pod.scheduling_group
    )


def deletion_may_help(
    pod: Pod,
    gone: Sequence[Pod],
    snapshot: Snapshot,
    session: Session,
    reserved: Reserved | None,
    may_preempt: bool = True,
) -> bool:
    """Whether the pods ``gone`` leaving their nodes may make the parked ``pod`` schedulable or
    let its preemption find victims (see the module docstring); True whenever that cannot be
    ruled out. Judged on the cluster as it is now: every node one of them left, in one binding.
    ``may_preempt`` False: the pod's next cycle will not preempt (it waits for its victims)."""
    # An unassigned pod held nothing (NodeResourcesFit: QueueSkip); a nominated one's end is
    # the scheduler's to report (Scheduler._end_nomination).
    names = sorted({g.node_name for g in gone if g.node_name})
    if not names:
        return False
    if reads_beyond_its_node(pod):
        return True
    found = [snapshot.node_view(name) for name in names]
    nodes = [node for node in found if node is not None]
    if len(nodes) < len(found):
        return True
    bound = session.bind(pod, snapshot)
    check: ReservedCheck | None = None
    try:
        if not only_its_node(bound):
            return True
        preempts = bound.preempts if may_preempt else ()
        for node in nodes:
            failure = bound.first_failure(node)
            if failure is None:
                if reserved is None or node.name not in reserved.nodes:
                    return True
                check = check or ReservedCheck(reserved, snapshot, session, pod)
                if check.failure(node.name) is None:
                    return True
            elif failure[0].unresolvable(node):
                continue  # (its preemption passes the node over: the rules say evicting cannot help)
            if preempts and any(all(rule.allows(node, victim) for rule in preempts) for victim in node.pods):
                return True
        return False
    except Exception:  # noqa: BLE001 -- a rule that fails here is the cycle's to report; requeue (upstream: Queue on error)
        log.debug("queueing hint failed; requeued", exc_info=True, extra={"pod": pod.key})
        return True
    finally:
        if check is not None:
            check.release()
        bound.release()


def node_change_may_help(
    pod: Pod,
    rejected_by: frozenset[str],
    names: Sequence[str],
    snapshot: Snapshot,
    session: Session,
    before: Mapping[str, Node] = EMPTY_BEFORE,
) -> bool:
    """Whether nodes ``names`` added or changed (labels, taints, allocatable, schedulability) may
    make the parked ``pod`` schedulable: one of the filters that failed it in its last attempt
    (``rejected_by``: its unschedulable plugins) passes on one of them now, and failed there
    before the change (``before``: a changed node's Node as it was; a node not in it was added)
    (see the module docstring). True whenever that cannot be ruled out: none of those filters
    known."""
    if reads_beyond_its_node(pod):
        return True
    found = [snapshot.node_view(name) for name in names]
    nodes = [node for node in found if node is not None]
    if len(nodes) < len(found):
        return True
    bound = session.bind(pod, snapshot)
    try:
        if not only_its_node(bound):
            return True
        rejecting = [f for f in bound.filters if f.name in rejected_by]
        if not rejecting:  # (upstream: a pod no plugin rejected is queued on any event)
            return True
        for node in nodes:
            passing = [f for f in rejecting if f.passes(node)]
            if not passing:
                continue
            old = before.get(node.name)
            if old is None:  # (added: nothing failed it there before)
                return True
            was = as_before(node, old)
            if any(not f.passes(was) for f in passing):
                return True
        return False
    except Exception:  # noqa: BLE001 -- a rule that fails here is the cycle's to report; requeue (upstream: Queue on error)
        log.debug("queueing hint failed; requeued", exc_info=True, extra={"pod": pod.key})
        return True
    finally:
        bound.release()


class _Hint:
    """What a hint over every parked pod keeps: one snapshot, one session per rule set, how many
    pods it kept parked. Call :meth:`close` after use."""

    def __init__(self, snapshot: Snapshot, rules_of: Callable[[Pod], RuleSet | None]) -> None:
        self._snapshot: Snapshot | None = snapshot
        self._rules_of = rules_of
        self._sessions: dict[int, Session] = {}
        self.skipped = 0

    def _session(self, pod: Pod) -> tuple[Snapshot, Session] | None:
        """The snapshot and the pod's rule set's session (None: no rules, or closed: requeue)."""
        rules, snapshot = self._rules_of(pod), self._snapshot
        if rules is None or snapshot is None:
            return None
        session = self._sessions.get(id(rules))
        if session is None:
            session = self._sessions[id(rules)] = rules.session()
        return snapshot, session

    def _counted(self, helps: bool) -> bool:
        self.skipped += not helps
        return helps

    def close(self) -> None:
        """Let go of the snapshot (the store changes in place again once nobody holds it)."""
        self._snapshot = None
        self._sessions.clear()


class DeletionHint(_Hint):
    """The hint for pods gone from their nodes, over every parked pod (``rules_of``: the parked
    pod's rule set, None when its profile has none loaded; ``reserved_for``: the nominations it
    must respect)."""

    def __init__(
        self,
        gone: Sequence[Pod],
        snapshot: Snapshot,
        rules_of: Callable[[Pod], RuleSet | None],
        reserved_for: Callable[[Pod], Reserved | None],
        may_preempt: Callable[[Pod], bool] = lambda pod: True,
    ) -> None:
        super().__init__(snapshot, rules_of)
        self.gone = tuple(gone)
        self._may_preempt = may_preempt
        self._reserved_for = reserved_for

    def __call__(self, pod: Pod) -> bool:
        found = self._session(pod)
        if found is None:
            return True
        snapshot, session = found
        reserved = self._reserved_for(pod)
        return self._counted(deletion_may_help(pod, self.gone, snapshot, session, reserved, self._may_preempt(pod)))


class NodeChangeHint(_Hint):
    """The hint for nodes added or changed (``names``; ``before``: the changed ones' Nodes before
    the change), over every parked pod: call it with the pod and the filters that failed it
    (:meth:`SchedulingQueue.move`'s ``worth``)."""

    def __init__(
        self,
        names: Sequence[str],
        snapshot: Snapshot,
        rules_of: Callable[[Pod], RuleSet | None],
        before: Mapping[str, Node] = EMPTY_BEFORE,
    ) -> None:
        super().__init__(snapshot, rules_of)
        self.names = tuple(sorted(set(names)))
        self.before = before  # a changed node's Node before the change (an added one: absent)

    def __call__(self, pod: Pod, rejected_by: frozenset[str]) -> bool:
        found = self._session(pod)
        if found is None:
            return True
        snapshot, session = found
        return self._counted(node_change_may_help(pod, rejected_by, self.names, snapshot, session, self.before))
