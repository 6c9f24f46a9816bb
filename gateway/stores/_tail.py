"""Following a thread's event log live, without gaps or duplicates, with bounded memory."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable

from ..events import RunEvent

__all__ = ["QUEUE_LIMIT", "READ_PAGE", "Followers", "Subscriber", "follow"]

QUEUE_LIMIT = 1024
"""Events a slow subscriber may have waiting before it falls back to reading the log."""

READ_PAGE = 500
"""Events a follower reads from the log at once: a long replay is read page by page, never whole."""

ReadAfter = Callable[[int, int], Awaitable[list[RunEvent]]]
"""Reads the log: ``(after_seq, limit)`` -> up to ``limit`` events with ``seq > after_seq``, in order."""


class Subscriber:
    """One live reader of a thread: the store pushes events into it without ever blocking.

    Kept small, since a process may follow thousands of idle threads: the queue exists only once
    something arrives, and a waiting reader holds a single future.
    """

    __slots__ = ("overflowed", "pending", "_waiter")

    def __init__(self) -> None:
        self.pending: deque[RunEvent] | None = None
        self.overflowed = False
        """Set when the queue filled up (or the feed was interrupted): the reader re-reads the log."""
        self._waiter: asyncio.Future[None] | None = None

    def push(self, event: RunEvent) -> None:
        """Offer an event; a full queue marks the subscriber overflowed instead of growing."""
        if not self.overflowed:
            if self.pending is None:
                self.pending = deque()
            if len(self.pending) >= QUEUE_LIMIT:
                self.pending.clear()
                self.overflowed = True
            else:
                self.pending.append(event)
        self.wake()

    def mark_overflowed(self) -> None:
        """The feed may have missed events: make the reader re-read the log."""
        self.overflowed = True
        self.wake()

    def wake(self) -> None:
        """Wake the reader if it waits."""
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Return once there is something to read (events, or an overflow)."""
        if self.pending or self.overflowed:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class Followers:
    """Who follows which thread in this process: what a store's feed of live events pushes into.

    The SQL stores keep one: SQLite pushes a transaction's events once it committed, PostgreSQL
    what its listening connection hears. A thread's set exists only while somebody follows it.
    """

    __slots__ = ("_threads",)

    def __init__(self) -> None:
        self._threads: dict[str, set[Subscriber]] = {}

    def add(self, thread_id: str, subscriber: Subscriber) -> None:
        """Start pushing the thread's events into ``subscriber``."""
        self._threads.setdefault(thread_id, set()).add(subscriber)

    def discard(self, thread_id: str, subscriber: Subscriber) -> None:
        """Stop pushing into ``subscriber`` (harmless when it was not there)."""
        followers = self._threads.get(thread_id)
        if followers is not None:
            followers.discard(subscriber)
            if not followers:
                del self._threads[thread_id]

    def count(self, thread_id: str) -> int:
        """How many follow the thread here."""
        return len(self._threads.get(thread_id, ()))

    def __contains__(self, thread_id: object) -> bool:
        return thread_id in self._threads

    def push(self, thread_id: str, events: list[RunEvent]) -> None:
        """Offer ``events`` (in ``seq`` order) to everyone following the thread."""
        for subscriber in self._threads.get(thread_id, ()):
            for event in events:
                subscriber.push(event)

    def resync(self, thread_id: str | None = None) -> None:
        """The feed may have missed events (of the thread, or of all when ``None``): re-read the log."""
        groups = self._threads.values() if thread_id is None else [self._threads.get(thread_id, set())]
        for followers in groups:
            for subscriber in followers:
                if subscriber.pending is not None:
                    subscriber.pending.clear()
                subscriber.mark_overflowed()


async def _log_after(read_after: ReadAfter, after_seq: int) -> AsyncIterator[RunEvent]:
    """The log after ``after_seq`` to its end, read ``READ_PAGE`` events at a time."""
    while True:
        page = await read_after(after_seq, READ_PAGE)
        for event in page:
            yield event
        if len(page) < READ_PAGE:
            return
        after_seq = page[-1].seq


async def follow(
    subscriber: Subscriber,
    read_after: ReadAfter,
    after_seq: int,
    *,
    attach: Callable[[], Awaitable[None]] | None = None,
    detach: Callable[[], None] | None = None,
) -> AsyncIterator[RunEvent]:
    """Yield the log after ``after_seq``, then live events from ``subscriber``.

    ``attach`` registers the subscriber with its feed before the log is read, so nothing written
    meanwhile is missed; ``detach`` unregisters it when the reader stops. (A store returns this
    generator itself: one frame per follower, which matters with thousands of idle sockets.)
    Duplicates (an event both in the log and the queue) are dropped by ``seq``; a gap (events
    published out of order, or an overflow) is filled from the log. The log is read in pages of
    ``READ_PAGE`` events, so replaying a long thread holds one page at a time, whatever its length.
    """
    if attach is not None:
        await attach()
    try:
        last = after_seq
        async for event in _log_after(read_after, last):
            yield event
            last = event.seq
        while True:
            await subscriber.wait()
            if subscriber.overflowed:
                subscriber.overflowed = False
                async for event in _log_after(read_after, last):
                    yield event
                    last = event.seq
                continue
            pending = subscriber.pending
            while pending:
                event = pending.popleft()
                if event.seq <= last:
                    continue
                while event.seq > last + 1:  # a gap: fill it from the log, a page at a time
                    page = await read_after(last, min(READ_PAGE, event.seq - last - 1))
                    for missed in page:
                        if missed.seq >= event.seq:
                            break
                        yield missed
                        last = missed.seq
                    if not page or page[-1].seq >= event.seq - 1:
                        break
                yield event
                last = event.seq
    finally:
        if detach is not None:
            detach()
