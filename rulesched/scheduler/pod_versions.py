"""Two versions of one pending pod, as the scheduling queue (:mod:`rulesched.scheduler.queue`)
compares them: an update that cannot change where the pod fits leaves it where it waits, and a
pod updated during its cycle keeps the node its preemption nominated."""

from __future__ import annotations

import dataclasses

from rulesched.model import Pod

# What a pending pod's update may change without changing where it can go: its status (the
# PodScheduled condition a scheduler writes after each failed attempt is no field of Pod at all;
# the nominated node is the scheduler's own note). kube-scheduler's queue likewise leaves a parked
# pod parked on such an update: PodSchedulingPropertiesChange finds no property changed, and no
# plugin of the default profile registers the plain Pod/Update event of the pod itself; requeued
# by it, every attempt's own status patch would bring the pod back for another attempt. The
# resourceVersion changes with every write (upstream's isPodUpdated strips it too).
_STATUS_ONLY = frozenset({"nominated_node_name", "resource_version"})
_SCHEDULING_FIELDS = tuple(f.name for f in dataclasses.fields(Pod) if f.name not in _STATUS_ONLY)


def same_for_scheduling(a: Pod, b: Pod) -> bool:
    """Whether two versions of a pod differ at most in what cannot change where it fits."""
    return a is b or all(getattr(a, name) == getattr(b, name) for name in _SCHEDULING_FIELDS)


def keep_nomination(newer: Pod, requeued: Pod) -> Pod:
    """A pod updated during its cycle keeps the node its preemption nominated."""
    if requeued.nominated_node_name and not newer.nominated_node_name:
        return dataclasses.replace(newer, nominated_node_name=requeued.nominated_node_name)
    return newer
