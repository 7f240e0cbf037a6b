"""A channel's requests and answers, as a scripted HTTP/1.1 server on a socket sees and sends
them (rulesched.kube.channel writes and reads HTTP itself): the request whole, answers with a
length, chunked, interim, without a length, cut short; connections kept and reopened."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rulesched.errors import KubeError, NotFoundError, UnavailableError
from rulesched.kube.api import KubeApi
from rulesched.kube.channel import Channel


@dataclass
class Scripted:
    """Answers each request read with the next of ``answers`` (raw bytes); records the
    requests (head lines, body) and how many connections were accepted."""

    answers: list[bytes]
    requests: list[tuple[list[str], bytes]] = field(default_factory=list)
    connections: int = 0

    def serve(self, listener: socket.socket) -> None:
        while self.answers:
            try:
                conn, _ = listener.accept()
            except TimeoutError:  # (looks again whether the test is over: the listener closed)
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                self._exchange(conn)

    def _exchange(self, conn: socket.socket) -> None:
        buffer = b""
        while self.answers:
            while b"\r\n\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buffer += chunk
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                (int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")), 0
            )
            while len(buffer) < length:
                buffer += conn.recv(65536)
            self.requests.append((lines, buffer[:length]))
            buffer = buffer[length:]
            answer = self.answers.pop(0)
            conn.sendall(answer)
            if (
                b"connection: close" in answer.lower()
                or b"content-length" not in answer.lower()
                and b"chunked" not in answer
            ):
                return  # (the answer runs to the end of the connection, or says it closes)


Serve = Callable[..., tuple[Scripted, Channel]]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(*answers)``: a scripted server answering with those, and a channel to it."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "t", "user": {"token": "secret"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
    }  # fmt: skip
    (tmp_path / "kubeconfig").write_text(json.dumps(config))
    threads = []

    def make(*answers: bytes) -> tuple[Scripted, Channel]:
        script = Scripted(list(answers))
        thread = threading.Thread(target=script.serve, args=(listener,), daemon=True)
        thread.start()
        threads.append(thread)
        channel = KubeApi(str(tmp_path / "kubeconfig")).channel()
        assert channel is not None
        return script, channel

    yield make
    listener.close()
    for thread in threads:
        thread.join(timeout=5)


def ok(body: bytes, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


def test_requests_go_whole_on_one_kept_connection(serve: Serve) -> None:
    script, channel = serve(ok(b'{"a": 1}'), ok(b""), ok(b'{"b": [2]}'))
    channel.send("POST", "/api/v1/namespaces/default/pods/p/binding", {"apiVersion": "v1", "kind": "Status"})
    assert channel.receive() == {"a": 1}
    channel.send("POST", "/apis/x/v1/things", {"apiVersion": "x/v1", "kind": "Thing"}, answer=False)
    assert channel.receive() is None
    channel.send("GET", "/api/v1/nodes/n1")
    assert channel.receive() == {"b": [2]}
    assert script.connections == 1
    (first, body), (_, _), (third, empty) = script.requests
    assert first[0] == "POST /api/v1/namespaces/default/pods/p/binding HTTP/1.1"
    headers = dict(line.split(": ", 1) for line in first[1:])
    assert headers["Host"].startswith("127.0.0.1:")
    assert headers["authorization"] == "Bearer secret"
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"apiVersion": "v1", "kind": "Status"}
    assert int(headers["Content-Length"]) == len(body)
    assert third[0] == "GET /api/v1/nodes/n1 HTTP/1.1" and empty == b""
    assert not any(line.lower().startswith("content-length") for line in third)


def test_chunked_interim_and_unlengthed_answers_are_read(serve: Serve) -> None:
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'4;ext=1\r\n{"k"\r\n6\r\n: "v"}\r\n0\r\nTrailer: x\r\n\r\n'
    )
    to_the_end = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[1, 2, 3]"
    script, channel = serve(chunked, ok(b"{}"), to_the_end, ok(b"true"))
    for expected in ({"k": "v"}, {}, [1, 2, 3], True):
        channel.send("GET", "/x")
        assert channel.receive() == expected
    assert script.connections == 2  # (the answer read to its connection's end: the next one opened anew)


def test_a_closing_answer_and_an_error_status(serve: Serve) -> None:
    gone = b'{"kind": "Status", "message": "pods \\"p\\" not found", "reason": "NotFound", "code": 404}'
    script, channel = serve(
        ok(b"{}", "Connection: close\r\n"),
        f"HTTP/1.1 404 Not Found\r\nContent-Length: {len(gone)}\r\n\r\n".encode() + gone,
        ok(b"1"),
    )
    channel.send("GET", "/a")
    assert channel.receive() == {}
    channel.send("GET", "/b")
    with pytest.raises(NotFoundError, match="not found"):
        channel.receive()
    channel.send("GET", "/c")  # (an error answer keeps the connection)
    assert channel.receive() == 1
    assert script.connections == 2


def test_an_answer_cut_short_fails_and_closes_the_channel(serve: Serve) -> None:
    _, channel = serve(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"short')
    channel.send("GET", "/a")
    with pytest.raises(UnavailableError, match="closed before the whole answer"):
        channel.receive()
    assert channel.closed


def test_a_header_with_a_line_break_is_never_sent(serve: Serve) -> None:
    script, channel = serve(ok(b"{}"))
    with pytest.raises(KubeError, match="line break"):
        channel.send("GET", "/a\r\nX-Injected: 1")
    assert script.requests == [] and channel.closed
