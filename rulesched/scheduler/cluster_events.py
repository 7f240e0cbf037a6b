"""The cluster changes the scheduling queue reacts to, named as kube-scheduler names its cluster
events: the informers (:mod:`rulesched.mirror`) say which happened, the queue
(:mod:`rulesched.scheduler.queue`) decides which parked pods they may help. A module of its own so
that the side reporting events need not import the queue.
Next stage: :meth:`rulesched.scheduler.queue.SchedulingQueue.move`.
"""

from __future__ import annotations

import enum


class Event(enum.Enum):
    """Cluster changes that can make a parked pod schedulable (kube-scheduler's cluster events,
    coarsely)."""

    NODE_ADDED = "NodeAdd"
    NODE_CHANGED = "NodeUpdate"  # labels, taints, allocatable, schedulability
    POD_ADDED = "AssignedPodAdd"  # a pod placed: may satisfy pod affinity or spreading
    POD_DELETED = "AssignedPodDelete"  # resources freed
    OTHER = "Other"  # anything else worth a retry (PDBs, namespaces, preemption)
