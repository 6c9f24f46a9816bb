"""``ClusterHub``: live tails on a Redis Cluster, through one sharded ``PubSubHub`` per node.

A thread's events are published with SPUBLISH to ``<prefix>:{thread_id}:live``, which only the
master serving the channel's slot delivers. The hub routes each channel to that master (the
cluster client's slot map) and keeps one sharded ``PubSubHub`` per node, created with the first
channel of the node, over a plain client of that node (``node_client``).

Slots move: a master fails over to its replica, or a slot is migrated. The hub learns it three
ways: a node's hub reports MOVED or an unsolicited ``sunsubscribe`` (``on_moved``), or a node's
connection could not be re-established twice in a row (``on_lost``). Its supervisor task then
refreshes the slot map (retrying with backoff while the cluster converges) and re-homes every
channel whose slot now lives elsewhere: the subscribers leave the old node's hub, subscribe on
the new node's, and are marked overflowed, so each re-reads the log after the last event it saw;
nothing written meanwhile is lost. A node restarted with its slots is left to its own hub, which
reconnects and resubscribes. A node's hub with no channel left that serves no slot is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from .._errors import StoreUnavailableError
from ..events import RunEvent
from ._redis_client import UNAVAILABLE, ready_cluster
from ._redis_hub import PubSubHub, _SlotMovedError
from ._tail import Subscriber

__all__ = ["ClusterHub"]

logger = logging.getLogger("gateway.stores.redis")

_MAX_REFRESH_DELAY = 1.0


class _State(enum.Enum):
    IDLE = "idle"
    UP = "up"
    CLOSED = "closed"


class ClusterHub:
    """Routes each live channel to the Cluster node serving its slot, and follows it when it moves."""

    def __init__(
        self,
        cluster: RedisCluster,
        *,
        node_client: Callable[[str, int], Redis],
        where: str,
        parse: Callable[[bytes | str], list[RunEvent]],
        heartbeat: float = 15.0,
        subscribe_timeout: float = 5.0,
    ) -> None:
        """Prepare a hub; it reads the slot map and connects with its first subscriber.

        Args:
            cluster: The store's cluster client: its slot map says which node serves a channel.
            node_client: Makes a plain client for the node at ``(host, port)``; the hub closes it.
            where: The redacted URL, for errors and logs.
            parse: Turns a published payload into events.
            heartbeat: As for ``PubSubHub``, per node.
            subscribe_timeout: Seconds a new subscription waits for its node.
        """
        self._cluster = cluster
        self._node_client = node_client
        self._where = where
        self._parse = parse
        self._heartbeat = heartbeat
        self._subscribe_timeout = subscribe_timeout
        self._state = _State.IDLE
        self._hubs: dict[str, PubSubHub] = {}
        """A sharded hub per node, by node name (``host:port``)."""
        self._clients: dict[str, Redis] = {}
        self._home: dict[bytes, str] = {}
        """The node whose hub holds each channel."""
        self._moved: set[bytes] = set()
        """Channels reported out of place, for the supervisor to re-home."""
        self._stale = asyncio.Event()
        """Set when the slot map should be refreshed."""
        self._refreshed = asyncio.Event()
        self._ready_lock = asyncio.Lock()
        self._initialized = False
        self._supervisor: asyncio.Task[None] | None = None
        self._rehoming: set[asyncio.Task[None]] = set()
        self._transit: dict[bytes, set[Subscriber]] = {}
        """Subscribers on their way to a channel's new node (a detach meanwhile drops them here)."""
        self._retired = 0
        """Reconnections of node hubs closed since (so ``reconnections`` never goes down)."""
        self.rehomed = 0
        """How many channels were moved to another node (for tests and metrics)."""

    @property
    def connected(self) -> bool:
        """Whether every node hub with channels is connected."""
        hubs = [self._hubs[name] for name in set(self._home.values()) if name in self._hubs]
        return self._state is _State.UP and all(hub.connected for hub in hubs)

    @property
    def reconnections(self) -> int:
        """How many times a node's connection was re-established (for tests and metrics)."""
        return self._retired + sum(hub.reconnections for hub in self._hubs.values())

    def subscribers(self, channel: bytes) -> int:
        """How many local subscribers follow ``channel``."""
        name = self._home.get(channel)
        hub = self._hubs.get(name) if name is not None else None
        return hub.subscribers(channel) if hub is not None else 0

    def node_of(self, channel: bytes) -> str | None:
        """The node (``host:port``) whose connection carries ``channel`` now, if followed."""
        return self._home.get(channel)

    # -- subscribers --------------------------------------------------------------------------------

    async def attach(self, channel: bytes, subscriber: Subscriber) -> None:
        """Register ``subscriber``; returns once the channel's node delivers its messages to us.

        Raises:
            StoreUnavailableError: The channel's node could not be reached within ``subscribe_timeout``.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot subscribe on a closed RedisStore")
        try:
            async with asyncio.timeout(self._subscribe_timeout):
                await self._ready()
                while True:
                    hub = self._hub_for(channel)
                    try:
                        await hub.attach(channel, subscriber)
                        return
                    except BaseException as exc:
                        if not hub.subscribers(channel) and self._home.get(channel) in self._hubs:
                            if self._hubs[self._home[channel]] is hub:
                                del self._home[channel]
                        if not isinstance(exc, _SlotMovedError):
                            raise
                        # The map was stale: wait for the supervisor's refresh, then try the new node.
                        self._refreshed.clear()
                        self._stale.set()
                        await self._refreshed.wait()
        except TimeoutError:
            raise StoreUnavailableError(
                f"Redis at {self._where} is unavailable: cannot subscribe within {self._subscribe_timeout:g} s"
            ) from None

    def detach(self, channel: bytes, subscriber: Subscriber) -> None:
        """Unregister ``subscriber``; the last one of a channel unsubscribes it."""
        moving = self._transit.get(channel)
        if moving is not None:
            moving.discard(subscriber)
        name = self._home.get(channel)
        hub = self._hubs.get(name) if name is not None else None
        if hub is None:
            return
        hub.detach(channel, subscriber)
        if not hub.subscribers(channel) and self._home.get(channel) == name:
            del self._home[channel]

    # -- routing ------------------------------------------------------------------------------------

    async def _ready(self) -> None:
        if self._initialized:
            return
        async with self._ready_lock:
            await self._initialize()

    async def _initialize(self) -> None:
        if not self._initialized:
            try:
                await ready_cluster(self._cluster)
            except UNAVAILABLE as exc:
                raise StoreUnavailableError(f"Redis at {self._where} is unavailable: {exc}") from exc
            self._initialized = True
            if self._state is _State.IDLE:
                self._state = _State.UP
                self._supervisor = asyncio.create_task(self._supervise(), name="agora-redis-cluster-hub")

    def _node_name(self, channel: bytes) -> tuple[str, str, int]:
        node = self._cluster.nodes_manager.get_node_from_slot(key_slot(channel))
        return node.name, node.host, int(node.port)

    def _hub_for(self, channel: bytes) -> PubSubHub:
        name = self._home.get(channel)
        if name is None or name not in self._hubs:
            try:
                name, host, port = self._node_name(channel)
            except UNAVAILABLE as exc:  # SlotNotCoveredError: its master died without a replica
                raise StoreUnavailableError(f"Redis at {self._where} is unavailable: {exc}") from exc
            if name not in self._hubs:
                self._hubs[name] = self._new_hub(name, host, port)
            self._home[channel] = name
        return self._hubs[name]

    def _new_hub(self, name: str, host: str, port: int) -> PubSubHub:
        client = self._node_client(host, port)
        self._clients[name] = client
        return PubSubHub(
            client,
            where=f"{self._where} (node {name})",
            parse=self._parse,
            heartbeat=self._heartbeat,
            subscribe_timeout=self._subscribe_timeout,
            sharded=True,
            on_moved=self._slot_left,
            on_lost=self._stale.set,
        )

    def _slot_left(self, channels: list[bytes]) -> None:
        self._moved.update(channels)
        self._stale.set()

    # -- the supervisor -----------------------------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            await self._stale.wait()
            self._stale.clear()  # news arriving during the refresh asks for another one
            await self._refresh()
            self._refreshed.set()
            try:
                self._rehome()
                await self._retire_idle()
            except Exception:
                logger.exception("re-homing live tails on Redis at %s failed; retrying", self._where)
                self._stale.set()
                await asyncio.sleep(_MAX_REFRESH_DELAY)

    async def _refresh(self) -> None:
        delay = 0.05
        while True:
            try:
                await self._cluster.nodes_manager.initialize()
                return
            except Exception as exc:  # the nodes disagree or do not answer while the cluster converges
                logger.info("refreshing the slot map of Redis at %s failed: %s; retrying", self._where, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_REFRESH_DELAY)

    def _rehome(self) -> None:
        moves: dict[str, list[bytes]] = {}
        for channel, name in list(self._home.items()):
            try:
                target, _, _ = self._node_name(channel)
            except UNAVAILABLE:
                continue  # no node serves it now: its own hub keeps trying
            if target != name or channel in self._moved:
                moves.setdefault(name, []).append(channel)
        self._moved.clear()
        for name, channels in moves.items():
            hub = self._hubs.get(name)
            if hub is None:
                continue
            for channel in channels:
                self._home.pop(channel, None)
            taken = hub.release(channels)
            for channel, subs in taken.items():
                self._transit.setdefault(channel, set()).update(subs)
            if taken:
                task = asyncio.create_task(self._resubscribe(taken), name="agora-redis-cluster-rehome")
                self._rehoming.add(task)
                task.add_done_callback(self._rehoming.discard)

    async def _resubscribe(self, taken: dict[bytes, set[Subscriber]]) -> None:
        for subs in taken.values():
            self.rehomed += 1
            for subscriber in subs:
                if subscriber.pending is not None:
                    subscriber.pending.clear()
                subscriber.mark_overflowed()
        results = await asyncio.gather(
            *(self._follow(channel, subscriber) for channel, subs in taken.items() for subscriber in subs),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                logger.warning("re-subscribing a live tail on Redis at %s failed: %s", self._where, result)

    async def _follow(self, channel: bytes, subscriber: Subscriber) -> None:
        # Once subscribed on the new node, the subscriber re-reads the log: nothing is lost.
        while True:
            if subscriber not in self._transit.get(channel, ()):
                return  # it left meanwhile
            try:
                await self.attach(channel, subscriber)
            except StoreUnavailableError:
                if self._state is _State.CLOSED:
                    return
                self._stale.set()
                await asyncio.sleep(_MAX_REFRESH_DELAY)
                continue
            moving = self._transit.get(channel, set())
            if subscriber not in moving:
                self.detach(channel, subscriber)  # it left while subscribing
                return
            moving.discard(subscriber)
            if not moving:
                self._transit.pop(channel, None)
            subscriber.mark_overflowed()
            return

    async def _retire_idle(self) -> None:
        serving = {nodes[0].name for nodes in self._cluster.nodes_manager.slots_cache.values() if nodes}
        used = set(self._home.values())
        for name in [name for name in self._hubs if name not in used and name not in serving]:
            hub = self._hubs.pop(name)
            self._retired += hub.reconnections
            await hub.aclose()
            client = self._clients.pop(name, None)
            if client is not None:
                with contextlib.suppress(Exception):
                    await client.aclose()

    # -- lifecycle ----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop the supervisor and every node's hub, and close the node clients the hub made."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        tasks = [*self._rehoming, *([self._supervisor] if self._supervisor is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._supervisor = None
        for hub in self._hubs.values():
            await hub.aclose()
        for client in self._clients.values():
            with contextlib.suppress(Exception):
                await client.aclose()
        self._hubs.clear()
        self._clients.clear()
        self._home.clear()

    def __repr__(self) -> str:
        return f"<ClusterHub {self._where} {self._state.value} nodes={len(self._hubs)} channels={len(self._home)}>"
