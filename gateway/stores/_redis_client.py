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
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MasterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import (
    ConnectionError as RedisConnectionError,
)
from redis.exceptions import (
    TimeoutError as RedisTimeoutError,
)

from .._errors import StoreUnavailableError

__all__ = [
    "CLUSTER_SCHEMES",
    "SENTINEL_SCHEMES",
    "UNAVAILABLE",
    "AnyRedis",
    "connect",
    "connection_kwargs",
    "describe",
    "guarded",
    "is_cluster",
    "node_client",
    "ready_cluster",
    "redact",
    "unavailable",
]

AnyRedis = Redis | RedisCluster
"""A client the stores, the media backend and the render cache accept: one server or a Cluster."""

_QUERY_PASSWORD = re.compile(r"(?i)([?&][^=&#]*password=)[^&#]*")

SENTINEL_SCHEMES = ("redis+sentinel", "rediss+sentinel")
"""URL schemes that name a Sentinel-monitored master instead of a server."""

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
"""URL schemes that name some nodes of a Redis Cluster (the client discovers the others)."""

UNAVAILABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError,  # also BusyLoadingError, MaxConnectionsError, MasterNotFoundError
    RedisTimeoutError,
    ReadOnlyError,  # a write reached a replica during a failover
    ClusterDownError,  # also MasterDownError
    TryAgainError,  # a multi-key command met a slot being migrated
    AskError,  # also MovedError: redirections left over once the batcher's resends are spent
    SlotNotCoveredError,  # no node serves the slot (a master died without a replica)
    RedisClusterException,  # e.g. no startup node of a Cluster answers
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


def is_cluster(client: object) -> bool:
    """Whether ``client`` is a Redis Cluster client."""
    return isinstance(client, RedisCluster)


def connection_kwargs(client: AnyRedis) -> dict[str, Any]:
    """The options the client's connections are made with (a Cluster's: those of its nodes)."""
    if isinstance(client, RedisCluster):
        return dict(client.get_connection_kwargs())
    return dict(client.connection_pool.connection_kwargs)


def describe(client: AnyRedis) -> str:
    """A name for a client the caller built (its host and port, or socket path; a Cluster's startup nodes)."""
    if isinstance(client, RedisCluster):
        nodes = client.nodes_manager.startup_nodes.values()
        return "redis+cluster://" + ",".join(sorted(node.name for node in nodes))
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
        if isinstance(exc, AskError):  # also MovedError
            raise StoreUnavailableError(
                f"Redis at {self._where} is unavailable: slot {exc.slot_id} is served by {exc.host}:{exc.port}"
                " (a Redis Cluster: connect with a redis+cluster:// URL)"
            ) from exc
        if unavailable(exc):
            raise StoreUnavailableError(f"Redis at {self._where} is unavailable: {exc}") from exc


def default_retry() -> Retry:
    """A few quick retries: enough to replace stale connections after a restart, short enough to fail fast."""
    return Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.2), retries=3)


def connect(url: str, *, max_connections: int, options: dict[str, Any]) -> tuple[AnyRedis, list[Redis]]:
    """A client for ``url``: ``redis://``, ``rediss://``, ``unix://``, a Sentinel or a Cluster URL.

    A Sentinel URL lists the sentinels and names the master service:
    ``redis+sentinel://[:password@]host1:26379,host2:26379/service_name[/db]``
    (``rediss+sentinel`` for TLS to the master). Connections then follow the master across
    failovers.

    A Cluster URL lists some of its nodes: ``redis+cluster://[user:password@]host1:6379,host2:6379``
    (``rediss+cluster`` for TLS); the client reads the slot map from the first that answers
    and finds the others there. A Cluster has no databases: a path is refused.

    Returns:
        The client, and the clients of the sentinels (closed with it).
    """
    options = {"retry": default_retry(), "socket_timeout": None, "socket_connect_timeout": 5.0, **options}
    scheme = urlsplit(url).scheme
    if scheme in SENTINEL_SCHEMES:
        return _sentinel_master(url, scheme, max_connections=max_connections, options=options)
    if scheme in CLUSTER_SCHEMES:
        return _cluster(url, scheme, max_connections=max_connections, options=options), []
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


def _hosts(hostlist: str, default_port: int) -> list[tuple[str, int]]:
    """``host:port,host:port`` (IPv6 in brackets) as pairs."""
    hosts: list[tuple[str, int]] = []
    for item in hostlist.split(","):
        host, sep, port = item.rpartition(":")
        if sep and not host.endswith("]") and ":" in host:  # a bare IPv6 address without a port
            host, port, sep = item, "", ""
        host = host if sep else item
        hosts.append((host.strip("[]"), int(port) if sep and port else default_port))
    return hosts


def _cluster(url: str, scheme: str, *, max_connections: int, options: dict[str, Any]) -> RedisCluster:
    parts = urlsplit(url)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    if not hostlist:
        raise ValueError(f"A Cluster URL names at least one node: {redact(url)}")
    if parts.path.strip("/"):
        raise ValueError(f"A Redis Cluster has no databases: drop the path of {redact(url)}")
    username, _, password = userinfo.partition(":")
    auth = {"username": unquote(username) or None, "password": unquote(password) or None}
    options = dict(options)
    # The cluster client keeps its own retries (a slot map refresh between them); the batcher's
    # per-node connections get the plain client's (see ``node_client``).
    options.pop("retry", None)
    options.update({key: value for key, value in auth.items() if value})
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in _hosts(hostlist, 6379)],
        ssl=scheme == "rediss+cluster",
        max_connections=max_connections,
        require_full_coverage=False,
        **options,
    )


_NODE_OPTIONS = frozenset(
    {
        "username",
        "password",
        "credential_provider",
        "client_name",
        "encoding",
        "encoding_errors",
        "decode_responses",
        "socket_connect_timeout",
        "socket_keepalive",
        "socket_keepalive_options",
        "health_check_interval",
        "protocol",
    }
)
"""Options of the cluster's connections that a node's plain client takes over (and ``ssl_*``)."""


def node_client(cluster: RedisCluster, host: str, port: int, *, max_connections: int) -> Redis:
    """A plain client for one node of ``cluster``, with the options of the cluster's connections.

    The batcher and the pub/sub hub talk to each node through one of these (their own pool,
    the quick retries of ``default_retry``), while the cluster client keeps the slot map.
    """
    source = connection_kwargs(cluster)
    kwargs = {key: value for key, value in source.items() if key in _NODE_OPTIONS or key.startswith("ssl_")}
    kwargs = {key: value for key, value in kwargs.items() if value is not None or key == "protocol"}
    kwargs.pop("protocol", None)
    connection_class = source.get("connection_class")
    ssl = isinstance(connection_class, type) and issubclass(connection_class, SSLConnection)
    return Redis(
        host=host,
        port=port,
        max_connections=max_connections,
        ssl=ssl,
        retry=default_retry(),
        socket_timeout=None,
        **kwargs,
    )


async def ready_cluster(cluster: RedisCluster) -> None:
    """``cluster.initialize()``, that also works while the first master it lists is down.

    redis-py reads the slot map from any startup node that answers, then asks the first master
    of the map for its command table; a dead first master would make every call fail, even for
    the slots of live masters. Then another master is asked and made the client's default node.

    Raises:
        The first failure, when no master answers.
    """
    try:
        await cluster.initialize()
        return
    except UNAVAILABLE as failure:
        first: BaseException = failure
    await cluster.nodes_manager.initialize()
    for node in cluster.get_primaries():
        try:
            await cluster.commands_parser.initialize(node)
        except UNAVAILABLE:
            continue
        cluster.set_default_node(node)
        cluster._initialize = False  # what ``initialize`` sets once it succeeded
        return
    raise first
