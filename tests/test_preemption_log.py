"""benchmarks/preemption_log.py reads a run's preemptions pod by pod from either scheduler's log:
kube-scheduler's at -v=2 (its executor's lines; a preemption's victims are the removals it sent or
skipped as leaving) and ``rulesched run --v=2``'s (each attempt, the victims named), into the same
summary: preemptors, repeats, what each preemptor did next, victims chosen again, the time to
a victim's removal."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from preemption_log import parse, summarize  # noqa: E402

# kube-scheduler 1.37.2 at -v=2, as it logs (the lines' shapes copied from a speed run's log)
KUBE_SCHEDULER = """\
I1203 13:01:25.844645   26044 executor.go:255] "Start the preemption asynchronously" preemptor="default/p3" node="node-1" numVictims=1 numVictimsToDelete=1
I1203 13:01:25.845000   26044 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" pod="default/p3" err="0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node node-1, preempting 1 victims"
I1203 13:01:25.922829   26044 executor.go:153] "Preemptor Pod preempted victim Pod" preemptor="default/p3" victim="default/v1" node="node-1"
I1203 13:01:26.000000   26044 executor.go:255] "Start the preemption asynchronously" preemptor="default/p4" node="node-1" numVictims=1 numVictimsToDelete=0
I1203 13:01:26.000100   26044 executor.go:210] "Victim Pod is already being deleted, skipping the API call for it" preemptor="default/p4" node="node-1" victim="default/v1"
I1203 13:01:26.500000   26044 schedule_one.go:483] "Successfully bound pod to node" pod="default/p4" node="node-1" evaluatedNodes=1 feasibleNodes=1
I1203 13:01:27.000000   26044 executor.go:255] "Start the preemption asynchronously" preemptor="default/p3" node="node-2" numVictims=1 numVictimsToDelete=1
I1203 13:01:27.100000   26044 executor.go:153] "Preemptor Pod preempted victim Pod" preemptor="default/p3" victim="default/v2" node="node-2"
I1203 13:01:28.000000   26044 schedule_one.go:483] "Successfully bound pod to node" pod="default/p3" node="node-2" evaluatedNodes=1 feasibleNodes=1
I1203 13:01:28.100000   26044 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" pod="default/p0" err="0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
"""

# the same story as `rulesched run --v=2` logs it
RULESCHED = """\
2026-12-03T13:01:25.844Z VERBOSE rulesched.run.loop: unschedulable pod=default/p3 reason="0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node node-1, preempting 1 victims" nominated=node-1 victims=default/v1
2026-12-03T13:01:25.922Z INFO rulesched.run.workers: deleted pod=default/v1 node=node-1 preemptor=default/p3
2026-12-03T13:01:26.000Z VERBOSE rulesched.run.loop: unschedulable pod=default/p4 reason="0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node node-1, preempting 1 victims" nominated=node-1 victims=default/v1
2026-12-03T13:01:26.500Z VERBOSE rulesched.run.loop: scheduled pod=default/p4 node=node-1 evaluated=1 feasible=1
2026-12-03T13:01:27.000Z VERBOSE rulesched.run.loop: unschedulable pod=default/p3 reason="0/2 nodes are available: 2 Insufficient cpu. preemption: found a potential placement for pod on node node-2, preempting 1 victims" nominated=node-2 victims=default/v2
2026-12-03T13:01:27.100Z INFO rulesched.run.workers: evicted pod=default/v2 node=node-2 preemptor=default/p3
2026-12-03T13:01:28.000Z VERBOSE rulesched.run.loop: scheduled pod=default/p3 node=node-2 evaluated=500 feasible=1
2026-12-03T13:01:28.100Z VERBOSE rulesched.run.loop: unschedulable pod=default/p0 reason="0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
"""


def test_both_logs_tell_the_same_story() -> None:
    priorities = {"p3": 3, "p4": 4, "p0": 0}
    for text in (KUBE_SCHEDULER, RULESCHED):
        s = summarize(parse(text.splitlines()), priorities)
        assert (s.preemptions, s.preemptors, s.repeated) == (3, 2, 1)
        assert s.by_priority == {3: 1, 4: 1}
        # p3 lost node-1 to p4 (which chose p3's victim, still leaving) and preempted again
        assert s.outcomes == {"bound there": 2, "preempted again": 1}
        assert (s.victims_chosen, s.chosen_again) == (3, 1)
        assert s.removal_seconds is not None
        median, _ = s.removal_seconds
        assert abs(median - 0.09) < 0.02  # (0.078 and 0.1: the two removals answered)


def test_a_failed_attempt_is_no_preemption_and_an_unknown_pod_counts_as_priority_0() -> None:
    run = parse(KUBE_SCHEDULER.splitlines())
    assert [s.kind for s in run.steps["p0"]] == ["failed"]
    assert summarize(run, {}).by_priority == {0: 2}


def test_a_preemptor_waiting_for_its_victims_is_not_an_outcome() -> None:
    waiting = (
        "2026-12-03T13:01:25.900Z VERBOSE rulesched.run.loop: unschedulable pod=default/p3 "
        'reason="... preemption: not eligible due to a terminating pod on the nominated node."'
    )
    lines = RULESCHED.splitlines()
    s = summarize(parse([lines[0], waiting, *lines[1:]]), {})
    assert parse([waiting]).steps["p3"][0].kind == "waiting"
    assert s.outcomes == {"bound there": 2, "preempted again": 1}
