"""``rulesched explain`` for groups: a PodGroup, a controller's pods, several objects given with
-f, objects not yet created expanded as their controllers would create them; which members fit
where, the closest topology domain, what the last members lack; and the group's fixes, each
placing the group when made on the files and simulated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cli import main
from rulesched.errors import InputError
from rulesched.semantics.controllers import pods_of, suffix
from tests.helpers.explaining import explain_json, simulated
from tests.helpers.fixcheck import check_group, explain_group_fixes, generate_group, write
from tests.helpers.profiles import examples


def node(name: str, cpu: str = "4", **labels: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str, node_name: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


def gang_cluster(tmp_path: Path) -> str:
    """Two racks of two 4-cpu nodes, r2a half used; a gang of three 3-cpu members in one rack."""
    items = [
        node("r1a", rack="r1"),
        node("r1b", rack="r1"),
        node("r2a", rack="r2"),
        node("r2b", rack="r2"),
        pod("busy", "2", "r2a"),
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 3}},
                "schedulingConstraints": {"topology": [{"key": "rack"}]},
            },
        },
        *(pod(f"w{i}", "3", schedulingGroup={"podGroupName": "train"}) for i in range(3)),
    ]
    return write(items, tmp_path / "gang.json")


def test_a_gang_in_one_rack(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = gang_cluster(tmp_path)
    g = explain_json(capsys, "podgroup/default/train", "--cluster", path)["group_explanation"]
    assert (g["group"], g["policy"], g["needed"], g["placed"], g["fit"]) == (
        "PodGroup default/train",
        "gang minCount 3",
        3,
        False,
        2,
    )
    assert g["where"] == {"r1a": 1, "r1b": 1}
    assert [(d["domain"], d["placed"]) for d in g["domains"]] == [({"rack": "r1"}, 2), ({"rack": "r2"}, 1)]
    assert g["closest"] == {"domain": {"rack": "r1"}, "placed": 2, "lacks": {"cpu": "1"}}  # 9 asked, 8 free
    (lacking,) = g["lacking"].values()
    assert lacking[0]["code"] == "InsufficientResource" and lacking[0]["resource"] == "cpu"
    fixes = {f["summary"]: f for f in g["fixes"]["fixes"]}
    assert fixes["group pg:default/train: minCount 2"]["size"] == 1
    (grown,) = [f for s, f in fixes.items() if s.startswith("add 1 node(s) like r1")]
    template = grown["changes"][0]["name"]
    assert set(grown["checked"]["placed"].values()) <= {"r1a", "r1b", f"{template}-new-1"}  # all three in rack r1
    assert any(s.startswith("lower the pods' cpu request to ") for s in fixes)
    assert all(r["found"] for r in g["fixes"]["refuted"])  # (each with what its trial found)
    members = [f"default/w{i}" for i in range(3)]
    for checked in check_group(path, {"group_explanation": g}, members, 3):
        assert checked.placed >= checked.needed, checked.fix["summary"]
    # a member explained by name brings its group along
    by_member = explain_json(capsys, "default/w0", "--cluster", path)
    assert by_member["group_explanation"]["members"] == members
    assert "fixes" not in by_member  # (the group's fixes, not the member's alone)


JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "default"},
    "spec": {
        "parallelism": 4,
        "completions": 8,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}],
            }
        },
    },
}


def test_a_job_before_submission(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """-f job.yaml: its four pods (parallelism 4 of 8 completions) on three 4-cpu nodes, one
    half used and one tainted: a smaller request (with the taint gone); on the cluster alone,
    the cheapest room per pod, then a node like the best for the rest."""
    cluster = write(
        [
            node("a"),
            node("b"),
            {**node("c"), "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}},
            pod("busy", "2", "a"),
        ],
        tmp_path / "c.json",
    )
    job = tmp_path / "job.json"
    job.write_text(json.dumps(JOB))
    a = explain_json(capsys, "-f", str(job), "--cluster", cluster)
    g = a["group_explanation"]
    assert g["created"] == ["Job default/train: 4 pod(s)"]
    assert (g["group"], g["policy"], g["fit"], len(g["members"])) == ("Job default/train", "every pod", 1, 4)
    fixes = g["fixes"]["fixes"]
    # the smallest: 2 cpu (what a has free) is refuted (a 1, b 2: 3 of 4); its follow-up, 1 cpu
    # (a 2, b 3), fixes it (and 2 cpu with c untainted is then that fix's shape and more)
    assert (fixes[0]["summary"], fixes[0]["size"]) == ("lower the pods' cpu request to 1", 1.333)
    assert g["fixes"]["refuted"][0]["summary"] == "lower the pods' cpu request to 2"
    assert all(len(f["checked"]["placed"]) == 4 for f in fixes)
    cluster_only = next(f for f in fixes if f["where"] == "cluster")
    assert cluster_only["summary"] == (
        "evict pod default/busy; remove taint gpu=yes:NoSchedule from node c; add 1 node(s) like a"
    )
    assert cluster_only["size"] == 4 and len(cluster_only["checked"]["placed"]) == 4
    # the same, made on the files (the Job's pods written out as its controller would create them)
    _, made, _ = pods_of("Job", JOB, "job.json")
    both = write([*json.loads(Path(cluster).read_text())["items"], *made], tmp_path / "both.json")
    members = [f"default/{p['metadata']['name']}" for p in made]
    for checked in check_group(both, {"group_explanation": g}, members, 4):
        assert checked.placed >= checked.needed, checked.fix["summary"]
    # the table says what it was made from and the cheapest fix
    main(["explain", "-f", str(job), "--cluster", cluster])
    table = capsys.readouterr().out
    assert "made from Job default/train: 4 pod(s):" in table and "1 of 4 pending members fit" in table


def test_several_files_together(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster = write([node("a", cpu="2")], tmp_path / "c.json")
    files = []
    for name in ("x", "y"):
        f = tmp_path / f"{name}.json"
        f.write_text(json.dumps(pod(name, "1500m")))
        files += ["-f", str(f)]
    g = explain_json(capsys, *files, "--cluster", cluster)["group_explanation"]
    assert (g["group"], g["fit"], g["members"]) == ("2 pods", 1, ["default/x", "default/y"])
    summaries = [f["summary"] for f in g["fixes"]["fixes"]]
    assert summaries == ["lower the pods' cpu request to 500m", "add 1 node(s) like a"]  # (size 1.333, then 2)


def test_controllers_expand_as_they_create_pods() -> None:
    job = {**JOB, "spec": {**JOB["spec"], "completionMode": "Indexed", "parallelism": 3, "completions": 2}}
    label, pods, groups = pods_of("Job", job, "f")  # type: ignore[misc]
    assert label == "Job default/train" and len(pods) == 2 and not groups  # min(parallelism, completions)
    first = pods[0]
    assert first["metadata"]["name"] == f"train-0-{suffix('train/0')}" and first["spec"]["hostname"] == "train-0"
    assert first["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"
    assert first["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "train"
    assert first["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert pods_of("Job", {**JOB, "spec": {**JOB["spec"], "suspend": True}}, "f")[1] == []  # type: ignore[index]
    # a Job asking for a gang (1.37's WorkloadWithJob): its PodGroup, minCount the parallelism
    gang = {**JOB, "spec": {**JOB["spec"], "scheduling": {"schedulingPolicy": {"gang": {}}}}}
    _, pods, groups = pods_of("Job", gang, "f")  # type: ignore[misc]
    (group,) = groups
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group["metadata"]["name"]}
    template = JOB["spec"]["template"]  # type: ignore[index]
    deployment = {"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3, "template": template}}
    _, pods, _ = pods_of("Deployment", deployment, "f")  # type: ignore[misc]
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in pods}
    (rs,) = {p["metadata"]["ownerReferences"][0]["name"] for p in pods}
    assert len(pods) == 3 and len(hashes) == 1 and rs == f"web-{hashes.pop()}"
    sts = {
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "template": template},
    }
    _, pods, _ = pods_of("StatefulSet", sts, "f")  # type: ignore[misc]
    assert [p["metadata"]["name"] for p in pods] == ["db-0", "db-1"]
    assert (pods[1]["spec"]["hostname"], pods[1]["spec"]["subdomain"]) == ("db-1", "db")
    jobset = {
        "kind": "JobSet",
        "metadata": {"name": "js", "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {**JOB["spec"], "parallelism": 2, "completions": 2}},
                }
            ]
        },
    }
    _, pods, _ = pods_of("JobSet", jobset, "f")  # type: ignore[misc]
    assert len(pods) == 4 and {p["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] for p in pods} == {"js"}
    together = pods[0]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert together["topologyKey"] == "rack"
    assert pods_of("ConfigMap", {"metadata": {"name": "x"}}, "f") is None
    with pytest.raises(InputError, match="f: Job.spec.parallelism: expected a whole number"):
        pods_of("Job", {**JOB, "spec": {**JOB["spec"], "parallelism": -1}}, "f")


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_group_fix_places_the_group(tmp_path: Path, seed: int) -> None:
    items, target, minimum = generate_group(seed, nodes=3 + seed % 3)
    path = write(items, tmp_path / f"g{seed}.json")
    g = explain_group_fixes(path, target)["group_explanation"]
    if g["placed"]:
        return
    for checked in check_group(path, {"group_explanation": g}, g["members"], minimum):
        assert checked.placed >= checked.needed, checked.fix["summary"]


PREFER_GPU = """extends "default"

# (a poor policy) every pod prefers the GPU nodes
score prefer_gpu_nodes weight 5:
    if node.allocatable["nvidia.com/gpu"] > 0 then 100 else 0
"""


def test_a_score_sending_the_first_pods_where_the_last_need_to_go(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Two pods given together: a-cpu (2 cpu) is placed first and the policy's score sends it to
    the GPU node g (2 cpu), so b-gpu (1 cpu, 1 GPU) fits nowhere. Without the score a-cpu goes
    to the roomier c and both fit: a rule fix, with what else it moves."""
    rules = tmp_path / "policy.rules"
    rules.write_text(PREFER_GPU)
    gpu = node("g", cpu="2")
    gpu["status"]["allocatable"]["nvidia.com/gpu"] = gpu["status"]["capacity"]["nvidia.com/gpu"] = "1"
    waiting = pod("other", "1")  # another pending pod (what else the rule change moves)
    cluster = write([gpu, node("c", cpu="4"), waiting], tmp_path / "c.json")
    first, second = pod("a-cpu", "2"), pod("b-gpu", "1")
    second["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    files = []
    for p in (first, second):
        f = tmp_path / f"{p['metadata']['name']}.json"
        f.write_text(json.dumps(p))
        files += ["-f", str(f)]
    g = explain_json(capsys, *files, "--cluster", cluster, "--rules", str(rules))["group_explanation"]
    assert (g["fit"], g["where"]) == (1, {"g": 1})
    fixes = {f["summary"]: f for f in g["fixes"]["fixes"]}
    score = fixes["rules: delete score prefer_gpu_nodes (disable score prefer_gpu_nodes)"]
    assert score["where"] == "rules" and score["changes"] == [
        {"op": "set-weight", "kind": "Rules", "name": "prefer_gpu_nodes", "weight": 0}
    ]
    assert score["checked"]["placed"] == {"default/a-cpu": "c", "default/b-gpu": "g"}
    assert score["moves"]["asked"] == 1  # default/other, scheduled under both sets
    assert score["size"] == 2 + len(score["moves"]["pods"])
    assert "add 1 node(s) like g" in fixes  # (the cluster's way)
    # made on the files (both pods written out, the rules changed by simulate --apply)
    both = write([*json.loads(Path(cluster).read_text())["items"], first, second], tmp_path / "both.json")
    rows = simulated(capsys, tmp_path, both, score, str(rules))
    assert (rows["default/a-cpu"], rows["default/b-gpu"]) == ("c", "g")


def test_a_gang_of_gpu_pods_says_how_many_more_gpus_its_closest_rack_needs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A gang of four 1-GPU members in one rack: rack r1 has three free GPUs (one of its four
    held by a running pod), rack r2 two: r1 is the closest domain, short of 1 GPU; the fixes
    free it there (the holder evicted) or add a node like r1's."""
    items: list[dict[str, Any]] = []
    for name, rack, gpus in (("r1a", "r1", "2"), ("r1b", "r1", "2"), ("r2a", "r2", "2")):
        n = node(name, cpu="8", rack=rack)
        n["status"]["allocatable"]["nvidia.com/gpu"] = n["status"]["capacity"]["nvidia.com/gpu"] = gpus
        items.append(n)
    holder = pod("holder", "1", "r1a")
    holder["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    items.append(holder)
    items.append(
        {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": "rack"}]},
            },
        }
    )
    for i in range(4):
        m = pod(f"w{i}", "1", schedulingGroup={"podGroupName": "train"})
        m["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
        items.append(m)
    path = write(items, tmp_path / "gpus.json")
    g = explain_json(capsys, "podgroup/default/train", "--cluster", path)["group_explanation"]
    assert (g["placed"], g["needed"]) == (False, 4)
    assert g["closest"] == {"domain": {"rack": "r1"}, "placed": 3, "lacks": {"nvidia.com/gpu": "1"}}
    (lacking,) = g["lacking"].values()
    assert lacking[0]["code"] == "InsufficientResource" and lacking[0]["resource"] == "nvidia.com/gpu"
    summaries = [f["summary"] for f in g["fixes"]["fixes"]]
    assert "evict pod default/holder" in summaries
    assert any(s.startswith("add 1 node(s) like r1") for s in summaries)
    members = [f"default/w{i}" for i in range(4)]
    for checked in check_group(path, {"group_explanation": g}, members, 4):
        assert checked.placed >= checked.needed, checked.fix["summary"]
    # the table says it in words
    main(["explain", "podgroup/default/train", "--cluster", path])
    table = capsys.readouterr().out
    assert "nvidia.com/gpu" in table
