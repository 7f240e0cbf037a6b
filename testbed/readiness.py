"""Waiting for the test bed's components: their health endpoints, and kube-controller-manager's first
work (the default ServiceAccount)."""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

from testbed.errors import TestbedError
from testbed.processes import log_tail, running_pid

READY_TIMEOUT = 120.0  # seconds for each component (kube-apiserver's first start on 2 busy cores: ~15 s)


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
