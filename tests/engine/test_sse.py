"""``SseStream`` / ``sse_frame``: the one SSE helper AG-UI and A2A stream through."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import ClientSession, web

from gateway import SseStream, sse_frame


def test_a_frame_is_its_id_event_and_data_lines_then_a_blank_line() -> None:
    assert sse_frame('{"a":1}') == 'data: {"a":1}\n\n'
    assert sse_frame("x", id=7, event="error") == "id: 7\nevent: error\ndata: x\n\n"
    assert sse_frame("one\ntwo\r\nthree") == "data: one\ndata: two\ndata: three\n\n"
    # Only CR / LF end a line: U+2028 and friends stay inside the data line, as JSON keeps them.
    assert sse_frame('"a\u2028b\x85c"') == 'data: "a\u2028b\x85c"\n\n'
    assert sse_frame("") == "data: \n\n"


async def test_a_stream_sends_frames_and_heartbeats_then_ends(aiohttp_client: Any) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        stream = SseStream(request, heartbeat=0.01, cache_control="no-store")
        stream.response.headers["X-Extra"] = "1"
        beat = asyncio.Event()
        comment = stream.comment

        async def heard(text: str = "keep-alive") -> None:
            await comment(text)
            beat.set()

        stream.comment = heard  # type: ignore[method-assign]

        async def pump() -> None:
            await stream.send("first", id=1)
            await beat.wait()  # a heartbeat went out meanwhile
            await stream.write(sse_frame("last", id=2, event="end"))

        assert await stream.serve(pump()) is True
        return stream.response

    app = web.Application()
    app.router.add_get("/s", handler)
    client = await aiohttp_client(app)
    async with asyncio.timeout(5):
        response = await client.get("/s")
        body = await response.text()
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["X-Accel-Buffering"] == "no"
    assert response.headers["X-Extra"] == "1"
    assert body.startswith("id: 1\ndata: first\n\n")
    assert ": keep-alive\n\n" in body
    assert body.endswith("id: 2\nevent: end\ndata: last\n\n")


async def test_a_client_that_leaves_ends_the_stream_quietly_and_stops_the_pump() -> None:
    # A real runner, as ``serve`` runs one: the test server cancels a handler whose client left
    # (handler_cancellation), which would hide what the stream itself does.
    outcome: asyncio.Future[tuple[bool, bool]] = asyncio.get_running_loop().create_future()

    async def handler(request: web.Request) -> web.StreamResponse:
        stream = SseStream(request, heartbeat=0.01)
        stopped = asyncio.Event()

        async def pump() -> None:
            await stream.send("hello")
            try:
                await asyncio.Event().wait()  # events that never come: only the heartbeat notices
            finally:
                stopped.set()

        stayed = await stream.serve(pump())
        outcome.set_result((stayed, stopped.is_set()))
        return stream.response

    app = web.Application()
    app.router.add_get("/s", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with ClientSession() as session, asyncio.timeout(5):
            response = await session.get(f"http://127.0.0.1:{port}/s")
            assert await response.content.readline() == b"data: hello\n"
            response.close()  # the client goes away
            stayed, stopped = await outcome
        assert (stayed, stopped) == (False, True)
    finally:
        await runner.cleanup()
