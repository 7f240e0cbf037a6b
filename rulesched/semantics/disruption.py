"""PodDisruptionBudgets: the disruption controller's arithmetic, for budgets read without a
status (files written by hand), and which pods a budget covers.

Next stage: :meth:`rulesched.cluster.store.ClusterStore.build` fills in the status of such budgets;
preemption (:mod:`rulesched.scheduler.preemption`) reads ``disruptions_allowed`` to choose victims.
"""

from __future__ import annotations

from collections.abc import Iterable

from rulesched.model import Pod, PodDisruptionBudget
from rulesched.semantics.matching import label_selector_matches


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The budget selects the pod: same namespace, labels selected (a nil selector, v1beta1's
    empty one, selects nothing)."""
    return (
        pod.namespace == pdb.namespace and pdb.selector is not None and label_selector_matches(pdb.selector, pod.labels)
    )


def disruptions_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """What the disruption controller puts in ``status.disruptionsAllowed``: healthy pods the
    budget selects (running, not terminating), less the healthy pods it wants: ``minAvailable``
    (a count, or a percentage of the selected pods rounded up), or the selected pods less
    ``maxUnavailable`` (likewise); 0 at least. (The controller counts the expected pods from
    their controllers' scale; here, the pods selected.)"""
    selected = [p for p in pods if covers(pdb, p)]
    healthy = sum(1 for p in selected if p.phase == "Running" and not p.deleting)
    expected = len(selected)
    desired = 0
    if pdb.max_unavailable is not None:
        desired = max(0, expected - scaled(pdb.max_unavailable, expected))
    elif pdb.min_available is not None:
        desired = scaled(pdb.min_available, expected)
    return max(0, healthy - desired)


def scaled(value: int | str, total: int) -> int:
    """An IntOrString against ``total``: a count as is, a percentage rounded up
    (intstr.GetScaledValueFromIntOrPercent with roundUp)."""
    if isinstance(value, int):
        return value
    return -(-int(value[:-1]) * total // 100)
