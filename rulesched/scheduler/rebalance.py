"""Which violating pods to evict (``rulesched audit --live --evict``), within caps.

From an audit (:mod:`rulesched.scheduler.audit`), a pod is evicted only when all hold:

- it violates a filter on its node (audit-mode filters never count): the same rules then cannot
  place its replacement there, so an eviction never sends a pod back onto the node it left;
- the same rules place it on another node (``best``), with a weighted score gain of at least
  ``min_gain`` over its own node;
- no PodDisruptionBudget forbids it: budgets count down as pods are chosen in one run (as
  kube-scheduler's preemption counts them), and the Eviction API has the last word (a 429 is a
  skip, never a retry in the same run);
- the caps are not reached: evictions per source node, per namespace and per run;
- where an eviction from the same node was already chosen in this run, the pod still violates
  a filter there without the pods chosen before it (``recheck``): two pods overcommitting a node,
  or over a per-node count, are cured by evicting one; evicting both would let the second be
  placed straight back onto the node it left.

Pods are taken by gain, largest first (ties: pod key), so a capped run moves the pods that gain
most. What happens to an evicted pod is its controller's and the scheduler's business; the
descheduler's loops (an evicted pod placed back where it was, evicted again) cannot happen,
since the node it left fails a filter for it under the rules the scheduler runs.
Next stage: :mod:`rulesched.run.audit` (:func:`rulesched.run.audit.evict`) calls the Eviction API.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rulesched.model import Pod, PodDisruptionBudget
from rulesched.scheduler.audit import AuditReport
from rulesched.semantics.matching import label_selector_matches


@dataclass(frozen=True)
class EvictSettings:
    min_gain: int = 1  # the least weighted score gain worth a move
    per_node: int = 1  # evictions from one node per run
    per_namespace: int = 5
    per_run: int = 10


@dataclass(frozen=True)
class Eviction:
    pod: str
    node: str  # where it runs (and fails a filter)
    best: str  # where the rules would place it
    gain: int
    rules: tuple[str, ...]  # the filters it violates on its node


@dataclass(frozen=True)
class Skipped:
    pod: str
    why: str


# Does the pod still violate a filter on its node once these pods (chosen from it) are gone?
Recheck = Callable[[Pod, tuple[Pod, ...]], bool]


def plan_evictions(
    report: AuditReport,
    pods: Sequence[Pod],
    pdbs: Sequence[PodDisruptionBudget],
    settings: EvictSettings,
    recheck: Recheck | None = None,
) -> tuple[tuple[Eviction, ...], tuple[Skipped, ...]]:
    """The evictions to make and, for every other violating pod, why not. ``recheck`` (see
    :func:`rulesched.scheduler.audit.still_violates`) is asked before a second eviction from a
    node; without it, no second pod is evicted from a node in one run."""
    by_key = {p.key: p for p in pods}
    allowed = [pdb.disruptions_allowed for pdb in pdbs]
    nodes: Counter[str] = Counter()
    leaving: dict[str, tuple[Pod, ...]] = {}  # node -> the pods chosen to leave it
    namespaces: Counter[str] = Counter()
    chosen: list[Eviction] = []
    skipped: list[Skipped] = []
    ranked = sorted(report.violating, key=lambda p: (-(p.gain if p.gain is not None else -(2**62)), p.pod))
    for found in ranked:
        pod = by_key.get(found.pod)
        namespace = found.pod.split("/", 1)[0]
        if pod is None:
            skipped.append(Skipped(found.pod, "no longer in the cluster"))
        elif found.best is None or found.gain is None:
            skipped.append(Skipped(found.pod, "fits no other node"))
        elif found.best == found.node:  # (audit never proposes it: kept as the invariant's guard)
            skipped.append(Skipped(found.pod, "would go back onto its own node"))
        elif found.gain < settings.min_gain:
            skipped.append(Skipped(found.pod, f"gain {found.gain:+d} below the threshold {settings.min_gain}"))
        elif len(chosen) >= settings.per_run:
            skipped.append(Skipped(found.pod, f"cap of {settings.per_run} evictions per run reached"))
        elif nodes[found.node] >= settings.per_node:
            skipped.append(Skipped(found.pod, f"cap of {settings.per_node} evictions from node {found.node} reached"))
        elif namespaces[namespace] >= settings.per_namespace:
            skipped.append(Skipped(found.pod, f"cap of {settings.per_namespace} evictions in {namespace} reached"))
        elif nodes[found.node] and not (recheck is not None and recheck(pod, leaving[found.node])):
            first = leaving[found.node][0].key
            why = "cures its violation" if recheck is not None else "may cure its violation: the next run decides"
            skipped.append(Skipped(found.pod, f"the eviction of {first} from {found.node} {why}"))
        else:
            budgets = _budgets(pod, pdbs)
            blocked = next((pdbs[i].key for i in budgets if allowed[i] <= 0), None)
            if blocked is not None:
                skipped.append(Skipped(found.pod, f"PodDisruptionBudget {blocked} allows no disruption"))
                continue
            for i in budgets:
                allowed[i] -= 1
            nodes[found.node] += 1
            leaving[found.node] = (*leaving.get(found.node, ()), pod)
            namespaces[namespace] += 1
            rules = tuple(v.rule for v in found.violations)
            chosen.append(Eviction(found.pod, found.node, found.best, found.gain, rules))
    return tuple(chosen), tuple(skipped)


def _budgets(pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> list[int]:
    """The indexes of the budgets selecting ``pod`` (an empty selector selects nothing, as in
    kube-scheduler's preemption)."""
    out: list[int] = []
    if not pod.labels:
        return out
    for i, pdb in enumerate(pdbs):
        selector = pdb.selector
        if pdb.namespace != pod.namespace or selector is None:
            continue
        if not (selector.match_labels or selector.match_expressions):
            continue
        if label_selector_matches(selector, pod.labels):
            out.append(i)
    return out
