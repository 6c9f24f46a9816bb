"""``POST /agent/ag-ui``: a turn in, a stream of AG-UI events out."""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import PROTOCOL_VERSION, RunFinishedEvent, RunStartedEvent

from gateway import SERVICES

from .conftest import Client, auth, new_id, of_type, parse_sse, post, run, run_input, types


async def test_a_turn_streams_text_tool_calls_and_components(client: Client) -> None:
    thread_id, run_id = new_id("t"), new_id("run")
    response = await post(client, run_input(thread_id, "weather in Lisbon?", run_id=run_id))
    assert response.status == 200
    assert response.headers["Content-Type"] == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache"
    assert response.headers["X-Accel-Buffering"] == "no"
    frames = parse_sse(await response.text())

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
    started, finished = frames[0].event, frames[-1].event
    assert isinstance(started, RunStartedEvent) and isinstance(finished, RunFinishedEvent)
    assert (started.thread_id, started.run_id, started.protocol_version) == (thread_id, run_id, PROTOCOL_VERSION)
    assert (finished.thread_id, finished.run_id) == (thread_id, run_id)
    assert finished.outcome is not None and finished.outcome.type == "success"
    agora_run_id = started.metadata["agoraRunId"] if started.metadata else None
    assert agora_run_id and agora_run_id.startswith("run_")
    assert finished.metadata == {"agoraRunId": agora_run_id, "status": "completed"}

    # The ids are our seqs: non-decreasing, from the thread's position before the turn.
    ids = [f.id for f in frames]
    assert ids == sorted(ids) and ids[0] == 0
    runtime = client.app[SERVICES].runtime
    log = [e async for e in runtime.events(thread_id)]
    assert ids[-1] == log[-1].seq

    call = frames[1].data
    assert call["toolCallName"] == "get_weather"
    assert call["metadata"] == {"kind": "read", "label": "Weather", "running": "Checking Lisbon", "icon": "sun"}
    assert json.loads(frames[2].data["delta"]) == {"city": "Lisbon"}
    result = frames[5].data
    assert result["toolCallId"] == call["toolCallId"] and result["role"] == "tool"
    assert json.loads(result["content"]) == {"city": "Lisbon", "temp": 21}
    assert result["metadata"] == {"status": "completed", "tool": "get_weather", "done": "Checked Lisbon"}
    text = "".join(f.data["delta"] for f in of_type(frames, "TEXT_MESSAGE_CONTENT"))
    assert text == "Sunny in Lisbon."

    # Without declared capabilities a component comes as props plus its text form.
    ui = frames[4].data["value"]
    assert ui["component"] == "KpiCards" and ui["toolCallId"] == call["toolCallId"]
    assert ui["props"] == {"items": [{"label": "Lisbon", "value": 21, "unit": "°C"}]}
    assert ui["form"] == "text" and "Lisbon" in ui["fallbackText"] and "html" not in ui


async def test_forwarded_props_choose_agent_page_context_and_ui_forms(client: Client) -> None:
    runtime = client.app[SERVICES].runtime
    props = {"agent": "other", "pageContext": {"page": "/orders"}, "uiCapabilities": {"formats": ["html"]}}
    frames = await run(client, run_input(new_id("t"), "weather please", forwarded_props=props))
    ui = of_type(frames, "CUSTOM")[0].data["value"]
    assert ui["form"] == "html" and "<div" in ui["html"] and "Lisbon" in ui["fallbackText"]
    assert ui["props"]["items"][0]["label"] == "Lisbon"
    agora_run = await runtime.get_run(frames[0].data["metadata"]["agoraRunId"])
    assert agora_run.agent == "other" and agora_run.turn.channel == "ag-ui"
    assert agora_run.turn.page_context == {"page": "/orders"}
    assert runtime.model.requests[-1].metadata["page_context"] == {"page": "/orders"}

    # A client that draws KpiCards itself gets props only.
    native = {"uiCapabilities": {"components": [{"name": "KpiCards", "version": 1}], "formats": ["html"]}}
    frames = await run(client, run_input(new_id("t"), "weather please", forwarded_props=native))
    ui = of_type(frames, "CUSTOM")[0].data["value"]
    assert ui["form"] == "props" and "html" not in ui and ui["props"]["items"][0]["value"] == 21


async def test_a_0x_style_request_is_accepted(client: Client) -> None:
    # No state, tools, context, forwardedProps or protocolVersion; unknown fields; a legacy binary part.
    body: dict[str, Any] = {
        "threadId": new_id("t"),
        "runId": "legacy-run",
        "messages": [
            {"id": "m0", "role": "system", "content": "Be nice.", "legacy": True},
            {
                "id": "m1",
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi there"},
                    {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="},
                ],
            },
        ],
        "state": None,
        "clientVersion": "0.0.42",
    }
    frames = await run(client, body)
    assert types(frames) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert frames[0].data["runId"] == frames[-1].data["runId"] == "legacy-run"
    runtime = client.app[SERVICES].runtime
    assert (await runtime.get_run(frames[0].data["metadata"]["agoraRunId"])).turn.text == "hi there"


async def test_the_last_user_message_is_the_turn_and_the_thread_continues(client: Client) -> None:
    thread_id = new_id("t")
    first = await run(client, run_input(thread_id, "hello"))
    body = run_input(thread_id, "weather now")
    body["messages"] = [
        {"id": "u1", "role": "user", "content": "hello"},
        {"id": "a1", "role": "assistant", "content": "Hello from the gateway."},
        *body["messages"],
    ]
    second = await run(client, body)
    assert of_type(second, "TOOL_CALL_START")[0].data["toolCallName"] == "get_weather"
    assert second[0].id == first[-1].id  # the second stream starts where the first ended
    runtime = client.app[SERVICES].runtime
    history = await runtime.store.get_messages(thread_id)
    assert [m.content for m in history if m.role == "user"] == ["hello", "weather now"]


async def test_a_failure_after_the_stream_started_is_a_run_error(client: Client) -> None:
    frames = await run(client, run_input(new_id("t"), "boom"))
    assert types(frames) == ["RUN_STARTED", "RUN_ERROR"]
    error = frames[-1].data
    assert error["code"] == "model_error" and "down" in error["message"]


async def test_anonymous_callers_get_a_cookie_and_their_own_threads(make_client: Any) -> None:
    client = await make_client()
    thread_id = new_id("t")
    response = await client.post("/agent/ag-ui", json=run_input(thread_id, "hello"))
    assert response.status == 200 and "agora_anon" in response.cookies
    assert of_type(parse_sse(await response.text()), "RUN_FINISHED")
    again = await client.post("/agent/ag-ui", json=run_input(thread_id, "hello again"))
    assert again.status == 200  # the same visitor (the client kept the cookie)
    other = await client.post("/agent/ag-ui", json=run_input(thread_id, "mine?"), headers=auth())
    assert other.status == 403 and (await other.json())["code"] == "thread_forbidden"
