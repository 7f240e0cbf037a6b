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
Next stage: :mod:`rulesched.run.pipeline` binds with channels.
"""

from __future__ import annotations

import http.client
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

    def open(self) -> None:
        """Connect now (TCP, and TLS: a round trip or two and the certificates' checks) rather
        than in the first :meth:`send`; a failure closes the channel."""
        try:
            self._connection.connect()
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as err:
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
        if self.dropped:
            connection.close()  # (the server closed it while idle: open it again, as the pool would)
        try:
            connection.request(
                method,
                self._prefix + path,
                body=data,
                headers=self._headers(data is not None, content_type, answer),
                preload_content=False,
            )
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as err:
            self._failed(method, started)
            raise UnavailableError(f"{method} {path}: {err}") from None
        self._asked = (method, path, started, content_type, answer)

    def receive(self) -> Any:
        """The answer to the request sent: its JSON (None if empty), or the KubeError it is."""
        assert self._asked is not None, "nothing was sent"
        method, path, started, content_type, answer = self._asked
        self._asked = None
        try:
            response = self._connection.getresponse()
            data = response.data
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as err:
            self._failed(method, started)
            raise UnavailableError(f"{method} {path}: {err}") from None
        status = response.status
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
