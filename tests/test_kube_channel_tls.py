"""rulesched/kube/channel.py's liveness check on a TLS connection opened ahead: a TLS 1.3 server
(kube-apiserver, and OpenSSL's as here) sends its session tickets just after the handshake, so
the socket of a connection opened and not yet used has bytes waiting; urllib3's check takes any
as the end of the connection. The channel reads them and stays open (the binding pipeline opens
its connections ahead and used to drop every one of them), and a connection the server did
close is still seen closed."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import urllib3
from urllib3.util.connection import is_connection_dropped
from urllib3.util.wait import wait_for_read

from rulesched.errors import KubeError
from rulesched.kube.channel import Channel
from tests.helpers.kube import wait_for

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def _server(d: Path, handle: Callable[[ssl.SSLSocket], None]) -> int:
    """A TLS server for one connection, ``handle``-d after the handshake; its port."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.pem"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(f"{d}/cert.pem", f"{d}/key.pem")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with context.wrap_socket(conn, server_side=True) as tls:
            handle(tls)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1])


def _channel(d: Path, port: int) -> Channel:
    context = ssl.create_default_context(cafile=f"{d}/cert.pem")
    connection = urllib3.connection.HTTPSConnection("127.0.0.1", port, ssl_context=context, timeout=10)

    def error(method: str, path: str, status: int, data: bytes) -> KubeError:
        return KubeError(f"{method} {path}: {status}", status)

    def encode(body: Any) -> tuple[bytes, str]:
        return b"{}", "application/json"

    return Channel(connection, "", lambda *_: {}, lambda *_: None, error, encode, lambda *_: False)


def test_a_connection_opened_ahead_is_not_taken_as_dropped_for_its_session_tickets(tmp_path: Path) -> None:
    def answer_one(tls: ssl.SSLSocket) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            request += tls.recv(4096)
        tls.sendall(ANSWER)
        tls.recv(1)  # (until the client closes)

    channel = _channel(tmp_path, _server(tmp_path, answer_one))
    channel.open()
    sock = channel._connection.sock
    assert wait_for(lambda: wait_for_read(sock, timeout=0.0), seconds=5.0), "no session ticket came"
    assert is_connection_dropped(channel._connection)  # (urllib3's check: any byte is the end)
    assert not channel.dropped
    channel.send("GET", "/api")
    assert channel.receive() == {}
    channel.close()


def test_a_connection_the_server_closed_is_dropped(tmp_path: Path) -> None:
    channel = _channel(tmp_path, _server(tmp_path, lambda tls: None))  # (closed once the handshake is done)
    channel.open()
    assert wait_for(lambda: channel.dropped, seconds=5.0)
    channel.close()
