"""The media store and the render cache follow the store, and an app closes the store it built, once."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway import Runtime, Settings, StoreUnavailableError, create_app
from gateway._services import SERVICES
from gateway.demo import DemoModel
from gateway.stores import MemoryStore, PostgresStore, SqliteStore
from gateway.stores._sql_caches import SqlMediaBackend, SqlRenderCache
from renderers import MemoryMediaBackend, MemoryRenderCache, TieredRenderCache

SECRET = "a-secret-of-the-cache-tests-0123"


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, secret=SECRET, **values)  # type: ignore[call-arg]


async def started(app: web.Application) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    return runner


async def test_a_sqlite_store_keeps_media_and_renders_and_the_app_closes_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aiohttp_client: Any
) -> None:
    closes: list[SqliteStore] = []
    close = SqliteStore.aclose

    async def counted(self: SqliteStore) -> None:
        closes.append(self)
        await close(self)

    monkeypatch.setattr(SqliteStore, "aclose", counted)
    config = settings(store_url=f"sqlite:///{tmp_path / 'agora.db'}")
    app = create_app(config)
    runner = await started(app)
    services = app[SERVICES]
    store = services.runtime.store
    assert isinstance(store, SqliteStore) and isinstance(services.media.backend, SqlMediaBackend)
    cache = services.renderer.cache
    assert isinstance(cache, TieredRenderCache) and isinstance(cache.near, MemoryRenderCache)
    assert isinstance(cache.far, SqlRenderCache)  # behind this process's memory: shared by the database
    token = await services.media.put(b"%PDF-1.7 receipt", "application/pdf", filename="receipt.pdf")
    await runner.cleanup()
    assert closes == [store], "closed with the app, once"
    with pytest.raises(RuntimeError, match="closed SqliteStore"):
        await store.ping()

    again = await aiohttp_client(create_app(config))  # a restart on the same file serves the media URL
    answer = await again.get(f"/media/{token}")
    assert answer.status == 200 and await answer.read() == b"%PDF-1.7 receipt"


async def test_a_runtime_passed_in_keeps_its_store_open_and_its_caches_follow_it(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "agora.db")
    runtime = Runtime(model=DemoModel(), store=store)
    app = create_app(settings(store_url="memory://"), runtime=runtime)
    runner = await started(app)
    try:
        assert isinstance(app[SERVICES].media.backend, SqlMediaBackend)  # the store the runtime runs on
    finally:
        await runner.cleanup()
    await store.ping()  # the caller's: still open
    await runtime.aclose()
    await store.ping()  # a store passed to a Runtime stays the caller's to close
    await store.aclose()


async def test_a_failed_start_leaves_a_runtime_passed_in_as_it_came(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the store's ping is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{port}/agora", connect_timeout=1)
    runtime = Runtime(model=DemoModel(), store=store)
    try:
        with pytest.raises(StoreUnavailableError):
            await started(create_app(settings(store_url="memory://"), runtime=runtime))
        assert runtime.observers == [] and runtime.threads.erasers == [], "nothing of the app that did not start"
    finally:
        await runtime.aclose()
        await store.aclose()


async def test_create_app_in_code_without_a_store_setting_keeps_everything_in_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AGORA_STORE_URL", "AGORA_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    app = create_app(settings())
    runner = await started(app)
    try:
        services = app[SERVICES]
        assert type(services.runtime.store) is MemoryStore
        assert isinstance(services.media.backend, MemoryMediaBackend)
        assert isinstance(services.renderer.cache, MemoryRenderCache)
    finally:
        await runner.cleanup()
