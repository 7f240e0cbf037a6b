"""Loading clusters from files: YAML streams, JSON, List wrappers, cross-file priority classes,
the skipped-kinds warning, and one-line InputErrors for every way a file can be wrong."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from rulesched.errors import InputError, ObjectError
from rulesched.simulate.load import ClusterObjects, load_cluster

NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
status:
  capacity: {{cpu: "4", memory: 8Gi}}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
spec:
  {extra}
  containers:
  - name: c
    image: app
    resources: {{requests: {{cpu: 100m}}}}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def node(name: str) -> str:
    return NODE.format(name=name)


def pod(name: str, ns: str = "default", extra: str = "") -> str:
    return POD.format(name=name, ns=ns, extra=extra or "schedulerName: default-scheduler")


def load_error(*paths: Path) -> str:
    with pytest.raises(InputError) as err:
        load_cluster(paths)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_yaml_stream_with_empty_documents(tmp_path: Path) -> None:
    text = "---\n" + node("n1") + "---\n# nothing\n---\n" + pod("a", extra="nodeName: n1") + "---\n" + pod("b")
    cluster = load_cluster([write(tmp_path, "c.yaml", text)])
    assert [n.name for n in cluster.nodes] == ["n1"]
    assert [p.key for p in cluster.pods] == ["default/a", "default/b"]
    assert [p.key for p in cluster.running_pods] == ["default/a"]
    assert [p.key for p in cluster.pending_pods] == ["default/b"]
    assert cluster.warnings == ()
    assert cluster.nodes[0].capacity["memory"] == 8 * 2**30 * 1000


def test_lists_json_and_inferred_kinds(tmp_path: Path) -> None:
    pods = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [
            {
                "metadata": {"name": "p1", "namespace": "shop"},
                "spec": {"containers": [{"name": "c"}], "nodeName": "n1"},
            },
            {"metadata": {"name": "p2"}, "spec": {"containers": [{"name": "c"}]}},
        ],
    }
    mixed = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"kind": "Node", "metadata": {"name": "n1"}},
            {"kind": "Namespace", "metadata": {"name": "shop"}},
            {"kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "shop"}, "spec": {"selector": {}}},
            {"kind": "ConfigMap", "metadata": {"name": "s"}},
        ],
    }
    a = write(tmp_path, "pods.json", json.dumps(pods))
    b = write(tmp_path, "mixed.yaml", json.dumps(mixed, indent=1))  # JSON content, YAML name
    empty = write(tmp_path, "none.yaml", "apiVersion: v1\nkind: List\nitems: []\n")
    cluster = load_cluster([a, b, empty])
    assert [p.key for p in cluster.pods] == ["shop/p1", "default/p2"]
    assert [n.name for n in cluster.nodes] == ["n1"]
    assert [ns.name for ns in cluster.namespaces] == ["shop"]
    assert [d.key for d in cluster.pdbs] == ["shop/b"]
    assert cluster.warnings == ("skipped 1 object of another kind (ConfigMap)",)


def test_directories_load_their_yaml_and_json_files(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", node("n1"))
    write(tmp_path, "b.yml", node("n2"))
    write(tmp_path, "c.json", json.dumps({"kind": "Node", "metadata": {"name": "n3"}}))
    write(tmp_path, "notes.txt", "not a cluster")
    assert [n.name for n in load_cluster([tmp_path]).nodes] == ["n1", "n2", "n3"]
    assert [n.name for n in load_cluster(str(tmp_path / "a.yaml")).nodes] == ["n1"]


def test_priority_classes_resolve_across_files_in_any_order(tmp_path: Path) -> None:
    pods = write(tmp_path, "pods.yaml", pod("a", extra="priorityClassName: high") + "---\n" + pod("b"))
    classes = write(
        tmp_path,
        "classes.yaml",
        "kind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\npreemptionPolicy: Never\n---\n"
        "kind: PriorityClass\nmetadata: {name: default}\nvalue: 10\nglobalDefault: true\n",
    )
    cluster = load_cluster([pods, classes])
    assert [(p.priority, p.preemption_policy) for p in cluster.pods] == [
        (1000, "Never"),
        (10, "PreemptLowerPriority"),
    ]
    assert sorted(cluster.priority_classes) == ["default", "high"]


def test_skipped_kinds_make_one_warning(tmp_path: Path) -> None:
    text = "\n---\n".join(
        f"kind: {kind}\nmetadata: {{name: x{i}}}" for i, kind in enumerate(["Job", "Deployment", "Job", "ConfigMap"])
    )
    cluster = load_cluster([write(tmp_path, "other.yaml", text)])
    assert cluster.warnings == ("skipped 4 objects of other kinds (ConfigMap, Deployment, Job)",)
    assert cluster == ClusterObjects(priority_classes=cluster.priority_classes, warnings=cluster.warnings)


def test_finished_pods_are_dropped(tmp_path: Path) -> None:
    done = pod("done", extra="nodeName: gone") + "status: {phase: Succeeded}\n"
    failed = pod("failed") + "status: {phase: Failed}\n"
    cluster = load_cluster([write(tmp_path, "p.yaml", done + "---\n" + failed + "---\n" + pod("live"))])
    assert [p.name for p in cluster.pods] == ["live"]


def test_duplicates_name_both_files(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", pod("x") + "---\n" + node("n1"))
    b = write(tmp_path, "b.yaml", pod("x"))
    assert load_error(a, b) == f"{b}: duplicate Pod default/x (first in {a})"
    with pytest.raises(ObjectError) as err:
        load_cluster([a, b])
    assert err.value.obj == "Pod default/x"
    c = write(tmp_path, "c.yaml", node("n1"))
    assert load_error(a, c) == f"{c}: duplicate Node n1 (first in {a})"
    # the same name in another namespace is another pod
    d = write(tmp_path, "d.yaml", pod("x", ns="other"))
    assert len(load_cluster([a, d]).pods) == 2


def test_running_pod_on_a_missing_node(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", node("n1") + "---\n" + pod("web", extra="nodeName: n9"))
    assert load_error(path) == (f"{path}: Pod default/web: spec.nodeName: node 'n9' does not exist in the files loaded")


def test_decode_errors_name_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "p.yaml", pod("web").replace("100m", "lots"))
    assert load_error(path) == (
        f"{path}: Pod default/web: spec.containers[0].resources.requests.cpu: "
        "'lots' is not a quantity (expected e.g. 500m, 2Gi, 1.5)"
    )


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "bad.yaml",
            "kind: Pod\nmetadata:\n  name: [a\n",
            ":4:1: invalid YAML: did not find expected ',' or ']' (while parsing a flow sequence)",
        ),
        (
            "tab.yaml",
            "a: 1\n\tb: 2\n",
            ":2:1: invalid YAML: found a tab character that violates indentation (while scanning a plain scalar)",
        ),
        (
            "nul.yaml",
            "kind: Pod\x00\n",
            ":1:10: invalid YAML: unacceptable character #x0000: control characters are not allowed",
        ),
        (
            "tag.yaml",
            "kind: !secret Pod\n",
            ":1:7: invalid YAML: could not determine a constructor for the tag '!secret'",
        ),
        ("bad.json", '{"kind": "Pod",,}', ":1:16: invalid JSON: Expecting property name enclosed in double quotes"),
        (
            "scalar.yaml",
            "just words\n",
            ": document 1 (line 1) is the string 'just words', not an object (a mapping with a kind)",
        ),
        (
            "list.yaml",
            node("n1") + "---\n- kind: Pod\n",
            ": document 2 (line 7) is a list, not an object (a mapping with a kind)",
        ),
        ("nokind.yaml", "metadata: {name: x}\n", ": document 1 (line 1): kind: missing"),
        ("item.yaml", "kind: List\nitems:\n- metadata: {name: x}\n", ": document 1 (line 1): items[0]: kind: missing"),
        ("items.yaml", "kind: List\nitems: {a: 1}\n", ": document 1 (line 1): items: expected a list, got a mapping"),
        ("empty.yaml", "", ": empty file; expected Kubernetes objects"),
        ("blank.json", "  \n", ": empty file; expected Kubernetes objects"),
        ("comments.yaml", "# only\n---\n", ": no Kubernetes objects found (only comments or '---')"),
    ],
)
def test_malformed_files(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = write(tmp_path, name, text)
    assert load_error(path) == f"{path}{expected}"


def test_unreadable_and_binary_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert load_error(missing) == f"{missing}: cannot read: No such file or directory"
    binary = tmp_path / "random.bin"
    binary.write_bytes(random.Random(7).randbytes(10_000))
    assert load_error(binary).startswith(f"{binary}: ")
    utf16 = tmp_path / "windows.yaml"
    utf16.write_bytes(node("n1").encode("utf-16"))
    assert [n.name for n in load_cluster([utf16]).nodes] == ["n1"]


@pytest.mark.parametrize(
    "line",
    ["a" * 1_000_000, "[" * 1_000_000, "{" * 1_000_000, "- " * 500_000, '{"a": ' * 200_000, "x: " * 333_333],
)
def test_hostile_input_gives_input_error(tmp_path: Path, line: str) -> None:
    """A 1 MB line must give an InputError: not RecursionError, and not the crash libyaml's
    own composer has on deep nesting."""
    for name in ("line.yaml", "line.json"):
        path = write(tmp_path, name, line)
        assert load_error(path).startswith(f"{path}")


def test_random_bytes_never_escape_as_other_exceptions(tmp_path: Path) -> None:
    rng = random.Random(11)
    alphabet = b"{}[]:-,\"' \n\tab01#&*!|>%@`"
    for i in range(40):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(1, 200)))
        path = tmp_path / f"r{i}.yaml"
        path.write_bytes(data)
        try:
            load_cluster([path])
        except InputError:
            pass


def _fake_cluster(nodes: int, pods: int) -> tuple[dict[str, Any], dict[str, Any]]:
    node_items = [
        {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": f"node-{i}",
                "labels": {"kubernetes.io/hostname": f"node-{i}", "topology.kubernetes.io/zone": f"z{i % 3}"},
            },
            "spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}] if i % 10 == 0 else []},
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "7800m", "memory": "30Gi", "pods": "110"},
                "images": [{"names": [f"registry/img{j}:1.{i % 4}"], "sizeBytes": 10_000_000} for j in range(5)],
            },
        }
        for i in range(nodes)
    ]
    pod_items = [
        {
            "metadata": {
                "name": f"web-{i}",
                "namespace": f"ns{i % 20}",
                "uid": f"uid-{i}",
                "labels": {"app": f"app{i % 100}", "pod-template-hash": "abc"},
                "creationTimestamp": "2024-01-02T03:04:05Z",
                "ownerReferences": [{"kind": "ReplicaSet", "name": f"app{i % 100}-abc", "controller": True}],
            },
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": f"registry/img{i % 5}:1.0",
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                    }
                ],
                "tolerations": [
                    {
                        "key": "node.kubernetes.io/not-ready",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 300,
                    }
                ],
                **({"nodeName": f"node-{i % nodes}"} if i < pods - 1000 else {}),
                "priority": 0,
            },
            "status": {"phase": "Running" if i < pods - 1000 else "Pending"},
        }
        for i in range(pods)
    ]
    return {"kind": "NodeList", "items": node_items}, {"kind": "PodList", "items": pod_items}


def test_large_cluster_loads(tmp_path: Path) -> None:
    """5,000 nodes and 11,000 pods of JSON load whole (how fast is benchmarks/bench_schedule.py's
    business: tests assert behaviour, not time)."""
    nodes, pods = _fake_cluster(5000, 11000)
    a = write(tmp_path, "nodes.json", json.dumps(nodes))
    b = write(tmp_path, "pods.json", json.dumps(pods))
    cluster = load_cluster([a, b])
    assert (len(cluster.nodes), len(cluster.pods), len(cluster.running_pods)) == (5000, 11000, 10000)
