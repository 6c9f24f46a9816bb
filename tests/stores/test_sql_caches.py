"""Media and renders in the SQL store's database: served until they expire, swept after, erased with
their thread; a database that is away is a miss for the render cache and an error for media."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from gateway.stores import PostgresStore
from renderers import MediaItem, MediaStore, MediaTokenError, MediaUnavailableError, Rendered

from ._helpers import begin, eventually
from ._sql_support import SqlStore, reopen, rows

SECRET = "s" * 32
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_media_are_served_until_they_expire_and_swept_after(sql_store: SqlStore) -> None:
    backend = sql_store.media_backend()
    now = time.time()
    await backend.put("a" * 32, MediaItem(PNG, "image/png", "page.png"), now + 3600)
    await backend.put("b" * 32, MediaItem(b"%PDF-1.7", "application/pdf"), now + 1.0)  # long enough to read once
    assert await backend.get("a" * 32) == MediaItem(PNG, "image/png", "page.png")
    assert await backend.get("b" * 32) == MediaItem(b"%PDF-1.7", "application/pdf", None)
    assert await backend.get("c" * 32) is None

    async def expired() -> bool:
        return await backend.get("b" * 32) is None

    await eventually(expired)
    assert await rows(sql_store, "SELECT count(*) FROM media") == [(2,)], "an expired row is not served, not yet gone"
    sql_store._next_sweep = 0  # the sweep interval has passed
    await backend.put("d" * 32, MediaItem(b"x", "text/plain"), time.time() + 3600)
    assert sorted(r[0] for r in await rows(sql_store, "SELECT media_id FROM media")) == ["a" * 32, "d" * 32]


async def test_a_media_store_on_it_serves_every_process_sharing_the_database(sql_store: SqlStore) -> None:
    token = await MediaStore(SECRET, backend=sql_store.media_backend()).put(PNG, "image/png", filename="a b.png")
    other = reopen(sql_store)  # another process, the same secret and database
    try:
        item = await MediaStore(SECRET, backend=other.media_backend()).get(token)
        assert item == MediaItem(PNG, "image/png", "a b.png")
        with pytest.raises(MediaTokenError):
            await MediaStore("t" * 32, backend=other.media_backend()).get(token)  # another secret
    finally:
        await other.aclose()


async def test_erasing_a_thread_erases_its_media(sql_store: SqlStore, thread_id: str) -> None:
    await begin(sql_store, thread_id)
    backend = sql_store.media_backend()
    expires = time.time() + 3600
    await backend.put("1" * 32, MediaItem(b"mine", "text/plain"), expires, thread_id=thread_id)
    await backend.put("2" * 32, MediaItem(b"other", "text/plain"), expires, thread_id=f"{thread_id}-other")
    await backend.put("3" * 32, MediaItem(b"nobody's", "text/plain"), expires)
    assert await sql_store.delete_thread(thread_id) is True
    assert await backend.get("1" * 32) is None
    assert await backend.get("2" * 32) is not None and await backend.get("3" * 32) is not None
    assert await sql_store.get_thread(thread_id) is None
    assert await sql_store.delete_thread(thread_id) is False
    await backend.put("4" * 32, MediaItem(b"gone", "text/plain"), time.time() - 1, thread_id="t-x")
    await backend.put("5" * 32, MediaItem(b"live", "text/plain"), expires, thread_id="t-x")
    assert await backend.forget_thread("t-x") == 1  # the one not expired yet
    assert await backend.get("5" * 32) is None and await backend.forget_thread("t-x") == 0


async def test_renders_are_kept_for_their_ttl_then_missed_and_swept(sql_store: SqlStore) -> None:
    cache = sql_store.render_cache(ttl=3600)
    short = sql_store.render_cache(ttl=0.05)
    pages = Rendered(PNG, "image/png", (PNG, PNG[::-1]), 2)
    text = Rendered("Olá, <b>mundo</b>", "text/html")
    await cache.set("k-png", pages)
    await cache.set("k-html", text)
    await short.set("k-short", text)
    assert await cache.get("k-png") == pages
    assert await cache.get("k-html") == text
    assert await cache.get("k-missing") is None

    async def missed() -> bool:
        return await cache.get("k-short") is None

    await eventually(missed)
    sql_store._next_sweep = 0
    await cache.set("k-html", text)
    assert sorted(r[0] for r in await rows(sql_store, "SELECT key FROM renders")) == ["k-html", "k-png"]


async def test_a_render_larger_than_the_limit_is_not_kept(sql_store: SqlStore) -> None:
    cache = sql_store.render_cache(max_item_bytes=100)
    await cache.set("big", Rendered(PNG, "image/png", (PNG,)))
    assert await cache.get("big") is None
    assert await rows(sql_store, "SELECT count(*) FROM renders") == [(0,)]


@pytest.mark.postgres
async def test_a_database_away_is_a_miss_for_renders_and_an_error_for_media(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/agora", connect_timeout=1)
    try:
        cache = store.render_cache()
        with caplog.at_level(logging.WARNING, logger="gateway.stores.sql"):
            assert await cache.get("k") is None
            await cache.set("k", Rendered("x", "text/plain"))
        assert [r.getMessage().split(":")[0] for r in caplog.records] == [
            "render cache read failed",
            "render cache write failed",
        ]
        with pytest.raises(MediaUnavailableError, match="unavailable"):
            await store.media_backend().get("a" * 32)
        with pytest.raises(MediaUnavailableError):
            await store.media_backend().put("a" * 32, MediaItem(b"x", "text/plain"), time.time() + 60)
    finally:
        await store.aclose()
