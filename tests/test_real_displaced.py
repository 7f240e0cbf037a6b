"""A preemptor displaced by a higher one preempts again, on the real kube-apiserver 1.37, as the
real kube-scheduler does beside it (tests/test_preemption_displaced.py has the same story step by
step in the scheduler alone).

Each side (a namespace, two 2-cpu nodes of its own): ``victim`` (priority 0) on node a and
``other`` (priority 1) on node b, both running. ``lower`` (priority 500) preempts ``victim`` (the
cheaper), which then stays terminating (no kubelet). ``higher`` (priority 1000) comes: node a and
the same terminating victim are its cheapest choice too (kube-scheduler's GetVictimsOnNode takes
every pod of the node), so it is nominated there; nothing is sent to the victim again
(prepareCandidateAsync skips a victim with a deletionTimestamp) and, with no victim to send, the
executor does not clear ``lower``'s nomination either (it does that in the goroutine it then
does not start), which reserves nothing against ``higher``. Once the victim is gone (the kubelet's part, played
here), ``higher`` is bound to a and ``lower`` preempts ``other`` on b: kube-scheduler's victim
deletion queues it (NodeResourcesFit answers Queue), rulesched's moves a preemptor when its last
victim goes (rulesched.scheduler.hint_host; before that it stayed parked: the node its victim
freed, now ``higher``'s, held nothing for it).
"""

from __future__ import annotations

import time
from typing import Any

from tests.realk8s import Kube, Running


def _nominated(pod: dict[str, Any]) -> str:
    return str(pod.get("status", {}).get("nominatedNodeName") or "")


def _preempted_events(k8s: Kube, ns: str, name: str) -> int:
    return sum(1 for e in k8s.events(ns) if e["reason"] == "Preempted" and e["regarding"]["name"] == name)


def test_a_displaced_preemptor_preempts_again_as_kube_schedulers_does(k8s: Kube) -> None:
    for name, value in (("why-one", 1), ("why-mid", 500), ("why-high", 1000)):
        k8s.create("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": name}, "value": value})
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    sides = ((ours, "rulesched"), (theirs, "default-scheduler"))
    for ns, scheduler in sides:
        for n in ("a", "b"):
            k8s.node(f"{n}-{ns}", cpu="2", labels={"side": ns})
        k8s.pod(ns, "victim", cpu="2", scheduler=scheduler, spec={"nodeName": f"a-{ns}"})
        k8s.pod(ns, "other", cpu="2", scheduler=scheduler, spec={"nodeName": f"b-{ns}", "priorityClassName": "why-one"})
        for name in ("victim", "other"):
            k8s.mark_running(ns, name)
    with k8s.kube_scheduler(), Running(k8s):
        for ns, scheduler in sides:
            spec = {"priorityClassName": "why-mid", "nodeSelector": {"side": ns}}
            k8s.pod(ns, "lower", cpu="2", scheduler=scheduler, spec=spec)
        for ns, _ in sides:
            assert k8s.wait(lambda ns=ns: _nominated(k8s.read_pod(ns, "lower")) == f"a-{ns}", 30), ns
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "victim")["metadata"].get("deletionTimestamp"), 30), ns
        for ns, scheduler in sides:
            spec = {"priorityClassName": "why-high", "nodeSelector": {"side": ns}}
            k8s.pod(ns, "higher", cpu="2", scheduler=scheduler, spec=spec)
        for ns, _ in sides:
            assert k8s.wait(lambda ns=ns: _nominated(k8s.read_pod(ns, "higher")) == f"a-{ns}", 30), ns
        time.sleep(1.0)  # (a nomination cleared would have been written by now)
        for ns, _ in sides:
            # nothing sent again for the victim, nor the lower nomination cleared: 1.37.2's
            # asynchronous executor does both in the goroutine it does not start without a
            # victim to send (prepareCandidateAsync)
            assert _nominated(k8s.read_pod(ns, "lower")) == f"a-{ns}", ns
            assert _preempted_events(k8s, ns, "victim") == 1, ns
            assert not k8s.read_pod(ns, "other")["metadata"].get("deletionTimestamp")
        for ns, _ in sides:  # the kubelets: the victim's containers stopped
            k8s.remove_terminating(ns)
        for ns, _ in sides:
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "higher")["spec"].get("nodeName") == f"a-{ns}", 30), ns
            assert k8s.wait(lambda ns=ns: _nominated(k8s.read_pod(ns, "lower")) == f"b-{ns}", 30), ns
            assert k8s.wait(lambda ns=ns: k8s.read_pod(ns, "other")["metadata"].get("deletionTimestamp"), 30), ns
