"""PodDisruptionBudgets: the disruption controller's arithmetic, for budgets read without a
status (files written by hand), which pods a budget covers, and what the Eviction API answers
(:class:`EvictionLedger`).

Next stage: :meth:`rulesched.cluster.store.ClusterStore.build` fills in the status of such budgets;
preemption (:mod:`rulesched.scheduler.preemption`) reads ``disruptions_allowed`` to choose victims.
"""

from __future__ import annotations

from collections.abc import Iterable

from rulesched.model import ALWAYS_ALLOW, Pod, PodDisruptionBudget
from rulesched.semantics.matching import label_selector_matches


def covers(pdb: PodDisruptionBudget, pod: Pod) -> bool:
    """The budget selects the pod: same namespace, labels selected (a nil selector, v1beta1's
    empty one, selects nothing)."""
    return (
        pod.namespace == pdb.namespace and pdb.selector is not None and label_selector_matches(pdb.selector, pod.labels)
    )


def disruptions_allowed(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> int:
    """What the disruption controller puts in ``status.disruptionsAllowed``: healthy pods the
    budget selects (Ready, not terminating, not in ``disruptedPods``: countHealthyPods), less
    the healthy pods it wants: ``minAvailable`` (a count, or a percentage of the selected pods
    rounded up), or the selected pods less ``maxUnavailable`` (likewise); 0 at least. (The
    controller counts the expected pods from their controllers' scale; here, the pods selected.)"""
    selected = [p for p in pods if covers(pdb, p)]
    healthy = sum(1 for p in selected if p.ready and not p.deleting and p.name not in pdb.disrupted_pods)
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


# eviction.go MaxDisruptedPodSize: more evictions than this not yet seen by the controller refuse
MAX_DISRUPTED_POD_SIZE = 2000


def ignores_budgets(pod: Pod) -> bool:
    """eviction.go canIgnorePDB: the Eviction API deletes such a pod whatever its budgets say
    (phase Pending, Succeeded or Failed, or being deleted already; a pod bound whose kubelet has
    not started it is Pending)."""
    return pod.deleting or pod.phase in ("Pending", "Succeeded", "Failed")


class EvictionLedger:
    """What the Eviction API answers evictions sent one after another (v1.37.2
    pkg/registry/core/pod/storage/eviction.go), each told the budgets that cover its pod as the
    API finds them (:func:`covers`: the namespace's budgets whose selector matches the labels;
    in policy/v1 an empty selector covers every pod). An eviction it lets through counts its
    budget down for those after it (checkAndDecrement writes the budget's status)."""

    __slots__ = ("_left",)

    def __init__(self) -> None:
        self._left: dict[str, int] = {}  # budget key -> the disruptions it allows still

    def allows(self, pod: Pod, budgets: Iterable[PodDisruptionBudget]) -> bool:
        """Whether evicting ``pod`` would be let through (and if so, counted)."""
        if ignores_budgets(pod):  # canIgnorePDB
            return True
        found = list(budgets)
        if not found:
            return True
        if (
            len(found) > 1
        ):  # 500: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
            return False
        pdb = found[0]
        if not pod.ready:  # (IsPodReady is what the API calls healthy)
            if pdb.unhealthy_pod_eviction_policy == ALWAYS_ALLOW:
                return True
            if pdb.current_healthy >= pdb.desired_healthy > 0:  # IfHealthyBudget, the default
                return True  # (not counted: an unhealthy pod's going disrupts nothing)
        left = self._left.get(pdb.key, pdb.disruptions_allowed)
        if pdb.generation_behind or left <= 0 or len(pdb.disrupted_pods) > MAX_DISRUPTED_POD_SIZE:
            return False  # 429 (spec not yet seen; none allowed) or 403 (negative; too many unconfirmed)
        self._left[pdb.key] = left - 1
        return True
