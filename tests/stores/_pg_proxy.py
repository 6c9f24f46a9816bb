"""A TCP proxy in front of the test PostgreSQL, to make the network fail on purpose.

The server stays real; the proxy only forwards bytes, and can cut every connection, refuse new
ones (``down``/``up``), or lose the reply to one query: the query reaches the server and runs to
its commit, the answer never reaches the client, whose connection then drops.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit


class PgProxy:
    def __init__(self, dsn: str) -> None:
        parts = urlsplit(dsn)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._dsn = dsn
        self._server: asyncio.Server | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._lose_after: bytes | None = None
        self.port = 0
        self.lost = asyncio.Event()
        """Set once a reply was lost."""

    @property
    def dsn(self) -> str:
        """The DSN of the database, through the proxy."""
        parts = urlsplit(self._dsn)
        return parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{self.port}").geturl()

    async def __aenter__(self) -> PgProxy:
        await self.up()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.down()

    async def up(self) -> None:
        """Accept connections (on the same port as before, if there was one)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Refuse new connections and cut every open one."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cut(self) -> None:
        """Close every open connection (both sides), as a network failure would."""
        for client, server in list(self._pairs):
            client.transport.abort()
            server.transport.abort()
        self._pairs.clear()

    def lose_reply_after(self, marker: bytes) -> None:
        """The next message from a client that contains ``marker`` is forwarded; its reply is lost."""
        self.lost.clear()
        self._lose_after = marker

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        doomed = asyncio.Event()
        to_server = asyncio.create_task(self._pump(reader, up_writer, watch=doomed))
        to_client = asyncio.create_task(self._pump(up_reader, writer, doom=doomed))
        self._tasks.update((to_server, to_client))
        try:
            await asyncio.wait([to_server, to_client], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (to_server, to_client):
                task.cancel()
                self._tasks.discard(task)
            self._pairs.discard(pair)
            writer.transport.abort()
            up_writer.transport.abort()

    async def _pump(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        *,
        watch: asyncio.Event | None = None,
        doom: asyncio.Event | None = None,
    ) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while data := await source.read(65536):
                if watch is not None and self._lose_after is not None and self._lose_after in data:
                    self._lose_after = None
                    watch.set()  # the server's answer to this is dropped, and the connection with it
                if doom is not None and doom.is_set():
                    self.lost.set()
                    return
                sink.write(data)
                await sink.drain()
