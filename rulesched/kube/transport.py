"""HTTP/1.1 to the API server for :mod:`rulesched.kube.api`: requests and their answers, kept-alive.

The Kubernetes client configures everything here: its urllib3 pool manager (built from the
kubeconfig or the service account: TLS verification, CA, client certificate, proxy) opens the
connections, and the client's credentials go in the headers :mod:`rulesched.kube.api` builds.
What this module does instead of urllib3 is the exchange on an open connection, for answers read
whole: the request written in one ``sendall``, the status line and headers parsed, the body read
by ``Content-Length`` or chunks. That costs ~20 us of CPU on loopback where urllib3 over
http.client costs ~130 us (header objects, e-mail header parsing, several system calls), and a
binding and its event are two requests per pod on the scheduler's interpreter lock
(benchmarks/README.md, "bench_run.py").

Watches (streams read as they come) and every request through a proxy go through urllib3 itself.
A kept-alive connection is reused only if the server has not closed it meanwhile (urllib3's own
check); a connection that failed, or whose answer said ``Connection: close``, is closed. Nothing
is retried here: the callers decide (a binding never is). Failures raise ``OSError`` (the
connection: refused, reset, timed out) or :class:`urllib3.exceptions.ProtocolError` (an answer
that is not HTTP/1.x), which the adapter turns into ``UnavailableError``.

Next stage: :mod:`rulesched.kube.api` decodes the answers.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import ProtocolError

MAX_LINE = 65536  # a status or header line, at most (as http.client's limit)
MAX_HEADERS = 100  # header lines in an answer, at most (as http.client's)
MAX_IDLE = 64  # kept-alive connections kept, at most (the client's pool size)


@dataclass(frozen=True)
class Answer:
    """An answer read whole."""

    status: int
    data: bytes


class _Connection:
    """One open connection (the pool's connection object, for its TLS and closing) and a
    buffered reader on its socket."""

    __slots__ = ("conn", "reader", "sock")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.sock: socket.socket = conn.sock
        self.reader: BinaryIO = self.sock.makefile("rb")

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            self.conn.close()


class Transport:
    """Requests to the API server at ``host`` (which may carry a path prefix, as an API server
    behind a proxy at ``https://host/k8s/clusters/c1``) through ``manager``, the client's pool
    manager. Safe to share between threads: each request has a connection to itself."""

    def __init__(self, manager: urllib3.PoolManager, host: str) -> None:
        self.host = host.rstrip("/")
        url = urlsplit(self.host)
        self.prefix = url.path
        self.manager = manager
        # A plain pool manager: its one pool for the server. A proxy manager: urllib3 throughout.
        self.pool = manager.connection_from_url(self.host) if type(manager) is urllib3.PoolManager else None
        self._host_header = f"Host: {url.netloc}\r\n".encode("ascii")
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # --- answers read whole ----------------------------------------------------------------------
    def request(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], timeout: tuple[float, float]
    ) -> Answer:
        """``method`` on ``target`` (path and query, without the host's prefix), the answer read
        whole; ``timeout``: (to connect, for each read)."""
        if self.pool is None:
            response = self.stream(method, target, body, headers, timeout)
            try:
                return Answer(response.status, response.data)
            finally:
                response.release_conn()
        head = bytearray(f"{method} {self.prefix}{target} HTTP/1.1\r\n".encode("ascii"))
        head += self._host_header
        for name, value in headers.items():
            if "\r" in value or "\n" in value:  # (as http.client refuses them: no header injection)
                raise ValueError(f"header {name} has a line break")
            head += f"{name}: {value}\r\n".encode("latin-1")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head += f"Content-Length: {len(body or b'')}\r\n".encode("ascii")
        head += b"\r\n"
        connection = self._checkout(timeout)
        try:
            connection.sock.settimeout(timeout[1])
            connection.sock.sendall(bytes(head) + body if body else head)
            answer, keep = _read_answer(connection.reader, method)
        except BaseException:
            connection.close()
            raise
        if keep:
            self._checkin(connection)
        else:
            connection.close()
        return answer

    def _checkout(self, timeout: tuple[float, float]) -> _Connection:
        """A kept-alive connection the server has not closed, else a new one."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                break
            if connection.conn.is_connected:  # (not readable while idle: not closed by the server)
                return connection
            connection.close()
        assert self.pool is not None
        conn = self.pool._new_conn()  # (the pool's connection class and TLS settings)
        conn.timeout = timeout[0]
        conn.connect()
        return _Connection(conn)

    def _checkin(self, connection: _Connection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(connection)
                return
        connection.close()

    # --- streams ---------------------------------------------------------------------------------
    def stream(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str], timeout: tuple[float, float]
    ) -> urllib3.BaseHTTPResponse:
        """The answer as urllib3's response, its body not read yet (a watch)."""
        timeouts = urllib3.Timeout(connect=timeout[0], read=timeout[1])
        if self.pool is not None:
            return self.pool.urlopen(
                method,
                self.prefix + target,
                body=body,
                headers=headers,
                retries=False,
                redirect=False,
                timeout=timeouts,
                preload_content=False,
                assert_same_host=False,
            )
        return self.manager.urlopen(
            method,
            self.host + target,
            body=body,
            headers=headers,
            retries=False,
            redirect=False,
            timeout=timeouts,
            preload_content=False,
        )


def _read_answer(reader: BinaryIO, method: str) -> tuple[Answer, bool]:
    """The answer on ``reader`` and whether the connection may be kept (RFC 9112: a 1xx answer
    is skipped; the body is chunked, ``Content-Length`` long, or runs to the close)."""
    while True:
        line = _line(reader)
        if not line:
            raise ProtocolError("the server closed the connection without answering")
        version, _, rest = line.partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.x answer: {line[:80]!r}")
        status = int(code)
        fields = _headers(reader)
        if not 100 <= status < 200:
            break
    keep = version == b"HTTP/1.1"
    connection = fields.get(b"connection", b"").lower()
    if b"close" in connection:
        keep = False
    elif b"keep-alive" in connection:
        keep = True
    if method == "HEAD" or status in (204, 304):
        return Answer(status, b""), keep
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        return Answer(status, _chunked(reader)), keep
    length = fields.get(b"content-length")
    if length is None:  # to the close
        return Answer(status, reader.read()), False
    if not length.strip().isdigit():
        raise ProtocolError(f"bad Content-Length {length[:40]!r}")
    size = int(length)
    data = reader.read(size)
    if len(data) != size:
        raise ProtocolError(f"answer cut short: {len(data)} of {size} bytes")
    return Answer(status, data), keep


def _line(reader: BinaryIO) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise ProtocolError("answer line too long")
    return line.rstrip(b"\r\n")


def _headers(reader: BinaryIO) -> dict[bytes, bytes]:
    """The header fields (names lowercased; a repeated one's values joined with commas)."""
    fields: dict[bytes, bytes] = {}
    for _ in range(MAX_HEADERS + 1):
        line = _line(reader)
        if not line:
            return fields
        name, colon, value = line.partition(b":")
        if not colon:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        name, value = name.strip().lower(), value.strip()
        fields[name] = fields[name] + b", " + value if name in fields else value
    raise ProtocolError("too many headers")


def _chunked(reader: BinaryIO) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = _line(reader).partition(b";")[0].strip()
        try:
            size = int(size_line, 16)
        except ValueError:
            raise ProtocolError(f"bad chunk size {size_line[:40]!r}") from None
        if size == 0:
            _headers(reader)  # (trailers)
            return b"".join(parts)
        chunk = reader.read(size)
        if len(chunk) != size or reader.read(2) != b"\r\n":
            raise ProtocolError("chunk cut short")
        parts.append(chunk)
