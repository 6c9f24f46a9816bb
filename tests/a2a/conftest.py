"""A gateway on a loopback port, httpx clients with bearer tokens, and the real a2a-sdk client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse, TaskState
from aiohttp import web

from channels.a2a import A2A_CHANNEL, A2AChannel
from gateway import Gateway as App
from gateway import Runtime, Settings, sign_actor_token
from gateway.models import ScriptedModel, ScriptStep
from gateway.stores import MemoryStore
from tools import Actor

from ..conftest import RefusalLog, serve

SECRET = "test-secret-for-the-a2a-tests-0123456789"
ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])
WATCHDOG = 10.0


def token_for(actor: Actor, ttl: float = 600) -> str:
    return sign_actor_token(actor, SECRET, ttl)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@dataclass(kw_only=True)
class Gateway:
    """One gateway app served on 127.0.0.1, and what tests reach into."""

    app: web.Application
    base_url: str
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def channel(self) -> A2AChannel:
        return self.app[A2A_CHANNEL]

    @property
    def runtime(self) -> Runtime:
        return self.channel.services.runtime

    @property
    def rpc_url(self) -> str:
        return f"{self.base_url}/a2a"

    def http(self, actor: Actor | None = ALICE, *, version: str | None = "1.0", **headers: str) -> httpx.AsyncClient:
        """An httpx client with ``actor``'s bearer token (none for ``None``) and an ``A2A-Version``."""
        if actor is not None:
            headers["Authorization"] = f"Bearer {token_for(actor)}"
        if version is not None:
            headers["A2A-Version"] = version
        client = httpx.AsyncClient(headers=headers, timeout=3 * WATCHDOG)
        self.clients.append(client)
        return client

    async def sdk(self, actor: Actor = ALICE, *, streaming: bool, **config: Any) -> Client:
        """The real SDK client, discovering the card like any caller."""
        http = self.http(actor, version=None)
        return await create_client(
            self.base_url, client_config=ClientConfig(httpx_client=http, streaming=streaming, **config)
        )

    async def rpc(
        self, method: str, params: Any = None, *, actor: Actor | None = ALICE, version: str | None = "1.0", **extra: Any
    ) -> dict[str, Any]:
        """One raw JSON-RPC call; the JSON answer."""
        body = {"jsonrpc": "2.0", "id": extra.pop("id", "req-1"), "method": method, **extra}
        if params is not None:
            body["params"] = params
        response = await self.http(actor, version=version).post(self.rpc_url, json=body)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    @contextlib.asynccontextmanager
    async def sse_stream(
        self, method: str, params: Any, *, actor: Actor = ALICE, version: str | None = "1.0"
    ) -> AsyncIterator[AsyncIterator[Any]]:
        """A raw streaming call, open: the JSON of each ``data:`` frame as it arrives."""
        body = {"jsonrpc": "2.0", "id": "s-1", "method": method, "params": params}
        client = self.http(actor, version=version)
        async with client.stream("POST", self.rpc_url, json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream"), await response.aread()

            async def frames() -> AsyncIterator[Any]:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        yield json.loads(line[6:])

            yield frames()

    async def sse(self, method: str, params: Any, *, actor: Actor = ALICE, version: str | None = "1.0") -> list[Any]:
        """A raw streaming call; the JSON of every ``data:`` frame."""
        async with asyncio.timeout(WATCHDOG), self.sse_stream(method, params, actor=actor, version=version) as frames:
            return [frame async for frame in frames]


@pytest.fixture
def refusal_log(caplog: pytest.LogCaptureFixture) -> RefusalLog:
    caplog.set_level(logging.INFO)
    caplog.clear()
    # Not the server's: the access log, the client's (httpx) request lines; and the WhatsApp
    # channel says at start-up that it is off.
    return RefusalLog(caplog, route="/a2a", ignore=("aiohttp.access", "httpx", "channels.whatsapp"))


@pytest.fixture
async def make_gateway(
    aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Gateway]]]:
    made: list[tuple[Gateway, Runtime | None]] = []

    async def make(runtime: Runtime | None = None, *, app: App | None = None, **overrides: Any) -> Gateway:
        """The gateway on ``runtime``, or serving ``app`` (a ``gateway.Gateway``) on a runtime of its own."""
        config = settings(**overrides)
        if app is not None:
            runtime = runtime or app.runtime(config)
        served = serve(config, runtime, app)
        server = await aiohttp_server(served, host="127.0.0.1")
        gw = Gateway(app=served, base_url=str(server.make_url("")).rstrip("/"))
        made.append((gw, runtime))
        return gw

    yield make
    for gw, runtime in made:
        for client in gw.clients:
            await client.aclose()
        if runtime is not None:
            await runtime.aclose()


@pytest.fixture
async def demo(make_gateway: Callable[..., Awaitable[Gateway]]) -> Gateway:
    """The embedded demo gateway (demo tools and the rule-based demo model)."""
    return await make_gateway()


@dataclass(kw_only=True, eq=False)
class Gate:
    """A model that answers once ``release`` is called, so a run can be caught while working."""

    entered: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    reply: str = "All done."

    async def step(self, request: Any, index: int) -> ScriptStep:
        self.entered.set()
        await self.released.wait()
        return ScriptStep(text=self.reply)

    def runtime(self) -> Runtime:
        return Runtime(model=ScriptedModel(self.step), store=MemoryStore())


@pytest.fixture
def gate() -> Gate:
    return Gate()


def user_message(*parts: Part, message_id: str | None = None, **fields: Any) -> Message:
    return Message(role=Role.ROLE_USER, message_id=message_id or uuid.uuid4().hex, parts=list(parts), **fields)


def send_request(text: str, *, modes: list[str] | None = None, **fields: Any) -> SendMessageRequest:
    configuration = SendMessageConfiguration(accepted_output_modes=modes or [])
    return SendMessageRequest(message=user_message(Part(text=text), **fields), configuration=configuration)


async def collect(stream: AsyncIterator[StreamResponse], timeout: float = WATCHDOG) -> list[StreamResponse]:
    async with asyncio.timeout(timeout):
        return [event async for event in stream]


def kinds(events: list[StreamResponse]) -> list[str]:
    """``task``, ``status:WORKING``, ``artifact:<name>`` ... per stream event."""
    out = []
    for event in events:
        which = event.WhichOneof("payload")
        if which == "status_update":
            out.append("status:" + _state(event.status_update.status.state))
        elif which == "artifact_update":
            out.append("artifact:" + event.artifact_update.artifact.name)
        elif which == "task":
            out.append("task:" + _state(event.task.status.state))
        else:
            out.append(str(which))
    return out


def _state(state: Any) -> str:
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_")
