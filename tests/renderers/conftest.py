"""Fixtures of the renderer tests.

Worker processes import weasyprint (about a second each), so one pool serves the whole session:
tests that need PNG or PDF build their own ``Renderer(pool=shared_pool)`` (cheap, own cache and
counters) on the session event loop (``pytestmark = pytest.mark.asyncio(loop_scope="session")``).
Tests that kill workers or exhaust time limits build a pool of their own.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from renderers import Renderer, RenderPool


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_pool() -> AsyncIterator[RenderPool]:
    owner = Renderer(workers=2)
    pool = owner.pool
    pool.start()
    try:
        yield pool
    finally:
        await owner.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def renderer(shared_pool: RenderPool) -> AsyncIterator[Renderer]:
    async with Renderer(pool=shared_pool) as fresh:
        yield fresh


@pytest_asyncio.fixture(loop_scope="session")
async def patient_renderer(shared_pool: RenderPool) -> AsyncIterator[Renderer]:
    """For heavy layouts: the machine running the tests may be busy; these test output, not speed."""
    async with Renderer(pool=shared_pool, timeout=120) as fresh:
        yield fresh


@pytest_asyncio.fixture(loop_scope="session")
async def redis_client() -> AsyncIterator[Redis]:
    client = Redis(host="127.0.0.1", port=6379)
    try:
        await client.ping()
    except Exception as exc:  # a missing server is a setup problem, reported as such
        pytest.fail(f"Redis on 127.0.0.1:6379 is required for this test: {exc}")
    yield client
    await client.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def redis_prefix(redis_client: Redis) -> AsyncIterator[str]:
    """A key prefix no other test uses; its keys are deleted afterwards (never FLUSHDB)."""
    prefix = f"test:renderers:{uuid.uuid4().hex}:"
    yield prefix
    keys = [key async for key in redis_client.scan_iter(match=prefix + "*", count=1000)]
    if keys:
        await redis_client.delete(*keys)
