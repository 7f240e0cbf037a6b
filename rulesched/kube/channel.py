"""One kept-alive connection of the client's pool, with its request and its answer apart.

:meth:`KubeApi._call <rulesched.kube.api.KubeApi>` sends a request and waits for its answer, so
a caller keeps N requests in flight with N threads. The binding process did that with sixteen,
and about half of its CPU went to them handing the interpreter lock to each other (a thread
woken for each answer, in the kernel as much as in Python). A :class:`Channel` is one
connection of the same pool (same host, TLS settings, credentials and User-Agent) on which the
request is :meth:`~Channel.send`-t now and its answer :meth:`~Channel.receive`-d later, so one
thread sends a request on each of several channels and reads each answer as it comes (waiting on
their sockets at once), while the API server works on all of them (:mod:`rulesched.run.pipeline`). Answers become the same values
and errors as :meth:`KubeApi._call`'s; each request is reported to the API's observer (the
``rest_client`` metrics) with its time from send to answer.

A channel whose request or answer failed is closed: the caller drops it and asks for a new one.
Bodies are encoded as :meth:`KubeApi.encode <rulesched.kube.api.KubeApi.encode>` encodes them
(bindings and events in protobuf); a 415 to a protobuf body fails that request and turns the
API's protobuf off, so the caller's next try goes as JSON.
The request and its answer are HTTP/1.1 written and read here, on the connection's socket: the
binding process sends two small requests a pod (a binding, an event) and reads two small answers
whose bodies it does not use, and http.client's request building and header parsing (the email
package's parser, an object per header) were most of its CPU (py-spy of the mixed benchmark:
0.7 ms a request, 40% of rulesched's CPU per pod). What is read: the status, Content-Length or
chunked, ``Connection: close``; a body without a length is read to the end of the connection.
Next stage: :mod:`rulesched.run.pipeline` binds with channels.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Callable
from typing import Any

import msgspec
import urllib3
from urllib3.util.connection import is_connection_dropped

from rulesched.errors import KubeError, UnavailableError

# (method, code, seconds): what KubeApi reports of each request to its observer
Observe = Callable[[str, str, float | None], None]


class Channel:
    """(One thread's.) A connection: at most one request without its answer at a time."""

    def __init__(
        self,
        connection: Any,
        prefix: str,
        headers: Callable[[bool, str, bool], dict[str, str]],
        observe: Observe,
        error: Callable[[str, str, int, bytes], KubeError],
        encode: Callable[[Any], tuple[bytes, str]],
        refused: Callable[[int, str], bool],
    ) -> None:
        self._connection = connection  # an urllib3 HTTP(S)Connection of the client's pool
        self._prefix = prefix  # the API server's path prefix (behind a proxy at https://host/k8s/c1)
        self._headers = (
            headers  # (has a body, its type, answer read) -> the request's headers: the client's credentials
        )
        self._encode_body = encode  # body -> (bytes, Content-Type)
        self._refused = refused  # (status, Content-Type sent) -> whether the server refused that encoding
        self._observe = observe
        self._error = error
        # (method, path, sent at, Content-Type, answer read): the request awaiting its answer
        self._asked: tuple[str, str, float, str, bool] | None = None
        self.closed = False
        host = connection.host if ":" not in connection.host else f"[{connection.host}]"  # (an IPv6 address)
        port = connection.port
        self._host = f"Host: {host}" + ("" if port in (None, connection.default_port) else f":{port}")

    def open(self) -> None:
        """Connect now (TCP, and TLS: a round trip or two and the certificates' checks) rather
        than in the first :meth:`send`; a failure closes the channel."""
        try:
            self._connection.connect()
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            self.close()
            raise UnavailableError(f"connecting: {err}") from None

    @property
    def dropped(self) -> bool:
        """Whether the server closed the connection while it was idle (a connection not opened
        yet was not dropped: :meth:`send` opens it). urllib3's check takes any byte waiting as
        the end; but a TLS 1.3 server (kube-apiserver: Go's) sends its session tickets just
        after the handshake, so a connection opened ahead (:meth:`open`) always had some: they
        are read here, and only an end of stream (or bytes no request asked for) is dropped."""
        sock = self._connection.sock
        if sock is None or not is_connection_dropped(self._connection):
            return False
        timeout = sock.gettimeout()
        try:
            sock.settimeout(0.0)
            return not sock.recv(1)  # (b"": the end; a byte: an answer to nothing, as broken)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False  # (TLS records only, no data: open)
        except OSError:
            return True
        finally:
            try:
                sock.settimeout(timeout)
            except OSError:
                pass

    def send(self, method: str, path: str, body: Any = None, answer: bool = True) -> None:
        """Send a request (with ``body`` if given, encoded as the API encodes it); its answer
        is :meth:`receive`'s (``answer`` False: None, asked for in the cheaper encoding, as
        :meth:`KubeApi._call <rulesched.kube.api.KubeApi._call>`)."""
        assert self._asked is None and not self.closed, "one request at a time, on an open channel"
        data, content_type = (None, "") if body is None else self._encode_body(body)
        started = time.perf_counter()
        connection = self._connection
        try:
            if self.dropped:
                connection.close()  # (the server closed it while idle: open it again, as the pool would)
            if connection.sock is None:
                connection.connect()  # (the pool's connection: its TLS, certificates and timeouts)
            connection.sock.sendall(
                self._request(method, path, data, self._headers(data is not None, content_type, answer))
            )
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as err:
            self._failed(method, started)
            raise UnavailableError(f"{method} {path}: {err}") from None
        self._asked = (method, path, started, content_type, answer)

    def _request(self, method: str, path: str, data: bytes | None, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {self._prefix}{path} HTTP/1.1", self._host]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if data is not None or method in _BODIED:  # (as http.client: a POST without a body says 0)
            lines.append(f"Content-Length: {len(data or b'')}")
        if _UNSAFE.search("".join(lines)):  # (a header value from a kubeconfig must not make a second request)
            raise ValueError("a request line or header holds a line break")
        return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (data or b"")

    def receive(self) -> Any:
        """The answer to the request sent: its JSON (None if empty), or the KubeError it is."""
        assert self._asked is not None, "nothing was sent"
        method, path, started, content_type, answer = self._asked
        self._asked = None
        try:
            status, data, keep = _read_answer(self._connection.sock)
        except (OSError, ValueError) as err:
            self._failed(method, started)
            raise UnavailableError(f"{method} {path}: {err}") from None
        if not keep:  # (the server said so, or the body ran to its end: the next request connects again)
            self._connection.close()
        self._observe(method, str(status), time.perf_counter() - started)
        if status >= 400:
            self._refused(status, content_type)
            raise self._error(method, path, status, data)
        if not answer:
            return None
        try:
            return _decode(data) if data else None
        except msgspec.DecodeError as err:
            raise KubeError(f"{method} {path}: {status} with a body that is not JSON: {err}", status) from None

    @property
    def connected(self) -> bool:
        """Whether its connection is open (the server may have closed it with an answer:
        ``Connection: close``, or a body read to the end of the connection)."""
        return self._connection.sock is not None

    def fileno(self) -> int:
        """The connection's socket (open while a request awaits its answer), to wait on it in a
        selector with other channels' (:mod:`rulesched.run.pipeline`)."""
        return int(self._connection.sock.fileno())

    @property
    def timeout(self) -> float:
        """Seconds an answer may take (the client's timeout)."""
        timeout = self._connection.timeout
        return float(timeout) if isinstance(timeout, int | float) else 30.0

    def close(self) -> None:
        self.closed = True
        try:
            self._connection.close()
        except OSError:
            pass

    def _failed(self, method: str, started: float) -> None:
        self._observe(method, "<error>", time.perf_counter() - started)
        self.close()  # (half a request may be on the wire, or half an answer unread: never reuse it)


_decode = msgspec.json.Decoder().decode
_BODIED = frozenset(("POST", "PUT", "PATCH"))
_UNSAFE = re.compile(r"[\r\n\0]")
_READ_SIZE = 65536
_HEAD_LIMIT = 65536  # an answer's status line and headers, at most (the API server's are a few hundred bytes)


def _read_answer(sock: Any) -> tuple[int, bytes, bool]:
    """One HTTP/1.1 answer from ``sock``: (status, body, whether the connection stays usable).
    Interim answers (1xx) are skipped; ValueError for what is not HTTP, OSError as the socket
    raises it (its timeout too), ConnectionError when it ends before the answer does."""
    buffer = b""
    while True:
        end = buffer.find(b"\r\n\r\n")
        while end < 0:
            if len(buffer) > _HEAD_LIMIT:
                raise ValueError("an answer's headers too long")
            buffer += _recv(sock)
            end = buffer.find(b"\r\n\r\n")
        head, buffer = buffer[:end].decode("latin-1").split("\r\n"), buffer[end + 4 :]
        version, _, rest = head[0].partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise ValueError(f"not an HTTP answer: {head[0][:80]!r}")
        status = int(rest[:3])
        if 100 <= status < 200:
            continue
        fields: dict[str, str] = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip()
        connection = fields.get("connection", "").lower()
        keep = connection != "close" and (version != "HTTP/1.0" or connection == "keep-alive")
        if status in (204, 304):
            return status, b"", keep and not buffer
        if "chunked" in fields.get("transfer-encoding", "").lower():
            body, buffer = _chunked(sock, buffer)
        elif "content-length" in fields:
            length = int(fields["content-length"])
            while len(buffer) < length:
                buffer += _recv(sock)
            body, buffer = buffer[:length], buffer[length:]
        else:  # (no length: the body is what comes until the server closes)
            chunks = [buffer]
            while chunk := sock.recv(_READ_SIZE):
                chunks.append(chunk)
            return status, b"".join(chunks), False
        return status, body, keep and not buffer  # (bytes past the answer: the connection is not trusted)


def _chunked(sock: Any, buffer: bytes) -> tuple[bytes, bytes]:
    """A chunked body (its trailers skipped) and what came after it."""
    parts: list[bytes] = []
    while True:
        end = buffer.find(b"\r\n")
        while end < 0:
            buffer += _recv(sock)
            end = buffer.find(b"\r\n")
        size = int(buffer[:end].split(b";", 1)[0], 16)
        buffer = buffer[end + 2 :]
        if size == 0:
            end = buffer.find(b"\r\n")
            while True:  # (trailer lines until an empty one)
                while end < 0:
                    buffer += _recv(sock)
                    end = buffer.find(b"\r\n")
                line, buffer = buffer[:end], buffer[end + 2 :]
                if not line:
                    return b"".join(parts), buffer
                end = buffer.find(b"\r\n")
        while len(buffer) < size + 2:
            buffer += _recv(sock)
        parts.append(buffer[:size])
        buffer = buffer[size + 2 :]


def _recv(sock: Any) -> bytes:
    data = sock.recv(_READ_SIZE)
    if not data:
        raise ConnectionError("the connection closed before the whole answer came")
    return bytes(data)
