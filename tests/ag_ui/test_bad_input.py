"""What is refused before any stream starts: JSON ``{code, message}``, one log line, no side effect."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest

from gateway import SERVICES

from .conftest import BOB, Client, RefusalLog, Shop, auth, new_id, post, run, run_input

Refused = Callable[[Any, int, str], Awaitable[None]]


@pytest.fixture
def refused(refusal_log: RefusalLog) -> Refused:
    """Checks a refusal: its status, its JSON ``{code, message}``, and its one log line."""

    async def check(response: Any, status: int, code: str) -> None:
        assert response.status == status, await response.text()
        assert response.headers["Content-Type"].startswith("application/json")
        body = await response.json()
        assert body["code"] == code and body["message"]
        refusal_log.one(status, code, route="/agent/ag-ui")

    return check


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"threadId": "t", "runId": ', "invalid_json"),
        ("[" * 50_000 + "]" * 50_000, "invalid_json"),  # deeper than any request: refused, not a 500
        (
            '{"threadId": "t", "runId": "r", "messages": [], "forwardedProps": {"pageContext": '
            + '{"a": ' * 100
            + "1"
            + "}" * 100
            + "}}",
            "invalid_json",
        ),
        ({**run_input("t", "hi"), "forwardedProps": "abc"}, "invalid_forwarded_props"),
        ("[1, 2]", "invalid_request"),
        ({"threadId": "t", "runId": "r"}, "invalid_request"),
        ({"threadId": "t", "runId": "r", "messages": [{"role": "user"}]}, "invalid_request"),
        ({"threadId": "t", "runId": "r", "messages": [], "resume": [{"interruptId": "x"}]}, "invalid_request"),
        ({"threadId": "t", "runId": "r", "messages": []}, "no_user_message"),
        (
            {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "  "}]},
            "no_user_message",
        ),
        ({"threadId": "bad thread/{x}", "runId": "r", "messages": []}, "invalid_thread_id"),
        ({"threadId": "t", "runId": "", "messages": []}, "invalid_run_id"),
        ({**run_input("t", "hi"), "forwardedProps": {"agent": 42}}, "invalid_forwarded_props"),
        ({**run_input("t", "hi"), "forwardedProps": {"pageContext": "home"}}, "invalid_forwarded_props"),
        (
            {**run_input("t", "hi"), "forwardedProps": {"uiCapabilities": {"formats": ["gif"]}}},
            "invalid_ui_capabilities",
        ),
        ({**run_input("t", "hi"), "forwardedProps": {"uiCapabilities": {"colour": True}}}, "invalid_ui_capabilities"),
        (run_input("t", "x" * 32_001), "text_too_long"),
    ],
)
async def test_bad_bodies_are_400_and_change_nothing(client: Client, refused: Refused, body: Any, code: str) -> None:
    await refused(await post(client, body), 400, code)
    runtime = client.app[SERVICES].runtime
    assert await runtime.store.get_thread("t") is None and await runtime.store.get_thread("bad thread/{x}") is None


async def test_content_type_size_and_identity(make_client: Any, refused: Refused) -> None:
    client = await make_client(anonymous=False)
    body = run_input(new_id("t"), "hello")
    await refused(await client.post("/agent/ag-ui", data="threadId=t", headers=auth()), 415, "unsupported_media_type")
    huge = run_input(new_id("t"), "hello")
    huge["state"] = {"blob": "x" * (1024 * 1024)}
    raw = json.dumps(huge).encode()
    json_type = {**auth(), "Content-Type": "application/json"}
    await refused(await client.post("/agent/ag-ui", data=io.BytesIO(raw), headers=json_type), 413, "payload_too_large")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the read itself stops
        for start in range(0, len(raw), 64 * 1024):
            yield raw[start : start + 64 * 1024]

    await refused(await client.post("/agent/ag-ui", data=chunks(), headers=json_type), 413, "payload_too_large")
    assert await client.app[SERVICES].runtime.store.get_thread(huge["threadId"]) is None
    await refused(await post(client, body, actor=None), 401, "unauthenticated")
    forged = {"Authorization": "Bearer not.a.token"}
    await refused(await client.post("/agent/ag-ui", json=body, headers=forged), 401, "invalid_token")
    await refused(await client.get(f"/agent/ag-ui/threads/{body['threadId']}/events"), 401, "unauthenticated")
    # A +json type is JSON too.
    typed = await client.post(
        "/agent/ag-ui", data=json.dumps(body), headers={**auth(), "Content-Type": "application/vnd.example+json"}
    )
    assert typed.status == 200 and "RUN_FINISHED" in await typed.text()


async def test_threads_runs_and_agents_refused_before_the_stream(client: Client, refused: Refused) -> None:
    thread_id = new_id("t")
    await run(client, run_input(thread_id, "hello"))
    await refused(await post(client, run_input(thread_id, "mine now"), actor=BOB), 403, "thread_forbidden")
    events = f"/agent/ag-ui/threads/{thread_id}/events"
    await refused(await client.get(events, headers=auth(BOB)), 403, "thread_forbidden")
    await refused(
        await client.get(f"/agent/ag-ui/threads/{new_id('t')}/events", headers=auth()), 404, "thread_not_found"
    )
    await refused(await client.get(f"{events}?after=x", headers=auth()), 400, "invalid_after")
    await refused(await client.get(events, headers={**auth(), "Last-Event-ID": "-1"}), 400, "invalid_after")

    fresh = new_id("t")
    unknown = run_input(fresh, "hello", forwarded_props={"agent": "nobody"})
    await refused(await post(client, unknown), 404, "unknown_agent")
    assert await client.app[SERVICES].runtime.store.get_thread(fresh) is None


async def test_the_rate_limit_is_429_before_the_stream(make_client: Any, refused: Refused) -> None:
    client = await make_client(turn_burst=1, turn_rate_per_minute=1)
    thread_id = new_id("t")
    await run(client, run_input(thread_id, "hello"))
    response = await post(client, run_input(thread_id, "again"))
    await refused(response, 429, "rate_limited")
    assert int(response.headers["Retry-After"]) >= 1


async def test_a_busy_thread_is_409_before_the_stream_for_an_agent_that_rejects(
    client: Client, shop: Shop, refused: Refused
) -> None:
    runtime = client.app[SERVICES].runtime
    runtime.agents["assistant"] = replace(runtime.agents["assistant"], queue_mode="reject")
    runtime.default_agent = runtime.agents["assistant"]
    thread_id = new_id("t")
    first = await post(client, run_input(thread_id, "slow report please"))
    await shop.entered.wait()
    await refused(await post(client, run_input(thread_id, "and another thing")), 409, "thread_busy")
    shop.gate.set()
    assert "RUN_FINISHED" in await first.text()
