"""What the workers write for an unschedulable pod, request by request (issue 35: no more than
kube-scheduler sends per pod): the PodScheduled condition only when it changed (kube-scheduler's
updatePod), the nomination in the same patch, the FailedScheduling events as client-go's
events.k8s.io/v1 broadcaster sends kube-scheduler's (rulesched.run.event_series): a new event
when the pod's resourceVersion changed since its last one (a write to the pod, seen), else the
last one made a series (one patch), later repeats counted until the series ends."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from rulesched.errors import KubeError
from rulesched.run import workers as workers_module
from rulesched.run.workers import Workers
from tests.upstream.harness import pod


class RecordingApi:
    """The two calls the workers make here, recorded in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.refuse_patches = False

        self.events: set[str] = set()  # the events' names, as posted

    def post_event(
        self,
        regarding: Any,
        type_: str,
        reason: str,
        action: str,
        note: str,
        by: str,
        related: Any = None,
        annotations: Any = None,
        name: str = "",
        series: dict[str, Any] | None = None,
    ) -> None:
        self.calls.append(("event", reason) if series is None else ("event", reason, series["count"]))
        self.events.add(name)

    def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        self.calls.append(("series", patch["series"]["count"]))
        return name in self.events

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False) -> None:
        if self.refuse_patches:
            raise KubeError("PATCH: 500 refused")
        self.calls.append(("patch", patch["status"]))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(workers_module.time, "monotonic", lambda: now[0])
    return now


def run(api: RecordingApi, *steps: Any) -> list[tuple[str, Any]]:
    workers = Workers(api, outcomes=lambda o: None, threads=1)  # type: ignore[arg-type]
    for step in steps:
        step(workers)
    workers.shutdown(wait=True)
    return api.calls


def shapes(calls: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Each call's kind and, for a patch, its fields (conditions reduced to reason and message)."""
    out: list[tuple[str, Any]] = []
    for kind, what in calls:
        if kind == "patch":
            fields = {k: v for k, v in what.items() if k != "conditions"}
            for c in what.get("conditions", []):
                fields["condition"] = (c["type"], c["status"], c["reason"], c["message"])
            what = fields
        out.append((kind, what))
    return out


P = dataclasses.replace(pod("p"), resource_version="1")


def seen(version: int) -> Any:
    """P as the informer has it after the writes that made ``version``."""
    return dataclasses.replace(P, resource_version=str(version))


def test_nomination_goes_in_the_condition_patch(clock: list[float]) -> None:
    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "0/3 nodes are available.", nominated="n1"))
    assert shapes(calls) == [
        ("event", "FailedScheduling"),
        (
            "patch",
            {
                "nominatedNodeName": "n1",
                "condition": ("PodScheduled", "False", "Unschedulable", "0/3 nodes are available."),
            },
        ),
    ]


def test_an_unchanged_condition_is_not_patched_again(clock: list[float]) -> None:
    def later(w: Workers) -> None:
        clock[0] += 61
        w.unschedulable(P, "m1")

    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "m1"), lambda w: w.unschedulable(P, "m1"), later)
    # the second (the same resourceVersion) makes the event a series; the third is counted
    assert calls == [("event", "FailedScheduling"), ("patch", calls[1][1]), ("series", 2)]


def test_a_changed_message_or_reason_is_patched(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.unschedulable(P, "m1"),
        lambda w: w.unschedulable(seen(2), "m2"),  # (each after the last patch was seen)
        lambda w: w.scheduler_error(seen(3), "m2"),  # same message, reason SchedulerError
    )
    assert [(k, w.get("condition", ("",) * 4)[2:]) if k == "patch" else (k,) for k, w in shapes(calls)] == [
        ("event",),
        ("patch", ("Unschedulable", "m1")),
        ("event",),
        ("patch", ("Unschedulable", "m2")),
        ("event",),
        ("patch", ("SchedulerError", "m2")),
    ]


NOMINATED = dataclasses.replace(P, nominated_node_name="n1")  # (as the informer has it)


def test_a_nomination_without_anything_else_new_is_patched_alone(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.unschedulable(NOMINATED, "m1"),
        lambda w: w.unschedulable(NOMINATED, "m1", nominated=""),
    )
    assert shapes(calls)[-1] == ("patch", {"nominatedNodeName": None})
    assert [k for k, *_ in calls] == ["event", "patch", "series", "patch"]


# What the pod holds already is not written again (kube-scheduler 1.37's PodStatusPatchCall:
# syncStatus finds nothing to change and Execute sends nothing); while the informer has not
# brought back this process's own write, the write is what the pod holds (rulesched.run.written).


def test_clearing_a_nomination_the_pod_has_not_sends_nothing(clock: list[float]) -> None:
    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "m1"), lambda w: w.nominate(P, ""))
    assert [k for k, *_ in calls] == ["event", "patch"]


def test_a_nomination_the_pod_has_is_not_sent_again(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.nominate(NOMINATED, "n1"),
        lambda w: w.unschedulable(NOMINATED, "m1", nominated="n1"),
    )
    assert shapes(calls) == [
        ("event", "FailedScheduling"),
        ("patch", {"condition": ("PodScheduled", "False", "Unschedulable", "m1")}),
    ]


def test_a_nomination_cleared_twice_before_the_pod_is_seen_again_is_sent_once(clock: list[float]) -> None:
    calls = run(RecordingApi(), lambda w: w.nominate(NOMINATED, ""), lambda w: w.nominate(NOMINATED, ""))
    assert calls == [("patch", {"nominatedNodeName": None})]


def test_a_nomination_written_but_not_yet_seen_is_what_the_pod_holds(clock: list[float]) -> None:
    """Nominated to n1 against version 1; the informer still has version 1 without it: clearing
    it is sent (the pod seen would say there is nothing to clear), and nominating n1 again is not."""
    calls = run(
        RecordingApi(),
        lambda w: w.nominate(P, "n1"),
        lambda w: w.nominate(P, "n1"),
        lambda w: w.nominate(P, ""),
    )
    assert calls == [("patch", {"nominatedNodeName": "n1"}), ("patch", {"nominatedNodeName": None})]


def test_once_a_newer_pod_is_seen_it_says_what_is_held(clock: list[float]) -> None:
    """Cleared against version 1; version 3 (someone nominated it to n2 since) is seen: clearing
    again is sent; version 4 seen without a nomination: nothing to clear."""
    calls = run(
        RecordingApi(),
        lambda w: w.nominate(NOMINATED, ""),
        lambda w: w.nominate(dataclasses.replace(seen(3), nominated_node_name="n2"), ""),
        lambda w: w.nominate(seen(4), ""),
    )
    assert calls == [("patch", {"nominatedNodeName": None})] * 2


def refused_then_accepted(step: Any, then: Any = None) -> list[tuple[str, Any]]:
    """``step`` with the pod's status patches refused, and once the refusal has landed, ``then``
    (``step`` again by default) with them accepted: the calls recorded."""
    api = RecordingApi()
    api.refuse_patches = True
    workers = Workers(api, outcomes=lambda o: None, threads=1)  # type: ignore[arg-type]
    step(workers)
    deadline = time.monotonic_ns() + 10**10
    while workers.in_flight and time.monotonic_ns() < deadline:  # (the refusal lands first)
        time.sleep(0.01)
    api.refuse_patches = False
    (then or step)(workers)
    workers.shutdown(wait=True)
    return api.calls


def test_a_refused_nomination_is_sent_again(clock: list[float]) -> None:
    calls = refused_then_accepted(lambda w: w.nominate(P, "n1"))
    assert calls == [("patch", {"nominatedNodeName": "n1"})]
    # even when the pod the scheduler hands over carries the nomination (its book's: the
    # scheduler's copy of a pod says what it nominated, written or not)
    on_n1 = NOMINATED
    calls = refused_then_accepted(lambda w: w.nominate(P, "n1"), lambda w: w.nominate(on_n1, "n1"))
    assert calls == [("patch", {"nominatedNodeName": "n1"})]
    calls = refused_then_accepted(lambda w: w.unschedulable(P, "m1", nominated="n1"))
    assert shapes(calls)[-1] == ("patch", {"nominatedNodeName": "n1", "condition": shapes(calls)[-1][1]["condition"]})


def test_a_refused_patch_is_written_again_next_time(clock: list[float]) -> None:
    calls = refused_then_accepted(lambda w: w.unschedulable(P, "m1"))  # the event a series the second time
    assert [k for k, *_ in calls] == ["event", "series", "patch"]


def test_forgotten_pods_are_written_afresh(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.unschedulable(P, "m1"),
        lambda w: w.forget(P.key),
        lambda w: w.unschedulable(P, "m1"),
    )
    assert [k for k, *_ in calls] == ["event", "patch", "series", "patch"]  # (the series outlives it)


def test_a_change_seen_since_the_last_event_makes_a_new_event(clock: list[float]) -> None:
    """The event's reference carries the pod's resourceVersion: the same failure after any
    change to the pod (here its condition, patched and seen) is another event."""
    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "m1"), lambda w: w.unschedulable(seen(2), "m1"))
    assert [k for k, *_ in calls] == ["event", "patch", "event"]


def test_repeats_are_counted_and_the_count_written_when_the_series_ends(clock: list[float]) -> None:
    """client-go's recordToSink and finishSeries (event_broadcaster.go): a failure with nothing
    written to the pod since the last event makes that event a series, later ones cost no
    request; six minutes after the last one the count is written and the series forgotten, so
    the next failure posts a new event."""

    def again(seconds: float = 1.0) -> Any:
        def step(w: Workers) -> None:
            clock[0] += seconds
            w.unschedulable(P, "m")

        return step

    steps = [again() for _ in range(10)] + [again(6 * 60 + 1), again()]
    calls = [c for c in run(RecordingApi(), *steps) if c[0] != "patch"]
    # (the ended series' count is not written in the pod's order: compared as a multiset)
    assert sorted(calls) == sorted(
        [
            ("event", "FailedScheduling"),  # 1st, then its condition patched (not seen: no informer here)
            ("series", 2),  # 2nd
            ("series", 10),  # 3rd-10th counted; the series ended: its count written
            ("event", "FailedScheduling"),  # 11th: a new event
            ("series", 2),  # 12th
        ]
    )


def test_an_ended_series_count_is_written_without_another_failure(clock: list[float]) -> None:
    """finishSeries runs on its own ticker: a series whose pod never fails again has its count
    written once it ends (the loop's sweep), not only when some other pod fails."""

    def again(w: Workers) -> None:
        clock[0] += 1.0
        w.unschedulable(P, "m")

    def later(w: Workers) -> None:
        clock[0] += 6 * 60 + 1
        w.sweep_series()

    calls = [c for c in run(RecordingApi(), again, again, again, later) if c[0] != "patch"]
    assert calls == [("event", "FailedScheduling"), ("series", 2), ("series", 3)]


def test_a_lasting_series_count_is_written_every_thirty_minutes(clock: list[float]) -> None:
    """refreshExistingEventSeries: a series seen every five minutes never ends; its count is
    written each thirty minutes."""

    def again(w: Workers) -> None:
        clock[0] += 5 * 60
        w.unschedulable(P, "m")

    calls = [c for c in run(RecordingApi(), *([again] * 15)) if c[0] != "patch"]
    # (the count as it stood when thirty minutes had passed, before that moment's event)
    assert calls == [("event", "FailedScheduling"), ("series", 2), ("series", 7), ("series", 13)]


def test_a_series_whose_event_is_gone_is_posted_with_its_count(clock: list[float]) -> None:
    """recordEvent: the series' patch finds no event (deleted, or its post failed): the event is
    posted again, under its name, with the series."""
    api = RecordingApi()

    def deleted(w: Workers) -> None:  # (once the event is posted)
        deadline = time.monotonic_ns() + 10**10
        while (w.in_flight or not api.events) and time.monotonic_ns() < deadline:
            time.sleep(0.01)
        api.events.clear()

    steps = [lambda w: w.unschedulable(P, "m1"), deleted, lambda w: w.unschedulable(P, "m1")]
    calls = [c for c in run(api, *steps) if c[0] != "patch"]
    assert calls == [("event", "FailedScheduling"), ("series", 2), ("event", "FailedScheduling", 2)]
