"""The live faces against the real kube-apiserver 1.37 and kube-controller-manager
(tests/realk8s.py): preemption through the Eviction API under a PodDisruptionBudget whose status
the real disruption controller keeps, and a victim no budget selects deleted as kube-scheduler
deletes it; hot reload from a ConfigMap with the last-good record;
profiles; gangs with scheduler-plugins' PodGroup CRD; ``audit --live --publish`` with the
PolicyReport CRD; ``explain --server``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.model.groups import POD_GROUP_LABEL
from rulesched.scheduler.preemption import VIOLATES_BUDGET
from tests.realk8s import Kube, Running

ROOT = Path(__file__).resolve().parents[1]
POLICY = "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"


def condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def bound(k8s: Kube, ns: str, names: list[str]) -> dict[str, str] | None:
    """name -> node once every one is bound, else None."""
    pods = k8s.pods(ns)
    nodes = {n: pods[n]["spec"].get("nodeName") for n in names if n in pods}
    return nodes if len(nodes) == len(names) and all(nodes.values()) else None  # type: ignore[return-value]


def running_pod(k8s: Kube, ns: str, name: str, node: str, cpu: str, priority_class: str = "", **labels: str) -> None:
    """A pod bound to ``node`` at creation (as a kubelet-less cluster keeps it), then Running and Ready."""
    spec: dict[str, Any] = {"nodeName": node}
    if priority_class:
        spec["priorityClassName"] = priority_class
    k8s.pod(ns, name, cpu=cpu, spec=spec, metadata={"labels": labels})
    k8s.mark_running(ns, name)


def priority_class(k8s: Kube, name: str, value: int) -> None:
    k8s.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value},
    )


def pdb_status(k8s: Kube, ns: str, name: str) -> dict[str, Any]:
    return dict(k8s.get(POLICY.format(ns=ns) + f"/{name}").get("status", {}))


def web_budget(k8s: Kube, ns: str, min_available: int) -> None:
    """A PDB "web" over the app=web pods, once the disruption controller allows one disruption."""
    spec = {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}
    k8s.create(POLICY.format(ns=ns), {"metadata": {"name": "web"}, "spec": spec})
    assert k8s.wait(lambda: pdb_status(k8s, ns, "web").get("disruptionsAllowed") == 1, 30), pdb_status(k8s, ns, "web")


def test_preemption_goes_through_evictions_the_real_disruption_controller_allows(k8s: Kube) -> None:
    """Two full 2-cpu nodes, each running one pod of app=web (Ready: the disruption controller
    counts only Ready pods as healthy), a PDB minAvailable 1 over them. A high-priority 2-cpu
    pod evicts one (the PDB allows one disruption): the victim is marked DisruptionTarget by
    rulesched, the Eviction API leaves it terminating (no kubelet), the preemptor waits,
    nominated, until the test removes it, then binds there. A second high pod needs the other
    web pod gone: the PDB, now at 1 healthy, allows none (the real controller's status), so with
    the victims evicted through the Eviction API (--evict-victims budgeted, the default) that
    candidate is none (its eviction would be refused): the pod is unschedulable saying so, the
    survivor never asked for; once the PDB is relaxed, the controller's new status tries the
    second pod again, its eviction succeeds and it binds."""
    ns = k8s.namespace()
    priority_class(k8s, "high", 1000)
    for n in ("n1", "n2"):
        k8s.node(n, cpu="2")
    running_pod(k8s, ns, "web-1", "n1", "2", app="web")
    running_pod(k8s, ns, "web-2", "n2", "2", app="web")
    web_budget(k8s, ns, min_available=1)
    mark = k8s.audit_mark()
    with Running(k8s):
        k8s.pod(ns, "high-1", cpu="2", spec={"priorityClassName": "high"})
        nominated = k8s.wait(lambda: k8s.read_pod(ns, "high-1").get("status", {}).get("nominatedNodeName"), 30)
        assert nominated in ("n1", "n2")
        victim = "web-1" if nominated == "n1" else "web-2"
        survivor = "web-2" if victim == "web-1" else "web-1"
        pod = k8s.wait(lambda: (p := k8s.read_pod(ns, victim))["metadata"].get("deletionTimestamp") and p, 30)
        assert pod, f"{victim} was not evicted"
        target = condition(pod, "DisruptionTarget")
        assert target is not None and target["status"] == "True"
        # the Eviction API's own mark replaces the scheduler's reason; rulesched's condition stays
        assert target["reason"] == "EvictionByEvictionAPI", target
        assert condition(pod, "rulesched.io/PreemptedByScheduler") is not None
        time.sleep(1.0)
        assert not k8s.read_pod(ns, "high-1")["spec"].get("nodeName")  # waits while its victim terminates
        assert k8s.remove_terminating(ns) == [victim]  # the kubelet: its containers stopped
        assert k8s.wait(lambda: k8s.read_pod(ns, "high-1")["spec"].get("nodeName") == nominated, 30)
        # the controller's view: one healthy web pod left, no disruption allowed
        assert k8s.wait(lambda: pdb_status(k8s, ns, "web").get("disruptionsAllowed") == 0, 30)
        assert pdb_status(k8s, ns, "web")["currentHealthy"] == 1
        k8s.pod(ns, "high-2", cpu="2", spec={"priorityClassName": "high"})

        def said_why() -> bool:
            return VIOLATES_BUDGET in (condition(k8s.read_pod(ns, "high-2"), "PodScheduled") or {}).get("message", "")

        assert k8s.wait(said_why, 30), k8s.read_pod(ns, "high-2").get("status")
        asked = [e for e in k8s.audit(mark) if e["objectRef"].get("name") == survivor and e["verb"] != "get"]
        assert not [e for e in asked if e["objectRef"].get("subresource") == "eviction"], asked
        assert not k8s.read_pod(ns, survivor)["metadata"].get("deletionTimestamp")
        k8s.patch(POLICY.format(ns=ns) + "/web", {"spec": {"minAvailable": 0}})
        assert k8s.wait(lambda: k8s.read_pod(ns, survivor)["metadata"].get("deletionTimestamp"), 30)  # preempted anew
        k8s.remove_terminating(ns)
        assert k8s.wait(lambda: k8s.read_pod(ns, "high-2")["spec"].get("nodeName"), 30)
    evictions = [e for e in k8s.audit(mark) if e["objectRef"].get("subresource") == "eviction"]
    assert {e["objectRef"]["name"] for e in evictions if e["responseStatus"]["code"] == 201} == {victim, survivor}
    assert all(e["responseStatus"]["code"] == 201 for e in evictions), evictions


def test_a_victim_no_budget_selects_is_deleted_and_one_a_budget_selects_evicted(k8s: Kube) -> None:
    """kube-scheduler 1.37 deletes every victim after its DisruptionTarget patch (preemption/
    executor.go PreemptPod); rulesched does so for a victim no PodDisruptionBudget selects and
    evicts those a budget selects (--evict-victims budgeted, the default). A 2-cpu node running
    web-1 (1 cpu, under a PDB allowing one disruption) and loose (1 cpu, no budget); a 2-cpu
    high-priority pod preempts both: the audit log shows web-1 evicted (201) and loose deleted
    by a DELETE, each after its status patch; loose keeps rulesched's DisruptionTarget reason
    (PreemptionByScheduler, as kube-scheduler's victims do), web-1 has the Eviction API's."""
    ns = k8s.namespace()
    priority_class(k8s, "high", 1000)
    k8s.node("n1", cpu="2")
    running_pod(k8s, ns, "web-1", "n1", "1", app="web")
    running_pod(k8s, ns, "loose", "n1", "1", app="loose")
    web_budget(k8s, ns, min_available=0)
    mark = k8s.audit_mark()
    with Running(k8s) as loop:
        k8s.pod(ns, "high", cpu="2", spec={"priorityClassName": "high"})
        gone = {
            name: k8s.wait(
                lambda name=name: (p := k8s.read_pod(ns, name))["metadata"].get("deletionTimestamp") and p, 30
            )
            for name in ("web-1", "loose")
        }
        assert all(gone.values()), gone
        assert condition(gone["web-1"], "DisruptionTarget")["reason"] == "EvictionByEvictionAPI"  # type: ignore[index]
        target = condition(gone["loose"], "DisruptionTarget")
        assert target is not None and (target["status"], target["reason"]) == ("True", "PreemptionByScheduler")
        assert target["message"] == "rulesched: preempting to accommodate a higher priority pod"
        assert condition(gone["loose"], "rulesched.io/PreemptedByScheduler") is not None
        k8s.remove_terminating(ns)
        assert k8s.wait(lambda: k8s.read_pod(ns, "high")["spec"].get("nodeName") == "n1", 30)
        assert loop._binding.removals_answered == 2  # (both removed by the binding process: rulesched.run.remover)
    writes = [
        (e["objectRef"].get("name"), e["verb"], e["objectRef"].get("subresource", ""), e["responseStatus"]["code"])
        for e in k8s.audit(mark)
        if e["userAgent"].startswith("rulesched/")
        and e["objectRef"].get("resource") == "pods"
        and e["objectRef"].get("name") in ("web-1", "loose")
        and e["verb"] in ("patch", "create", "delete")
    ]
    assert sorted(writes) == [
        ("loose", "delete", "", 200),
        ("loose", "patch", "status", 200),
        ("web-1", "create", "eviction", 201),
        ("web-1", "patch", "status", 200),
    ], writes
    assert [w for w in writes if w[0] == "loose"] == [("loose", "patch", "status", 200), ("loose", "delete", "", 200)]


def test_a_victim_its_budget_protects_is_not_asked_for(k8s: Kube) -> None:
    """n1 (2 cpu) runs web-1 (2 cpu, Ready) under a PDB minAvailable 1: the real disruption
    controller allows no disruption. A high-priority 2-cpu pod has only web-1 to preempt: its
    eviction would be refused, so with the victims evicted through the Eviction API
    (--evict-victims budgeted, the default) the candidate is none (upstream's kube-scheduler,
    which deletes its victims, takes it), and within seconds the pod is unschedulable saying
    why, never nominated. A node n2 running a low-priority pod no budget selects then appears:
    the pod preempts there and is bound on n2; web-1 was never asked for."""
    ns = k8s.namespace()
    priority_class(k8s, "high", 1000)
    k8s.node("n1", cpu="2")
    running_pod(k8s, ns, "web-1", "n1", "2", app="web")
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    k8s.create(POLICY.format(ns=ns), {"metadata": {"name": "web"}, "spec": spec})
    assert k8s.wait(lambda: pdb_status(k8s, ns, "web").get("currentHealthy") == 1, 30)
    assert pdb_status(k8s, ns, "web")["disruptionsAllowed"] == 0
    mark = k8s.audit_mark()

    def web_evictions() -> list[int]:
        return [
            e["responseStatus"]["code"]
            for e in k8s.audit(mark)
            if e["objectRef"].get("subresource") == "eviction" and e["objectRef"].get("name") == "web-1"
        ]

    def said_why(pod: dict[str, Any]) -> bool:
        """Unschedulable, saying its victims would violate a budget, and not nominated."""
        message = (condition(pod, "PodScheduled") or {}).get("message", "")
        return VIOLATES_BUDGET in message and not pod.get("status", {}).get("nominatedNodeName")

    with Running(k8s) as loop:
        created = time.monotonic()
        k8s.pod(ns, "high", cpu="2", spec={"priorityClassName": "high"})
        refused = k8s.wait(lambda: said_why(k8s.read_pod(ns, "high")), 30)
        settled = time.monotonic() - created
        assert refused, k8s.read_pod(ns, "high").get("status")
        assert settled < 15, f"unschedulable after {settled:.1f} s"
        assert loop._binding.removals_answered == 0  # (no removal sent)
        time.sleep(2.0)
        assert web_evictions() == []
        running_pod(k8s, ns, "loose", "n2", "2")  # (bound to n2 before the node is known)
        k8s.node("n2", cpu="2")
        assert k8s.wait(lambda: k8s.read_pod(ns, "loose")["metadata"].get("deletionTimestamp"), 30)
        k8s.remove_terminating(ns)
        assert k8s.wait(lambda: k8s.read_pod(ns, "high")["spec"].get("nodeName") == "n2", 30)
        assert loop._binding.removals_answered == 1  # loose's, answered by the binding process
    assert web_evictions() == []
    assert not k8s.read_pod(ns, "web-1")["metadata"].get("deletionTimestamp")


def test_a_victim_not_ready_its_healthy_budget_lets_go_is_evicted(k8s: Kube) -> None:
    """n1 and n2 (2 cpu each) run web-1 (Running, not Ready) and web-2 (Running and Ready)
    under a PDB minAvailable 1, unhealthyPodEvictionPolicy unset (IfHealthyBudget): the real
    disruption controller counts one healthy pod of one desired and allows no disruption. The
    Eviction API still lets web-1 go (not Ready, its budget healthy: eviction.go), so a
    high-priority 2-cpu pod preempts web-1 on n1, through the Eviction API, and is bound there;
    web-2, whose eviction would be refused, is never asked for."""
    ns = k8s.namespace()
    priority_class(k8s, "high", 1000)
    k8s.node("n1", cpu="2")
    k8s.node("n2", cpu="2")
    k8s.pod(ns, "web-1", cpu="2", spec={"nodeName": "n1"}, metadata={"labels": {"app": "web"}})
    k8s.patch(
        f"/api/v1/namespaces/{ns}/pods/web-1/status",
        {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}},
    )
    running_pod(k8s, ns, "web-2", "n2", "2", app="web")
    spec = {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    k8s.create(POLICY.format(ns=ns), {"metadata": {"name": "web"}, "spec": spec})
    assert k8s.wait(lambda: pdb_status(k8s, ns, "web").get("currentHealthy") == 1, 30), pdb_status(k8s, ns, "web")
    status = pdb_status(k8s, ns, "web")
    assert (status["disruptionsAllowed"], status["desiredHealthy"]) == (0, 1), status
    mark = k8s.audit_mark()
    with Running(k8s):
        k8s.pod(ns, "high", cpu="2", spec={"priorityClassName": "high"})
        assert k8s.wait(lambda: k8s.read_pod(ns, "web-1")["metadata"].get("deletionTimestamp"), 30), k8s.read_pod(
            ns, "high"
        ).get("status")
        k8s.remove_terminating(ns)
        assert k8s.wait(lambda: k8s.read_pod(ns, "high")["spec"].get("nodeName") == "n1", 30)
    evictions = {
        (e["objectRef"].get("name"), e["responseStatus"].get("code"))
        for e in k8s.audit(mark)
        if e["objectRef"].get("subresource") == "eviction"
    }
    assert evictions == {("web-1", 201)}, evictions
    assert not k8s.read_pod(ns, "web-2")["metadata"].get("deletionTimestamp")


RULES_A = 'extends "default"\n\nfilter only_a:\n    node.name == "a"\n    else "not a"\n'
RULES_B = 'extends "default"\n\nfilter only_b:\n    node.name == "b"\n    else "not b"\n'


def test_hot_reload_from_a_configmap_and_the_last_good_record(k8s: Kube) -> None:
    """Rules from a ConfigMap: pods go to node a; the ConfigMap is changed: new pods go to b,
    and the accepted set is recorded in NAME-last-good (annotations naming its digest and
    source version); a broken change is refused with a RulesRejected event on the ConfigMap
    (events.k8s.io, regarding the ConfigMap) and scheduling goes on with the last good set."""
    ns = k8s.namespace()
    for n in ("a", "b"):
        k8s.node(n)
    cm = f"/api/v1/namespaces/{ns}/configmaps"
    k8s.create(cm, {"metadata": {"name": "rules"}, "data": {"policy.rules": RULES_A}})
    with Running(k8s, rules=(), rules_configmap=f"{ns}/rules", rules_event_interval=0.0):
        k8s.pod(ns, "p1")
        assert k8s.wait(lambda: bound(k8s, ns, ["p1"]), 30) == {"p1": "a"}
        record = k8s.wait(lambda: k8s._exists(cm + "/rules-last-good") and k8s.get(cm + "/rules-last-good"), 30)
        assert record and record["data"] == {"policy.rules": RULES_A}
        source_version = record["metadata"]["annotations"]["rulesched.io/source-resource-version"]
        k8s.patch(cm + "/rules", {"data": {"policy.rules": RULES_B}})
        assert k8s.wait(lambda: k8s.get(cm + "/rules-last-good")["data"] == {"policy.rules": RULES_B}, 30)
        record = k8s.get(cm + "/rules-last-good")
        assert record["metadata"]["annotations"]["rulesched.io/source-resource-version"] != source_version
        k8s.pod(ns, "p2")
        assert k8s.wait(lambda: bound(k8s, ns, ["p2"]), 30) == {"p2": "b"}
        k8s.patch(cm + "/rules", {"data": {"policy.rules": "filter broken:\n    node.nope ==\n"}})
        rejected = k8s.wait(
            lambda: [e for e in k8s.events(ns) if e["reason"] == "RulesRejected" and e["regarding"]["name"] == "rules"],
            30,
        )
        assert rejected and rejected[0]["type"] == "Warning" and rejected[0]["regarding"]["kind"] == "ConfigMap"
        assert "policy.rules" in rejected[0]["note"]
        k8s.pod(ns, "p3")
        assert k8s.wait(lambda: bound(k8s, ns, ["p3"]), 30) == {"p3": "b"}  # the last good set
    assert k8s.get(cm + "/rules-last-good")["data"] == {"policy.rules": RULES_B}


def test_profiles_each_place_their_pods_by_their_rules(k8s: Kube, tmp_path: Path) -> None:
    """Two profiles in one run: rulesched (rules A) and rulesched-b (rules B); each pod goes
    where its profile's rules say, and its Scheduled event names its profile's scheduler."""
    ns = k8s.namespace()
    for n in ("a", "b"):
        k8s.node(n)
    (tmp_path / "a.rules").write_text(RULES_A)
    (tmp_path / "b.rules").write_text(RULES_B)
    from rulesched.run.profiles import ProfileSettings

    profiles = (
        ProfileSettings(scheduler_name="rulesched", rules=(str(tmp_path / "a.rules"),)),
        ProfileSettings(scheduler_name="rulesched-b", rules=(str(tmp_path / "b.rules"),)),
    )
    with Running(k8s, profiles=profiles):
        k8s.pod(ns, "pa", scheduler="rulesched")
        k8s.pod(ns, "pb", scheduler="rulesched-b")
        assert k8s.wait(lambda: bound(k8s, ns, ["pa", "pb"]), 30) == {"pa": "a", "pb": "b"}
        scheduled = k8s.wait(
            lambda: (
                [e for e in k8s.events(ns) if e["reason"] == "Scheduled"]
                if len([e for e in k8s.events(ns) if e["reason"] == "Scheduled"]) == 2
                else None
            ),
            30,
        )
    by = {e["regarding"]["name"]: e["reportingController"] for e in scheduled}
    assert by == {"pa": "rulesched", "pb": "rulesched-b"}


# The gang tests run once per kind of pod group: scheduler-plugins' PodGroup (a CRD) and the 1.37
# workload API's (served by this test bed); a maker returns what its members carry.
def podgroup_gang(k8s: Kube, ns: str, name: str, size: int) -> dict[str, Any]:
    """scheduler-plugins' PodGroup (its CRD applied) and the label its members carry."""
    k8s.apply_crd(ROOT / "tests" / "crds" / "podgroups.scheduling.x-k8s.io.yaml")
    k8s.create(
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": size},
        },
    )
    return {"metadata": {"labels": {POD_GROUP_LABEL: name}}}


def workload_gang(k8s: Kube, ns: str, name: str, size: int) -> dict[str, Any]:
    """The workload API's PodGroup (scheduling.k8s.io/v1beta1, 1.37) with a gang policy; its
    members name it in ``spec.schedulingGroup``."""
    k8s.create(
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
         "spec": {"schedulingPolicy": {"gang": {"minCount": size}}}},
    )  # fmt: skip
    return {"spec": {"schedulingGroup": {"podGroupName": name}}}


GROUP_KINDS = {"podgroup": (podgroup_gang, {"pod_groups": True}), "workload": (workload_gang, {"workloads": True})}


@pytest.mark.parametrize("kind", sorted(GROUP_KINDS))
def test_gangs_are_bound_whole_or_not_at_all(k8s: Kube, kind: str) -> None:
    """Four 2-cpu nodes. A gang of 4 one-cpu pods is bound whole; a gang of 6 three-cpu pods
    (only four fit) binds none and holds nothing: a plain pod created after it still binds."""
    make, settings = GROUP_KINDS[kind]
    ns = k8s.namespace()
    for i in range(4):
        k8s.node(f"n{i}", cpu="2")
    small = make(k8s, ns, "small", 4)
    huge = make(k8s, ns, "huge", 6)
    with Running(k8s, **settings):
        for m in range(4):
            k8s.pod(ns, f"small-{m}", cpu="1", **small)
        for m in range(6):
            k8s.pod(ns, f"huge-{m}", cpu="3", **huge)
        assert k8s.wait(lambda: bound(k8s, ns, [f"small-{m}" for m in range(4)]), 30)
        k8s.pod(ns, "plain", cpu="1")
        assert k8s.wait(lambda: bound(k8s, ns, ["plain"]), 30)
        time.sleep(1.0)
    pods = k8s.pods(ns)
    assert not any(pods[f"huge-{m}"]["spec"].get("nodeName") for m in range(6))
    if kind == "podgroup":
        group = k8s.get(f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups/small")
        assert group.get("status", {}).get("phase") in ("Scheduling", "Scheduled", "Running"), group
    else:  # kube-scheduler's condition, written by rulesched; the huge gang's False with the reason

        def scheduled(name: str) -> dict[str, Any] | None:
            group = k8s.get(f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups/{name}")
            found = (group.get("status") or {}).get("conditions") or []
            return next((c for c in found if c["type"] == "PodGroupInitiallyScheduled"), None)

        small_condition = k8s.wait(lambda: scheduled("small"), 30)
        assert small_condition and small_condition["status"] == "True", small_condition
        huge_condition = k8s.wait(lambda: scheduled("huge"), 30)
        assert huge_condition and (huge_condition["status"], huge_condition["reason"]) == ("False", "Unschedulable")


AUDIT_RULES = 'extends "default"\n\nfilter retire_n1:\n    node.name != "n1"\n    else "n1 is being retired"\n'


def test_audit_live_publishes_policy_reports_with_the_crd(
    k8s: Kube, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """deploy/policyreport-crd.yaml applied; ``audit --live --publish`` creates one PolicyReport
    per namespace (accepted by the CRD's schema), replaces it on the next run."""
    k8s.apply_crd(ROOT / "deploy" / "policyreport-crd.yaml")
    ns = k8s.namespace()
    for n in ("n1", "n2"):
        k8s.node(n)
    running_pod(k8s, ns, "a", "n1", "500m")
    running_pod(k8s, ns, "b", "n2", "500m")
    rules = tmp_path / "policy.rules"
    rules.write_text(AUDIT_RULES)
    args = ["audit", "--live", "--kubeconfig", k8s.kubeconfig, "--rules", str(rules), "--output", "json", "--publish"]
    assert main(args) == 1
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"]["violating"] == 1
    reports = f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports"
    (report,) = k8s.items(reports)
    assert report["summary"]["fail"] == 1
    (result,) = [r for r in report["results"] if r["result"] == "fail"]
    assert result["rule"] == "retire_n1" and result["resources"][0]["name"] == "a"
    assert main(args) == 1
    capsys.readouterr()
    assert len(k8s.items(reports)) == 1


def test_explain_server_on_a_running_scheduler(k8s: Kube, capsys: pytest.CaptureFixture[str]) -> None:
    """``rulesched explain NS/POD --server`` asks a running scheduler about a pending pod of
    the real server: every node's failing filter, with kube-scheduler's reason."""
    ns = k8s.namespace()
    k8s.node("n1", cpu="2")
    k8s.pod(ns, "huge", cpu="8")
    with Running(k8s, metrics_bind_address="127.0.0.1:0") as loop:
        assert k8s.wait(lambda: loop.ops is not None and loop.scheduler.queue.find(f"{ns}/huge") is not None, 30)
        end = time.monotonic() + 60  # (a scheduler just started, on a busy machine, may answer 503 at first)
        while True:
            code = main(["explain", f"{ns}/huge", "--server", f"http://127.0.0.1:{loop.ops.port}"])
            out, err = capsys.readouterr()
            if code != 2 or time.monotonic() > end:
                break
            time.sleep(1.0)
    assert code in (0, 1), out + err
    assert "Insufficient cpu" in out and "n1" in out


def test_the_test_bed_is_emptied_between_tests(k8s: Kube) -> None:
    """(The fixture itself.) No node, no test namespace, no PriorityClass of a test is left."""
    assert k8s.items("/api/v1/nodes") == []
    names = {
        n["metadata"]["name"] for n in k8s.items("/api/v1/namespaces") if not n["metadata"].get("deletionTimestamp")
    }
    assert names <= {"default", "kube-system", "kube-public", "kube-node-lease"}
    assert all(
        p["metadata"]["name"].startswith("system-") for p in k8s.items("/apis/scheduling.k8s.io/v1/priorityclasses")
    )
