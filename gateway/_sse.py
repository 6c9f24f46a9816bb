"""``SseStream``: one ``text/event-stream`` answer, for every channel that streams (AG-UI, A2A).

A frame is its ``id:``, ``event:`` and ``data:`` lines and a blank line (the WHATWG server-sent
events format; ``sse_frame`` writes one, a ``data`` with newlines over several ``data:`` lines).
``serve`` runs a channel's pump beside a heartbeat in one task group: the heartbeat writes a
comment line (``: keep-alive``) every ``heartbeat`` seconds, which keeps proxies from closing a
quiet stream and is how a client that left is noticed while the pump waits for events. The first
to finish (the pump at its end, either one when the client is gone) cancels the other; a client
that left ends the stream quietly (``serve`` returns ``False``), anything else propagates.

Writes go through one lock, so a heartbeat never lands inside a frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Coroutine, Mapping
from typing import Any, NoReturn

from aiohttp import web

__all__ = ["SseStream", "sse_frame"]

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
        """Write frames already encoded (``sse_frame``), in one write.

        Raises:
            ConnectionError: The client went away.
        """
        if chunk:
            async with self._lock:
                await self.response.write(chunk.encode("utf-8") if isinstance(chunk, str) else chunk)

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
            async with asyncio.TaskGroup() as group:
                beat = group.create_task(self._beat())
                work = group.create_task(pump)
                work.add_done_callback(lambda _: beat.cancel())
        except* ConnectionError:
            stayed = False
        finally:
            pump.close()  # never started when prepare failed: no "never awaited" warning
        await self.close()
        return stayed

    async def close(self) -> None:
        """End the stream (quietly when the client already left)."""
        with contextlib.suppress(ConnectionError):
            await self.response.write_eof()
