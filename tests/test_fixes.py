"""``rulesched explain``'s fixes for a pod that fits nowhere: the smallest changes (on the
cluster, the pod, the rules) that would let it schedule, each checked by a trial before it is
shown; and each one, made on the cluster files by ``simulate --apply``, schedules the pod.

The soundness figure over generated clusters and the comparison with a brute-force search are
benchmarks/bench_fixes.py's; tests/test_fixes_property.py holds the same as a property."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rulesched.cli import main
from rulesched.scheduler.fixes import FixBudget
from rulesched.scheduler.why import explain_pod, fix_pod
from rulesched.simulate.load import load_cluster
from tests.helpers.explaining import cluster, explain_json, gpu_cluster, node, pod, simulated
from tests.upstream.harness import default_rules


def test_gpu_pod_fixes_smallest_first_each_schedules_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path, rules = gpu_cluster(tmp_path)
    a = explain_json(capsys, "default/trainer", "--cluster", path, "--rules", rules)
    found = a["fixes"]
    summaries = [f["summary"] for f in found["fixes"]]
    # one change each: free a GPU on gpu-1 (evict its holder), untaint, tolerate; then a higher
    # priority, whose preemption evicts the holder (1 + 1): smallest first, cluster before pod
    assert summaries[:3] == [
        "evict pod default/holder",
        "remove taint x=y:NoSchedule from node tainted",
        "pod default/trainer: tolerate taint x=y:NoSchedule",
    ]
    assert [f["size"] for f in found["fixes"]][:3] == [1, 1, 1]
    assert [f["where"] for f in found["fixes"]][:3] == ["cluster", "cluster", "pod"]
    first = found["fixes"][0]
    assert first["commands"] == ["kubectl delete pod -n default holder"]
    assert first["checked"]["placed"] == {"default/trainer": "gpu-1"}
    assert found["fixes"][1]["commands"] == ["kubectl taint nodes tainted x=y:NoSchedule-"]
    priority = next(f for f in found["fixes"] if f["changes"][0]["op"] == "set-priority")
    assert priority["size"] == 2 and priority["checked"]["evicted"] in (["default/holder"], ["default/holder2"])
    assert found["checked"]["rules"] == a["rules_digest"] and found["checked"]["nodes"] == 4
    assert found["trials"] <= FixBudget().trials
    # not a fix: a GPU request lowered to 0 (the pod would need none)
    assert not any(
        c["op"] == "set-request" and c["key"] == "nvidia.com/gpu" for f in found["fixes"] for c in f["changes"]
    )
    # every fix, made on the cluster file, schedules the trainer (and the rules run unchanged)
    for fix in found["fixes"]:
        placed = simulated(capsys, tmp_path, path, fix, rules)
        assert placed["default/trainer"] is not None, fix["summary"]
    # the table lists them, with their commands and what the trial found
    main(["explain", "default/trainer", "--cluster", path, "--rules", rules])
    table = capsys.readouterr().out
    assert "What would make it fit (each checked by scheduling the changed cluster" in table
    assert "  1. [cluster, size 1] evict pod default/holder" in table
    assert "       $ kubectl delete pod -n default holder" in table
    assert "       checked: default/trainer on gpu-1" in table


def test_a_rule_fix_says_what_else_it_moves(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rules = tmp_path / "policy.rules"
    rules.write_text(
        'extends "default"\n\nfilter small_only when has(pod.labels, "size"):\n'
        '    pod.labels["size"] != "big"\n    else "big pods are not welcome"\n'
    )
    big = pod("big", cpu="1")
    big["metadata"]["labels"] = {"size": "big"}
    other = pod("other-big", cpu="1")
    other["metadata"]["labels"] = {"size": "big"}
    path = cluster(tmp_path, node("a", cpu="4"), node("b", cpu="4"), big, other, pod("small", cpu="1"))
    a = explain_json(capsys, "default/big", "--cluster", path, "--rules", str(rules))
    (fix,) = [f for f in a["fixes"]["fixes"] if f["where"] == "rules"]
    assert fix["changes"] == [{"op": "audit-filter", "kind": "Rules", "name": "small_only"}]
    assert fix["moves"]["asked"] == 2  # the other pending pods
    moved = {m["pod"]: (m["old"], m["new"]) for m in fix["moves"]["pods"]}
    assert moved["default/other-big"][0] is None and moved["default/other-big"][1] in ("a", "b")
    assert set(moved) <= {"default/other-big", "default/small"}  # (small may land elsewhere: a knock-on move)
    assert fix["size"] == 2 + len(moved)  # a filter in audit mode (2) and the other pods it moves
    assert simulated(capsys, tmp_path, path, fix, str(rules))["default/big"] in ("a", "b")


def test_priority_fix_names_a_priority_class_and_its_victims(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    classes = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("low", 10), ("high", 1000))
    ]
    path = cluster(
        tmp_path, *classes, node("a", cpu="2"), pod("running", cpu="2", node_name="a", priority=10), pod("p", cpu="2")
    )
    a = explain_json(capsys, "default/p", "--cluster", path)
    by_op = {f["changes"][0]["op"]: f for f in a["fixes"]["fixes"]}
    assert by_op["evict"]["size"] == 1
    raised = by_op["set-priority"]
    assert raised["changes"] == [
        {"op": "set-priority", "kind": "Pod", "name": "default/p", "value": "high", "count": 1, "priority": 1000}
    ]
    assert raised["checked"] == {"placed": {"default/p": "a"}, "evicted": ["default/running"]}
    assert raised["size"] == 2
    placed = simulated(capsys, tmp_path, path, raised)
    assert placed["default/p"] == "a"


def test_full_nodes_get_evictions_and_new_nodes_like_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = cluster(
        tmp_path,
        node("a", cpu="2"),
        pod("x1", cpu="1", node_name="a"),
        pod("x2", cpu="1", node_name="a"),
        pod("wants-two", cpu="2"),
    )
    a = explain_json(capsys, "default/wants-two", "--cluster", path)
    fixes = {f["summary"]: f for f in a["fixes"]["fixes"]}
    evictions = [f for f in fixes.values() if f["changes"][0]["op"] == "evict"]
    assert evictions and evictions[0]["size"] == 2  # both pods must go
    added = fixes["add 1 node(s) like a"]
    assert added["size"] == 2 and added["checked"]["placed"] == {"default/wants-two": "a-new-1"}
    assert simulated(capsys, tmp_path, path, added)["default/wants-two"] == "a-new-1"
    # the request lowered to what a has free: not a fix (a has none); nothing else is smaller
    assert min(f["size"] for f in fixes.values()) == 2


def test_what_cannot_be_fixed_says_why(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    lost = pod("lost")  # mounts a claim that does not exist: no change to the nodes helps
    lost["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "gone"}}]
    path = cluster(tmp_path, node("a"), node("b"), lost)
    a = explain_json(capsys, "default/lost", "--cluster", path)
    assert a["fixes"]["fixes"] == []
    assert a["fixes"]["unfixable"][0].endswith("on 2 node(s)")
    assert {c["code"] for c in a["codes"]} == {"VolumeNotFound"}


def test_the_search_keeps_to_its_budget(tmp_path: Path) -> None:
    items = [node(f"n{i}", cpu="1", taints=[{"key": f"k{i}", "value": "v", "effect": "NoSchedule"}]) for i in range(30)]
    path = cluster(tmp_path, *items, pod("p", cpu="500m"))
    objects = load_cluster([path])
    (p,) = objects.pending_pods
    store = objects.store()
    rules = default_rules()
    explained = explain_pod(p, store.snapshot(), rules)
    budget = FixBudget(candidates=6, trials=3, fixes=5)
    found = fix_pod(p, explained, store, rules, budget=budget)
    assert found.made <= 6 and found.trials <= 3
    assert len(found.fixes) == 2  # the baseline, then two trials: untaint one node, tolerate its taint
    before = {n.name: (n.node.taints, len(n.pods)) for n in store.nodes}
    assert before == {n.name: (n.node.taints, len(n.pods)) for n in objects.store().nodes}  # the store put back


def test_a_preempt_rule_vetoing_the_victims_is_a_rule_fix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A policy's own preempt rule keeps pods labelled keep: the only victim is one, so the
    pod (of a higher priority) does not preempt. Removing that rule lets the scheduler's own
    preemption place it, evicting the victim: a rule fix of size 2 + 1 eviction."""
    rules = tmp_path / "policy.rules"
    rules.write_text(
        'extends "default"\n\n# pods labelled keep are never preempted\npreempt keep_kept:\n    not has(victim.labels, "keep")\n'
    )
    kept = pod("kept", cpu="2", node_name="a")
    kept["metadata"]["labels"] = {"keep": "true"}
    path = cluster(tmp_path, node("a", cpu="2"), kept, pod("p", cpu="2", priority=100))
    a = explain_json(capsys, "default/p", "--cluster", path, "--rules", str(rules))
    by_op = {f["changes"][0]["op"]: f for f in a["fixes"]["fixes"]}
    dropped = by_op["drop-preempt"]
    assert dropped["changes"] == [{"op": "drop-preempt", "kind": "Rules", "name": "keep_kept"}]
    assert dropped["summary"] == "rules: delete preempt rule keep_kept (disable preempt keep_kept)"
    assert dropped["checked"] == {"placed": {"default/p": "a"}, "evicted": ["default/kept"]}
    assert dropped["size"] == 3 and dropped["moves"] == {"asked": 0, "pods": []}
    assert by_op["evict"]["size"] == 1  # (evicting it by hand is smaller)
    assert [f["size"] for f in a["fixes"]["fixes"]] == sorted(f["size"] for f in a["fixes"]["fixes"])
    # made on the files (the rules changed by simulate --apply), the pod preempts and is placed
    assert simulated(capsys, tmp_path, path, dropped, str(rules))["default/p"] == "a"
    # DefaultPreemption is never proposed (without it nothing preempts), nor a rule of another set
    plain = explain_json(capsys, "default/p", "--cluster", path)
    assert "drop-preempt" not in {f["changes"][0]["op"] for f in plain["fixes"]["fixes"] if f["changes"]}
    assert plain["fixes"]["baseline"] == "placed by preemption, evicting default/kept"
    # a fix naming a rule the set does not have: one line, no traceback
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"op": "drop-preempt", "kind": "Rules", "name": "nope"}]))
    assert main(["simulate", path, "--apply", str(bad)]) != 0
    assert "no preempt rule named nope in the rules" in capsys.readouterr().err


def test_the_pods_an_anti_affinity_repels_are_evicted_there(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The pod repels app=web on its node (topologyKey the hostname) and needs 1.5 cpu; a's only
    pod is such a web pod, holding 1 of its 2 cpu: evicting it both makes room and removes the
    conflict, one change (found by the brute-force comparison of bench_fixes, seed 73)."""
    web = pod("web", cpu="1", node_name="a")
    web["metadata"]["labels"] = {"app": "web"}
    wanted = pod("wanted", cpu="1500m")
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
    wanted["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    path = cluster(tmp_path, node("a", cpu="2"), web, wanted)
    a = explain_json(capsys, "default/wanted", "--cluster", path)
    best = a["fixes"]["fixes"][0]
    assert (best["summary"], best["size"]) == ("evict pod default/web", 1)
    assert simulated(capsys, tmp_path, path, best)["default/wanted"] == "a"


def test_a_pod_bigger_than_any_node_asks_less_and_makes_room(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """1.5 cpu on 1-cpu nodes, each full: no eviction alone is enough, nor a lower request
    alone; both together are (found by the property's brute force, seed 74061)."""
    path = cluster(tmp_path, node("a", cpu="1"), pod("run", cpu="1", node_name="a"), pod("wanted", cpu="1500m"))
    a = explain_json(capsys, "default/wanted", "--cluster", path)
    best = a["fixes"]["fixes"][0]
    assert best["summary"] == "evict pod default/run; lower pod default/wanted's cpu request to 1"
    assert best["size"] == 1.667 and best["where"] == "mixed"
    assert simulated(capsys, tmp_path, path, best)["default/wanted"] == "a"
