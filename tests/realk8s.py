"""A real Kubernetes control plane under the tests: etcd, kube-apiserver and
kube-controller-manager 1.37 as testbed/ builds and starts them, and the real kube-scheduler
on demand.

Fixtures (tests/conftest.py registers them; a test using either is marked ``real_k8s``, so
``-m real_k8s`` runs these alone and ``-m 'not real_k8s'`` leaves them out):

* ``real_k8s`` (session): one control plane for the whole run, started by ``testbed/up`` in a
  temporary directory (~10 s) and stopped by ``testbed/down`` at the end (and by testbed/'s
  watchdog if this process is killed before: with it, every process naming the directory, such
  as a kube-scheduler started by :meth:`Kube.kube_scheduler`, and every process a test started,
  which inherits ``RULESCHED_TESTBED_DIR``). Without the binaries
  (``testbed/build`` makes them: 1,344 CPU seconds cold, see the README) the tests using it are skipped, the reason saying
  so; with ``RULESCHED_REQUIRE_REAL_K8S=1`` (``.ci/run`` sets it after building) they fail
  instead. ``RULESCHED_K8S_BIN`` points at binaries elsewhere.
* ``k8s`` (function): the same control plane, with everything the test made removed after it:
  every node, every namespace but the system ones (their pods deleted at once first), the
  PriorityClasses not named ``system-*``, the pods and Leases in ``default``, kube-schedulers it
  started. Tests run one at a time, so within a test the cluster is its own.

:class:`Kube` (what both give) talks to the server as cluster admin over its own urllib3 pool,
with JSON dicts, independent of rulesched's adapter (so the test checks rulesched with another
client). Its attributes and methods:

* ``env`` (DIR/env as a dict), ``kubeconfig`` (the admin's), ``url``, ``dir``;
* ``request(method, path, body=None, query=None, content_type=...)`` → the answer's JSON, or
  :class:`ApiError` (``.status``, ``.body``); ``get``, ``create``, ``patch``, ``delete``,
  ``items(path)`` for the usual verbs on a path such as ``/api/v1/namespaces/NS/pods``;
* ``namespace(prefix)``: a new namespace, with its default ServiceAccount there (the
  ServiceAccount admission plugin refuses pods until the controller has made it);
  ``await_gone(name)``: a namespace of a fixed name deleted after an earlier test is gone;
* ``node(name, cpu="4", memory="16Gi", pods="110", labels=None, taints=None, extra=None)``: a
  Ready node (no kubelet behind it), with only the taints given (the ``not-ready`` taint the
  API server puts on every new node is lifted, as the node lifecycle controller would);
  ``pod(ns, name, ...)`` as tests.helpers.kube.pod;
* playing the kubelet: ``mark_running(ns, name)`` (phase Running, Ready: the disruption
  controller counts only Ready pods as healthy), ``remove_terminating(ns)`` (deletes at once
  the pods a graceful deletion or an eviction left terminating: nothing else ever would);
* ``kubectl(*args, input=None, kubeconfig=None, check=True)``; ``token_kubeconfig(ns, sa, path)``
  (``kubectl create token``: a kubeconfig that is that ServiceAccount);
* ``apply_crd(path)``: a CRD applied and Established; ``restart(component, kill=False)``
  (kube-apiserver, etcd or kube-controller-manager, with the same flags and data);
  ``compact()`` etcd's history up to now (older resourceVersions then 410 Gone);
* ``kube_scheduler(config=None, args=())``: the real kube-scheduler, as a context manager (see
  :class:`KubeScheduler`); ``wait(condition, seconds)``;
* ``audit_mark()``, ``audit(since, user=None)``: the API server's audit log (every request
  of every client but the control plane's own, at the Metadata level: verb, objectRef, code,
  userAgent, times), to check what a client asked and was answered.

:class:`Running` is ``rulesched run`` on a thread of the test's process against it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3
import yaml

# (the test bed's choice of port, below the ephemeral range: a restarted server finds its port)
from testbed.processes import free_port
from tests.helpers.kube import pod as pod_object

ROOT = Path(__file__).resolve().parent.parent
TESTBED = ROOT / "testbed"
REQUIRE = "RULESCHED_REQUIRE_REAL_K8S"
OWNED = "RULESCHED_TESTBED_DIR"  # (testbed/controlplane.py's: a process of this test bed)
SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path}: {status} {body}")
        self.status = status
        self.body = body


def unavailable_reason() -> str | None:
    """Why the test bed cannot start here (None: it can)."""
    done = subprocess.run(
        [sys.executable, str(TESTBED / "controlplane.py"), "bin"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return f"no Kubernetes binaries in {done.stdout.strip()} (run testbed/build)"
    if shutil.which("openssl") is None:
        return "openssl is not installed"
    return None


def read_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = value
    return env


class Kube:
    """A client of the test bed's API server as cluster admin (see the module's docstring)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.env = read_env(directory / "env")
        self.kubeconfig = self.env["KUBECONFIG"]
        self.url = self.env["KUBE_APISERVER_URL"]
        pki = directory / "pki"
        self._pool = urllib3.PoolManager(
            maxsize=32,
            ca_certs=str(pki / "ca.crt"),
            cert_file=str(pki / "admin.crt"),
            key_file=str(pki / "admin.key"),
            # connection errors retried (the server restarting under a test); never a request
            # that reached it. The pause capped at 2 s: uncapped, 20 doubling pauses from 0.1 s
            # kept a teardown waiting ~20 minutes on a server that had failed to restart.
            retries=urllib3.Retry(
                total=20, connect=20, read=0, redirect=0, status=0, other=0, backoff_factor=0.1, backoff_max=2.0
            ),
            timeout=urllib3.Timeout(connect=5, read=60),
        )
        self.schedulers: list[KubeScheduler] = []

    # --- requests -------------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        url = self.url + path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        answer = self._pool.request(method, url, body=data, headers=headers)
        try:
            decoded = json.loads(answer.data) if answer.data else None
        except ValueError:
            decoded = answer.data.decode(errors="replace")
        if answer.status >= 400:
            raise ApiError(method, path, answer.status, decoded)
        return decoded

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)

    def items(self, path: str, **query: Any) -> list[dict[str, Any]]:
        return list(self.get(path, **query)["items"])

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return dict(self.request("POST", path, body))

    def patch(self, path: str, body: dict[str, Any], content_type: str = MERGE) -> dict[str, Any]:
        return dict(self.request("PATCH", path, body, content_type=content_type))

    def delete(self, path: str, grace: int | None = None, missing_ok: bool = True) -> None:
        body = None if grace is None else {"gracePeriodSeconds": grace}
        try:
            self.request("DELETE", path, body)
        except ApiError as e:
            if not (missing_ok and e.status == 404):
                raise

    def wait(self, condition: Callable[[], Any], seconds: float = 30.0, every: float = 0.1) -> Any:
        """``condition()``'s first true value within ``seconds`` (else its last value)."""
        end = time.monotonic() + seconds
        while True:
            value = condition()
            if value or time.monotonic() > end:
                return value
            time.sleep(every)

    # --- objects --------------------------------------------------------------------------------
    def namespace(self, prefix: str = "t") -> str:
        name = f"{prefix}-{secrets.token_hex(3)}"
        self.create("/api/v1/namespaces", {"metadata": {"name": name}})
        sa = f"/api/v1/namespaces/{name}/serviceaccounts/default"
        assert self.wait(lambda: self._exists(sa), 30), f"no default ServiceAccount in {name} after 30 s"
        return name

    def await_gone(self, namespace: str, seconds: float = 60.0) -> None:
        """Wait until ``namespace`` (deleted by an earlier test's reset) is gone, so that
        manifests naming it (deploy/'s ``rulesched``) can be applied again."""
        path = f"/api/v1/namespaces/{namespace}"

        def usable() -> bool:
            try:
                return not self.get(path)["metadata"].get("deletionTimestamp")
            except ApiError as e:
                if e.status == 404:
                    return True
                raise

        assert self.wait(usable, seconds), f"namespace {namespace} still terminating after {seconds:.0f} s"

    def _exists(self, path: str) -> bool:
        try:
            self.get(path)
            return True
        except ApiError as e:
            if e.status == 404:
                return False
            raise

    def node(
        self,
        name: str,
        cpu: str = "4",
        memory: str = "16Gi",
        pods: str = "110",
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
        extra: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A Ready node with that capacity (allocatable the same); no kubelet behind it."""
        resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints} if taints else {},
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "testbed"}],
            },
        }
        created = self.create("/api/v1/nodes", body)
        if not created.get("status", {}).get("allocatable"):  # (a server that drops status on create)
            created = self.patch(f"/api/v1/nodes/{name}/status", {"status": body["status"]})
        if created["spec"].get("taints", []) != (taints or []):
            # The admission plugin TaintNodesByCondition taints every new node
            # node.kubernetes.io/not-ready:NoSchedule; the node lifecycle controller lifts it
            # once the kubelet reports Ready. Neither runs here: lift it as that controller would.
            created = self.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints or None}})
        return created

    def pod(
        self, namespace: str, name: str, cpu: str = "500m", scheduler: str = "rulesched", **extra: Any
    ) -> dict[str, Any]:
        body = pod_object(name, cpu=cpu, scheduler=scheduler, **extra)
        body["metadata"]["namespace"] = namespace
        body.pop("status", None)
        return self.create(f"/api/v1/namespaces/{namespace}/pods", body)

    def read_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/namespaces/{namespace}/pods/{name}"))

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.items(f"/api/v1/namespaces/{namespace}/pods")}

    def events(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's events (events.k8s.io/v1, the API kube-scheduler writes)."""
        return self.items(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")

    def mark_running(self, namespace: str, name: str) -> None:
        """What a kubelet would write once the pod's containers are up: Running and Ready."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready")
        ]
        self.patch(
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            {"status": {"phase": "Running", "conditions": conditions, "startTime": now}},
            STRATEGIC,
        )

    def remove_terminating(self, namespace: str) -> list[str]:
        """Delete at once the pods of the namespace being deleted (what their kubelet would do
        when their containers stopped); their names."""
        gone = []
        for p in self.items(f"/api/v1/namespaces/{namespace}/pods"):
            if p["metadata"].get("deletionTimestamp"):
                self.delete(f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}", grace=0)
                gone.append(p["metadata"]["name"])
        return gone

    def apply_crd(self, path: Path | str) -> None:
        """A CustomResourceDefinition (a YAML file) created or updated, and Established."""
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        name = yaml.safe_load(Path(path).read_text())["metadata"]["name"]

        def established() -> bool:
            crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
            return any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []  # (null until the first one)
            )

        assert self.wait(established, 30), f"CRD {name} not Established"

    # --- tools ----------------------------------------------------------------------------------
    def kubectl(
        self, *args: str, input: str | None = None, kubeconfig: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.env["KUBECTL"], "--kubeconfig", kubeconfig or self.kubeconfig, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def token_kubeconfig(self, namespace: str, service_account: str, path: Path, hours: int = 1) -> str:
        """A kubeconfig whose user is the ServiceAccount (a token from the TokenRequest API)."""
        token = self.kubectl("create", "token", service_account, "-n", namespace, f"--duration={hours}h").stdout.strip()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "testbed", "cluster": {"server": self.url, "certificate-authority": self.env["CA_CERT"]}}
            ],
            "users": [{"name": service_account, "user": {"token": token}}],
            "contexts": [
                {"name": "testbed", "context": {"cluster": "testbed", "user": service_account, "namespace": namespace}}
            ],
            "current-context": "testbed",
        }
        path.write_text(json.dumps(config))
        return str(path)

    def restart(self, component: str, kill: bool = False) -> None:
        """Stop one component (SIGTERM, or SIGKILL with ``kill``) and start it again as it was."""
        args = [sys.executable, str(TESTBED / "controlplane.py"), "restart", str(self.dir), component]
        done = subprocess.run(args + (["--kill"] if kill else []), capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr

    def stop(self, component: str, kill: bool = False) -> None:
        """Stop one component, not starting it again (:meth:`restart` does)."""
        pid = int((self.dir / "run" / f"{component}.pid").read_text())
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)

    def compact(self) -> int:
        """Compact etcd's history up to its current revision (through etcd's JSON gateway);
        the revision. A watch or list from an older resourceVersion that reaches etcd then gets
        410 Gone."""
        etcd = urllib3.PoolManager(retries=False)
        head = json.loads(
            etcd.request("POST", self.env["ETCD_URL"] + "/v3/kv/range", body=json.dumps({"key": "AA=="})).data
        )
        revision = int(head["header"]["revision"])
        answer = etcd.request(
            "POST",
            self.env["ETCD_URL"] + "/v3/kv/compaction",
            body=json.dumps({"revision": revision, "physical": True}),
        )
        assert answer.status == 200, answer.data
        return revision

    @contextlib.contextmanager
    def kube_scheduler(
        self, config: dict[str, Any] | None = None, args: tuple[str, ...] = ()
    ) -> Iterator[KubeScheduler]:
        """The real kube-scheduler against this server (see :class:`KubeScheduler`), stopped on exit."""
        scheduler = KubeScheduler(self, config, args)
        self.schedulers.append(scheduler)
        try:
            scheduler.start()
            yield scheduler
        finally:
            scheduler.stop()

    # --- the audit log -------------------------------------------------------------------------
    def audit_mark(self) -> int:
        """Where the audit log ends now: :meth:`audit` reads from there."""
        path = self.env.get("AUDIT_LOG")
        return os.path.getsize(path) if path and os.path.exists(path) else 0

    def audit(self, since: int = 0, user: str | None = None, settle: float = 0.5) -> list[dict[str, Any]]:
        """The audit events (audit.k8s.io/v1 Event, Metadata level) logged after ``since``, of
        ``user`` if given: ``verb``, ``objectRef`` (resource, subresource, namespace, name),
        ``responseStatus.code``, ``userAgent``, ``requestReceivedTimestamp``... ``settle``
        seconds first, for the last answers' events to be written."""
        path = self.env.get("AUDIT_LOG")
        assert path, "the test bed runs without an audit log (RULESCHED_TESTBED_AUDIT=0)"
        time.sleep(settle)
        with open(path, "rb") as f:
            f.seek(since)
            events = [json.loads(line) for line in f.read().splitlines() if line.strip()]
        for e in events:  # (none for non-resource URLs such as /version)
            e.setdefault("objectRef", {})
            e.setdefault("responseStatus", {})
        return [e for e in events if user is None or e.get("user", {}).get("username") == user]

    # --- between tests --------------------------------------------------------------------------
    def reset(self) -> None:
        """Remove what a test made (see the module's docstring)."""
        for scheduler in self.schedulers:
            scheduler.stop()
        self.schedulers.clear()
        for ns in self.items("/api/v1/namespaces"):
            name = ns["metadata"]["name"]
            for p in self.items(f"/api/v1/namespaces/{name}/pods"):
                if name not in SYSTEM_NAMESPACES or name == "default":
                    self.delete(f"/api/v1/namespaces/{name}/pods/{p['metadata']['name']}", grace=0)
            if name not in SYSTEM_NAMESPACES and not ns["metadata"].get("deletionTimestamp"):
                self.delete(f"/api/v1/namespaces/{name}")
        for lease in self.items("/apis/coordination.k8s.io/v1/namespaces/default/leases"):
            self.delete(f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease['metadata']['name']}")
        for pc in self.items("/apis/scheduling.k8s.io/v1/priorityclasses"):
            if not pc["metadata"]["name"].startswith("system-"):
                self.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")
        self.request("DELETE", "/api/v1/nodes")  # (deletecollection)


class KubeScheduler:
    """The real kube-scheduler (``KUBE_SCHEDULER`` of DIR/env) as the identity
    system:kube-scheduler, with a KubeSchedulerConfiguration: ``config`` merged over one with
    leader election off and the test bed's kubeconfig (``profiles``, ``extenders``, ...). Its
    log (``-v`` from ``args``, default ``--v=2``) is ``log``; ``metrics()`` reads its
    /metrics; ``pid`` for CPU accounting."""

    def __init__(self, kube: Kube, config: dict[str, Any] | None, args: tuple[str, ...]) -> None:
        self.kube = kube
        self.dir = Path(tempfile.mkdtemp(prefix="kube-scheduler-", dir=kube.dir))
        self.port = free_port()
        settings: dict[str, Any] = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kube.env["KUBE_SCHEDULER_KUBECONFIG"]},
            "leaderElection": {"leaderElect": False},
        }
        settings.update(config or {})
        (self.dir / "config.yaml").write_text(json.dumps(settings))
        self.args = args if any(a.startswith("--v=") or a == "-v" for a in args) else (*args, "--v=2")
        self.log = self.dir / "kube-scheduler.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> None:
        argv = [
            self.kube.env["KUBE_SCHEDULER"],
            f"--config={self.dir / 'config.yaml'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.port}",
            # serving with the test bed's certificate for 127.0.0.1 (kube-apiserver's), not a self-signed one
            f"--tls-cert-file={self.kube.dir / 'pki' / 'apiserver.crt'}",
            f"--tls-private-key-file={self.kube.dir / 'pki' / 'apiserver.key'}",
            f"--authentication-kubeconfig={self.kube.env['KUBE_SCHEDULER_KUBECONFIG']}",
            f"--authorization-kubeconfig={self.kube.env['KUBE_SCHEDULER_KUBECONFIG']}",
            # /metrics without a token, for the tests and benchmarks
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            f"--feature-gates={self.kube.env['FEATURE_GATES']}",
            *self.args,
        ]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        ready = self.kube.wait(lambda: self._healthy() or self.process.poll() is not None, 60)  # type: ignore[union-attr]
        if self.process.poll() is not None or not ready:
            raise AssertionError(f"kube-scheduler did not start; its log ends:\n{self.tail()}")

    def _healthy(self) -> bool:
        return self.get("/readyz")[0] == 200

    def get(self, path: str) -> tuple[int, str]:
        pool = urllib3.PoolManager(ca_certs=self.kube.env["CA_CERT"], retries=False, timeout=5)
        try:
            answer = pool.request("GET", f"https://127.0.0.1:{self.port}{path}")
        except urllib3.exceptions.HTTPError:
            return 0, ""
        return answer.status, answer.data.decode(errors="replace")

    def metrics(self) -> str:
        status, text = self.get("/metrics")
        assert status == 200, text
        return text

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        stop_process(self.process, 10)


class Running:
    """``rulesched run`` in this process (a Loop on a thread) against the test bed, stopped on
    exit; ``settings`` are RunSettings' (kubeconfig: the admin's unless given)."""

    def __init__(self, kube: Kube, **settings: Any) -> None:
        from rulesched.run.loop import Loop  # (not needed by the fixtures themselves)
        from rulesched.run.settings import RunSettings  # (nor this)

        settings.setdefault("kubeconfig", kube.kubeconfig)
        settings.setdefault("grace_seconds", 2)
        self.loop = Loop(RunSettings(**settings))
        self.thread = threading.Thread(target=self.loop.run, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        return self.loop

    def __exit__(self, *exc: object) -> None:
        self.loop.stop.set()
        self.loop.scheduler.queue.wake()
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "rulesched run did not stop within 15 s"


def stop_process(process: subprocess.Popen[bytes] | None, grace: float) -> None:
    """Terminate ``process`` if it still runs; kill it when it has not left after ``grace`` s."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def control_plane(directory: Path) -> Iterator[Kube]:
    """``testbed/up DIR`` … ``testbed/down DIR``."""
    up = subprocess.run([str(TESTBED / "up"), str(directory)], capture_output=True, text=True, timeout=300)
    if up.returncode != 0:
        raise RuntimeError(f"testbed/up failed ({up.returncode}):\n{up.stderr}")
    # Every process started from here on carries the test bed's directory in its environment:
    # testbed/'s watchdog stops them with the test bed if this process dies without its teardown.
    before = os.environ.get(OWNED)
    os.environ[OWNED] = str(directory.resolve())
    try:
        yield Kube(directory)
    finally:
        subprocess.run([str(TESTBED / "down"), str(directory)], capture_output=True, timeout=120)
        if before is None:
            os.environ.pop(OWNED, None)
        else:
            os.environ[OWNED] = before
