#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback, for the tests and benchmarks: etcd,
kube-apiserver and kube-controller-manager as built by testbed/build.

    testbed/up DIR [--owner PID | --detach]    start them, wait until ready, write DIR/kubeconfig and DIR/env
    testbed/down DIR          stop them (by the pids recorded in DIR/run/)
    testbed/controlplane.py restart DIR COMPONENT [--kill]    stop one (SIGTERM, or SIGKILL) and start it again

Python's standard library and openssl only (it runs before the project is installed).

What the server is: everything on 127.0.0.1 (ports picked free); client-certificate
authentication for the admin (system:masters), kube-controller-manager and kube-scheduler, all
signed by DIR/pki/ca.crt; RBAC (and the Node authorizer, as kubeadm sets it); service-account
token signing keys; the admission plugins kube-apiserver enables by default (Priority,
ServiceAccount, DefaultTolerationSeconds, ...) plus NodeRestriction; the API versions and
feature gates of the DRA and Workload APIs of 1.37 (FEATURE_GATES, RUNTIME_CONFIG below).
kube-controller-manager runs CONTROLLERS with per-controller service-account credentials, and no
node lifecycle controller: nodes are plain Node objects created by the tests with capacity and a
Ready condition, and without kubelets nothing marks them NotReady. Without kubelets, pods bound
to them stay bound and never run: tests play the kubelet where they need it (a pod Ready, a
terminating pod removed).

The test bed dies with its owner: the process that ran `testbed/up` (or --owner PID). A
watchdog (`controlplane.py watch`, its pid in DIR/run/watchdog.pid, its log DIR/logs/watchdog.log)
waits for the owner's exit (a pidfd: no polling) and then stops every process whose command line
names DIR: the components, `testbed/up` itself if still starting them, and whatever the owner
started against the test bed (a kube-scheduler whose config is in DIR, a `rulesched run` with
DIR/kubeconfig); and every process started with RULESCHED_TESTBED_DIR=DIR in its environment
(tests/realk8s.py sets it in the test process once the test bed is up, so that whatever a test
starts carries it). So a pytest killed with SIGKILL, or a shell closed, leaves nothing running.
SIGTERM, SIGINT or SIGHUP to the watchdog does the same; `testbed/down` stops the components and
then the watchdog. --detach: no watchdog, the test bed runs until `testbed/down`.

DIR/env, one KEY=VALUE a line (shell-sourceable): KUBECONFIG (cluster admin),
KUBE_APISERVER_URL, ETCD_URL, KUBE_SCHEDULER and KUBE_SCHEDULER_KUBECONFIG (the real
kube-scheduler and its identity, started by whoever needs it), KUBECTL, CA_CERT,
KUBERNETES_VERSION, ETCD_VERSION, K8S_BIN, FEATURE_GATES, TESTBED_DIR, AUDIT_LOG (empty when
RULESCHED_TESTBED_AUDIT=0).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

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
READY_TIMEOUT = 120.0  # seconds for each component (kube-apiserver's first start on 2 busy cores: ~15 s)


class TestbedError(Exception):
    """A step failed; the message says which and where its log is."""


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


def free_port() -> int:
    """A free port below the kernel's ephemeral range: a port the kernel picked (bind to 0) is
    also what it hands out to outgoing connections, so once a component restarted by a test
    (tests/test_real_failures) was down, a client connection could hold its port and the
    restart failed with "address already in use" (seen on a loaded machine)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(10000, max(low, 10001))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise TestbedError("no free port below the ephemeral range")


# --- certificates -------------------------------------------------------------------------------


def openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise TestbedError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def make_pki(pki: Path) -> None:
    """A CA; kube-apiserver's serving certificate for 127.0.0.1 and localhost; client
    certificates (CN is the user, O the groups) for the admin and the two components; the
    service-account signing key pair. EC P-256 keys: made in milliseconds."""
    if shutil.which("openssl") is None:
        raise TestbedError("openssl is not installed (apt-get install openssl)")
    pki.mkdir(parents=True, exist_ok=True)
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(
        "req",
        "-x509",
        *key,
        "-days",
        "3650",
        "-subj",
        "/CN=rulesched-testbed-ca",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        cwd=pki,
    )
    leaves = {
        "apiserver": (
            "/CN=kube-apiserver",
            "serverAuth",
            "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1",
        ),
        "admin": ("/O=system:masters/CN=kubernetes-admin", "clientAuth", None),
        "kube-controller-manager": ("/CN=system:kube-controller-manager", "clientAuth", None),
        "kube-scheduler": ("/CN=system:kube-scheduler", "clientAuth", None),
    }
    for name, (subject, usage, san) in leaves.items():
        request = ["req", *key, "-subj", subject, "-keyout", f"{name}.key", "-out", f"{name}.csr"]
        extensions = [f"extendedKeyUsage={usage}", "keyUsage=critical,digitalSignature,keyEncipherment"]
        if san:
            extensions.append(f"subjectAltName={san}")
        (pki / f"{name}.ext").write_text("\n".join(extensions) + "\n")
        openssl(*request, cwd=pki)
        openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=pki,
        )
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", "sa.key", cwd=pki)
    openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    # The aggregation layer's front proxy (kube-apiserver's --requestheader-* and --proxy-client-*,
    # as kubeadm sets them): APIService backends such as metrics-server can then be added.
    openssl(
        "req",
        "-x509",
        *key,
        "-days",
        "3650",
        "-subj",
        "/CN=front-proxy-ca",
        "-keyout",
        "front-proxy-ca.key",
        "-out",
        "front-proxy-ca.crt",
        cwd=pki,
    )
    (pki / "front-proxy-client.ext").write_text("extendedKeyUsage=clientAuth\n")
    openssl(
        "req",
        *key,
        "-subj",
        "/CN=front-proxy-client",
        "-keyout",
        "front-proxy-client.key",
        "-out",
        "front-proxy-client.csr",
        cwd=pki,
    )
    openssl(
        "x509",
        "-req",
        "-in",
        "front-proxy-client.csr",
        "-CA",
        "front-proxy-ca.crt",
        "-CAkey",
        "front-proxy-ca.key",
        "-CAcreateserial",
        "-days",
        "3650",
        "-extfile",
        "front-proxy-client.ext",
        "-out",
        "front-proxy-client.crt",
        cwd=pki,
    )
    for f in pki.glob("*.key"):
        f.chmod(0o600)


def write_kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    """A kubeconfig for one client certificate (JSON is YAML: no YAML library needed)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "testbed", "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(pki / f"{user}.crt"), "client-key": str(pki / f"{user}.key")},
            }
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": user}}],
        "current-context": "testbed",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


# --- processes ----------------------------------------------------------------------------------


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
    if os.environ.get("RULESCHED_TESTBED_AUDIT", "1") == "0":
        return []
    policy = d / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY, indent=2) + "\n")
    return [f"--audit-policy-file={policy}", f"--audit-log-path={d / 'logs' / 'audit.log'}", "--audit-log-maxsize=0"]


def controllers() -> list[str]:
    """CONTROLLERS, with RULESCHED_TESTBED_CONTROLLERS (comma-separated) added."""
    extra = [c for c in os.environ.get("RULESCHED_TESTBED_CONTROLLERS", "").split(",") if c]
    return list(CONTROLLERS) + [c for c in extra if c not in CONTROLLERS]


def start(d: Path, component: str) -> int:
    argv = json.loads((d / "run" / f"{component}.json").read_text())
    log = open(d / "logs" / f"{component}.log", "ab")
    # A session of its own: the test bed outlives `testbed/up`, and a terminal's ^C does not reach
    # it (the watchdog stops it when its owner is gone).
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    (d / "run" / f"{component}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def running_pid(d: Path, component: str) -> int | None:
    """The recorded pid if that process is still this component (not a reused pid)."""
    try:
        pid = int((d / "run" / f"{component}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if component == "watchdog":
        if cmdline[1:3] != [str(HERE / "controlplane.py").encode(), b"watch"]:
            return None
    elif not cmdline or not cmdline[0].endswith(component.encode()):
        return None
    return None if exited(pid) else pid


def exited(pid: int) -> bool:
    """Gone, or a zombie (exited, not yet reaped by its parent) with no thread left.

    A multi-threaded process (every Go component) killed by a signal shows its leader as a zombie
    while its other threads are still exiting and still hold its files, its listening sockets
    among them: a restart that went by the leader alone raced them and failed with "address
    already in use" (CI, tests/test_real_failures.py)."""
    try:
        for task in os.scandir(f"/proc/{pid}/task"):
            try:
                state = Path(task.path, "stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue  # (that thread is gone)
            if state not in ("Z", "X"):
                return False
    except OSError:
        return True
    return True


OWNED = "RULESCHED_TESTBED_DIR"  # in a process's environment: it belongs to that test bed


def processes_naming(d: Path) -> list[int]:
    """The live processes (of this user) with DIR, or a path under it, in their command line, or
    OWNED=DIR in their environment (as they were started)."""
    prefix = str(d).encode()
    mark = f"{OWNED}={d}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            environ = Path(entry.path, "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        named = any(a == prefix or a.startswith(prefix + b"/") or b"=" + prefix + b"/" in a for a in argv)
        if (named or mark in environ) and not exited(int(entry.name)):
            found.append(int(entry.name))
    return found


def signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def stop(d: Path, component: str, kill: bool = False, timeout: float = 15.0) -> None:
    pid = running_pid(d, component)
    if pid is None:
        return
    os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running_pid(d, component) == pid:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
        time.sleep(0.05)


def log_tail(d: Path, component: str, lines: int = 30) -> str:
    try:
        text = (d / "logs" / f"{component}.log").read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def admin_context(d: Path) -> ssl.SSLContext:
    pki = d / "pki"
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
    return ctx


def get(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (OSError, urllib.error.URLError):
        return 0, b""


def wait_ready(d: Path, component: str, ports: dict[str, int], timeout: float = READY_TIMEOUT) -> None:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    probes = {
        "etcd": (f"http://127.0.0.1:{ports['etcd']}/health", None),
        "kube-apiserver": (f"https://127.0.0.1:{ports['kube-apiserver']}/readyz", admin_context(d)),
        # /healthz needs no credentials (--authorization-always-allow-paths' default)
        "kube-controller-manager": (f"https://127.0.0.1:{ports['kube-controller-manager']}/healthz", insecure),
    }
    url, ctx = probes[component]
    deadline = time.monotonic() + timeout
    last = b""
    while time.monotonic() < deadline:
        if running_pid(d, component) is None:
            raise TestbedError(
                f"{component} exited while starting; its log ({d / 'logs' / component}.log) ends:\n"
                + log_tail(d, component)
            )
        status, last = get(url, ctx)
        if status == 200:
            return
        time.sleep(0.2)
    raise TestbedError(
        f"{component} not ready after {timeout:.0f} s ({url}: {last[-500:].decode(errors='replace')}); "
        f"its log ends:\n" + log_tail(d, component)
    )


def wait_default_service_account(d: Path, ports: dict[str, int], timeout: float = READY_TIMEOUT) -> None:
    """The service-account controller has made default/default: kube-controller-manager works,
    with its own credentials (and pods in namespace default pass the ServiceAccount admission)."""
    url = f"https://127.0.0.1:{ports['kube-apiserver']}/api/v1/namespaces/default/serviceaccounts/default"
    ctx = admin_context(d)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if get(url, ctx)[0] == 200:
            return
        if running_pid(d, "kube-controller-manager") is None:
            raise TestbedError(
                "kube-controller-manager exited; its log ends:\n" + log_tail(d, "kube-controller-manager")
            )
        time.sleep(0.2)
    raise TestbedError(
        f"no default ServiceAccount after {timeout:.0f} s; kube-controller-manager's log ends:\n"
        + log_tail(d, "kube-controller-manager")
    )


def etcd_version(bin_dir: Path) -> str:
    done = subprocess.run([str(bin_dir / "etcd"), "--version"], capture_output=True, text=True)
    found = re.search(r"etcd Version: (\S+)", done.stdout)
    return found.group(1) if found else "unknown"


# --- the commands -------------------------------------------------------------------------------


def up(d: Path, owner: int | None) -> None:
    """Start the test bed in D; OWNER's exit stops it (None: only testbed/down does)."""
    bin_dir = binaries_dir()
    missing = missing_binaries(bin_dir)
    if missing:
        raise TestbedError(f"no {', '.join(missing)} in {bin_dir}: run testbed/build first")
    d = d.resolve()
    if any(running_pid(d, c) for c in COMPONENTS):
        raise TestbedError(f"a test bed is already running in {d} (testbed/down {d})")
    down(d)  # (a watchdog left from the last test bed here would stop this one with its owner)
    for sub in ("run", "logs", "etcd-data", "pki"):
        if (d / sub).exists():
            shutil.rmtree(d / sub)
        (d / sub).mkdir(parents=True)
    if owner is not None:
        start_watchdog(d, owner)
    make_pki(d / "pki")
    ports = {name: free_port() for name in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager")}
    (d / "run" / "ports.json").write_text(json.dumps(ports) + "\n")
    server = f"https://127.0.0.1:{ports['kube-apiserver']}"
    write_kubeconfig(d / "kubeconfig", server, d / "pki", "admin")
    for component in ("kube-controller-manager", "kube-scheduler"):
        write_kubeconfig(d / f"{component}.kubeconfig", server, d / "pki", component)
    for component, argv in commands(d, bin_dir, ports).items():
        (d / "run" / f"{component}.json").write_text(json.dumps(argv) + "\n")
    try:
        for component in COMPONENTS:
            start(d, component)
            wait_ready(d, component, ports)
        wait_default_service_account(d, ports)
    except BaseException:
        down(d)
        raise
    env = {
        "TESTBED_DIR": str(d),
        "KUBECONFIG": str(d / "kubeconfig"),
        "KUBE_APISERVER_URL": server,
        "ETCD_URL": f"http://127.0.0.1:{ports['etcd']}",
        "CA_CERT": str(d / "pki" / "ca.crt"),
        "KUBE_SCHEDULER": str(bin_dir / "kube-scheduler"),
        "KUBE_SCHEDULER_KUBECONFIG": str(d / "kube-scheduler.kubeconfig"),
        "KUBECTL": str(bin_dir / "kubectl"),
        "K8S_BIN": str(bin_dir),
        "KUBERNETES_VERSION": kubernetes_version(),
        "ETCD_VERSION": etcd_version(bin_dir),
        "FEATURE_GATES": ",".join(f"{g}=true" for g in FEATURE_GATES),
        "AUDIT_LOG": str(d / "logs" / "audit.log") if audit_flags(d) else "",
    }
    (d / "env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))


def down(d: Path) -> None:
    d = d.resolve()
    for component in reversed(COMPONENTS):
        stop(d, component)
    pid = running_pid(d, "watchdog")
    if pid is not None:
        os.kill(pid, signal.SIGUSR1)  # (SIGUSR1: exit without stopping anything: all is stopped)


# --- the watchdog -------------------------------------------------------------------------------


def start_watchdog(d: Path, owner: int) -> None:
    with open(d / "logs" / "watchdog.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "controlplane.py"), "watch", str(d), str(owner)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip
    (d / "run" / "watchdog.pid").write_text(f"{proc.pid}\n")


def say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} testbed watchdog {os.getpid()}: {message}", file=sys.stderr, flush=True)


def watch(d: Path, owner: int) -> None:
    """Wait for the owner's exit (or SIGTERM, SIGINT, SIGHUP), then stop every process naming DIR.
    SIGUSR1 (testbed/down, which stopped the components itself): exit."""

    class Stop(Exception):
        pass

    class Quit(Exception):
        pass

    def on_signal(signum: int, frame: object) -> None:
        raise Quit() if signum == signal.SIGUSR1 else Stop()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(signum, on_signal)
    say(f"stops the test bed in {d} when process {owner} exits")
    try:
        try:
            wait_for_exit(owner)
            say(f"process {owner} exited")
        except Stop:
            say("asked to stop the test bed")
        stop_everything(d)
    except Quit:
        say("testbed/down stopped the test bed")


def wait_for_exit(pid: int) -> None:
    """Block until process PID has exited (a pidfd where the kernel has them, else a check every
    second, its start time compared so that a reused pid is not taken for it)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        started = start_time(pid)
        while started is not None and start_time(pid) == started and not exited(pid):
            time.sleep(1.0)
        return
    try:
        select.select([fd], [], [])  # readable once the process has exited
    finally:
        os.close(fd)


def is_up(pid: int) -> bool:
    """PID is a `testbed/up` (controlplane.py up ...)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) > 2 and argv[1].endswith(b"controlplane.py") and argv[2] == b"up"


def start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[19]
    except (OSError, IndexError):
        return None


def stop_everything(d: Path, grace: float = 10.0) -> None:
    """SIGTERM to every process naming DIR (testbed/up first, with SIGKILL, so that it starts
    nothing more), SIGKILL to those left after GRACE seconds; again until none is left."""
    for _ in range(5):
        pids = processes_naming(d)
        if not pids:
            return
        signal_all([p for p in pids if is_up(p)], signal.SIGKILL)
        say(f"stopping {len(pids)} processes: {', '.join(map(str, pids))}")
        signal_all(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not all(exited(p) for p in pids):
            time.sleep(0.1)
        signal_all([p for p in pids if not exited(p)], signal.SIGKILL)
        time.sleep(0.2)


COMPONENT_PORTS = {
    "etcd": ("etcd", "etcd-peer"),
    "kube-apiserver": ("kube-apiserver",),
    "kube-controller-manager": ("kube-controller-manager",),
}


def wait_ports_free(component: str, ports: dict[str, int], timeout: float = 30.0) -> None:
    """Until COMPONENT's ports can be listened on again (as Go listens: SO_REUSEADDR, so the
    stopped process's connections in TIME-WAIT do not count)."""
    deadline = time.monotonic() + timeout
    for name in COMPONENT_PORTS.get(component, ()):
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("127.0.0.1", ports[name]))
                    break
                except OSError as err:
                    if time.monotonic() > deadline:
                        raise TestbedError(
                            f"port {ports[name]} of {component} still taken after {timeout:.0f} s"
                        ) from err
            time.sleep(0.05)


def restart(d: Path, component: str, kill: bool) -> None:
    d = d.resolve()
    ports = json.loads((d / "run" / "ports.json").read_text())
    stop(d, component, kill=kill)
    wait_ports_free(component, ports)
    start(d, component)
    wait_ready(d, component, ports)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="testbed", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    u = sub.add_parser("up", help="start etcd, kube-apiserver and kube-controller-manager in DIR")
    u.add_argument("dir")
    owned = u.add_mutually_exclusive_group()
    owned.add_argument(
        "--owner", type=int, metavar="PID", help="stop the test bed when process PID exits (default: the caller)"
    )
    owned.add_argument("--detach", action="store_true", help="no owner: run until testbed/down")
    w = sub.add_parser("watch", help="(started by up) stop the test bed in DIR when process PID exits")
    w.add_argument("dir")
    w.add_argument("owner", type=int)
    sub.add_parser("down", help="stop the test bed running in DIR").add_argument("dir")
    r = sub.add_parser("restart", help="stop one component and start it again")
    r.add_argument("dir")
    r.add_argument("component", choices=COMPONENTS)
    r.add_argument("--kill", action="store_true", help="SIGKILL instead of SIGTERM")
    sub.add_parser("bin", help="print the binaries' directory; exit 1 if some are missing")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            t0 = time.monotonic()
            owner = None if args.detach else args.owner or os.getppid()
            if owner == 1:
                raise TestbedError("the caller has exited already (give --owner PID, or --detach)")
            up(Path(args.dir), owner)
            print(
                f"testbed: up in {time.monotonic() - t0:.1f} s; KUBECONFIG={Path(args.dir).resolve() / 'kubeconfig'}",
                file=sys.stderr,
            )
        elif args.command == "down":
            down(Path(args.dir))
        elif args.command == "watch":
            watch(Path(args.dir).resolve(), args.owner)
        elif args.command == "restart":
            restart(Path(args.dir), args.component, args.kill)
        else:
            print(binaries_dir())
            return 1 if missing_binaries() else 0
    except TestbedError as e:
        print(f"testbed {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
