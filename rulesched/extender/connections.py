"""The extender's connections: a deadline on each request's headers, which aiohttp lacks.

aiohttp bounds a request's body only through the handler (:mod:`.server` reads it under the
request's deadline) and an idle connection through its keep-alive timeout, but not the headers:
a client can trickle a header line a byte at a time and hold its connection open indefinitely.
:class:`Guarded` stands between the transport and aiohttp's protocol for each connection: the
first byte of a request starts a timer, the handler starting (headers complete) stops it, and a
request whose headers are not complete when it fires has its connection closed, logged in one
line. Everything else passes through unchanged.
Next stage: :mod:`.server` serves the requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class Guarded(asyncio.Protocol):
    """One connection: aiohttp's protocol ``inner`` behind a header deadline."""

    def __init__(self, inner: asyncio.Protocol, timeout: float, registry: dict[object, Guarded]) -> None:
        self.inner, self.timeout, self.registry = inner, timeout, registry
        self.transport: asyncio.BaseTransport | None = None
        self.in_request = False
        self._timer: asyncio.TimerHandle | None = None
        registry[inner] = self

    # --- what the handler says -----------------------------------------------------------------
    def request_started(self) -> None:
        self.in_request = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def request_done(self) -> None:
        self.in_request = False

    def _expire(self) -> None:
        self._timer = None
        if self.in_request or self.transport is None:
            return
        peer = self.transport.get_extra_info("peername")
        log.warning("closing a connection from %s: request headers incomplete after %gs", peer, self.timeout)
        self.transport.close()

    # --- asyncio.Protocol, passed on ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if not self.in_request and self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.timeout, self._expire)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.registry.pop(self.inner, None)
        self.transport = None
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


def guarded_factory(
    factory: Callable[[], Any], timeout: float, registry: dict[object, Guarded]
) -> Callable[[], asyncio.Protocol]:
    """A protocol factory for ``loop.create_server``: aiohttp's ``factory`` (its web.Server),
    each connection :class:`Guarded`; ``registry`` maps aiohttp's protocol (a request's
    ``protocol``) to its guard."""

    def make() -> asyncio.Protocol:
        return Guarded(factory(), timeout, registry)

    return make
