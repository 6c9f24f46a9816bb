"""Following a thread's event log live, without gaps or duplicates, with bounded memory."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from ..events import RunEvent

__all__ = ["QUEUE_LIMIT", "Subscriber", "follow"]

QUEUE_LIMIT = 1024
"""Events a slow subscriber may have waiting before it falls back to reading the log."""


@dataclass(kw_only=True, eq=False, slots=True)
class Subscriber:
    """One live reader of a thread: the store pushes events into it without ever blocking."""

    pending: deque[RunEvent] = field(default_factory=deque)
    overflowed: bool = False
    """Set when ``pending`` filled up: the reader re-reads the log instead."""
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, event: RunEvent) -> None:
        """Offer an event; a full queue marks the subscriber overflowed instead of growing."""
        if not self.overflowed:
            if len(self.pending) >= QUEUE_LIMIT:
                self.pending.clear()
                self.overflowed = True
            else:
                self.pending.append(event)
        self.ready.set()


async def follow(
    subscriber: Subscriber,
    read_after: Callable[[int], Awaitable[list[RunEvent]]],
    after_seq: int,
) -> AsyncIterator[RunEvent]:
    """Yield the log after ``after_seq``, then live events from ``subscriber``.

    The subscriber must be registered before calling, so nothing written meanwhile is missed.
    Duplicates (an event both in the log and the queue) are dropped by ``seq``; a gap (events
    published out of order, or an overflow) is filled from the log.
    """
    last = after_seq
    for event in await read_after(last):
        yield event
        last = event.seq
    while True:
        await subscriber.ready.wait()
        subscriber.ready.clear()
        if subscriber.overflowed:
            subscriber.overflowed = False
            for event in await read_after(last):
                yield event
                last = event.seq
            continue
        while subscriber.pending:
            event = subscriber.pending.popleft()
            if event.seq <= last:
                continue
            if event.seq > last + 1:
                for missed in await read_after(last):
                    if missed.seq >= event.seq:
                        break
                    yield missed
                    last = missed.seq
            yield event
            last = event.seq
