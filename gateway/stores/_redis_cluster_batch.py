"""``ClusterBatcher``: the command batcher of a ``RedisStore`` on a Redis Cluster.

Each command goes to the master that serves its key's slot (for ``EVALSHA``, its first key):
the batcher keeps one ``CommandBatcher`` per master, on a plain client of that node
(``_redis_client.node_client``), so commands that pile up for a node still leave as one
pipeline packed by hiredis, and the commands of one ``send`` that belong to different nodes go
out at the same time. The cluster client itself only keeps the slot map.

Redirections are followed here, per command: ``MOVED`` updates the slot map (the cluster
client's ``move_slot``) and sends the command again to the node it names; ``ASK`` sends it
there once, after ``ASKING`` on the same connection; ``TRYAGAIN`` (a slot half migrated) waits
a moment and sends again. After ``MAX_REDIRECTS`` the last error stays the command's answer,
and the store's guard turns it into ``StoreUnavailableError``. A node that cannot be reached
makes the batcher read the slot map again (at most every ``REFRESH_INTERVAL`` seconds), so
once a replica is promoted the next call finds it. ``NOSCRIPT`` is handled by each node's
batcher: the script is loaded on the node that answered it.

Why a batcher per node rather than the cluster client's pipeline: the cluster pipeline packs
and routes every command in Python and takes a connection per node per pipeline; the per-node
batchers keep what a single server gets (see ``bench/cluster.py`` for the figures).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError, TryAgainError

from ._redis_batch import Command, CommandBatcher, Round, Sender
from ._redis_client import UNAVAILABLE, ready_cluster

__all__ = ["MAX_REDIRECTS", "ClusterBatcher", "command_slot"]

logger = logging.getLogger("gateway.stores.redis")

MAX_REDIRECTS = 5
"""Times one command follows MOVED / ASK / TRYAGAIN before its error stands."""

REFRESH_INTERVAL = 0.25
"""Seconds between two readings of the slot map that a failure asks for."""

_TRYAGAIN_PAUSE = 0.02

_KEYLESS = frozenset({"PING", "SCRIPT", "SCRIPT LOAD", "ASKING"})


@functools.lru_cache(maxsize=16384)
def _slot_of(key: str | bytes) -> int:
    """A key's slot (cached: a thread's dozen keys come back with every write)."""
    return key_slot(key if isinstance(key, bytes) else key.encode("utf-8", "surrogatepass"))


def command_slot(command: Command) -> int | None:
    """The slot a command is routed by: its first key (``EVALSHA``: the first of its keys), or ``None``."""
    name = command[0]
    if name == "EVALSHA" or name == "EVAL":
        return _slot_of(command[3]) if int(command[2]) > 0 else None
    if isinstance(name, bytes):
        name = name.decode()
    upper = name.upper()
    if upper in ("EVALSHA", "EVAL"):
        return _slot_of(command[3]) if int(command[2]) > 0 else None
    if upper in _KEYLESS or len(command) < 2:
        return None
    key = command[1]
    return _slot_of(key if isinstance(key, (str, bytes)) else str(key))


class ClusterBatcher(Sender):
    """Routes commands to per-node batchers by slot and follows the cluster's redirections."""

    def __init__(
        self,
        cluster: RedisCluster,
        *,
        node_client: Callable[[str, int], Redis],
        max_in_flight: int = 48,
        max_batch: int = 512,
    ) -> None:
        """Batch commands for the masters of ``cluster``.

        Args:
            cluster: The cluster client (its slot map is the batcher's).
            node_client: Makes a plain client for a node's host and port (closed by ``aclose``).
            max_in_flight: Sends in flight at most per node.
            max_batch: Commands per pipeline at most.
        """
        self._cluster = cluster
        self._node_client = node_client
        self._max_in_flight = max_in_flight
        self._max_batch = max_batch
        self._nodes: dict[str, CommandBatcher] = {}
        self._clients: dict[str, Redis] = {}
        self._ready = False
        self._init_lock = asyncio.Lock()
        self._refreshing: asyncio.Task[None] | None = None
        self._refreshed_at = 0.0
        self._closed = False
        self.redirects = 0
        """Commands sent again after MOVED, ASK or TRYAGAIN (for tests and metrics)."""

    @property
    def pipelines(self) -> int:
        """Pipelines sent, over every node."""
        return sum(batcher.pipelines for batcher in self._nodes.values())

    def node_batchers(self) -> dict[str, CommandBatcher]:
        """The per-node batchers made so far, by node name (``host:port``)."""
        return dict(self._nodes)

    # -- routing -------------------------------------------------------------------------------------

    async def _initialize(self) -> None:
        if self._ready:
            return
        async with self._init_lock:
            if not self._ready:
                await ready_cluster(self._cluster)
                self._ready = True

    def _node(self, host: str, port: int) -> CommandBatcher:
        name = f"{host}:{port}"
        batcher = self._nodes.get(name)
        if batcher is None:
            client = self._node_client(host, port)
            self._clients[name] = client
            batcher = CommandBatcher(client, max_in_flight=self._max_in_flight, max_batch=self._max_batch)
            self._nodes[name] = batcher
        return batcher

    def _route(self, command: Command) -> CommandBatcher:
        slot = command_slot(command)
        node = (
            self._cluster.nodes_manager.get_node_from_slot(slot)
            if slot is not None
            else self._cluster.get_random_node()
        )
        batcher = self._nodes.get(node.name)
        return batcher if batcher is not None else self._node(node.host, int(node.port))

    def _refresh_soon(self) -> None:
        """Read the slot map again in the background (a node failed: a replica may have taken over)."""
        if self._closed or (self._refreshing is not None and not self._refreshing.done()):
            return
        if time.monotonic() - self._refreshed_at < REFRESH_INTERVAL:
            return
        self._refreshed_at = time.monotonic()
        self._refreshing = asyncio.get_running_loop().create_task(self._refresh(), name="agora-redis-slots")

    async def _refresh(self) -> None:
        try:
            await self._cluster.nodes_manager.initialize()
        except Exception as exc:  # the cluster is converging: the next failure asks again
            logger.warning("reading the Redis Cluster's slot map failed: %s", exc)

    # -- sending -------------------------------------------------------------------------------------

    async def send_ordered(self, first: Sequence[Command], then: Sequence[Command]) -> tuple[list[Any], list[Any]]:
        """Send ``first``; once every one of them succeeded, ``then`` (see ``CommandBatcher.send_ordered``).

        When a command of ``first`` failed, ``then`` is not sent: its commands answer that error.
        """
        if not self._ready:
            await self._initialize()
        # Commands of ``first`` on the node of ``then``'s first command go in its pipeline, ahead
        # of ``then`` (one connection runs them in order, as on one server); only the others
        # cost a round trip before.
        home = self._try_route(then[0]) if then else None
        local: list[int] = []
        remote: list[int] = []
        for index, command in enumerate(first):
            (local if home is not None and self._try_route(command) is home else remote).append(index)
        done: list[Any] = [None] * len(first)
        if remote:
            for index, result in zip(remote, await self.send([first[i] for i in remote]), strict=True):
                done[index] = result
            failed = next((result for result in done if isinstance(result, Exception)), None)
            if failed is not None:
                return done, [failed] * len(then)
        replies = await self.send([*(first[i] for i in local), *then])
        for index, result in zip(local, replies, strict=False):
            done[index] = result
        return done, replies[len(local) :]

    def _try_route(self, command: Command) -> CommandBatcher | None:
        try:
            return self._route(command)
        except Exception:
            return None

    async def send(self, commands: Sequence[Command]) -> list[Any]:
        """Send commands, each to its slot's node (nodes in parallel); each reply or error, in order."""
        if self._closed:
            raise RuntimeError("Cannot use a closed RedisStore")
        if not commands:
            return []
        if not self._ready:
            await self._initialize()
        results: list[Any] = [None] * len(commands)
        todo = list(range(len(commands)))
        asking: dict[int, tuple[str, int]] = {}
        for attempt in range(MAX_REDIRECTS + 1):
            await self._send_round(commands, todo, asking, results)
            again: list[int] = []
            asking = {}
            pause = False
            for index in todo:
                result = results[index]
                if attempt < MAX_REDIRECTS and isinstance(result, (AskError, TryAgainError)):  # MOVED is an ASK
                    if isinstance(result, MovedError):
                        await self._cluster.nodes_manager.move_slot(result)
                    elif isinstance(result, AskError):
                        asking[index] = (result.host, int(result.port))
                    else:
                        pause = True
                    again.append(index)
                elif isinstance(result, UNAVAILABLE) and not isinstance(result, (AskError, TryAgainError)):
                    self._refresh_soon()  # a node down or the cluster down: a replica may take over
            if not again:
                break
            self.redirects += len(again)
            if pause:
                await asyncio.sleep(_TRYAGAIN_PAUSE)
            todo = again
        return results

    async def _send_round(
        self, commands: Sequence[Command], todo: list[int], asking: dict[int, tuple[str, int]], results: list[Any]
    ) -> None:
        """Send the commands ``todo`` (indexes), grouped by node, and put each answer in ``results``."""
        groups: dict[CommandBatcher, list[int]] = {}
        asks: list[tuple[CommandBatcher, int]] = []
        for index in todo:
            try:
                if index in asking:
                    asks.append((self._node(*asking[index]), index))
                    continue
                batcher = self._route(commands[index])
            except Exception as exc:  # no node serves the slot (SlotNotCoveredError)
                results[index] = exc
                self._refresh_soon()
                continue
            group = groups.get(batcher)
            if group is None:
                groups[batcher] = [index]
            else:
                group.append(index)
        if len(groups) == 1 and not asks:
            ((batcher, indexes),) = groups.items()
            replies = await batcher.send([commands[i] for i in indexes])
            for index, result in zip(indexes, replies, strict=True):
                results[index] = result
            return
        if not asks and all(batcher.idle for batcher in groups):
            await self._scatter(commands, groups, results)
            return
        # Several nodes at once, without a task each: every node's batcher queues its commands
        # for its next flush, and this call waits on all their replies together.
        queued = [
            (batcher, indexes, batcher.submit([commands[i] for i in indexes])) for batcher, indexes in groups.items()
        ]
        asked = [
            (index, asyncio.ensure_future(batcher.send_together([("ASKING",), commands[index]])))
            for batcher, index in asks
        ]
        waiting = [future for _, _, futures in queued for future in futures]
        waiting.extend(future for _, future in asked)
        await asyncio.gather(*waiting, return_exceptions=True)
        for batcher, indexes, futures in queued:
            sent = [commands[i] for i in indexes]
            replies = [future.exception() or future.result() for future in futures]
            replies = await batcher.recover_scripts(sent, replies)  # NOSCRIPT: loaded on that node
            for index, result in zip(indexes, replies, strict=True):
                results[index] = result
        for index, future in asked:
            failure = future.exception()
            results[index] = failure if failure is not None else future.result()[1]

    async def _scatter(
        self, commands: Sequence[Command], groups: dict[CommandBatcher, list[int]], results: list[Any]
    ) -> None:
        """Write each node's commands, then read each node's replies: the nodes work at once, in this task."""
        rounds: list[tuple[CommandBatcher, list[int], Round]] = []
        try:
            for batcher, indexes in groups.items():
                rounds.append((batcher, indexes, await batcher.start_round([commands[i] for i in indexes])))
            for position, (batcher, indexes, round_) in enumerate(rounds):
                replies = await batcher.finish_round(round_)
                for index, result in zip(indexes, replies, strict=True):
                    results[index] = result
                rounds[position] = (batcher, [], round_)
        finally:
            for batcher, _, round_ in rounds:
                if not round_.done:
                    await batcher.abandon_round(round_)

    async def ping(self) -> None:
        """Ping every master (raises the first failure)."""
        await self._initialize()
        for node in self._cluster.get_primaries():
            await self._node(node.host, int(node.port)).call("PING")

    async def aclose(self) -> None:
        """Close every node's batcher and client; refuse new commands."""
        self._closed = True
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.gather(self._refreshing, return_exceptions=True)
        for batcher in self._nodes.values():
            await batcher.aclose()
        for client in self._clients.values():
            await client.aclose()
        self._nodes.clear()
        self._clients.clear()
