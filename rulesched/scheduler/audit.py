"""Are the running pods still placed right: each running pod checked against the current rules.

``rulesched audit`` (cluster files; :mod:`rulesched.authoring.audit`) calls :func:`audit`. For
each running pod, the pod is taken off its node (a
:class:`rulesched.cluster.snapshot.ClusterOverlay`: its own requests and ports must not count
against it) and bound to the rules as a pending pod would be (its ``nodeName`` cleared), and:

- the filters it now fails on its own node, with their reasons: its *violations* (every failing
  filter, not only the first); shadow filters (``audit filter``) are reported apart and never
  make a violation;
- for a violating pod only (the costly part, every node evaluated): the best other node it fits,
  by the weighted total the scheduler ranks by, and the gain over its own node (its own node
  scored beside the feasible ones, so both totals are normalised alike);
- whether evicting it now would break a PodDisruptionBudget (one of its namespace selecting it
  allows no disruption), as the Eviction API would refuse.

Pods being deleted and finished pods are not audited (kube-scheduler's cache drops them too).
Next stage: :mod:`rulesched.authoring.audit` renders the findings; the live audit and eviction
(``audit --live``) reuse them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rulesched import engine
from rulesched.cluster.snapshot import ClusterOverlay, Snapshot
from rulesched.engine import NodeColumns
from rulesched.lang import BoundFilter, BoundRules, ForkedIndexes, RuleSet, Session
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.scheduler.scoring import Matrix, score_matrix, weighted_totals
from rulesched.semantics.matching import label_selector_matches


@dataclass(frozen=True)
class Violation:
    rule: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class PodAudit:
    pod: str
    node: str
    violations: tuple[Violation, ...]
    shadow: tuple[Violation, ...] = ()  # audit-mode filters it fails (never enforced)
    best: str | None = None  # the best other node it fits (violating pods only)
    gain: int | None = None  # best's total minus its own node's, weighted and normalised alike
    pdb: str | None = None  # a budget evicting it would break (namespace/name)


@dataclass(frozen=True)
class AuditReport:
    audited: int
    pods: tuple[PodAudit, ...]  # the pods with violations or shadow violations
    digest: str
    seconds: float

    @property
    def violating(self) -> tuple[PodAudit, ...]:
        return tuple(p for p in self.pods if p.violations)


def audit(
    snapshot: Snapshot,
    rules: RuleSet,
    pods: Sequence[Pod] | None = None,
    scheduler_name: str | None = None,
) -> AuditReport:
    """Audit ``pods`` (default: every running pod of ``snapshot``) under ``rules``."""
    started = time.perf_counter()
    session = Session(rules)
    chosen = [p for p in (pods if pods is not None else list(snapshot.pods())) if _auditable(p, scheduler_name)]
    found = []
    columns = _Columns(snapshot)
    for pod in chosen:
        result = audit_pod(pod, snapshot, session, columns)
        if result.violations or result.shadow:
            found.append(result)
    return AuditReport(len(chosen), tuple(found), rules.digest, time.perf_counter() - started)


def _auditable(pod: Pod, scheduler_name: str | None) -> bool:
    return bool(pod.node_name) and not pod.deleting and (scheduler_name is None or pod.scheduler_name == scheduler_name)


class _Columns:
    """The snapshot's nodes as columns, built once for every violating pod's search (a pod's
    overlay differs from the snapshot only on its own node, which the search leaves out)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._cols: NodeColumns | None = None
        self.names = [n.name for n in snapshot.nodes]
        self.rows = {name: i for i, name in enumerate(self.names)}

    @property
    def cols(self) -> NodeColumns:
        if self._cols is None:
            self._cols = NodeColumns(self.snapshot.nodes)
        return self._cols


def audit_pod(pod: Pod, snapshot: Snapshot, session: Session, columns: _Columns | None = None) -> PodAudit:
    """One running pod's audit (see the module docstring)."""
    free = dataclasses.replace(pod, node_name="")
    _warm(session, free, snapshot, pod.node_name)
    overlay, bound = _bound_off(free, (pod,), snapshot, session)
    try:
        home = overlay.node_view(pod.node_name)
        assert home is not None
        violations = [Violation(f.name, f.reasons(home)) for f in _failing(bound, home)]
        shadow = _shadow(free, overlay, snapshot, session, home)
        if not violations:
            return PodAudit(pod.key, pod.node_name, (), tuple(shadow))
        best, gain = _best_elsewhere(bound, columns or _Columns(snapshot), home)
        pdb = _blocking_pdb(pod, snapshot.pdbs)
        return PodAudit(pod.key, pod.node_name, tuple(violations), tuple(shadow), best, gain, pdb)
    finally:
        bound.release()


def still_violates(pod: Pod, gone: Sequence[Pod], snapshot: Snapshot, session: Session) -> bool:
    """Whether ``pod`` still fails an enforced filter on its own node once the pods ``gone``
    (evictions already chosen from that node) have left: a node overcommitted by two pods, or
    over a per-node count, is cured by evicting one of them, and the other then stays (else it
    could be placed straight back onto the node it was evicted from)."""
    overlay, bound = _bound_off(dataclasses.replace(pod, node_name=""), (pod, *gone), snapshot, session)
    try:
        home = overlay.node_view(pod.node_name)
        return home is not None and next(_failing(bound, home), None) is not None
    finally:
        bound.release()


def _bound_off(
    free: Pod, removed: Sequence[Pod], snapshot: Snapshot, session: Session
) -> tuple[ClusterOverlay, BoundRules]:
    """``free`` (a running pod with its ``nodeName`` cleared) bound as a pending pod, on an
    overlay of ``snapshot`` without the ``removed`` pods (the pod itself among them: its own
    requests and ports must not count against it); the caller releases the binding."""
    overlay = ClusterOverlay(snapshot)
    for other in removed:
        overlay.remove_pod(other)
    return overlay, session.bind_private(free, overlay, ForkedIndexes(session.indexes, snapshot))


def _failing(bound: BoundRules, home: Any) -> Iterator[BoundFilter]:
    """The enforced filters ``home`` fails, in rule order, evaluated as they are asked for."""
    for f in bound.filters:
        bound.watch.rule = f.name
        if not f.passes(home):
            yield f


def rechecker(snapshot: Snapshot, rules: RuleSet) -> Callable[[Pod, tuple[Pod, ...]], bool]:
    """:func:`still_violates` over ``snapshot`` and ``rules``, as the eviction planner asks it
    (:func:`rulesched.scheduler.rebalance.plan_evictions`' ``recheck``)."""
    session = Session(rules)
    return lambda pod, gone: still_violates(pod, gone, snapshot, session)


def _warm(session: Session, pod: Pod, snapshot: Snapshot, node_name: str) -> None:
    """Build the per-domain indexes the pod's filters read in the session's own store, at the
    snapshot's position: each pod's private binding below then forks them (and replays its one
    removal) instead of building them anew (at 5,000 nodes, most of an audit's time)."""
    node = snapshot.node_view(node_name)
    if node is None:
        return
    warm = session.bind(pod, snapshot)
    try:
        for f in warm.filters:
            f.passes(node)
    finally:
        warm.release()


def _shadow(pod: Pod, overlay: ClusterOverlay, snapshot: Snapshot, session: Session, home: Any) -> list[Violation]:
    """The audit-mode filters the pod fails on its node (reported, never a violation)."""
    shadow = session.rules.shadow
    if shadow is None:
        return []
    own = Session(shadow)
    bound = own.bind_private(pod, overlay, ForkedIndexes(own.indexes, snapshot))
    try:
        return [Violation(f.name, f.reasons(home)) for f in bound.filters if not f.passes(home)]
    finally:
        bound.release()


def _best_elsewhere(bound: Any, columns: _Columns, home: Any) -> tuple[str | None, int | None]:
    """The best node the pod fits besides ``home`` (its node in the overlay, the pod taken off)
    and the gain there. Other nodes are the snapshot's own (the overlay changed only ``home``)."""
    nodes = columns.snapshot.nodes
    skip = columns.rows[home.name]
    rows = np.delete(np.arange(len(nodes), dtype=np.intp), skip)
    mask = engine.filter_mask(bound, columns.cols, rows)
    feasible = rows[mask]
    if not len(feasible):
        return None, None
    picked = [*(nodes[i] for i in feasible.tolist()), home]
    if not bound.scores:
        return picked[0].name, 0
    bound.ctx.feasible = picked
    try:
        matrix: Matrix = np.vstack(
            (engine.score_matrix(bound, columns.cols, feasible), np.array([bound.score_vector(home)], dtype=np.int64))
        )
    except OverflowError:
        matrix = score_matrix(bound.score_vectors(picked))
    totals = weighted_totals(bound.scores, matrix).tolist()
    own = totals[-1]
    best = max(range(len(picked) - 1), key=lambda i: (totals[i], -i))
    return picked[best].name, int(totals[best]) - int(own)


def _blocking_pdb(pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> str | None:
    """A budget of the pod's namespace selecting it that allows no disruption now."""
    if not pod.labels:
        return None
    for pdb in pdbs:
        selector = pdb.selector
        if pdb.namespace != pod.namespace or selector is None:
            continue
        if not (selector.match_labels or selector.match_expressions):
            continue
        if label_selector_matches(selector, pod.labels) and pdb.disruptions_allowed <= 0:
            return pdb.key
    return None


def report_json(report: AuditReport) -> dict[str, Any]:
    return {
        "summary": {
            "audited": report.audited,
            "violating": len(report.violating),
            "movable": sum(1 for p in report.violating if p.best is not None),
            "blocked_by_pdb": sum(1 for p in report.violating if p.pdb is not None),
            "shadow": sum(1 for p in report.pods if p.shadow),
            "rules_digest": report.digest,
            "seconds": round(report.seconds, 4),
        },
        "pods": [
            {
                "pod": p.pod,
                "node": p.node,
                "violations": [{"rule": v.rule, "reasons": list(v.reasons)} for v in p.violations],
                "shadow": [{"rule": v.rule, "reasons": list(v.reasons)} for v in p.shadow],
                "best": p.best,
                "gain": p.gain,
                "pdb": p.pdb,
            }
            for p in report.pods
        ],
    }
