"""Fixtures of the store contract suite: every test runs on every store (memory, Redis, SQLite, PostgreSQL)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis

from gateway.stores import MemoryStore, PostgresStore, RedisStore, SqliteStore, Store

from ..conftest import drop_cluster_prefix, drop_prefix, own_postgres_store, own_redis_store
from ._cluster import ClusterServers
from ._server import RedisServer

__all__ = ["drop_prefix"]  # imported from here by the store tests


@pytest.fixture
def prefix() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis-text-client", marks=pytest.mark.redis),
        pytest.param("redis-cluster", marks=pytest.mark.redis),
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def store(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> AsyncIterator[Store]:
    """Each store under test; ``redis-text-client`` is a caller's client that decodes replies;
    ``redis-cluster`` the session's 3-master cluster; ``sqlite`` a file in ``tmp_path``;
    ``postgres`` a schema of its own in the session's database."""
    if request.param == "memory":
        memory = MemoryStore()
        yield memory
        await memory.aclose()
        return
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "agora.db")
        await sqlite.ping()
        yield sqlite
        await sqlite.aclose()
        return
    if request.param == "postgres":
        async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres:
            await postgres.ping()
            yield postgres
        return
    if request.param == "redis-cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster_store = RedisStore(cluster.url, prefix=prefix)
        await cluster_store.ping()
        try:
            yield cluster_store
        finally:
            await cluster_store.aclose()
            await drop_cluster_prefix(await cluster.master_ports(), prefix)
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
    """The root fixture's store, under this test's ``prefix`` (some tests read its keys)."""
    async with own_redis_store(redis_url, prefix) as store:
        yield store


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[ClusterServers]:
    """A private 3-master Redis Cluster of the test's own (it may kill its nodes), stopped by pid after."""
    servers = ClusterServers(tmp_path / "cluster", masters=3)
    try:
        await servers.start()
        yield servers
    finally:
        servers.stop()


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


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def sql_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqliteStore | PostgresStore]:
    """Each SQL store (for what only they have: a schema, media and render tables)."""
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "agora.db")
        try:
            yield sqlite
        finally:
            await sqlite.aclose()
        return
    async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres:
        yield postgres
