"""Fixtures of the store contract suite: every test runs on ``MemoryStore`` and ``RedisStore``."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis

from gateway.stores import MemoryStore, RedisStore, Store

from ._server import RedisServer


async def drop_prefix(url: str, prefix: str) -> None:
    """Delete this test's keys (never FLUSHDB: the server is shared)."""
    client = redis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-text-client", marks=pytest.mark.redis),
    ]
)
async def store(request: pytest.FixtureRequest, prefix: str) -> AsyncIterator[Store]:
    """Each store under test; ``redis-text-client`` is a caller's client that decodes replies."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.aclose()
        return
    url: str = request.getfixturevalue("redis_url")
    client = redis.Redis.from_url(url, decode_responses=True) if request.param == "redis-text-client" else None
    redis_store = RedisStore(client or url, prefix=prefix)
    await redis_store.ping()
    try:
        yield redis_store
    finally:
        await redis_store.aclose()
        if client is not None:
            await client.aclose()
        await drop_prefix(url, prefix)


@pytest.fixture
async def redis_store(redis_url: str, prefix: str) -> AsyncIterator[RedisStore]:
    store = RedisStore(redis_url, prefix=prefix)
    try:
        yield store
    finally:
        await store.aclose()
        await drop_prefix(redis_url, prefix)


@pytest.fixture
def thread_id() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    """A private redis-server (started by the test), killed at the end."""
    own = RedisServer(tmp_path)
    try:
        yield own
    finally:
        own.kill()
