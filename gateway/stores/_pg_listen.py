"""``ListenHub``: one ``LISTEN`` connection per ``PostgresStore``, feeding every live tail of the process.

A process follows thousands of threads, so a live tail must not cost a connection. Every write
of events ends with ``pg_notify(channel, payload)`` in its transaction (PostgreSQL delivers it
at commit, in commit order) on the one channel of the store's schema; the hub listens on it and
pushes each payload's events into the ``Followers`` of this process. ``follow`` (``_tail``) then
drops duplicates and fills gaps from the log.

Payload: ``<length of the thread id>:<thread id><events as a JSON array>``. The thread id comes
first so a process drops notifications of threads nobody follows here without parsing them. A
batch too large for a notification (PostgreSQL takes 8000 bytes) is sent without its events:
its followers re-read the log.

The hub connects with its first follower, and a follower is registered only once the hub
listens: an event is either notified after that (and delivered) or already in the log (and read
from it). When the connection drops (or stops answering the heartbeat), the hub reconnects with
backoff; once it listens again, every follower is marked to re-read the log after the last event
it saw, so nothing written meanwhile is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from .._errors import StoreUnavailableError
from ..events import RunEvent
from ._sql_tx import EVENTS
from ._tail import Followers, Subscriber

__all__ = ["NOTIFY_LIMIT", "ListenHub", "notification"]

logger = logging.getLogger("gateway.stores.postgres")

NOTIFY_LIMIT = 7900
"""Bytes of a payload at most (PostgreSQL refuses 8000 and more)."""


def notification(thread_id: str, bodies: list[str]) -> str:
    """The payload announcing a thread's new events (without them when they do not fit)."""
    head = f"{len(thread_id)}:{thread_id}"
    payload = f"{head}[{','.join(bodies)}]"
    return payload if len(payload.encode()) <= NOTIFY_LIMIT else head


class _State(enum.Enum):
    IDLE = "idle"
    CONNECTING = "connecting"
    UP = "up"
    DOWN = "down"
    CLOSED = "closed"


class ListenHub:
    """Routes the notifications of one channel to the followers of this process, by thread."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        *,
        channel: str,
        followers: Followers,
        where: str,
        heartbeat: float = 15.0,
        subscribe_timeout: float = 5.0,
        max_backoff: float = 1.0,
    ) -> None:
        """Prepare a hub; it connects with its first follower.

        Args:
            connect: Opens a new asyncpg connection (not a pooled one: it stays listening).
            channel: The notification channel of the store's schema.
            followers: Where events go.
            where: How messages name the database.
            heartbeat: Seconds of silence after which the hub checks that the connection answers.
            subscribe_timeout: Seconds a new follower waits for the hub to listen.
            max_backoff: The longest pause between reconnection attempts.
        """
        self._connect = connect
        self._channel = channel
        self._followers = followers
        self._where = where
        self._heartbeat = heartbeat
        self._subscribe_timeout = subscribe_timeout
        self._max_backoff = max_backoff
        self._state = _State.IDLE
        self._up = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ever_up = False
        self.reconnections = 0
        """How many times the connection was established again after a loss (tests, metrics)."""

    @property
    def connected(self) -> bool:
        """Whether the hub listens now."""
        return self._state is _State.UP

    # -- followers ----------------------------------------------------------------------------------

    async def attach(self, thread_id: str, subscriber: Subscriber) -> None:
        """Register ``subscriber``; returns once the hub listens.

        Raises:
            StoreUnavailableError: The hub could not listen within ``subscribe_timeout``.
        """
        if self._state is _State.CLOSED:
            raise RuntimeError("Cannot subscribe on a closed PostgresStore")
        self._followers.add(thread_id, subscriber)
        if self._task is None:
            self._state = _State.CONNECTING
            self._task = asyncio.create_task(self._run(), name="agora-postgres-listener")
        if self._up.is_set():
            return
        self._wake.set()  # skip the backoff: somebody waits
        try:
            async with asyncio.timeout(self._subscribe_timeout):
                await self._up.wait()
        except TimeoutError:
            self._followers.discard(thread_id, subscriber)
            raise StoreUnavailableError(
                f"PostgreSQL at {self._where} is unavailable: cannot listen for live events"
            ) from None
        except BaseException:
            self._followers.discard(thread_id, subscriber)
            raise

    def detach(self, thread_id: str, subscriber: Subscriber) -> None:
        """Unregister ``subscriber``."""
        self._followers.discard(thread_id, subscriber)

    def _notified(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        size, _, rest = payload.partition(":")
        try:
            thread_id, events = rest[: int(size)], rest[int(size) :]
        except ValueError:
            logger.warning("ignored a malformed notification on %s", channel)
            return
        if thread_id not in self._followers:
            return
        if not events:
            self._followers.resync(thread_id)  # too large to be sent: read from the log
            return
        try:
            parsed: list[RunEvent] = EVENTS.validate_json(events)
        except ValidationError:
            logger.warning("a notification of thread %r did not parse: its followers re-read the log", thread_id)
            self._followers.resync(thread_id)
            return
        self._followers.push(thread_id, parsed)

    # -- the connection -----------------------------------------------------------------------------

    async def _run(self) -> None:
        delay = 0.02
        while True:
            connection: Any = None
            lost = asyncio.Event()
            try:
                connection = await self._connect()
                connection.add_termination_listener(lambda _, lost=lost: lost.set())
                await connection.add_listener(self._channel, self._notified)
                if self._ever_up:
                    self.reconnections += 1
                    logger.info("listening to PostgreSQL at %s again", self._where)
                self._ever_up = True
                self._state = _State.UP
                self._up.set()
                self._followers.resync()  # whatever was written while nobody listened: from the log
                delay = 0.02
                await self._watch(connection, lost)
            except Exception as exc:  # the connection failed: reconnect
                logger.warning("listening connection to PostgreSQL at %s lost: %s; reconnecting", self._where, exc)
            finally:
                self._up.clear()
                if self._state is not _State.CLOSED:
                    self._state = _State.DOWN
                if connection is not None:
                    connection.terminate()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            delay = min(delay * 2, self._max_backoff)

    async def _watch(self, connection: Any, lost: asyncio.Event) -> None:
        """Watch the connection: raises once it is lost or stops answering the heartbeat."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._heartbeat):
                    await lost.wait()
            if lost.is_set():
                raise ConnectionError("the listening connection closed")
            async with asyncio.timeout(self._heartbeat):
                await connection.fetchval("SELECT 1")

    async def aclose(self) -> None:
        """Stop listening and close the connection; followers stop receiving."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # aclose itself was cancelled
