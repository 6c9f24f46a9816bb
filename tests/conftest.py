"""Shared fixtures."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest
import redis.asyncio as redis

from gateway.stores import MemoryStore, RedisStore, Store


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


async def drop_keys(url: str, prefix: str) -> None:
    """Delete the keys under ``prefix`` (never FLUSHDB: the server is shared)."""
    client = redis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@asynccontextmanager
async def own_redis_store(url: str) -> AsyncIterator[RedisStore]:
    """A ``RedisStore`` on the shared Redis under a prefix of its own, whose keys are dropped after."""
    prefix = f"test-{uuid.uuid4().hex[:12]}"
    store = RedisStore(url, prefix=prefix)
    try:
        yield store
    finally:
        await store.aclose()
        await drop_keys(url, prefix)


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
