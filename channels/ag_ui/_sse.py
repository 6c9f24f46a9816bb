"""``SseResponse``: AG-UI events as server-sent events, each frame with an ``id:`` line.

Frames are what ``ag_ui.encoder.EventEncoder`` writes (``data: <json>``) preceded by ``id: <seq>``,
the thread's position after that frame: a client that reconnects with ``Last-Event-ID`` (or
``?after=``) gets exactly what follows. Every frame made from one of our events carries that
event's ``seq`` and they go out in one write, so a position never splits an event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any, NoReturn

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder
from aiohttp import web

__all__ = ["KEEPALIVE_SECONDS", "SseResponse", "encode_frames", "race"]

KEEPALIVE_SECONDS = 15.0
"""Seconds of silence after which a comment line keeps proxies from closing the stream."""

_ENCODER = EventEncoder()
_HEADERS = {
    "Content-Type": _ENCODER.get_content_type(),
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
}


def encode_frames(events: Sequence[BaseEvent], event_id: int) -> bytes:
    """The SSE frames of ``events``, each with ``id: event_id``."""
    return "".join(f"id: {event_id}\n{_ENCODER.encode(event)}" for event in events).encode("utf-8")


async def race(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Run ``coroutines`` together; when the first returns, cancel the others.

    An exception in one cancels the others too and propagates (in an ``ExceptionGroup``).
    """
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(coroutine) for coroutine in coroutines]

        def stop_others(done: asyncio.Task[None]) -> None:
            for task in tasks:
                if task is not done:
                    task.cancel()

        for task in tasks:
            task.add_done_callback(stop_others)


class SseResponse:
    """One ``text/event-stream`` answer, written by one task at a time."""

    def __init__(self, request: web.Request, *, keepalive: float = KEEPALIVE_SECONDS) -> None:
        self.request = request
        self.keepalive = keepalive
        self.response = web.StreamResponse(headers=_HEADERS)
        self._lock = asyncio.Lock()

    async def prepare(self) -> web.StreamResponse:
        """Send the status and headers: from here on, errors travel as ``RUN_ERROR``."""
        await self.response.prepare(self.request)
        return self.response

    async def send(self, events: Sequence[BaseEvent], event_id: int) -> None:
        """Write ``events`` as frames with ``id: event_id``.

        Raises:
            ConnectionError: The client went away.
        """
        if events:
            async with self._lock:
                await self.response.write(encode_frames(events, event_id))

    async def keep_alive(self) -> NoReturn:
        """Write a comment line every ``keepalive`` seconds, until cancelled or the client is gone.

        Raises:
            ConnectionError: The client went away (which is how a silent stream notices).
        """
        while True:
            await asyncio.sleep(self.keepalive)
            async with self._lock:
                await self.response.write(b": keep-alive\n\n")

    async def finish(self) -> None:
        """End the stream (quietly when the client already left)."""
        try:
            await self.response.write_eof()
        except ConnectionError:
            pass
