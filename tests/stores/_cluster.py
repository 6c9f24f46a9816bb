"""A private Redis Cluster for tests: masters (and replicas) on free ports, started and stopped by pid.

``ClusterServers(directory, masters=3, replicas=0)`` starts ``redis-server --cluster-enabled yes``
processes (append-only files with ``appendfsync always``, so a node SIGKILLed and started again
keeps what it acknowledged), joins them with ``redis-cli --cluster create ... --cluster-yes`` and
waits until every node sees the cluster ``ok``. ``cluster-require-full-coverage no``: a master
that dies without a replica takes only its own slots away, the other nodes keep serving.
The shared server on 6379 is never touched.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import redis.asyncio as redis
from redis.crc import key_slot

from ._server import RedisServer

__all__ = ["ClusterServers", "node_of_slot"]

NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout``: how long a silent master takes to be failed over (a replica's promotion)."""


def _args(directory: Path) -> list[str]:
    return [
        "--cluster-enabled", "yes",
        "--cluster-config-file", str(directory / "nodes.conf"),
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        "--cluster-require-full-coverage", "no",
        "--cluster-replica-validity-factor", "0",  # a replica may be promoted however long the master was away
    ]  # fmt: skip


def node_of_slot(slots: list[list[object]], slot: int) -> int:
    """The port of the master serving ``slot`` in a ``CLUSTER SLOTS`` reply."""
    for start, end, master, *_ in slots:
        if int(start) <= slot <= int(end):  # type: ignore[call-overload]
            return int(master[1])  # type: ignore[index]
    raise LookupError(f"no node serves slot {slot}")


class ClusterServers:
    """A Redis Cluster of ``masters`` masters with ``replicas`` replicas each, in ``directory``."""

    def __init__(self, directory: Path, *, masters: int = 3, replicas: int = 0) -> None:
        self.directory = directory
        self.nodes: list[RedisServer] = []
        for index in range(masters * (1 + replicas)):
            node_dir = directory / f"node{index}"
            node_dir.mkdir(parents=True, exist_ok=True)
            self.nodes.append(RedisServer(node_dir, extra=_args(node_dir)))
        self.masters = masters
        self.replicas = replicas
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed")
        self.cli = cli
        self.initial_masters: list[int] = []

    @property
    def url(self) -> str:
        """The ``redis+cluster://`` URL naming every node."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def node(self, port: int) -> RedisServer:
        return next(node for node in self.nodes if node.port == port)

    async def start(self) -> None:
        """Start every node, create the cluster, and wait until every node says ``cluster_state:ok``."""
        for node in self.nodes:
            await node.start()
        hosts = [f"127.0.0.1:{node.port}" for node in self.nodes]
        process = await asyncio.create_subprocess_exec(
            self.cli, "--cluster", "create", *hosts, "--cluster-replicas", str(self.replicas), "--cluster-yes",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(process.communicate(), 60)
        if process.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {output.decode(errors='replace')}")
        await self.wait_ok()
        self.initial_masters = await self.master_ports()

    async def wait_ok(self, timeout: float = 30) -> None:
        """Wait until every running node says ``cluster_state:ok`` and agrees on the slot map."""
        async with asyncio.timeout(timeout):
            while True:
                maps = []
                for node in self.nodes:
                    if node.process is None:
                        continue
                    client = redis.Redis(port=node.port, socket_connect_timeout=0.5)
                    try:
                        info = await client.execute_command("CLUSTER INFO")
                        if info.get("cluster_state") != "ok":
                            break
                        ranges = await client.execute_command("CLUSTER SLOTS")
                        maps.append(sorted((int(s), int(e), int(m[1]), len(r)) for s, e, m, *r in ranges))
                    except (redis.ConnectionError, redis.ResponseError):
                        break
                    finally:
                        await client.aclose()
                else:
                    agreed = maps and all(m == maps[0] for m in maps)
                    if agreed and sum(e - s + 1 for s, e, _, _ in maps[0]) == 16384:
                        # Each master has its replicas (while they all run), and none is a dead node.
                        running = {node.port for node in self.nodes if node.process is not None}
                        masters = {port for _, _, port, _ in maps[0]}
                        wanted = self.replicas if len(running) == len(self.nodes) else 0
                        if masters <= running and all(count >= wanted for _, _, _, count in maps[0]):
                            return
                await asyncio.sleep(0.05)

    async def slots(self) -> list[list[object]]:
        """``CLUSTER SLOTS`` as a running node sees it."""
        for node in self.nodes:
            if node.process is None:
                continue
            client = redis.Redis(port=node.port, socket_connect_timeout=0.5)
            try:
                return list(await client.execute_command("CLUSTER SLOTS"))
            except redis.ConnectionError:
                continue
            finally:
                await client.aclose()
        raise RuntimeError("no node of the cluster answers")

    async def master_ports(self) -> list[int]:
        """The ports of the masters that serve slots now."""
        return sorted({int(master[1]) for _, _, master, *_ in await self.slots()})  # type: ignore[index]

    async def port_of(self, key: str) -> int:
        """The port of the master that serves ``key``'s slot now."""
        return node_of_slot(await self.slots(), key_slot(key.encode()))

    async def thread_on(self, port: int, prefix: str = "agora", stem: str = "t") -> str:
        """A new thread id whose keys (``prefix:{id}:...``) live on the master at ``port``."""
        slots = await self.slots()
        for index in range(100_000):
            thread_id = f"{stem}-{index}-{port}"
            if node_of_slot(slots, key_slot(thread_id.encode())) == port:
                return thread_id
        raise LookupError(f"no thread id found for node {port}")

    async def threads_on_every_node(self, stem: str = "t") -> dict[int, str]:
        """One thread id per master, by the master's port."""
        return {port: await self.thread_on(port, stem=stem) for port in await self.master_ports()}

    async def failed_over(self, port: int, timeout: float = 30) -> int:
        """Wait until the master at ``port`` (killed) serves no slot: its replica took over; answer its port."""
        async with asyncio.timeout(timeout):
            while True:
                try:
                    masters = await self.master_ports()
                except RuntimeError:
                    masters = [port]
                if port not in masters:
                    await self.wait_ok(timeout)
                    return next(p for p in masters if p not in self.initial_masters)
                await asyncio.sleep(0.05)

    def kill(self, port: int) -> None:
        """SIGKILL one node, as a crash would."""
        self.node(port).kill()

    async def restart(self, port: int) -> None:
        """Start a killed node again on its port, with its data and its cluster configuration."""
        await self.node(port).start()

    async def replica_of(self, port: int) -> int | None:
        """The port of a replica of the master at ``port``, if it has one."""
        for _, _, master, *replicas in await self.slots():
            if int(master[1]) == port and replicas:  # type: ignore[index]
                return int(replicas[0][1])  # type: ignore[index]
        return None

    async def keys_per_node(self, pattern: str) -> dict[int, int]:
        """Keys matching ``pattern`` on each running master."""
        counts: dict[int, int] = {}
        for port in await self.master_ports():
            client = redis.Redis(port=port)
            try:
                counts[port] = len([key async for key in client.scan_iter(match=pattern, count=1000)])
            finally:
                await client.aclose()
        return counts

    def stop(self) -> None:
        """Kill every node by its pid."""
        for node in self.nodes:
            node.kill()
