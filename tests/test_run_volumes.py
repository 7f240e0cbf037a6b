"""``rulesched run`` with volumes, against the test API server: the storage objects are watched,
a WaitForFirstConsumer claim to provision is annotated with the chosen node before the pod is
bound there, a claim matched to an available volume is bound to it (the volume's claimRef, the
claim's volumeName), and a failed binding takes the choice back."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rulesched.errors import ConflictError
from rulesched.kube.volumes import writes_for
from rulesched.model.decode import decode_pod
from rulesched.model.decode_storage import decode_pvc
from rulesched.model.storage import SELECTED_NODE, StorageState
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from rulesched.run.workers import Outcome, Workers
from rulesched.semantics.volume_binding import Decision
from tests.apiserver import TestApiServer
from tests.helpers.kube import claim, local_volume, storage_class
from tests.helpers.kube import claiming_pod as pod
from tests.helpers.kube import zonal_node as node


def run_until(server: TestApiServer, tmp_path: Path, done: Any, seconds: float = 30.0) -> None:
    loop = Loop(RunSettings(kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")), grace_seconds=2))
    thread = threading.Thread(target=loop.run, kwargs={"until": lambda: loop.stop.is_set()}, daemon=True)
    thread.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        time.sleep(0.1)
    loop.stop.set()
    loop.scheduler.queue.wake()
    thread.join(timeout=15)
    assert not thread.is_alive()


def test_dynamic_provisioning_annotates_the_claim_before_binding(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("node-a", "zone-a"))
    server.add("nodes", node("node-b", "zone-b"))
    server.add("storageclasses", storage_class("zonal", "csi.example.com", zones=["zone-b"]))
    server.add("persistentvolumeclaims", claim("data-0", "zonal"))
    server.add("pods", pod("db-0", "data-0"))
    pods, claims = server.store.objects["pods"], server.store.objects["persistentvolumeclaims"]
    run_until(server, tmp_path, lambda: pods["default/db-0"]["spec"].get("nodeName"))
    assert pods["default/db-0"]["spec"]["nodeName"] == "node-b"  # the class allows zone-b only
    assert claims["default/data-0"]["metadata"]["annotations"][SELECTED_NODE] == "node-b"


def test_static_volume_is_bound_to_the_claim(server: TestApiServer, tmp_path: Path) -> None:
    server.add("nodes", node("node-a", "zone-a"))
    server.add("nodes", node("node-b", "zone-b"))
    server.add("storageclasses", storage_class("local", "kubernetes.io/no-provisioner"))
    server.add("persistentvolumes", local_volume("local-a", "node-a"))
    server.add("persistentvolumeclaims", claim("data-0", "local"))
    server.add("pods", pod("db-0", "data-0"))
    pods = server.store.objects["pods"]
    run_until(server, tmp_path, lambda: pods["default/db-0"]["spec"].get("nodeName"))
    assert pods["default/db-0"]["spec"]["nodeName"] == "node-a"
    ref = server.store.objects["persistentvolumes"]["local-a"]["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "data-0", "uid-data-0")
    assert server.store.objects["persistentvolumeclaims"]["default/data-0"]["spec"]["volumeName"] == "local-a"


class FakeApi:
    """Records patches; the binding fails with a 409."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str | None, str, dict[str, Any]]] = []

    def patch(
        self, resource: Any, namespace: str | None, name: str, patch: dict[str, Any], timeout: float | None = None
    ) -> None:
        self.patches.append((resource.plural, namespace, name, patch))

    def bind(self, namespace: str, name: str, uid: str, node: str, timeout: float | None = None) -> None:
        raise ConflictError("409: the pod is being bound elsewhere")

    def get(self, resource: Any, namespace: str | None, name: str, timeout: float | None = None) -> dict[str, Any]:
        return {"spec": {}}


def test_a_failed_binding_takes_the_volume_choices_back() -> None:
    claims = {
        c.key: c
        for c in (
            decode_pvc(claim("dynamic", "zonal"), "test"),
            decode_pvc(claim("static", "local"), "test"),
        )
    }
    writes = writes_for(
        [Decision("default/dynamic"), Decision("default/static", "pv-1")], StorageState(claims=claims), "node-a"
    )
    api = FakeApi()
    outcomes: list[Outcome] = []
    workers = Workers(api, outcomes.append, threads=1)  # type: ignore[arg-type]
    try:
        workers._bind(decode_pod(pod("db-0", "dynamic"), "test"), "node-a", "", writes)
    finally:
        workers.shutdown()
    assert [o.ok for o in outcomes] == [False]
    made, undone = api.patches[:3], api.patches[3:]
    assert made == [
        ("persistentvolumeclaims", "default", "dynamic", {"metadata": {"annotations": {SELECTED_NODE: "node-a"}}}),
        (
            "persistentvolumes",
            None,
            "pv-1",
            {
                "spec": {
                    "claimRef": {
                        "kind": "PersistentVolumeClaim",
                        "apiVersion": "v1",
                        "namespace": "default",
                        "name": "static",
                        "uid": "uid-static",
                    }
                }
            },
        ),
        ("persistentvolumeclaims", "default", "static", {"spec": {"volumeName": "pv-1"}}),
    ]
    assert undone == [
        ("persistentvolumeclaims", "default", "static", {"spec": {"volumeName": None}}),
        ("persistentvolumes", None, "pv-1", {"spec": {"claimRef": None}}),
        ("persistentvolumeclaims", "default", "dynamic", {"metadata": {"annotations": {SELECTED_NODE: None}}}),
    ]
