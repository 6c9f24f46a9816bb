"""``Attachments`` on every media backend: memory, Redis, SQLite and PostgreSQL (the store's table).

An upload is kept with its owner's record; another actor's id is 403, an unknown or expired one
404; a file uploaded before its thread was known joins the thread when a send resolves it, and
erasing the thread erases the bytes and the record.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as redis

from gateway import AttachmentForbiddenError, AttachmentNotFoundError, Attachments
from gateway.stores import SqliteStore
from renderers import MediaBackend, MemoryMediaBackend, RedisMediaBackend
from tests.attachment_parts import PNG
from tests.conftest import drop_prefix, own_postgres_store
from tools import Actor

ALICE, BOB = Actor(id="alice"), Actor(id="bob")


@pytest.fixture(params=["memory", "redis", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MediaBackend]:
    if request.param == "memory":
        yield MemoryMediaBackend()
    elif request.param == "redis":
        url = request.getfixturevalue("redis_url")
        prefix = f"test-att-{uuid.uuid4().hex[:10]}"
        client = redis.Redis.from_url(url)
        yield RedisMediaBackend(client, prefix=f"{prefix}:")
        await client.aclose()
        await drop_prefix(url, prefix)
    elif request.param == "sqlite":
        store = SqliteStore(tmp_path / "agora.db")
        yield store.media_backend()
        await store.aclose()
    else:
        async with own_postgres_store(request.getfixturevalue("postgres_dsn")) as postgres:
            yield postgres.media_backend()


async def test_owner_records_threads_and_erasure(backend: MediaBackend) -> None:
    attachments = Attachments(backend=backend)
    early = await attachments.store_upload(ALICE, None, "early.png", "image/png", PNG)
    later = await attachments.store_upload(ALICE, "t-1", "later.png", None, PNG)
    assert (later.mime, later.size) == ("image/png", len(PNG))

    assert await attachments.resolve(ALICE, [early.id, later.id], thread_id="t-1") == (early, later)
    with pytest.raises(AttachmentForbiddenError):
        await attachments.resolve(BOB, [early.id])
    with pytest.raises(AttachmentNotFoundError):
        await attachments.resolve(ALICE, ["att_" + "f" * 32])
    assert await attachments.read(early) == PNG

    # Both joined the thread (the early one when the send named it): erasure takes bytes and records.
    assert await backend.forget_thread("t-1") == 4
    for gone in (early, later):
        with pytest.raises(AttachmentNotFoundError):
            await attachments.read(gone)
        with pytest.raises(AttachmentNotFoundError):
            await attachments.resolve(ALICE, [gone.id])


async def test_an_expired_attachment_is_not_found(backend: MediaBackend) -> None:
    attachments = Attachments(backend=backend, ttl=-1.0)  # expired as soon as it is kept
    kept = await attachments.store_upload(ALICE, "t-2", "old.png", "image/png", PNG)
    with pytest.raises(AttachmentNotFoundError):
        await attachments.resolve(ALICE, [kept.id])


async def test_files_read_at_once_are_bounded_and_the_rest_wait_their_turn() -> None:
    """``max_concurrent`` files are read at a time: the next one's first chunk is not even asked for."""
    from tools import Actor

    attachments = Attachments(backend=MemoryMediaBackend(), max_concurrent=1)
    first_open = asyncio.Event()
    release = asyncio.Event()
    asked: list[str] = []
    png = PNG

    async def slow(name: str) -> AsyncIterator[bytes]:
        asked.append(name)
        if name == "a":
            first_open.set()
            await release.wait()
        yield png

    actor = Actor(id="u1")
    a = asyncio.create_task(attachments.store_upload(actor, None, "a.png", "image/png", slow("a")))
    await asyncio.wait_for(first_open.wait(), 5)
    b = asyncio.create_task(attachments.store_upload(actor, None, "b.png", "image/png", slow("b")))
    for _ in range(20):
        await asyncio.sleep(0)  # b's task runs as far as it can
    assert asked == ["a"], "the second file waits for the first one's slot"
    release.set()
    stored = await asyncio.wait_for(asyncio.gather(a, b), 5)
    assert asked == ["a", "b"] and [s.mime for s in stored] == ["image/png", "image/png"]
