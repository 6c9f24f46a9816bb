"""Private redis-servers and sentinels for tests that stop and start Redis (never the shared one)."""

from __future__ import annotations

import asyncio
import random
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

import redis.asyncio as redis


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_cluster_port() -> int:
    """A free port ``p`` below 55536 whose cluster bus port ``p + 10000`` is free too."""
    for _ in range(1000):
        port = random.randrange(20000, 30000)
        try:
            for candidate in (port, port + 10000):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


class RedisServer:
    """``redis-server`` on a free port in a temp dir, with an append-only file so data survives a restart.

    With ``replica_of`` it replicates that server, and ``start`` waits until the replica is in sync.
    """

    def __init__(
        self, directory: Path, *, replica_of: RedisServer | None = None, extra: Sequence[str] = ()
    ) -> None:
        self.port = free_cluster_port() if "--cluster-enabled" in extra else free_port()
        self.directory = directory
        self.replica_of = replica_of
        self.extra = list(extra)
        """More ``redis-server`` arguments (a Cluster node's)."""
        self.process: subprocess.Popen[bytes] | None = None
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError("redis-server is not installed")
        self.executable = executable

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        """Start the server and wait (with a watchdog) until it answers (and, a replica, is in sync)."""
        replication = ["--replicaof", "127.0.0.1", str(self.replica_of.port)] if self.replica_of else []
        self.process = subprocess.Popen(
            [
                self.executable,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "yes",
                "--appendfsync", "always",
                "--dir", str(self.directory),
                "--repl-diskless-sync-delay", "0",  # a replica syncs at once, not after 5 s
                *replication,
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        info = await client.info("replication")
                        if not replication or info.get("master_link_status") == "up":
                            return
                    except (redis.ConnectionError, redis.BusyLoadingError):
                        pass
                    await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    def kill(self) -> None:
        """Stop the server at once (SIGKILL), as a crash would."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class SentinelServer:
    """``redis-server --sentinel`` watching one master, on a free port in a temp dir.

    ``quorum`` sentinels must agree the master is down, after ``down_after`` ms of silence, for a
    failover to start; ``failover_timeout`` (ms) bounds one and spaces two attempts.
    """

    def __init__(
        self,
        directory: Path,
        master: RedisServer,
        service: str = "mymaster",
        *,
        quorum: int = 1,
        down_after: int = 5000,
        failover_timeout: int = 180_000,
    ) -> None:
        self.port = free_port()
        self.service = service
        self.config = directory / "sentinel.conf"
        self.config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {service} 127.0.0.1 {master.port} {quorum}\n"
            f"sentinel down-after-milliseconds {service} {down_after}\n"
            f"sentinel failover-timeout {service} {failover_timeout}\n"
        )
        self.executable = master.executable
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.service}"

    async def start(self) -> None:
        """Start the sentinel and wait (with a watchdog) until it knows the master."""
        self.process = subprocess.Popen(
            [self.executable, str(self.config), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        if await client.execute_command("SENTINEL", "get-master-addr-by-name", self.service):
                            return
                    except redis.ConnectionError:
                        pass
                    await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    def kill(self) -> None:
        """Stop the sentinel."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


class SentinelCluster:
    """A master, one replica and three sentinels (quorum 2), each on a free port in its own temp dir.

    The sentinels declare the master down after ``down_after`` ms, so a failover takes seconds.
    ``stop`` kills every process the cluster started, by its pid.
    """

    def __init__(self, directory: Path, service: str = "mymaster", *, down_after: int = 1000) -> None:
        for name in ("master", "replica", "s1", "s2", "s3"):
            (directory / name).mkdir()
        self.service = service
        self.master = RedisServer(directory / "master")
        self.replica = RedisServer(directory / "replica", replica_of=self.master)
        self.sentinels = [
            SentinelServer(
                directory / name, self.master, service, quorum=2, down_after=down_after, failover_timeout=2000
            )
            for name in ("s1", "s2", "s3")
        ]

    @property
    def url(self) -> str:
        """The Sentinel URL a ``RedisStore`` is built from: every sentinel and the service."""
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    async def start(self) -> None:
        """Start everything, and wait (with a watchdog) until each sentinel knows the replica and the others."""
        await self.master.start()
        await self.replica.start()
        for sentinel in self.sentinels:
            await sentinel.start()
        clients = [redis.Redis(port=sentinel.port, decode_responses=True) for sentinel in self.sentinels]
        try:
            async with asyncio.timeout(20):
                for client in clients:
                    while True:
                        replicas = await client.execute_command("SENTINEL", "replicas", self.service)
                        peers = await client.execute_command("SENTINEL", "sentinels", self.service)
                        if len(peers) == 2 and [_flags(replica) for replica in replicas] == ["slave"]:
                            break
                        await asyncio.sleep(0.05)
        finally:
            for client in clients:
                await client.aclose()

    async def kill_master(self) -> None:
        """SIGKILL the master once the replica has every write it acknowledged (WAIT), as a crash would."""
        client = redis.Redis(port=self.master.port)
        try:
            assert await client.execute_command("WAIT", 1, 5000) == 1, "the replica is in sync"
        finally:
            await client.aclose()
        self.master.kill()

    async def promoted(self) -> None:
        """Wait (with a watchdog) until a sentinel names the replica as the master."""
        clients = [redis.Redis(port=sentinel.port, decode_responses=True) for sentinel in self.sentinels]
        try:
            async with asyncio.timeout(30):
                while True:
                    for client in clients:
                        address = await client.execute_command("SENTINEL", "get-master-addr-by-name", self.service)
                        if address and int(address[1]) == self.replica.port:
                            return
                    await asyncio.sleep(0.02)
        finally:
            for client in clients:
                await client.aclose()

    def stop(self) -> None:
        """Kill the sentinels and the servers."""
        for sentinel in self.sentinels:
            sentinel.kill()
        self.replica.kill()
        self.master.kill()


def _flags(replica: object) -> str:
    """The ``flags`` of one ``SENTINEL replicas`` entry (a flat list, or a dict in redis-py's parsing)."""
    if isinstance(replica, dict):
        return str(replica["flags"])
    fields = list(replica)  # type: ignore[call-overload]
    return str(dict(zip(fields[::2], fields[1::2], strict=True))["flags"])
