"""kube-scheduler 1.37 beside ``rulesched run`` (rules/default.rules), on the same machine and the
same real API server: testbed/'s kube-apiserver, etcd and kube-controller-manager, fresh for each
run (``testbed/build`` first).

    python benchmarks/bench_kube_scheduler.py speed                   # every workload, both schedulers
    python benchmarks/bench_kube_scheduler.py speed --workload basic-5000 --repeat 3
    python benchmarks/bench_kube_scheduler.py fidelity                # mixed and preemption clusters
    python benchmarks/bench_kube_scheduler.py fidelity --case mixed --nodes 100 --pods 60   # CI-sized
    python benchmarks/bench_kube_scheduler.py all --json result.json  # both; the figures as JSON too

**speed** — for each workload, kube-scheduler then ``rulesched run`` (alternated with
``--repeat``), each on a fresh test bed holding the workload's nodes and running pods (created
bound, as upstream's init pods end up), started and ready before the measured pods are created
(16 client threads, as fast as the server takes them). Printed per scheduler: pods/s from the
first binding to the last (as a watch on the pods sees them), p50/p99 creation-to-binding, CPU
seconds per pod of the scheduler's processes (rulesched's binding process included) and of
kube-apiserver and etcd, the requests kube-apiserver served per pod (its own
apiserver_request_total by verb and resource), the scheduler's attempts and queue moves (its
scheduler_schedule_attempts_total and scheduler_queue_incoming_pods_total), rulesched's scheduling thread's CPU per attempt and its time
waiting for a core (its main thread's schedstat: the cycles' own cost, apart from its binding,
watching and status-writing threads), and the ratio
rulesched / kube-scheduler of pods/s (>1: rulesched faster) and of CPU per pod (<1: rulesched
cheaper). ``--logs DIR`` keeps each scheduler's log and its /metrics at the end; ``--rulesched-flag`` passes a
flag to ``rulesched run`` (a variant, e.g. ``--rulesched-flag=--evict-victims=all``); ``--pprof DIR``
keeps kube-apiserver's CPU profile of the first ``--pprof-seconds`` of each measured phase. kube-scheduler runs as scheduler_perf runs
it: client QPS and burst 5000, default profile, ``percentageOfNodesToScore`` adaptive (both),
logging at -v=1; rulesched with its defaults. Pods of evictions and preemptions are removed at
once by a kubelet stand-in (no kubelets here). Workloads (benchmarks/gen_cluster.py):
``basic-1000`` and ``basic-5000`` (scheduler_perf's SchedulingBasic: 1000 or 5000 nodes, 1000
running pods, 3000 or 5000 measured), ``mixed`` (1000 nodes of four shapes, taints, cordons,
200 Deployments' pods with tolerations, selectors, affinity, spreading; 1000 running, 3000
measured), ``preemption`` (500 nodes full of pods of priority 0-3, some under PDBs; 500 measured
pods of priority 0-4 that need room: many preempt).

**fidelity** — the same generated cluster twice on fresh test beds, once with kube-scheduler
(at -v=10, which logs every node's score for every pod) and once with ``rulesched run``, both
scoring every feasible node (``percentageOfNodesToScore: 100``). The pending pods are created
one at a time, each once the previous one settled (bound, or unschedulable, or its victims
gone and it bound), so both see the same queue. For every pod whose best node under
kube-scheduler's own scores is unique, the nodes must be equal; on preemption, the victims too.
Every difference is listed with kube-scheduler's per-plugin scores on both nodes, and the first
difference is marked: later ones may follow from it (the clusters differ from there). Cases:
``mixed`` (gen_cluster's mixed cluster) and ``preemption`` (its preemption cluster).

No assertions; figures only. The machine's other load moves wall-clock figures: compare CPU
seconds per pod, and alternated repeats.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from gen_cluster import generate  # noqa: E402

from tests.realk8s import ApiError, Kube, KubeScheduler, control_plane, free_port, unavailable_reason  # noqa: E402

NS = "default"
THREADS = 16


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # gen_cluster's workload
    nodes: int
    running: int
    pending: int


WORKLOADS = {
    w.name: w
    for w in (
        Workload("basic-1000", "basic", 1000, 1000, 3000),
        Workload("basic-5000", "basic", 5000, 1000, 5000),
        Workload("mixed", "mixed", 1000, 1000, 3000),
        Workload("preemption", "preemption", 500, 2500, 500),
    )
}


# --- the cluster, in the real API's terms ------------------------------------------------------


def api_objects(cluster: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """gen_cluster's List as the real API takes it: ``spec.priority`` as a PriorityClass
    (Priority admission refuses a pod giving the integer itself), no uid or status on pods."""
    out: dict[str, list[dict[str, Any]]] = {"nodes": [], "running": [], "pending": [], "pdbs": [], "classes": []}
    priorities = set()
    for obj in cluster["items"]:
        kind = obj["kind"]
        if kind == "Node":
            out["nodes"].append(obj)
        elif kind == "PodDisruptionBudget":
            out["pdbs"].append(obj)
        elif kind == "Pod":
            spec = obj["spec"]
            if "priority" in spec:
                value = spec.pop("priority")
                priorities.add(value)
                spec["priorityClassName"] = f"bench-priority-{value}"
            obj["metadata"].pop("uid", None)
            obj.pop("status", None)
            out["running" if spec.get("nodeName") else "pending"].append(obj)
    out["classes"] = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"bench-priority-{v}"},
         "value": v}
        for v in sorted(priorities)
    ]  # fmt: skip
    return out


def parallel(fn: Callable[[Any], Any], items: list[Any], threads: int = THREADS) -> None:
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(fn, items):
            pass


def build(kube: Kube, objects: dict[str, list[dict[str, Any]]], ready_pods: bool) -> None:
    """Nodes (untainted of the admission plugin's not-ready taint, as the node lifecycle
    controller would for a Ready node), PriorityClasses, PDBs and the running pods."""

    def add_node(obj: dict[str, Any]) -> None:
        body = dict(obj)
        body["metadata"] = {k: v for k, v in obj["metadata"].items() if k != "uid"}
        status = dict(obj["status"])
        status.setdefault("conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}])
        body["status"] = status
        created = kube.create("/api/v1/nodes", body)
        if created["spec"].get("taints", []) != obj["spec"].get("taints", []):
            kube.patch(f"/api/v1/nodes/{obj['metadata']['name']}", {"spec": {"taints": obj["spec"].get("taints")}})

    parallel(add_node, objects["nodes"])
    for pc in objects["classes"]:
        kube.create("/apis/scheduling.k8s.io/v1/priorityclasses", pc)
    for pdb in objects["pdbs"]:
        kube.create(f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", pdb)
    parallel(lambda p: kube.create(f"/api/v1/namespaces/{NS}/pods", p), objects["running"])
    if ready_pods:  # the disruption controller counts only Ready pods as healthy
        parallel(lambda p: kube.mark_running(NS, p["metadata"]["name"]), objects["running"])


# --- watching the pods ----------------------------------------------------------------------------


@dataclass
class Seen:
    bound: dict[str, tuple[float, str]] = field(default_factory=dict)  # name -> (when, node)
    unschedulable: dict[str, float] = field(default_factory=dict)  # name -> last time marked so
    deleted: dict[str, float] = field(default_factory=dict)
    nominated: dict[str, str] = field(default_factory=dict)
    last_change: float = 0.0


class PodWatch(threading.Thread):
    """A watch on the namespace's pods (its own connection), recording bindings, unschedulable
    marks, nominations and deletions as they arrive; and the kubelet stand-in: a pod given a
    deletionTimestamp (an eviction, a preemption's deletion) is deleted at once."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(daemon=True)
        self.kube = kube
        self.seen = Seen()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        pki = kube.dir / "pki"
        self.pool = urllib3.PoolManager(
            ca_certs=str(pki / "ca.crt"), cert_file=str(pki / "admin.crt"), key_file=str(pki / "admin.key"),
            retries=False,
        )  # fmt: skip
        self.version = kube.get(f"/api/v1/namespaces/{NS}/pods", limit=1)["metadata"]["resourceVersion"]
        self.killer = concurrent.futures.ThreadPoolExecutor(4)

    def run(self) -> None:
        while not self.stopping.is_set():
            url = (
                f"{self.kube.url}/api/v1/namespaces/{NS}/pods?watch=1&allowWatchBookmarks=true"
                f"&resourceVersion={self.version}&timeoutSeconds=600"
            )
            try:
                answer = self.pool.request(
                    "GET", url, preload_content=False, timeout=urllib3.Timeout(connect=5, read=None)
                )
                for line in answer:
                    if self.stopping.is_set():
                        return
                    self._event(json.loads(line))
            except (urllib3.exceptions.HTTPError, ValueError, OSError):
                time.sleep(0.2)

    def _event(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        meta = obj.get("metadata", {})
        if event["type"] == "ERROR":
            raise ValueError(obj)
        self.version = meta.get("resourceVersion", self.version)
        if event["type"] == "BOOKMARK":
            return
        name, now = meta["name"], time.monotonic()
        with self.lock:
            seen = self.seen
            if event["type"] == "DELETED":
                seen.deleted.setdefault(name, now)
                seen.last_change = now
                return
            node = obj["spec"].get("nodeName")
            if node and name not in seen.bound:
                seen.bound[name] = (now, node)
                seen.last_change = now
            nominated = obj.get("status", {}).get("nominatedNodeName")
            if nominated and seen.nominated.get(name) != nominated:
                seen.nominated[name] = nominated
                seen.last_change = now
            for c in obj.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c["status"] == "False" and not node:
                    if name not in seen.unschedulable:
                        seen.last_change = now
                    seen.unschedulable[name] = now
        if meta.get("deletionTimestamp"):
            self.killer.submit(self.kube.delete, f"/api/v1/namespaces/{NS}/pods/{name}", 0)

    def stop(self) -> None:
        self.stopping.set()
        self.killer.shutdown(wait=False)


def settled(watch: PodWatch, names: list[str], quiet: float) -> bool:
    """Every pod bound, deleted or marked unschedulable, and nothing new for ``quiet`` seconds."""
    with watch.lock:
        s = watch.seen
        done = all(n in s.bound or n in s.deleted or n in s.unschedulable for n in names)
        return done and time.monotonic() - s.last_change > quiet


# --- the schedulers -----------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User and system CPU of ``pid`` and its descendants still running."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += cpu_seconds(int(child))
    except OSError:
        pass
    return total


def main_thread_seconds(pid: int) -> tuple[float, float]:
    """Seconds the main thread of ``pid`` ran on a core, and waited runnable for one
    (/proc/PID/task/PID/schedstat). rulesched schedules on its main thread (its other threads
    bind, watch and write statuses), so this is the scheduling cycles' own CPU; the waiting is
    the machine's CPU contention (the API server, etcd, other jobs), not the GIL (a thread
    waiting for the GIL sleeps)."""
    try:
        ran, waited, _ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(ran) / 1e9, int(waited) / 1e9


class Scheduler:
    name = ""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pid(self) -> int: ...  # type: ignore[empty-body]
    def metrics(self) -> str: ...  # type: ignore[empty-body]


ATTEMPTS = re.compile(r'^scheduler_schedule_attempts_total\{[^}]*result="(?P<result>\w+)"[^}]*\} (?P<value>\S+)$', re.M)


def attempts(scheduler: Scheduler) -> dict[str, int]:
    """The scheduler's own count of its scheduling attempts by result (both export kube-scheduler's
    scheduler_schedule_attempts_total)."""
    try:
        text = scheduler.metrics()
    except (AssertionError, urllib3.exceptions.HTTPError):
        return {}
    found: dict[str, int] = {}
    for m in ATTEMPTS.finditer(text):
        found[m["result"]] = found.get(m["result"], 0) + int(float(m["value"]))
    for m in INCOMING.finditer(text):  # (why pods went back to the queue)
        labels = dict(LABEL.findall(m["labels"]))
        key = f"{labels.get('queue', '')}<-{labels.get('event', '')}"
        found[key] = found.get(key, 0) + int(float(m["value"]))
    return found


INCOMING = re.compile(r"^scheduler_queue_incoming_pods_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


class Upstream(Scheduler):
    name = "kube-scheduler"

    def __init__(self, kube: Kube, percentage: int | None, verbosity: int) -> None:
        connection = {"kubeconfig": kube.kubeconfig, "qps": 5000, "burst": 5000}  # as scheduler_perf
        config: dict[str, Any] = {"clientConnection": connection}
        if percentage is not None:
            config["percentageOfNodesToScore"] = percentage
        self.scheduler = KubeScheduler(kube, config, (f"--v={verbosity}",))

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self.scheduler.stop()

    def pid(self) -> int:
        return self.scheduler.pid

    def metrics(self) -> str:
        return self.scheduler.metrics()

    @property
    def log(self) -> Path:
        return self.scheduler.log


class Rulesched(Scheduler):
    name = "rulesched"

    def __init__(self, kube: Kube, percentage: int | None, workdir: Path, flags: tuple[str, ...] = ()) -> None:
        self.kube = kube
        self.port = free_port()
        self.log = workdir / "rulesched.log"
        self.args = [
            sys.executable, "-m", "rulesched.cli", "run", "--kubeconfig", kube.kubeconfig,
            "--scheduler-name", "default-scheduler", "--metrics-bind-address", f"127.0.0.1:{self.port}", *flags,
        ]  # fmt: skip
        if percentage is not None:
            config = workdir / "rulesched-config.yaml"
            config.write_text(json.dumps({"percentage_of_nodes_to_score": percentage}))
            self.args += ["--config", str(config)]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(self.args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        http = urllib3.PoolManager(retries=False)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError("rulesched run exited:\n" + self.log.read_text()[-3000:])
            try:
                if http.request("GET", f"http://127.0.0.1:{self.port}/readyz", timeout=2).status == 200:
                    return
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("rulesched run not ready after 120 s:\n" + self.log.read_text()[-3000:])

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def metrics(self) -> str:
        answer = urllib3.PoolManager(retries=False).request("GET", f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        return str(answer.data.decode())


@contextmanager
def testbed() -> Iterator[Kube]:
    """A fresh control plane without an audit log (its writes would be API server CPU that is
    no scheduler's)."""
    os.environ["RULESCHED_TESTBED_AUDIT"] = "0"
    with tempfile.TemporaryDirectory(prefix="bench-testbed-") as d, control_plane(Path(d)) as kube:
        yield kube


def component_pid(kube: Kube, component: str) -> int:
    return int((kube.dir / "run" / f"{component}.pid").read_text())


REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def requests_served(kube: Kube) -> dict[str, int]:
    """kube-apiserver's own count of the requests it served (apiserver_request_total), by
    ``VERB resource[/subresource]``: the difference over a run, divided by its pods, is what
    each pod cost in requests (the benchmark's own creations, watch and deletions are alike
    for both schedulers)."""
    text = kube._pool.request("GET", kube.url + "/metrics", headers={"Accept": "text/plain"}).data.decode()
    counts: dict[str, int] = {}
    for m in REQUEST_TOTAL.finditer(text):
        labels = dict(LABEL.findall(m["labels"]))
        what = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
        if labels.get("group"):
            what = f"{labels['group']}/{what}"
        key = f"{labels.get('verb', '')} {what}"
        counts[key] = counts.get(key, 0) + int(float(m["value"]))
    return counts


# --- speed --------------------------------------------------------------------------------------


class Profile(threading.Thread):
    """kube-apiserver's CPU profile (its /debug/pprof/profile, on by default) over ``seconds``
    from now, written to ``path``: ``go tool pprof -top PATH`` says where the API server's CPU
    went while the measured pods were created and placed."""

    def __init__(self, kube: Kube, seconds: int, path: Path) -> None:
        super().__init__(daemon=True)
        self.kube, self.seconds, self.path = kube, seconds, path
        self.started = time.monotonic()

    def run(self) -> None:
        url = f"{self.kube.url}/debug/pprof/profile?seconds={self.seconds}"
        answer = self.kube._pool.request("GET", url, timeout=urllib3.Timeout(connect=5, read=self.seconds + 60))
        if answer.status == 200:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_bytes(answer.data)
        else:
            print(f"  kube-apiserver's profile: {answer.status} {answer.data[:200]!r}", file=sys.stderr)


def speed_run(
    workload: Workload,
    which: str,
    seed: int,
    logs: Path | None = None,
    flags: tuple[str, ...] = (),
    pprof: tuple[Path, int] | None = None,
) -> dict[str, Any]:
    objects = api_objects(generate(workload.nodes, workload.running, workload.pending, workload.kind, seed))
    with testbed() as kube, tempfile.TemporaryDirectory(prefix="bench-") as work:
        t0 = time.monotonic()
        build(kube, objects, ready_pods=workload.kind == "preemption")
        built = time.monotonic() - t0
        scheduler: Scheduler = (
            Upstream(kube, None, 1) if which == "kube-scheduler" else Rulesched(kube, None, Path(work), flags)
        )
        scheduler.start()
        try:
            watch = PodWatch(kube)
            watch.start()
            pids = {"scheduler": scheduler.pid(), "kube-apiserver": component_pid(kube, "kube-apiserver"),
                    "etcd": component_pid(kube, "etcd")}  # fmt: skip
            cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
            main0 = main_thread_seconds(pids["scheduler"])
            requests0 = requests_served(kube)
            names = [p["metadata"]["name"] for p in objects["pending"]]
            created: dict[str, float] = {}

            def create(pod: dict[str, Any]) -> None:
                created[pod["metadata"]["name"]] = time.monotonic()
                kube.create(f"/api/v1/namespaces/{NS}/pods", pod)

            profile = None
            if pprof is not None:  # (DIR, seconds)
                name = f"{workload.name}-{which}-{time.strftime('%H%M%S')}.kube-apiserver.pprof"
                profile = Profile(kube, pprof[1], pprof[0] / name)
                profile.start()
            start = time.monotonic()
            parallel(create, objects["pending"])
            created_in = time.monotonic() - start
            end = start + 900
            while time.monotonic() < end and not settled(watch, names, quiet=3.0):
                time.sleep(0.2)
            cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
            main1 = main_thread_seconds(pids["scheduler"])
            requests1 = requests_served(kube)
            tried = attempts(scheduler)
            if logs is not None:  # (and its metrics as the run left them)
                logs.mkdir(parents=True, exist_ok=True)
                try:
                    text = scheduler.metrics()
                except (AssertionError, urllib3.exceptions.HTTPError):
                    text = ""
                (logs / f"{workload.name}-{which}-{time.strftime('%H%M%S')}.metrics").write_text(text)
            watch.stop()
            if profile is not None:
                profile.join()
        finally:
            scheduler.stop()
            if logs is not None:  # (kept: the test bed's directory goes)
                logs.mkdir(parents=True, exist_ok=True)
                log = scheduler.log if isinstance(scheduler, (Upstream, Rulesched)) else None
                if log is not None and log.exists():
                    (logs / f"{workload.name}-{which}-{time.strftime('%H%M%S')}.log").write_bytes(log.read_bytes())
    bound = {n: watch.seen.bound[n] for n in names if n in watch.seen.bound}
    times = sorted(t for t, _ in bound.values())
    span = times[-1] - times[0] if len(times) > 1 else float("nan")
    latencies = sorted(bound[n][0] - created[n] for n in bound)
    count = max(1, len(bound))
    return {
        "workload": workload.name, "scheduler": which, "pods": len(names), "bound": len(bound),
        "flags": list(flags) if which == "rulesched" else [],
        "unschedulable": sum(1 for n in names if n not in bound and n in watch.seen.unschedulable),
        "deleted": len(watch.seen.deleted), "pods_per_second": len(bound) / span if span == span and span > 0 else None,
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, len(latencies) * 99 // 100)] if latencies else None,
        "cpu_ms_per_pod": {k: 1000 * (cpu1[k] - cpu0[k]) / count for k in pids},
        "attempts": tried,
        # rulesched's scheduling thread per attempt (kube-scheduler's main thread is not its
        # scheduling loop: left out): CPU, and time runnable but waiting for a core
        "scheduling_thread_ms_per_attempt": (
            {"cpu": 1000 * (main1[0] - main0[0]) / n_tried, "waiting_for_a_core": 1000 * (main1[1] - main0[1]) / n_tried}
            if which == "rulesched" and (n_tried := sum(v for k, v in tried.items() if "<-" not in k))
            else None
        ),
        "requests": {k: v - requests0.get(k, 0) for k, v in sorted(requests1.items()) if v != requests0.get(k, 0)},
        "build_seconds": round(built, 1), "creation_seconds": round(created_in, 1),
        "first_binding_after_seconds": round(times[0] - start, 2) if times else None,
        "last_binding_after_seconds": round(times[-1] - start, 2) if times else None,
        # the profile's window: pods created and bound in it (its samples per pod are per these)
        "profile": None if profile is None else {
            "path": str(profile.path), "seconds": profile.seconds,
            "created": sum(1 for t in created.values() if t - profile.started < profile.seconds),
            "bound": sum(1 for t, _ in bound.values() if t - profile.started < profile.seconds),
        },
    }  # fmt: skip


def speed(args: argparse.Namespace) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for name in args.workload or list(WORKLOADS):
        for r in range(args.repeat):
            order = ("kube-scheduler", "rulesched") if r % 2 == 0 else ("rulesched", "kube-scheduler")
            for which in [w for w in order if w in (args.scheduler or order)]:
                pprof = (args.pprof, args.pprof_seconds) if args.pprof else None
                flags = tuple(args.rulesched_flag or ())
                result = speed_run(WORKLOADS[name], which, args.seed, args.logs, flags, pprof)
                runs.append(result)
                print(format_run(result), file=sys.stderr, flush=True)
    table = []
    for name in args.workload or list(WORKLOADS):
        row: dict[str, Any] = {"workload": name}
        for which in ("kube-scheduler", "rulesched"):
            mine = [r for r in runs if r["workload"] == name and r["scheduler"] == which]
            row[which] = {
                "pods_per_second": median([r["pods_per_second"] for r in mine]),
                "scheduler_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["scheduler"] for r in mine]),
                "apiserver_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["kube-apiserver"] for r in mine]),
                "etcd_cpu_ms_per_pod": median([r["cpu_ms_per_pod"]["etcd"] for r in mine]),
                "p99_ms": median([r["p99_ms"] for r in mine]),
                "bound": median([r["bound"] for r in mine]),
            }
        ks, rs = row["kube-scheduler"], row["rulesched"]
        row["ratio_pods_per_second"] = ratio(rs["pods_per_second"], ks["pods_per_second"])
        row["ratio_scheduler_cpu_per_pod"] = ratio(rs["scheduler_cpu_ms_per_pod"], ks["scheduler_cpu_ms_per_pod"])
        row["ratio_apiserver_cpu_per_pod"] = ratio(rs["apiserver_cpu_ms_per_pod"], ks["apiserver_cpu_ms_per_pod"])
        table.append(row)
    print(format_speed(table))
    return {"runs": runs, "table": table, "repeat": args.repeat, "load": os.getloadavg()}


def median(values: list[Any]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def format_run(r: dict[str, Any]) -> str:
    pps = f"{r['pods_per_second']:.0f}" if r["pods_per_second"] else "-"
    cpu = r["cpu_ms_per_pod"]
    flags = f" ({' '.join(r['flags'])})" if r.get("flags") else ""
    return (f"  {r['workload']:<11} {r['scheduler']:<14}{flags} {r['bound']}/{r['pods']} bound, {pps} pods/s, "
            f"p99 {r['p99_ms'] or 0:.0f} ms; CPU ms/pod: scheduler {cpu['scheduler']:.2f}, "
            f"kube-apiserver {cpu['kube-apiserver']:.2f}, etcd {cpu['etcd']:.2f}; created in {r['creation_seconds']} s, "
            f"bindings from {r['first_binding_after_seconds']} s to {r['last_binding_after_seconds']} s\n"
            f"    attempts: {r['attempts']}; requests per pod: " + ", ".join(f"{k} {v / r['pods']:.2f}" for k, v in r["requests"].items())
            + ("" if not (t := r.get("scheduling_thread_ms_per_attempt")) else
               f"\n    scheduling thread per attempt: {t['cpu']:.2f} ms CPU, {t['waiting_for_a_core']:.2f} ms waiting for a core"))  # fmt: skip


def format_speed(table: list[dict[str, Any]]) -> str:
    def f(v: float | None, digits: int = 0) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    lines = [
        "workload     | kube-scheduler pods/s | rulesched pods/s | ratio | sched CPU ms/pod ks / rs (ratio) | apiserver CPU ms/pod ks / rs",
        "-------------|-----------------------|------------------|-------|----------------------------------|------------------------------",
    ]
    for row in table:
        ks, rs = row["kube-scheduler"], row["rulesched"]
        lines.append(
            f"{row['workload']:<12} | {f(ks['pods_per_second']):>21} | {f(rs['pods_per_second']):>16} | "
            f"{f(row['ratio_pods_per_second'], 2):>5} | {f(ks['scheduler_cpu_ms_per_pod'], 2):>8} / "
            f"{f(rs['scheduler_cpu_ms_per_pod'], 2):<7} ({f(row['ratio_scheduler_cpu_per_pod'], 2)}) | "
            f"{f(ks['apiserver_cpu_ms_per_pod'], 2)} / {f(rs['apiserver_cpu_ms_per_pod'], 2)}"
        )
    return "\n".join(lines)


# --- fidelity -----------------------------------------------------------------------------------

FINAL_SCORE = re.compile(
    r'"Calculated node\'s final score for pod" pod="(?P<pod>[^"]+)" node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)
PLUGIN_SCORE = re.compile(
    r'"Plugin scored node for pod" pod="(?P<pod>[^"]+)" plugin="(?P<plugin>[^"]+)" node="(?P<node>[^"]+)" score=(?P<score>-?\d+)'
)


@dataclass
class Outcome:
    node: str | None
    victims: tuple[str, ...]
    unschedulable: bool


def one_at_a_time(kube: Kube, watch: PodWatch, pending: list[dict[str, Any]], timeout: float) -> dict[str, Outcome]:
    """Create each pod once the previous one settled: bound (its victims gone first), or
    unschedulable and not nominated; its victims are the pods deleted meanwhile."""
    out = {}
    for pod in pending:
        name = pod["metadata"]["name"]
        with watch.lock:
            deleted_before = set(watch.seen.deleted)
        kube.create(f"/api/v1/namespaces/{NS}/pods", pod)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with watch.lock:
                s = watch.seen
                if name in s.bound:
                    break
                quiet = time.monotonic() - s.last_change > 1.0
                if name in s.unschedulable and name not in s.nominated and quiet:
                    break
            time.sleep(0.02)
        with watch.lock:
            s = watch.seen
            victims = tuple(sorted(set(s.deleted) - deleted_before))
            out[name] = Outcome(s.bound[name][1] if name in s.bound else None, victims, name not in s.bound)
    return out


def fidelity_run(
    objects: dict[str, list[dict[str, Any]]], which: str, preemption: bool
) -> tuple[dict[str, Outcome], dict[str, str], str]:
    """The pods' outcomes, the running pods' start times (preemption's last criterion reads
    them), and kube-scheduler's log."""
    with testbed() as kube, tempfile.TemporaryDirectory(prefix="bench-") as work:
        build(kube, objects, ready_pods=preemption)
        started = {
            p["metadata"]["name"]: p["status"]["startTime"]
            for p in kube.items(f"/api/v1/namespaces/{NS}/pods")
            if p.get("status", {}).get("startTime")
        }
        scheduler: Scheduler = (
            Upstream(kube, 100, 10) if which == "kube-scheduler" else Rulesched(kube, 100, Path(work))
        )
        scheduler.start()
        try:
            watch = PodWatch(kube)
            watch.start()
            outcomes = one_at_a_time(kube, watch, objects["pending"], timeout=60)
            watch.stop()
        finally:
            scheduler.stop()
        log = ""
        if isinstance(scheduler, Upstream):
            log = scheduler.log.read_text(errors="replace")
    return outcomes, started, log


def scores_from_log(log: str) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, dict[str, int]]]]:
    """kube-scheduler's -v=10 log: pod -> node -> final score; pod -> node -> plugin -> score
    (a pod's last cycle's, as a retried pod logs again)."""
    finals: dict[str, dict[str, int]] = {}
    plugins: dict[str, dict[str, dict[str, int]]] = {}
    for line in log.splitlines():
        if "final score" in line:
            m = FINAL_SCORE.search(line)
            if m:
                pod = m["pod"].split("/", 1)[-1]
                if m["node"] in finals.get(pod, {}):
                    finals[pod] = {}  # a new cycle of the same pod
                finals.setdefault(pod, {})[m["node"]] = int(m["score"])
        elif "Plugin scored node" in line:
            m = PLUGIN_SCORE.search(line)
            if m:
                pod = m["pod"].split("/", 1)[-1]
                plugins.setdefault(pod, {}).setdefault(m["node"], {})[m["plugin"]] = int(m["score"])
    return finals, plugins


def fidelity_case(case: str, nodes: int, pods: int, seed: int) -> dict[str, Any]:
    kind = "preemption" if case == "preemption" else "mixed"
    running = nodes * (4 if kind == "preemption" else 2)
    cluster = generate(nodes, running, pods, kind, seed)
    results = {}
    log = ""
    start_times: dict[str, str] = {}
    for which in ("kube-scheduler", "rulesched"):
        objects = api_objects(json.loads(json.dumps(cluster)))
        t0 = time.monotonic()
        outcomes, started, text = fidelity_run(objects, which, kind == "preemption")
        start_times = started if which == "kube-scheduler" else start_times
        results[which] = outcomes
        log = text or log
        print(f"  fidelity {case}: {which} done in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    finals, plugins = scores_from_log(log)
    ks, rs = results["kube-scheduler"], results["rulesched"]
    objects = api_objects(json.loads(json.dumps(cluster)))
    t0 = time.monotonic()
    replayed = replay_all(objects, ks, start_times)
    print(f"  fidelity {case}: {len(replayed)} pods replayed on kube-scheduler's states in {time.monotonic() - t0:.0f} s",
          file=sys.stderr, flush=True)  # fmt: skip
    sequential = {"compared": 0, "agreed": 0}
    same_state = {"compared": 0, "agreed": 0, "ties_compared": 0, "ties_agreed": 0, "preemption_ties": 0}
    differences = []
    for name, upstream in ks.items():
        scores = finals.get(name, {})
        top = max(scores.values()) if scores else None
        tied = sorted(n for n, v in scores.items() if v == top) if scores else []
        unique = len(tied) <= 1
        mine = rs.get(name)
        if unique:
            sequential["compared"] += 1
            if mine is not None and mine.node == upstream.node and mine.victims == upstream.victims:
                sequential["agreed"] += 1
        replay = replayed.get(name, {})
        if "error" in replay:
            differences.append({"pod": name, "error": replay["error"]})
            continue
        if upstream.victims:  # a preemption: the same node nominated, the same victims
            ok = replay.get("nominated") == upstream.node and replay.get("victims") == list(upstream.victims)
        elif upstream.node is None:  # unschedulable, nothing to preempt
            ok = not replay.get("best") and not replay.get("nominated")
        elif unique:
            ok = replay.get("best") == [upstream.node]
        else:  # a tie: the same nodes tie for the best total
            same_state["ties_compared"] += 1
            ok = sorted(replay.get("best") or []) == tied
            same_state["ties_agreed"] += ok
        if not ok and upstream.victims and preemption_tie(objects, upstream.victims, replay.get("victims") or []):
            # kube-scheduler's own order cannot decide between these candidates (see preemption_tie)
            same_state["preemption_ties"] += 1
            continue
        if unique or upstream.victims or upstream.node is None:
            same_state["compared"] += 1
            same_state["agreed"] += ok
        if not ok:
            nodes_ = sorted({n for n in [upstream.node, *(replay.get("best") or [])] if n})
            differences.append({
                "pod": name,
                "kube_scheduler": {"node": upstream.node, "victims": list(upstream.victims), "tied": tied},
                "rulesched_on_the_same_state": {k: replay.get(k) for k in ("best", "nominated", "victims")},
                "kube_scheduler_scores": {n: {"total": scores.get(n), **plugins.get(name, {}).get(n, {})} for n in nodes_},
                "rulesched_scores": {n: (replay.get("scores") or {}).get(n) for n in nodes_},
            })  # fmt: skip
    return {
        "case": case, "nodes": nodes, "pods": pods, "seed": seed,
        "sequential": {**sequential, "agreement": rate(sequential["agreed"], sequential["compared"])},
        "same_state": {**same_state, "agreement": rate(same_state["agreed"], same_state["compared"]),
                       "tie_agreement": rate(same_state["ties_agreed"], same_state["ties_compared"])},
        "differences": differences,
        "unschedulable": {w: sum(1 for o in results[w].values() if o.unschedulable) for w in results},
        "preempted": {w: sum(len(o.victims) for o in results[w].values()) for w in results},
    }  # fmt: skip


def preemption_tie(objects: dict[str, list[dict[str, Any]]], theirs: Any, mine: list[str]) -> bool:
    """Two victim sets kube-scheduler's pickOneNodeForPreemption cannot order: the same highest
    victim priority, priority sum and count (no budget covers any of them), and no start time
    on any victim (pods bound here never start: upstream's GetPodStartTime then takes
    time.Now(), anew for each candidate as it is scored, so the last candidate scored wins), and
    pickOneNodeForPreemption scores the candidates in the order of a Go map's iteration, which is
    random. kube-scheduler's log does not show these ties (no score is logged for a preemption)."""
    pods = {p["metadata"]["name"]: p for p in objects["running"] + objects["pending"]}
    started = {p["metadata"]["name"] for p in objects["running"]}  # (made Running and Ready by build)
    budgets = [b["spec"]["selector"].get("matchLabels", {}) for b in objects["pdbs"]]

    def key(victims: Any) -> tuple[int, int, int] | None:
        found = [pods.get(v) for v in victims]
        if not found or any(p is None or p["metadata"]["name"] in started for p in found):
            return None
        labels = [p["metadata"].get("labels", {}) for p in found if p]
        if any(all(lab.get(k) == v for k, v in b.items()) for b in budgets for lab in labels):
            return None
        priorities = [int(p["spec"].get("priorityClassName", "bench-priority-0").rsplit("-", 1)[1]) for p in found if p]
        return max(priorities), sum(priorities), len(priorities)

    a, b = key(theirs), key(mine)
    return a is not None and a == b


def rate(a: int, b: int) -> float | None:
    return a / b if b else None


def states(
    objects: dict[str, list[dict[str, Any]]], ks: dict[str, Outcome]
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """(pod, the pods of kube-scheduler's cluster just before it): the pods before it where
    kube-scheduler put them, their victims gone (its own victims not yet)."""
    gone: set[str] = set()
    placed: list[dict[str, Any]] = []
    pending = {p["metadata"]["name"]: p for p in objects["pending"]}
    for name, outcome in ks.items():
        yield name, [p for p in objects["running"] + placed if p["metadata"]["name"] not in gone]
        gone.update(outcome.victims)
        if outcome.node:
            pod = json.loads(json.dumps(pending[name]))
            pod["spec"]["nodeName"] = outcome.node
            placed.append(pod)


def with_start_time(pod: dict[str, Any], start_times: dict[str, str]) -> dict[str, Any]:
    """The pod with the start time it had in kube-scheduler's cluster (the pods made Running
    there; the others, bound by the scheduler, never started)."""
    started = start_times.get(pod["metadata"]["name"])
    return {**pod, "status": {"phase": "Running", "startTime": started}} if started else pod


def replay_all(
    objects: dict[str, list[dict[str, Any]]], ks: dict[str, Outcome], start_times: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """rulesched's one cycle (as ``rulesched test`` runs it, every node scored) for every pod, on
    kube-scheduler's cluster as it was just before that pod: the decision compared on the same
    state, so that a tie kube-scheduler broke at random does not make every later pod differ."""
    from unittest import mock

    from rulesched.authoring import testfile
    from rulesched.authoring.ruletest import run_case
    from rulesched.errors import RuleschedError
    from rulesched.lang import load_rules, resolve_rules_path

    pending = {p["metadata"]["name"]: p for p in objects["pending"]}
    out: dict[str, dict[str, Any]] = {}
    rules = load_rules([resolve_rules_path("default")])  # (once, not once per pod as run_tests would)
    # The files are JSON written here: read as JSON, not through the YAML reader's pure-Python
    # constructor (seconds per file of a few hundred nodes on a loaded machine; the rest is the same).
    as_json = mock.patch.object(testfile, "_load_yaml", lambda path: json.loads(path.read_text()))
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as d, as_json:
        for name, pods in states(objects, ks):
            pods = [with_start_time(p, start_times) for p in pods]
            case = {
                "rules": ["default"], "nodes": objects["nodes"], "pods": pods, "pdbs": objects["pdbs"],
                "priorityClasses": objects["classes"],
                "cases": [{"name": name, "pod": pending[name], "expect": {"unschedulable": False}}],
            }  # fmt: skip
            path = Path(d) / f"{name}.test.yaml"
            path.write_text(json.dumps(case))
            try:
                (case,) = testfile.read_case_file(path).cases
                got = run_case(rules, case).outcome.as_json()
            except RuleschedError as err:
                out[name] = {"error": str(err)}
                continue
            best = got["winner"] if isinstance(got["winner"], list) else [got["winner"]] if got["winner"] else []
            out[name] = {"best": best, "nominated": got["nominated"], "victims": sorted(v.split("/", 1)[1] for v in got["victims"]),
                         "scores": got["scores"]}  # fmt: skip
            path.unlink()
    return out


def preemption_case(case: str) -> bool:
    return case == "preemption"


def fidelity(args: argparse.Namespace) -> dict[str, Any]:
    cases = args.case or ["mixed", "preemption"]
    out = []
    for case in cases:
        nodes = args.nodes or (300 if case == "mixed" else 100)
        pods = args.pods or (300 if case == "mixed" else 100)
        result = fidelity_case(case, nodes, pods, args.seed)
        out.append(result)
        seq, same = result["sequential"], result["same_state"]
        print(f"fidelity {case}: on the same state (each pod replayed on kube-scheduler's cluster before it): "
              f"{same['agreed']}/{same['compared']} unique best nodes or preemptions agree, "
              f"{same['ties_agreed']}/{same['ties_compared']} tied sets agree, {same['preemption_ties']} preemptions "
              f"kube-scheduler's own order leaves to chance (equal victims, no start times) set apart; run twice: "
              f"{seq['agreed']}/{seq['compared']} of the pods with a unique best node agree; "
              f"unschedulable {result['unschedulable']}; preempted {result['preempted']}")  # fmt: skip
        for d in result["differences"]:
            print(f"  {json.dumps(d)}")
    return {"cases": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("speed", "fidelity", "all"))
    parser.add_argument(
        "--workload", action="append", choices=sorted(WORKLOADS), help="speed: (repeatable) default all"
    )
    parser.add_argument("--repeat", type=int, default=1, help="speed: alternated runs of each scheduler")
    parser.add_argument(
        "--scheduler", action="append", choices=("kube-scheduler", "rulesched"), help="speed: only these"
    )
    parser.add_argument("--case", action="append", choices=("mixed", "preemption"), help="fidelity: default both")
    parser.add_argument("--nodes", type=int, help="fidelity: nodes (default 300 mixed, 100 preemption)")
    parser.add_argument("--pods", type=int, help="fidelity: pending pods (default 300 mixed, 100 preemption)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--logs", type=Path, metavar="DIR", help="speed: keep each scheduler's log in DIR")
    parser.add_argument(
        "--rulesched-flag",
        action="append",
        metavar="FLAG",
        help="speed: a flag for `rulesched run` (repeatable), e.g. --rulesched-flag=--evict-victims=all",
    )
    parser.add_argument(
        "--pprof",
        type=Path,
        metavar="DIR",
        help="speed: keep kube-apiserver's CPU profile of each run's measured phase in DIR",
    )
    parser.add_argument(
        "--pprof-seconds", type=int, default=15, help="speed: the profile's length from the first creation"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON ('-': standard output)")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"bench_kube_scheduler: {reason}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()}}
    if args.what in ("speed", "all"):
        result["speed"] = speed(args)
    if args.what in ("fidelity", "all"):
        result["fidelity"] = fidelity(args)
    if args.json:
        text = json.dumps(result, indent=2, default=str)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as e:
        print(f"bench_kube_scheduler: {e}", file=sys.stderr)
        sys.exit(1)
