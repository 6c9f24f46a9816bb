"""An attacker's and a demanding client's requests against ``/mcp``: each answered as the spec says."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import types

from channels.mcp import APPROVAL_ID_PREFIX, MCP_CHANNEL

from ..conftest import RefusalLog
from .conftest import ALICE, Gateway
from .test_bad_input import INIT, error_of, nothing_ran, open_session, runtime_of

CALL: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "get_weather", "arguments": {"city": "Rome"}},
}


async def _in_pieces(body: bytes, size: int, pause: float) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]
        await asyncio.sleep(pause)


async def test_a_body_sent_in_several_chunks_is_read_whole(demo: Gateway) -> None:
    http = demo.http(**await open_session(demo))
    body = json.dumps({**CALL, "params": {**CALL["params"], "_meta": {"pad": "x" * 100_000}}}).encode()
    answer = await http.post(
        demo.url, content=_in_pieces(body, 4096, 0.001), headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 200, answer.text
    result = types.JSONRPCMessage.model_validate(answer.json()).root
    assert isinstance(result, types.JSONRPCResponse), result
    assert not types.CallToolResult.model_validate(result.result).isError


async def test_a_body_that_trickles_in_is_408_and_changes_nothing(demo: Gateway, refusal_log: RefusalLog) -> None:
    demo.app[MCP_CHANNEL].read_timeout = 0.3
    http = demo.http(**await open_session(demo))
    refusal_log.caplog.clear()
    body = json.dumps(CALL).encode()
    answer = await http.post(demo.url, content=_in_pieces(body, 8, 0.1), headers={"Content-Type": "application/json"})
    error_of(answer, 408, types.INVALID_REQUEST)
    refusal_log.one("408")
    await nothing_ran(demo)


class AcceptWith:
    """An elicitation callback that accepts with ``content``, whatever the requested schema said."""

    def __init__(self, content: dict[str, Any] | None) -> None:
        self.content = content
        self.ids: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.ids.append(str(context.request_id))
        return types.ElicitResult(action="accept", content=self.content)


async def test_an_accept_whose_content_misses_the_schema_rejects(demo: Gateway) -> None:
    runtime = runtime_of(demo)
    for content in (None, {}, {"approve": "no"}, {"approve": 0}, {"approve": "true"}, {"other": True}):
        answer = AcceptWith(content)
        async with demo.session(elicit=answer) as (session, _):
            result = await session.call_tool("refund_order", {"order_id": "1042"})
        assert result.isError, (content, result)
        [request_id] = answer.ids
        approval = await runtime.get_approval(request_id.removeprefix(APPROVAL_ID_PREFIX))
        assert approval is not None and (approval.status, approval.via) == ("rejected", "mcp"), content
        seen = [e.type for e in await runtime.read_events(approval.thread_id)]
        assert "tool-started" not in seen and "tool-completed" not in seen, content


async def test_deeply_nested_arguments_are_a_tool_result_not_an_internal_error(
    demo: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    http = demo.http(**await open_session(demo))
    caplog.set_level(logging.INFO)
    deep = json.loads("[" * 900 + "]" * 900)
    answer = await http.post(
        demo.url, json={**CALL, "params": {"name": "get_weather", "arguments": {"city": "Rome", "extra": deep}}}
    )
    assert answer.status_code == 200
    message = types.JSONRPCMessage.model_validate(answer.json()).root
    assert isinstance(message, types.JSONRPCResponse), answer.text
    types.CallToolResult.model_validate(message.result)
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


async def test_the_session_s_revision_rules_a_header_naming_another_is_400(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    headers = await open_session(demo)  # 2025-11-25: no batches
    refusal_log.caplog.clear()
    for version in ("2025-03-26", "2025-06-18"):
        liar = demo.http(**{**headers, "MCP-Protocol-Version": version})
        error_of(await liar.post(demo.url, json=[{**CALL, "id": 5}]), 400, types.INVALID_REQUEST)
        refusal_log.one("400")
        error_of(await liar.post(demo.url, json=CALL), 400, types.INVALID_REQUEST)
        refusal_log.one("400")
    await nothing_ran(demo)
    # Without the header the session's revision is assumed, and still no batch.
    bare = demo.http(**{"Mcp-Session-Id": headers["Mcp-Session-Id"]})
    error_of(await bare.post(demo.url, json=[{**CALL, "id": 5}]), 400, types.INVALID_REQUEST)
    refusal_log.one("-32600")
    await nothing_ran(demo)


async def test_a_client_that_drops_the_stream_of_a_waiting_approval_leaks_nothing(demo: Gateway) -> None:
    channel = demo.app[MCP_CHANNEL]
    channel.heartbeat = 0.1
    runtime = runtime_of(demo)
    init = {**INIT, "params": {**INIT["params"], "capabilities": {"elicitation": {}}}}
    opened = await demo.http().post(demo.url, json=init)
    headers = {"Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    http = demo.http(**headers, Accept="application/json, text/event-stream")
    refund = {**CALL, "params": {"name": "refund_order", "arguments": {"order_id": "1042"}}}
    async with http.stream("POST", demo.url, json=refund) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        async for line in answer.aiter_lines():
            if line.startswith("data: "):
                asked = types.JSONRPCMessage.model_validate_json(line[6:]).root
                break
    assert isinstance(asked, types.JSONRPCRequest) and asked.method == "elicitation/create"
    tool_call_id = str(asked.id).removeprefix(APPROVAL_ID_PREFIX)
    approval = await runtime.get_approval(tool_call_id)
    assert approval is not None and approval.status == "pending"
    store: Any = runtime.store
    for _ in range(100):  # the next heartbeat finds the client gone and ends the follower
        if not store._threads[approval.thread_id].subscribers:
            break
        await asyncio.sleep(0.05)
    assert not store._threads[approval.thread_id].subscribers
    # Still decidable elsewhere (the web chat, the staff console), and it runs once.
    await runtime.decide(tool_call_id, ALICE, approve=True, via="web")
    for _ in range(100):
        events = [e.type for e in await runtime.read_events(approval.thread_id)]
        if events[-1] == "run-finished":
            break
        await asyncio.sleep(0.05)
    assert events.count("tool-completed") == 1 and events[-1] == "run-finished"
    # The client's late answer to the elicitation changes nothing.
    late = await http.post(demo.url, json={"jsonrpc": "2.0", "id": asked.id, "result": {"action": "decline"}})
    assert late.status_code == 202
    decided = await runtime.get_approval(tool_call_id)
    assert decided is not None and (decided.status, decided.via) == ("approved", "web")
    assert not [t for t in asyncio.all_tasks() if "pump" in repr(t.get_coro())]


async def test_an_elicitation_answer_replayed_concurrently_runs_the_action_once(demo: Gateway) -> None:
    runtime = runtime_of(demo)
    init = {**INIT, "params": {**INIT["params"], "capabilities": {"elicitation": {}}}}
    opened = await demo.http().post(demo.url, json=init)
    headers = {"Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    http = demo.http(**headers, Accept="application/json, text/event-stream")
    refund = {**CALL, "params": {"name": "refund_order", "arguments": {"order_id": "1042"}}}
    messages: list[Any] = []
    async with http.stream("POST", demo.url, json=refund) as answer:
        async for line in answer.aiter_lines():
            if not line.startswith("data: "):
                continue
            message = types.JSONRPCMessage.model_validate_json(line[6:]).root
            messages.append(message)
            if isinstance(message, types.JSONRPCRequest):
                yes = {"jsonrpc": "2.0", "id": message.id, "result": {"action": "accept", "content": {"approve": True}}}
                no = {**yes, "result": {"action": "decline"}}
                answers = await asyncio.gather(*[demo.http(**headers).post(demo.url, json=b) for b in [yes, no] * 4])
                assert {a.status_code for a in answers} == {202}
    asked, result = messages
    assert isinstance(result, types.JSONRPCResponse)
    approval = await runtime.get_approval(str(asked.id).removeprefix(APPROVAL_ID_PREFIX))
    assert approval is not None and approval.status in ("approved", "rejected")
    stored = await runtime.read_events(approval.thread_id)
    events = [e.type for e in stored]
    assert events.count("tool-completed") == (1 if approval.status == "approved" else 0)
    assert events.count("approval-settled") == 1
    ended = [getattr(e, "status", None) for e in stored if e.type == "run-finished"]
    assert ended == ["awaiting-approval", "completed"], ended
    assert types.CallToolResult.model_validate(result.result).isError is (approval.status == "rejected")
