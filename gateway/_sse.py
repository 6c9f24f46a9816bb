"""``SseStream``: one ``text/event-stream`` answer, for every channel that streams (AG-UI, A2A).

A frame is its ``id:``, ``event:`` and ``data:`` lines and a blank line (the WHATWG server-sent
events format; ``sse_frame`` writes one, a ``data`` with newlines over several ``data:`` lines).
``serve`` runs a channel's pump beside a heartbeat in one task group: the heartbeat writes a
comment line (``: keep-alive``) every ``heartbeat`` seconds, which keeps proxies from closing a
quiet stream and is how a client that left is noticed while the pump waits for events. The first
to finish (the pump at its end, either one when the client is gone) cancels the other; a client
that left ends the stream quietly (``serve`` returns ``False``), anything else propagates.

Writes go through one lock, so a heartbeat never lands inside a frame. ``queue`` batches: while
``serve`` runs, the frames a pump queues in one event-loop turn (the events that were ready
together) go out in one write on the next turn, from a flusher task in the same task group; past
``FLUSH_BYTES`` queued they go at once, in the pump's task (a slow client holds the pump back).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Coroutine, Mapping
from typing import Any, NoReturn

from aiohttp import web

__all__ = ["FLUSH_BYTES", "SseStream", "sse_frame"]

FLUSH_BYTES = 32 * 1024
"""Queued characters past which ``SseStream.queue`` writes at once."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def sse_frame(data: str, *, id: int | str | None = None, event: str | None = None) -> str:
    """One server-sent event: ``id:``, ``event:`` and ``data:`` lines, then a blank line.

    ``data`` holding line breaks goes out as one ``data:`` line per line (the client joins them
    back with a line feed); JSON text has none.
    """
    head = ""
    if id is not None:
        head += f"id: {id}\n"
    if event is not None:
        head += f"event: {event}\n"
    # Only CR, LF and CRLF end an SSE line (not U+2028 and the others ``str.splitlines`` knows):
    # JSON text keeps those characters raw, inside one line.
    return head + "".join(f"data: {line}\n" for line in _LINE_BREAK.split(data)) + "\n"


class SseStream:
    """One ``text/event-stream`` answer to ``request``.

    Args:
        request: The request being answered.
        heartbeat: Seconds between keep-alive comments while ``serve`` runs.
        content_type: The ``Content-Type`` (``text/event-stream``, with a charset if the protocol
            wants one named).
        cache_control: The ``Cache-Control`` (``no-cache``, ``no-store``).
        headers: More headers (a channel's cookie goes on ``response`` before ``prepare``).
    """

    def __init__(
        self,
        request: web.Request,
        *,
        heartbeat: float = 15.0,
        content_type: str = "text/event-stream",
        cache_control: str = "no-cache",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.request = request
        self.heartbeat = heartbeat
        self.response = web.StreamResponse(
            headers={
                "Content-Type": content_type,
                "Cache-Control": cache_control,
                "X-Accel-Buffering": "no",  # proxies (nginx) must not hold frames back
                **(headers or {}),
            }
        )
        """The answer: add headers or cookies to it before ``prepare``."""
        self._lock = asyncio.Lock()
        self._queued: list[str] = []
        self._queued_size = 0
        self._ready: asyncio.Future[None] | None = None
        """Set while ``serve`` runs: resolved to wake the flusher."""

    @property
    def prepared(self) -> bool:
        """Whether the status and headers went out."""
        return self.response.prepared

    async def prepare(self) -> web.StreamResponse:
        """Send the status and headers: from here on, errors travel inside the stream."""
        if not self.response.prepared:
            await self.response.prepare(self.request)
        return self.response

    async def write(self, chunk: str | bytes) -> None:
        """Write frames already encoded (``sse_frame``), after those queued, in one write.

        Raises:
            ConnectionError: The client went away.
        """
        async with self._lock:
            data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
            if self._queued:
                data = "".join(self._queued).encode("utf-8") + data
                self._queued, self._queued_size = [], 0
            if data:
                await self.response.write(data)

    async def queue(self, chunk: str) -> None:
        """Write frames already encoded with whatever else is queued, one event-loop turn from now.

        Outside ``serve`` (nobody flushes) and past ``FLUSH_BYTES`` queued, this writes at once.

        Raises:
            ConnectionError: The client went away.
        """
        if not chunk:
            return
        self._queued.append(chunk)
        self._queued_size += len(chunk)
        ready = self._ready
        if ready is None or self._queued_size >= FLUSH_BYTES:
            await self.flush()
        elif not ready.done():
            ready.set_result(None)

    async def flush(self) -> None:
        """Write what is queued now.

        Raises:
            ConnectionError: The client went away.
        """
        await self.write(b"")

    async def send(self, data: str, *, id: int | str | None = None, event: str | None = None) -> None:
        """Write one frame (see ``sse_frame``).

        Raises:
            ConnectionError: The client went away.
        """
        await self.write(sse_frame(data, id=id, event=event))

    async def comment(self, text: str = "keep-alive") -> None:
        """Write a comment line, which clients ignore.

        Raises:
            ConnectionError: The client went away.
        """
        await self.write(f": {text}\n\n")

    async def _beat(self) -> NoReturn:
        while True:
            await asyncio.sleep(self.heartbeat)
            await self.comment()

    async def _flusher(self) -> NoReturn:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queued:
                if self._ready is None or self._ready.done():
                    self._ready = loop.create_future()
                await self._ready  # resolved by the first queue: this task runs on the next turn
            await self.flush()

    async def _work(self, pump: Coroutine[Any, Any, None]) -> None:
        await pump
        await self.flush()

    async def serve(self, pump: Coroutine[Any, Any, None]) -> bool:
        """Prepare, run ``pump`` beside the heartbeat until it returns or the client leaves, then end.

        Returns:
            ``True`` when the pump finished, ``False`` when the client went away first (its
            ``ConnectionError`` ends the stream quietly).

        Raises:
            ExceptionGroup: What the pump raised, other than the client leaving.
        """
        stayed = True
        try:
            await self.prepare()
            self._ready = asyncio.get_running_loop().create_future()  # queue waits for the flusher now
            async with asyncio.TaskGroup() as group:
                beat = group.create_task(self._beat())
                flusher = group.create_task(self._flusher())
                work = group.create_task(self._work(pump))
                work.add_done_callback(lambda _: (beat.cancel(), flusher.cancel()))
        except* ConnectionError:
            stayed = False
        finally:
            self._ready = None
            pump.close()  # never started when prepare failed: no "never awaited" warning
        await self.close()
        return stayed

    async def close(self) -> None:
        """End the stream (quietly when the client already left)."""
        with contextlib.suppress(ConnectionError):
            await self.response.write_eof()
