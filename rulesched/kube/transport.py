"""How requests reach the API server: the client's urllib3 pool asked directly
(:class:`Transport`), the User-Agent that names the process, and the client certificate sent
alone, as client-go sends it (:func:`leaf_alone`).

Next stage: :class:`rulesched.kube.api.KubeApi` sends its requests through these.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata
import os
import platform
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import urllib3

from rulesched import __version__

PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"

# (urllib3 2: HTTPConnection.request(preload_content=...) and its own responses)
URLLIB3_2 = int(importlib.metadata.version("urllib3").split(".", 1)[0]) >= 2


class Transport:
    """The client's urllib3 pool manager, asked directly: for a plain PoolManager its one
    connection pool for the API server (no URL parsing and pool lookup per request); through a
    proxy manager, the manager with the whole URL. ``host`` may carry a path prefix (an API
    server behind a proxy at ``https://host/k8s/clusters/c1``)."""

    def __init__(self, manager: urllib3.PoolManager, host: str) -> None:
        self.host = host.rstrip("/")
        self.prefix = urlsplit(self.host).path
        self.manager = manager
        self.pool = manager.connection_from_url(self.host) if type(manager) is urllib3.PoolManager else None

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout: urllib3.Timeout,
    ) -> urllib3.BaseHTTPResponse:
        # Retries are the caller's (with backoff, never for a binding), and so is reading the
        # answer, whole or as a stream: the answer is never preloaded.
        options: dict[str, Any] = {
            "body": body,
            "headers": headers,
            "retries": False,
            "redirect": False,
            "timeout": timeout,
            "preload_content": False,
        }
        if self.pool is not None:  # (the pool's own host: a path is all it needs, and no check)
            return self.pool.urlopen(method, self.prefix + target, assert_same_host=False, **options)
        return self.manager.urlopen(method, self.host + target, **options)


def user_agent() -> str:
    """``rulesched/VERSION (OS/ARCH) HOST_PID``: which replica made a request (the leader
    election identity starts the same way)."""
    system = f"{platform.system().lower()}/{platform.machine().lower()}"
    return f"rulesched/{__version__} ({system}) {socket.gethostname()}_{os.getpid()}"


def leaf_alone(cert_file: str, directory: str | None = None) -> str:
    """A certificate file that makes OpenSSL send the client certificate in ``cert_file`` alone,
    as client-go (Go's TLS) sends it: the path of a copy holding that one certificate twice, or
    ``cert_file`` itself when it holds a chain already (or cannot be read: the client's own
    loading then says why).

    Given a file with one certificate, OpenSSL builds the chain it sends from the trust store,
    which holds the cluster's CA (the server's verification), and so sends the CA too.
    kube-apiserver verifies every request's certificates, chain and all, once against the
    front proxy's CA (``--requestheader-client-ca-file``) and once against the client CA, so
    the CA sent along cost it two more ECDSA verifications a request: measured on the test
    bed, 1.17 against 0.87 ms of its CPU a request (GET of a namespace, 8 threads), the
    0.6-0.7 ms a pod its CPU cost more beside rulesched than beside kube-scheduler (a binding
    and an event a pod; benchmarks/README.md, Run 6). Given a file that names a chain, OpenSSL
    sends that instead and builds none; a chain of the certificate and itself adds no
    verification (nothing in it is an issuer).

    The copy is named by its content (and the user) in ``directory`` (the temporary directory):
    every process of the same certificate shares one file, and one killed (SIGKILL, a
    failover) leaves none behind that the next start does not reuse."""
    try:
        text = Path(cert_file).read_text()
    except (OSError, UnicodeDecodeError):
        return cert_file
    if text.count(PEM_CERTIFICATE) != 1:
        return cert_file
    start = text.index(PEM_CERTIFICATE)
    end = text.index("-----END CERTIFICATE-----", start) + len("-----END CERTIFICATE-----")
    leaf = text[start:end] + "\n"
    doubled = leaf + leaf
    folder = Path(directory or tempfile.gettempdir())
    digest = hashlib.sha256(doubled.encode()).hexdigest()[:20]
    path = folder / f"rulesched-client-cert-{os.getuid()}-{digest}.crt"
    try:
        found = path.lstat()  # (a regular file of this user's, not a link someone put there)
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid() and path.read_text() == doubled:
            return str(path)
    except (OSError, UnicodeDecodeError):
        pass
    fd, written = tempfile.mkstemp(prefix="rulesched-client-cert-", suffix=".tmp", dir=folder)
    with os.fdopen(fd, "w") as out:
        out.write(doubled)
    try:
        os.replace(written, path)  # (atomic: a process starting beside this one reads it whole)
    except OSError:  # (another user's file of that name in a shared directory: this copy, removed at exit)
        atexit.register(_remove, written)
        return written
    return str(path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
