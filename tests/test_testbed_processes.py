"""The test bed's process bookkeeping (testbed/processes.py), without Kubernetes' binaries.

A Go component killed by a signal shows its thread-group leader as a zombie while its other threads
still exit and still hold its listening sockets; restarting it on the leader's word raced them and
failed with "address already in use" (CI's run of tests/test_real_failures.py after the lease test).
"""

from __future__ import annotations

import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed import components, controlplane, errors, processes

# exit(2) ends the calling thread only (exit_group(2) is what sys.exit reaches).
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())

LEADER_EXITS_FIRST = f"""
import ctypes, sys, threading, time
threading.Thread(target=time.sleep, args=(600,)).start()
sys.stdout.write("ready\\n"); sys.stdout.flush()
ctypes.CDLL(None).syscall({SYS_EXIT}, 0)
"""


def leader_state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]


@pytest.mark.skipif(SYS_EXIT is None, reason="exit(2)'s number is known here for x86-64 and arm64 only")
def test_a_zombie_leader_with_a_live_thread_has_not_exited() -> None:
    proc = subprocess.Popen([sys.executable, "-c", LEADER_EXITS_FIRST], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        deadline = time.monotonic() + 10
        while leader_state(proc.pid) != "Z":
            assert time.monotonic() < deadline, "the leader thread did not exit"
            time.sleep(0.01)
        assert not processes.exited(proc.pid), "the leader is a zombie but a thread still runs"
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not processes.exited(proc.pid):
            assert time.monotonic() < deadline, "killed, yet not seen as exited"
            time.sleep(0.01)
    finally:
        proc.kill()
        proc.wait()
    assert processes.exited(proc.pid)


def test_a_restart_waits_for_its_ports_and_names_the_one_still_taken() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with pytest.raises(errors.TestbedError, match=f"port {port} of kube-apiserver still taken"):
            processes.wait_ports_free("kube-apiserver", {"kube-apiserver": port}, timeout=0.3)
    processes.wait_ports_free("kube-apiserver", {"kube-apiserver": port}, timeout=5)


def test_a_restart_without_a_test_bed_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert controlplane.main(["restart", str(tmp_path), "kube-apiserver"]) == 1
    err = capsys.readouterr().err
    assert err == f"testbed restart: no test bed in {tmp_path}: {tmp_path}/run/ports.json: No such file or directory\n"


def test_up_in_a_directory_it_cannot_make_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    for name in components.BINARIES:  # (stand-ins: up checks they are there before anything)
        (fake / name).write_text("#!/bin/sh\n")
        (fake / name).chmod(0o755)
    monkeypatch.setenv("RULESCHED_K8S_BIN", str(fake))
    (tmp_path / "file").write_text("")
    bed = tmp_path / "file" / "bed"  # (under a file: no directory can be made there)
    assert controlplane.main(["up", "--detach", str(bed)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("testbed up: ") and str(bed) in err and len(err.splitlines()) == 1, err
