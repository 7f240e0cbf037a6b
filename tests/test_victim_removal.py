"""How a preemption's victim leaves (rulesched/run/evictions.py, ``--evict-victims``): through the
Eviction API when a PodDisruptionBudget selects it, as the API server's eviction handler finds
its budgets (pkg/registry/core/pod/storage/eviction.go getPodDisruptionBudgets: the pod's
namespace, the selector matching its labels, an empty policy/v1 selector matching every pod, a
nil one none); otherwise with a DELETE after the DisruptionTarget patch, as kube-scheduler 1.37's
executor deletes every victim (pkg/scheduler/framework/preemption/executor.go PreemptPod),
here with the victim's uid as a precondition."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from rulesched.errors import ConflictError, NotFoundError
from rulesched.model import LabelSelector, LabelSelectorRequirement, PodDisruptionBudget
from rulesched.run.evictions import ALL, BUDGETED, NONE, through_eviction
from rulesched.run.workers import Workers
from tests.upstream.harness import pdb, pod

VICTIM = pod("web-1", labels={"app": "web"}, node_name="n1", uid="u-1")
LOOSE = pod("loose", labels={"app": "other"}, node_name="n1", uid="u-2")


def budget(selector: LabelSelector | None, namespace: str = "default") -> PodDisruptionBudget:
    return PodDisruptionBudget("b", namespace, selector, 1)


WEB = LabelSelector(match_labels=(("app", "web"),))
CASES = [
    # (case, budgets, the victim goes through the Eviction API under budgeted)
    ("no budget", [], False),
    ("a budget selecting it by matchLabels", [pdb("web", "default", {"app": "web"}, 1)], True),
    ("a budget allowing no disruption still selects it", [pdb("web", "default", {"app": "web"}, 0)], True),
    ("a budget of another namespace", [budget(WEB, "other")], False),
    ("a budget selecting other labels", [pdb("db", "default", {"app": "db"}, 1)], False),
    ("an empty policy/v1 selector selects every pod", [budget(LabelSelector())], True),
    ("a nil selector selects none", [budget(None)], False),
    (
        "a matchExpressions selector",
        [budget(LabelSelector(match_expressions=(LabelSelectorRequirement("app", "In", ("web", "api")),)))],
        True,
    ),
    (
        "a matchExpressions selector not matching",
        [budget(LabelSelector(match_expressions=(LabelSelectorRequirement("app", "NotIn", ("web",)),)))],
        False,
    ),
]


@pytest.mark.parametrize(("case", "pdbs", "evicted"), CASES, ids=[c[0] for c in CASES])
def test_which_victims_go_through_the_eviction_api(case: str, pdbs: list[PodDisruptionBudget], evicted: bool) -> None:
    assert through_eviction(BUDGETED, VICTIM, pdbs) is evicted, case
    assert through_eviction(ALL, VICTIM, pdbs) is True  # the Eviction API for every victim
    assert through_eviction(NONE, VICTIM, pdbs) is False  # kube-scheduler: a DELETE whatever the budgets


class RecordingApi:
    """The calls a victim's removal makes, in order; ``delete_error``: what each DELETE raises."""

    def __init__(self, delete_error: Exception | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.delete_error = delete_error

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any], strategic: bool = False) -> None:
        types = sorted(c["type"] for c in patch["status"]["conditions"])
        self.calls.append(("patch", name, types))

    def evict(self, namespace: str, name: str) -> None:
        self.calls.append(("evict", name, None))

    def delete(self, resource: Any, namespace: str, name: str, uid: str = "") -> None:
        self.calls.append(("delete", name, uid))
        if self.delete_error is not None:
            raise self.delete_error

    def post_event(self, regarding: dict[str, str], type_: str, reason: str, *args: Any, **kw: Any) -> None:
        self.calls.append(("event", regarding["name"], reason))


def remove(api: RecordingApi, mode: str, pdbs: list[PodDisruptionBudget]) -> list[tuple[str, float]]:
    """Both victims handed over for one preemptor; the executions reported (result, seconds):
    one, or two when the first victim was done before the second was handed over."""
    workers = Workers(api, outcomes=lambda o: None, threads=1, evict_victims=mode, budgets=lambda: pdbs)  # type: ignore[arg-type]
    executed: list[tuple[str, float]] = []
    workers.executed = lambda kind, result, seconds: executed.append((result, seconds))
    preemptor = pod("high", uid="u-high")
    workers.evict(VICTIM, preemptor)
    workers.evict(LOOSE, preemptor)
    end = time.monotonic() + 10
    while workers.in_flight and time.monotonic() < end:  # (the events follow the removals)
        time.sleep(0.01)
    workers.shutdown(wait=True)
    return executed


MARKS = ["DisruptionTarget", "rulesched.io/PreemptedByScheduler"]


def test_a_budgeted_victim_is_evicted_and_the_other_deleted_after_its_mark() -> None:
    api = RecordingApi()
    executed = remove(api, BUDGETED, [pdb("web", "default", {"app": "web"}, 1)])
    # each victim's own calls in order (the two victims' removals, and the events on the shared
    # pool, go at once)
    assert [c for c in api.calls if c[1] == "web-1"] == [
        ("patch", "web-1", MARKS),
        ("evict", "web-1", None),
        ("event", "web-1", "Preempted"),
    ]
    assert [c for c in api.calls if c[1] == "loose"] == [
        ("patch", "loose", MARKS),
        ("delete", "loose", "u-2"),  # only that pod: a pod of the same name made since is not the victim
        ("event", "loose", "Preempted"),
    ]
    assert executed and {result for result, _ in executed} == {"success"}


@pytest.mark.parametrize("mode", [ALL, NONE])
def test_all_or_none_through_the_eviction_api(mode: str) -> None:
    api = RecordingApi()
    remove(api, mode, [pdb("web", "default", {"app": "web"}, 1)])
    removals = [(call, name) for call, name, _ in api.calls if call in ("evict", "delete")]
    verb = "evict" if mode == ALL else "delete"
    assert removals == [(verb, "web-1"), (verb, "loose")]


@pytest.mark.parametrize(
    "error",
    [NotFoundError("DELETE: 404 gone"), ConflictError("DELETE: 409 Precondition failed: UID")],
    ids=["gone already", "another pod has its name now"],
)
def test_a_victim_gone_before_its_deletion_is_done_with(error: Exception) -> None:
    """404: gone; 409 on the uid precondition: the victim is gone and a pod of the same name was
    made since. Either way the victim is not retried, and the preemption ends a success."""
    api = RecordingApi(delete_error=error)
    executed = remove(api, NONE, [])
    assert [c for c in api.calls if c[0] == "delete"] == [("delete", "web-1", "u-1"), ("delete", "loose", "u-2")]
    assert executed and {result for result, _ in executed} == {"success"}


class BlockingApi(RecordingApi):
    """A DELETE that waits until ``release`` is set (the API server answering later)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def delete(self, resource: Any, namespace: str, name: str, uid: str = "") -> None:
        self.release.wait(10)
        super().delete(resource, namespace, name, uid)


def test_a_victim_whose_removal_is_under_way_is_not_sent_again() -> None:
    """Two preemptors choose the same victim while its DELETE is unanswered: one patch, one
    DELETE, one event (kube-scheduler's executor sends nothing for a victim already terminating);
    once that removal is over, a later preemption may hand it over again."""
    api = BlockingApi()
    workers = Workers(api, outcomes=lambda o: None, threads=1, evict_victims=NONE, budgets=lambda: [])  # type: ignore[arg-type]
    workers.evict(LOOSE, pod("first", uid="u-first"))
    workers.evict(LOOSE, pod("second", uid="u-second"))  # under way: not sent again
    api.release.set()
    end = time.monotonic() + 10
    while workers.in_flight and time.monotonic() < end:
        time.sleep(0.01)
    assert [c[0] for c in api.calls] == ["patch", "delete", "event"]
    workers.evict(LOOSE, pod("third", uid="u-third"))  # over: sent again (were it still there)
    end = time.monotonic() + 10
    while workers.in_flight and time.monotonic() < end:
        time.sleep(0.01)
    workers.shutdown(wait=True)
    assert [c[0] for c in api.calls] == ["patch", "delete", "event", "patch", "delete", "event"]
