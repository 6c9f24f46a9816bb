"""The store setting: ``AGORA_STORE_URL`` (``serve --store``) read as a URL, its alias and its refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from gateway import Settings, StoreUnavailableError
from gateway._store_url import SERVE_DEFAULT, parse_store_url
from gateway.app import build_store
from gateway.stores import MemoryStore, RedisStore

CWD = Path("/srv/shop")


@pytest.mark.parametrize(
    ("url", "kind", "path"),
    [
        ("memory://", "memory", None),
        ("sqlite:///agora.db", "sqlite", "/srv/shop/agora.db"),  # three slashes: relative
        ("sqlite:///data/agora.db", "sqlite", "/srv/shop/data/agora.db"),
        ("sqlite:///./data/../agora.db", "sqlite", "/srv/shop/agora.db"),
        ("sqlite:////var/lib/agora/agora.db", "sqlite", "/var/lib/agora/agora.db"),  # four: absolute
        ("sqlite:///my%20shop.db", "sqlite", "/srv/shop/my shop.db"),
        (SERVE_DEFAULT, "sqlite", "/srv/shop/.agora/agora.db"),
        ("postgresql://agora:pw@db:5432/agora", "postgresql", None),
        ("postgres://agora@db/agora?sslmode=require", "postgresql", None),
        ("redis://127.0.0.1:6379/0", "redis", None),
        ("rediss://cache.example:6380/1", "redis", None),
        ("unix:///run/redis.sock", "redis", None),
        ("redis+sentinel://s1:26379,s2:26379/mymaster", "redis", None),
        ("rediss+sentinel://s1:26379/mymaster", "redis", None),
        ("redis+cluster://a:7000,b:7000", "redis", None),
        ("rediss+cluster://user:pw@a:7000", "redis", None),
    ],
)
def test_a_store_url_names_its_kind_and_a_sqlite_file(url: str, kind: str, path: str | None) -> None:
    location = parse_store_url(url, cwd=CWD)
    assert (location.kind, str(location.path) if location.path else None) == (kind, path)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (
            "mysql://root:hunter2@db/agora",
            "unknown store scheme 'mysql'; use memory://, sqlite:///path.db, postgresql://",
        ),
        ("redis+clustr://root:hunter2@a:7000,b:7000", "unknown store scheme 'redis+clustr'"),
        ("hunter2@localhost:6379", "not a store URL (scheme://...)"),
        ("memory://hunter2", "memory:// takes nothing after the scheme"),
        ("sqlite://", "a SQLite URL names a file"),
        ("sqlite:///:memory:", "a SQLite URL names a file"),
        ("sqlite:///data/", "a SQLite URL names a file"),
        ("sqlite://hunter2/agora.db", "a SQLite URL has no host"),
        ("sqlite:///agora.db?hunter2=1", "a SQLite URL takes no query"),
    ],
)
def test_a_bad_store_url_is_refused_by_its_scheme_never_its_rest(url: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_store_url(url, cwd=CWD)
    assert said in str(refused.value) and "hunter2" not in str(refused.value)


def test_display_names_the_kind_and_where_without_the_password() -> None:
    assert parse_store_url("memory://").display() == "memory"
    assert parse_store_url("sqlite:////var/lib/a.db").display() == "sqlite at /var/lib/a.db"
    shown = parse_store_url("postgresql://agora:hunter2@db:5432/agora").display()
    assert shown == "postgresql at postgresql://agora:***@db:5432/agora"
    shown = parse_store_url("postgresql://agora@db/agora?password=hunter2&sslmode=require").display()
    assert "hunter2" not in shown and "sslmode=require" in shown
    assert parse_store_url("redis://:hunter2@r:6379/0").display() == "redis at redis://:***@r:6379/0"


def settings(**values: str) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


def test_store_url_wins_over_the_redis_alias_and_memory_is_the_default_in_code(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGORA_STORE_URL", "AGORA_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    assert settings().resolved_store_url() == "memory://"
    assert settings(redis_url="redis://r/0").resolved_store_url() == "redis://r/0"
    both = settings(redis_url="redis://r/0", store_url="sqlite:///a.db")
    assert both.resolved_store_url() == "sqlite:///a.db"
    monkeypatch.setenv("AGORA_REDIS_URL", "redis://from-env/0")
    monkeypatch.setenv("AGORA_STORE_URL", "memory://")
    assert settings().resolved_store_url() == "memory://"
    monkeypatch.setenv("AGORA_STORE_URL", "")  # an empty line of a .env: not set
    assert settings().resolved_store_url() == "redis://from-env/0"


def test_a_refused_store_setting_names_its_variable_and_not_its_value() -> None:
    with pytest.raises(ValidationError) as refused:
        settings(store_url="mysql://root:hunter2@db/agora")
    [error] = refused.value.errors(include_input=False)
    assert error["loc"] == ("store_url",) and "unknown store scheme 'mysql'" in error["msg"]
    assert "hunter2" not in error["msg"]
    assert "hunter2" not in str(refused.value), "the error's text (a traceback) does not repeat the URL either"
    with pytest.raises(ValidationError) as placeholder:
        settings(secret="changeme-placeholder")
    assert "changeme-placeholder" not in str(placeholder.value)
    with pytest.raises(ValidationError, match="names a Redis URL only"):
        settings(redis_url="postgresql://db/agora")  # the alias is Redis's: AGORA_STORE_URL takes the rest


async def test_build_store_makes_the_store_the_url_names(tmp_path: Path) -> None:
    memory = build_store(settings())
    redis = build_store(settings(redis_url="redis://127.0.0.1:1/0"))  # not connected: nothing is reached yet
    try:
        assert type(memory) is MemoryStore and type(redis) is RedisStore
    finally:
        await memory.aclose()
        await redis.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://agora:hunter2@127.0.0.1:1/agora",
        "postgresql://agora@127.0.0.1:1/agora?password=hunter2",
        "postgresql://agora@127.0.0.1:1/agora?sslpassword=hunter2",
        "postgresql://agora@127.0.0.1:1/agora?SSLPASSWORD=hunter2&sslmode=require",
        "redis://:hunter2@127.0.0.1:1/0",
        "redis://127.0.0.1:1/0?password=hunter2",
    ],
)
async def test_a_store_that_is_down_is_named_without_its_passwords(url: str) -> None:
    store = build_store(settings(store_url=url))  # nothing answers on port 1
    try:
        with pytest.raises(StoreUnavailableError) as down:
            await store.ping()
        assert "127.0.0.1" in str(down.value)
        assert "hunter2" not in str(down.value) and "hunter2" not in repr(store)
    finally:
        await store.aclose()


async def test_a_redis_url_names_its_key_prefix() -> None:
    location = parse_store_url("redis://:hunter2@127.0.0.1:1/0?prefix=staging&socket_keepalive=true")
    assert (location.url, location.prefix) == ("redis://:hunter2@127.0.0.1:1/0?socket_keepalive=true", "staging")
    assert location.display() == "redis at redis://:***@127.0.0.1:1/0?socket_keepalive=true (prefix staging)"
    assert parse_store_url("redis://127.0.0.1:1/0").prefix is None
    store = build_store(settings(store_url="redis://127.0.0.1:1/0?prefix=staging"))  # redis-py never sees prefix=
    default = build_store(settings(store_url="redis://127.0.0.1:1/0"))
    try:
        assert isinstance(store, RedisStore) and isinstance(default, RedisStore)
        assert (store.prefix, default.prefix) == ("staging", "agora")
    finally:
        await store.aclose()
        await default.aclose()
    for bad in ("prefix=", "prefix={a}", "prefix=a&prefix=b"):
        with pytest.raises(ValueError, match="prefix= names the keys' prefix once"):
            parse_store_url(f"redis://127.0.0.1:1/0?{bad}")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("redis+cluster://", "names at least one node"),
        ("redis+cluster://:hunter2@", "names at least one node"),
        ("redis+cluster://a:7000,b:7000/1", "has no databases"),
    ],
)
def test_a_bad_cluster_url_is_refused_before_connecting(url: str, said: str) -> None:
    from gateway.stores._redis_client import connect

    with pytest.raises(ValueError) as refused:
        connect(url, max_connections=4, options={})
    assert said in str(refused.value) and "hunter2" not in str(refused.value)


def test_a_cluster_url_lists_its_nodes_and_credentials() -> None:
    from gateway.stores._redis_client import connect, describe

    client, extra = connect(
        "rediss+cluster://ops:s%40cret@a.example:7000,[::1]:7001,b.example", max_connections=8, options={}
    )
    assert extra == []
    kwargs = client.get_connection_kwargs()  # type: ignore[union-attr]
    assert (kwargs["username"], kwargs["password"]) == ("ops", "s@cret")
    assert describe(client) == "redis+cluster://::1:7001,a.example:7000,b.example:6379"
    from redis.asyncio.connection import SSLConnection

    from gateway.stores._redis_client import node_client

    assert kwargs["connection_class"] is SSLConnection
    node = node_client(client, "a.example", 7000, max_connections=4)  # type: ignore[arg-type]
    assert node.connection_pool.connection_class is SSLConnection
    assert node.connection_pool.connection_kwargs["password"] == "s@cret"
