"""Filters every rule set has before its own: pods rulesched cannot place correctly, whatever
the rules say.

A pod with ``spec.resourceClaims`` (Dynamic Resource Allocation) needs its claims allocated to
devices on the chosen node before it is bound (kube-scheduler's DynamicResources plugin does that
in Reserve and PreBind); bound without an allocation, the kubelet cannot start it. rulesched
allocates no claims, so such a pod fails on every node, unresolvable (preemption cannot help),
with a reason saying why. Being part of every binding rather than of ``default.rules``, it holds
for any rule set, a set without ``extends "default"`` too, and on every face that binds rules to
a pod: a cycle's walk and its FitError message, ``--explain``, rule tests, preemption's statuses.
(The extender leaves claims to kube-scheduler, which allocates them itself: see
:mod:`rulesched.extender.service`.)
Next stage: :meth:`rulesched.lang.evaluation.ruleset.RuleSet.bind_new` puts these first.
"""

from __future__ import annotations

from typing import Any

from rulesched.lang.evaluation.bound import BoundFilter
from rulesched.model import Pod

DRA_FILTER = "DynamicResources"  # upstream's plugin name: the filter explain and events name
DRA_REASON = "pod uses DRA resource claims (spec.resourceClaims), which rulesched does not support"


def prechecks(pod: Pod) -> tuple[BoundFilter, ...]:
    """The filters ``pod`` fails before any rule is asked (none for most pods)."""
    if pod.resource_claims:
        return (BoundFilter(DRA_FILTER, _fails, _dra_reasons, _always),)
    return ()


def _fails(node: Any) -> bool:
    return False


def _always(node: Any) -> bool:
    return True


def _dra_reasons(node: Any) -> tuple[str, ...]:
    return (DRA_REASON,)
