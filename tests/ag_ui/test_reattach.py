"""Re-attaching: ``GET /agent/ag-ui/threads/{thread_id}/events?after=`` (or ``Last-Event-ID``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from channels.ag_ui import AG_UI_OPTIONS, AgUiOptions
from gateway import SERVICES, Agent, Runtime, create_app
from gateway.events import Usage
from gateway.models import ModelRequest, TextChunk

from .conftest import (
    Client,
    Frame,
    Shop,
    approve,
    auth,
    new_id,
    parse_sse,
    post,
    reattach,
    run,
    run_input,
    scripted_runtime,
    settings,
    types,
)


async def read_until(response: Any, kind: str) -> tuple[list[Frame], str]:
    """Read a live stream frame by frame until a frame of ``kind``; also return the raw text read."""
    frames: list[Frame] = []
    text = ""
    async with asyncio.timeout(5):
        while not frames or frames[-1].type != kind:
            chunk = (await response.content.readuntil(b"\n\n")).decode()
            text += chunk
            frames.extend(parse_sse(chunk))
    return frames, text


async def test_reattach_replays_a_finished_conversation_with_the_clients_run_ids(client: Client) -> None:
    thread_id = new_id("t")
    hello = await run(client, run_input(thread_id, "hello", run_id="r1"))
    parked = await run(client, run_input(thread_id, "purge cache:1", run_id="r2"))
    call_id = parked[-1].data["outcome"]["interrupts"][0]["id"]
    resumed = await run(client, run_input(thread_id, run_id="r3", resume=[approve(call_id)]))

    replay = await reattach(client, thread_id)
    assert types(replay) == types(hello) + types(parked) + types(resumed)
    # The same positions, except RUN_STARTED of a POST: it goes out before the run's first event,
    # with the position the stream started after.
    assert [f.id for f in replay if f.type != "RUN_STARTED"] == [
        f.id for f in hello + parked + resumed if f.type != "RUN_STARTED"
    ]
    assert [f.data.get("runId") for f in replay if f.type.startswith("RUN_")] == ["r1", "r1", "r2", "r2", "r3", "r3"]
    assert replay[len(hello) + len(parked) - 1].data["outcome"] == parked[-1].data["outcome"]
    # ``after`` (or Last-Event-ID, which wins) starts after a position; a caught-up client gets nothing.
    tail = await reattach(client, thread_id, params={"after": str(parked[-1].id)})
    assert types(tail) == types(resumed) and tail[0].data["runId"] == "r3"
    header = await reattach(client, thread_id, params={"after": "0"}, headers={"Last-Event-ID": str(parked[-1].id)})
    assert types(header) == types(resumed)
    assert await reattach(client, thread_id, params={"after": str(resumed[-1].id)}) == []


async def test_a_client_that_disconnects_does_not_stop_the_run(client: Client, shop: Shop) -> None:
    runtime = client.app[SERVICES].runtime
    thread_id = new_id("t")
    response = await post(client, run_input(thread_id, "slow report please", run_id="slow-1"))
    seen, _ = await read_until(response, "TOOL_CALL_END")
    await shop.entered.wait()
    response.close()  # the client goes away while the tool runs

    shop.gate.set()
    agora_run_id = seen[0].data["metadata"]["agoraRunId"]
    assert await runtime.wait(agora_run_id, timeout=5) == "completed"

    rest = await reattach(client, thread_id, headers={"Last-Event-ID": str(seen[-1].id)})
    assert types(rest) == [
        "RUN_STARTED",
        "TOOL_CALL_RESULT",  # its START/ARGS/END were seen before the disconnect
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert rest[0].data["runId"] == rest[-1].data["runId"] == "slow-1"
    assert rest[1].data["toolCallId"] == seen[-1].data["toolCallId"]


async def test_without_handler_cancellation_the_stream_ends_at_its_next_write(shop: Shop) -> None:
    # Production servers do not cancel a handler when its client leaves (aiohttp's default):
    # the stream notices at its next write, stops following the thread and returns.
    runtime = scripted_runtime(shop)
    app = create_app(settings(), runtime=runtime)
    handled: asyncio.Future[web.StreamResponse] = asyncio.get_running_loop().create_future()

    @web.middleware
    async def watch(request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except BaseException as exc:
            handled.set_exception(exc)
            raise
        handled.set_result(response)
        return response

    app.middlewares.insert(0, watch)
    runner = web.AppRunner(app, handler_cancellation=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/agent/ag-ui"
            response = await session.post(url, json=run_input(new_id("t"), "slow report please"), headers=auth())
            seen, _ = await read_until(response, "TOOL_CALL_END")
            await shop.entered.wait()
            response.close()
        shop.gate.set()
        async with asyncio.timeout(5):
            answer = await handled
        assert answer.status == 200
        assert await runtime.wait(seen[0].data["metadata"]["agoraRunId"], timeout=5) == "completed"
    finally:
        await runner.cleanup()
        await runtime.aclose()


async def test_reattach_to_a_running_run_follows_it_to_its_end(make_client: Any, shop: Shop) -> None:
    client = await make_client()
    thread_id = new_id("t")
    first = await post(client, run_input(thread_id, "slow report please", run_id="slow-2"))
    seen, _ = await read_until(first, "TOOL_CALL_START")
    await shop.entered.wait()

    # A second client re-attaches while the tool runs: it is told the run, then the rest.
    second = await client.get(
        f"/agent/ag-ui/threads/{thread_id}/events", headers={**auth(), "Last-Event-ID": str(seen[-1].id)}
    )
    assert second.status == 200
    shop.gate.set()
    async with asyncio.timeout(5):
        live = parse_sse(await second.text())
        original = parse_sse(await first.text())
    assert types(live) == ["RUN_STARTED", *types(original)[-5:]]
    assert live[-1].data == original[-1].data


async def test_a_quiet_stream_sends_keep_alive_comments(make_client: Any, shop: Shop) -> None:
    def often(app: web.Application) -> None:
        app[AG_UI_OPTIONS] = AgUiOptions(keepalive=0.01)

    client = await make_client(configure=often)
    response = await post(client, run_input(new_id("t"), "slow report please"))
    _, text = await read_until(response, "TOOL_CALL_END")
    async with asyncio.timeout(5):
        while ": keep-alive" not in text:
            text += (await response.content.readuntil(b"\n\n")).decode()
    shop.gate.set()
    async with asyncio.timeout(5):
        frames = parse_sse(text + await response.text())
    assert frames[-1].type == "RUN_FINISHED"


class HalfwayModel:
    """Streams the first half of its answer, waits for ``go``, then the rest."""

    name = "halfway"

    def __init__(self) -> None:
        self.paused = asyncio.Event()
        self.go = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextChunk | Usage]:
        yield TextChunk("Half ")
        self.paused.set()
        await self.go.wait()
        yield TextChunk("and the rest.")
        yield Usage(model_calls=1)


async def test_a_reattach_in_the_middle_of_a_message_stamps_every_frame(
    aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every delta is written as it comes, so the log holds half a message while the model waits.
    monkeypatch.setattr("gateway._driver_model.DELTA_FLUSH_SECONDS", 0.0)
    model = HalfwayModel()
    runtime = Runtime(agents=[Agent(name="assistant")], model=model)
    try:
        client = await aiohttp_client(create_app(settings(), runtime=runtime))
        thread_id = new_id("t")
        first = await post(client, run_input(thread_id, "tell me", run_id="half-1"))
        seen, _ = await read_until(first, "TEXT_MESSAGE_CONTENT")
        async with asyncio.timeout(5):
            await model.paused.wait()

        # A second client joins while the message is half written: its stream starts the run and
        # the message again (RUN_STARTED, TEXT_MESSAGE_START) before the rest.
        second = await client.get(
            f"/agent/ag-ui/threads/{thread_id}/events", headers={**auth(), "Last-Event-ID": str(seen[-1].id)}
        )
        assert second.status == 200
        model.go.set()
        async with asyncio.timeout(5):
            live = parse_sse(await second.text())
            await first.text()
        assert types(live) == [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "RUN_FINISHED",
        ]
        assert live[1].data["messageId"] == seen[-1].data["messageId"]
        # docs/ag-ui.md: every event carries a timestamp, the synthesized ones too.
        assert [type(f.event.timestamp) for f in live] == [int] * len(live), [f.data for f in live]
    finally:
        await runtime.aclose()
