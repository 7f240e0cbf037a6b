"""The processes a run measures: the two schedulers (started and stopped, their CPU, their own
metrics), the test bed, kube-apiserver's request counts and CPU profile."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import urllib3

from tests.realk8s import Kube, KubeScheduler, control_plane, free_port, stop_process

from . import ROOT

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


def scheduler_metrics(scheduler: Scheduler) -> str:
    """The scheduler's /metrics as text ("" when it cannot be read: a scheduler that died)."""
    try:
        return scheduler.metrics()
    except (AssertionError, urllib3.exceptions.HTTPError):
        return ""


def attempts(text: str) -> dict[str, int]:
    """The scheduler's own count of its scheduling attempts by result (both export kube-scheduler's
    scheduler_schedule_attempts_total), from its metrics ``text``."""
    found: dict[str, int] = {}
    for m in ATTEMPTS.finditer(text):
        found[m["result"]] = found.get(m["result"], 0) + int(float(m["value"]))
    for m in INCOMING.finditer(text):  # (why pods went back to the queue)
        labels = dict(LABEL.findall(m["labels"]))
        key = f"{labels.get('queue', '')}<-{labels.get('event', '')}"
        found[key] = found.get(key, 0) + int(float(m["value"]))
    return found


def _sample(text: str, name: str, where: str = "") -> float:
    """The sum of metric ``name``'s samples in ``text`` (those whose labels contain ``where``)."""
    pattern = re.compile(rf"^{name}(?:\{{(?P<labels>[^}}]*)\}})? (?P<value>\S+)$", re.M)
    return sum(float(m["value"]) for m in pattern.finditer(text) if where in (m["labels"] or ""))


def preemptions(text: str) -> dict[str, float]:
    """The scheduler's own preemption counts, from its metrics ``text`` (kube-scheduler's, which
    rulesched exports alike): PostFilter's attempts (scheduler_preemption_attempts_total), the
    preemptions that chose victims and the victims (scheduler_preemption_victims' count and sum:
    every victim chosen, those already leaving too, as upstream's observeVictims counts them),
    and the mean time a preemption's removals took to send (single pods'
    scheduler_preemption_execution_duration_seconds, in ms). Empty without metrics."""
    if "scheduler_preemption_attempts_total" not in text:
        return {}
    executions = _sample(text, "scheduler_preemption_execution_duration_seconds_count", 'preemptor="pod"')
    spent = _sample(text, "scheduler_preemption_execution_duration_seconds_sum", 'preemptor="pod"')
    return {
        "attempts": int(_sample(text, "scheduler_preemption_attempts_total")),
        "preemptions": int(_sample(text, "scheduler_preemption_victims_count")),
        "victims": int(_sample(text, "scheduler_preemption_victims_sum")),
        "execution_ms": 1000 * spent / executions if executions else 0.0,
    }


def cycle_cpu(text: str) -> dict[str, dict[str, float]]:
    """rulesched's own CPU a scheduling cycle took on its thread, by outcome (its metric
    rulesched_scheduling_cycle_cpu_seconds, every profile together): each outcome's cycles and
    their mean ms. Empty for kube-scheduler (it has no such metric)."""
    totals: dict[str, dict[str, float]] = {}
    for m in CYCLE_CPU.finditer(text):
        found = totals.setdefault(m["outcome"], {"count": 0.0, "sum": 0.0})
        found[m["part"]] += float(m["value"])
    return {k: {"cycles": int(t["count"]), "ms": 1000 * t["sum"] / t["count"]} for k, t in totals.items() if t["count"]}


CYCLE_CPU = re.compile(
    r'^rulesched_scheduling_cycle_cpu_seconds_(?P<part>count|sum)\{[^}]*outcome="(?P<outcome>\w+)"[^}]*\} (?P<value>\S+)$',
    re.M,
)


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
            # (a session of its own, as kube-scheduler's and the control plane's: with the kernel's
            # autogroups each session shares the cores as one; in the benchmark's session,
            # rulesched shared its share with the benchmark's own process and the creator)
            self.process = subprocess.Popen(
                self.args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
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
        stop_process(self.process, 20)

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def metrics(self) -> str:
        answer = urllib3.PoolManager(retries=False).request("GET", f"http://127.0.0.1:{self.port}/metrics", timeout=5)
        return str(answer.data.decode())


@contextmanager
def testbed(audit: bool = False) -> Iterator[Kube]:
    """A fresh control plane, without an audit log (its writes would be API server CPU that is
    no scheduler's) unless ``audit``: then one of every client's requests (``--audit``)."""
    os.environ["RULESCHED_TESTBED_AUDIT"] = "all" if audit else "0"
    with tempfile.TemporaryDirectory(prefix="bench-testbed-") as d, control_plane(Path(d)) as kube:
        yield kube


def component_pid(kube: Kube, component: str) -> int:
    return int((kube.dir / "run" / f"{component}.pid").read_text())


REQUEST_TOTAL = re.compile(r"^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def apiserver_metrics(kube: Kube) -> str:
    """kube-apiserver's /metrics as text."""
    return str(kube._pool.request("GET", kube.url + "/metrics", headers={"Accept": "text/plain"}).data.decode())


def requests_served(kube: Kube) -> dict[str, int]:
    """kube-apiserver's own count of the requests it served (apiserver_request_total), by
    ``VERB resource[/subresource]``: the difference over a run, divided by its pods, is what
    each pod cost in requests (the benchmark's own creations, watch and deletions are alike
    for both schedulers)."""
    text = apiserver_metrics(kube)
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
