"""The test bed's processes: free ports, starting a component, its pid (never a reused one), stopping
it, and finding every process that belongs to a test bed."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

from testbed.components import COMPONENT_PORTS
from testbed.errors import TestbedError

CONTROLPLANE = Path(__file__).resolve().parent / "controlplane.py"  # (the watchdog runs it: `watch`)
OWNED = "RULESCHED_TESTBED_DIR"  # in a process's environment: it belongs to that test bed


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
        if cmdline[1:3] != [str(CONTROLPLANE).encode(), b"watch"]:
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
