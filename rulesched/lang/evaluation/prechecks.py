"""Filters every rule set has before its own: Kubernetes' semantics a pod must meet whatever the
rules say.

A pod with ``spec.resourceClaims`` (Dynamic Resource Allocation) needs its claims allocated to
devices on the chosen node before it is bound: kube-scheduler's DynamicResources plugin, which
is :mod:`rulesched.semantics.dra_pod` here (the claims found, then the structured allocator per
node). Being part of every binding rather than of ``default.rules``, it holds for any rule set,
a set without ``extends "default"`` too, and on every face that binds rules to a pod: a cycle's
walk and its FitError message, ``--explain``, rule tests, preemption's statuses. Every failure
is unresolvable, as upstream's, but devices short where evicting the node's pods would free some
(beyond upstream 1.37: :mod:`rulesched.semantics.dra_preemption`); in preemption's dry run (a
``cluster`` with ``dra_removed``) the claims of the pods taken off are released, and the devices of
nominated pods put on a node (``dra_added``) left to them. (The extender leaves
claims to kube-scheduler, which allocates them itself: see :mod:`rulesched.extender.service`.)
Upstream runs the plugin's Filter after the others; here it comes first, so a node failing it
and another filter reports the DRA reason.
Next stage: :meth:`rulesched.lang.evaluation.ruleset.RuleSet.bind_new` puts these first.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from rulesched.lang.evaluation.bound import BoundFilter
from rulesched.model import Pod
from rulesched.model.dra import EMPTY_DRA
from rulesched.semantics.cel import CelCache
from rulesched.semantics.dra_devices import NOTHING_ALLOCATED
from rulesched.semantics.dra_pod import PLUGIN, NodeRanking, PodClaims, pod_claims

DRA_FILTER = PLUGIN  # upstream's plugin name: the filter explain and events name


def prechecks(
    pod: Pod, cluster: Any = None, ranking: NodeRanking | None = None, ranking_key: Hashable | None = None
) -> tuple[tuple[BoundFilter, ...], PodClaims | None]:
    """The filters ``pod`` fails before any rule is asked (none for most pods), and a DRA pod's
    claims they filter with (Reserve reads the chosen node's allocation from them). ``cluster``:
    the cycle's view (its DRA objects: ``dra``, ``dra_allocated``, ``dra_cel``); ``ranking``:
    the rules' device scores, and ``ranking_key`` what it depends on when that is not the pod
    (pods asking the same then share allocations)."""
    if not pod.resource_claims and not pod.extended_dra:
        return (), None
    found = dra_claims(pod, cluster, ranking, ranking_key)
    passes = BoundFilter(DRA_FILTER, lambda node: not found.filter(node), found.filter, found.unresolvable)
    passes.many = found.passing
    return (passes,), found


def dra_claims(
    pod: Pod, cluster: Any, ranking: NodeRanking | None = None, ranking_key: Hashable | None = None
) -> PodClaims:
    """DynamicResources' PreFilter for ``pod`` over ``cluster``'s DRA objects."""
    return pod_claims(
        pod,
        getattr(cluster, "dra", EMPTY_DRA),
        getattr(cluster, "dra_allocated", NOTHING_ALLOCATED),
        getattr(cluster, "dra_cel", None) or CelCache(),
        pools=getattr(cluster, "dra_pools", None),
        memo=getattr(cluster, "dra_memo", None),
        ranking=ranking,
        removed=getattr(cluster, "dra_removed", None),
        added=getattr(cluster, "dra_added", None),
        ranking_key=ranking_key,
    )


def dra_diagnosis(pod: Pod, cluster: Any, node: Any) -> list[str]:
    """Why the pod's claims cannot be had on ``node``, claim by claim and request by request
    (explain's detail for the DynamicResources filter; empty when they can)."""
    return dra_claims(pod, cluster).diagnose(node) if pod.resource_claims or pod.extended_dra else []
