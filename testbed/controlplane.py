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
feature gates of the DRA and Workload APIs of 1.37 (components.py's FEATURE_GATES, RUNTIME_CONFIG).
kube-controller-manager runs components.py's CONTROLLERS with per-controller service-account
credentials, and no node lifecycle controller: nodes are plain Node objects created by the tests
with capacity and a Ready condition, and without kubelets nothing marks them NotReady. Without
kubelets, pods bound to them stay bound and never run: tests play the kubelet where they need it
(a pod Ready, a terminating pod removed).

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

This module is the commands; their parts are its siblings: components.py (the binaries and each
component's command line), certificates.py (keys, certificates, kubeconfigs), processes.py
(ports, starting and stopping, which processes belong to a test bed), readiness.py (waiting for
each component) and watchdog.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

if not __package__:
    # Run as a script (testbed/up, testbed/down, the watchdog), its folder is first on the path;
    # its siblings are the package testbed, as the tests import them (the repository's root on
    # their path).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.certificates import make_pki, write_kubeconfig  # noqa: E402
from testbed.components import (  # noqa: E402
    COMPONENTS,
    FEATURE_GATES,
    audit_flags,
    binaries_dir,
    commands,
    etcd_version,
    kubernetes_version,
    missing_binaries,
)
from testbed.errors import TestbedError  # noqa: E402
from testbed.processes import free_port, running_pid, start, stop, wait_ports_free  # noqa: E402
from testbed.readiness import wait_default_service_account, wait_ready  # noqa: E402
from testbed.watchdog import start_watchdog, watch  # noqa: E402

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


def restart(d: Path, component: str, kill: bool) -> None:
    d = d.resolve()
    try:
        ports = json.loads((d / "run" / "ports.json").read_text())
    except OSError as err:
        raise TestbedError(f"no test bed in {d}: {d / 'run' / 'ports.json'}: {err.strerror}") from err
    except ValueError as err:
        raise TestbedError(f"no test bed in {d}: {d / 'run' / 'ports.json'} is not JSON") from err
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
    except OSError as e:  # (DIR not writable, a full disk: the path and the reason, not a traceback)
        print(f"testbed {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
