"""pkg/scheduler/schedule_one_test.go at v1.37.2, TestSchedulerScheduleOne: the cases about what
happens to a pod when its scheduling or binding cycle fails, for the core scheduler.

Upstream's table checks, for every case that ends in an error, that the failure handler is
given ``clearNominatedNode`` (kubernetes PR #135007: a nomination ends with a scheduling error or
a failed binding, not only with an unschedulable attempt), where the pod goes (backoff queue for
an error) and the FailedScheduling event. Here:

- "schedule pod failed": the scheduling error is rulesched's (a cycle past its deadline, the
  one error a cycle of rules can end with); the pod backs off, the observer reports the failure.
- "pod with existing nominated node name on scheduling error clears nomination": the same with
  a pod that arrived nominated (status.nominatedNodeName): the nominator forgets it and the
  observer ends the nomination (run clears the field in the pod's status).
- "binding failed": the assumed pod is forgotten, backs off, and the nomination it held ends.
- "bind assumed pod scheduled": the pod is bound and nominates nothing.

Cases not ported: the Reserve/Permit/PreBind plugin ones (rulesched has no such extension
points: its rules filter, score and preempt, and a gang's all-or-nothing takes Permit's place)
and the feature-gate variants (NominatedNodeNameForExpectation, async API calls)."""

from __future__ import annotations

import dataclasses

from rulesched.model import Pod
from rulesched.scheduler.cancel import Cancellation
from rulesched.scheduler.framework import Code, SchedulerSettings
from rulesched.scheduler.scheduler import Observer, Scheduler
from tests.helpers.scheduling import Clock, Later, Recording, Ticks, cluster, cpu, requeued
from tests.upstream.harness import default_rules, pod


class Failures(Observer):
    """What the scheduler tells run: FailedScheduling (a cycle's error, a failed binding), a
    binding, the nominations ended (run clears status.nominatedNodeName)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def cycle_failed(self, pod: Pod, message: str, seconds: float) -> None:
        self.events.append(("FailedScheduling", pod.key))

    def bind_failed(self, pod: Pod, node: str, reason: str) -> None:
        self.events.append(("FailedScheduling", pod.key))

    def bound(self, pod: Pod, node: str) -> None:
        self.events.append(("Scheduled", pod.key))

    def nominations_ended(self, pods: list[Pod]) -> None:
        self.events += [("nomination ended", p.key) for p in pods]


def foo_pod(nominated: str = "") -> Pod:
    p = pod("foo", spec=cpu("1"))
    return dataclasses.replace(p, nominated_node_name=nominated) if nominated else p


def scheduler(deadline: float | None = None) -> tuple[Scheduler, Later, Failures]:
    """One node (n000); with ``deadline``, a clock that passes it at once: every cycle errs."""
    store, binder, seen = cluster(1), Later(), Failures()
    settings = SchedulerSettings(cycle_deadline_seconds=deadline)
    cancel = Cancellation(clock=Ticks()) if deadline is not None else Cancellation()
    s = Scheduler(default_rules(), store, settings, binder, Recording(), Clock(), seen, cancel=cancel)
    return s, binder, seen


def test_schedule_pod_failed() -> None:
    s, binder, seen = scheduler(deadline=1e-9)
    s.add(foo_pod())
    assert s.schedule_one() is None  # the cycle erred: given up
    assert requeued(s, "default/foo") and binder.calls == []  # expectPodInBackoffQ
    assert seen.events == [("FailedScheduling", "default/foo")]


def test_pod_with_existing_nominated_node_name_on_scheduling_error_clears_nomination() -> None:
    s, binder, seen = scheduler(deadline=1e-9)
    s.add(foo_pod(nominated="n000"))
    assert s.nominator.node_of("default/foo") == "n000"
    assert s.schedule_one() is None
    assert requeued(s, "default/foo") and binder.calls == []
    assert s.nominator.node_of("default/foo") is None  # expectNominatedNodeName: ""
    assert seen.events == [("nomination ended", "default/foo"), ("FailedScheduling", "default/foo")]


def test_binding_failed() -> None:
    """The binding fails (injectBindError): the assumed pod is forgotten (expectForgetPod), goes
    to backoff, FailedScheduling; the nomination the pod held ends (clearNominatedNode)."""
    s, binder, seen = scheduler()
    s.add(foo_pod(nominated="n000"))
    result = s.schedule_one()
    assert result is not None and result.code is Code.SCHEDULED and binder.calls == [("default/foo", "n000")]
    assert s.store.is_assumed("default/foo")  # expectAssumedPod
    s.binding_finished("default/foo", False, "injected binding error")
    assert not s.store.is_assumed("default/foo") and requeued(s, "default/foo")
    assert s.nominator.node_of("default/foo") is None
    assert ("nomination ended", "default/foo") in seen.events and seen.events[-1] == ("FailedScheduling", "default/foo")


def test_bind_assumed_pod_scheduled() -> None:
    s, binder, seen = scheduler()
    s.add(foo_pod())
    result = s.schedule_one()
    assert result is not None and result.node == "n000" and result.preemption is None
    s.binding_finished("default/foo", True)
    assert seen.events == [("Scheduled", "default/foo")] and s.nominator.node_of("default/foo") is None
