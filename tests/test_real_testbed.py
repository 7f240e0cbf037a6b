"""The test bed dies with its owner (testbed/controlplane.py, "The test bed dies with its owner").

A pytest killed with SIGKILL never runs its fixtures' teardown: before the watchdog, its etcd and
kube-controller-manager (and a kube-scheduler a test had started) ran on for hours. Here the
owner is a small Python process that runs ``testbed/up`` and starts a process of its own naming
the test bed's directory (as a test starts kube-scheduler or ``rulesched run`` with its
kubeconfig); it is killed with SIGKILL, and every one of those processes must be gone.

The first test runs the watchdog alone over stand-in processes (no binaries needed, a second);
the second the real control plane (``real_k8s``: skipped without the binaries unless
RULESCHED_REQUIRE_REAL_K8S=1).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.realk8s import OWNED, REQUIRE, TESTBED, unavailable_reason

SLEEPER = "import time; time.sleep(600)"


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def naming(d: Path) -> list[int]:
    """The live processes with a path under D in their command line or RULESCHED_TESTBED_DIR=D in
    their environment (as the watchdog finds them)."""
    path = str(d.resolve())
    mark = f"{OWNED}={path}"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
                environ = (entry / "environ").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if (any(a == path or path + "/" in a for a in argv) or mark in environ) and alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    """The pids still alive after SECONDS (at most)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def describe(pids: list[int]) -> str:
    out = []
    for p in pids:
        try:
            out.append(f"{p}: " + Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except OSError:
            out.append(f"{p}: ?")
    return "\n".join(out)


def test_the_watchdog_stops_what_names_the_directory_when_its_owner_is_killed(tmp_path: Path) -> None:
    d = tmp_path / "bed"
    (d / "logs").mkdir(parents=True)
    owner = subprocess.Popen([sys.executable, "-c", SLEEPER])
    watchdog = subprocess.Popen(
        [sys.executable, str(TESTBED / "controlplane.py"), "watch", str(d), str(owner.pid)],
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    # three stand-ins: one naming DIR as an argument, one as --flag=DIR/..., one started with
    # RULESCHED_TESTBED_DIR=DIR in its environment (as what a test starts inherits it); and one
    # naming another directory whose name DIR begins (it must live on)
    marked = {**os.environ, OWNED: str(d.resolve())}
    ours = [
        subprocess.Popen([sys.executable, "-c", SLEEPER, str(d / "kubeconfig")], start_new_session=True),
        subprocess.Popen([sys.executable, "-c", SLEEPER, f"--data-dir={d}/etcd-data"], start_new_session=True),
        subprocess.Popen([sys.executable, "-c", SLEEPER], env=marked, start_new_session=True),
    ]
    other = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, f"{d}-other/kubeconfig"],
        env={**os.environ, OWNED: f"{d.resolve()}-other"},
        start_new_session=True,
    )
    try:
        assert watchdog.stderr is not None
        assert select.select([watchdog.stderr], [], [], 30)[0], "the watchdog said nothing in 30 s"
        assert b"when process" in watchdog.stderr.readline()
        assert all(p.poll() is None for p in [*ours, other, watchdog])
        owner.kill()
        owner.wait()
        watchdog.wait(30)
        for p in ours:
            p.wait(5)
        assert other.poll() is None, "a process naming another directory was stopped"
        assert f"process {owner.pid} exited" in watchdog.stderr.read().decode()
    finally:
        for p in [owner, watchdog, *ours, other]:
            if p.poll() is None:
                p.kill()
                p.wait()


OWNER = """
import os, subprocess, sys, time
d = sys.argv[1]
up = subprocess.run([sys.argv[2], d], capture_output=True, text=True)
if up.returncode:
    print("up failed:", up.stderr, flush=True)
    sys.exit(1)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", d + "/kubeconfig"], start_new_session=True)
os.environ["RULESCHED_TESTBED_DIR"] = d  # (as tests/realk8s.py marks what the tests start)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.real_k8s
def test_the_control_plane_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    d = tmp_path / "bed"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(d), str(TESTBED / "up")], stdout=subprocess.PIPE, text=True
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()  # (testbed/up's own timeouts bound this)
        assert line == "ready\n", line + owner.stdout.read()
        run = d.resolve() / "run"
        components = {
            c: int((run / f"{c}.pid").read_text()) for c in ("etcd", "kube-apiserver", "kube-controller-manager")
        }
        watchdog = int((run / "watchdog.pid").read_text())
        pids = [p for p in naming(d) if p != owner.pid]  # (the owner names D too)
        assert set(components.values()) | {watchdog} <= set(pids)
        assert len(pids) == 6, describe(pids)  # and the two processes the owner started
        assert all(alive(p) for p in pids)

        owner.send_signal(signal.SIGKILL)
        owner.wait()
        left = wait_gone(pids, 60)
        assert not left, "still running 60 s after their owner was killed:\n" + describe(left)
        log = (d / "logs" / "watchdog.log").read_text()
        assert f"process {owner.pid} exited" in log, log
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        subprocess.run([str(TESTBED / "down"), str(d)], capture_output=True, timeout=120)
        for p in naming(d):
            os.kill(p, signal.SIGKILL)
