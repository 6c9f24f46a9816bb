"""Shared fixtures."""

from __future__ import annotations

import asyncio
import concurrent.futures
import io
import json
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as redis
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from channels.web import WebChannel, WebOptions
from gateway import Channel, Gateway, Runtime, Settings, create_app
from gateway.app import assemble, default_channels
from gateway.models import AnthropicModel, OpenAIModel
from gateway.stores import MemoryStore, PostgresStore, RedisStore, Store
from tests.models.fake_anthropic import FakeAnthropic
from tests.models.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]


def _files_under(folder: Path) -> dict[str, int]:
    return {str(path): path.stat().st_mtime_ns for path in folder.rglob("*")} if folder.is_dir() else {}


@pytest.fixture(scope="session", autouse=True)
def no_store_in_the_checkout() -> Iterator[None]:
    """The suite leaves ``./.agora`` of the checkout as it found it (absent, or untouched).

    ``serve`` keeps its store in ``./.agora/agora.db`` unless told otherwise: a test that starts
    it in the checkout chooses ``memory://`` (``tests.cli.test_serve.serve_env``) or a SQLite
    file under its ``tmp_path``.
    """
    folder = ROOT / ".agora"
    before = _files_under(folder)
    existed = folder.exists()
    yield
    assert folder.exists() == existed and _files_under(folder) == before, (
        f"a test wrote {folder}: give its serve AGORA_STORE_URL=memory:// or a SQLite file in its tmp_path"
    )


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the shared test Redis (``AGORA_TEST_REDIS_URL``, else 127.0.0.1:6379/0).

    Tests that use it must namespace their keys (a unique prefix) and never flush the database:
    other suites use the same server concurrently. Without a Redis the tests fail (never skip):
    ``.ci/bootstrap`` starts one.
    """
    url = os.environ.get("AGORA_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    parts = urlsplit(url)
    if parts.scheme in {"redis", "rediss"}:
        try:
            socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 6379), timeout=1).close()
        except OSError as exc:
            pytest.fail(f"no Redis answers at {parts.hostname}:{parts.port} (run .ci/bootstrap): {exc}")
    return url


async def drop_prefix(url: str, prefix: str) -> None:
    """Delete the keys under ``prefix`` (never FLUSHDB: the server is shared)."""
    client = redis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private 3-master Redis Cluster for the session (``tests.stores._cluster``), killed by pid at its end.

    Tests that share it leave it as they found it: every node up, and their own key prefix
    dropped from every master (``drop_cluster_prefix``). Started in a loop of its own.
    """
    from tests.stores._cluster import ClusterServers

    servers = ClusterServers(tmp_path_factory.mktemp("session-cluster"), masters=3)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # asked for lazily, maybe inside a test's loop
            pool.submit(asyncio.run, servers.start()).result()
        yield servers
    finally:
        servers.stop()


async def drop_cluster_prefix(ports: Iterable[int], prefix: str) -> None:
    """Delete the keys under ``prefix`` on each master at ``ports`` (a SCAN per node: a cluster has no global SCAN)."""
    for port in ports:
        client = redis.Redis(port=port)
        try:
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            for key in keys:  # one key per DEL: they live in different slots
                await client.delete(key)
        finally:
            await client.aclose()


@asynccontextmanager
async def own_redis_store(url: str, prefix: str | None = None) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` on the shared Redis under a prefix of its own, whose keys are dropped after."""
    prefix = prefix or f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore(url, prefix=prefix)
    try:
        yield store
    finally:
        await store.aclose()
        await drop_prefix(url, prefix)


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` of this test's own (``own_redis_store``)."""
    async with own_redis_store(redis_url) as store:
        yield store


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """The test once on a ``MemoryStore`` and once on a ``RedisStore`` of its own."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.aclose()
        return
    async with own_redis_store(request.getfixturevalue("redis_url")) as store:
        yield store


_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


async def _admin(dsn: str, *statements: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(dsn, timeout=5)
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


def _in_a_thread(dsn: str, *statements: str) -> None:
    """``_admin`` from sync code that may run inside an event loop (a fixture asked for lazily)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _admin(dsn, *statements)).result()


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A fresh database ``agora_test_<random>`` on the test PostgreSQL for this session, dropped at its end.

    The server is ``AGORA_TEST_POSTGRES_URL`` (a DSN of a database to administer from, default
    ``postgresql://postgres@127.0.0.1:5432/postgres``, trust auth). Each store test takes a
    schema of its own in the session's database (``own_postgres_store``). Without a PostgreSQL the
    tests fail (never skip): ``.ci/bootstrap`` starts one.
    """
    admin = os.environ.get("AGORA_TEST_POSTGRES_URL", _ADMIN_DSN)
    parts = urlsplit(admin)
    try:
        socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 5432), timeout=1).close()
    except OSError as exc:
        pytest.fail(f"no PostgreSQL answers at {parts.hostname}:{parts.port} (run .ci/bootstrap): {exc}")
    name = f"agora_test_{uuid.uuid4().hex[:12]}"
    _in_a_thread(admin, f'CREATE DATABASE "{name}"')
    try:
        yield parts._replace(path=f"/{name}").geturl()
    finally:
        _in_a_thread(
            admin,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
            f'DROP DATABASE IF EXISTS "{name}"',
        )


async def drop_schema(dsn: str, schema: str) -> None:
    """Drop a test's schema and everything in it."""
    await _admin(dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def own_postgres_store(dsn: str, schema: str | None = None, **options: Any) -> AsyncIterator[PostgresStore]:
    """A ``PostgresStore`` on the session's database under a schema of its own, dropped after."""
    schema = schema or f"test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema, **options)
    try:
        yield store
    finally:
        await store.aclose()
        await drop_schema(dsn, schema)


class RefusalLog:
    """The log lines of refusals: exactly one per refused request, naming its codes and route.

    Records of ``ignore`` (a client's own request lines...) do not count, nor the access log
    (``gateway.access``, aiohttp's): a request a channel refuses in its protocol (an HTTP 200
    carrying a JSON-RPC error) has its access line besides the channel's refusal line.
    """

    def __init__(self, caplog: pytest.LogCaptureFixture, *, route: str, ignore: Iterable[str]) -> None:
        self.caplog = caplog
        self.route = route
        self.ignore = frozenset(ignore) | {"gateway.access", "aiohttp.access"}

    def one(self, *parts: int | str, route: str | None = None) -> str:
        """The one line logged since the last check, checked (no traceback, every part named); consumed."""
        lines = self._lines()
        self.caplog.clear()
        assert len(lines) == 1, [r.getMessage() for r in lines]
        [line] = lines
        message = line.getMessage()
        assert line.exc_info is None and "\n" not in message, message  # never a traceback
        assert all(f" {part}" in f" {message}" for part in parts), (parts, message)
        assert (route or self.route) in message, message
        return message

    def none(self) -> None:
        """Nothing was logged since the last check."""
        lines = [r.getMessage() for r in self._lines()]
        self.caplog.clear()
        assert lines == []

    def _lines(self) -> list[logging.LogRecord]:
        return [r for r in self.caplog.records if r.name not in self.ignore]


_WEB_KEYS = {
    "allowed_origins": "allowed_origins",
    "ws_frame_limit": "frame_limit",
    "ws_send_timeout": "send_timeout",
    "ws_heartbeat": "heartbeat",
    "ws_batch_window": "batch_window",
}


def channels_for(overrides: dict[str, Any]) -> list[Channel]:
    """The default channels, the web one with the ``ws_*`` / ``allowed_origins`` of ``overrides`` (popped)."""
    web_options = {_WEB_KEYS[key]: overrides.pop(key) for key in list(overrides) if key in _WEB_KEYS}
    channels = default_channels()
    channels[0] = WebChannel(WebOptions(_env_file=None, **web_options))  # type: ignore[call-arg]
    return channels


class JsonLog:
    """What the root logger wrote as JSON lines (``configure_logging(..., "json")``), parsed."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def lines(self, logger: str | None = None) -> list[dict[str, Any]]:
        """Every line (each must be one JSON object), or those of ``logger``."""
        parsed = [json.loads(line) for line in self.text.splitlines()]
        assert all(isinstance(line, dict) for line in parsed)
        return [line for line in parsed if logger is None or line["logger"] == logger]


@pytest.fixture
def json_log() -> Iterator[JsonLog]:
    """The root logger writing JSON lines at INFO to a buffer for the test (as ``serve --log-format json``)."""
    from gateway._logs import configure_logging

    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = configure_logging(logging.INFO, "json", stream=stream)
    try:
        yield JsonLog(stream)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
async def fake(aiohttp_server: AiohttpServer) -> AsyncIterator[FakeOpenAI]:
    """A fake OpenAI-compatible server on loopback (``fake.base_url`` ends in ``/v1``)."""
    fake = FakeOpenAI()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", fake.handle)
    server = await aiohttp_server(app)
    fake.base_url = str(server.make_url("/v1"))
    yield fake
    fake.release.set()  # stalled replies return, so the server closes without waiting


@pytest.fixture
async def fake_anthropic(aiohttp_server: AiohttpServer) -> AsyncIterator[FakeAnthropic]:
    """A fake of Anthropic's Messages API on loopback (``fake_anthropic.base_url`` has no ``/v1``)."""
    fake = FakeAnthropic()
    app = web.Application()
    app.router.add_post("/v1/messages", fake.handle)
    server = await aiohttp_server(app)
    fake.base_url = str(server.make_url("")).rstrip("/")
    yield fake
    fake.release.set()  # stalled replies return, so the server closes without waiting


@pytest.fixture
async def anthropic_model(fake_anthropic: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    """An ``AnthropicModel`` on the ``fake_anthropic`` server (closed at teardown)."""
    model = AnthropicModel(
        "claude-test", api_key="test-key", base_url=fake_anthropic.base_url, backoff=0.01, timeout=5.0
    )
    yield model
    await model.aclose()


@pytest.fixture
async def openai_model(fake: FakeOpenAI) -> AsyncIterator[OpenAIModel]:
    """An ``OpenAIModel`` on the ``fake`` server (closed at teardown)."""
    model = OpenAIModel("gpt-test", api_key="test-key", base_url=fake.base_url, backoff=0.01, timeout=5.0)
    yield model
    await model.aclose()


def serve(
    config: Settings, runtime: Runtime | None, app: Gateway | None = None, channels: list[Channel] | None = None
) -> web.Application:
    """The application under test: ``app`` (a ``Gateway``: its catalog, static folder) on ``runtime``
    (the test's to close), else ``create_app`` around ``runtime`` (the embedded demo when ``None``)."""
    if app is not None:
        assert runtime is not None, "build the app's runtime (app.runtime(config)) so the test closes it"
        return assemble(config, app, runtime=runtime, owns_runtime=False, channels=channels)
    return create_app(config, runtime=runtime, channels=channels)


@pytest.fixture
def restore_root() -> Iterator[None]:
    """The root logger's handlers and level as they were (for tests that call ``configure_logging``)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
