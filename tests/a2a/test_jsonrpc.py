"""Raw JSON-RPC: the 0.3 method names and shapes, version selection, bad requests, auth, streams."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import httpx

from channels.a2a import A2AOptions
from gateway import SERVICES

from .conftest import ALICE, BOB, SECRET, WATCHDOG, Gate, Gateway, RefusalLog, token_for


def v03_message(text: str | None = None, *, message_id: str = "m-1", **fields: Any) -> dict[str, Any]:
    parts = fields.pop("parts", None) or [{"kind": "text", "text": text}]
    return {"kind": "message", "messageId": message_id, "role": "user", "parts": parts, **fields}


def v10_message(text: str, *, message_id: str = "m-1", **fields: Any) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def error_of(answer: dict[str, Any]) -> tuple[int, str]:
    assert "result" not in answer, answer
    return answer["error"]["code"], answer["error"]["message"]


# -- protocol 0.3 ------------------------------------------------------------------------------------


async def test_v03_send_get_and_answer_an_approval(demo: Gateway) -> None:
    sent = await demo.rpc("message/send", {"message": v03_message("refund order 1042")}, version=None)
    assert sent["jsonrpc"] == "2.0" and sent["id"] == "req-1"
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "input-required"
    prompt = task["status"]["message"]
    assert prompt["kind"] == "message" and prompt["role"] == "agent"
    assert [p["kind"] for p in prompt["parts"]] == ["text", "data"]
    assert prompt["parts"][1]["data"]["confirmation"]["verb"] == "Refund"
    assert task["history"][0]["parts"] == [{"kind": "text", "text": "refund order 1042"}]

    got = await demo.rpc("tasks/get", {"id": task["id"]}, version=None)
    assert got["result"]["id"] == task["id"] and got["result"]["status"]["state"] == "input-required"

    answer = v03_message(
        message_id="m-2",
        taskId=task["id"],
        contextId=task["contextId"],
        parts=[{"kind": "data", "data": {"approved": True}}],
    )
    done = await demo.rpc("message/send", {"message": answer}, version=None)
    assert done["result"]["status"]["state"] == "completed"
    kinds = {a["name"]: [p["kind"] for p in a["parts"]] for a in done["result"]["artifacts"]}
    assert kinds == {"KpiCards": ["data"], "text": ["text"]}


async def test_v03_stream_has_kind_fields_lowercase_states_and_final(demo: Gateway) -> None:
    frames = await demo.sse("message/stream", {"message": v03_message("weather in Lisbon")}, version=None)
    assert {f["id"] for f in frames} == {"s-1"}
    results = [f["result"] for f in frames]
    assert [(r["kind"], r.get("status", {}).get("state"), r.get("final")) for r in results] == [
        ("task", "working", None),
        ("status-update", "working", False),
        ("artifact-update", None, None),
        ("status-update", "working", False),
        ("artifact-update", None, None),
        ("status-update", "completed", True),
    ]
    assert results[2]["artifact"]["parts"][0]["kind"] == "data"


async def test_v03_cancel_resubscribe_and_unknown_task(demo: Gateway) -> None:
    params = {"message": v03_message("refund order 1040"), "configuration": {"blocking": False}}
    sent = await demo.rpc("message/send", params, version=None)
    assert sent["result"]["kind"] == "task"
    record = await demo.channel.book.get(sent["result"]["id"])
    assert record is not None
    assert await demo.runtime.wait(record.run_id, timeout=WATCHDOG) == "awaiting-approval"
    async with asyncio.timeout(WATCHDOG):
        async with demo.sse_stream("tasks/resubscribe", {"id": record.task_id}, version=None) as frames:
            # The task as it stands; the stream stays open while it waits for input (it ends at a
            # terminal state only) and follows the cancel below to its end.
            first = await anext(frames)
            assert (first["result"]["kind"], first["result"]["status"]["state"]) == ("task", "input-required")
            cancelled = await demo.rpc("tasks/cancel", {"id": record.task_id}, version=None)
            assert cancelled["result"]["status"]["state"] == "canceled"
            rest = [frame["result"] async for frame in frames]
    # The cancel rejects the pending approval (WORKING updates), then the task ends; only that is final.
    assert [(r["kind"], r["final"]) for r in rest] == [("status-update", False)] * (len(rest) - 1) + [
        ("status-update", True)
    ]
    assert rest[-1]["status"]["state"] == "canceled"
    assert error_of(await demo.rpc("tasks/cancel", {"id": sent["result"]["id"]}, version=None))[0] == -32002
    code, message = error_of(await demo.rpc("tasks/get", {"id": "no-such-task"}, version=None))
    assert (code, message) == (-32001, "Task no-such-task not found")
    assert error_of(await demo.rpc("tasks/get", {"idd": 1}, version=None))[0] == -32602
    assert error_of(await demo.rpc("message/send", {"message": {"role": "user"}}, version=None))[0] == -32602
    assert error_of(await demo.rpc("tasks/pushNotificationConfig/get", {"id": "t"}, version=None))[0] == -32003


async def test_v03_streams_refused_up_front_answer_an_event_stream_carrying_the_error(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    # A 0.3 client reads a streaming answer as SSE whatever happens (httpx-sse, @a2a-js/sdk): a
    # refusal before the first event is one data frame holding the JSON-RPC error.
    sent = await demo.rpc("message/send", {"message": v03_message("weather in Lisbon", message_id="m-9")}, version=None)
    ended = sent["result"]["id"]
    refusal_log.none()
    http = demo.http(version=None)
    cases: list[tuple[str, Any, int]] = [
        ("tasks/resubscribe", {"id": "no-such-task"}, -32001),
        ("tasks/resubscribe", {"id": ended}, -32004),
        ("message/stream", {"message": {"role": "user"}}, -32602),
        ("message/stream", ["not", "an", "object"], -32602),
    ]
    for method, params, code in cases:
        body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
        response = await http.post(demo.rpc_url, json=body)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream"), (method, response.text)
        frames = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        assert len(frames) == 1 and frames[0]["id"] == 5 and "result" not in frames[0], (method, frames)
        assert frames[0]["error"]["code"] == code, (method, frames)
        assert f"POST /a2a {method}" in refusal_log.one(code)


# -- protocol 1.0 over raw JSON-RPC ---------------------------------------------------------------------


async def test_v10_send_and_get_task_shapes(demo: Gateway) -> None:
    sent = await demo.rpc("SendMessage", {"message": v10_message("weather in Lisbon")})
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in task
    got = await demo.rpc("GetTask", {"id": task["id"]})
    assert got["result"]["id"] == task["id"] and got["result"]["artifacts"] == task["artifacts"]
    listed = await demo.rpc("ListTasks", {})
    assert [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
    assert listed["result"]["nextPageToken"] == "" and listed["result"]["totalSize"] == 1


async def test_version_header_selects_the_method_names(demo: Gateway, refusal_log: RefusalLog) -> None:
    code, message = error_of(await demo.rpc("SendMessage", {"message": v10_message("hi")}, version=None))
    assert code == -32009 and "'0.3' is not supported" in message
    assert message in refusal_log.one(-32009)
    assert error_of(await demo.rpc("message/send", {"message": v03_message("hi")}, version="1.0"))[0] == -32009
    assert error_of(await demo.rpc("GetTask", {"id": "x"}, version="2.0"))[0] == -32009
    assert error_of(await demo.rpc("GetTask", {"id": "x"}, version="1.0.0"))[0] == -32001
    answer = await demo.rpc("GetTask", {"id": "x"}, version=None)
    assert answer["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"


async def test_the_endpoint_takes_a_trailing_slash_and_the_version_as_a_query_parameter(
    demo: Gateway, refusal_log: RefusalLog
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}
    slash = await demo.http().post(demo.rpc_url + "/", json=body)
    assert slash.status_code == 200 and slash.json()["error"]["code"] == -32001
    assert "POST /a2a/ GetTask" in refusal_log.one(-32001, route="/a2a/")
    # A2A 1.0 section 3.6.1: A2A-Version may come as a query parameter; the header wins over it.
    bare = demo.http(version=None)
    assert (await bare.post(demo.rpc_url, json=body)).json()["error"]["code"] == -32009
    refusal_log.one(-32009)
    query = await bare.post(demo.rpc_url, params={"A2A-Version": "1.0"}, json=body)
    assert query.json()["error"]["code"] == -32001
    header_wins = await demo.http(version="1.0").post(demo.rpc_url, params={"A2A-Version": "0.3"}, json=body)
    assert header_wins.json()["error"]["code"] == -32001
    legacy = await bare.post(demo.rpc_url + "/?A2A-Version=0.3", json={**body, "method": "tasks/get"})
    assert legacy.json()["error"]["code"] == -32001
    send = {"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": v10_message("weather in Oslo")}}
    sent = await bare.post(demo.rpc_url + "/", params={"A2A-Version": "1.0"}, json=send)
    assert sent.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_bad_requests_get_json_rpc_errors(demo: Gateway, refusal_log: RefusalLog) -> None:
    http = demo.http()

    async def post(body: Any) -> dict[str, Any]:
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = await http.post(demo.rpc_url, content=content, headers={"Content-Type": "application/json"})
        assert response.status_code == 200
        answer: dict[str, Any] = response.json()
        return answer

    async def refused(body: Any, code: int) -> dict[str, Any]:
        """A raw body refused with ``code``, and its one log line."""
        answer = await post(body)
        assert answer["error"]["code"] == code, answer
        refusal_log.one(code)
        return answer

    async def rpc_refused(method: str, params: Any, code: int) -> dict[str, Any]:
        answer = await demo.rpc(method, params)
        assert error_of(answer)[0] == code
        refusal_log.one(code)
        return answer

    parse = await refused(b"{not json", -32700)
    assert parse["id"] is None
    for body in (b"[" * 50_000 + b"]" * 50_000, b"\xff\xfe"):  # too deep to be a request; not UTF-8
        await refused(body, -32700)
    await refused([{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}], -32600)
    await refused("a string", -32600)
    await refused({"id": 1, "method": "GetTask", "params": {"id": "x"}}, -32600)
    await refused({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}, -32600)
    await refused({"jsonrpc": "2.0", "id": 1}, -32600)
    await refused({"jsonrpc": "2.0", "id": True, "method": "GetTask"}, -32600)
    unknown = await refused({"jsonrpc": "2.0", "id": 7, "method": "tasks/explode"}, -32601)
    assert unknown["id"] == 7
    await rpc_refused("GetTask", [1, 2], -32602)
    await rpc_refused("GetTask", {}, -32602)
    no_message = await rpc_refused("SendMessage", {"configuration": {}}, -32602)
    assert no_message["error"]["data"][1]["fieldViolations"][0]["field"] == "message"
    await rpc_refused("SendMessage", {"message": "hello"}, -32602)
    await rpc_refused("SendMessage", {"message": v10_message(" ")}, -32602)
    await rpc_refused("SendMessage", {"message": v10_message("hi", contextId="no spaces please")}, -32602)
    await rpc_refused("ListTasks", {"pageSize": 0}, -32602)
    await rpc_refused("ListTasks", {"pageToken": "%%%"}, -32602)
    not_found = await demo.rpc("GetTask", {"id": "no-such-task"})
    assert error_of(not_found)[0] == -32001 and not_found["error"]["data"][0]["reason"] == "TASK_NOT_FOUND"
    line = refusal_log.one(-32001)
    assert line == "A2A refused POST /a2a GetTask: -32001: Task no-such-task not found"
    await rpc_refused("CancelTask", {"id": "no-such-task"}, -32001)
    await rpc_refused("SendMessage", {"message": v10_message("yes", taskId="no-such-task")}, -32001)
    await rpc_refused("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}, -32003)
    # A stream refused up front is a plain JSON answer, not an event stream.
    response = await http.post(
        demo.rpc_url, json={"jsonrpc": "2.0", "id": 9, "method": "SubscribeToTask", "params": {"id": "nope"}}
    )
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == -32001
    refusal_log.one(-32001)


async def test_callers_need_a_valid_bearer_token(demo: Gateway, refusal_log: RefusalLog) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    missing = await demo.http(None).post(demo.rpc_url, json=body)
    assert missing.status_code == 401 and missing.json()["code"] == "unauthenticated"
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="a2a"'
    assert "401 unauthenticated" in refusal_log.one(401)
    forged = await demo.http(None, Authorization="Bearer " + token_for(ALICE)[:-4] + "AAAA").post(
        demo.rpc_url, json=body
    )
    assert forged.status_code == 401 and forged.json()["code"] == "invalid_token"
    assert 'error="invalid_token"' in forged.headers["WWW-Authenticate"]
    assert "401 invalid_token" in refusal_log.one(401)
    basic = await demo.http(None, Authorization="Basic YWxpY2U6eA==").post(demo.rpc_url, content=b"not even json")
    assert basic.status_code == 401
    refusal_log.one(401)
    # A body over the app's 1 MiB is 413 (the error middleware answers), logged like the rest.
    huge = await demo.http().post(demo.rpc_url, content=b'{"x": "' + b"x" * (1024 * 1024) + b'"}')
    assert huge.status_code == 413 and huge.json()["code"] == "payload_too_large"
    assert "413 payload_too_large" in refusal_log.one(413)

    async with httpx.AsyncClient(timeout=WATCHDOG) as anonymous:
        card = await anonymous.get(f"{demo.base_url}/.well-known/agent-card.json")
        assert card.status_code == 200 and card.json()["supportedInterfaces"][0]["url"] == demo.rpc_url
        cached = await anonymous.get(
            f"{demo.base_url}/.well-known/agent-card.json", headers={"If-None-Match": card.headers["ETag"]}
        )
        assert cached.status_code == 304
        # Built from the settings' public URL, the card may sit in shared caches; built from the
        # request's Host it may not (another caller's Host would name our interfaces).
        expected = "public" if demo.app[SERVICES].settings.public_base_url else "private"
        assert card.headers["Cache-Control"] == f"{expected}, max-age=60"
        assert card.headers["Vary"] == "Host, A2A-Version"


async def test_the_card_lists_only_open_tools_publicly_and_the_callers_tools_when_extended(
    make_gateway: Any,
) -> None:
    from gateway import Runtime
    from gateway.models import ScriptedModel
    from tools import EmptyInput, ToolContext, define_tool

    @define_tool(name="open_tool", description="Anybody.", input=EmptyInput)
    async def open_tool(input: EmptyInput, ctx: ToolContext) -> dict[str, Any]:
        return {}

    @define_tool(name="staff_tool", description="Staff only.", input=EmptyInput, roles=["staff"])
    async def staff_tool(input: EmptyInput, ctx: ToolContext) -> dict[str, Any]:
        return {}

    gw = await make_gateway(Runtime(tools=[open_tool, staff_tool], model=ScriptedModel([])))
    card = (await gw.http(None).get(f"{gw.base_url}/.well-known/agent-card.json")).json()
    assert [s["id"] for s in card["skills"]] == ["open_tool"]
    from tools import Actor

    staff = Actor(id="sam", roles=["staff"])
    extended = await gw.rpc("GetExtendedAgentCard", {}, actor=staff)
    assert [s["id"] for s in extended["result"]["skills"]] == ["open_tool", "staff_tool"]
    member = await gw.rpc("GetExtendedAgentCard", {}, actor=BOB)
    assert [s["id"] for s in member["result"]["skills"]] == ["open_tool"]


async def test_rate_limited_callers_get_429(make_gateway: Any, refusal_log: RefusalLog) -> None:
    gw = await make_gateway(turn_burst=1, turn_rate_per_minute=1)
    first = await gw.rpc("SendMessage", {"message": v10_message("weather in Lisbon", message_id="r-1")})
    assert first["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "SendMessage",
        "params": {"message": v10_message("hi", message_id="r-2")},
    }
    refusal_log.caplog.clear()
    limited = await gw.http().post(gw.rpc_url, json=body)
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert "refused 429 rate_limited POST /a2a" in refusal_log.one(429)  # the error middleware's line
    # The refused message took no effect: its id is free for a retry.
    assert await gw.channel.book.claim_message(ALICE.id, "r-2", "probe") is None


# -- streams and their callers ----------------------------------------------------------------------


async def test_a_caller_leaving_its_stream_does_not_cancel_the_run(make_gateway: Any, gate: Gate) -> None:
    gw = await make_gateway(gate.runtime())
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": v10_message("go")}}
    async with asyncio.timeout(WATCHDOG):
        async with gw.http().stream("POST", gw.rpc_url, json=body) as response:
            lines = response.aiter_lines()
            first = await anext(lines)
            await gate.entered.wait()
        # The response is closed: the caller left mid-run.
        task_id = json.loads(first.removeprefix("data: "))["result"]["task"]["id"]
        record = await gw.channel.book.get(task_id)
        assert record is not None
        gate.released.set()
        assert await gw.runtime.wait(record.run_id) == "completed"
    got = await gw.rpc("GetTask", {"id": task_id})
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_quiet_stream_gets_keep_alive_comments(make_gateway: Any, gate: Gate) -> None:
    gw = await make_gateway(gate.runtime())
    gw.channel.options = dataclasses.replace(A2AOptions(), heartbeat=0.01)
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": v10_message("go")}}
    seen: list[str] = []
    async with asyncio.timeout(WATCHDOG), gw.http().stream("POST", gw.rpc_url, json=body) as response:
        async for line in response.aiter_lines():
            seen.append(line)
            if line.startswith(":") and not gate.released.is_set():
                gate.released.set()
    data = [json.loads(line[6:])["result"] for line in seen if line.startswith("data: ")]
    assert ": keep-alive" in seen
    assert data[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_token_secret_is_the_gateways(demo: Gateway) -> None:
    from gateway import sign_actor_token

    other = sign_actor_token(ALICE, SECRET + "-other", 60)
    response = await demo.http(None, Authorization=f"Bearer {other}").post(demo.rpc_url, json={})
    assert response.status_code == 401


async def test_streaming_methods_answer_with_sse(demo: Gateway) -> None:
    frames = await demo.sse("SendStreamingMessage", {"message": v10_message("weather in Lisbon")})
    assert frames[0]["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    sent = await demo.rpc("SendMessage", {"message": v10_message("refund order 1042", message_id="m-2")})
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    async with asyncio.timeout(WATCHDOG), demo.sse_stream("SubscribeToTask", {"id": task["id"]}) as stream:
        first = await anext(stream)
        assert first["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        parts = [{"data": {"approved": True}}]
        answer = {"messageId": "m-3", "role": "ROLE_USER", "taskId": task["id"], "parts": parts}
        done = await demo.rpc("SendMessage", {"message": answer})
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        rest = [frame["result"] async for frame in stream]
    states = [r["statusUpdate"]["status"]["state"] for r in rest if "statusUpdate" in r]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED"


async def test_message_metadata_picks_the_agent(make_gateway: Any) -> None:
    from gateway import Agent, Runtime
    from gateway.models import ScriptedModel, ScriptStep

    agents = [
        Agent(name="first", model=ScriptedModel([ScriptStep(text="First here.")])),
        Agent(name="second", model=ScriptedModel([ScriptStep(text="Second here.")])),
    ]
    gw = await make_gateway(Runtime(agents=agents))
    sent = await gw.rpc("SendMessage", {"message": v10_message("hi", metadata={"agent": "second"})})
    status = sent["result"]["task"]["status"]
    assert status["message"]["parts"] == [{"text": "Second here."}]
    unknown = await gw.rpc("SendMessage", {"message": v10_message("hi", message_id="m-2"), "metadata": {"agent": "x"}})
    assert error_of(unknown) == (-32602, "No agent named 'x'")
