"""``PubSubHub``: one pub/sub connection per ``RedisStore``, feeding every live tail of the process.

A process serves thousands of web sockets, so a live tail must not cost a Redis connection. The hub
holds one: it subscribes to a thread's channel when the thread gets its first local subscriber and
unsubscribes when the last one leaves (reference counting), and pushes each published batch of
events into the ``Subscriber`` queues of ``_tail``; ``follow`` then fills gaps from the log.

Two tasks, owned by the hub and stopped by ``aclose``: the reader (connects, resubscribes, reads
messages and acknowledgements) and the writer (each round, one SUBSCRIBE and one UNSUBSCRIBE for
the channels whose wanted state changed since the last round, so thousands of tails that start
together cost a handful of commands). A new
subscriber is registered only once Redis acknowledged the channel's subscription, so an event is
either published after that (and delivered) or already in the stream (and read from it).

When the connection drops, the reader reconnects with backoff and subscribes to every channel
again; once a channel's subscription is acknowledged, its subscribers are marked overflowed, so
each re-reads the log after the last event it saw: nothing written meanwhile is lost.

On a Redis Cluster (``sharded=True``) the hub serves one node with sharded pub/sub: SSUBSCRIBE and
SUNSUBSCRIBE, one command per hash slot (a command naming channels of two slots is refused with
CROSSSLOT, even on the node serving both). A channel whose slot this node no longer serves (a
MOVED answer to SSUBSCRIBE, or a ``sunsubscribe`` nobody asked for, which Redis 7 sends when the
slot leaves the node) is reported to ``on_moved`` and no longer subscribed here: the owner (the
``ClusterHub``) takes its subscribers away with ``release`` and subscribes them on the new node.
A connection that cannot be re-established twice in a row is reported to ``on_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.crc import key_slot
from redis.exceptions import AskError

from .._errors import StoreUnavailableError
from ..events import RunEvent
from ._redis_client import UNAVAILABLE
from ._tail import Subscriber

__all__ = ["PubSubHub"]

logger = logging.getLogger("gateway.stores.redis")

_SEND_FAILURES: tuple[type[BaseException], ...] = (StoreUnavailableError, *UNAVAILABLE)


class _State(enum.Enum):
    IDLE = "idle"
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    CLOSED = "closed"


def _retrieve(future: asyncio.Future[None]) -> None:
    # Nobody may be left awaiting a failed subscription: mark its exception as seen.
    if not future.cancelled():
        future.exception()


def _raise_if_cancelled() -> None:
    # On Python 3.11, asyncio.wait_for (which redis-py uses around socket writes) can swallow a
    # cancellation that arrives as the write completes; honour it here so aclose() never hangs.
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _as_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _by_slot(channels: Iterable[bytes]) -> list[list[bytes]]:
    groups: defaultdict[int, list[bytes]] = defaultdict(list)
    for channel in channels:
        groups[key_slot(channel)].append(channel)
    return list(groups.values())


class _SlotMovedError(StoreUnavailableError):
    """A channel's slot is served by another node of the Cluster: subscribe there."""


class _ShardedPubSub(PubSub):
    """A PubSub whose own resubscription after a silent reconnect sends one SSUBSCRIBE per slot."""

    async def _resubscribe_shard_channels(self) -> None:
        # The hook redis-py's ClusterPubSub overrides too: the default sends every channel in one
        # SSUBSCRIBE, which a node serving several slots refuses with CROSSSLOT.
        groups: defaultdict[int, list[bytes | str]] = defaultdict(list)
        for channel in self.shard_channels:
            groups[key_slot(self.encoder.encode(channel))].append(channel)
        for group in groups.values():
            await self.ssubscribe(*group)


class PubSubHub:
    """Routes a Redis pub/sub connection's messages to local subscribers, per channel."""

    def __init__(
        self,
        client: Redis,
        *,
        where: str,
        parse: Callable[[bytes | str], list[RunEvent]],
        heartbeat: float = 15.0,
        subscribe_timeout: float = 5.0,
        max_backoff: float = 1.0,
        sharded: bool = False,
        on_moved: Callable[[list[bytes]], None] | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        """Prepare a hub; it connects with its first subscriber.

        Args:
            client: The store's client; the hub takes one connection from its pool.
            where: The redacted URL, for errors and logs.
            parse: Turns a published payload into events.
            heartbeat: Seconds of silence after which the hub pings Redis; no answer within as
                long again means the connection is dead.
            subscribe_timeout: Seconds a new subscription waits for the connection.
            max_backoff: The longest pause between reconnection attempts.
            sharded: Use sharded pub/sub (SSUBSCRIBE), for one node of a Redis Cluster.
            on_moved: Called with the channels whose slot left this node (sharded only); they
                stay registered, unsubscribed, until ``release`` takes them.
            on_lost: Called each time the connection could not be re-established, from the
                second failed attempt in a row on.
        """
        self._client = client
        self._where = where
        self._parse = parse
        self._heartbeat = heartbeat
        self._subscribe_timeout = subscribe_timeout
        self._max_backoff = max_backoff
        self._sharded = sharded
        self._on_moved = on_moved
        self._on_lost = on_lost
        self._moved: set[bytes] = set()
        """Channels reported to ``on_moved``: registered here, subscribed nowhere, until released."""
        self._unsubscribing: dict[bytes, int] = {}
        """SUNSUBSCRIBEs sent per channel and not yet acknowledged (to tell Redis's own apart)."""
        self._state = _State.IDLE
        self._subs: dict[bytes, set[Subscriber]] = {}
        self._live: dict[bytes, asyncio.Future[None]] = {}
        """Channels whose subscription is not acknowledged yet: resolved by the ack."""
        self._outstanding: dict[bytes, int] = {}
        """SUBSCRIBEs sent per channel and not yet acknowledged."""
        self._resync: set[bytes] = set()
        """Channels subscribed again after a reconnection: their subscribers re-read the log."""
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        """Channels whose subscription should change; the writer sends what is wanted when it runs."""
        self._up = asyncio.Event()
        self._wake = asyncio.Event()
        self._send_lock = asyncio.Lock()
        self._pubsub: PubSub | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.reconnections = 0
        """How many times the connection was re-established (for tests and metrics)."""

    @property
    def connected(self) -> bool:
        """Whether the pub/sub connection is up."""
        return self._state is _State.UP

    def subscribers(self, channel: bytes) -> int:
        """How many local subscribers follow ``channel``."""
        return len(self._subs.get(channel, ()))

    # -- subscribers --------------------------------------------------------------------------------

    async def attach(self, channel: bytes, subscriber: Subscriber) -> None:
        """Register ``subscriber``; returns once Redis delivers the channel's messages to us.

        Raises:
            StoreUnavailableError: Redis could not be reached to subscribe.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot subscribe on a closed RedisStore")
        self._start()
        subs = self._subs.setdefault(channel, set())
        if not subs:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)
            self._live[channel] = future
            self._queue.put_nowait(channel)
        subs.add(subscriber)
        pending = self._live.get(channel)
        if pending is None:
            return
        if self._state is not _State.UP:
            self._wake.set()
        try:
            await asyncio.shield(pending)
        except BaseException:
            self.detach(channel, subscriber)
            raise

    def detach(self, channel: bytes, subscriber: Subscriber) -> None:
        """Unregister ``subscriber``; the last one of a channel unsubscribes it."""
        subs = self._subs.get(channel)
        if subs is None or subscriber not in subs:
            return
        subs.discard(subscriber)
        if subs:
            return
        del self._subs[channel]
        pending = self._live.pop(channel, None)
        if pending is not None and not pending.done():
            pending.cancel()
        if channel in self._moved:
            self._moved.discard(channel)  # subscribed nowhere: nothing to unsubscribe
        elif self._state is not _State.CLOSED:
            self._queue.put_nowait(channel)

    def release(self, channels: Iterable[bytes]) -> dict[bytes, set[Subscriber]]:
        """Take ``channels`` and their subscribers away from this hub (to follow them elsewhere).

        A pending subscription fails with ``_SlotMovedError``; a channel still subscribed here is
        unsubscribed.
        """
        taken: dict[bytes, set[Subscriber]] = {}
        for channel in channels:
            subs = self._subs.pop(channel, None)
            if subs is None:
                continue
            taken[channel] = subs
            self._outstanding.pop(channel, None)
            self._resync.discard(channel)
            pending = self._live.pop(channel, None)
            if pending is not None and not pending.done():
                pending.set_exception(_SlotMovedError(f"{channel!r} is no longer served by Redis at {self._where}"))
            if channel in self._moved:
                self._moved.discard(channel)
            elif self._state is not _State.CLOSED:
                self._queue.put_nowait(channel)
        return taken

    @property
    def channels(self) -> list[bytes]:
        """The channels that have local subscribers here."""
        return list(self._subs)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._state is not _State.IDLE:
            return
        self._state = _State.CONNECTING
        self._tasks = [
            asyncio.create_task(self._read_loop(), name="agora-redis-hub-reader"),
            asyncio.create_task(self._write_loop(), name="agora-redis-hub-writer"),
        ]

    async def aclose(self) -> None:
        """Stop both tasks and close the connection; live subscribers stop receiving."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        for future in self._live.values():
            if not future.done():
                future.set_exception(RuntimeError("The RedisStore was closed while subscribing"))
        self._live.clear()

    # -- the reader ---------------------------------------------------------------------------------

    def _new_pubsub(self) -> PubSub:
        if self._sharded:
            return _ShardedPubSub(self._client.connection_pool, encoder=self._client.get_encoder())  # type: ignore[no-untyped-call]
        return self._client.pubsub()

    async def _subscribe(self, pubsub: PubSub, channels: list[bytes]) -> None:
        if not self._sharded:
            await pubsub.subscribe(*channels)
            return
        for group in _by_slot(channels):
            await pubsub.ssubscribe(*group)
            _raise_if_cancelled()

    async def _unsubscribe(self, pubsub: PubSub, channels: list[bytes]) -> None:
        if not self._sharded:
            await pubsub.unsubscribe(*channels)
            return
        for group in _by_slot(channels):
            for channel in group:
                self._unsubscribing[channel] = self._unsubscribing.get(channel, 0) + 1
            await pubsub.sunsubscribe(*group)
            _raise_if_cancelled()

    async def _read_loop(self) -> None:
        delay = 0.02
        failures = 0
        while True:
            pubsub = self._new_pubsub()
            try:
                await self._connect(pubsub)
                delay = 0.02
                failures = 0
                await self._listen(pubsub)
            except UNAVAILABLE as exc:
                failures += 1
                logger.warning("pub/sub connection to Redis at %s lost: %s; reconnecting", self._where, exc)
            except Exception:
                failures += 1
                logger.exception("pub/sub reader failed; reconnecting")
            finally:
                await self._disconnect(pubsub)
            if failures >= 2 and self._on_lost is not None:
                self._on_lost()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            delay = min(delay * 2, self._max_backoff)

    async def _connect(self, pubsub: PubSub) -> None:
        async with self._send_lock:
            await pubsub.connect()  # type: ignore[no-untyped-call]
            _raise_if_cancelled()
            channels = [channel for channel in self._subs if channel not in self._moved]
            if channels:
                if self._state is _State.DOWN:
                    self.reconnections += 1
                    self._resync.update(channels)
                for channel in channels:
                    self._outstanding[channel] = self._outstanding.get(channel, 0) + 1
                await self._subscribe(pubsub, channels)
                _raise_if_cancelled()
            elif self._state is _State.DOWN:
                self.reconnections += 1
            self._pubsub = pubsub
            self._state = _State.UP
            self._up.set()

    async def _disconnect(self, pubsub: PubSub) -> None:
        if self._state is not _State.CLOSED:
            self._state = _State.DOWN
        self._up.clear()
        self._pubsub = None
        self._outstanding.clear()
        self._unsubscribing.clear()
        failure = StoreUnavailableError(f"Redis at {self._where} is unavailable: the pub/sub connection dropped")
        for channel, future in list(self._live.items()):
            if not future.done():
                future.set_exception(failure)
            del self._live[channel]
        with contextlib.suppress(Exception):
            await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _listen(self, pubsub: PubSub) -> None:
        pinged = False
        while True:
            try:
                message = await pubsub.get_message(timeout=self._heartbeat)
            except AskError as exc:  # also MovedError: the answer to an SSUBSCRIBE
                if not self._sharded:
                    raise
                self._slot_moved(pubsub, exc.slot_id)
                continue
            _raise_if_cancelled()
            if message is None:
                if pinged:
                    raise TimeoutError(f"no answer from Redis within {2 * self._heartbeat:g} s")
                async with self._send_lock:
                    await pubsub.ping()
                _raise_if_cancelled()
                pinged = True
                continue
            pinged = False
            kind = message["type"]
            if kind in ("message", "smessage"):
                self._deliver(_as_bytes(message["channel"]), message["data"])
            elif kind in ("subscribe", "ssubscribe"):
                self._acknowledged(_as_bytes(message["channel"]))
            elif kind == "sunsubscribe":
                self._unsubscribed(pubsub, _as_bytes(message["channel"]))

    def _unsubscribed(self, pubsub: PubSub, channel: bytes) -> None:
        sent = self._unsubscribing.get(channel, 0)
        if sent > 1:
            self._unsubscribing[channel] = sent - 1
        elif sent == 1:
            del self._unsubscribing[channel]
        elif channel in self._subs:  # nobody asked: the slot left this node
            self._lost_channels(pubsub, [channel])

    def _slot_moved(self, pubsub: PubSub, slot: int) -> None:
        for channel in [channel for channel in self._unsubscribing if key_slot(channel) == slot]:
            del self._unsubscribing[channel]
        channels = [c for c in self._subs if c not in self._moved and key_slot(c) == slot]
        self._lost_channels(pubsub, channels)

    def _lost_channels(self, pubsub: PubSub, channels: list[bytes]) -> None:
        if not channels:
            return
        failure = _SlotMovedError(f"Redis at {self._where} no longer serves the slot of {channels[0]!r}")
        for channel in channels:
            self._moved.add(channel)
            self._outstanding.pop(channel, None)
            self._resync.discard(channel)
            # redis-py would subscribe it here again after a reconnection of its own.
            pubsub.shard_channels.pop(channel, None)
            future = self._live.pop(channel, None)
            if future is not None and not future.done():
                future.set_exception(failure)
        if self._on_moved is not None:
            self._on_moved(channels)

    def _deliver(self, channel: bytes, data: bytes | str) -> None:
        subs = self._subs.get(channel)
        if not subs:
            return
        events = self._parse(data)
        for subscriber in list(subs):
            for event in events:
                subscriber.push(event)

    def _acknowledged(self, channel: bytes) -> None:
        sent = self._outstanding.get(channel, 0)
        if sent > 1:
            self._outstanding[channel] = sent - 1
            return
        self._outstanding.pop(channel, None)
        future = self._live.pop(channel, None)
        if future is not None and not future.done():
            future.set_result(None)
        # An ack we did not ask for means redis-py reconnected and resubscribed by itself.
        if sent == 0 or channel in self._resync:
            self._resync.discard(channel)
            for subscriber in self._subs.get(channel, ()):
                if subscriber.pending is not None:
                    subscriber.pending.clear()
                subscriber.mark_overflowed()

    # -- the writer ---------------------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            touched = [await self._queue.get()]
            while not self._queue.empty():
                touched.append(self._queue.get_nowait())
            # What counts is what is wanted now: a channel left and taken again needs no UNSUBSCRIBE.
            channels = list(dict.fromkeys(touched))
            subscribe = [channel for channel in channels if channel in self._subs and channel in self._live]
            unsubscribe = [channel for channel in channels if channel not in self._subs]
            try:
                await self._send(subscribe, unsubscribe)
                _raise_if_cancelled()
            except _SEND_FAILURES as exc:
                error = (
                    exc
                    if isinstance(exc, StoreUnavailableError)
                    else StoreUnavailableError(f"Redis at {self._where} is unavailable: {exc}")
                )
                for channel in subscribe:
                    future = self._live.pop(channel, None)
                    if future is not None and not future.done():
                        future.set_exception(error)

    async def _send(self, subscribe: list[bytes], unsubscribe: list[bytes]) -> None:
        if self._state is not _State.UP:
            if not subscribe:
                return  # a new connection subscribes only to the channels still wanted
            self._wake.set()
            try:
                async with asyncio.timeout(self._subscribe_timeout):
                    await self._up.wait()
            except TimeoutError:
                raise StoreUnavailableError(f"Redis at {self._where} is unavailable: cannot subscribe") from None
        async with self._send_lock:
            pubsub = self._pubsub
            if pubsub is None:
                raise StoreUnavailableError(f"Redis at {self._where} is unavailable: the pub/sub connection dropped")
            if unsubscribe:
                await self._unsubscribe(pubsub, unsubscribe)
            # A reconnection meanwhile may have subscribed (and acknowledged) some already.
            subscribe = [channel for channel in subscribe if channel in self._live]
            if subscribe:
                for channel in subscribe:
                    self._outstanding[channel] = self._outstanding.get(channel, 0) + 1
                await self._subscribe(pubsub, subscribe)

    def __repr__(self) -> str:
        return f"<PubSubHub {self._where} {self._state.value} channels={len(self._subs)}>"
