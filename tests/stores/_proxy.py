"""A loopback TCP proxy in front of a real server, whose network the test cuts and restores.

The fault tests stop Redis by stopping a private ``redis-server``. PostgreSQL is the machine's
shared server, which no test may stop: they reach it through this proxy instead, and an outage is
the proxy cutting every connection (reset, so both ends see it at once: the server rolls back
what those connections had open) and refusing new ones, until ``restore`` listens again on the
same port. To the gateway that is a database gone away and back, over a real network.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

from ._server import free_port


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream_host:upstream_port`` while it is up."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = free_port()
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._pumps: set[asyncio.Task[None]] = set()

    @property
    def up(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """Listen on the proxy's port (the same one after a ``cut``)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)

    async def cut(self) -> None:
        """Stop listening and reset every open connection: the server is gone, as far as clients can tell."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for client, upstream in list(self._pairs):
            for writer in (client, upstream):
                _reset(writer)
        self._pairs.clear()
        for pump in list(self._pumps):
            pump.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)

    async def restore(self) -> None:
        """Listen again on the same port."""
        await self.start()

    async def aclose(self) -> None:
        await self.cut()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _reset(writer)
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        pumps = [
            asyncio.create_task(self._pump(reader, up_writer)),
            asyncio.create_task(self._pump(up_reader, writer)),
        ]
        self._pumps.update(pumps)
        try:
            await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._pumps.difference_update(pumps)
            self._pairs.discard(pair)
            for end in pair:
                end.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.write_eof()  # one side closed: pass the close on (the other pump ends with it)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0) rather than a polite FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
