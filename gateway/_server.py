"""``serve_app``: run a gateway app on a TCP port until SIGINT or SIGTERM, as ``serve`` does.

It does what ``aiohttp.web.run_app`` does (an ``AppRunner``, a site, a clean shutdown) through a
site of its own, so that connections can be counted per address where they open and close (see
``gateway._guard`` for why there). Without ``trust_forwarded`` a connection from an address that
already holds ``max_connections_per_address`` is answered 429 and closed before a byte of it is
read; behind a trusted proxy the limit is the app's middleware's, per forwarded address.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
from collections.abc import Callable
from typing import Any, cast

from aiohttp import web

from ._guard import AddressCounter, log_refusal
from ._services import SERVICES
from ._settings import Settings

__all__ = ["serve_app"]

_LINGER = 1.0
"""Seconds a refused connection stays half-open for its client to read the answer and leave."""
_MESSAGE = "Too many connections from this address; close some and try again"
_TOO_MANY = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%b"
)


def _too_many_answer() -> bytes:
    body = json.dumps({"code": "too_many_connections", "message": _MESSAGE}).encode()
    return _TOO_MANY % (len(body), body)


class _CountedConnection(asyncio.Protocol):
    """One accepted connection: counted against its address, then served by aiohttp's handler.

    Over the limit, the connection is answered 429 and closed, and no handler is made for it.
    Every other event is passed to the handler as it comes.
    """

    __slots__ = ("_address", "_counter", "_handler", "_make_handler", "_refused")

    def __init__(
        self,
        make_handler: Callable[[], asyncio.Protocol],
        counter: AddressCounter,
        refused: Callable[[str], None],
    ) -> None:
        self._make_handler = make_handler
        self._counter = counter
        self._refused = refused
        self._handler: asyncio.Protocol | None = None
        self._address: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the connection, or refuse it."""
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else None
        if address is not None:
            if not self._counter.acquire(address):
                self._refuse(cast(asyncio.Transport, transport))  # uvloop's are not asyncio.Transport subclasses
                self._refused(address)
                return
            self._address = address
        self._handler = self._make_handler()
        self._handler.connection_made(transport)

    @staticmethod
    def _refuse(transport: asyncio.Transport) -> None:
        """Answer 429 and end our side; close when the client has read it and left, or after ``_LINGER`` s.

        Closing at once would reset a connection whose request is unread, and the client would
        see the reset instead of the answer.
        """
        transport.write(_too_many_answer())
        transport.write_eof()
        asyncio.get_running_loop().call_later(_LINGER, transport.close)

    def data_received(self, data: bytes) -> None:
        """Pass the bytes to the handler (a refused connection's are dropped)."""
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        """Pass the end of the client's stream to the handler (a refused connection then closes)."""
        return self._handler.eof_received() if self._handler is not None else False

    def pause_writing(self) -> None:
        """Pass the transport's back-pressure to the handler."""
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        """Pass the transport's back-pressure to the handler."""
        if self._handler is not None:
            self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """Free the address's place, then tell the handler."""
        if self._address is not None:
            self._counter.release(self._address)
            self._address = None
        if self._handler is not None:
            self._handler.connection_lost(exc)


class _CountedSite(web.BaseSite):
    """A TCP site whose connections are counted per address (``counter=None``: not counted)."""

    __slots__ = ("_counter", "_host", "_port", "_refused")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        counter: AddressCounter | None,
        refused: Callable[[str], None],
    ) -> None:
        super().__init__(runner)
        self._host = host
        self._port = port
        self._counter = counter
        self._refused = refused

    @property
    def name(self) -> str:
        """The URL it listens at."""
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        """Listen."""
        await super().start()
        server = self._runner.server
        assert server is not None
        factory: Callable[[], asyncio.Protocol] = server
        if self._counter is not None:
            factory = functools.partial(_CountedConnection, server, self._counter, self._refused)
        self._server = await asyncio.get_running_loop().create_server(factory, self._host, self._port)


async def serve_app(
    app: web.Application, settings: Settings, *, ready: Callable[[], None], shutdown_timeout: float = 60.0
) -> None:
    """Serve ``app`` on ``settings.host``/``settings.port`` until SIGINT or SIGTERM, then shut it down.

    Args:
        app: A gateway app (``create_app``).
        settings: Where to listen, whether behind a proxy, and the per-address limit.
        ready: Called once the port is bound (it answers from then on).
        shutdown_timeout: Seconds open requests get to finish when stopping.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, stop.set)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    try:
        await runner.setup()
        services: Any = app.get(SERVICES)

        def refused(address: str) -> None:
            if services is not None:
                services.metrics.connections_refused.inc()
            log_refusal(429, "too_many_connections", f"connection from {address}", _MESSAGE)

        counter = None if settings.trust_forwarded else AddressCounter(settings.max_connections_per_address)
        site = _CountedSite(runner, settings.host, settings.port, counter=counter, refused=refused)
        await site.start()
        ready()
        await stop.wait()
    finally:
        await runner.cleanup()
        for number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(number)
