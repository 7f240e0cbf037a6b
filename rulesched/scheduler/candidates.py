"""The choice among preemption candidates: kube-scheduler's pickOneNodeForPreemption, after the
preempt rules' own ``order``, and one step of rulesched's among the candidates it leaves equal.

Next stage: the scheduler evicts the chosen candidate's victims and nominates the pod
(:mod:`rulesched.scheduler.scheduler`); :mod:`rulesched.scheduler.preemption` finds the candidates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from rulesched.model import Pod
from rulesched.scheduler.potential import started

_PRIORITY_OFFSET = 2**31  # upstream adds MaxInt32+1 so that sums of negative priorities compare


class Candidate(NamedTuple):  # (a tuple: made for every node a preemption tries, thousands at once)
    node: str
    victims: tuple[Pod, ...]  # most important first
    pdb_violations: int


def pick_candidate(
    candidates: Sequence[Candidate],
    rule_order: Callable[[Candidate], tuple[float, ...]] | None = None,
    displacing: frozenset[str] = frozenset(),
) -> Candidate:
    """pickOneNodeForPreemption, after the preempt rules' own ``order``: each criterion keeps
    only the best candidates until one is left; then the first in node order whose node is not
    in ``displacing`` (holding a lower-priority pod's nomination), else the first.

    Upstream leaves the choice among candidates equal by every criterion to the order of a Go
    map (random). Where one of them is nominated to a lower-priority pod that is waiting for its
    victims to leave, taking that node takes the room they free (and ends the nomination when
    there are removals to send: prepareCandidate), and the displaced pod must find a place
    again, most often by another preemption: so among equals rulesched takes another node, a
    choice upstream may make too."""
    for c in candidates:
        if not c.victims:
            return c
    criteria: list[Callable[[Candidate], Any]] = []
    if rule_order is not None:
        criteria.append(lambda c: tuple(-v for v in rule_order(c)))
    criteria += [
        lambda c: -c.pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_start_of_highest(c.victims),
    ]
    remaining = list(candidates)
    for criterion in criteria:
        values = [criterion(c) for c in remaining]
        best = max(values)
        remaining = [c for c, v in zip(remaining, values, strict=True) if v == best]
        if len(remaining) == 1:
            break
    if displacing and len(remaining) > 1:
        return next((c for c in remaining if c.node not in displacing), remaining[0])
    return remaining[0]


def _earliest_start_of_highest(victims: Sequence[Pod]) -> float:
    """GetEarliestPodStartTime among the highest-priority victims; later is better."""
    top = victims[0].priority
    return min(started(v) for v in victims if v.priority == top)
