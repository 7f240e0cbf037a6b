"""What the test bed runs: the binaries testbed/build makes, and each component's command line
(feature gates, API versions, controllers, the audit policy)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from testbed.errors import TestbedError

HERE = Path(__file__).resolve().parent
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager")  # started in this order
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "podload")

# The feature gates of the DRA and Workload APIs (KEP-4381 and its follow-ups; KEP-4671), every
# one of 1.37 on, whatever its stage; the rest at their defaults, so that kube-scheduler behaves
# as a 1.37 cluster's does. One list for kube-apiserver, kube-controller-manager and kube-scheduler.
FEATURE_GATES = (
    "DynamicResourceAllocation",
    "DRAAdminAccess",
    "DRAConsumableCapacity",
    "DRADerivedAttributes",
    "DRADeviceBindingConditions",
    "DRADeviceCompatibilityGroups",
    "DRADeviceTaintRules",
    "DRADeviceTaints",
    "DRAExtendedResource",
    "DRAFractionalCapacityRange",
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations",
    "DRAPartitionableDevices",
    "DRAPartitionableDevicesType",
    "DRAPrioritizedList",
    "DRAResourceClaimDeviceStatus",
    "DRAResourceClaimGranularStatusAuthorization",
    "DRAResourcePoolStatus",
    "DRASchedulerFilterTimeout",
    "DRAWorkloadResourceClaims",
    "GenericWorkload",
    "CompositePodGroup",
    "PodGroupPreemptionPolicy",
    "TopologyAwareWorkloadScheduling",
    "WorkloadWithJob",
)
# The API versions those gates serve that are off by default (beta and alpha versions).
RUNTIME_CONFIG = (
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1alpha3",
)
# kube-controller-manager's controllers: those the issue lists (disruption, resource claims,
# garbage collection, namespaces, service accounts), those every cluster has that the tests lean
# on (service-account tokens, the kube-root-ca.crt ConfigMap, the aggregated ClusterRoles
# admin/edit/view, the volume binder: a new PersistentVolume is Available only once it has seen
# it, and kube-scheduler binds only Available ones), and the Workload API's and DRA's own. Not the node lifecycle controller (it
# would mark the kubelet-less nodes NotReady and evict their pods), nor the workload
# controllers (ReplicaSets, Deployments, Jobs: tests create pods themselves).
CONTROLLERS = (
    "disruption",
    "resource-claim-controller",
    "garbagecollector",
    "namespace",
    "serviceaccount",
    "serviceaccount-token",
    "root-ca-cert-publisher",
    "clusterrole-aggregation",
    "persistentvolume-binder",
    "podgroup-protection-controller",
    "device-taint-eviction-controller",
)
# The audit log (DIR/logs/audit.log, one JSON event a line, at the Metadata level: who did what
# to which object, and the answer's code), so tests can read what a client really asked and was
# answered: no 403 anywhere, every RBAC grant used, who bound which pod when. The control plane's
# own components are left out (their traffic would be most of it). RULESCHED_TESTBED_AUDIT=0
# turns it off (the benchmarks, where it would be API server CPU that is no scheduler's).
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:kube-controller-manager", "system:apiserver"]},
        {"level": "None", "userGroups": ["system:serviceaccounts:kube-system"]},
        {"level": "None", "nonResourceURLs": ["/healthz*", "/readyz*", "/livez*", "/version"]},
        {"level": "Metadata"},
    ],
}

COMPONENT_PORTS = {
    "etcd": ("etcd", "etcd-peer"),
    "kube-apiserver": ("kube-apiserver",),
    "kube-controller-manager": ("kube-controller-manager",),
}


def kubernetes_version() -> str:
    for line in (HERE / "go.mod").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == "k8s.io/kubernetes":
            return fields[1]
    raise TestbedError("testbed/go.mod names no k8s.io/kubernetes version")


def binaries_dir() -> Path:
    """Where testbed/build puts the binaries (RULESCHED_K8S_BIN overrides)."""
    explicit = os.environ.get("RULESCHED_K8S_BIN")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("RULESCHED_K8S_CACHE")
    if not cache:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        cache = os.path.join(base, "rulesched")
    return Path(cache) / f"k8s-{kubernetes_version()}"


def missing_binaries(bin_dir: Path | None = None) -> list[str]:
    bin_dir = bin_dir or binaries_dir()
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


def commands(d: Path, bin_dir: Path, ports: dict[str, int]) -> dict[str, list[str]]:
    pki = d / "pki"
    gates = ",".join(f"{g}=true" for g in FEATURE_GATES)
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    return {
        "etcd": [
            str(bin_dir / "etcd"),
            "--name=testbed",
            f"--data-dir={d / 'etcd-data'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports['etcd-peer']}",
            f"--initial-cluster=testbed=http://127.0.0.1:{ports['etcd-peer']}",
            # A test bed's data is thrown away: no fsync (as upstream's integration tests run it).
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(bin_dir / "kube-apiserver"),
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # (the kubernetes Service's endpoints would be a loopback address, which the
            # reconciler refuses: no endpoints, as no pod here needs to reach the API)
            "--endpoint-reconciler-type=none",
            f"--secure-port={ports['kube-apiserver']}",
            f"--etcd-servers={etcd_url}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/12",
            "--allow-privileged=true",
            f"--feature-gates={gates}",
            f"--runtime-config={','.join(f'{v}=true' for v in RUNTIME_CONFIG)}",
            f"--cert-dir={d / 'pki' / 'generated'}",
            *audit_flags(d),
            "--v=1",
        ],
        "kube-controller-manager": [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={d / 'kube-controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={d / 'kube-controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={d / 'kube-controller-manager.kubeconfig'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kube-controller-manager']}",
            f"--cert-dir={d / 'pki' / 'generated'}",
            f"--controllers={','.join(controllers())}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}",
            "--leader-elect=false",
            f"--feature-gates={gates}",
            "--v=1",
        ],
    }


def audit_flags(d: Path) -> list[str]:
    """The audit log's flags: RULESCHED_TESTBED_AUDIT "0" none; "all" every client's requests
    (the benchmark's --audit: the control plane's own too); else (the tests') every request but
    those of kube-controller-manager and the API server itself."""
    mode = os.environ.get("RULESCHED_TESTBED_AUDIT", "1")
    if mode == "0":
        return []
    rules = AUDIT_POLICY["rules"]
    if mode == "all":
        rules = [r for r in rules if "users" not in r and "userGroups" not in r]
    policy = d / "audit-policy.json"
    policy.write_text(json.dumps({**AUDIT_POLICY, "rules": rules}, indent=2) + "\n")
    return [f"--audit-policy-file={policy}", f"--audit-log-path={d / 'logs' / 'audit.log'}", "--audit-log-maxsize=0"]


def controllers() -> list[str]:
    """CONTROLLERS, with RULESCHED_TESTBED_CONTROLLERS (comma-separated) added."""
    extra = [c for c in os.environ.get("RULESCHED_TESTBED_CONTROLLERS", "").split(",") if c]
    return list(CONTROLLERS) + [c for c in extra if c not in CONTROLLERS]


def etcd_version(bin_dir: Path) -> str:
    done = subprocess.run([str(bin_dir / "etcd"), "--version"], capture_output=True, text=True)
    found = re.search(r"etcd Version: (\S+)", done.stdout)
    return found.group(1) if found else "unknown"
