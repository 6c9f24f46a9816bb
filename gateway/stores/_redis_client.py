"""Connecting to Redis from a URL, naming it safely, and translating its failures.

Every ``RedisStore`` call runs inside ``guarded``: a Redis that is down, loading, failing over, out
of connections or silent past the call's deadline becomes ``StoreUnavailableError`` (HTTP 503)
with the URL, its password redacted, and the original exception as ``__cause__``.

The deadline is an ``asyncio.timeout`` around the whole call rather than redis-py's
``socket_timeout``: on Python 3.11 the latter wraps every socket write in ``asyncio.wait_for``,
which costs a task per command (a third of a command's CPU) and can swallow cancellations.
"""

from __future__ import annotations

import asyncio
import re
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    ClusterDownError,
    MasterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from .._errors import StoreUnavailableError

__all__ = ["SENTINEL_SCHEMES", "UNAVAILABLE", "connect", "describe", "guarded", "redact", "unavailable"]

_QUERY_PASSWORD = re.compile(r"(?i)([?&][^=&#]*password=)[^&#]*")

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
"""URL schemes that name a Sentinel-monitored master instead of a server."""

UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,  # also BusyLoadingError, MaxConnectionsError, MasterNotFoundError
    RedisTimeoutError,
    ReadOnlyError,  # a write reached a replica during a failover
    ClusterDownError,
    TryAgainError,
    OutOfMemoryError,  # maxmemory reached: writes come back once memory is freed
    MasterDownError,
    OSError,
)

_TRANSIENT_REPLIES = ("NOREPLICAS", "MISCONF", "BUSY ", "MASTERDOWN", "LOADING")
"""Error replies of a server that will take the same command later (replicas missing, a failing
RDB save with stop-writes-on-bgsave-error, a long script running, a replica syncing)."""


def unavailable(exc: BaseException | None) -> bool:
    """Whether ``exc`` means Redis cannot serve now (as opposed to refusing the command itself)."""
    if isinstance(exc, UNAVAILABLE):
        return True
    return isinstance(exc, ResponseError) and str(exc).startswith(_TRANSIENT_REPLIES)


def redact(url: str) -> str:
    """The URL with its password (in the user info or a ``*password=`` query item) replaced by ``***``."""
    password = urlsplit(url).password
    if password:
        url = url.replace(f":{password}@", ":***@", 1)
    return _QUERY_PASSWORD.sub(r"\1***", url)


def describe(client: Redis) -> str:
    """A name for a client the caller built (its host and port, or socket path)."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}"
    return f"redis://{kwargs.get('host', '?')}:{kwargs.get('port', '?')}/{kwargs.get('db', 0)}"


class guarded:  # noqa: N801 - used like a function: ``async with guarded(...)``
    """A deadline for one store call, and Redis's availability failures as ``StoreUnavailableError``."""

    __slots__ = ("_scope", "_timeout", "_where")

    def __init__(self, where: str, timeout: float | None) -> None:
        self._where = where
        self._timeout = timeout
        self._scope = asyncio.timeout(timeout)

    async def __aenter__(self) -> None:
        await self._scope.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._scope.__aexit__(exc_type, exc, tb)
        except TimeoutError as expired:
            raise StoreUnavailableError(
                f"Redis at {self._where} did not answer within {self._timeout:g} s"
            ) from expired
        if unavailable(exc):
            raise StoreUnavailableError(f"Redis at {self._where} is unavailable: {exc}") from exc


def default_retry() -> Retry:
    """A few quick retries: enough to replace stale connections after a restart, short enough to fail fast."""
    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.2), retries=3)


def connect(url: str, *, max_connections: int, options: dict[str, Any]) -> tuple[Redis, list[Redis]]:
    """A client for ``url``: ``redis://``, ``rediss://``, ``unix://`` or a Sentinel URL.

    A Sentinel URL lists the sentinels and names the master service:
    ``redis+sentinel://[:password@]host1:26379,host2:26379/service_name[/db]``
    (``rediss+sentinel`` for TLS to the master). Connections then follow the master across
    failovers.

    Returns:
        The client, and the clients of the sentinels (closed with it).
    """
    options = {"retry": default_retry(), "socket_timeout": None, "socket_connect_timeout": 5.0, **options}
    scheme = urlsplit(url).scheme
    if scheme in SENTINEL_SCHEMES:
        return _sentinel_master(url, scheme, max_connections=max_connections, options=options)
    return redis.asyncio.from_url(url, max_connections=max_connections, **options), []


def _sentinel_master(
    url: str, scheme: str, *, max_connections: int, options: dict[str, Any]
) -> tuple[Redis, list[Redis]]:
    parts = urlsplit(url)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = userinfo.partition(":")
    sentinels: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        host, sep, port = item.rpartition(":")
        sentinels.append((host if sep else item, int(port) if sep else 26379))
    path = [segment for segment in parts.path.split("/") if segment]
    if not path:
        raise ValueError(f"A Sentinel URL names the master service: {redact(url)}")
    service, db = unquote(path[0]), int(path[1]) if len(path) > 1 else 0
    query = dict(item.partition("=")[::2] for item in parts.query.split("&") if item)
    sentinel_password = unquote(query.get("sentinel_password", "")) or None
    auth = {"username": unquote(username) or None, "password": unquote(password) or None}
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        sentinels,
        sentinel_kwargs={"password": sentinel_password} if sentinel_password else {},
        ssl=scheme == "rediss+sentinel",
        db=db,
        **{key: value for key, value in auth.items() if value},
        **options,
    )
    master = sentinel.master_for(service, max_connections=max_connections)
    return master, list(sentinel.sentinels)
