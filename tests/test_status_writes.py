"""What the workers write for an unschedulable pod, request by request (issue 35: no more than
kube-scheduler sends per pod): the PodScheduled condition only when it changed (kube-scheduler's
updatePod), the nomination in the same patch, the FailedScheduling event at most once a minute
for one message."""

from __future__ import annotations

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

    def post_event(self, regarding: dict[str, str], type_: str, reason: str, *args: Any, **kw: Any) -> None:
        self.calls.append(("event", reason))

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


P = pod("p")


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
        clock[0] += 61  # past the event's minute: the event again, the same condition not
        w.unschedulable(P, "m1")

    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "m1"), lambda w: w.unschedulable(P, "m1"), later)
    assert [k for k, _ in calls] == ["event", "patch", "event"]


def test_a_changed_message_or_reason_is_patched(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.unschedulable(P, "m1"),
        lambda w: w.unschedulable(P, "m2"),
        lambda w: w.scheduler_error(P, "m2"),  # same message, reason SchedulerError
    )
    assert [(k, w.get("condition", ("",) * 4)[2:]) if k == "patch" else (k,) for k, w in shapes(calls)] == [
        ("event",),
        ("patch", ("Unschedulable", "m1")),
        ("event",),
        ("patch", ("Unschedulable", "m2")),
        ("patch", ("SchedulerError", "m2")),
    ]


def test_a_nomination_without_anything_else_new_is_patched_alone(clock: list[float]) -> None:
    calls = run(RecordingApi(), lambda w: w.unschedulable(P, "m1"), lambda w: w.unschedulable(P, "m1", nominated=""))
    assert shapes(calls)[-1] == ("patch", {"nominatedNodeName": None})
    assert len(calls) == 3


def test_a_refused_patch_is_written_again_next_time(clock: list[float]) -> None:
    api = RecordingApi()
    api.refuse_patches = True
    workers = Workers(api, outcomes=lambda o: None, threads=1)  # type: ignore[arg-type]
    workers.unschedulable(P, "m1")
    deadline = time.monotonic_ns() + 10**10
    while workers.in_flight and time.monotonic_ns() < deadline:  # (the refusal lands first)
        time.sleep(0.01)
    api.refuse_patches = False
    workers.unschedulable(P, "m1")  # within the minute: no event, the condition again
    workers.shutdown(wait=True)
    assert [k for k, _ in api.calls] == ["event", "patch"]


def test_forgotten_pods_are_written_afresh(clock: list[float]) -> None:
    calls = run(
        RecordingApi(),
        lambda w: w.unschedulable(P, "m1"),
        lambda w: w.forget(P.key),
        lambda w: w.unschedulable(P, "m1"),
    )
    assert [k for k, _ in calls] == ["event", "patch", "event", "patch"]
