"""The adapter's HTTP/1.1 exchange (rulesched.kube.transport) against answers a real API server
may give that the test API server does not: chunked bodies, ``Connection: close``, bodies that
run to the close, 1xx answers, broken answers; and a kept-alive connection the server closed
while idle. A scripted server on a real socket answers each request with the next bytes given."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rulesched.errors import UnavailableError
from rulesched.kube.api import NODES, KubeApi


class Scripted:
    """Answers the n-th request on any connection with ``answers[n]``; ``None`` closes the
    connection instead; after an answer marked ``close`` the server closes its side."""

    def __init__(self, answers: list[tuple[bytes | None, bool]]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        with conn:
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = next(
                    (int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0
                )
                self.requests.append(head + reader.read(length))
                answer, close = self.answers[len(self.requests) - 1]
                if answer is None:
                    return
                conn.sendall(answer)
                if close:
                    conn.shutdown(socket.SHUT_RDWR)
                    return


def kubeconfig(tmp_path: Path, port: int) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: t, user: {token: secret}}]\n"
        "contexts: [{name: t, context: {cluster: t, user: t}}]\n"
    )
    return str(path)


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


@pytest.fixture
def api_for(tmp_path: Path) -> Iterator[Callable[[Scripted], KubeApi]]:
    apis: list[KubeApi] = []

    def make(server: Scripted) -> KubeApi:
        apis.append(KubeApi(kubeconfig(tmp_path, server.port), timeout=5))
        return apis[-1]

    yield make
    for api in apis:
        api.close()


def test_chunked_close_delimited_and_informational_answers_are_read_whole(
    api_for: Callable[[Scripted], KubeApi],
) -> None:
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'5;ext=1\r\n{"a":\r\n3\r\n 1,\r\nA\r\n "b": [2]}\r\n0\r\nTrailer: x\r\n\r\n'
    )
    informational = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b'{"c": 3}')
    to_close = b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"d": 4}'
    server = Scripted([(chunked, False), (informational, False), (to_close, True), (ok(b'{"e": 5}'), False)])
    api = api_for(server)
    assert api.get(NODES, None, "a") == {"a": 1, "b": [2]}
    assert api.get(NODES, None, "b") == {"c": 3}
    assert api.get(NODES, None, "c") == {"d": 4}  # (the body runs to the close)
    assert api.get(NODES, None, "d") == {"e": 5}
    assert server.connections == 2  # kept alive until the server said close
    first = server.requests[0].decode()
    assert first.startswith("GET /api/v1/nodes/a HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in first and "authorization: Bearer secret\r\n" in first
    assert "User-Agent: rulesched/" in first


def test_a_connection_the_server_closed_while_idle_is_not_reused(api_for: Callable[[Scripted], KubeApi]) -> None:
    server = Scripted([(ok(b"{}"), True), (ok(b'{"second": true}'), False)])
    api = api_for(server)
    api.get(NODES, None, "a")
    assert api.get(NODES, None, "b") == {"second": True}
    assert server.connections == 2


@pytest.mark.parametrize(
    "answer",
    [
        None,  # closed without answering
        b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # cut short
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a bad chunk
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 101 + b"\r\n",  # too many headers
    ],
)
def test_broken_answers_are_unavailable_errors_and_the_next_request_goes_on(
    api_for: Callable[[Scripted], KubeApi], answer: bytes | None
) -> None:
    server = Scripted([(answer, True), (ok(b'{"ok": 1}'), False)])
    api = api_for(server)
    with pytest.raises(UnavailableError):
        api.get(NODES, None, "a")
    assert api.get(NODES, None, "b") == {"ok": 1}


def test_a_body_and_its_length_are_sent_and_error_answers_keep_their_codes(
    api_for: Callable[[Scripted], KubeApi],
) -> None:
    conflict = b'{"kind": "Status", "message": "already bound", "code": 409}'
    answer = b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n" % len(conflict) + conflict
    server = Scripted([(answer, False)])
    api = api_for(server)
    with pytest.raises(Exception, match="409 already bound") as err:
        api.bind("default", "p", "u1", "n1")
    assert type(err.value).__name__ == "ConflictError"
    request = server.requests[0]
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /api/v1/namespaces/default/pods/p/binding HTTP/1.1")
    assert b"Content-Type: application/json" in head and b"Content-Length: %d" % len(body) in head
    assert b'"target":{"apiVersion":"v1","kind":"Node","name":"n1"}' in body
