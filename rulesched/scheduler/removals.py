"""The victims a preemptor waits for, and the victims whose removal failed: a mixin of
:class:`rulesched.scheduler.scheduler.Scheduler`, apart so that module keeps to the cycle.

A preemptor waits, rather than preempt again, while the victims of its last preemption are
leaving (upstream's PodEligibleToPreemptOthers): victims still in the store, and (DRA) claims
their going frees not deallocated yet. Not for ever: past :data:`AWAIT_VICTIMS_SECONDS` after
the preemption it waits only for the victims seen terminating (their deletion is under way). A
victim neither gone nor terminating by then was not removed (its eviction refused, its removal
given up, or the failure never reported), unless the evictor says its removal is still under way
(a call not answered yet, or retried), and the preemptor's next attempt decides anew on the
cluster as it is (:func:`leaving`).

The live scheduler's workers report a failed removal (:meth:`RemovalsMixin.removal_failed`):
every preemptor waiting on that victim waits no more and is activated at once, as kube-scheduler's
async preemption executor activates its preemptor when a preemption API call fails
(preemption/executor.go prepareCandidateAsync). Its nomination stays until that next attempt,
which clears it if preemption finds no node any more, as upstream's PostFilter does.

A victim whose eviction a PodDisruptionBudget refused (the Eviction API's 429) is spared by later
preemptions (:class:`Refusals`) for as long as its budgets are as they were when it was refused
or allow no disruption. kube-scheduler never meets this: it deletes every victim, whatever the
budgets (which only order its candidates). rulesched evicts the victims a budget selects
(``--evict-victims``), and its dry run, as upstream's, takes a candidate that violates a budget
when none better is found: without the refusal remembered, the next attempt would choose the same
victim and meet the same 429, for as long as the budget holds. Spared, the victim is no candidate
victim: the preemptor's next attempt chooses another node or other victims, or stays
unschedulable saying why (:data:`rulesched.scheduler.preemption.REFUSED`); a budget that later
allows a disruption moves the parked pods (:meth:`RemovalsMixin.budgets_changed`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rulesched.cluster.store import ClusterStore
from rulesched.model import Pod, PodDisruptionBudget
from rulesched.scheduler.cluster_events import Event
from rulesched.scheduler.queue import SchedulingQueue
from rulesched.semantics.disruption import covers
from rulesched.semantics.dra_preemption import unsettled

if TYPE_CHECKING:
    from rulesched.scheduler import gang
    from rulesched.scheduler.interfaces import Evictor

log = logging.getLogger("rulesched.scheduler.scheduler")  # (one logger for the scheduler's lines)

# How long a preemptor waits for victims not seen terminating: a deleted victim is terminating (or
# gone) within about a second; one still neither after this was not removed. (Also how long a
# parked preemptor whose victims are still there stays parked through other pods' deletions:
# :meth:`RemovalsMixin._awaiting_victims`.)
AWAIT_VICTIMS_SECONDS = 5.0


def store_pod(store: ClusterStore, key: str) -> Pod | None:
    """The pod of that key on a node of the store, if any (a node's pods, looked through)."""
    node = store.pod_node(key)
    view = store.node_view(node) if node is not None else None
    return next((p for p in view.pods if p.key == key), None) if view is not None else None


def leaving(
    store: ClusterStore,
    victims: Sequence[str],
    since: float,
    now: float,
    under_way: Callable[[Pod], bool] | None = None,
) -> list[str]:
    """Of ``victims`` (keys; preempted at ``since``), those the preemptor still waits for: every
    one still in the store until :data:`AWAIT_VICTIMS_SECONDS` have passed, then only those
    seen terminating or whose removal is still ``under_way`` (the evictor's call not answered
    yet, or being retried: its end is reported either way)."""
    there = [key for key in victims if store.pod_node(key) is not None]
    if not there or now - since < AWAIT_VICTIMS_SECONDS:
        return there
    pods = [pod for key in there if (pod := store_pod(store, key)) is not None]
    return [p.key for p in pods if p.deleting or (under_way is not None and under_way(p))]


@dataclass(frozen=True)
class Refusal:
    """A victim's eviction refused by a budget: the pod (its uid: a pod made since under the same
    name is another pod) and the budgets selecting it as the store had them then."""

    uid: str
    budgets: tuple[PodDisruptionBudget, ...]

    def holds(self, pod: Pod, pdbs: Sequence[PodDisruptionBudget]) -> bool:
        """Whether an eviction of ``pod`` would still be refused as far as the store can tell:
        each budget selecting it now is one of those that refused it (the store has seen no new
        status of it since) or allows no disruption. With none selecting it now, only while none
        did then either (the store had not seen the budget: it has not caught up yet)."""
        if pod.uid != self.uid:
            return False
        now = [pdb for pdb in pdbs if covers(pdb, pod)]
        if not now:
            return not self.budgets
        return all(pdb.disruptions_allowed <= 0 or any(pdb is seen for seen in self.budgets) for pdb in now)


class Refusals:
    """The victims whose eviction a budget refused, by pod key, while the refusal holds."""

    def __init__(self) -> None:
        self._by_key: dict[str, Refusal] = {}
        # preemptors every candidate of whose last preemption would have violated a budget (with
        # ``SchedulerSettings.budgets_refuse``): tried again when a budget changes
        self.held: set[str] = set()

    def __len__(self) -> int:
        return len(self._by_key)

    def add(self, victim: Pod, pdbs: Sequence[PodDisruptionBudget]) -> None:
        self._by_key[victim.key] = Refusal(victim.uid, tuple(pdb for pdb in pdbs if covers(pdb, victim)))

    def spared(self, store: ClusterStore) -> dict[str, frozenset[str]]:
        """Node name -> the keys of its pods preemption leaves alone; the refusals that hold no
        more (the pod gone, a budget allowing a disruption now) are forgotten."""
        found: dict[str, set[str]] = {}
        for key, refusal in list(self._by_key.items()):
            pod = store_pod(store, key)
            if pod is None or not refusal.holds(pod, store.pdbs):
                del self._by_key[key]
                continue
            found.setdefault(pod.node_name or "", set()).add(key)
        return {node: frozenset(keys) for node, keys in found.items()}


class RemovalsMixin:
    """What the scheduler keeps of its preemptions' victims; the attributes are the scheduler's."""

    store: ClusterStore
    queue: SchedulingQueue
    gangs: gang.Gangs
    clock: Callable[[], float]
    evictor: Evictor
    _victims: dict[str, list[str]]  # preemptor -> its victims not yet gone
    _preempted_at: dict[str, float]  # preemptor -> when (clock) it last preempted
    _victim_claims: dict[str, tuple[list[str], frozenset[str]]]
    refusals: Refusals

    def _awaiting_victims(self) -> set[str]:
        """The preemptors some victim of whose preemption is still in the store, for at most
        :data:`AWAIT_VICTIMS_SECONDS` since they preempted (the queue's
        :attr:`SchedulingQueue.awaiting_victims`: another pod's deletion leaves them parked)."""
        pod_node, since = self.store.pod_node, self.clock() - AWAIT_VICTIMS_SECONDS
        return {
            key
            for key, victims in self._victims.items()
            if self._preempted_at.get(key, since) > since and any(pod_node(v) is not None for v in victims)
        }

    def victims_leaving(self, victims: Sequence[str], since: float) -> list[str]:
        """:func:`leaving`, the evictor saying which removals are under way (an evictor that
        removes at once has none)."""
        under_way = getattr(self.evictor, "removing", None)
        return leaving(self.store, victims, since, self.clock(), under_way)

    def left_to_wait(self, key: str) -> tuple[list[str], list[str]]:
        """What the pod's earlier preemption still waits for: its victims still leaving
        (:func:`leaving`), and (DRA) the claims their going frees that the resourceclaim
        controller has not deallocated yet (KEP-5690's settling: preempting again meanwhile would
        evict more pods). Asked without changing anything (the queue's hints ask it)."""
        victims = self._victims.get(key)
        remaining = self.victims_leaving(victims, self._preempted_at.get(key, 0.0)) if victims else []
        held = self._victim_claims.get(key)
        return remaining, unsettled(self.store.dra.state.claims, *held) if held else []

    def _victims_remain(self, pod: Pod) -> bool:
        """Whether the pod's earlier preemption still waits (:meth:`left_to_wait`); what it no
        longer waits for is forgotten."""
        remaining, claims = self.left_to_wait(pod.key)
        if remaining:
            self._victims[pod.key] = remaining
            return True
        victims = self._victims.pop(pod.key, None)
        if victims:
            if any(self.store.pod_node(key) is not None for key in victims):
                log.info("its victims were not removed; preempting anew", extra={"pod": pod.key})
            self._preempted_at.pop(pod.key, None)
        held = self._victim_claims.pop(pod.key, None)
        if claims and held:
            self._victim_claims[pod.key] = (claims, held[1])
            return True
        return False

    def removal_failed(self, victim: str, refused: bool) -> None:
        """(The scheduler's thread.) The removal of ``victim`` (a pod key) failed: ``refused``, a
        PodDisruptionBudget refused its eviction (it is spared from now on, see the module's
        docstring); else it was given up. Every preemptor waiting on it, a pod or a group's
        members, waits for its victims no more and is tried again at once."""
        pod = store_pod(self.store, victim)
        if refused and pod is not None:
            self.refusals.add(pod, self.store.pdbs)
        activate = [key for key, victims in self._victims.items() if victim in victims]
        for key in activate:
            del self._victims[key]
            self._preempted_at.pop(key, None)
            self._victim_claims.pop(key, None)
        for state in self.gangs.states.values():
            if victim in state.victims:
                state.victims = []
                activate += state.pending
        for key in activate:
            self.queue.activate(key)
        log.info(
            "a victim's %s; its preemptor tried again",
            "eviction refused by a PodDisruptionBudget" if refused else "removal given up",
            extra={"pod": victim, "preemptor": ",".join(activate) or None},
        )

    def budgets_changed(self) -> None:
        """(The scheduler's thread.) A PodDisruptionBudget changed: the preemptors whose every
        candidate violated a budget are tried again, and if a victim spared after a refusal may be
        evicted now, the parked pods are (kube-scheduler has no such event: it never meets a
        refusal)."""
        for key in sorted(self.refusals.held):  # (a budget may allow their victims' evictions now)
            self.queue.activate(key)
        self.refusals.held.clear()
        before = len(self.refusals)
        if before:
            self.refusals.spared(self.store)
            if len(self.refusals) < before:
                self.queue.move(Event.OTHER)

    def spared_victims(self) -> Mapping[str, frozenset[str]]:
        """Node name -> pods there no preemption may choose (their eviction refused), for the
        next dry run."""
        return self.refusals.spared(self.store) if self.refusals else {}
