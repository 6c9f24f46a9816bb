"""Raw HTTP against ``/mcp``: each bad request gets the spec's error, one log line, and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from channels.mcp import MAX_BATCH, MAX_BODY, MCP_CHANNEL
from gateway import Runtime

from ..conftest import RefusalLog
from .conftest import ALICE, BOB, Gateway

INIT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


async def open_session(gw: Gateway, version: str = "2025-11-25", **actor: Any) -> dict[str, str]:
    """The headers of a fresh session of ``actor`` (Alice): token, session id, protocol version."""
    http = gw.http(actor.get("actor", ALICE))
    body = {**INIT, "params": {**INIT["params"], "protocolVersion": version}}
    answer = await http.post(gw.url, json=body)
    assert answer.status_code == 200, answer.text
    result = types.JSONRPCMessage.model_validate(answer.json()).root
    assert isinstance(result, types.JSONRPCResponse)
    initialized = types.InitializeResult.model_validate(result.result)
    assert initialized.protocolVersion == version
    return {"Mcp-Session-Id": answer.headers["Mcp-Session-Id"], "MCP-Protocol-Version": version}


def runtime_of(gw: Gateway) -> Runtime:
    runtime = gw.app[MCP_CHANNEL].services.runtime
    assert isinstance(runtime, Runtime)
    return runtime


async def nothing_ran(gw: Gateway) -> None:
    runtime = runtime_of(gw)
    assert await runtime.threads.for_owner(ALICE) == []
    assert await runtime.store.open_approvals() == []


def error_of(answer: Any, status: int, code: int, *, id: Any = None) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    if body.get("id") is None:
        body = {**body, "id": 0}  # mcp.types requires an id; JSON-RPC sends null when none could be read
    error = types.JSONRPCMessage.model_validate(body).root
    assert isinstance(error, types.JSONRPCError) and error.error.code == code, body
    assert answer.json()["id"] == id
    return error.error.message


async def test_no_token_or_a_bad_one_is_401_with_a_bearer_challenge(demo: Gateway, refusal_log: RefusalLog) -> None:
    for http in (demo.http(None), demo.http(None, Authorization="Bearer not-a-token")):
        answer = await http.post(demo.url, json=INIT)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
        refusal_log.one("401")
        assert "mcp-session-id" not in answer.headers
    await nothing_ran(demo)


@pytest.mark.parametrize(
    ("body", "status", "code", "id"),
    [
        (b"{not json", 400, types.PARSE_ERROR, None),
        (b"\xff\xfe{}", 400, types.PARSE_ERROR, None),  # not UTF-8
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "\\ud800"}}', 400, types.PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', 400, types.PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": -Infinity}}', 400, types.PARSE_ERROR, None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1e400}}', 400, types.PARSE_ERROR, None),
        (b'{"foo": 1}', 400, types.INVALID_REQUEST, None),
        (b'"just a string"', 400, types.INVALID_REQUEST, None),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', 400, types.INVALID_REQUEST, 1),
        (b'{"jsonrpc": "2.0", "id": "a\\u0007b", "method": "ping"}', 400, types.INVALID_REQUEST, None),
        (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', 400, types.INVALID_REQUEST, None),
    ],
)
async def test_a_body_that_is_no_json_rpc_call_is_refused(
    demo: Gateway, refusal_log: RefusalLog, body: bytes, status: int, code: int, id: int | None
) -> None:
    headers = await open_session(demo)
    refusal_log.caplog.clear()
    answer = await demo.http(**headers).post(demo.url, content=body, headers={"Content-Type": "application/json"})
    error_of(answer, status, code, id=id)
    refusal_log.one(str(code))
    await nothing_ran(demo)


async def test_unknown_methods_and_invalid_params_are_json_rpc_errors(demo: Gateway, refusal_log: RefusalLog) -> None:
    http = demo.http(**await open_session(demo))
    refusal_log.caplog.clear()
    unknown = await http.post(demo.url, json={"jsonrpc": "2.0", "id": 7, "method": "resources/list"})
    assert error_of(unknown, 200, types.METHOD_NOT_FOUND, id=7) == "Method not found"
    refusal_log.one("-32601", "resources/list")
    for params in ({"name": 12}, {"arguments": {}}, {"name": "get_weather", "arguments": [1]}):
        bad = await http.post(demo.url, json={"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": params})
        error_of(bad, 200, types.INVALID_PARAMS, id="c")
        refusal_log.one("-32602", "tools/call")
    bad_init = await demo.http().post(demo.url, json={**INIT, "params": {"protocolVersion": 3}})
    error_of(bad_init, 200, types.INVALID_PARAMS, id=0)
    refusal_log.one("-32602")
    await nothing_ran(demo)


async def test_sessions_missing_unknown_someone_elses_or_ended(demo: Gateway, refusal_log: RefusalLog) -> None:
    ping = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_weather", "arguments": {"city": "Rome"}},
    }
    headers = await open_session(demo)
    refusal_log.caplog.clear()
    error_of(await demo.http().post(demo.url, json=ping), 400, types.INVALID_REQUEST)
    refusal_log.one("400")
    error_of(
        await demo.http(**{"Mcp-Session-Id": "no-such-session"}).post(demo.url, json=ping), 404, types.INVALID_REQUEST
    )
    refusal_log.one("404")
    error_of(await demo.http(BOB, **headers).post(demo.url, json=ping), 404, types.INVALID_REQUEST)
    refusal_log.one("404")
    wrong_version = {**headers, "MCP-Protocol-Version": "1999-01-01"}
    error_of(await demo.http(**wrong_version).post(demo.url, json=ping), 400, types.INVALID_REQUEST)
    refusal_log.one("400")
    await nothing_ran(demo)

    assert (await demo.http(BOB, **headers).delete(demo.url)).status_code == 404
    refusal_log.one("404")
    assert (await demo.http(**headers).delete(demo.url)).status_code == 204
    error_of(await demo.http(**headers).post(demo.url, json=ping), 404, types.INVALID_REQUEST)
    await nothing_ran(demo)


async def test_get_offers_no_stream(demo: Gateway) -> None:
    headers = await open_session(demo)
    answer = await demo.http(**headers, Accept="text/event-stream").get(demo.url)
    assert answer.status_code == 405 and "POST" in answer.headers["Allow"]


async def test_a_body_over_the_limit_is_413(demo: Gateway, refusal_log: RefusalLog) -> None:
    http = demo.http(**await open_session(demo))
    refusal_log.caplog.clear()
    big = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_weather", "arguments": {"city": "x" * MAX_BODY}},
    }
    answer = await http.post(demo.url, json=big)
    error_of(answer, 413, types.INVALID_REQUEST)
    refusal_log.one("413")
    await nothing_ran(demo)


async def test_batches_only_under_2025_03_26_and_within_the_limit(demo: Gateway, refusal_log: RefusalLog) -> None:
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    modern = demo.http(**await open_session(demo))
    refusal_log.caplog.clear()
    error_of(await modern.post(demo.url, json=[ping]), 400, types.INVALID_REQUEST)
    refusal_log.one("-32600")

    old = demo.http(**await open_session(demo, "2025-03-26"))
    refusal_log.caplog.clear()
    batch = [{**ping, "id": i} for i in range(MAX_BATCH + 1)]
    error_of(await old.post(demo.url, json=batch), 400, types.INVALID_REQUEST)
    refusal_log.one("-32600")
    error_of(await old.post(demo.url, json=[]), 400, types.INVALID_REQUEST)
    refusal_log.one("-32600")
    await nothing_ran(demo)

    mixed = [
        ping,
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    answer = await old.post(demo.url, json=mixed)
    assert answer.status_code == 200
    answers = [types.JSONRPCMessage.model_validate(item).root for item in answer.json()]
    assert isinstance(answers[0], types.JSONRPCResponse) and answers[0].id == 1
    assert isinstance(answers[1], types.JSONRPCError) and answers[1].error.code == types.METHOD_NOT_FOUND
    assert len(answers) == 2
    refusal_log.one("-32601")


async def test_notifications_and_stray_responses_are_accepted_and_change_nothing(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    http = demo.http(**await open_session(demo))
    refusal_log.caplog.clear()
    note = await http.post(demo.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert note.status_code == 202
    refusal_log.none()
    stray = await http.post(
        demo.url, json={"jsonrpc": "2.0", "id": "agora-approval:tc_nope", "result": {"action": "accept"}}
    )
    assert stray.status_code == 202
    refusal_log.one("tc_nope")
    await nothing_ran(demo)


async def test_a_foreign_browser_origin_is_403_and_the_gateways_own_is_served(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    refused = await demo.http(Origin="http://evil.example").post(demo.url, json=INIT)
    error_of(refused, 403, types.INVALID_REQUEST)
    refusal_log.one("403")
    assert "mcp-session-id" not in refused.headers
    own = await demo.http(Origin=demo.base_url).post(demo.url, json=INIT)
    assert own.status_code == 200 and own.headers["mcp-session-id"]
    await nothing_ran(demo)
