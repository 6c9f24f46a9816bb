"""A gateway app under aiohttp's test client, and a small web-socket driver."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import WSMsgType, web
from aiohttp.test_utils import TestClient

from gateway import SERVICES, Gateway, Runtime, Settings, sign_actor_token
from gateway.stores import MemoryStore, SqliteStore, Store
from tools import Actor

from ..conftest import channels_for, own_postgres_store, serve

SECRET = "test-secret-for-the-web-tests"
ALICE = Actor(id="alice", roles=["member"])
BOB = Actor(id="bob", roles=["member"])


def token_for(actor: Actor, ttl: float = 600) -> str:
    return sign_actor_token(actor, SECRET, ttl)


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


class Socket:
    """One web socket with helpers to read frames until a condition holds."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []

    async def send(self, frame: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(frame))

    async def recv(self, timeout: float = 5.0) -> dict[str, Any]:
        message = await self.ws.receive(timeout=timeout)
        if message.type is not WSMsgType.TEXT:
            raise AssertionError(f"expected a text frame, got {message.type} {message.data!r} {message.extra!r}")
        frame: dict[str, Any] = json.loads(message.data)
        self.frames.append(frame)
        return frame

    async def until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> list[dict[str, Any]]:
        """Frames up to and including the first that matches."""
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.recv(timeout)
                seen.append(frame)
                if predicate(frame):
                    return seen

    async def until_type(self, kind: str, timeout: float = 5.0) -> list[dict[str, Any]]:
        return await self.until(lambda f: f.get("type") == kind, timeout)

    async def hello(self, **fields: Any) -> dict[str, Any]:
        await self.send({"type": "hello", **fields})
        return (await self.until_type("welcome"))[-1]

    async def turn(self, text: str, *, timeout: float = 5.0, **fields: Any) -> list[dict[str, Any]]:
        """Send a message and collect frames until its run finishes or parks."""
        await self.send({"type": "send", "text": text, **fields})
        return await self.until(lambda f: f.get("type") == "run-finished", timeout)

    async def closed(self, timeout: float = 5.0) -> Any:
        message = await self.ws.receive(timeout=timeout)
        assert message.type in (WSMsgType.CLOSE, WSMsgType.CLOSED, WSMsgType.CLOSING), message
        return message


Connect = Callable[..., Awaitable[Socket]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def each_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """The test once on a ``MemoryStore``, a ``SqliteStore`` file and a ``PostgresStore`` schema of its own."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.aclose()
    elif request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "agora.db")
        yield sqlite
        await sqlite.aclose()
    else:
        async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres


@pytest.fixture
async def make_client(
    aiohttp_client: Any,
) -> AsyncIterator[Callable[..., Awaitable[TestClient[web.Request, web.Application]]]]:
    runtimes: list[Runtime] = []

    async def make(
        runtime: Runtime | None = None, *, app: Gateway | None = None, **overrides: Any
    ) -> TestClient[web.Request, web.Application]:
        """An app under the test client; ``app`` serves that ``Gateway`` (on its own runtime unless given)."""
        channels = channels_for(overrides)
        config = settings(**overrides)
        if app is not None and runtime is None:
            runtime = app.runtime(config)
        if runtime is not None:
            runtimes.append(runtime)
        built = serve(config, runtime, app, channels)
        client: TestClient[web.Request, web.Application] = await aiohttp_client(built)
        return client

    yield make
    for runtime in runtimes:
        await runtime.aclose()


async def until_no_sockets(app: web.Application, *tasks: str, timeout: float = 10.0) -> None:
    """Wait (a bounded poll of the server's view) until it holds no socket and no task named in ``tasks``."""
    sockets = app[SERVICES].metrics.sockets
    async with asyncio.timeout(timeout):
        while sockets._value.get() != 0 or any(task.get_name() in tasks for task in asyncio.all_tasks()):
            await asyncio.sleep(0.01)


async def connect(client: TestClient[web.Request, web.Application], *, token: str | None = None, **kw: Any) -> Socket:
    headers = kw.pop("headers", {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    ws = await client.ws_connect("/agent/ws", headers=headers, **kw)
    return Socket(ws)
