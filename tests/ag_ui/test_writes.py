"""The AG-UI stream writes the events that are ready together in one write, several ``data:`` frames each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web

from gateway import SERVICES, Agent, Gateway
from gateway.models import ScriptedModel, ScriptStep

from .conftest import Client, MakeClient, new_id, parse_sse, reattach, run, run_input, types


class Writes:
    """The body writes of every ``StreamResponse`` the server makes, as they reach its transport."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    def frames(self) -> list[int]:
        """How many SSE frames (``data:`` events, not keep-alive comments) each write held."""
        return [c.count(b"\ndata: ") + c.startswith(b"data: ") for c in self.chunks if b"data: " in c]


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Writes]:
    recorded = Writes()
    write = web.StreamResponse.write

    async def counted(self: web.StreamResponse, data: Any) -> None:
        recorded.chunks.append(bytes(data))
        await write(self, data)

    monkeypatch.setattr(web.StreamResponse, "write", counted)
    yield recorded


async def test_a_turn_goes_out_in_fewer_writes_than_events_and_reads_the_same(client: Client, writes: Writes) -> None:
    thread_id = new_id("t")
    frames = await run(client, run_input(thread_id, "weather in Lisbon?"))
    assert types(frames) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "CUSTOM agora.ui",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    per_write = writes.frames()
    assert sum(per_write) == len(frames)
    # Fewer writes than the run has events of ours (each of which makes one to three frames).
    stored = [e async for e in client.app[SERVICES].runtime.events(thread_id)]
    assert len(per_write) < len(stored) - 1, (per_write, [e.type for e in stored])
    # What the writes carried, in their order, is the stream the client parsed.
    assert parse_sse(b"".join(writes.chunks).decode()) == frames


async def test_a_reattach_writes_what_was_ready_in_one_write(client: Client, writes: Writes) -> None:
    thread_id = new_id("t")
    first = await run(client, run_input(thread_id, "weather in Lisbon?"))
    writes.chunks.clear()
    replay = await reattach(client, thread_id)
    assert types(replay) == types(first)
    assert writes.frames() == [len(replay)]


async def test_a_long_answer_goes_out_in_bounded_writes(make_client: MakeClient, writes: Writes) -> None:
    piece = "y" * 1000
    model = ScriptedModel(lambda request, index: ScriptStep(deltas=[piece] * 200))
    client = await make_client(gateway=Gateway(agents=[Agent(name="assistant")], model=model))
    thread_id = new_id("t")
    for stream in ("live", "reattached"):
        writes.chunks.clear()
        if stream == "live":
            frames = await run(client, run_input(thread_id, "a long answer, please"))
        else:
            frames = await reattach(client, thread_id)
        contents = [f for f in frames if f.type == "TEXT_MESSAGE_CONTENT"]
        assert len(contents) == 200 and all(f.data["delta"] == piece for f in contents), stream
        # About 32 KiB a write (the frames ready past that go in the next): never all in one.
        sized = [len(c) for c in writes.chunks if b"data: " in c]
        assert sum(writes.frames()) / len(sized) >= 10, (stream, writes.frames())
        frame_size = max(len(c) for c in b"".join(writes.chunks).split(b"\n\n"))
        assert len(sized) >= 5 and max(sized) < 32 * 1024 + 2 * frame_size, (stream, sized)
