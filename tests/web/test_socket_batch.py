"""``hello {batch: true}``: run events several to a ``batch`` frame; other clients as before."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

import pytest
from pydantic import BaseModel

from gateway import SERVICES, ApprovalPolicy, ApprovalRule, Runtime
from gateway.events import RunEvent, TextDeltaEvent, TextEndEvent, ToolCompletedEvent, ToolStartedEvent
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from gateway.stores import Batch, MemoryStore
from tools import ToolPresentation, define_tool

from .conftest import ALICE, Socket, connect, token_for, until_no_sockets
from .test_socket_protocol import OLGA, gated_runtime


class CityInput(BaseModel):
    city: str


def weather_runtime() -> Runtime:
    @define_tool(
        name="get_weather",
        description="Weather.",
        input=CityInput,
        presentation=ToolPresentation(running="Checking {city}", done="Checked {city}"),
    )
    async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
        ctx.emit_ui("Callout", {"tone": "info", "text": f"{input.city}: 21 °C"})
        return {"city": input.city, "temp": 21}

    def script(request: Any, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="get_weather", args={"city": "Lisbon"})])
        return ScriptStep(deltas=["It is ", "21 °C ", "in Lisbon."])

    return Runtime(tools=[get_weather], model=ScriptedModel(script), store=MemoryStore())


def events_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run events of frames as a client reads them: a batch frame's in order, else the frame."""
    events: list[dict[str, Any]] = []
    for frame in frames:
        if frame["type"] == "batch":
            assert set(frame) == {"type", "events"} and frame["events"], frame
            events.extend(frame["events"])
        elif "seq" in frame:
            events.append(frame)
    return events


async def until_event(ws: Socket, kind: str, timeout: float = 5.0) -> list[dict[str, Any]]:
    """Frames until one that is, or carries, an event of ``kind``."""
    return await ws.until(lambda f: any(e["type"] == kind for e in events_of([f])), timeout)


async def loop_turns(count: int) -> None:
    """Let ``count`` turns of the event loop go by (the outbox flushes one turn after an event)."""
    for _ in range(count):
        await asyncio.sleep(0)


def delta(thread_id: str, text: str, message_id: str = "m1") -> TextDeltaEvent:
    return TextDeltaEvent(thread_id=thread_id, run_id="r", message_id=message_id, delta=text)


async def test_a_batch_client_gets_a_turn_in_fewer_frames_with_the_same_events_in_the_same_order(
    make_client: Any,
) -> None:
    runtime = weather_runtime()
    client = await make_client(runtime)
    plain = await connect(client, token=token_for(ALICE))
    thread_id = (await plain.hello(thread_id="t-batch-turn"))["thread_id"]
    batched = await connect(client, token=token_for(ALICE))
    welcome = await batched.hello(thread_id=thread_id, batch=True)
    assert welcome["type"] == "welcome" and "events" not in welcome

    plain_frames = await plain.turn("weather in Lisbon?")
    batch_frames = await until_event(batched, "run-finished")

    stored = [e.model_dump(mode="json") async for e in runtime.events(thread_id)]
    assert [f["type"] for f in plain_frames if "seq" in f] == [e["type"] for e in stored]
    assert events_of(batch_frames) == events_of(plain_frames) == [f for f in plain_frames if "seq" in f]
    assert {f["type"] for f in batch_frames} == {"batch"}  # the ack went to the sender, not here
    assert len(batch_frames) < len([f for f in plain_frames if "seq" in f])
    assert not any(f["type"] == "batch" for f in plain_frames)
    ui = next(e for e in events_of(batch_frames) if e["type"] == "ui")
    assert ui["form"] == "html" and "Lisbon: 21 °C" in ui["html"]  # the client's form, as one frame each


async def test_events_of_one_loop_turn_share_a_frame_and_the_first_delta_waits_for_nothing(
    make_client: Any,
) -> None:
    client = await make_client(ws_batch_window=1.0)
    store = client.app[SERVICES].runtime.store
    plain = await connect(client, token=token_for(ALICE))
    thread_id = (await plain.hello(thread_id="t-batch-turns"))["thread_id"]
    batched = await connect(client, token=token_for(ALICE))
    await batched.hello(thread_id=thread_id, batch=True)

    # Two writes in one loop turn: one frame for the batch client, two for the plain one.
    call = {"thread_id": thread_id, "run_id": "r", "tool_call_id": "c1", "tool": "t"}
    started = ToolStartedEvent(**call, kind="read", input={}, running="Looking")
    completed = ToolCompletedEvent(**call, done="Looked")
    await store.write(thread_id, Batch(events=[started]))
    await store.write(thread_id, Batch(events=[completed]))
    frame = await batched.recv()
    assert [e["type"] for e in events_of([frame])] == ["tool-started", "tool-completed"]
    assert [(await plain.recv())["type"], (await plain.recv())["type"]] == ["tool-started", "tool-completed"]

    # The first delta of a message goes on the next loop turn, not at the end of the 1 s window.
    written = time.monotonic()
    await store.write(thread_id, Batch(events=[delta(thread_id, "Hel")]))
    frame = await batched.recv(timeout=0.5)
    assert time.monotonic() - written < 0.5
    assert [e["delta"] for e in events_of([frame])] == ["Hel"]
    assert (await plain.recv())["delta"] == "Hel"


@pytest.mark.parametrize(
    ("window", "frames"), [(1.0, [["lo", " wor", "ld", "end"]]), (0.0, [["lo"], [" wor"], ["ld"], ["end"]])]
)
async def test_later_deltas_within_the_window_share_a_frame(
    make_client: Any, window: float, frames: list[list[str]]
) -> None:
    client = await make_client(ws_batch_window=window)
    store = client.app[SERVICES].runtime.store
    batched = await connect(client, token=token_for(ALICE))
    thread_id = (await batched.hello(thread_id="t-batch-window", batch=True))["thread_id"]
    await store.write(thread_id, Batch(events=[delta(thread_id, "Hel")]))
    assert [e["delta"] for e in events_of([await batched.recv()])] == ["Hel"]

    # Each write on a loop turn of its own, well after the last one was flushed.
    for piece in ("lo", " wor", "ld"):
        await store.write(thread_id, Batch(events=[delta(thread_id, piece)]))
        await loop_turns(10)
    end = TextEndEvent(thread_id=thread_id, run_id="r", message_id="m1", text="Hello world")
    await store.write(thread_id, Batch(events=[end]))  # not a delta: it ends the wait at once
    received = [events_of([await batched.recv(timeout=0.5)]) for _ in frames]
    assert [[e.get("delta", "end") for e in events] for events in received] == frames
    seqs = [e["seq"] for events in received for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4


async def test_a_delta_of_another_message_does_not_wait_for_the_window(make_client: Any) -> None:
    client = await make_client(ws_batch_window=1.0)
    store = client.app[SERVICES].runtime.store
    batched = await connect(client, token=token_for(ALICE))
    thread_id = (await batched.hello(thread_id="t-batch-other", batch=True))["thread_id"]
    await store.write(thread_id, Batch(events=[delta(thread_id, "one", "m1")]))
    assert [e["delta"] for e in events_of([await batched.recv()])] == ["one"]
    await store.write(thread_id, Batch(events=[delta(thread_id, "two", "m2")]))
    assert [e["delta"] for e in events_of([await batched.recv(timeout=0.5)])] == ["two"]


async def test_a_replay_is_batched_in_bounded_pages_and_matches_the_log(make_client: Any) -> None:
    client = await make_client()
    store = client.app[SERVICES].runtime.store
    first = await connect(client, token=token_for(ALICE))
    thread_id = (await first.hello(thread_id="t-batch-replay"))["thread_id"]
    piece = "x" * 1000
    for _ in range(10):
        await store.write(thread_id, Batch(events=[delta(thread_id, piece) for _ in range(20)]))
    await first.ws.close()
    log = [e.model_dump(mode="json") async for e in client.app[SERVICES].runtime.events(thread_id)]
    assert len(log) == 200

    replaying = await connect(client, token=token_for(ALICE))
    welcome = await replaying.hello(thread_id=thread_id, after_seq=50, batch=True)
    assert (welcome["after_seq"], welcome["restored"]) == (50, True)
    frames = await replaying.until(lambda f: events_of([f])[-1]["seq"] == log[-1]["seq"])
    assert events_of(frames) == log[50:]
    assert {f["type"] for f in frames} == {"batch"} and len(frames) >= 4
    # Each page is about 32 KiB of events: never the whole replay in one frame.
    one_event = len(json.dumps(log[-1]))
    assert all(len(json.dumps(f)) < 32 * 1024 + 2 * one_event for f in frames)


async def test_a_client_without_batch_gets_one_event_per_frame(make_client: Any) -> None:
    runtime = weather_runtime()
    client = await make_client(runtime)
    for hello in ({}, {"batch": False}):
        ws = await connect(client, token=token_for(ALICE))
        thread_id = (await ws.hello(**hello))["thread_id"]
        frames = await ws.turn("weather in Lisbon?")
        events = [f for f in frames if "seq" in f]
        stored = [e async for e in runtime.events(thread_id)]
        assert [(f["seq"], f["type"]) for f in events] == [(e.seq, e.type) for e in stored]
        assert not any(f["type"] == "batch" for f in frames)
        assert {f["type"] for f in frames} - {e.type for e in stored} == {"ack"}
        await ws.ws.close()


@pytest.mark.parametrize("value", ["yes", 1, "true", None, [True], {"on": True}])
async def test_a_malformed_batch_is_refused_with_the_hello_error_and_leaves_no_trace(
    make_client: Any, value: Any
) -> None:
    client = await make_client()
    runtime = client.app[SERVICES].runtime
    ws = await connect(client, token=token_for(ALICE))
    await ws.send({"type": "hello", "id": "h1", "thread_id": "t-batch-bad", "batch": value})
    error = await ws.recv()
    assert (error["type"], error["id"], error["code"]) == ("error", "h1", "invalid_frame")
    assert "batch" in error["message"]
    assert await runtime.get_thread("t-batch-bad") is None  # nothing reserved, nothing followed
    await ws.send({"type": "send", "text": "hi", "id": "s1"})
    assert (await ws.recv())["code"] == "hello_required"
    welcome = await ws.hello(thread_id="t-batch-bad", batch=True)  # the socket may still say hello
    assert welcome["thread_id"] == "t-batch-bad"
    await ws.ws.close()


async def test_a_slow_batch_reader_is_disconnected_instead_of_buffering_forever(make_client: Any) -> None:
    client = await make_client(ws_send_timeout=0.2, ws_heartbeat=60.0)
    services = client.app[SERVICES]
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello(thread_id="t-batch-slow", batch=True))["thread_id"]
    transport = ws.ws._conn.transport
    transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    events: list[RunEvent] = [delta(thread_id, "x" * 60_000) for _ in range(300)]
    for event in events:
        await services.runtime.store.write(thread_id, Batch(events=[event]))
    await until_no_sockets(client.app)
    await ws.ws.close()


async def test_a_socket_that_closes_with_events_queued_leaves_no_task_behind(make_client: Any) -> None:
    client = await make_client(ws_batch_window=1.0)
    services = client.app[SERVICES]
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello(thread_id="t-batch-close", batch=True))["thread_id"]
    await services.runtime.store.write(thread_id, Batch(events=[delta(thread_id, "a")]))
    assert len(events_of([await ws.recv()])) == 1
    await services.runtime.store.write(thread_id, Batch(events=[delta(thread_id, "b")]))  # held for the window
    await loop_turns(5)
    assert any(t.get_name() == "agora-ws-outbox" for t in asyncio.all_tasks())
    await ws.ws.close()
    await until_no_sockets(client.app, "agora-ws-outbox", f"agora-ws-{thread_id}", timeout=5)


async def test_an_approver_in_batch_sees_their_decision_land_before_the_reading_ends(make_client: Any) -> None:
    runtime = gated_runtime(asyncio.Event(), asyncio.Event())
    runtime.approval_policy = ApprovalPolicy(rules={"purge": ApprovalRule(approver="ops")})
    client = await make_client(runtime)
    alice = await connect(client, token=token_for(ALICE))
    thread_id = (await alice.hello())["thread_id"]
    requested = next(f for f in await alice.turn("purge k1") if f["type"] == "approval-requested")

    olga = await connect(client, token=token_for(OLGA))
    assert (await olga.hello(thread_id=thread_id, batch=True))["thread_id"] == thread_id
    await until_event(olga, "approval-requested")
    await olga.send({"type": "approve", "tool_call_id": requested["tool_call_id"], "id": "a1"})
    seen = await olga.until(lambda f: f.get("type") == "error")
    assert seen[-1]["code"] == "thread_forbidden"
    # The decision's event came (in a batch) before the error that ended her reading, and nothing after it.
    assert [e["type"] for e in events_of(seen)][-1] == "approval-settled"
    await olga.closed()
    assert olga.ws.close_code == 4403
    await alice.until_type("run-finished")
    await alice.ws.close()
