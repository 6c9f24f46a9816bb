"""The shared stores the fault tests run on (Redis, PostgreSQL), and how each goes away and comes back.

A test process and the gateway processes it starts build the same store from three values
(``AGORA_TEST_STORE``, ``AGORA_TEST_STORE_URL``, ``AGORA_TEST_PREFIX``: the kind, where, and the
test's own key prefix or schema), so a child sees what the parent sees.

An outage of Redis stops a private ``redis-server`` (the shared one is never stopped); an
outage of PostgreSQL cuts the network between the gateway and the machine's server through a
loopback proxy (``_pg_proxy.PgProxy``: every connection reset, new ones refused), because the
shared server is never stopped either and a private cluster per test costs an ``initdb``. Both
come back on the same port with the same data. An outage of a Redis Cluster (``redis-cluster``)
stops every node of a private 3-master cluster (``_cluster.ClusterServers``) or one of them
(``stop_node``/``kill_node``: the master of the test's threads); the nodes come back on their
ports with their data and their cluster configuration.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import redis.asyncio as redis

from gateway.stores import PostgresStore, RedisStore, Store

from ..conftest import drop_cluster_prefix, drop_prefix, drop_schema
from ._cluster import ClusterServers
from ._pg_proxy import PgProxy
from ._server import RedisServer

Kind = Literal["redis", "redis-cluster", "postgres"]


def schema_of(name: str) -> str:
    """A test's name as a PostgreSQL schema (lower case, ``_`` for ``-``)."""
    return name.lower().replace("-", "_")


def make_store(kind: str, url: str, name: str, *, timeout: float | None = None) -> Store:
    """The store of ``kind`` at ``url`` under ``name`` (a Redis key prefix, a PostgreSQL schema).

    ``timeout`` bounds each store call (both stores' own default when ``None``).
    """
    deadline = {} if timeout is None else {"timeout": timeout}
    if kind in {"redis", "redis-cluster"}:
        return RedisStore(url, prefix=name, **deadline)
    return PostgresStore(url, schema=schema_of(name), **deadline)


def store_from_env(*, timeout: float | None = None) -> Store:
    """The store a child process was told to use."""
    return make_store(
        os.environ["AGORA_TEST_STORE"],
        os.environ["AGORA_TEST_STORE_URL"],
        os.environ["AGORA_TEST_PREFIX"],
        timeout=timeout,
    )


def store_env(kind: str, url: str, name: str) -> dict[str, str]:
    """What ``store_from_env`` reads."""
    return {"AGORA_TEST_STORE": kind, "AGORA_TEST_STORE_URL": url, "AGORA_TEST_PREFIX": name}


async def drop_store(kind: str, url: str, name: str) -> None:
    """Remove what the test's store left: its keys, or its schema."""
    if kind == "redis":
        await drop_prefix(url, name)
    elif kind == "redis-cluster":
        await drop_cluster_prefix(await masters_of(url), name)
    else:
        await drop_schema(url, schema_of(name))


async def masters_of(url: str) -> list[int]:
    """The ports of the running masters among the nodes a ``redis+cluster://`` URL names."""
    masters = []
    for host in urlsplit(url).netloc.split(","):
        client = redis.Redis(port=int(host.rsplit(":", 1)[1]), socket_connect_timeout=0.5)
        try:
            role = await client.execute_command("ROLE")
        except redis.ConnectionError:
            continue
        finally:
            await client.aclose()
        if role[0] in {b"master", "master"}:
            masters.append(int(host.rsplit(":", 1)[1]))
    return masters


class Outage:
    """A shared store that the test can take away (``stop``, ``kill``) and bring back (``start``)."""

    def __init__(self, kind: Kind, directory: Path, dsn: str | None = None) -> None:
        self.kind = kind
        self.redis = RedisServer(directory) if kind == "redis" else None
        self.cluster = ClusterServers(directory, masters=3) if kind == "redis-cluster" else None
        self.dsn = dsn
        self.proxy: PgProxy | None = None
        if kind == "postgres":
            assert dsn is not None
            self.proxy = PgProxy(dsn)

    @property
    def url(self) -> str:
        """Where the gateway connects: the private Redis, or the proxy in front of PostgreSQL (once started)."""
        if self.redis is not None:
            return self.redis.url
        if self.cluster is not None:
            return self.cluster.url
        assert self.proxy is not None and self.proxy.port, "start() first: the proxy's port is chosen then"
        return self.proxy.dsn

    async def start(self) -> None:
        """Up (again), on the same port, with the same data."""
        if self.redis is not None:
            await self.redis.start()
        elif self.cluster is not None:
            if not self.cluster.initial_masters:
                await self.cluster.start()
                return
            for node in self.cluster.nodes:
                if node.process is None:
                    await node.start()
            await self.cluster.wait_ok()
        else:
            assert self.proxy is not None
            await self.proxy.up()

    async def stop(self) -> None:
        """Gone, cleanly: Redis stops on SIGTERM (its AOF complete); PostgreSQL's network is cut."""
        if self.redis is not None:
            assert self.redis.process is not None
            self.redis.process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(self.redis.process.wait, 10)
            self.redis.process = None
        elif self.cluster is not None:
            for node in self.cluster.nodes:
                await self.stop_node(node.port)
        else:
            assert self.proxy is not None
            await self.proxy.down()

    async def stop_node(self, port: int) -> None:
        """One node of the cluster gone, cleanly (SIGTERM: its AOF complete)."""
        assert self.cluster is not None
        node = self.cluster.node(port)
        if node.process is not None:
            node.process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(node.process.wait, 10)
            node.process = None

    def kill_node(self, port: int) -> None:
        """One node of the cluster gone at once (SIGKILL; its AOF has every write, appendfsync always)."""
        assert self.cluster is not None
        self.cluster.kill(port)

    async def kill(self) -> None:
        """Gone at once: Redis SIGKILLed (the AOF has every write, appendfsync always); PostgreSQL's network cut."""
        if self.redis is not None:
            self.redis.kill()
        elif self.cluster is not None:
            self.cluster.stop()
        else:
            assert self.proxy is not None
            await self.proxy.down()

    async def aclose(self) -> None:
        if self.redis is not None:
            self.redis.kill()
        if self.cluster is not None:
            self.cluster.stop()
        if self.proxy is not None:
            await self.proxy.down()
