"""Server-sent events: JSON-RPC responses streamed as ``data:`` frames until done or the caller leaves."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator

from aiohttp import web

__all__ = ["stream_frames"]

logger = logging.getLogger("channels.a2a")

_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Accel-Buffering": "no",  # proxies (nginx) must not hold frames back
}


async def stream_frames(
    request: web.Request, frames: AsyncGenerator[bytes, None], *, heartbeat: float
) -> web.StreamResponse:
    """Answer ``request`` with ``frames`` (already SSE-encoded) as they come.

    Two tasks in one group: the pump writes frames; the watch writes a comment on a quiet
    stream every ``heartbeat`` seconds, which is also how a caller that left is noticed while
    the pump waits. The first to finish (or fail) ends the other. Nothing here owns the run
    whose events the frames carry: a caller leaving stops this stream only.
    """
    response = web.StreamResponse(headers=_HEADERS)
    await response.prepare(request)
    lock = asyncio.Lock()

    async def send(chunk: bytes) -> None:
        async with lock:
            await response.write(chunk)

    async def pump(watch: asyncio.Task[None]) -> None:
        try:
            async for frame in frames:
                await send(frame)
        finally:
            watch.cancel()

    async def watch() -> None:
        while True:
            await asyncio.sleep(heartbeat)
            await send(b": keep-alive\n\n")

    try:
        async with asyncio.TaskGroup() as group:
            watcher = group.create_task(watch())
            group.create_task(pump(watcher))
    except* ConnectionResetError:
        logger.debug("an A2A caller left its stream")
    finally:
        await frames.aclose()
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response
