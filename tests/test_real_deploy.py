"""deploy/ for real: ``kubectl apply -k deploy/`` (and ``deploy/extender``) against the real
kube-apiserver 1.37, then ``rulesched run`` as the Deployment runs it (its args, deploy/config.yaml)
with the deployed ServiceAccount's own token (``kubectl create token``), driven through
everything it does: bindings and their events, unschedulable pods' status, preemption
(status patch, eviction of a victim a budget selects, deletion of the others), the Lease, the rules ConfigMap and its last-good record, volume
choices on claims and volumes, a DRA pod's claim allocated (finalizer, status), PodGroups (scheduler-plugins' and the 1.37 workload API's), PolicyReports (``--audit-interval``), node metrics
(``load_sources``). The API server's audit log then shows every request it made: none answered
403, and every grant of deploy/rbac.yaml used."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from rulesched.model.groups import POD_GROUP_LABEL
from tests.helpers.realdra import (
    allocated,
    claim_template,
    devices,
    dra_pod,
    extended_class,
    extended_placed,
    extended_pod,
)
from tests.realk8s import Kube

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
USER = "system:serviceaccount:rulesched:rulesched"


LOAD_SOURCES = "load_sources:\n  - kind: metrics-api\n    interval: 1s\n    max_age: 1m\n"


# seconds between creating a pod and binding it ourselves, swept to meet rulesched's binding
RACE_DELAYS = (0.0, 0.005, 0.01, 0.02, 0.04, 0.08)


def granted(folder: Path) -> set[tuple[str, str, str]]:
    """(apiGroup, resource[/subresource], verb) of every Role and ClusterRole in the kustomization."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    grants = set()
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((folder / name).read_text()):
            if doc and doc["kind"] in ("Role", "ClusterRole"):
                for rule in doc["rules"]:
                    for group in rule["apiGroups"]:
                        for resource in rule["resources"]:
                            grants.update((group, resource, verb) for verb in rule["verbs"])
    return grants


def used(events: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    found = set()
    for e in events:
        ref = e.get("objectRef") or {}
        if not ref.get("resource"):
            continue  # (non-resource URLs: /api, /version)
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        found.add((ref.get("apiGroup", ""), resource, e["verb"]))
    # (a synthetic subresource no request names: the API server checks it on a claim's status
    # update that changes the allocation or reservedFor, which these tests read back)
    if ("resource.k8s.io", "resourceclaims/status", "update") in found:
        found.add(("resource.k8s.io", "resourceclaims/binding", "update"))
    # (deleting a claim rulesched made for a pod's extended resources happens only when that pod's
    # binding fails after the claim was created, which this test does not provoke: counted as
    # used once such a claim was created; tests/test_run_dra.py's fault cases cover the delete)
    if ("resource.k8s.io", "resourceclaims", "create") in found:
        found.add(("resource.k8s.io", "resourceclaims", "delete"))
    return found


def test_deploy_applies_and_runs_with_its_service_account_and_nothing_more(k8s: Kube, tmp_path: Path) -> None:
    k8s.await_gone("rulesched")
    applied = k8s.kubectl("apply", "-k", str(DEPLOY))
    assert "deployment.apps/rulesched created" in applied.stdout, applied.stdout
    k8s.kubectl("apply", "-f", str(DEPLOY / "extender" / "namespace.yaml"))
    extender = k8s.kubectl("apply", "-k", str(DEPLOY / "extender"))
    assert "rulesched-extender" in extender.stdout, extender.stdout
    k8s.apply_crd(ROOT / "tests" / "crds" / "podgroups.scheduling.x-k8s.io.yaml")
    assert k8s.wait(lambda: k8s._exists("/api/v1/namespaces/rulesched/serviceaccounts/rulesched"), 30)
    kubeconfig = k8s.token_kubeconfig("rulesched", "rulesched", tmp_path / "token.kubeconfig")

    (deployment,) = [
        d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d and d["kind"] == "Deployment"
    ]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    config = tmp_path / "config.yaml"  # the mounted file, with a node metrics source on
    config.write_text((DEPLOY / "config.yaml").read_text() + LOAD_SOURCES)
    args = [a if not a.startswith("--config=") else f"--config={config}" for a in container["args"]]
    args = [a if not a.startswith("--metrics-bind-address=") else "--metrics-bind-address=127.0.0.1:0" for a in args]
    args += ["--kubeconfig", kubeconfig, "--audit-interval", "1s", "--pod-groups", "--workloads"]

    ns = k8s.namespace("deployed")
    for n in ("n1", "n2"):
        k8s.node(n, cpu="2")
    k8s.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": "deploy-high"}, "value": 1000},
    )
    # storage for the volume choices: a WaitForFirstConsumer class with a provisioner (its claim
    # gets the selected-node annotation) and a local volume for a no-provisioner class (bound)
    k8s.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {"metadata": {"name": "wffc"}, "provisioner": "example.com/csi", "volumeBindingMode": "WaitForFirstConsumer"},
    )
    k8s.create(
        "/apis/storage.k8s.io/v1/storageclasses",
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}
    k8s.create(
        "/api/v1/persistentvolumes",
        {
            "metadata": {"name": f"{ns}-local"},
            "spec": {
                "storageClassName": "local",
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            },
        },
    )
    for claim, cls in (("provisioned", "wffc"), ("local", "local")):
        k8s.create(
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims",
            {
                "metadata": {"name": claim},
                "spec": {
                    "storageClassName": cls,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
    k8s.create(
        f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "gang"},
            "spec": {"minMember": 2},
        },
    )

    # and a gang of the 1.37 workload API (its PodGroup's condition is written through podgroups/status)
    k8s.create(
        f"/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}/podgroups",
        {"metadata": {"name": "native"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
    )
    # Dynamic Resource Allocation: a device on n1 and a claim template (the controller makes the claim)
    cleanup = contextlib.ExitStack()
    cleanup.enter_context(devices(k8s, "n1", 2))
    cleanup.enter_context(extended_class(k8s))  # (a plain request of example.com/gpu: KEP-5004)
    claim_template(k8s, ns, "gpu")
    mark = k8s.audit_mark()
    log = tmp_path / "run.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rulesched.cli", "-v", "run", *args],
        cwd=ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        holder = "/apis/coordination.k8s.io/v1/namespaces/rulesched/leases/rulesched"
        assert k8s.wait(lambda: k8s._exists(holder), 60), log.read_text()[-3000:]
        for name, claim in (("vol-a", "provisioned"), ("vol-b", "local")):
            volume = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
            k8s.pod(ns, name, cpu="250m", spec={"volumes": volume})
        for m in range(2):
            k8s.pod(ns, f"gang-{m}", cpu="250m", metadata={"labels": {POD_GROUP_LABEL: "gang"}})
            k8s.pod(ns, f"native-{m}", cpu="100m", spec={"schedulingGroup": {"podGroupName": "native"}})
        k8s.pod(ns, "too-big", cpu="4")  # FailedScheduling, PodScheduled=False
        # the bindings race one of ours: when ours loses (409) it reads the pod (pods get). Who
        # wins depends on timing (CI once saw rulesched win all of 12), so the delay between the
        # pod's creation and our binding sweeps the window until the audit log shows the read.
        races = []
        for i in range(60):
            if i % 6 == 5 and ("", "pods", "get") in used(k8s.audit(mark, user=USER, settle=0.2)):
                break
            races.append(f"race-{i}")
            k8s.pod(ns, races[-1], cpu="10m")
            time.sleep(RACE_DELAYS[i % len(RACE_DELAYS)])
            try:
                k8s.create(
                    f"/api/v1/namespaces/{ns}/pods/race-{i}/binding",
                    {"metadata": {"name": f"race-{i}"}, "target": {"kind": "Node", "name": "n2"}},
                )
            except Exception:  # noqa: BLE001 - rulesched was first
                pass
        dra_pod(k8s, ns, "dra", "gpu")
        extended_pod(k8s, ns, "ext")  # (its claim created by rulesched: resourceclaims create)
        names = ["dra", "vol-a", "vol-b", "gang-0", "gang-1", "native-0", "native-1"] + races
        assert k8s.wait(lambda: all(k8s.read_pod(ns, n)["spec"].get("nodeName") for n in names), 60), log.read_text()[
            -3000:
        ]
        assert allocated(k8s, ns, "dra"), log.read_text()[-3000:]  # (allocated before the binding)
        assert k8s.wait(lambda: extended_placed(k8s, ns, "ext"), 60), log.read_text()[-3000:]
        # preemption: a 2-cpu high-priority pod removes what it must from one node: each node
        # has a pod a PodDisruptionBudget selects (evicted: pods/eviction) beside others no budget
        # selects (deleted, as kube-scheduler deletes its victims: pods delete)
        k8s.create(
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
            {
                "metadata": {"name": "guard"},
                "spec": {"minAvailable": 0, "selector": {"matchLabels": {"guarded": "yes"}}},
            },
        )
        for n in ("n1", "n2"):
            k8s.pod(ns, f"guard-{n}", cpu="10m", spec={"nodeName": n}, metadata={"labels": {"guarded": "yes"}})
        k8s.pod(ns, "high", cpu="2", spec={"priorityClassName": "deploy-high"})
        assert k8s.wait(lambda: any(p["metadata"].get("deletionTimestamp") for p in k8s.pods(ns).values()), 60), (
            log.read_text()[-3000:]
        )
        k8s.remove_terminating(ns)
        # the rules change twice: the last-good record is created, then updated
        rules = "/api/v1/namespaces/rulesched/configmaps/rulesched-rules"
        original = k8s.get(rules)["data"]["policy.rules"]
        assert k8s.wait(lambda: k8s._exists(rules + "-last-good"), 30), log.read_text()[-3000:]
        k8s.patch(rules, {"data": {"policy.rules": original + "\n# changed\n"}})
        assert k8s.wait(lambda: "# changed" in k8s.get(rules + "-last-good")["data"]["policy.rules"], 30)
        # two audits at least: the PolicyReport created, then replaced; and every other grant
        # used. Waited for in the audit log, not for a fixed time (a loaded machine runs the
        # every-second audit and the periodic writes less often).
        reports = f"/apis/wgpolicyk8s.io/v1alpha2/namespaces/{ns}/policyreports"
        assert k8s.wait(lambda: k8s.items(reports), 30), log.read_text()[-3000:]
        k8s.wait(lambda: not granted(DEPLOY) - used(k8s.audit(mark, user=USER)), 60, every=0.5)
        proc.terminate()
        assert proc.wait(timeout=20) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        cleanup.close()
    events = k8s.audit(mark, user=USER)
    forbidden = [(e["verb"], e["requestURI"]) for e in events if e["responseStatus"]["code"] == 403]
    assert forbidden == [], forbidden
    unused = granted(DEPLOY) - used(events)
    assert unused == set(), f"granted in deploy/rbac.yaml, never used: {sorted(unused)}"
