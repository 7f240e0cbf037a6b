"""Storage objects from files to placements: decoding (one-line errors naming the field), the
loader, the store's record of VolumeBinding's choices (assume, and forget taking it back,
snapshots unchanged), and the simulator placing pods whose claims earlier pods took."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cluster.store import ClusterStore
from rulesched.errors import InputError, ObjectError
from rulesched.model.decode import decode_pod
from rulesched.model.decode_storage import decode_csinode, decode_pv, decode_pvc, decode_storage_class
from rulesched.model.storage import SELECTED_NODE, StorageState
from rulesched.semantics.volume_binding import Decision
from rulesched.simulate.load import load_cluster
from rulesched.simulate.run import SimulateSettings, simulate
from tests.upstream.harness import node

ZONE = "topology.kubernetes.io/zone"


@pytest.mark.parametrize(
    ("decode", "obj", "message"),
    [
        (
            decode_pvc,
            {"metadata": {"name": "c"}, "spec": {"accessModes": ["ReadWriteSometimes"]}},
            "f: PersistentVolumeClaim default/c: spec.accessModes[0]: 'ReadWriteSometimes' is not one of",
        ),
        (
            decode_pvc,
            {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "lots"}}}},
            "f: PersistentVolumeClaim default/c: spec.resources.requests.storage:",
        ),
        (
            decode_pv,
            {"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": "x"}}}},
            "f: PersistentVolume v: spec.nodeAffinity.required.nodeSelectorTerms: expected a list",
        ),
        (
            decode_storage_class,
            {"metadata": {"name": "s"}, "volumeBindingMode": "Later"},
            "f: StorageClass s: volumeBindingMode:",
        ),
        (
            decode_csinode,
            {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]}},
            "f: CSINode n: spec.drivers[0].allocatable.count: -1 is negative",
        ),
        (
            decode_pod,
            {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {}}]}},
            "f: Pod default/p: spec.volumes[0].persistentVolumeClaim.claimName: missing",
        ),
    ],
)
def test_bad_input_is_one_line_naming_the_field(decode: Any, obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectError) as err:
        decode(obj, "f")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_pod_volumes_claims_and_inline_disks() -> None:
    p = decode_pod(
        {
            "metadata": {"name": "web-0"},
            "spec": {
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                    {"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-1"}},
                    {"name": "config", "configMap": {"name": "c"}},
                ]
            },
        },
        "f",
    )
    assert p.claims == ("data-web-0", "web-0-scratch")
    assert [v.name for v in p.volumes] == ["data", "scratch", "disk"]  # a configMap is no filter's concern
    assert p.volumes[2].disk == ("aws", "vol-1")


def test_the_loader_reads_the_storage_kinds(tmp_path: Path) -> None:
    docs = [
        {"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}},
        {
            "kind": "StorageClass",
            "metadata": {"name": "fast"},
            "provisioner": "x",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {"kind": "PersistentVolume", "metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}}},
        {"kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "ns"}, "spec": {}},
        {
            "kind": "CSINode",
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "x", "allocatable": {"count": 3}}]},
        },
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    objects = load_cluster([path])
    storage = objects.storage
    assert set(storage.classes) == {"fast"} and set(storage.volumes) == {"pv1"} and set(storage.claims) == {"ns/c"}
    assert storage.csinodes["n1"].limits == {"x": 3}
    assert objects.warnings == ()
    path.write_text(yaml.safe_dump_all([*docs, docs[3]]))
    with pytest.raises(InputError, match="duplicate PersistentVolumeClaim ns/c"):
        load_cluster([path])


def wffc_storage(*claims: str) -> StorageState:
    cls = decode_storage_class(
        {"metadata": {"name": "zonal"}, "provisioner": "csi.x", "volumeBindingMode": "WaitForFirstConsumer"}, "f"
    )
    made = [
        decode_pvc(
            {"metadata": {"name": c, "namespace": "default", "uid": f"u-{c}"}, "spec": {"storageClassName": "zonal"}},
            "f",
        )
        for c in claims
    ]
    return StorageState(claims={c.key: c for c in made}, classes={"zonal": cls})


def claimant(name: str, claim: str) -> Any:
    spec = {"containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]}
    return decode_pod({"metadata": {"name": name}, "spec": spec}, "f")


def test_assume_provisions_and_forget_takes_it_back() -> None:
    store = ClusterStore.build([node("a", {ZONE: "z1"})], [], storage=wffc_storage("data"), provision=True)
    before = store.snapshot()
    generation = store.generation
    store.assume(claimant("p", "data"), "a")
    after = store.storage
    assert store.volume_decisions("default/p") == (Decision("default/data"),)
    assert after.claims["default/data"].bound and after.claims["default/data"].volume_name == "pvc-u-data"
    assert after.volumes["pvc-u-data"].node_affinity is not None
    assert before.storage.claims["default/data"].volume_name == ""  # the snapshot is unchanged
    assert store.generation > generation and store.claim_users("default/data") == 1
    store.forget("default/p")
    assert store.storage.claims["default/data"].volume_name == "" and not store.storage.volumes
    assert store.claim_users("default/data") == 0 and store.volume_decisions("default/p") == ()


def test_without_provisioning_the_claim_is_marked_with_the_node() -> None:
    store = ClusterStore.build([node("a", {ZONE: "z1"})], [], storage=wffc_storage("data"))
    store.assume(claimant("p", "data"), "a")
    assert store.storage.claims["default/data"].annotations[SELECTED_NODE] == "a"
    store.forget("default/p")
    assert SELECTED_NODE not in store.storage.claims["default/data"].annotations


def cluster_file(tmp_path: Path, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def zone_node(name: str, zone: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def pending(name: str, claim: str, cpu: str = "100m") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


def test_simulated_pods_see_the_claims_earlier_pods_took(tmp_path: Path) -> None:
    """A second pod on a claim the first provisioned lands in the first one's zone; a second pod
    on a ReadWriteOncePod claim in use does not land at all."""
    docs = [
        zone_node("a", "z1"),
        zone_node("b", "z2"),
        {
            "kind": "StorageClass",
            "metadata": {"name": "zonal"},
            "provisioner": "csi.x",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteMany"]},
        },
        {
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "only-one", "namespace": "default"},
            "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOncePod"]},
        },
        pending("first", "shared"),
        pending("second", "shared"),
        pending("owner", "only-one"),
        pending("intruder", "only-one"),
    ]
    path = cluster_file(tmp_path, docs)
    report = simulate(load_cluster([path]), SimulateSettings(cluster=(str(path),), seed=1))
    rows = {str(r["pod"]): r for r in report.rows()}
    first = rows["default/first"]["node"]
    assert first in ("a", "b")
    # the shared claim's volume lives in the first pod's zone: the second pod must go there too
    # (node a and b are the only nodes of their zones, so it shares the first pod's node)
    assert rows["default/second"]["node"] == first
    assert rows["default/owner"]["node"] in ("a", "b")
    assert rows["default/intruder"]["node"] is None
    assert "ReadWriteOncePod" in str(rows["default/intruder"]["message"])
