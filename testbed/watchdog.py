"""The test bed dies with its owner (testbed/controlplane.py says how): the watchdog process."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from testbed.processes import CONTROLPLANE, exited, processes_naming, signal_all


def start_watchdog(d: Path, owner: int) -> None:
    with open(d / "logs" / "watchdog.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, str(CONTROLPLANE), "watch", str(d), str(owner)],
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
