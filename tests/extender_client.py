"""Run ``rulesched extender`` as its own process and talk to it as kube-scheduler does (tests and
benchmarks): bodies in kube-scheduler's shapes, answers decoded."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class ExtenderProcess:
    """``python -m rulesched extender --listen 127.0.0.1:0 ARGS``; :attr:`host`, :attr:`port`;
    :attr:`log`, the lines it wrote on stderr so far."""

    def __init__(self, *args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rulesched", "extender", "--listen", "127.0.0.1:0", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert self.proc.stderr is not None
        self.log: list[str] = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            if "listening on" in line:
                address = line.split("listening on ", 1)[1].split()[0]
                self.host, port = address.rsplit(":", 1)
                self.port = int(port)
                # keep reading its log: a full pipe would stop the process at its next line
                self._drain = threading.Thread(target=self._read_log, daemon=True)
                self._drain.start()
                return
        self.proc.kill()
        raise RuntimeError("extender did not start:\n" + "".join(self.log))

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self, method: str, path: str, body: bytes | None = None, conn: http.client.HTTPConnection | None = None
    ) -> tuple[int, bytes]:
        own = conn is None
        conn = conn or self.connection()
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            if own:
                conn.close()

    def post(self, path: str, message: Any, conn: http.client.HTTPConnection | None = None) -> tuple[int, Any]:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        status, data = self.request("POST", path, body, conn)
        return status, json.loads(data) if data else None

    def alive(self) -> bool:
        return self.proc.poll() is None and self.request("GET", "/healthz")[0] == 200

    def wait_ready(self, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.request("GET", "/readyz")[0] == 200:
                return
            time.sleep(0.1)
        raise AssertionError("extender not ready: " + self.request("GET", "/readyz")[1].decode())

    def stop(self) -> str:
        """Stop it; its whole log."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._drain.join(timeout=5)
        return "".join(self.log)


# -- messages as kube-scheduler's json.Marshal writes them (nil pointers as null) -------------------


def extender_args(
    pod: dict[str, Any], nodes: Sequence[dict[str, Any]] | None = None, names: Sequence[str] | None = None
) -> dict[str, Any]:
    return {
        "Pod": pod,
        "Nodes": None if nodes is None else {"metadata": {}, "items": list(nodes)},
        "NodeNames": None if names is None else list(names),
    }


def preemption_args(
    pod: dict[str, Any],
    victims: dict[str, Sequence[dict[str, Any]]] | None = None,
    meta: dict[str, Sequence[str]] | None = None,
    violations: int = 0,
) -> dict[str, Any]:
    return {
        "Pod": pod,
        "NodeNameToVictims": None
        if victims is None
        else {n: {"Pods": list(p), "NumPDBViolations": violations} for n, p in victims.items()},
        "NodeNameToMetaVictims": None
        if meta is None
        else {n: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": violations} for n, uids in meta.items()},
    }


def lower_keys(message: dict[str, Any]) -> dict[str, Any]:
    """The envelope in lower case, as Go's case-insensitive decoding accepts it: its keys, and
    the keys of victims maps' entries (pods and nodes inside are Kubernetes JSON, untouched)."""
    out: dict[str, Any] = {}
    for key, value in message.items():
        if key.startswith("NodeNameTo") and isinstance(value, dict):
            value = {node: {k.lower(): v for k, v in entry.items()} for node, entry in value.items()}
            for entry in value.values():
                entry["pods"] = [
                    {k.lower(): v for k, v in p.items()} if set(p) == {"UID"} else p for p in entry["pods"]
                ]
        out[key.lower()] = value
    return out
