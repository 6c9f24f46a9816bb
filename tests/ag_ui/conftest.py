"""A gateway app with a scripted runtime, an AG-UI request builder and a strict SSE reader.

Every ``data:`` line the gateway sends is parsed with ``TypeAdapter(ag_ui.core.Event)``: a frame the
protocol's own package cannot read fails the test that received it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from ag_ui.core import BaseEvent, Event, ResumeEntry, RunAgentInput, UserMessage
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel, TypeAdapter

from gateway import Agent, Gateway, Runtime, Settings, create_app, sign_actor_token
from gateway.app import assemble
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from gateway.models import UserMessage as HistoryUserMessage
from tools import Actor, ConfirmTemplate, ToolPresentation, UiComponent, define_tool

from ..conftest import RefusalLog

SECRET = "test-secret-for-the-ag-ui-tests"
ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])
EVENT: TypeAdapter[Any] = TypeAdapter(Event)

Client = TestClient[web.Request, web.Application]


def auth(actor: Actor = ALICE) -> dict[str, str]:
    return {"Authorization": f"Bearer {sign_actor_token(actor, SECRET, 600)}"}


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def run_input(
    thread_id: str,
    text: str | None = None,
    *,
    run_id: str | None = None,
    resume: list[ResumeEntry] | None = None,
    forwarded_props: Any = None,
) -> dict[str, Any]:
    """A ``RunAgentInput`` as a client sends it (camelCase JSON)."""
    messages = [UserMessage(id=new_id("msg"), content=text)] if text is not None else []
    body = RunAgentInput(
        thread_id=thread_id,
        run_id=run_id or new_id("run"),
        messages=messages,
        resume=resume,
        forwarded_props=forwarded_props,
    )
    dumped: dict[str, Any] = body.model_dump(by_alias=True, mode="json")
    return dumped


def approve(interrupt_id: str, approved: bool = True, reason: str | None = None) -> ResumeEntry:
    payload: dict[str, Any] = {"approved": approved}
    if reason is not None:
        payload["reason"] = reason
    return ResumeEntry(interrupt_id=interrupt_id, status="resolved", payload=payload)


@dataclass
class Frame:
    """One SSE frame: its ``id:`` and its AG-UI event, validated."""

    id: int
    event: BaseEvent
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.data["type"])


def parse_sse(body: str) -> list[Frame]:
    """Split on blank lines; every frame has an ``id:`` and a ``data:`` that is an AG-UI event."""
    frames: list[Frame] = []
    for block in body.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields: dict[str, str] = {}
        for line in lines:
            name, _, value = line.partition(":")
            assert name in ("id", "data"), f"unexpected SSE line {line!r}"
            assert name not in fields, f"two {name} lines in one frame: {block!r}"
            fields[name] = value.removeprefix(" ")
        assert set(fields) == {"id", "data"}, f"a frame without id or data: {block!r}"
        event = EVENT.validate_json(fields["data"])
        frames.append(Frame(id=int(fields["id"]), event=event, data=json.loads(fields["data"])))
    return frames


@pytest.fixture
def refusal_log(caplog: pytest.LogCaptureFixture) -> RefusalLog:
    caplog.set_level(logging.INFO)
    caplog.clear()
    # The access log is aiohttp's; the WhatsApp channel says at start-up that it is off.
    return RefusalLog(caplog, route="/agent/ag-ui", ignore=("aiohttp.access", "channels.whatsapp"))


def of_type(frames: list[Frame], kind: str) -> list[Frame]:
    return [f for f in frames if f.type == kind]


def types(frames: list[Frame]) -> list[str]:
    return [f.type if f.type != "CUSTOM" else f"CUSTOM {f.data['name']}" for f in frames]


async def post(client: Client, body: Any, *, actor: Actor | None = ALICE, **kw: Any) -> Any:
    headers = {**(auth(actor) if actor is not None else {}), **kw.pop("headers", {})}
    if isinstance(body, dict | list):
        return await client.post("/agent/ag-ui", json=body, headers=headers, **kw)
    return await client.post("/agent/ag-ui", data=body, headers={"Content-Type": "application/json", **headers}, **kw)


async def run(client: Client, body: dict[str, Any], *, actor: Actor = ALICE) -> list[Frame]:
    """POST a ``RunAgentInput`` and read the whole stream."""
    response = await post(client, body, actor=actor)
    assert response.status == 200, await response.text()
    assert response.headers["Content-Type"].startswith("text/event-stream")
    async with asyncio.timeout(10):
        return parse_sse(await response.text())


async def reattach(client: Client, thread_id: str, *, actor: Actor = ALICE, **kw: Any) -> list[Frame]:
    headers = {**auth(actor), **kw.pop("headers", {})}
    response = await client.get(f"/agent/ag-ui/threads/{thread_id}/events", headers=headers, **kw)
    assert response.status == 200, await response.text()
    async with asyncio.timeout(10):
        return parse_sse(await response.text())


# -- a scripted runtime -----------------------------------------------------------------------------


class CityInput(BaseModel):
    city: str


class KeyInput(BaseModel):
    key: str


@dataclass
class Shop:
    """What the tools did, and a gate a slow tool waits on."""

    executed: list[str] = field(default_factory=list)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)


def shop_tools(shop: Shop) -> list[Any]:
    @define_tool(
        name="get_weather",
        description="Current weather for a city.",
        input=CityInput,
        presentation=ToolPresentation(label="Weather", running="Checking {city}", done="Checked {city}", icon="sun"),
        present=lambda output, ctx: UiComponent(
            component="KpiCards",
            props={"items": [{"label": output["city"], "value": output["temp"], "unit": "°C"}]},
        ),
    )
    async def get_weather(input: CityInput, ctx: Any) -> dict[str, Any]:
        return {"city": input.city, "temp": 21}

    @define_tool(
        name="purge_cache",
        description="Purge one cache key.",
        input=KeyInput,
        kind="action",
        presentation=ToolPresentation(
            label="Cache purge",
            running="Purging {key}",
            done="Purged {key}",
            tone="destructive",
            confirm=ConfirmTemplate(title="Purge {key}?", verb="Purge"),
        ),
    )
    async def purge_cache(input: KeyInput, ctx: Any) -> dict[str, Any]:
        shop.executed.append(input.key)
        return {"purged": input.key}

    @define_tool(name="slow_report", description="A report that takes a while.", input=KeyInput)
    async def slow_report(input: KeyInput, ctx: Any) -> dict[str, Any]:
        shop.entered.set()
        await shop.gate.wait()
        return {"report": input.key}

    return [get_weather, purge_cache, slow_report]


def _user_text(request: ModelRequest) -> str:
    return next(m.content for m in reversed(request.messages) if isinstance(m, HistoryUserMessage))


def _call(name: str, **args: Any) -> ScriptStep:
    return ScriptStep(tool_calls=[ToolCallRequest(name=name, args=args)])


def script(request: ModelRequest, index: int) -> ScriptStep:
    """Answers by the user's words: weather, purge <key>, purge two, slow, boom, anything else."""
    text, step = _user_text(request), request.step
    last = request.messages[-1].content if request.messages else ""
    if "boom" in text:
        return ScriptStep(error="the model is down")
    if "weather" in text:
        return _call("get_weather", city="Lisbon") if step == 0 else ScriptStep(deltas=["Sunny ", "in Lisbon."])
    if "purge two" in text:
        keys = ["a", "b"]
        return _call("purge_cache", key=keys[step]) if step < 2 else ScriptStep(text="Both handled.")
    if "purge" in text:
        if step == 0:
            return _call("purge_cache", key=text.split()[-1])
        return ScriptStep(text="Purged." if "purged" in str(last) else "Not purged.")
    if "slow" in text:
        return _call("slow_report", key="q3") if step == 0 else ScriptStep(text="Report ready.")
    return ScriptStep(text="Hello from the gateway.")


def scripted_runtime(shop: Shop) -> Runtime:
    return Runtime(
        tools=shop_tools(shop),
        agents=[Agent(name="assistant", instructions="Help."), Agent(name="other", instructions="Also.")],
        model=ScriptedModel(script),
    )


@pytest.fixture
def shop() -> Shop:
    return Shop()


MakeClient = Callable[..., Awaitable[Client]]


@pytest.fixture
async def make_client(aiohttp_client: Any, shop: Shop) -> AsyncIterator[MakeClient]:
    runtimes: list[Runtime] = []

    async def make(
        *,
        demo: bool = False,
        configure: Callable[[web.Application], None] | None = None,
        gateway: Gateway | None = None,
        **overrides: Any,
    ) -> Client:
        """The scripted shop (or the demo); ``gateway`` serves that app instead, on a runtime of its own."""
        config = settings(**overrides)
        if gateway is not None:
            runtime = gateway.runtime(config)
            runtimes.append(runtime)
            app = assemble(config, gateway, runtime=runtime, owns_runtime=False)
        else:
            runtime = None
            if not demo:
                runtime = scripted_runtime(shop)
                runtimes.append(runtime)
            app = create_app(config, runtime=runtime)
        if configure is not None:
            configure(app)
        client: Client = await aiohttp_client(app)
        return client

    yield make
    for runtime in runtimes:
        await runtime.aclose()


@pytest.fixture
async def client(make_client: MakeClient) -> Client:
    return await make_client()
