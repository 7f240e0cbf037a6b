"""The workload API and the 1.37 default profile's fields against the real kube-apiserver and
kube-scheduler 1.37.2 (issue 37; tests/realk8s.py: the test bed serves scheduling.k8s.io/v1beta1
and v1alpha3 with the GenericWorkload, CompositePodGroup, PodGroupPreemptionPolicy and
TopologyAwareWorkloadScheduling gates on).

- Every shape rulesched reads is created through the real API server, whose validation and
  admission are the judge: PodGroups (gang, basic, topology, disruption modes, priority class,
  preemption policy, workloadRef, a parent), CompositePodGroups, Workloads with both kinds of
  templates, pods joining a group; nodes' declaredFeatures, image volumes, pod-level resources,
  a pod resized in place. What the server keeps decodes in rulesched to the same values; what it
  refuses (two policies at once, templates of different priorities, 1.35's v1alpha1) rulesched
  refuses too.
- The same groups placed by ``rulesched run`` in one namespace and by the real kube-scheduler in
  another (each with the nodes to itself): the pods bound, the topology domains, every PodGroup's
  PodGroupInitiallyScheduled condition and every member's PodScheduled message read back the
  same; for a CompositePodGroup over two topology levels too; and for workload-aware preemption,
  the victims' marks and Preempted events.

Found here, and matched: kube-scheduler's status composition (``pod group is unschedulable, 0/2
placements are available, first placement status: minCount (3) cannot be satisfied: ...``), a
member's ``0/2 nodes`` counting the placement's nodes alone, the post filter's status appended
twice to a composite's child never evaluated, ``Preempted by podgroup UID on node cluster``. And
of the API server: a PodGroup gets no metadata.generation (observedGeneration stays 0), and
defaulting gives a PodGroup preemptionPolicy PreemptLowerPriority before the Priority admission
plugin compares it with its class's, so naming a Never class it must say Never itself.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from rulesched.errors import ObjectError
from rulesched.model import PREEMPTED_CONDITION
from rulesched.model.decode import decode_node, decode_pod
from rulesched.model.groups import decode_composite_pod_group, decode_pod_group, decode_workload
from tests.helpers.kube import pod as pod_object
from tests.realk8s import STRATEGIC, ApiError, Kube, Running

V1BETA1 = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}"
V1ALPHA3 = "/apis/scheduling.k8s.io/v1alpha3/namespaces/{ns}"


def pod_group(name: str, min_count: int | None, **spec: Any) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": policy, **spec},
    }


def composite(name: str, min_groups: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "CompositePodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minGroupCount": min_groups}}, **spec},
    }


def member_pod(k8s: Kube, ns: str, name: str, group: str, cpu: str, scheduler: str) -> dict[str, Any]:
    return k8s.pod(ns, name, cpu=cpu, scheduler=scheduler, spec={"schedulingGroup": {"podGroupName": group}})


def initially_scheduled(k8s: Kube, ns: str, group: str) -> dict[str, Any] | None:
    found = k8s.get(V1BETA1.format(ns=ns) + f"/podgroups/{group}").get("status", {}).get("conditions", [])
    return next((c for c in found if c["type"] == "PodGroupInitiallyScheduled"), None)


def test_every_workload_api_shape_is_accepted_and_decodes_alike(k8s: Kube) -> None:
    ns = k8s.namespace()
    k8s.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "train"}, "value": 1000},
    )
    k8s.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "batch"},
            "value": 10,
            "preemptionPolicy": "Never",
        },
    )
    workload = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job"},
        "spec": {
            "podGroupTemplates": [
                {
                    "name": "workers",
                    "schedulingPolicy": {"gang": {"minCount": 4}},
                    "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
                    "disruptionMode": {"all": {}},
                    "priorityClassName": "train",
                    "preemptionPolicy": "PreemptLowerPriority",
                },
                {"name": "driver", "schedulingPolicy": {"basic": {}}, "priorityClassName": "train"},
            ]
        },
    }
    kept = k8s.create(V1BETA1.format(ns=ns) + "/workloads", workload)
    assert decode_workload(kept, "server") == ("workers", "driver")
    nested = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "nested"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "block",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "schedulingConstraints": {"topology": [{"key": "example.com/block"}]},
                    "disruptionMode": {"single": {}},
                    "podGroupTemplates": [
                        {"name": "a", "schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": None},
                        {"name": "b", "schedulingPolicy": {"gang": {"minCount": 2}}, "schedulingConstraints": None},
                    ],
                }
            ],
        },
    }
    assert decode_workload(k8s.create(V1BETA1.format(ns=ns) + "/workloads", nested), "server") == ("block", "a", "b")
    parent = composite(
        "job",
        2,
        schedulingConstraints={"topology": [{"key": "example.com/block"}]},
        disruptionMode={"all": {}},
        priorityClassName="train",
        preemptionPolicy="PreemptLowerPriority",
        workloadRef={"workloadName": "nested", "templateName": "block"},
    )
    cpg = decode_composite_pod_group(k8s.create(V1ALPHA3.format(ns=ns) + "/compositepodgroups", parent), "server")
    assert (cpg.composite, cpg.min_member, cpg.topology, cpg.disruption_all) == (True, 2, ("example.com/block",), True)
    assert (cpg.priority, cpg.preemption_policy) == (1000, "PreemptLowerPriority")  # the admission plugin's
    gang = pod_group(
        "workers",
        4,
        schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
        disruptionMode={"all": {}},
        priorityClassName="train",
        workloadRef={"workloadName": "job", "templateName": "workers"},
        parentCompositePodGroupName="job",
    )
    group = decode_pod_group(k8s.create(V1BETA1.format(ns=ns) + "/podgroups", gang), "server")
    assert (group.key, group.min_member, group.gang, group.topology) == (
        f"pg:{ns}/workers",
        4,
        True,
        ("topology.kubernetes.io/rack",),
    )
    assert (group.disruption_all, group.priority, group.preemption_policy, group.parent) == (
        True,
        1000,
        "PreemptLowerPriority",  # the Priority admission plugin's, from the class
        f"cpg:{ns}/job",
    )
    # (1.37's PodGroup strategy sets no metadata.generation: the condition's observedGeneration,
    # copied from it as kube-scheduler copies it, is 0 and left out)
    assert (group.workload, group.generation) == ("job/workers", 0)
    # (1.37's defaulting sets preemptionPolicy PreemptLowerPriority on a PodGroup without one
    # (SetDefaults_PodGroup) before the Priority admission plugin compares it with the class's:
    # naming a Never class, a PodGroup must say Never itself, or it is refused)
    implicit = pod_group("implicit", None, priorityClassName="batch")
    with pytest.raises(ApiError) as refused:
        k8s.create(V1BETA1.format(ns=ns) + "/podgroups", implicit)
    assert refused.value.status == 403 and "computed Never" in refused.value.body["message"]
    basic = decode_pod_group(
        k8s.create(
            V1BETA1.format(ns=ns) + "/podgroups",
            pod_group("driver", None, priorityClassName="batch", preemptionPolicy="Never"),
        ),
        "server",
    )
    assert (basic.gang, basic.min_member, basic.disruption_all) == (False, 1, False)  # single: the default
    assert (basic.priority, basic.preemption_policy) == (10, "Never")
    never = pod_group("never", 2, priorityClassName="train", preemptionPolicy="Never")
    with pytest.raises(ApiError) as refused:  # a policy other than the class's
        k8s.create(V1BETA1.format(ns=ns) + "/podgroups", never)
    assert refused.value.status == 403
    # minCount may change after creation (1.37)
    changed = k8s.patch(
        V1BETA1.format(ns=ns) + "/podgroups/workers", {"spec": {"schedulingPolicy": {"gang": {"minCount": 3}}}}
    )
    assert decode_pod_group(changed, "server").min_member == 3
    pod = decode_pod(member_pod(k8s, ns, "w0", "workers", "100m", "rulesched"), "server")
    assert pod.scheduling_group == "workers"
    # what the server refuses, rulesched refuses
    both = pod_group("both", 2)
    both["spec"]["schedulingPolicy"]["basic"] = {}
    with pytest.raises(ApiError) as refused:
        k8s.create(V1BETA1.format(ns=ns) + "/podgroups", both)
    assert refused.value.status == 422
    with pytest.raises(ObjectError, match="exactly one of basic and gang"):
        decode_pod_group({**both, "metadata": {"name": "both", "namespace": ns}}, "file")
    mixed = {**workload, "metadata": {"name": "mixed"}}
    mixed["spec"] = {
        "podGroupTemplates": [
            {**t, "priorityClassName": ""} if t["name"] == "driver" else t
            for t in workload["spec"]["podGroupTemplates"]
        ]
    }
    with pytest.raises(ApiError) as refused:
        k8s.create(V1BETA1.format(ns=ns) + "/workloads", mixed)
    assert refused.value.status == 422 and "multiple priority" in refused.value.body["message"]
    with pytest.raises(ObjectError, match="must be identical"):
        decode_workload({**mixed, "metadata": {"name": "mixed", "namespace": ns}}, "file")
    with pytest.raises(ApiError) as gone:
        k8s.get(f"/apis/scheduling.k8s.io/v1alpha1/namespaces/{ns}/workloads")
    assert gone.value.status == 404  # 1.36 removed 1.35's shape; rulesched says so
    old = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": "x"}, "spec": {}}
    with pytest.raises(ObjectError, match="removed in Kubernetes 1.36"):
        decode_workload(old, "file")


def _place(k8s: Kube, ns: str, scheduler: str) -> None:
    """Two gangs, each to fit one rack: ``fits`` (3 pods of 1 cpu: a rack has 2 nodes of 2 cpu)
    and ``huge`` (3 pods of 3 cpu: no node holds one); a basic group of one pod.

    ``huge`` fits nowhere so that every placement fails alike: kube-scheduler 1.37 tries a group's
    placements in Go map order (TopologyPlacement.GeneratePlacements), so where some of a group's
    members would fit in one rack and none in the other, which one's status it reports, and what
    each member is told, is random there (the cases are table-tested in
    tests/upstream/test_workload_api.py)."""
    api = V1BETA1.format(ns=ns) + "/podgroups"
    rack = {"schedulingConstraints": {"topology": [{"key": "example.com/rack"}]}}
    k8s.create(api, pod_group("fits", 3, **rack))
    k8s.create(api, pod_group("huge", 3, **rack))
    k8s.create(api, pod_group("solo", None))
    for m in range(3):
        member_pod(k8s, ns, f"fits-{m}", "fits", "1", scheduler)
        member_pod(k8s, ns, f"huge-{m}", "huge", "3", scheduler)
    member_pod(k8s, ns, "solo-0", "solo", "500m", scheduler)


def _outcome(k8s: Kube, ns: str) -> dict[str, Any]:
    pods = k8s.pods(ns)
    racks = {n["metadata"]["name"]: n["metadata"]["labels"]["example.com/rack"] for n in k8s.items("/api/v1/nodes")}
    bound = {name: p["spec"].get("nodeName") for name, p in pods.items()}
    conditions = {}
    for group in ("fits", "huge", "solo"):
        c = initially_scheduled(k8s, ns, group)
        conditions[group] = None if c is None else (c["status"], c["reason"], c["message"])
    told = {}  # each group's members' PodScheduled conditions, as a sorted list (which member is
    for group in ("fits", "huge", "solo"):  # tried first may differ: the queue's order is not ours)
        found = []
        for name, p in pods.items():
            if name.startswith(group + "-"):
                c = next((c for c in p.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"), {})
                found.append((c.get("status"), c.get("reason"), c.get("message")))
        told[group] = sorted(found, key=repr)
    return {
        "bound": sorted(name for name, node in bound.items() if node),
        "fits_racks": {racks[bound[f"fits-{m}"]] for m in range(3) if bound[f"fits-{m}"]},
        "conditions": conditions,
        "pods": told,
    }


def _settled(k8s: Kube, ns: str) -> bool:
    pods = k8s.pods(ns)
    done = all(pods[f"fits-{m}"]["spec"].get("nodeName") for m in range(3)) and pods["solo-0"]["spec"].get("nodeName")
    return bool(done) and all(initially_scheduled(k8s, ns, g) is not None for g in ("fits", "huge", "solo"))


def _clear(k8s: Kube, ns: str) -> None:
    for name in k8s.pods(ns):
        k8s.delete(f"/api/v1/namespaces/{ns}/pods/{name}", grace=0)
    assert k8s.wait(lambda: not k8s.pods(ns), 30)


def test_workload_gangs_read_back_as_kube_schedulers(k8s: Kube) -> None:
    """Four 2-cpu nodes in two racks. rulesched places the groups of one namespace, the real
    kube-scheduler the same groups in another (each with the nodes to itself): the same pods
    bind, ``fits`` in one rack, and the three PodGroups' conditions are the same."""
    for i in range(4):
        k8s.node(f"n{i}", cpu="2", labels={"example.com/rack": f"r{i // 2}"})
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    with Running(k8s, workloads=True):
        _place(k8s, ours, "rulesched")
        assert k8s.wait(lambda: _settled(k8s, ours), 60), k8s.pods(ours)
        time.sleep(1.0)
    mine = _outcome(k8s, ours)
    _clear(k8s, ours)
    with k8s.kube_scheduler() as scheduler:
        _place(k8s, theirs, "default-scheduler")
        assert k8s.wait(lambda: _settled(k8s, theirs), 60), scheduler.tail()
        time.sleep(1.0)
    upstream = _outcome(k8s, theirs)
    assert mine["bound"] == upstream["bound"] == ["fits-0", "fits-1", "fits-2", "solo-0"]
    assert len(mine["fits_racks"]) == len(upstream["fits_racks"]) == 1
    assert mine["conditions"] == upstream["conditions"], "\n".join(
        map(repr, (mine["conditions"], upstream["conditions"]))
    )
    assert mine["pods"] == upstream["pods"], "\n".join(map(repr, (mine["pods"], upstream["pods"])))
    assert mine["conditions"]["fits"] == ("True", "Scheduled", "")
    assert mine["conditions"]["huge"][:2] == ("False", "Unschedulable")


def _composite_job(k8s: Kube, ns: str, name: str, children: tuple[str, str], cpu: str, scheduler: str) -> None:
    """A Workload with one composite template (gang of 2 children, one block) of two gangs
    (2 pods each, one rack), its CompositePodGroup, PodGroups and pods."""
    gang = {"gang": {"minCount": 2}}
    k8s.create(
        V1BETA1.format(ns=ns) + "/workloads",
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {"name": name},
            "spec": {
                "compositePodGroupTemplates": [
                    {
                        "name": "job",
                        "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                        "schedulingConstraints": {"topology": [{"key": "example.com/block"}]},
                        "podGroupTemplates": [
                            {
                                "name": child,
                                "schedulingPolicy": gang,
                                "schedulingConstraints": {"topology": [{"key": "example.com/rack"}]},
                            }
                            for child in children
                        ],
                    }
                ]
            },
        },
    )
    k8s.create(
        V1ALPHA3.format(ns=ns) + "/compositepodgroups",
        composite(
            name,
            2,
            schedulingConstraints={"topology": [{"key": "example.com/block"}]},
            workloadRef={"workloadName": name, "templateName": "job"},
        ),
    )
    for child in children:
        k8s.create(
            V1BETA1.format(ns=ns) + "/podgroups",
            pod_group(
                child,
                2,
                schedulingConstraints={"topology": [{"key": "example.com/rack"}]},
                parentCompositePodGroupName=name,
                workloadRef={"workloadName": name, "templateName": child},
            ),
        )
    for child in children:
        for m in range(2):
            member_pod(k8s, ns, f"{child}-{m}", child, cpu, scheduler)


def _composite_outcome(k8s: Kube, ns: str, groups: tuple[str, ...]) -> dict[str, Any]:
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in k8s.items("/api/v1/nodes")}
    pods = k8s.pods(ns)
    out: dict[str, Any] = {}
    for group in groups:
        placed = [p["spec"].get("nodeName") for name, p in pods.items() if name.startswith(group + "-")]
        c = initially_scheduled(k8s, ns, group)
        told = sorted(
            (
                next(
                    (
                        c.get("message")
                        for c in p.get("status", {}).get("conditions", [])
                        if c["type"] == "PodScheduled"
                    ),
                    None,
                )
                for name, p in pods.items()
                if name.startswith(group + "-")
            ),
            key=repr,
        )
        out[group] = {
            "bound": sum(1 for n in placed if n),
            "racks": sorted({nodes[n]["example.com/rack"] for n in placed if n}),
            "blocks": sorted({nodes[n]["example.com/block"] for n in placed if n}),
            "condition": None if c is None else (c["status"], c["reason"], c["message"]),
            "told": told,
        }
    return out


def _composite_phase(k8s: Kube, ns: str, scheduler: str) -> dict[str, Any]:
    """``ab`` fits block b1 only (b0's nodes are too small), a rack each; ``cd`` then fits
    nowhere (b1 is full)."""
    _composite_job(k8s, ns, "ab", ("a", "b"), "3", scheduler)
    k8s.wait(lambda: all(p["spec"].get("nodeName") for p in k8s.pods(ns).values()), 60)
    _composite_job(k8s, ns, "cd", ("c", "d"), "3", scheduler)
    k8s.wait(lambda: all(initially_scheduled(k8s, ns, g) is not None for g in "abcd"), 60)
    time.sleep(1.0)
    return _composite_outcome(k8s, ns, ("a", "b", "c", "d"))


def test_composite_pod_groups_read_back_as_kube_schedulers(k8s: Kube) -> None:
    """CompositePodGroup (v1alpha3) and topology at two levels (KEP-5732): two blocks of two racks
    of two nodes. rulesched and the real kube-scheduler, each in its own namespace with the nodes
    to itself, place the same composite job in the same block with each gang in a rack of its
    own, and leave the second job unplaced with the same conditions and pod messages."""
    for b in range(2):
        for r in range(2):
            for i in range(2):
                labels = {"example.com/block": f"b{b}", "example.com/rack": f"b{b}r{r}"}
                k8s.node(f"n{b}{r}{i}", cpu="2" if b == 0 else "4", labels=labels)
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    with Running(k8s, workloads=True):
        mine = _composite_phase(k8s, ours, "rulesched")
    _clear(k8s, ours)
    with k8s.kube_scheduler() as scheduler:
        upstream = _composite_phase(k8s, theirs, "default-scheduler")
        log = scheduler.tail()
    for group in "ab":
        assert mine[group]["bound"] == upstream[group]["bound"] == 2, log
        assert mine[group]["blocks"] == upstream[group]["blocks"] == ["b1"]
        assert len(mine[group]["racks"]) == len(upstream[group]["racks"]) == 1
    assert mine["a"]["racks"] != mine["b"]["racks"] and upstream["a"]["racks"] != upstream["b"]["racks"]
    assert [mine[g]["bound"] for g in "cd"] == [upstream[g]["bound"] for g in "cd"] == [0, 0]
    for group in "abcd":
        assert mine[group]["condition"] == upstream[group]["condition"], (group, mine[group], upstream[group])
        assert mine[group]["told"] == upstream[group]["told"], (group, mine[group], upstream[group])


def _preemption_phase(k8s: Kube, ns: str, scheduler: str, marker: str) -> dict[str, Any]:
    """Two 4-cpu nodes, each running a 3-cpu pod of priority 0; a gang of two 3-cpu pods of
    priority 1000 (its PodGroup's class, its pods' too) preempts both, as one unit. Read: the
    victims' DisruptionTarget, the Preempted events (the preemptor named), the gang's nodes and
    its PodGroup's condition once bound. (``marker``: the condition read: rulesched evicts
    through the Eviction API, which rewrites DisruptionTarget to EvictionByEvictionAPI, so its
    own condition rulesched.io/PreemptedByScheduler carries what kube-scheduler's
    DisruptionTarget says.)"""
    for i in range(2):
        k8s.pod(ns, f"low-{i}", cpu="3", spec={"nodeName": f"n{i}"})
        k8s.mark_running(ns, f"low-{i}")
    group = k8s.create(V1BETA1.format(ns=ns) + "/podgroups", pod_group("gang", 2, priorityClassName="high"))
    for m in range(2):
        k8s.pod(
            ns,
            f"gang-{m}",
            cpu="3",
            scheduler=scheduler,
            spec={"schedulingGroup": {"podGroupName": "gang"}, "priorityClassName": "high"},
        )

    def marked() -> dict[str, Any] | None:
        pods = k8s.pods(ns)
        lows = [pods.get(f"low-{i}") for i in range(2)]
        if not all(p is not None and p["metadata"].get("deletionTimestamp") for p in lows):
            return None
        return {
            p["metadata"]["name"]: next(
                ((c["reason"], c["message"]) for c in p["status"].get("conditions", []) if c["type"] == marker),
                None,
            )
            for p in lows
            if p is not None
        }

    victims = k8s.wait(marked, 60)
    assert victims, k8s.pods(ns)

    def preempted() -> list[dict[str, Any]] | None:  # one event per victim: wait for them all
        found = [e for e in k8s.events(ns) if e["reason"] == "Preempted"]
        return found if len(found) >= len(victims) else None

    events = k8s.wait(preempted, 30) or k8s.events(ns)
    events = [e for e in events if e["reason"] == "Preempted"]
    k8s.remove_terminating(ns)
    placed = k8s.wait(lambda: bound_all(k8s, ns, ["gang-0", "gang-1"]), 60)
    # (once True: a scheduler may write it False first, while the victims leave)
    k8s.wait(lambda: (initially_scheduled(k8s, ns, "gang") or {}).get("status") == "True", 30)
    condition = initially_scheduled(k8s, ns, "gang")  # (as it stands: False if it never turned True)
    uid = group["metadata"]["uid"]
    return {
        "victims": victims,
        "preempted": sorted(
            (
                e["regarding"]["name"],
                e["note"].replace(uid, "UID"),
                e.get("related", {}).get("kind"),
                e.get("related", {}).get("name"),
            )
            for e in events
        ),
        "placed": sorted((placed or {}).values()),
        "condition": None if condition is None else (condition["status"], condition["reason"], condition["message"]),
    }


def bound_all(k8s: Kube, ns: str, names: list[str]) -> dict[str, str] | None:
    pods = k8s.pods(ns)
    nodes = {n: pods[n]["spec"].get("nodeName") for n in names if n in pods}
    return nodes if len(nodes) == len(names) and all(nodes.values()) else None


def test_workload_aware_preemption_reads_back_as_kube_schedulers(k8s: Kube) -> None:
    """A PodGroup preempts as a unit (KEP-5710): rulesched evicts both lower-priority pods for the
    gang, marks them as kube-scheduler marks them (DisruptionTarget, PreemptionByScheduler,
    "…a higher priority podgroup"), its Preempted events name the PodGroup, and the gang binds
    on the two nodes with PodGroupInitiallyScheduled True: what the real kube-scheduler does in
    another namespace, the nodes its own."""
    k8s.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
    )
    for i in range(2):
        k8s.node(f"n{i}", cpu="4")
    ours, theirs = k8s.namespace("ours"), k8s.namespace("theirs")
    with Running(k8s, workloads=True):
        mine = _preemption_phase(k8s, ours, "rulesched", PREEMPTED_CONDITION)
    _clear(k8s, ours)
    with k8s.kube_scheduler() as scheduler:
        upstream = _preemption_phase(k8s, theirs, "default-scheduler", "DisruptionTarget")
        log = scheduler.tail()
    assert mine["placed"] == upstream["placed"] == ["n0", "n1"], log
    theirs_victims = {k: (r, m.replace("default-scheduler", "SCHEDULER")) for k, (r, m) in upstream["victims"].items()}
    mine_victims = {k: (r, m.replace("rulesched", "SCHEDULER")) for k, (r, m) in mine["victims"].items()}
    assert mine_victims == theirs_victims, (mine["victims"], upstream["victims"])
    assert mine["preempted"] == upstream["preempted"], (mine["preempted"], upstream["preempted"])
    assert mine["condition"] == upstream["condition"] == ("True", "Scheduled", "")


# --- the default profile's 1.36-1.37 fields ---------------------------------------------------------


def test_the_default_profiles_new_fields_are_accepted_and_decode_alike(k8s: Kube) -> None:
    """The shapes the 1.37 default profile reads, through the real API server: a node's
    status.declaredFeatures (NodeDeclaredFeatures, GA), an image volume (ImageLocality counts
    it), pod-level resources, a pod resized in place (spec changed through /resize, the kubelet's
    status kept: the larger counts, per resource) with its pod-level status; toleration operators
    Gt/Lt are refused (TaintTolerationComparisonOperators is alpha, off in 1.37: rulesched
    accepts them in files, as the gate on would)."""
    ns = k8s.namespace()
    k8s.node("n1", cpu="4")
    status = k8s.patch("/api/v1/nodes/n1/status", {"status": {"declaredFeatures": ["RestartAllContainers"]}})
    assert decode_node(status, "server").declared_features == ("RestartAllContainers",)
    volume = k8s.pod(ns, "img", spec={"volumes": [{"name": "v", "image": {"reference": "example.com/data:1"}}]})
    assert "example.com/data:1" in decode_pod(volume, "server").images
    pod_level = k8s.pod(ns, "pl", cpu="500m", spec={"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}})
    assert decode_pod(pod_level, "server").requests["cpu"] == 2000  # pod-level requests win
    # resized in place: bound and "running" at 1 cpu, then /resize to 3 (up) and 500m (down)
    k8s.pod(ns, "rs", cpu="1", spec={"nodeName": "n1"})
    k8s.patch(
        f"/api/v1/namespaces/{ns}/pods/rs/status",
        {
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "c",
                        "image": "x",
                        "imageID": "",
                        "ready": True,
                        "restartCount": 0,
                        "allocatedResources": {"cpu": "1"},
                        "resources": {"requests": {"cpu": "1"}},
                    }
                ],
            }
        },
        STRATEGIC,
    )
    up = k8s.patch(
        f"/api/v1/namespaces/{ns}/pods/rs/resize",
        {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}},
        STRATEGIC,
    )
    assert decode_pod(up, "server").requests["cpu"] == 3000
    down = k8s.patch(
        f"/api/v1/namespaces/{ns}/pods/rs/resize",
        {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}},
        STRATEGIC,
    )
    assert decode_pod(down, "server").requests["cpu"] == 1000  # what the kubelet still holds
    toleration = {"key": "gpu-mem", "operator": "Gt", "value": "40", "effect": "NoSchedule"}
    with pytest.raises(ApiError) as refused:
        k8s.pod(ns, "gt", spec={"tolerations": [toleration]})
    assert refused.value.status == 422
    assert decode_pod({**pod_object("gt", spec={"tolerations": [toleration]})}, "file").tolerations[0].operator == "Gt"
