"""Each channel tells the person: the web socket, AG-UI and A2A, a warning near the budget and the
refusal past it (mid-run and at send time)."""

from __future__ import annotations

import json
from typing import Any

from gateway import Quota, Runtime

from ..ag_ui.conftest import parse_sse, run_input, types
from ..engine.conftest import weather_tool
from ..usage.conftest import ALICE, model, new_thread, step, token_for, tool_step
from ..web.conftest import connect
from .test_quotas import spend


def over_budget_runtime() -> Runtime:
    """Day budget 1 000, 600 spent: step 0 warns (60 % >= 50 %) and spends 500, so step 1 is refused."""
    scripted = model(tool_step("get_weather", {"city": "Faro"}, tokens=(400, 100)), step(), step(), step())
    return Runtime(tools=[weather_tool()], model=scripted, quota=Quota(day=1000, warn_at=0.5))


async def test_the_web_socket_shows_the_warning_the_refusal_and_refuses_the_next_send(make_client: Any) -> None:
    runtime = over_budget_runtime()
    await spend(runtime.store, 600)
    client = await make_client(runtime)
    socket = await connect(client, token=token_for(ALICE))
    await socket.hello()
    frames = await socket.turn("weather?")
    warning = next(f for f in frames if f["type"] == "quota-warning")
    assert (warning["period"], warning["used"], warning["limit"]) == ("day", 600, 1000)
    error = next(f for f in frames if f["type"] == "run-error")
    assert (error["code"], error["period"]) == ("quota_exceeded", "day")
    assert frames[-1]["status"] == "failed" and frames[-1]["cost_usd"] is None
    await socket.send({"type": "send", "text": "again", "id": "f-2"})
    refused = (await socket.until_type("error"))[-1]
    assert (refused["code"], refused["period"], refused["used"], refused["limit"]) == (
        "quota_exceeded",
        "day",
        1100,
        1000,
    )
    assert refused["id"] == "f-2"
    assert runtime.model.calls == 1  # type: ignore[union-attr]  # step 1 and the second send never reached it


async def test_ag_ui_maps_the_warning_to_a_custom_event_and_the_refusal_to_run_error(make_client: Any) -> None:
    runtime = over_budget_runtime()
    await spend(runtime.store, 600)
    client = await make_client(runtime)
    headers = {"Authorization": f"Bearer {token_for(ALICE)}"}
    thread = new_thread()
    response = await client.post("/agent/ag-ui", json=run_input(thread, "weather?"), headers=headers)
    frames = parse_sse(await response.text())
    kinds = types(frames)
    assert "CUSTOM agora.quota-warning" in kinds
    [custom] = [f for f in frames if f.type == "CUSTOM"]
    assert custom.data["value"] == {"period": "day", "used": 600, "limit": 1000}
    assert kinds[-1] == "RUN_ERROR" and frames[-1].data["code"] == "quota_exceeded"
    again = await client.post("/agent/ag-ui", json=run_input(thread, "more"), headers=headers)
    assert again.status == 429  # refused before a stream opens, as a rate limit is
    refused = await again.json()
    assert (refused["code"], refused["period"]) == ("quota_exceeded", "day") and "today" in refused["message"]


async def test_a2a_fails_the_task_with_the_persons_message(make_client: Any) -> None:
    runtime = over_budget_runtime()
    await spend(runtime.store, 600)
    client = await make_client(runtime)
    headers = {"Authorization": f"Bearer {token_for(ALICE)}", "A2A-Version": "1.0"}
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "weather?"}]}
    body = {
        "jsonrpc": "2.0",
        "id": "r-1",
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": False}},
    }
    answer = await (await client.post("/a2a", json=body, headers=headers)).json()
    status = answer["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert "today's allowance" in status["message"]["parts"][0]["text"]
    body["params"]["message"]["messageId"] = "m-3"
    again = await client.post("/a2a", json=body, headers=headers)
    assert again.status == 429  # as a rate limit: refused before a task is made
    refused = await again.json()
    assert (refused["code"], refused["period"]) == ("quota_exceeded", "day")


async def test_a2a_streams_the_warning_as_a_working_status(make_client: Any) -> None:
    runtime = over_budget_runtime()
    await spend(runtime.store, 600)
    client = await make_client(runtime)
    headers = {"Authorization": f"Bearer {token_for(ALICE)}", "A2A-Version": "1.0"}
    message = {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "weather?"}]}
    body = {"jsonrpc": "2.0", "id": "s-1", "method": "SendStreamingMessage", "params": {"message": message}}
    answer = await client.post("/a2a", json=body, headers=headers)
    frames = [json.loads(line[6:]) for line in (await answer.text()).splitlines() if line.startswith("data: ")]
    texts = [
        part["text"]
        for frame in frames
        for part in frame["result"].get("statusUpdate", {}).get("status", {}).get("message", {}).get("parts", [])
    ]
    assert "You have used 60% of your daily allowance of the assistant." in texts
    assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
