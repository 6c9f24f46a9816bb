"""A gateway (or two sharing a store) on loopback ports, and the official ``mcp`` client against ``/mcp``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from aiohttp import web
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

from gateway import Runtime, Settings, sign_actor_token
from tools import Actor

from ..conftest import RefusalLog, serve

SECRET = "test-secret-for-the-mcp-tests-0123456789"
ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])
WATCHDOG = 10.0

Elicit = Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]]


def token_for(actor: Actor, ttl: float = 600) -> str:
    return sign_actor_token(actor, SECRET, ttl)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)


class _Tee(httpx.AsyncByteStream):
    """A response body passed on as it comes, and kept."""

    def __init__(self, inner: httpx.AsyncByteStream, sink: bytearray) -> None:
        self.inner, self.sink = inner, sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.inner:
            self.sink.extend(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass(eq=False)
class Router(httpx.AsyncBaseTransport):
    """Sends every request to the gateway ``to`` names (a process switch between two requests) and
    keeps what each answered, to check it parses with ``mcp.types``."""

    to: str
    answers: list[tuple[str, str, bytearray]] = field(default_factory=list)
    sent_to: list[str] = field(default_factory=list)
    session_id: str | None = None
    """The ``Mcp-Session-Id`` the gateway gave at ``initialize``."""
    inner: httpx.AsyncHTTPTransport = field(default_factory=httpx.AsyncHTTPTransport)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = httpx.URL(self.to)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        self.sent_to.append(self.to)
        response = await self.inner.handle_async_request(request)
        self.session_id = response.headers.get("mcp-session-id", self.session_id)
        sink = bytearray()
        self.answers.append((request.method, response.headers.get("content-type", ""), sink))
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_Tee(response.stream, sink),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def messages(self) -> list[types.JSONRPCMessage]:
        """Every JSON-RPC message the gateways sent, parsed with ``mcp.types`` (a failure raises)."""
        parsed: list[types.JSONRPCMessage] = []
        for _method, content_type, body in self.answers:
            if content_type.startswith("application/json") and body:
                value = json.loads(body)
                for item in value if isinstance(value, list) else [value]:
                    if "jsonrpc" in item:
                        parsed.append(types.JSONRPCMessage.model_validate(item))
            elif content_type.startswith("text/event-stream"):
                for line in body.decode().splitlines():
                    if line.startswith("data: "):
                        parsed.append(types.JSONRPCMessage.model_validate_json(line[6:]))
        for message in parsed:
            root = message.root
            if isinstance(root, types.JSONRPCRequest):
                types.ServerRequest.model_validate(root.model_dump(by_alias=True, exclude_none=True))
        return parsed


@dataclass(kw_only=True)
class Gateway:
    """One gateway app served on 127.0.0.1."""

    app: web.Application
    base_url: str
    runtime: Runtime | None
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    def http(self, actor: Actor | None = ALICE, **headers: str) -> httpx.AsyncClient:
        if actor is not None:
            headers["Authorization"] = f"Bearer {token_for(actor)}"
        client = httpx.AsyncClient(headers=headers, timeout=3 * WATCHDOG)
        self.clients.append(client)
        return client

    @contextlib.asynccontextmanager
    async def session(
        self,
        actor: Actor = ALICE,
        *,
        elicit: Elicit | None = None,
        router: Router | None = None,
        query: str = "",
    ) -> AsyncIterator[tuple[ClientSession, Router]]:
        """The official client, initialized (with the elicitation capability when ``elicit`` is given)."""
        router = router or Router(self.base_url)
        headers = {"Authorization": f"Bearer {token_for(actor)}"}
        async with (
            httpx.AsyncClient(headers=headers, transport=router, timeout=3 * WATCHDOG) as http,
            streamable_http_client(self.url + query, http_client=http) as (read, write, _),
            ClientSession(read, write, elicitation_callback=elicit) as session,
        ):
            await session.initialize()
            yield session, router


@pytest.fixture
def refusal_log(caplog: pytest.LogCaptureFixture) -> RefusalLog:
    caplog.set_level(logging.INFO)
    caplog.clear()
    return RefusalLog(caplog, route="/mcp", ignore=("aiohttp.access", "httpx", "channels.whatsapp", "mcp.client"))


@pytest.fixture
async def make_gateway(aiohttp_server: Any) -> AsyncIterator[Callable[..., Awaitable[Gateway]]]:
    made: list[Gateway] = []

    async def make(runtime: Runtime | None = None, **overrides: Any) -> Gateway:
        """The gateway on ``runtime`` (the test's to close), else the embedded demo."""
        served = serve(settings(**overrides), runtime)
        server = await aiohttp_server(served, host="127.0.0.1")
        gw = Gateway(app=served, base_url=str(server.make_url("")).rstrip("/"), runtime=runtime)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        for client in gw.clients:
            await client.aclose()
        if gw.runtime is not None:
            await gw.runtime.aclose()


@pytest.fixture
async def demo(make_gateway: Callable[..., Awaitable[Gateway]]) -> Gateway:
    """The embedded demo gateway (demo tools; no model step is taken by an MCP call)."""
    return await make_gateway()


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]
