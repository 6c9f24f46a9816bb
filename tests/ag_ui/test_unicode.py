r"""Lone surrogates (``"\ud83d"`` in the JSON) in a ``RunAgentInput``: the run works, on Redis, in UTF-8."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway import Agent, Runtime, create_app
from gateway.models import ModelRequest, ScriptedModel, ScriptStep
from gateway.models import UserMessage as HistoryUserMessage
from gateway.stores import RedisStore

from .conftest import Client, RefusalLog, auth, new_id, parse_sse, settings, types

pytestmark = pytest.mark.redis

# Markers json.dumps leaves alone, swapped for escapes it would never write: half a surrogate pair.
LONE = {"<HI>": "\\ud83d", "<LO>": "\\udc00", "<HI2>": "\\ud800", "<LO2>": "\\udfff"}


def echo(request: ModelRequest, index: int) -> ScriptStep:
    said = next(m.content for m in reversed(request.messages) if isinstance(m, HistoryUserMessage))
    return ScriptStep(deltas=["You said: ", said])


@pytest.fixture
async def echo_client(aiohttp_client: Any, redis_store: RedisStore) -> AsyncIterator[Client]:
    runtime = Runtime(agents=[Agent(name="assistant")], model=ScriptedModel(echo), store=redis_store)
    try:
        client: Client = await aiohttp_client(create_app(settings(), runtime=runtime))
        yield client
    finally:
        await runtime.aclose()


async def test_lone_surrogates_in_the_message_and_props_become_u_fffd(
    echo_client: Client, redis_store: RedisStore, refusal_log: RefusalLog
) -> None:
    thread_id = new_id("t")
    # Raw bytes: the JSON escapes half a surrogate pair (json.dumps would never write one alone).
    body = {
        "threadId": thread_id,
        "runId": "r-1",
        "messages": [{"id": "m-1", "role": "user", "content": "hi <HI> there <LO>"}],
        "forwardedProps": {"pageContext": {"pa<HI2>ge": "v<LO2>", "ok": "\U0001f600"}},
    }
    raw_body = json.dumps(body)
    for marker, escape in LONE.items():
        raw_body = raw_body.replace(marker, escape)
    response = await echo_client.post(
        "/agent/ag-ui", data=raw_body.encode("ascii"), headers={**auth(), "Content-Type": "application/json"}
    )
    assert response.status == 200, await response.text()
    raw = await response.read()
    frames = parse_sse(raw.decode("utf-8"))  # strict: the stream is valid UTF-8
    assert types(frames)[-1] == "RUN_FINISHED"
    said = "".join(f.data["delta"] for f in frames if f.type == "TEXT_MESSAGE_CONTENT")
    assert said == "You said: hi \ufffd there \ufffd"
    assert "\ufffd".encode() in raw

    # What Redis holds is the same clean text: the history, and the turn's page context.
    messages = await redis_store.get_messages(thread_id)
    assert [m.content for m in messages] == ["hi \ufffd there \ufffd", "You said: hi \ufffd there \ufffd"]
    [run] = await redis_store.thread_runs(thread_id)
    assert run.turn.page_context == {"pa\ufffdge": "v\ufffd", "ok": "\U0001f600"}  # a whole pair stays one emoji
    for message in messages:
        assert message.content is not None
        message.content.encode("utf-8")
    refusal_log.none()  # not a refusal, and nothing failed on the way
